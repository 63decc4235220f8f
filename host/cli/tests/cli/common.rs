//! What the CLI tests share to read the `hane` binary's output.

use std::path::Path;
use std::process::{Child, Command, Output};

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

/// Runs `hane ARGS --store STORE` to its end, with the shared component
/// cache.
pub fn hane_on(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(args)
        .arg("--store")
        .arg(store)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .output()
        .expect("run hane")
}

/// A store in `dir` with `examples/` activated as release 1; its path.
pub fn activated_examples(dir: &Path) -> std::path::PathBuf {
    let store = dir.join("hane.db");
    ok(&hane_on(
        &store,
        &[
            "release",
            "activate",
            hane_test_support::examples().to_str().unwrap(),
        ],
    ));
    store
}

/// A new operator key named `ops` in `store`: the key itself.
pub fn operator_key(store: &Path) -> String {
    ok(&hane_on(
        store,
        &["keys", "create", "ops", "--role", "operator"],
    ))
    .trim()
    .to_owned()
}

/// `hane serve` on a free loopback port, and its address.
pub fn serve(store: &Path) -> (Child, String) {
    serve_with(store, &[])
}

/// [`serve`] with `env` set.
pub fn serve_with(store: &Path, env: &[(&str, &str)]) -> (Child, String) {
    hane_test_support::serve(Path::new(env!("CARGO_BIN_EXE_hane")), store, env)
}

pub use hane_test_support::request;
