//! `hane mcp`: hane's MCP server over stdio, for clients that spawn their
//! servers. It relays each JSON-RPC message read from stdin (one per line)
//! to a `hane serve`'s Streamable HTTP endpoint and writes what comes back
//! to stdout, one message per line. The run's token comes from the
//! environment, never from the command line, where other users can read
//! it.
//!
//! Input that is not JSON, or a line over [`MAX_LINE_BYTES`], is answered
//! with a JSON-RPC error; a request the server refuses (a 401 for an
//! expired token) is answered with a JSON-RPC error for its id; nothing
//! read from stdin stops the relay. A `notifications/cancelled` stops
//! waiting for the request it names (whose call goes on in hane and ends
//! as it would have) and is relayed.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Args;
use hane_http::{Client, Request};
use http::header::{ACCEPT, AUTHORIZATION, HeaderName};
use http::{HeaderValue, StatusCode, Uri};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use crate::exit;

/// The longest line read from stdin, and the largest answer relayed, in
/// bytes: the server's own limit on a message.
pub const MAX_LINE_BYTES: usize = hane_server::MAX_MCP_MESSAGE_BYTES;

/// The environment variable with the run's token, for `/mcp`.
const RUN_TOKEN_VAR: &str = "HANE_RUN_TOKEN";

/// The environment variable with an operator's API key, for
/// `/mcp/release`.
const API_KEY_VAR: &str = "HANE_API_KEY";

#[derive(Args)]
pub struct McpArgs {
    /// The MCP endpoint of a running `hane serve`: `/mcp` serves the run
    /// whose token is in HANE_RUN_TOKEN; `/mcp/release` the active
    /// release's operations, for the operator key in HANE_API_KEY.
    #[arg(
        long,
        env = "HANE_MCP_URL",
        value_name = "URL",
        default_value = "http://127.0.0.1:8080/mcp"
    )]
    url: String,
}

pub(crate) fn main(args: McpArgs) -> ExitCode {
    let relay = match Relay::new(&args.url) {
        Ok(relay) => relay,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    match runtime.block_on(relay.run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", crate::terminal::terminal_text(&e.to_string()));
            ExitCode::from(exit::FAILURE)
        }
    }
}

