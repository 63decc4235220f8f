//! What the CLI tests share to read the `hane` binary's output.

use std::process::Output;

use serde_json::Value;

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts `output` succeeded and returns its stdout.
pub fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// Asserts `output` exited with `code` and returns its stderr.
pub fn failed(output: &Output, code: i32) -> String {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stderr)
}

/// Asserts `output` succeeded and returns its stdout as JSON.
pub fn json(output: &Output) -> Value {
    let out = ok(output);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}
