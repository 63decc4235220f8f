//! The Model Gateway over HTTP, called by the official OpenAI and
//! Anthropic client libraries (`tests/clients/model_client.py`) with an
//! attached run's token: the three formats streamed and not, with tool
//! calls and results, on a recorded provider and on a real llama.cpp
//! server behind another format; refused tokens, a dropped stream, and
//! concurrent streams against the day's budget.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use hane_coordinator::{AgentRuntime, AttachedRun, ModelConfig, RunError};
use hane_core::{RunStatus, credential::Secret};
use hane_model::{Content, Message, ModelRequest, ModelResponse, Role, StopReason, Usage};
use hane_test_support::{LlamaServer, model_client};
use serde_json::{Value, json};

use crate::agents::release_with;
use crate::model::{llm_agent, recorded_provider, runtime_with, start};

const FORMATS: [&str; 3] = ["chat", "responses", "anthropic"];

/// `runtime` served on a loopback port, until the test ends.
async fn serve(runtime: &AgentRuntime) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let services = hane_coordinator::Services::new(runtime.clone());
    tokio::spawn(
        async move { hane_server::serve(listener, services, std::future::pending()).await },
    );
    addr
}

fn base_url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// The two turns the client script's conversation has, as a recording
/// pins them, answered with a call of `find_record` and then a text.
fn client_conversation() -> Vec<hane_model::Turn> {
    let tool = hane_model::ToolSpec {
        name: "find_record".into(),
        description: String::new(),
        input_schema: json!({"type": "object"}),
    };
    let call = Content::ToolCall {
        id: "call_1".into(),
        name: "find_record".into(),
        input: json!({"vehicle": "ABC-123"}),
    };
    let answer = |content: Vec<Content>, stop, input_tokens, output_tokens| ModelResponse {
        content,
        stop_reason: stop,
        usage: Usage {
            input_tokens,
            output_tokens,
            cached_tokens: 0,
        },
        model: "fleet-assistant".into(),
        request_id: None,
    };
    let mut first = ModelRequest::new("fleet-assistant");
    first.messages = vec![Message::user("Find vehicle ABC-123.")];
    first.tools = vec![tool.clone()];
    let mut second = first.clone();
    second.messages.push(Message {
        role: Role::Assistant,
        content: vec![call.clone()],
    });
    second.messages.push(Message {
        role: Role::User,
        content: vec![Content::ToolResult {
            call_id: "call_1".into(),
            content: String::new(),
            is_error: false,
        }],
    });
    vec![
        hane_model::Turn {
            request: hane_model::pin(&first),
            response: answer(vec![call], StopReason::ToolUse, 40, 12),
        },
        hane_model::Turn {
            request: hane_model::pin(&second),
            response: answer(
                vec![Content::text("ABC-123 is a Volvo V70.")],
                StopReason::EndTurn,
                70,
                9,
            ),
        },
    ]
}

/// A runtime whose `client` agent replays [`client_conversation`].
async fn recorded(dir: &Path, limits: &str, extra: &[(&str, &str)]) -> AgentRuntime {
    let mut files = vec![(
        "agent.yaml",
        llm_agent("client", &["data.find_record"], limits),
    )];
    files.extend(extra.iter().map(|(n, t)| (*n, (*t).to_owned())));
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let release = release_with(dir, &files);
    recorded_provider(&release, "replay", client_conversation());
    let runtime = runtime_with(dir, ModelConfig::new());
    runtime.activate(&release).await.unwrap();
    runtime
}

async fn attach(runtime: &AgentRuntime, agent: &str) -> AttachedRun {
    runtime
        .start_attached(start(agent, json!({"vehicle": "ABC-123"})))
        .await
        .unwrap()
}

fn spec(mode: &str, format: &str, stream: bool, addr: SocketAddr, tokens: &[&str]) -> Value {
    json!({
        "mode": mode,
        "format": format,
        "stream": stream,
        "base_url": base_url(addr),
        "model": "fleet-assistant",
        "tokens": tokens,
    })
}

/// Whether `events` has each of `expected` in that order.
fn in_order(events: &Value, expected: &[&str]) -> bool {
    let mut events = events.as_array().unwrap().iter();
    expected
        .iter()
        .all(|e| events.any(|seen| seen.as_str() == Some(e)))
}

