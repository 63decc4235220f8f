//! Every HTTP route that takes a body, called in process through the
//! server's router with bodies that may be anything: the management API
//! with an operator's key, the MCP endpoints and the Model Gateway with a
//! run's token. Whatever the body, the answer is never a `500` and an
//! error is in its route's error shape: the JSON envelope, a JSON-RPC
//! error, or the model format's error body.
//!
//! An input is a route's line (`METHOD PATH`, then `nohost` for a request
//! without a Host header) and the body after it. In the path, `{action}`,
//! `{conversation}` and `{case}` stand for real ids: a pending action, a
//! conversation, a workflow case waiting at a person's task.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, Uri, header};
use hane_coordinator::StartRun;
use hane_server::KeyRole;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::engine::{Shape, Target, fuzz};

/// A served runtime and the ids the routes' paths take.
struct Served {
    router: axum::Router,
    operator: String,
    token: String,
    action: String,
    conversation: String,
    case: String,
}

impl Served {
    async fn call(
        &self,
        method: &Method,
        path: &str,
        key: &str,
        host: bool,
        body: Vec<u8>,
    ) -> (StatusCode, Vec<u8>) {
        let mut request = Request::builder().method(method).uri(path);
        if host {
            request = request.header(header::HOST, "127.0.0.1:8080");
        }
        let request = request
            .header(header::AUTHORIZATION, format!("Bearer {key}"))
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(Body::from(body))
            .expect("a request");
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("infallible");
        let status = response.status();
        // An event stream may go on: what came within a while is enough.
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(3), async {
            while let Some(Ok(frame)) = body.frame().await {
                if let Some(data) = frame.data_ref() {
                    bytes.extend_from_slice(data);
                }
            }
        })
        .await;
        (status, bytes)
    }

    async fn json(&self, method: Method, path: &str, body: Value) -> Value {
        let (status, bytes) = self
            .call(
                &method,
                path,
                &self.operator,
                true,
                body.to_string().into_bytes(),
            )
            .await;
        assert!(
            status.is_success(),
            "{method} {path}: {status} {}",
            String::from_utf8_lossy(&bytes)
        );
        serde_json::from_slice(&bytes).expect("JSON")
    }
}

async fn served(dir: &std::path::Path) -> Served {
    let runtime = crate::activated(&dir.join("hane.db")).await;
    let operator = hane_server::create_key(runtime.registry(), "ops", KeyRole::Operator, None)
        .await
        .unwrap();
    let attached = runtime
        .start_attached(StartRun {
            agent: "vehicle-check-llm".into(),
            input: json!({"vehicle": "架空 300 あ 10-02"}),
            shadow: false,
        })
        .await
        .expect("an attached run");
    let token = attached.token.as_str().to_owned();
    let mut served = Served {
        router: hane_server::router(hane_coordinator::Services::new(runtime.clone())),
        operator,
        token,
        action: String::new(),
        conversation: String::new(),
        case: String::new(),
    };
    // An action waiting for a person.
    served
        .json(
            Method::POST,
            "/v1/agents/runs",
            json!({"agent": "inspection-reminder", "input": {"vehicle": "架空 300 あ 10-02", "to": "someone@elsewhere.example"}}),
        )
        .await;
    for _ in 0..300 {
        let listed = served
            .json(
                Method::GET,
                "/v1/agents/action-requests?state=pending",
                Value::Null,
            )
            .await;
        if let Some(id) = listed["actionRequests"][0]["id"].as_str() {
            served.action = id.to_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!served.action.is_empty(), "no pending action");
    let conversation = served
        .json(
            Method::POST,
            "/v1/agents/conversations",
            json!({"agent": "vehicle-check-llm"}),
        )
        .await;
    served.conversation = conversation["id"].as_str().expect("an id").to_owned();
    let case = served
        .json(
            Method::POST,
            "/v1/agents/workflows/lease-inquiry/cases",
            json!({"input": {"contract_no": "C-9999"}}),
        )
        .await;
    served.case = case["id"].as_str().expect("an id").to_owned();
    served
}

/// Each route with a body, and a body it takes.
fn seeds() -> Vec<Vec<u8>> {
    let (action, conversation, case) = ("{action}", "{conversation}", "{case}");
    let digest = format!("sha256:{}", "0".repeat(64));
    let chat = json!({"model": "fleet-assistant", "messages": [{"role": "user", "content": "Find 架空 300 あ 10-02"}], "tools": [
        {"type": "function", "function": {"name": "data.find_record", "parameters": {"type": "object"}}}]});
    let messages = json!({"model": "fleet-assistant", "max_tokens": 64, "messages": [{"role": "user", "content": "Find it"}]});
    let responses = json!({"model": "fleet-assistant", "input": "Find it"});
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "data.find_record", "arguments": {"collection": "vehicles", "match": {"registration": "架空 300 あ 10-02"}}}});
    let release_call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "documents.search", "arguments": {"query": "lease"}}});
    [
        ("POST /v1/agents/runs", json!({"agent": "vehicle-check-scripted", "input": {"vehicle": "架空 300 あ 10-02"}, "wait": true})),
        ("POST /v1/agents/runs", json!({"agent": "inspection-reminder", "input": {"vehicle": "架空 300 あ 10-02", "to": "a@fleet.example"}, "shadow": true})),
        (&format!("POST /v1/agents/action-requests/{action}/approve"), json!({"digest": digest, "reason": "ok"})),
        (&format!("POST /v1/agents/action-requests/{action}/reject"), json!({"digest": digest, "reason": null})),
        (&format!("POST /v1/agents/action-requests/{action}/reconcile"), json!({"state": "delivered", "note": "seen"})),
        ("POST /v1/agents/conversations", json!({"agent": "vehicle-check-llm", "memory": {"depot": "shinagawa"}})),
        (&format!("PUT /v1/agents/conversations/{conversation}/memory"), json!({"depot": "shinagawa"})),
        (&format!("POST /v1/agents/conversations/{conversation}/messages"), json!({"text": "Find 架空 300 あ 10-02", "wait": false})),
        ("POST /v1/agents/decider-overrides", json!({"tool": "communication.send_email", "reason": "desk away"})),
        ("POST /v1/agents/evals", json!({"suite": "lease-qa-eval"})),
        ("POST /v1/agents/requests", json!({"text": "Check van 架空 300 あ 10-02", "dryRun": true})),
        ("POST /v1/agents/workflows/lease-inquiry/cases", json!({"input": {"contract_no": "C-0001"}})),
        (&format!("POST /v1/agents/workflows/lease-inquiry/cases/{case}/tasks/desk"), json!({"result": {"contract_no": "C-0001"}})),
        ("POST /v1/chat/completions", chat),
        ("POST /v1/messages", messages.clone()),
        ("POST /v1/messages/count_tokens", messages),
        ("POST /v1/responses", responses),
        ("POST /mcp", initialize.clone()),
        ("POST /mcp", list),
        ("POST /mcp", call),
        ("POST /mcp/release", initialize),
        ("POST /mcp/release", release_call),
    ]
    .into_iter()
    .map(|(line, body)| format!("{line}\n{body}").into_bytes())
    .collect()
}

