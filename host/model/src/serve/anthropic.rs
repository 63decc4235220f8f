//! Serving Anthropic Messages: a client's `POST /v1/messages` body as the
//! normalized request, and the normalized response as a `message` object
//! or its named event stream.
//!
//! `system` (a string or text blocks) is the system text; `thinking` and
//! `redacted_thinking` blocks a client sends back are dropped, as are
//! `cache_control` marks. Refused: a missing `max_tokens` (the API
//! requires it), server tools (`web_search_…`, `bash_…`, …) and
//! `mcp_servers`, images by URL or file, documents and other block types,
//! images in tool results, and a tool result whose call is not in the
//! conversation.

use serde_json::{Map, Value, json};

use super::{
    Calls, Failure, Inbound, InboundError, SseOut, array, as_object, at, field, flag, object,
    optional_f64, optional_str, pieces, required_str,
};
use crate::{
    Content, Message, ModelRequest, ModelResponse, Role, StopReason, ToolChoice, ToolSpec,
    arguments_text,
};

/// The normalized request for a Messages request body.
///
/// # Errors
///
/// [`InboundError`] for a malformed body or what hane cannot translate.
pub fn parse_request(body: &Value) -> Result<Inbound, InboundError> {
    let map = object(body)?;
    if !array(map, "", "mcp_servers")?.is_empty() {
        return Err(InboundError::new(
            "/mcp_servers",
            "MCP servers are not supported",
        ));
    }
    let mut request = ModelRequest::new(required_str(map, "", "model")?);
    request.max_output_tokens =
        match field(map, "max_tokens") {
            Some(max) => Some(max.as_u64().ok_or_else(|| {
                InboundError::new("/max_tokens", "must be a non-negative integer")
            })?),
            None => return Err(InboundError::new("/max_tokens", "is required")),
        };
    request.system = match field(map, "system") {
        None => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(Value::Array(blocks)) => {
            let mut pieces = Vec::new();
            for (i, block) in blocks.iter().enumerate() {
                let p = at("/system", i);
                let block = as_object(block, &p)?;
                match required_str(block, &p, "type")? {
                    "text" => pieces.push(required_str(block, &p, "text")?.to_owned()),
                    other => {
                        return Err(InboundError::new(
                            at(&p, "type"),
                            format!("a {other:?} system block is not supported"),
                        ));
                    }
                }
            }
            super::system(pieces)
        }
        Some(_) => {
            return Err(InboundError::new(
                "/system",
                "must be a string or an array of text blocks",
            ));
        }
    };
    let mut calls = Calls::default();
    for (i, message) in array(map, "", "messages")?.iter().enumerate() {
        let p = at("/messages", i);
        let message = as_object(message, &p)?;
        let role = match required_str(message, &p, "role")? {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(InboundError::new(
                    at(&p, "role"),
                    format!("the role {other:?} is not supported"),
                ));
            }
        };
        let content = match field(message, "content") {
            None => Vec::new(),
            Some(Value::String(text)) => vec![Content::text(text.clone())],
            Some(Value::Array(blocks)) => {
                let mut content = Vec::new();
                for (j, block) in blocks.iter().enumerate() {
                    let pb = at(&at(&p, "content"), j);
                    if let Some(block) = content_block(block, &pb, role, &mut calls)? {
                        content.push(block);
                    }
                }
                content
            }
            Some(_) => {
                return Err(InboundError::new(
                    at(&p, "content"),
                    "must be a string or an array of blocks",
                ));
            }
        };
        request.messages.push(Message { role, content });
    }
    for (i, tool) in array(map, "", "tools")?.iter().enumerate() {
        request.tools.push(tool_spec(tool, &at("/tools", i))?);
    }
    if let Some(choice) = field(map, "tool_choice") {
        request.tool_choice = tool_choice(choice)?;
    }
    for (i, stop) in array(map, "", "stop_sequences")?.iter().enumerate() {
        let stop = stop
            .as_str()
            .ok_or_else(|| InboundError::new(at("/stop_sequences", i), "must be a string"))?;
        request.stop.push(stop.to_owned());
    }
    request.temperature = optional_f64(map, "temperature")?;
    let stream = flag(map, "", "stream")?;
    Ok(Inbound {
        request,
        stream,
        include_usage: true,
    })
}