/// The event types a streamed turn must show, in order, per format: those
/// the providers send and the coding CLIs accept.
fn expected_events(format: &str, call: bool) -> Vec<&'static str> {
    match (format, call) {
        ("chat", true) => vec!["role", "tool_calls", "finish", "usage"],
        ("chat", false) => vec!["role", "content", "finish", "usage"],
        ("responses", true) => vec![
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ],
        ("responses", false) => vec![
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ],
        (_, _) => vec![
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ],
    }
}

#[tokio::test]
async fn official_clients_call_a_recorded_model_in_each_format_streamed_and_not() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = recorded(dir.path(), "    maxModelTokens: 20000", &[]).await;
    let addr = serve(&runtime).await;
    let attached = attach(&runtime, "client").await;
    let token = attached.token.as_str();
    let mut calls = 0;
    for format in FORMATS {
        for stream in [false, true] {
            let out = model_client(&spec("conversation", format, stream, addr, &[token]))
                .await
                .unwrap();
            let turns = out["turns"].as_array().unwrap();
            assert_eq!(turns.len(), 2, "{format} stream={stream}: {out}");
            assert_eq!(
                turns[0]["calls"],
                json!([{"id": "call_1", "name": "find_record", "input": {"vehicle": "ABC-123"}}]),
                "{format} stream={stream}: {out}"
            );
            assert_eq!(turns[0]["usage"], json!({"input": 40, "output": 12}));
            assert_eq!(turns[1]["text"], "ABC-123 is a Volvo V70.", "{out}");
            assert_eq!(turns[1]["calls"], json!([]));
            assert_eq!(turns[1]["usage"], json!({"input": 70, "output": 9}));
            let stops = match format {
                "chat" => ["tool_calls", "stop"],
                "responses" => ["completed", "completed"],
                _ => ["tool_use", "end_turn"],
            };
            assert_eq!(turns[0]["stop"], stops[0], "{out}");
            assert_eq!(turns[1]["stop"], stops[1], "{out}");
            if stream {
                for (turn, call) in [(&turns[0], true), (&turns[1], false)] {
                    let expected = expected_events(format, call);
                    assert!(
                        in_order(&turn["events"], &expected),
                        "{format}: {} lacks {expected:?}",
                        turn["events"]
                    );
                }
            }
            calls += 2;
        }
    }
    // Every call went through the Model Gateway: counted and recorded as a
    // turn of the run, in order.
    let turns = runtime.llm_turns(&attached.run.id).await.unwrap();
    assert_eq!(turns.len(), calls);
    assert!(
        turns
            .iter()
            .enumerate()
            .all(|(i, t)| t.turn as usize == i + 1)
    );
    for turn in &turns {
        let context = turn.context.to_value().unwrap();
        assert!(context["served"].is_string(), "{context}");
    }
    // The client ends the run as any driver does.
    let result = runtime
        .call_tool(
            &attached.token,
            "submit_result",
            json!({"status": "found", "vehicle": "ABC-123"}),
        )
        .await
        .unwrap();
    assert!(
        matches!(result, hane_coordinator::ToolResult::Output(_)),
        "{result:?}"
    );
    let run = runtime.wait(&attached.run.id).await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    assert_eq!(run.tokens_used, 6 * (40 + 12 + 70 + 9));
    let budget = hane_coordinator::Budgets::new(&runtime)
        .report()
        .await
        .unwrap();
    assert_eq!(budget.usage.model_tokens_used, run.tokens_used);
}

#[tokio::test]
async fn a_wrong_expired_or_cancelled_runs_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = recorded(dir.path(), "    maxModelTokens: 20000", &[]).await;
    let addr = serve(&runtime).await;
    let attached = attach(&runtime, "client").await;
    let forged = format!("{}x", attached.token.as_str());
    let expired = runtime
        .gateway()
        .key()
        .issue_until(&attached.run.id, std::time::SystemTime::UNIX_EPOCH);
    for format in FORMATS {
        let tokens = ["not-a-token", forged.as_str(), expired.as_str()];
        let out = model_client(&spec("refused", format, false, addr, &tokens))
            .await
            .unwrap();
        for (token, out) in tokens.iter().zip(out["results"].as_array().unwrap()) {
            assert_eq!(out["status"], 401, "{format} {token}: {out}");
            assert_eq!(out["class"], "AuthenticationError", "{out}");
        }
    }
    runtime.cancel(&attached.run.id).await.unwrap();
    let run = runtime.wait(&attached.run.id).await.unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    for format in FORMATS {
        for stream in [false, true] {
            let out = model_client(&spec(
                "refused",
                format,
                stream,
                addr,
                &[attached.token.as_str()],
            ))
            .await
            .unwrap();
            assert_eq!(out["status"], 403, "{format}: {out}");
            assert!(
                out["message"].as_str().unwrap().contains(run.id.as_str()),
                "{out}"
            );
        }
    }
    assert!(runtime.llm_turns(&run.id).await.unwrap().is_empty());
}