/// Where messages go, with what credential, and what the server told us
/// to send back with each.
struct Relay {
    uri: Uri,
    /// Kept-alive connections to the server.
    client: Client,
    credential: HeaderValue,
    /// The protocol version `initialize` agreed, sent with every later
    /// request as `MCP-Protocol-Version`.
    protocol: Mutex<Option<HeaderValue>>,
    /// A session the server started, if it keeps them.
    session: Mutex<Option<HeaderValue>>,
    /// Requests waiting for their answer, by id, to stop on a cancel.
    waiting: Mutex<HashMap<String, tokio::task::AbortHandle>>,
    stdout: tokio::sync::Mutex<tokio::io::Stdout>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A JSON-RPC error for the request `id` (`null` when it is unknown).
fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INTERNAL_ERROR: i64 = -32603;
/// As the server answers a refused credential.
const UNAUTHORIZED: i64 = -32001;

/// What one read from stdin gave.
enum Line {
    Message(Vec<u8>),
    TooLong,
    End,
}

impl Relay {
    fn new(url: &str) -> Result<Arc<Self>, String> {
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!(
                "`{url}`: hane mcp speaks plain http to a hane serve on this machine or its network namespace, such as http://127.0.0.1:8080/mcp"
            ));
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(format!("`{url}` has no host"));
        }
        let credential = std::env::var(RUN_TOKEN_VAR)
            .ok()
            .filter(|t| !t.is_empty())
            .or_else(|| std::env::var(API_KEY_VAR).ok().filter(|k| !k.is_empty()))
            .ok_or_else(|| {
                format!(
                    "set {RUN_TOKEN_VAR} to the run's token (or {API_KEY_VAR} to an operator's API key for /mcp/release)"
                )
            })?;
        let credential = HeaderValue::try_from(format!("Bearer {credential}"))
            .map_err(|_| format!("{RUN_TOKEN_VAR} holds characters no token has"))?;
        Ok(Arc::new(Self {
            uri,
            client: Client::new(),
            credential,
            protocol: Mutex::new(None),
            session: Mutex::new(None),
            waiting: Mutex::new(HashMap::new()),
            stdout: tokio::sync::Mutex::new(tokio::io::stdout()),
        }))
    }

    /// Relays stdin until it ends, then waits for the answers still due.
    async fn run(self: Arc<Self>) -> std::io::Result<()> {
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut tasks = tokio::task::JoinSet::new();
        loop {
            let bytes = match read_line(&mut stdin).await? {
                Line::End => break,
                Line::TooLong => {
                    self.write(&error(
                        Value::Null,
                        INVALID_REQUEST,
                        format!("a message is longer than {MAX_LINE_BYTES} bytes"),
                    ))
                    .await;
                    continue;
                }
                Line::Message(bytes) => bytes,
            };
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let message: Value = match serde_json::from_slice(&bytes) {
                Ok(message) => message,
                Err(e) => {
                    self.write(&error(
                        Value::Null,
                        PARSE_ERROR,
                        format!("a line is not JSON: {e}"),
                    ))
                    .await;
                    continue;
                }
            };
            if message["method"] == "notifications/cancelled" {
                let id = message["params"]["requestId"].to_string();
                if let Some(waiting) = lock(&self.waiting).remove(&id) {
                    waiting.abort();
                }
            }
            let relay = self.clone();
            let id = request_id(&message);
            let task = tasks.spawn(async move { relay.relay(message).await });
            if let Some(id) = id {
                lock(&self.waiting).insert(id.to_string(), task);
            }
            // Answered requests are done with.
            while tasks.try_join_next().is_some() {}
        }
        while tasks.join_next().await.is_some() {}
        Ok(())
    }

    /// Sends one message and writes what answers it.
    async fn relay(self: Arc<Self>, message: Value) {
        let id = request_id(&message);
        let initialize = message["method"] == "initialize";
        let outcome = self.post(&message).await;
        if let Some(id) = &id {
            lock(&self.waiting).remove(&id.to_string());
        }
        match outcome {
            Ok(answers) => {
                for answer in answers {
                    if initialize
                        && let Some(version) = answer["result"]["protocolVersion"].as_str()
                        && let Ok(version) = HeaderValue::from_str(version)
                    {
                        *lock(&self.protocol) = Some(version);
                    }
                    self.write(&answer).await;
                }
            }
            Err((code, why)) => match id {
                Some(id) => self.write(&error(id, code, why)).await,
                None => eprintln!(
                    "hane mcp: a notification was not delivered: {}",
                    crate::terminal::terminal_line(&why)
                ),
            },
        }
    }

    /// POSTs `message` and returns the messages that answer it (none for a
    /// notification), or the JSON-RPC error code and message to answer it
    /// with.
    async fn post(&self, message: &Value) -> Result<Vec<Value>, (i64, String)> {
        let id = request_id(message).unwrap_or(Value::Null);
        let failed = |why: String| (INTERNAL_ERROR, why);
        let mut request = Request::post_json(self.uri.clone(), message.to_string())
            .named("hane")
            .header(AUTHORIZATION, self.credential.clone())
            .header(
                ACCEPT,
                HeaderValue::from_static("application/json, text/event-stream"),
            );
        if let Some(version) = lock(&self.protocol).clone() {
            request = request.header(HeaderName::from_static("mcp-protocol-version"), version);
        }
        if let Some(session) = lock(&self.session).clone() {
            request = request.header(HeaderName::from_static("mcp-session-id"), session);
        }
        let mut reply = self
            .client
            .send(request)
            .await
            .map_err(|e| failed(e.to_string()))?;
        if let Some(session) = reply.headers.get("mcp-session-id") {
            *lock(&self.session) = Some(session.clone());
        }
        let sse = reply.is_event_stream();
        let mut answers = Vec::new();
        let mut events = hane_model::dialect::sse::SseParser::new();
        let mut bytes = Vec::new();
        while let Some(data) = reply.chunk().await.map_err(|e| failed(e.to_string()))? {
            if sse {
                let parsed = events.push(&data).map_err(|e| failed(e.to_string()))?;
                answers.extend(
                    parsed
                        .iter()
                        .filter_map(|e| serde_json::from_str(&e.data).ok()),
                );
            } else if bytes.len() + data.len() > MAX_LINE_BYTES {
                return Err(failed(format!(
                    "hane's answer is over {MAX_LINE_BYTES} bytes"
                )));
            } else {
                bytes.extend_from_slice(&data);
            }
        }
        if sse {
            answers.extend(
                events
                    .finish()
                    .and_then(|e| serde_json::from_str(&e.data).ok()),
            );
            return Ok(answers);
        }
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        match (reply.status, parsed) {
            (StatusCode::ACCEPTED | StatusCode::NO_CONTENT, _) => Ok(Vec::new()),
            (status, Some(answer)) if status.is_success() => Ok(vec![answer]),
            // The server's own JSON-RPC error, for this request's id.
            (_, Some(mut answer)) if answer.get("error").is_some() => {
                answer["id"] = id;
                Ok(vec![answer])
            }
            (status, _) => {
                let code = if status == StatusCode::UNAUTHORIZED {
                    UNAUTHORIZED
                } else {
                    INTERNAL_ERROR
                };
                Err((
                    code,
                    format!(
                        "hane answered {status}: {}",
                        String::from_utf8_lossy(&bytes).trim()
                    ),
                ))
            }
        }
    }

    /// Writes one message as a line; a closed stdout ends nothing here,
    /// stdin's end does.
    async fn write(&self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let mut stdout = self.stdout.lock().await;
        if stdout.write_all(line.as_bytes()).await.is_ok() {
            let _ = stdout.flush().await;
        }
    }
}