/// Checks an answer's shape; its outcome.
fn judge(path: &str, status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    assert!(
        status != StatusCode::INTERNAL_SERVER_ERROR,
        "{path}: 500 {text}"
    );
    let kind = if path.starts_with("/mcp") {
        "mcp"
    } else if path.starts_with("/v1/agents") {
        "api"
    } else {
        "model"
    };
    if status.is_client_error() || status.is_server_error() {
        let value: Value = serde_json::from_slice(body)
            .unwrap_or_else(|e| panic!("{path}: a {status} whose body is not JSON ({e}): {text}"));
        let shaped = match kind {
            "api" => value["error"]["code"].is_string() && value["error"]["message"].is_string(),
            "mcp" => value["error"]["message"].is_string() || value["error"]["code"].is_string(),
            _ => value["error"].is_object() || value["error"].is_string(),
        };
        assert!(shaped, "{path}: a {status} not in its error shape: {text}");
        let code = value["error"]["code"].as_str().unwrap_or_default();
        // A route that is not there says so with the path it was given.
        if status == StatusCode::NOT_FOUND
            && code == "not_found"
            && value["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("no route"))
        {
            return format!("{kind} no route");
        }
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return format!("{kind} {status}");
        }
        let message = value["error"]["message"].as_str().unwrap_or_default();
        return format!("{kind} {status} {code} {message}");
    }
    format!("{kind} {status}")
}

#[test]
fn http_bodies() {
    let tokio = crate::engine::runtime("http_bodies");
    let dir = tempfile::tempdir().unwrap();
    let served = tokio.block_on(served(dir.path()));
    let target = Target {
        name: "http_bodies",
        seeds: seeds(),
        dictionary: ["?wait=true", "/../", "%00", "%2F", "{id}"]
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect(),
        shape: Shape::HeadedJson,
    };
    fuzz(target, |bytes| {
        let (line, body) = match bytes.iter().position(|&b| b == b'\n') {
            Some(at) => (&bytes[..at], &bytes[at + 1..]),
            None => (bytes, &[][..]),
        };
        // The ids of this run's served runtime in place of their names.
        let line = String::from_utf8_lossy(line)
            .replace("{action}", &served.action)
            .replace("{conversation}", &served.conversation)
            .replace("{case}", &served.case);
        let mut words = line.split(' ');
        let (Some(method), Some(path)) = (words.next(), words.next()) else {
            return "no route line".into();
        };
        // `nohost` after the path: a request without a Host header, as an
        // HTTP/1.0 client may send.
        let host = !words.any(|w| w == "nohost");
        let Ok(method) = Method::from_bytes(method.as_bytes()) else {
            return "no method".into();
        };
        let Ok(uri) = path.parse::<Uri>() else {
            return "no path".into();
        };
        let path = uri.path().to_owned();
        let key = if path.starts_with("/v1/agents") || path.starts_with("/mcp/release") {
            &served.operator
        } else {
            &served.token
        };
        let (status, answer) =
            tokio.block_on(served.call(&method, &uri.to_string(), key, host, body.to_vec()));
        judge(&path, status, &answer)
    });
}
