//! What the CLI tests share to read the `hane` binary's output.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

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

/// `hane serve` on a free loopback port, and its address.
pub fn serve(store: &Path) -> (Child, String) {
    serve_with(store, &[])
}

/// [`serve`] with `env` set.
pub fn serve_with(store: &Path, env: &[(&str, &str)]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store"])
        .arg(store)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hane serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("hane serve said where it listens")
            .unwrap();
        if let Some(addr) = line.strip_prefix("listening on http://") {
            break addr.to_owned();
        }
    };
    // Whatever it says later goes nowhere.
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}

/// One HTTP/1.1 request; the status and the body as JSON.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let (_, text) = answer.split_once("\r\n\r\n").unwrap();
    (status, serde_json::from_str(text).unwrap_or(Value::Null))
}