/// The id of a request (a message with a `method` and an `id`).
fn request_id(message: &Value) -> Option<Value> {
    if message.get("method").is_some() {
        message.get("id").filter(|id| !id.is_null()).cloned()
    } else {
        None
    }
}

/// The next line of `input`, without its newline, read at most
/// [`MAX_LINE_BYTES`] at a time: a longer line is skipped to its end.
async fn read_line<R>(input: &mut R) -> std::io::Result<Line>
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Message(line),
            });
        }
        let (taken, ended) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        let piece = &available[..taken];
        let piece = piece.strip_suffix(b"\n").unwrap_or(piece);
        if !too_long {
            if line.len() + piece.len() > MAX_LINE_BYTES {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(piece);
            }
        }
        input.consume(taken);
        if ended {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Message(line)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8]) -> Vec<String> {
        let mut reader = BufReader::new(input);
        let mut out = Vec::new();
        loop {
            match read_line(&mut reader).await.unwrap() {
                Line::End => return out,
                Line::TooLong => out.push("<too long>".to_owned()),
                Line::Message(bytes) => out.push(String::from_utf8(bytes).unwrap()),
            }
        }
    }

    #[tokio::test]
    async fn lines_are_read_whole_and_long_ones_skipped() {
        assert_eq!(lines(b"a\nbc\n\nd").await, ["a", "bc", "", "d"]);
        let mut long = vec![b'x'; MAX_LINE_BYTES + 1];
        long.extend_from_slice(b"\nnext\n");
        assert_eq!(lines(&long).await, ["<too long>", "next"]);
    }

    #[test]
    fn only_requests_have_ids_to_answer() {
        assert_eq!(
            request_id(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})),
            Some(json!(3))
        );
        assert_eq!(
            request_id(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            None
        );
        assert_eq!(
            request_id(&json!({"jsonrpc": "2.0", "id": 3, "result": {}})),
            None
        );
    }
}