/// A runtime on the shared llama.cpp server, with one agent per upstream
/// format: `via-chat`, `via-responses` and `via-anthropic`.
async fn on_llama(dir: &Path, limits: &str, extra: &[(&str, &str)]) -> AgentRuntime {
    let server = LlamaServer::shared();
    let mut files: Vec<(String, String)> = Vec::new();
    for (upstream, api) in [
        ("chat", "chat-completions"),
        ("responses", "responses"),
        ("anthropic", "anthropic-messages"),
    ] {
        let agent = llm_agent(&format!("via-{upstream}"), &["data.find_record"], limits).replace(
            "  driver: llm\n",
            &format!(
                "  driver: llm\n  model: llama-{upstream}/{}\n",
                server.model()
            ),
        );
        files.push((format!("agent-{upstream}.yaml"), agent));
        files.push((
            format!("provider-{upstream}.yaml"),
            format!(
                "apiVersion: platform/v1alpha1\nkind: ModelProvider\nmetadata:\n  name: llama-{upstream}\nspec:\n  api: {api}\n  baseUrl: {}/v1\n  credential: llama\n  stream: true\n  temperature: 0\n  models:\n    - {{ name: {}, contextWindow: 4096, maxOutputTokens: 512 }}\n",
                server.base_url(),
                server.model()
            ),
        ));
    }
    files.extend(
        extra
            .iter()
            .map(|(n, t)| ((*n).to_owned(), (*t).to_owned())),
    );
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let release = release_with(dir, &files);
    let mut model = ModelConfig::new();
    model.credential("llama", Secret::new(server.api_key()));
    let runtime = runtime_with(dir, model);
    runtime.activate(&release).await.unwrap();
    runtime
}

#[tokio::test]
async fn each_format_reaches_a_local_model_behind_another_with_tool_calls_intact() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = on_llama(
        dir.path(),
        "    maxModelTokens: 50000\n    maxSeconds: 600",
        &[],
    )
    .await;
    let addr = serve(&runtime).await;
    // Responses served by an Anthropic upstream, Anthropic by a Chat
    // Completions upstream, Chat Completions by a Responses upstream.
    for (format, upstream) in [
        ("responses", "anthropic"),
        ("anthropic", "chat"),
        ("chat", "responses"),
    ] {
        let attached = attach(&runtime, &format!("via-{upstream}")).await;
        let mut calls = 0;
        for stream in [false, true] {
            let mut spec = spec(
                "conversation",
                format,
                stream,
                addr,
                &[attached.token.as_str()],
            );
            spec["force_tool"] = json!(true);
            spec["model"] = json!(LlamaServer::shared().model());
            if upstream == "responses" {
                // The Responses API has no stop sequences: a request
                // with one is refused, naming it, before anything is
                // sent or counted.
                let mut refused = spec.clone();
                refused["mode"] = json!("refused");
                let out = model_client(&refused).await.unwrap();
                assert_eq!(out["status"], 400, "{out}");
                assert!(out["message"].as_str().unwrap().contains("`stop`"), "{out}");
                spec["stop"] = json!(false);
            }
            let out = model_client(&spec).await.unwrap();
            let turns = out["turns"].as_array().unwrap();
            let what = format!("{format} via {upstream}, stream={stream}: {out}");
            let call = &turns[0]["calls"][0];
            assert_eq!(call["name"], "find_record", "{what}");
            assert!(
                call["input"].is_object() && call["input"].get("unparsed").is_none(),
                "{what}"
            );
            assert!(
                !call["id"].as_str().unwrap_or_default().is_empty(),
                "{what}"
            );
            // The follow-up, with the call and its result, completed.
            assert_eq!(turns.len(), 2, "{what}");
            for turn in turns {
                assert!(turn["usage"]["input"].as_u64().unwrap() > 0, "{what}");
                assert!(turn["usage"]["output"].as_u64().unwrap() > 0, "{what}");
            }
            calls += 2;
        }
        let turns = runtime.llm_turns(&attached.run.id).await.unwrap();
        assert_eq!(turns.len(), calls, "{format} via {upstream}");
        // The tool call reached the upstream in its own format and came
        // back with its id: the second turn's request carried it.
        let first: ModelResponse =
            serde_json::from_value(turns[0].response.to_value().unwrap()).unwrap();
        assert!(
            first
                .content
                .iter()
                .any(|c| matches!(c, Content::ToolCall { name, .. } if name == "find_record")),
            "{first:?}"
        );
        runtime.cancel(&attached.run.id).await.unwrap();
        let run = runtime.wait(&attached.run.id).await.unwrap();
        let counted: u64 = turns.iter().map(|t| t.input_tokens + t.output_tokens).sum();
        assert_eq!(run.tokens_used, counted, "{run:#?}");
    }
}

