//! The llama.cpp test server: it comes up, wants its key, and gives a valid
//! tool call when one is forced. Plain HTTP/1.1 by hand, so that the check
//! needs no client library.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hane_test_support::LlamaServer;
use serde_json::{Value, json};

/// An answer: its status and its body.
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// Sends one request (`Connection: close`) and reads the answer to its end.
fn request(
    server: &LlamaServer,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<&Value>,
) -> Answer {
    let address = server.base_url().trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    if let Some(key) = key {
        head.push_str(&format!("Authorization: Bearer {key}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write");
    stream.write_all(body.as_bytes()).expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let raw = String::from_utf8(raw).expect("UTF-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let chunked = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Answer { status, body }
}

/// The body of a `Transfer-Encoding: chunked` answer.
fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").expect("a chunk size");
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16)
            .expect("a hex chunk size");
        if size == 0 {
            return body;
        }
        body.push_str(&after[..size]);
        rest = after[size..]
            .strip_prefix("\r\n")
            .expect("CRLF after a chunk");
    }
}

#[test]
fn the_shared_server_answers_health_wants_its_key_and_forces_a_tool_call() {
    let server = LlamaServer::shared();
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    assert!(!server.base_url().ends_with('/'));
    assert_eq!(server.model(), "smollm2");
    assert!(server.api_key().len() >= 16);

    let health = request(server, "GET", "/health", None, None);
    assert_eq!(health.status, 200, "{}", health.body);

    let anonymous = request(server, "GET", "/v1/models", None, None);
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let wrong = request(server, "GET", "/v1/models", Some("not-the-key"), None);
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    let models = request(server, "GET", "/v1/models", Some(server.api_key()), None);
    assert_eq!(models.status, 200, "{}", models.body);
    assert_eq!(models.json()["data"][0]["id"], server.model());

    let completion = request(
        server,
        "POST",
        "/v1/chat/completions",
        Some(server.api_key()),
        Some(&json!({
            "model": server.model(),
            "temperature": 0,
            "max_tokens": 64,
            "tools": [{
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "The current weather in a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }],
            "tool_choice": "required",
            "parallel_tool_calls": false,
            "stop": ["</tool_call>"],
            "messages": [
                {"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": "<tool_call>\n"},
            ],
        })),
    );
    assert_eq!(
        completion.status,
        200,
        "{}\nthe server's log:\n{}",
        completion.body,
        server.log()
    );
    let completion = completion.json();
    let choice = &completion["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{completion:#}");
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no tool calls: {completion:#}"));
    assert!(!calls.is_empty(), "{completion:#}");
    for call in calls {
        assert_eq!(call["type"], "function", "{completion:#}");
        assert_eq!(call["function"]["name"], "get_weather", "{completion:#}");
        let arguments = call["function"]["arguments"]
            .as_str()
            .unwrap_or_else(|| panic!("arguments not a string: {completion:#}"));
        let arguments: Value = serde_json::from_str(arguments)
            .unwrap_or_else(|e| panic!("arguments not JSON ({e}): {completion:#}"));
        assert!(arguments.is_object(), "{completion:#}");
    }
    assert!(completion["usage"]["completion_tokens"].as_u64() > Some(0));
}
