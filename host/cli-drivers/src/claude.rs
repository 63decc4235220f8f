//! Claude Code (`@anthropic-ai/claude-code`): `claude -p` with the
//! stream-json output. Its model calls go to the Model Gateway's
//! `/v1/messages` (`ANTHROPIC_BASE_URL`, the run's token as
//! `x-api-key`); `--tools ""` removes every built-in tool, `--strict-mcp-config`
//! leaves hane's MCP server as its only one, and `--allowedTools mcp__hane`
//! lets it call that server's tools without asking;
//! `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` stops every other lookup.

use std::ffi::OsString;
use std::path::Path;

use serde_json::{Value, json};

use crate::drive::{Launch, Setup, TOKEN_VAR};

pub(super) fn launch(setup: &Setup<'_>, _dir: &Path) -> std::io::Result<Launch> {
    let base = setup.base_url();
    // The token stays in the environment: the configuration names it.
    let mcp = json!({"mcpServers": {"hane": {
        "type": "http",
        "url": format!("{base}/mcp"),
        "headers": {"Authorization": format!("Bearer ${{{TOKEN_VAR}}}")},
    }}});
    let args: Vec<OsString> = [
        "-p",
        "--bare",
        "--output-format",
        "stream-json",
        "--verbose",
        "--no-session-persistence",
        "--strict-mcp-config",
        "--mcp-config",
        &mcp.to_string(),
        "--tools",
        "",
        "--allowedTools",
        "mcp__hane",
        "--system-prompt",
        setup.system,
        "--model",
        setup.model,
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    Ok(Launch {
        args,
        env: vec![
            ("ANTHROPIC_BASE_URL".to_owned(), base),
            ("ANTHROPIC_MODEL".to_owned(), setup.model.to_owned()),
            (
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_owned(),
                "1".to_owned(),
            ),
            ("DISABLE_AUTOUPDATER".to_owned(), "1".to_owned()),
            (
                "CLAUDE_CODE_MAX_OUTPUT_TOKENS".to_owned(),
                setup.max_output_tokens.to_string(),
            ),
            ("ANTHROPIC_API_KEY".to_owned(), setup.token.to_owned()),
        ],
    })
}

/// A `result` event with `is_error`, or a `system/init` event whose hane
/// MCP server did not connect.
pub(super) fn error_of(event: &Value) -> Option<String> {
    match (event["type"].as_str()?, event["subtype"].as_str()) {
        ("result", _) if event["is_error"] == true => Some(
            event["result"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| event["errors"].to_string()),
        ),
        ("system", Some("init")) => event["mcp_servers"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == "hane" && s["status"] != "connected")
            .map(|s| format!("hane's MCP server is {} for it", s["status"])),
        _ => None,
    }
}
