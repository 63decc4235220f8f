//! Anthropic Messages: its request and response both ways, its stream
//! parsed, and what only its writer does (the shared writer tests are in
//! `dialect::tests::writer`).

use serde_json::{Value, json};

use super::*;
use crate::dialect::tests::writer::Subject;
use crate::dialect::tests::{parse_sse, rate_limited, read_back, rich_request, rich_response};
use crate::dialect::{SseOut, encode};
use crate::{Api, Content, ModelResponse, StopReason, ToolChoice, WireOptions};

const REASONS: [StopReason; 5] = [
    StopReason::EndTurn,
    StopReason::ToolUse,
    StopReason::MaxTokens,
    StopReason::StopSequence,
    StopReason::Refusal,
];

#[test]
fn a_request_round_trips_through_the_outbound_format() {
    let request = rich_request();
    for stream in [false, true] {
        let options = WireOptions {
            stream,
            parallel_tool_calls: Some(false),
        };
        let body = request_body(&request, &options).unwrap();
        let inbound = parse_request(&body).unwrap();
        assert_eq!(inbound.stream, stream);
        assert_eq!(inbound.request, request);
    }
}

#[test]
fn what_clients_send_is_accepted() {
    let body = json!({
        "model": "m",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "B"}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1",
                 "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
                 "is_error": true}]},
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"},
            "cache_control": {"type": "ephemeral"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "metadata": {"user_id": "u"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "stream": true,
    });
    let inbound = parse_request(&body).unwrap();
    assert!(inbound.stream);
    let r = inbound.request;
    assert_eq!(r.system.as_deref(), Some("A\n\nB"));
    assert_eq!(r.messages[1].content.len(), 1);
    assert_eq!(
        r.messages[2].content,
        vec![Content::ToolResult {
            call_id: "t1".into(),
            content: "one\ntwo".into(),
            is_error: true
        }]
    );
    assert_eq!(r.tool_choice, ToolChoice::Required);
    assert_eq!(r.max_output_tokens, Some(100));
}

#[test]
fn what_cannot_be_translated_is_refused_where_it_is() {
    let base = json!({"model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}]});
    let without = |key: &str| {
        let mut body = base.clone();
        body.as_object_mut().unwrap().remove(key);
        parse_request(&body).unwrap_err().pointer
    };
    assert_eq!(without("max_tokens"), "/max_tokens");
    assert_eq!(without("model"), "/model");
    let with = |key: &str, value: Value| {
        let mut body = base.clone();
        body[key] = value;
        parse_request(&body).unwrap_err().pointer
    };
    assert_eq!(
        with(
            "tools",
            json!([{"type": "web_search_20250305", "name": "web_search"}])
        ),
        "/tools/0/type"
    );
    assert_eq!(
        with("tool_choice", json!({"type": "sometimes"})),
        "/tool_choice/type"
    );
    assert_eq!(
        with("mcp_servers", json!([{"type": "url", "url": "x"}])),
        "/mcp_servers"
    );
    let messages = |messages: Value| {
        let mut body = base.clone();
        body["messages"] = messages;
        parse_request(&body).unwrap_err().pointer
    };
    assert_eq!(
        messages(json!([{"role": "user", "content": [
            {"type": "text", "text": "a"}, {"type": "document", "source": {}}]}])),
        "/messages/0/content/1/type"
    );
    assert_eq!(
        messages(json!([{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "https://x"}}]}])),
        "/messages/0/content/0/source/type"
    );
    assert_eq!(
        messages(
            json!([{"role": "user", "content": "a"}, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "gone", "content": "x"}]}])
        ),
        "/messages/1/content/0/tool_use_id"
    );
    assert_eq!(
        messages(json!([
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                "content": [{"type": "image", "source": {}}]}]}])),
        "/messages/1/content/0/content/0/type"
    );
    assert_eq!(
        messages(json!([{"role": "user", "content": [
            {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}])),
        "/messages/0/content/0/type"
    );
}

#[test]
fn a_response_body_parses_back() {
    for reason in REASONS {
        let response = rich_response(reason);
        let body = response_body(&response, "id");
        assert_eq!(body["usage"]["input_tokens"], 1200 - 1024);
        assert_eq!(body["usage"]["cache_read_input_tokens"], 1024);
        assert_eq!(parse_response(&body).unwrap(), response, "{reason:?}");
    }
}

#[test]
fn the_stream_assembles_the_response() {
    for reason in REASONS {
        let mut response = rich_response(reason);
        response.content.push(Content::text("Done."));
        let events = stream_events(&response, "id");
        assert_eq!(events[0].event.as_deref(), Some("message_start"));
        assert_eq!(
            events.last().unwrap().event.as_deref(),
            Some("message_stop")
        );
        let mut stream = AnthropicStream::new(None);
        let mut done = false;
        for event in parse_sse(&encode(&events)) {
            assert!(!done, "an event after message_stop");
            done = stream.event(&event).unwrap();
        }
        assert!(done);
        assert_eq!(stream.finish().unwrap(), response, "{reason:?}");
    }
}

impl Subject for AnthropicWriter {
    const API: Api = Api::AnthropicMessages;
    const DELTAS: &'static [&'static str] = &["/delta/text", "/delta/partial_json"];
    const MODEL: &'static str = "/message/model";

    fn writer(id: &str, model: &str, input_tokens: u64) -> Self {
        AnthropicWriter::new(id, model, input_tokens)
    }

    fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
        stream_events(response, id)
    }

    fn check(out: &[SseOut]) {
        check(out);
    }
}

