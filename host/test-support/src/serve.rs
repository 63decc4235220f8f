//! `hane serve` as a process of its own, and plain HTTP/1.1 requests to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// Starts `hane` (the binary at `hane`) as `hane serve` on a free loopback
/// port over `store`, with the shared component cache and `env` set;
/// returns the process and its address once it listens.
///
/// # Panics
///
/// It cannot start, or ends before saying where it listens.
pub fn serve(hane: &Path, store: &Path, env: &[(&str, &str)]) -> (Child, String) {
    let mut child = Command::new(hane)
        .args(["serve", "--listen", "127.0.0.1:0", "--store"])
        .arg(store)
        .env("HANE_CACHE_DIR", crate::component_cache())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hane serve");
    let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("hane serve said where it listens")
            .expect("hane serve's stderr reads");
        if let Some(addr) = line.strip_prefix("listening on http://") {
            break addr.to_owned();
        }
    };
    // Whatever it says later goes nowhere.
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}

/// One HTTP/1.1 request to `addr` with `key` as its bearer; the status
/// and the body as JSON (`null` when it is not JSON).
///
/// # Panics
///
/// The connection fails or the answer is not HTTP.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).expect("connect to the server");
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let status = answer[9..12].parse().expect("an HTTP status");
    let (_, text) = answer.split_once("\r\n\r\n").expect("a head and a body");
    (status, serde_json::from_str(text).unwrap_or(Value::Null))
}