#[tokio::test]
async fn a_client_that_drops_a_stream_cancels_it_and_its_tokens_still_count() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = on_llama(
        dir.path(),
        "    maxModelTokens: 50000\n    maxSeconds: 600",
        &[],
    )
    .await;
    let addr = serve(&runtime).await;
    for format in FORMATS {
        let attached = attach(&runtime, "via-chat").await;
        let mut spec = spec("drop", format, true, addr, &[attached.token.as_str()]);
        spec["model"] = json!(LlamaServer::shared().model());
        // Long enough that the answer is still coming when the client
        // goes: a question whose answer runs to the cap (the vehicle
        // question alone may end in a few tokens, before the server sees
        // the client gone).
        spec["max_tokens"] = json!(400);
        spec["question"] = json!("Count from 1 to 500, one number per line, and nothing else.");
        let out = model_client(&spec).await.unwrap();
        assert!(out["events"].as_u64().unwrap() >= 1, "{out}");
        // The call ends once the server sees the client gone; its input
        // and what streamed are counted, and no turn is recorded.
        let mut used = 0;
        for _ in 0..100 {
            used = runtime
                .gateway()
                .model_tokens_used(&attached.run.id)
                .unwrap();
            if used > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(used > 0, "{format}: nothing counted");
        assert!(
            runtime
                .llm_turns(&attached.run.id)
                .await
                .unwrap()
                .is_empty(),
            "{format}"
        );
        runtime.cancel(&attached.run.id).await.unwrap();
        let run = runtime.wait(&attached.run.id).await.unwrap();
        assert_eq!(run.tokens_used, used, "{format}: {run:#?}");
        let budget = hane_coordinator::Budgets::new(&runtime)
            .report()
            .await
            .unwrap();
        assert!(budget.usage.model_tokens_used >= used);
    }
}