fn content_block(
    block: &Value,
    p: &str,
    role: Role,
    calls: &mut Calls,
) -> Result<Option<Content>, InboundError> {
    let block = as_object(block, p)?;
    let kind = required_str(block, p, "type")?;
    let content = match (kind, role) {
        ("text", _) => Content::text(required_str(block, p, "text")?),
        ("image", Role::User) => image(block, p)?,
        ("tool_use", Role::Assistant) => {
            let id = required_str(block, p, "id")?;
            let name = required_str(block, p, "name")?;
            let input = match field(block, "input") {
                None => json!({}),
                Some(object @ Value::Object(_)) => object.clone(),
                Some(_) => return Err(InboundError::new(at(p, "input"), "must be an object")),
            };
            calls.add(id);
            Content::ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                input,
            }
        }
        ("tool_result", Role::User) => {
            let call_id = required_str(block, p, "tool_use_id")?;
            calls.check(call_id, &at(p, "tool_use_id"))?;
            let content = match field(block, "content") {
                None => String::new(),
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(blocks)) => {
                    let mut texts = Vec::new();
                    for (k, inner) in blocks.iter().enumerate() {
                        let pi = at(&at(p, "content"), k);
                        let inner = as_object(inner, &pi)?;
                        match required_str(inner, &pi, "type")? {
                            "text" => texts.push(required_str(inner, &pi, "text")?),
                            other => {
                                return Err(InboundError::new(
                                    at(&pi, "type"),
                                    format!(
                                        "a {other:?} block in a tool result is not supported, only text"
                                    ),
                                ));
                            }
                        }
                    }
                    texts.join("\n")
                }
                Some(_) => {
                    return Err(InboundError::new(
                        at(p, "content"),
                        "must be a string or an array of blocks",
                    ));
                }
            };
            Content::ToolResult {
                call_id: call_id.to_owned(),
                content,
                is_error: flag(block, p, "is_error")?,
            }
        }
        ("thinking" | "redacted_thinking", Role::Assistant) => return Ok(None),
        (other, _) => {
            let role = match role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            return Err(InboundError::new(
                at(p, "type"),
                format!("a {other:?} block is not supported in a {role} message"),
            ));
        }
    };
    Ok(Some(content))
}

fn image(block: &Map<String, Value>, p: &str) -> Result<Content, InboundError> {
    let ps = at(p, "source");
    let source = as_object(
        field(block, "source").ok_or_else(|| InboundError::new(&ps, "is required"))?,
        &ps,
    )?;
    match required_str(source, &ps, "type")? {
        "base64" => Ok(Content::Image {
            media_type: required_str(source, &ps, "media_type")?.to_owned(),
            data: required_str(source, &ps, "data")?.to_owned(),
        }),
        other => Err(InboundError::new(
            at(&ps, "type"),
            format!("a {other:?} image source is not supported, only base64"),
        )),
    }
}

fn tool_spec(tool: &Value, p: &str) -> Result<ToolSpec, InboundError> {
    let tool = as_object(tool, p)?;
    if let Some(kind) = optional_str(tool, p, "type")?
        && kind != "custom"
    {
        return Err(InboundError::new(
            at(p, "type"),
            format!("the server tool {kind:?} is not supported, only client tools"),
        ));
    }
    Ok(ToolSpec {
        name: required_str(tool, p, "name")?.to_owned(),
        description: optional_str(tool, p, "description")?
            .unwrap_or_default()
            .to_owned(),
        input_schema: field(tool, "input_schema")
            .cloned()
            .ok_or_else(|| InboundError::new(at(p, "input_schema"), "is required"))?,
    })
}

fn tool_choice(choice: &Value) -> Result<ToolChoice, InboundError> {
    let map = as_object(choice, "/tool_choice")?;
    match required_str(map, "/tool_choice", "type")? {
        "auto" => Ok(ToolChoice::Auto),
        "any" => Ok(ToolChoice::Required),
        "none" => Ok(ToolChoice::None),
        "tool" => Ok(ToolChoice::Tool {
            name: required_str(map, "/tool_choice", "name")?.to_owned(),
        }),
        other => Err(InboundError::new(
            "/tool_choice/type",
            format!("the tool choice {other:?} is not supported"),
        )),
    }
}

