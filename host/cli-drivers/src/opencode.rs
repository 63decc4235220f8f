//! opencode (`opencode-ai`): `opencode run --format json` with a generated
//! configuration (`OPENCODE_CONFIG`). Its model is a provider `hane` of
//! the `@ai-sdk/openai-compatible` package, so its calls go to the Model
//! Gateway's `/v1/chat/completions`; its tools come from hane's MCP server
//! (`mcp.hane`, remote); `"permission": {"*": "deny", "hane_*": "allow"}`
//! removes every built-in tool, and the `OPENCODE_DISABLE_*` variables
//! stop what it would fetch or look for.

use std::ffi::OsString;
use std::path::Path;

use serde_json::{Value, json};

use crate::drive::{Launch, Setup, TOKEN_VAR};

/// Its configuration file, in the run's directory.
const CONFIG: &str = "opencode.json";

pub(super) fn launch(setup: &Setup<'_>, dir: &Path) -> std::io::Result<Launch> {
    let base = setup.base_url();
    let model = format!("hane/{}", setup.model);
    let token = format!("{{env:{TOKEN_VAR}}}");
    let config = json!({
        "model": model,
        "provider": {"hane": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "hane",
            "options": {"baseURL": format!("{base}/v1"), "apiKey": token},
            "models": {setup.model: {"limit": {
                "context": setup.context_window,
                "output": setup.max_output_tokens,
            }}},
        }},
        "permission": {"*": "deny", "hane_*": "allow"},
        "snapshot": false,
        "autoupdate": false,
        "share": "disabled",
        "agent": {"hane": {"mode": "primary", "prompt": setup.system, "model": model}},
        "default_agent": "hane",
        "mcp": {"hane": {
            "type": "remote",
            "url": format!("{base}/mcp"),
            "headers": {"Authorization": format!("Bearer {token}")},
            "oauth": false,
        }},
    });
    std::fs::write(dir.join(CONFIG), serde_json::to_vec_pretty(&config)?)?;
    // A fresh HOME makes it npm-install its plugin package here; an
    // existing directory stops that (it would fail offline anyway).
    std::fs::create_dir_all(dir.join(".config/opencode/node_modules"))?;
    let home = setup.run_dir();
    let mut env = vec![("OPENCODE_CONFIG".to_owned(), format!("{home}/{CONFIG}"))];
    for var in [
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_CLAUDE_CODE",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS",
        "OPENCODE_DISABLE_SHARE",
        "OPENCODE_DISABLE_PROJECT_CONFIG",
        "OPENCODE_PURE",
        "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER",
    ] {
        env.push((var.to_owned(), "1".to_owned()));
    }
    Ok(Launch {
        args: ["run", "--format", "json", "--title", "hane"]
            .into_iter()
            .map(OsString::from)
            .collect(),
        env,
    })
}

/// An `error` event, its message wherever opencode put it.
pub(super) fn error_of(event: &Value) -> Option<String> {
    if event["type"] != "error" {
        return None;
    }
    let error = &event["error"];
    [
        &error["data"]["message"],
        &error["message"],
        &event["message"],
    ]
    .into_iter()
    .find_map(|v| v.as_str().map(str::to_owned))
    .or_else(|| Some(error.to_string()))
}
