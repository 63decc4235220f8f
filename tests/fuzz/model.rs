//! The model wire formats, both ways: what a client sends the Model
//! Gateway (Chat Completions, Responses and Messages requests, each read
//! and translated into all three), and what an upstream model server
//! answers (responses whole and as event streams, read and served back in
//! all three formats). Neither side is trusted.

use hane_model::dialect::sse::SseParser;
use hane_model::dialect::{self, SseOut};
use hane_model::{
    Content, ModelError, ModelResponse, WireOptions,
    dialect::{anthropic, chat, responses},
};
use serde_json::{Value, json};

use crate::engine::{Shape, Target, fuzz};

fn bytes(values: &[Value]) -> Vec<Vec<u8>> {
    values
        .iter()
        .map(|v| serde_json::to_vec(v).unwrap())
        .collect()
}

fn tool() -> Value {
    json!({"type": "function", "function": {"name": "data.find_record", "description": "Find",
        "parameters": {"type": "object", "properties": {"collection": {"type": "string"}}}}})
}

fn request_seeds() -> Vec<Vec<u8>> {
    bytes(&[
        json!({"model": "fleet", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Find van 7"}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "data.find_record", "arguments": "{\"collection\":\"vehicles\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"records\":[]}"}],
            "tools": [tool()], "tool_choice": "auto", "max_tokens": 64, "temperature": 0.2,
            "stream": true, "stream_options": {"include_usage": true}}),
        json!({"model": "fleet", "instructions": "Be brief.", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Find van 7"}]},
            {"type": "function_call", "call_id": "call_1", "name": "data.find_record", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "[]"}],
            "tools": [{"type": "function", "name": "data.find_record", "parameters": {"type": "object"}}],
            "max_output_tokens": 64, "stream": false}),
        json!({"model": "fleet", "system": "Be brief.", "max_tokens": 64, "messages": [
            {"role": "user", "content": "Find van 7"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "data.find_record", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "[]"}]}],
            "tools": [{"name": "data.find_record", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "auto"}, "stream": true}),
    ])
}

fn response_seeds() -> Vec<Vec<u8>> {
    bytes(&[
        json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "fleet", "choices": [
            {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Looking",
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "data.find_record", "arguments": "{\"collection\":\"vehicles\"}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
        json!({"id": "resp_1", "object": "response", "status": "completed", "model": "fleet", "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Found"}]},
            {"type": "function_call", "call_id": "call_1", "name": "data.find_record", "arguments": "{}"}],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}),
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "fleet",
            "stop_reason": "tool_use", "content": [{"type": "text", "text": "Looking"},
                {"type": "tool_use", "id": "toolu_1", "name": "data.find_record", "input": {"collection": "vehicles"}}],
            "usage": {"input_tokens": 10, "output_tokens": 5}}),
    ])
}

