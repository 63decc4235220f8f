//! Chat Completions: its request and response both ways, its stream
//! parsed, and what only its writer does (the shared writer tests are in
//! `dialect::tests::writer`).

use serde_json::{Value, json};

use super::*;
use crate::dialect::tests::writer::{Subject, written};
use crate::dialect::tests::{
    openai_responses, parse_sse, rate_limited, read_back, rich_request, rich_response,
};
use crate::dialect::{SseOut, encode};
use crate::{
    Api, Content, ModelError, ModelResponse, Role, StopReason, StreamEvent, ToolChoice, Usage,
    WireOptions, arguments_text,
};

#[test]
fn a_request_round_trips_through_the_outbound_format_except_is_error() {
    let request = rich_request();
    for stream in [false, true] {
        let options = WireOptions {
            stream,
            parallel_tool_calls: Some(true),
        };
        let body = request_body(&request, &options).unwrap();
        let inbound = parse_request(&body).unwrap();
        assert_eq!(inbound.stream, stream);
        // Chat Completions has no place for a tool result's is_error.
        let mut expected = request.clone();
        let Content::ToolResult { is_error, .. } = &mut expected.messages[2].content[1] else {
            panic!("the fixture changed");
        };
        assert!(*is_error);
        *is_error = false;
        assert_eq!(inbound.request, expected);
    }
}

#[test]
fn what_clients_send_is_accepted() {
    let body = json!({
        "model": "m",
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "A"}]},
            {"role": "system", "content": "B"},
            {"role": "user", "content": [{"type": "text", "text": "hi"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AA==", "detail": "low"}}],
             "name": "pat"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "tool_choice": "required",
        "max_tokens": 10,
        "stop": "X",
        "n": 1,
        "logprobs": false,
        "stream": true,
        "stream_options": {"include_usage": true},
        "parallel_tool_calls": false,
        "user": "u",
        "seed": 3,
        "response_format": {"type": "text"},
    });
    let inbound = parse_request(&body).unwrap();
    assert!(inbound.stream);
    let r = inbound.request;
    assert_eq!(r.system.as_deref(), Some("A\n\nB"));
    assert_eq!(r.messages.len(), 3);
    assert_eq!(
        r.messages[0].content[1],
        Content::Image {
            media_type: "image/jpeg".into(),
            data: "AA==".into()
        }
    );
    assert_eq!(
        r.messages[1].content,
        vec![Content::ToolCall {
            id: "c1".into(),
            name: "f".into(),
            input: json!({})
        }]
    );
    assert_eq!(r.messages[2].role, Role::User);
    assert_eq!(r.tools[0].input_schema["type"], "object");
    assert_eq!(r.tool_choice, ToolChoice::Required);
    assert_eq!(r.max_output_tokens, Some(10));
    assert_eq!(r.stop, vec!["X".to_owned()]);
}

