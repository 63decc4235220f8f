//! Codex CLI (`@openai/codex`): `codex exec` with a generated
//! `$CODEX_HOME/config.toml` under `--strict-config`. Its model calls go
//! to the Model Gateway's `/v1/responses` (the only wire API it speaks),
//! its tools come from hane's MCP server alone (`required`, so a refused
//! token fails it rather than dropping the tools, and approved, so a call
//! is not refused by its own approval step); its shell, patch, image,
//! plugin, app, hook, goal and web tools are off, and so is everything
//! that reaches out (update checks, analytics, plugin repositories).
//! Four tools of its own remain whatever the configuration (MCP resource
//! listing and reading, `request_user_input`); none reaches beyond hane.

use std::ffi::OsString;
use std::path::Path;

use serde_json::Value;

use crate::drive::{Launch, Setup, TOKEN_VAR};

/// The file its base prompt is replaced with.
const INSTRUCTIONS: &str = "instructions.md";

/// A TOML string.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string is JSON")
}

pub(super) fn launch(setup: &Setup<'_>, dir: &Path) -> std::io::Result<Launch> {
    let home = setup.run_dir();
    std::fs::write(dir.join(INSTRUCTIONS), setup.system)?;
    let base = setup.base_url();
    let config = format!(
        r#"model = {model}
model_provider = "hane"
model_context_window = {window}
approval_policy = "never"
sandbox_mode = "read-only"
web_search = "disabled"
check_for_update_on_startup = false
project_doc_max_bytes = 0
include_environment_context = false
model_instructions_file = {instructions}

[analytics]
enabled = false

[features]
shell_tool = false
unified_exec = false
view_image = false
plugins = false
apps = false
remote_plugin = false
shell_snapshot = false
hooks = false
multi_agent = false
goals = false
unbounded_connection_retries = false

[model_providers.hane]
name = "hane"
base_url = {base_url}
wire_api = "responses"
env_key = "{TOKEN_VAR}"

[mcp_servers.hane]
url = {mcp_url}
bearer_token_env_var = "{TOKEN_VAR}"
required = true
default_tools_approval_mode = "approve"
"#,
        model = quoted(setup.model),
        window = setup.context_window,
        instructions = quoted(&format!("{home}/{INSTRUCTIONS}")),
        base_url = quoted(&format!("{base}/v1")),
        mcp_url = quoted(&format!("{base}/mcp")),
    );
    std::fs::write(dir.join("config.toml"), config)?;
    Ok(Launch {
        args: [
            "exec",
            "--strict-config",
            "--json",
            "--skip-git-repo-check",
            "--ephemeral",
            "-",
        ]
        .into_iter()
        .map(OsString::from)
        .collect(),
        env: vec![("CODEX_HOME".to_owned(), home.to_owned())],
    })
}

/// `{"type":"error","message":…}` and `{"type":"turn.failed","error":{"message":…}}`;
/// an `error` item inside `item.completed` is a warning (such as unknown
/// model metadata), not a failure.
pub(super) fn error_of(event: &Value) -> Option<String> {
    match event["type"].as_str()? {
        "error" => event["message"].as_str().map(str::to_owned),
        "turn.failed" => event["error"]["message"].as_str().map(str::to_owned),
        _ => None,
    }
}