fn stream_seeds() -> Vec<Vec<u8>> {
    [
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\n\n\
         data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n\
         data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n\
         data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n",
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"output_index\":0,\"delta\":\"Hi\"}\n\n\
         event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\"}]}],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n\
         event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n\
         event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}\n\n\
         event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
         event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":4}}\n\n\
         event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

/// A response served back in every format, whole and streamed.
fn serve_all(response: &ModelResponse) {
    let streamed: Vec<SseOut> = [
        chat::stream_events(response, "id"),
        responses::stream_events(response, "id"),
        anthropic::stream_events(response, "id"),
    ]
    .concat();
    let _ = dialect::encode(&streamed);
    let _ = chat::response_body(response, "id");
    let _ = responses::response_body(response, "id");
    let _ = anthropic::response_body(response, "id");
}

/// What a response read holds, tersely (the engine keeps the first 96
/// letters of an outcome, and an outcome has three formats' answers): why
/// it stopped, then a letter for each of its first eight blocks (`t` text,
/// `e` empty text, `i` image, `r` result, `c` a call followed by `n`
/// without id, `m` without name, and `o`, `z` or `x` for arguments that
/// are an object, an empty one or no object; `a` if more follow), then
/// `I`, `O` and `C` for the counts it has, `M` without a model and `D`
/// without an id. Without it every answer read would be one outcome, and
/// the corpus would keep none of the inputs that reach the readers' other
/// paths.
fn shape(response: &ModelResponse) -> String {
    let mut shape = format!("{} ", response.stop_reason.as_str());
    for block in response.content.iter().take(8) {
        match block {
            Content::Text { text } if text.is_empty() => shape.push('e'),
            Content::Text { .. } => shape.push('t'),
            Content::Image { .. } => shape.push('i'),
            Content::ToolResult { .. } => shape.push('r'),
            Content::ToolCall { id, name, input } => {
                shape.push('c');
                if id.is_empty() {
                    shape.push('n');
                }
                if name.is_empty() {
                    shape.push('m');
                }
                shape.push(match input {
                    Value::Object(map) if map.is_empty() => 'z',
                    Value::Object(_) => 'o',
                    _ => 'x',
                });
            }
        }
    }
    if response.content.len() > 8 {
        shape.push('a');
    }
    shape.push(' ');
    let usage = response.usage;
    for (letter, count) in [
        ('I', usage.input_tokens),
        ('O', usage.output_tokens),
        ('C', usage.cached_tokens),
    ] {
        if count > 0 {
            shape.push(letter);
        }
    }
    if response.model.is_empty() {
        shape.push('M');
    }
    if response.request_id.is_none() {
        shape.push('D');
    }
    shape
}

/// What an error says, without the excerpt of the data it could not read
/// that follows `): ` (an event or answer that is not JSON): with it, each
/// input of a stream would be an outcome of its own.
fn said(error: &ModelError) -> String {
    let text = error.to_string();
    match text.find("): ") {
        Some(end) => text[..=end].to_owned(),
        None => text,
    }
}

/// One format's part of an outcome: an answer that read is served back in
/// every format and told by its `shape`, an error by what it `said`.
fn answered(format: &str, result: Result<ModelResponse, ModelError>) -> String {
    match result {
        Ok(response) => {
            serve_all(&response);
            format!("{format} ok: {}; ", shape(&response))
        }
        Err(e) => format!("{format}: {}; ", said(&e)),
    }
}

/// Fuzzes `check` with JSON bodies grown from `seeds`.
fn fuzz_json(name: &'static str, seeds: Vec<Vec<u8>>, check: impl Fn(&Value) -> String) {
    let target = Target {
        name,
        seeds,
        dictionary: Vec::new(),
        shape: Shape::Json,
    };
    fuzz(target, |bytes| {
        match serde_json::from_slice::<Value>(bytes) {
            Ok(body) => check(&body),
            Err(_) => "not JSON".into(),
        }
    });
}

#[test]
fn model_requests() {
    fuzz_json("model_requests", request_seeds(), |body| {
        let mut outcome = String::new();
        for (format, parsed) in [
            ("chat", chat::parse_request(body)),
            ("responses", responses::parse_request(body)),
            ("messages", anthropic::parse_request(body)),
        ] {
            match parsed {
                Ok(inbound) => {
                    for stream in [false, true] {
                        let options = WireOptions {
                            stream,
                            parallel_tool_calls: Some(stream),
                        };
                        let _ = chat::request_body(&inbound.request, &options);
                        let _ = responses::request_body(&inbound.request, &options);
                        let _ = anthropic::request_body(&inbound.request, &options);
                    }
                    outcome.push_str(&format!("{format} ok; "));
                }
                Err(e) => {
                    assert!(
                        e.pointer.is_empty() || e.pointer.starts_with('/'),
                        "{format}: a pointer that is not one: {:?}",
                        e.pointer
                    );
                    outcome.push_str(&format!("{format} {}: {}; ", e.pointer, e.message));
                }
            }
        }
        outcome
    });
}

#[test]
fn model_responses() {
    fuzz_json("model_responses", response_seeds(), |body| {
        let mut outcome = String::new();
        for (format, parsed) in [
            ("chat", chat::parse_response(body)),
            ("responses", responses::parse_response(body)),
            ("messages", anthropic::parse_response(body)),
        ] {
            outcome.push_str(&answered(format, parsed));
        }
        outcome
    });
}

#[test]
fn model_streams() {
    let target = Target {
        name: "model_streams",
        seeds: stream_seeds(),
        dictionary: [
            "data: ",
            "event: ",
            "\n\n",
            "[DONE]",
            ":keep-alive\n",
            "id: 1\n",
            "retry: 5\n",
        ]
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect(),
        shape: Shape::Bytes,
    };
    fuzz(target, |bytes| {
        // The stream arrives in pieces of any size.
        let split = (bytes.len() / 3).max(1);
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for chunk in bytes.chunks(split) {
            match parser.push(chunk) {
                Ok(more) => events.extend(more),
                Err(e) => return format!("sse: {e}"),
            }
        }
        events.extend(parser.finish());
        let mut outcome = String::new();
        let mut chat = chat::ChatStream::new(None);
        let mut responses = responses::ResponsesStream::new(None);
        let mut anthropic = anthropic::AnthropicStream::new(None);
        let (mut c, mut r, mut a) = (Ok(false), Ok(false), Ok(false));
        for event in &events {
            if c.is_ok() {
                c = chat.event(event);
            }
            if r.is_ok() {
                r = responses.event(event);
            }
            if a.is_ok() {
                a = anthropic.event(event);
            }
        }
        for (format, ended, finished) in [
            ("chat", c, chat.finish()),
            ("responses", r, responses.finish()),
            ("messages", a, anthropic.finish()),
        ] {
            outcome.push_str(&answered(format, ended.and(finished)));
        }
        outcome
    });
}