/// Checks that `out` is a whole stream: started, blocks one at a time
/// numbered from 0 (deltas of their kind), ended.
fn check(out: &[SseOut]) {
    let names: Vec<&str> = out.iter().map(|e| e.event.as_deref().unwrap()).collect();
    assert_eq!(names[..2], ["message_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    let mut open: Option<(u64, String)> = None;
    let mut next = 0;
    for (name, event) in names.iter().zip(out).take(out.len() - 2).skip(2) {
        let data: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(data["type"], *name);
        let index = data["index"].as_u64().unwrap();
        match *name {
            "content_block_start" => {
                assert!(open.is_none(), "a block starts inside another");
                assert_eq!(index, next);
                let kind = data["content_block"]["type"].as_str().unwrap().to_owned();
                open = Some((index, kind));
                next += 1;
            }
            "content_block_delta" => {
                let (at, kind) = open.as_ref().expect("a delta outside a block");
                assert_eq!(*at, index);
                let expected = if kind == "text" {
                    "text_delta"
                } else {
                    "input_json_delta"
                };
                assert_eq!(data["delta"]["type"], expected);
            }
            "content_block_stop" => {
                assert_eq!(open.take().map(|(at, _)| at), Some(index));
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert!(open.is_none(), "a block left open");
}

#[test]
fn the_start_shows_the_estimate_and_the_end_the_usage() {
    let response = rich_response(StopReason::EndTurn);
    let mut writer = AnthropicWriter::new("msg_1", "asked-for", 999);
    let start = writer.start();
    let message: Value = serde_json::from_str(&start[0].data).unwrap();
    assert_eq!(message["message"]["id"], "msg_1");
    assert_eq!(message["message"]["model"], "asked-for");
    assert_eq!(message["message"]["usage"]["input_tokens"], 999);
    assert!(writer.start().is_empty(), "the stream starts once");
    let end = writer.finish(&response);
    let delta: Value = serde_json::from_str(&end[end.len() - 2].data).unwrap();
    assert_eq!(delta["usage"]["input_tokens"], 1200 - 1024);
    assert_eq!(delta["usage"]["cache_read_input_tokens"], 1024);
    assert_eq!(delta["usage"]["output_tokens"], 80);
    let back = read_back(Api::AnthropicMessages, &[start, end].concat()).unwrap();
    assert_eq!(back.usage, response.usage);
}

#[test]
fn a_failure_after_the_start_is_an_error_event() {
    let mut writer = AnthropicWriter::new("id", "m", 10);
    writer.start();
    let failed = writer.fail(&rate_limited());
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].event.as_deref(), Some("error"));
    let data: Value = serde_json::from_str(&failed[0].data).unwrap();
    assert_eq!(data, error_body(&rate_limited()).1);
    assert_eq!(data["error"]["type"], "rate_limit_error");
}