#[test]
fn what_cannot_be_translated_is_refused_where_it_is() {
    let base = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let with = |key: &str, value: Value| {
        let mut body = base.clone();
        body[key] = value;
        parse_request(&body).unwrap_err().pointer
    };
    assert_eq!(with("n", json!(2)), "/n");
    assert_eq!(with("logprobs", json!(true)), "/logprobs");
    assert_eq!(with("audio", json!({"voice": "x"})), "/audio");
    assert_eq!(with("modalities", json!(["text", "audio"])), "/modalities");
    assert_eq!(
        with("response_format", json!({"type": "json_object"})),
        "/response_format/type"
    );
    assert_eq!(with("functions", json!([])), "/functions");
    assert_eq!(with("tools", json!([{"type": "custom"}])), "/tools/0/type");
    assert_eq!(
        with("tool_choice", json!({"type": "allowed_tools"})),
        "/tool_choice/type"
    );
    let messages = |messages: Value| {
        parse_request(&json!({"model": "m", "messages": messages}))
            .unwrap_err()
            .pointer
    };
    assert_eq!(
        messages(json!([{"role": "user", "content": [
            {"type": "text", "text": "a"},
            {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}])),
        "/messages/0/content/1/type"
    );
    assert_eq!(
        messages(json!([{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}])),
        "/messages/0/content/0/image_url/url"
    );
    assert_eq!(
        messages(json!([{"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}])),
        "/messages/0/tool_calls/0/function/arguments"
    );
    assert_eq!(
        messages(json!([{"role": "user", "content": "a"},
            {"role": "tool", "tool_call_id": "nope", "content": "x"}])),
        "/messages/1/tool_call_id"
    );
    assert_eq!(
        messages(json!([{"role": "function", "content": "a"}])),
        "/messages/0/role"
    );
    assert_eq!(
        parse_request(&json!({"messages": []})).unwrap_err().pointer,
        "/model"
    );
    assert_eq!(parse_request(&json!([])).unwrap_err().pointer, "");
}

#[test]
fn a_response_body_parses_back() {
    for (reason, response) in openai_responses() {
        let body = response_body(&response, "id");
        if reason != StopReason::EndTurn {
            // Arguments are a JSON string.
            assert_eq!(
                body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
                arguments_text(&json!({"city": "Paris", "options": {"unit": "C", "days": [1, 2]}}))
            );
        }
        assert_eq!(parse_response(&body).unwrap(), response, "{reason:?}");
    }
    // Chat Completions says `stop` for a stop sequence as for the end
    // of a turn.
    let mut response = rich_response(StopReason::StopSequence);
    response.content.truncate(1);
    let back = parse_response(&response_body(&response, "id")).unwrap();
    assert_eq!(back.stop_reason, StopReason::EndTurn);
    response.stop_reason = StopReason::EndTurn;
    assert_eq!(back, response);
}

#[test]
fn the_stream_assembles_the_response() {
    for (reason, response) in openai_responses() {
        let events = stream_events(&response, "id");
        assert!(events.iter().all(|e| e.event.is_none()));
        assert_eq!(events.last().unwrap().data, "[DONE]");
        let mut stream = ChatStream::new(None);
        let mut done = false;
        for event in parse_sse(&encode(&events)) {
            assert!(!done, "an event after [DONE]");
            done = stream.event(&event).unwrap();
        }
        assert!(done);
        assert_eq!(stream.finish().unwrap(), response, "{reason:?}");
    }
    // Text alone: no tool call deltas, `stop`.
    let mut response = rich_response(StopReason::EndTurn);
    response.content.truncate(1);
    let events = stream_events(&response, "id");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "stop"
    );
    assert_eq!(chunks[chunks.len() - 1]["choices"], json!([]));
    assert_eq!(
        chunks[chunks.len() - 1]["usage"]["prompt_tokens_details"]["cached_tokens"],
        1024
    );
}

impl Subject for ChatWriter {
    const API: Api = Api::ChatCompletions;
    const DELTAS: &'static [&'static str] = &DELTAS;
    const MODEL: &'static str = "/model";

    fn writer(id: &str, model: &str, input_tokens: u64) -> Self {
        let mut writer = ChatWriter::new(id, model, input_tokens);
        writer.include_usage(true);
        writer
    }

    fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
        stream_events(response, id)
    }

    fn check(out: &[SseOut]) {
        check(out);
    }
}

const DELTAS: [&str; 2] = [
    "/choices/0/delta/content",
    "/choices/0/delta/tool_calls/0/function/arguments",
];

/// Checks that `out` is a whole stream: chunks of the completion `id`,
/// the role first, one finish reason, `[DONE]` last.
fn check(out: &[SseOut]) {
    assert_eq!(out.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = out[..out.len() - 1]
        .iter()
        .map(|e| {
            assert!(e.event.is_none());
            serde_json::from_str(&e.data).unwrap()
        })
        .collect();
    assert!(chunks.iter().all(|c| c["id"] == "id"));
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let finishes = chunks
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null())
        .count();
    assert_eq!(finishes, 1);
}

#[test]
fn stream_options_say_whether_the_usage_ends_the_stream() {
    let base = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "stream": true});
    let with = |options: Value| {
        let mut body = base.clone();
        body["stream_options"] = options;
        parse_request(&body)
    };
    assert!(!parse_request(&base).unwrap().include_usage);
    assert!(with(json!({"include_usage": true})).unwrap().include_usage);
    assert!(!with(json!({"include_usage": false})).unwrap().include_usage);
    assert!(!with(json!({})).unwrap().include_usage);
    assert_eq!(with(json!(3)).unwrap_err().pointer, "/stream_options");
    assert_eq!(
        with(json!({"include_usage": "yes"})).unwrap_err().pointer,
        "/stream_options/include_usage"
    );
    // Without it, no chunk without choices.
    let response = rich_response(StopReason::ToolUse);
    let mut writer = ChatWriter::new("id", "model-x", 0);
    let out = writer.finish(&response);
    check(&out);
    let before_done: Value = serde_json::from_str(&out[out.len() - 2].data).unwrap();
    assert_eq!(before_done["choices"][0]["finish_reason"], "tool_calls");
    assert!(before_done.get("usage").is_none());
    let back = read_back(Api::ChatCompletions, &out).unwrap();
    assert_eq!(back.usage, Usage::default());
    assert_eq!(back.content, response.content);
}

#[test]
fn the_rest_of_a_text_is_sent_after_a_call_began() {
    // Nothing closes a block in this format: the text's rest can follow
    // the call's start.
    let response = rich_response(StopReason::ToolUse);
    let Content::ToolCall { id, name, .. } = &response.content[1] else {
        panic!("the fixture changed");
    };
    let events = [
        StreamEvent::TextDelta {
            index: 0,
            text: "Checking".into(),
        },
        StreamEvent::ToolCallStart {
            index: 1,
            id: id.clone(),
            name: name.clone(),
        },
    ];
    let mut writer = <ChatWriter as Subject>::writer("id", "model-x", 0);
    let out = written(&mut writer, &events, &response);
    check(&out);
    assert_eq!(read_back(Api::ChatCompletions, &out).unwrap(), response);
}

#[test]
fn a_failure_after_the_start_is_an_error_chunk() {
    let mut writer = ChatWriter::new("id", "m", 10);
    writer.start();
    let failed = writer.fail(&rate_limited());
    assert_eq!(failed.len(), 2);
    let error: Value = serde_json::from_str(&failed[0].data).unwrap();
    assert_eq!(error, error_body(&rate_limited()).1);
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    assert_eq!(failed[1].data, "[DONE]");
    assert!(matches!(
        read_back(Api::ChatCompletions, &failed),
        Err(ModelError::RateLimited { .. })
    ));
}