#[tokio::test]
async fn fifty_concurrent_streams_of_runs_never_spend_past_the_days_budget() {
    let dir = tempfile::tempdir().unwrap();
    let budget = "apiVersion: platform/v1alpha1\nkind: Budget\nmetadata:\n  name: tokens\nspec:\n  modelTokensPerDay: 1500\n";
    let runtime = on_llama(
        dir.path(),
        "    maxModelTokens: 500\n    maxSeconds: 600",
        &[("budget.yaml", budget)],
    )
    .await;
    let addr = serve(&runtime).await;
    // The day's budget covers three runs' reservations; the rest are
    // refused at start.
    let mut attached = Vec::new();
    for _ in 0..5 {
        match runtime
            .start_attached(start("via-chat", json!({"vehicle": "ABC-123"})))
            .await
        {
            Ok(run) => attached.push(run),
            Err(RunError::Budget(e)) => assert_eq!(e.limit, "modelTokensPerDay"),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(attached.len(), 3);
    let tokens: Vec<&str> = attached.iter().map(|a| a.token.as_str()).collect();
    let mut spec = spec("concurrent", "chat", true, addr, &tokens);
    spec["model"] = json!(LlamaServer::shared().model());
    spec["max_tokens"] = json!(48);
    spec["requests"] = json!(50);
    let out = model_client(&spec).await.unwrap();
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 50);
    let answered: Vec<&Value> = results.iter().filter(|r| r["used"].is_u64()).collect();
    let held = results.iter().filter(|r| r["status"] == 429).count();
    assert!(!answered.is_empty(), "{out}");
    assert_eq!(answered.len() + held, 50, "{out}");
    // The calls in flight held what their runs had left, so the others
    // were refused (429, to be tried again) rather than let through.
    assert!(held > 0, "{out}");
    let spent: u64 = answered.iter().map(|r| r["used"].as_u64().unwrap()).sum();
    eprintln!(
        "{} answered ({spent} tokens), {held} refused while tokens were held",
        answered.len()
    );
    for run in &attached {
        runtime.cancel(&run.run.id).await.unwrap();
        let ended = runtime.wait(&run.run.id).await.unwrap();
        assert!(ended.tokens_used <= 500, "{ended:#?}");
    }
    let usage = hane_coordinator::Budgets::new(&runtime)
        .report()
        .await
        .unwrap()
        .usage;
    assert_eq!(usage.model_tokens_reserved, 0);
    assert_eq!(usage.model_tokens_used, spent);
    assert!(usage.model_tokens_used <= 1500, "{usage:?}");
}

/// One HTTP/1.1 request on its own connection: the status and the body.
async fn raw(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, Value) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{head}\r\nHost: hane\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    // A server may answer before it has read a body it refuses.
    let _ = stream.write_all(body).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The error message of an OpenAI- or Anthropic-shaped error body, and
/// its type.
fn error_of(body: &Value) -> (&str, &str) {
    let error = &body["error"];
    (
        error["message"].as_str().unwrap_or_default(),
        error["type"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn bad_requests_get_the_formats_own_error_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = recorded(dir.path(), "    maxModelTokens: 20000", &[]).await;
    let addr = serve(&runtime).await;
    let attached = attach(&runtime, "client").await;
    let token = attached.token.as_str();
    let auth = format!("Authorization: Bearer {token}");
    let paths = [
        ("chat", "/v1/chat/completions"),
        ("responses", "/v1/responses"),
        ("anthropic", "/v1/messages"),
    ];
    let big = vec![b' '; hane_server::MAX_MODEL_BODY_BYTES + 1];
    for (format, path) in paths {
        let post = format!("POST {path} HTTP/1.1\r\n{auth}\r\nContent-Type: application/json");
        let cases: Vec<(&[u8], u16, &str)> = vec![
            (b"{\"model\": ", 400, "not valid JSON"),
            (b"[1, 2]", 400, "not a JSON object"),
            (&big, 413, "bytes"),
        ];
        for (body, status, says) in cases {
            let (got, answer) = raw(addr, &post, body).await;
            assert_eq!(got, status, "{format}: {answer}");
            let (message, kind) = error_of(&answer);
            assert!(message.contains(says), "{format}: {answer}");
            assert!(!kind.is_empty(), "{format}: {answer}");
            if format == "anthropic" {
                assert_eq!(answer["type"], "error", "{answer}");
            }
        }
        // No token, or two.
        let (got, answer) = raw(
            addr,
            &format!("POST {path} HTTP/1.1\r\nContent-Type: application/json"),
            b"{}",
        )
        .await;
        assert_eq!(got, 401, "{answer}");
        assert!(error_of(&answer).0.contains("no run token"), "{answer}");
        let (got, answer) = raw(
            addr,
            &format!("POST {path} HTTP/1.1\r\n{auth}\r\nAuthorization: Bearer other"),
            b"{}",
        )
        .await;
        assert_eq!(got, 400, "{answer}");
        assert!(error_of(&answer).0.contains("more than one"), "{answer}");
    }
    // What a format can say and hane cannot honour is refused naming
    // where, with a 4xx.
    let untranslatable = [
        (
            "/v1/chat/completions",
            json!({"model": "m", "n": 3, "messages": [{"role": "user", "content": "hi"}]}),
            "/n",
        ),
        (
            "/v1/responses",
            json!({"model": "m", "input": "hi", "previous_response_id": "resp_1"}),
            "/previous_response_id",
        ),
        (
            "/v1/messages",
            json!({"model": "m", "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
            "/tools/0/type",
        ),
    ];
    for (path, body, pointer) in untranslatable {
        let (got, answer) = raw(
            addr,
            &format!("POST {path} HTTP/1.1\r\nx-api-key: {token}"),
            body.to_string().as_bytes(),
        )
        .await;
        assert_eq!(got, 400, "{path}: {answer}");
        assert!(error_of(&answer).0.contains(pointer), "{path}: {answer}");
    }
    // What the clients probe.
    let (got, _) = raw(addr, "HEAD / HTTP/1.1", b"").await;
    assert_eq!(got, 200);
    let (got, models) = raw(addr, &format!("GET /v1/models HTTP/1.1\r\n{auth}"), b"").await;
    assert_eq!(got, 200);
    assert_eq!(models["data"][0]["id"], "fleet-assistant", "{models}");
    assert_eq!(models["object"], "list");
    let (_, models) = raw(
        addr,
        &format!("GET /v1/models HTTP/1.1\r\nx-api-key: {token}\r\nanthropic-version: 2023-06-01"),
        b"",
    )
    .await;
    assert_eq!(models["data"][0]["type"], "model", "{models}");
    let (got, count) = raw(
        addr,
        &format!("POST /v1/messages/count_tokens HTTP/1.1\r\nx-api-key: {token}"),
        json!({"model": "m", "messages": [{"role": "user", "content": "Find vehicle ABC-123."}]})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(got, 200, "{count}");
    assert!(count["input_tokens"].as_u64().unwrap() > 0, "{count}");
    // None of it reached the model or was counted.
    assert!(
        runtime
            .llm_turns(&attached.run.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        runtime.gateway().model_tokens_used(&attached.run.id),
        Some(0)
    );
}

/// One HTTP/1.1 request on its own connection: the status, the headers
/// (names lower-cased) and the body.
async fn raw_with_headers(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, String, Value) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{head}\r\nHost: hane\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (
        status,
        head.to_ascii_lowercase(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn an_operator_starts_an_attached_run_over_http_and_a_client_drives_its_model() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = recorded(dir.path(), "    maxModelTokens: 20000", &[]).await;
    let addr = serve(&runtime).await;
    let key = hane_server::create_key(
        runtime.registry(),
        "ops",
        hane_server::KeyRole::Operator,
        None,
    )
    .await
    .unwrap();
    let auth = format!("Authorization: Bearer {key}");
    let body =
        json!({"agent": "client", "input": {"vehicle": "ABC-123"}, "attach": true, "wait": true});
    let (status, _, answer) = raw_with_headers(
        addr,
        &format!("POST /v1/agents/runs HTTP/1.1\r\n{auth}"),
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["error"]["path"], "/attach", "{answer}");

    let body = json!({"agent": "client", "input": {"vehicle": "ABC-123"}, "attach": true});
    let (status, head, run) = raw_with_headers(
        addr,
        &format!("POST /v1/agents/runs HTTP/1.1\r\n{auth}"),
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(status, 201, "{run}");
    let header = format!("{}: ", hane_server::RUN_TOKEN_HEADER);
    let token = head
        .lines()
        .find_map(|l| l.strip_prefix(&header))
        .expect("the run's token")
        .trim()
        .to_owned();
    // Header names were lower-cased with the rest; the token's own text
    // is lower-case already.
    let out = model_client(&spec("conversation", "chat", true, addr, &[token.as_str()]))
        .await
        .unwrap();
    assert_eq!(out["turns"][1]["text"], "ABC-123 is a Volvo V70.", "{out}");
    let id = run["id"].as_str().unwrap();
    let (status, _, cancelled) = raw_with_headers(
        addr,
        &format!("POST /v1/agents/runs/{id}/cancel HTTP/1.1\r\n{auth}"),
        b"",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let run = runtime.wait(&id.parse().unwrap()).await.unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(run.tokens_used, 40 + 12 + 70 + 9);
}

#[tokio::test]
async fn an_upstreams_refusal_reaches_the_client_in_its_own_format_as_a_4xx() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = on_llama(
        dir.path(),
        "    maxModelTokens: 500000\n    maxSeconds: 600",
        &[],
    )
    .await;
    let addr = serve(&runtime).await;
    // Far more than the server's 4096-token context: it refuses the
    // request, whichever format it was sent in and whichever the
    // upstream speaks.
    let question = "vehicle ".repeat(6000);
    for (format, upstream) in [
        ("chat", "anthropic"),
        ("responses", "chat"),
        ("anthropic", "responses"),
    ] {
        let attached = attach(&runtime, &format!("via-{upstream}")).await;
        let mut spec = spec("refused", format, false, addr, &[attached.token.as_str()]);
        spec["model"] = json!(LlamaServer::shared().model());
        spec["question"] = json!(question);
        let out = model_client(&spec).await.unwrap();
        assert_eq!(out["status"], 400, "{format} via {upstream}: {out}");
        assert_eq!(out["class"], "BadRequestError", "{out}");
        assert_eq!(out["type"], "invalid_request_error", "{out}");
        assert!(
            out["message"].as_str().unwrap().contains("context"),
            "{format} via {upstream}: {out}"
        );
        runtime.cancel(&attached.run.id).await.unwrap();
        let run = runtime.wait(&attached.run.id).await.unwrap();
        assert!(runtime.llm_turns(&run.id).await.unwrap().is_empty());
    }
}