fn stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::Refusal => "refusal",
    }
}

/// The content blocks of `response`.
fn blocks(response: &ModelResponse) -> Vec<Value> {
    response
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(json!({"type": "text", "text": text})),
            Content::ToolCall { id, name, input } => {
                Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
            }
            _ => None,
        })
        .collect()
}

/// The usage in Anthropic's terms: `input_tokens` leaves out the cache
/// reads (the normalized count includes them).
fn usage(response: &ModelResponse, output_tokens: u64) -> Value {
    let u = response.usage;
    json!({
        "input_tokens": u.input_tokens.saturating_sub(u.cached_tokens),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached_tokens,
        "output_tokens": output_tokens,
    })
}

fn message(response: &ModelResponse, id: &str, done: bool) -> Value {
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": response.model,
        "content": if done { Value::Array(blocks(response)) } else { json!([]) },
        "stop_reason": if done { json!(stop_reason(response.stop_reason)) } else { Value::Null },
        "stop_sequence": null,
        "usage": usage(response, if done { response.usage.output_tokens } else { 0 }),
    })
}

/// The `message` object for `response`.
pub fn response_body(response: &ModelResponse, id: &str) -> Value {
    message(response, id, true)
}

/// The events Anthropic streams for `response`: `message_start` (with the
/// input usage), `ping`, per block `content_block_start`, its
/// `content_block_delta`s (`text_delta` or `input_json_delta`) and
/// `content_block_stop`, then `message_delta` (stop reason and output
/// tokens) and `message_stop`, all named.
pub fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
    let mut events = Vec::new();
    let mut emit = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        events.push(SseOut::named(kind, &data));
    };
    emit(
        "message_start",
        json!({"message": message(response, id, false)}),
    );
    emit("ping", json!({}));
    let blocks = response
        .content
        .iter()
        .filter(|c| matches!(c, Content::Text { .. } | Content::ToolCall { .. }));
    for (index, block) in blocks.enumerate() {
        match block {
            Content::Text { text } => {
                emit(
                    "content_block_start",
                    json!({"index": index, "content_block": {"type": "text", "text": ""}}),
                );
                for piece in pieces(text) {
                    emit(
                        "content_block_delta",
                        json!({"index": index, "delta": {"type": "text_delta", "text": piece}}),
                    );
                }
            }
            Content::ToolCall {
                id: call_id,
                name,
                input,
            } => {
                emit(
                    "content_block_start",
                    json!({"index": index, "content_block": {"type": "tool_use", "id": call_id,
                        "name": name, "input": {}}}),
                );
                for piece in pieces(&arguments_text(input)) {
                    emit(
                        "content_block_delta",
                        json!({"index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    );
                }
            }
            _ => {}
        }
        emit("content_block_stop", json!({"index": index}));
    }
    emit(
        "message_delta",
        json!({"delta": {"stop_reason": stop_reason(response.stop_reason), "stop_sequence": null},
            "usage": {"output_tokens": response.usage.output_tokens}}),
    );
    emit("message_stop", json!({}));
    events
}

/// The status and Anthropic error body for `failure`.
pub fn error_body(failure: &Failure) -> (u16, Value) {
    super::anthropic_error_body(failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::encode;
    use crate::serve::tests::{parse_sse, rich_request, rich_response};
    use crate::{WireOptions, anthropic};

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
            let body = anthropic::request_body(&request, &options).unwrap();
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
            assert_eq!(
                anthropic::parse_response(&body).unwrap(),
                response,
                "{reason:?}"
            );
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
            let mut stream = anthropic::Stream::new(None);
            let mut done = false;
            for event in parse_sse(&encode(&events)) {
                assert!(!done, "an event after message_stop");
                done = stream.event(&event).unwrap();
            }
            assert!(done);
            assert_eq!(stream.finish().unwrap(), response, "{reason:?}");
        }
    }
}
