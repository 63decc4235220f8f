//! `hane serve` as a process of its own, and plain HTTP/1.1 requests to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

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
/// The connection fails, no answer comes within five minutes, or the
/// answer is not HTTP.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    try_request(addr, method, path, key, body, Duration::from_secs(300))
        .unwrap_or_else(|e| panic!("{method} {path} to {addr}: {e}"))
}

/// As [`request`], on its own connection, but an error rather than a
/// panic when the server is not there, closes the connection, or sends
/// nothing for `timeout`. A chunked body is put together; a Server-Sent
/// Events body (an MCP answer may be one) gives the JSON of its first
/// `data:` line that is JSON.
///
/// # Errors
///
/// What failed: connecting, sending, reading, or an answer that is not
/// HTTP.
pub fn try_request(
    addr: &str,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<(u16, Value), String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("send: {e}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| format!("read: {e}"))?;
    let raw = String::from_utf8_lossy(&raw);
    let (head, rest) = raw.split_once("\r\n\r\n").ok_or("no head")?;
    let status = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or("no HTTP status")?;
    let text = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    let body = serde_json::from_str(&text).unwrap_or_else(|_| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .find_map(|d| serde_json::from_str(d).ok())
            .unwrap_or(Value::Null)
    });
    Ok((status, body))
}

/// A chunked body's chunks, put together.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}
