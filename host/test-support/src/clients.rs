//! The official OpenAI and Anthropic client libraries, driven by
//! `tests/clients/model_client.py` in the interpreter `cargo xtask`
//! provisions: what a test of hane's Model Gateway calls it with.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The longest one client run may take.
const TIMEOUT: Duration = Duration::from_secs(600);

/// Runs the client script with `spec` (its modes and fields are in the
/// script's docstring) and returns the JSON object it printed.
///
/// # Errors
///
/// The interpreter or its packages are missing, the script failed (its
/// stderr is in the error) or printed something that is not JSON.
pub async fn model_client(spec: &Value) -> Result<Value> {
    let python = crate::python::require("openai, anthropic", "the Model Gateway's client tests")?;
    let script = crate::repository().join("tests/clients/model_client.py");
    let mut command = tokio::process::Command::new(&python);
    command
        .arg(&script)
        .arg(spec.to_string())
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null());
    let output = tokio::time::timeout(TIMEOUT, command.output())
        .await
        .with_context(|| format!("{} did not end within {TIMEOUT:?}", script.display()))?
        .with_context(|| format!("cannot run {}", python.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!(
            "{} failed ({}) for {spec}:\n{stderr}",
            script.display(),
            output.status
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .with_context(|| format!("the client printed no JSON for {spec}:\n{stdout}\n{stderr}"))
}
