//! Serving OpenAI Responses: a client's `POST /responses` body as the
//! normalized request, and the normalized response as a `response` object
//! or its named event stream.
//!
//! `instructions` and `system`/`developer` input messages make the system
//! text; `function_call` items join the assistant message before them and
//! `function_call_output` items the user message before them; `reasoning`
//! items (which a stateless client sends back) are dropped. Refused:
//! `previous_response_id` and `conversation` (hane keeps no responses),
//! `background`, built-in tools (`web_search`, `file_search`, …) and tool
//! choices of them, structured output (`text.format` other than `text`),
//! `prompt` templates, file and audio inputs, image URLs that are not data
//! URLs, other item types, and a call output whose call is not in the
//! input.

use serde_json::{Map, Value, json};

use super::{
    Calls, Failure, Inbound, InboundError, SseOut, array, as_object, at, data_url, ends_in_tool,
    field, flag, object, optional_f64, optional_str, optional_u64, pieces, push, required_str,
};
use crate::{Content, ModelRequest, ModelResponse, Role, StopReason, ToolChoice, ToolSpec};

/// The normalized request for a Responses request body.
///
/// # Errors
///
/// [`InboundError`] for a malformed body or what hane cannot translate.
pub fn parse_request(body: &Value) -> Result<Inbound, InboundError> {
    let map = object(body)?;
    for key in ["previous_response_id", "conversation", "prompt"] {
        if field(map, key).is_some() {
            return Err(InboundError::new(
                at("", key),
                "hane keeps no stored responses or prompts; send the whole input",
            ));
        }
    }
    if flag(map, "", "background")? {
        return Err(InboundError::new(
            "/background",
            "background responses are not supported",
        ));
    }
    if let Some(format) = field(map, "text").and_then(|t| t.get("format"))
        && format.get("type").and_then(Value::as_str) != Some("text")
    {
        return Err(InboundError::new(
            "/text/format/type",
            "structured output is not supported",
        ));
    }
    let mut request = ModelRequest::new(required_str(map, "", "model")?);
    let mut system = Vec::new();
    if let Some(instructions) = optional_str(map, "", "instructions")? {
        system.push(instructions.to_owned());
    }
    let mut calls = Calls::default();
    match field(map, "input") {
        Some(Value::String(text)) => request.messages.push(crate::Message::user(text.clone())),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                input_item(
                    item,
                    &at("/input", i),
                    &mut request,
                    &mut system,
                    &mut calls,
                )?;
            }
        }
        Some(_) => {
            return Err(InboundError::new(
                "/input",
                "must be a string or an array of items",
            ));
        }
        None => return Err(InboundError::new("/input", "is required")),
    }
    request.system = super::system(system);
    for (i, tool) in array(map, "", "tools")?.iter().enumerate() {
        request.tools.push(tool_spec(tool, &at("/tools", i))?);
    }
    if let Some(choice) = field(map, "tool_choice") {
        request.tool_choice = tool_choice(choice)?;
    }
    request.max_output_tokens = optional_u64(map, "max_output_tokens")?;
    request.temperature = optional_f64(map, "temperature")?;
    let stream = flag(map, "", "stream")?;
    Ok(Inbound {
        request,
        stream,
        include_usage: true,
    })
}

fn input_item(
    item: &Value,
    p: &str,
    request: &mut ModelRequest,
    system: &mut Vec<String>,
    calls: &mut Calls,
) -> Result<(), InboundError> {
    let item = as_object(item, p)?;
    let kind = match optional_str(item, p, "type")? {
        Some(kind) => kind,
        None if item.contains_key("role") => "message",
        None => return Err(InboundError::new(at(p, "type"), "is required")),
    };
    match kind {
        "message" => {
            let role = required_str(item, p, "role")?;
            let blocks = message_content(item, p, role)?;
            match role {
                "system" | "developer" => system.push(
                    blocks
                        .into_iter()
                        .map(|b| match b {
                            Content::Text { text } => text,
                            _ => String::new(),
                        })
                        .collect(),
                ),
                "user" => push(&mut request.messages, Role::User, blocks, ends_in_tool),
                "assistant" => push(&mut request.messages, Role::Assistant, blocks, ends_in_tool),
                other => {
                    return Err(InboundError::new(
                        at(p, "role"),
                        format!("the role {other:?} is not supported"),
                    ));
                }
            }
        }
        "function_call" => {
            let call_id = required_str(item, p, "call_id")?;
            let name = required_str(item, p, "name")?;
            let raw = optional_str(item, p, "arguments")?.unwrap_or_default();
            let input = if raw.trim().is_empty() {
                json!({})
            } else {
                match serde_json::from_str::<Value>(raw) {
                    Ok(object @ Value::Object(_)) => object,
                    _ => {
                        return Err(InboundError::new(
                            at(p, "arguments"),
                            "must be the JSON text of an object",
                        ));
                    }
                }
            };
            calls.add(call_id);
            let call = Content::ToolCall {
                id: call_id.to_owned(),
                name: name.to_owned(),
                input,
            };
            push(&mut request.messages, Role::Assistant, vec![call], |_| true);
        }
        "function_call_output" => {
            let call_id = required_str(item, p, "call_id")?;
            calls.check(call_id, &at(p, "call_id"))?;
            let content = match field(item, "output") {
                None => String::new(),
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => {
                    let mut text = String::new();
                    for (j, part) in parts.iter().enumerate() {
                        let pp = at(&at(p, "output"), j);
                        let part = as_object(part, &pp)?;
                        match required_str(part, &pp, "type")? {
                            "input_text" | "output_text" => {
                                text.push_str(required_str(part, &pp, "text")?);
                            }
                            other => {
                                return Err(InboundError::new(
                                    at(&pp, "type"),
                                    format!("a {other:?} call output part is not supported"),
                                ));
                            }
                        }
                    }
                    text
                }
                Some(_) => {
                    return Err(InboundError::new(
                        at(p, "output"),
                        "must be a string or an array of parts",
                    ));
                }
            };
            let result = Content::ToolResult {
                call_id: call_id.to_owned(),
                content,
                is_error: false,
            };
            push(&mut request.messages, Role::User, vec![result], |_| true);
        }
        "reasoning" => {}
        other => {
            return Err(InboundError::new(
                at(p, "type"),
                format!("a {other:?} input item is not supported"),
            ));
        }
    }
    Ok(())
}

fn message_content(
    item: &Map<String, Value>,
    p: &str,
    role: &str,
) -> Result<Vec<Content>, InboundError> {
    let parts = match field(item, "content") {
        None => return Ok(Vec::new()),
        Some(Value::String(text)) => return Ok(vec![Content::text(text.clone())]),
        Some(Value::Array(parts)) => parts,
        Some(_) => {
            return Err(InboundError::new(
                at(p, "content"),
                "must be a string or an array of parts",
            ));
        }
    };
    let mut blocks = Vec::new();
    for (j, part) in parts.iter().enumerate() {
        let pp = at(&at(p, "content"), j);
        let part = as_object(part, &pp)?;
        match required_str(part, &pp, "type")? {
            "input_text" | "output_text" | "text" => {
                blocks.push(Content::text(required_str(part, &pp, "text")?));
            }
            "refusal" => blocks.push(Content::text(required_str(part, &pp, "refusal")?)),
            "input_image" if role == "user" => {
                if field(part, "file_id").is_some() {
                    return Err(InboundError::new(
                        at(&pp, "file_id"),
                        "images by file id are not supported",
                    ));
                }
                let url = required_str(part, &pp, "image_url")?;
                let (media_type, data) = data_url(url, &at(&pp, "image_url"))?;
                blocks.push(Content::Image { media_type, data });
            }
            other => {
                return Err(InboundError::new(
                    at(&pp, "type"),
                    format!("a {other:?} part is not supported in a {role} message"),
                ));
            }
        }
    }
    Ok(blocks)
}

fn tool_spec(tool: &Value, p: &str) -> Result<ToolSpec, InboundError> {
    let tool = as_object(tool, p)?;
    let kind = required_str(tool, p, "type")?;
    if kind != "function" {
        return Err(InboundError::new(
            at(p, "type"),
            format!("the built-in tool {kind:?} is not supported, only functions"),
        ));
    }
    Ok(ToolSpec {
        name: required_str(tool, p, "name")?.to_owned(),
        description: optional_str(tool, p, "description")?
            .unwrap_or_default()
            .to_owned(),
        input_schema: field(tool, "parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

fn tool_choice(choice: &Value) -> Result<ToolChoice, InboundError> {
    match choice {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(InboundError::new(
                "/tool_choice",
                format!("the tool choice {other:?} is not supported"),
            )),
        },
        Value::Object(map) => match map.get("type").and_then(Value::as_str) {
            Some("function") => {
                let name = map
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| InboundError::new("/tool_choice/name", "is required"))?;
                Ok(ToolChoice::Tool {
                    name: name.to_owned(),
                })
            }
            _ => Err(InboundError::new(
                "/tool_choice/type",
                "only a function tool choice is supported",
            )),
        },
        _ => Err(InboundError::new(
            "/tool_choice",
            "must be a string or an object",
        )),
    }
}

/// The output items: consecutive text blocks are the `output_text` parts
/// of one `message` item, each tool call a `function_call` item.
fn output(response: &ModelResponse, id: &str) -> Vec<Value> {
    let mut items: Vec<Value> = Vec::new();
    for block in &response.content {
        match block {
            Content::Text { text } => {
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                match items.last_mut() {
                    Some(item) if item["type"] == "message" => {
                        if let Some(parts) = item["content"].as_array_mut() {
                            parts.push(part);
                        }
                    }
                    _ => items.push(
                        json!({"type": "message", "id": format!("msg_{id}_{}", items.len()),
                        "status": "completed", "role": "assistant", "content": [part]}),
                    ),
                }
            }
            Content::ToolCall {
                id: call_id,
                name,
                input,
            } => items.push(json!({"type": "function_call",
                "id": format!("fc_{id}_{}", items.len()), "call_id": call_id, "name": name,
                "arguments": crate::arguments_text(input), "status": "completed"})),
            _ => {}
        }
    }
    items
}

/// The `response` object with `status`, `output` and `usage`.
fn response_object(response: &ModelResponse, id: &str, done: bool) -> Value {
    let (status, incomplete) = match response.stop_reason {
        _ if !done => ("in_progress", Value::Null),
        StopReason::MaxTokens => ("incomplete", json!({"reason": "max_output_tokens"})),
        StopReason::Refusal => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    };
    let u = response.usage;
    json!({
        "id": id,
        "object": "response",
        "created_at": 0,
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "model": response.model,
        "output": if done { Value::Array(output(response, id)) } else { json!([]) },
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "store": false,
        "usage": if done { json!({
            "input_tokens": u.input_tokens,
            "input_tokens_details": {"cached_tokens": u.cached_tokens},
            "output_tokens": u.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u.total(),
        }) } else { Value::Null },
    })
}

/// The `response` object for `response`: `completed`, or `incomplete`
/// with `incomplete_details.reason` `max_output_tokens` (the cap) or
/// `content_filter` (a refusal). `created_at` is 0: these functions read
/// no clock.
pub fn response_body(response: &ModelResponse, id: &str) -> Value {
    response_object(response, id, true)
}

/// The events OpenAI streams for `response`: `response.created`,
/// `response.in_progress`, each output item (added; for a message each
/// part added, its text deltas, text done, part done; for a call its
/// argument deltas and arguments done; item done), then
/// `response.completed` (or `response.incomplete`) with the whole
/// response. Each event is named and numbered by `sequence_number`.
pub fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
    let mut events = Vec::new();
    let mut emit = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(events.len());
        events.push(SseOut::named(kind, &data));
    };
    let start = response_object(response, id, false);
    emit("response.created", json!({"response": start}));
    emit("response.in_progress", json!({"response": start}));
    for (index, item) in output(response, id).into_iter().enumerate() {
        let item_id = item["id"].clone();
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        if item["type"] == "message" {
            added["content"] = json!([]);
            emit(
                "response.output_item.added",
                json!({"output_index": index, "item": added}),
            );
            for (part_index, part) in item["content"].as_array().into_iter().flatten().enumerate() {
                let at = json!({"item_id": item_id, "output_index": index,
                    "content_index": part_index});
                let with = |mut value: Value, extra: Value| {
                    if let (Some(value), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
                        value.extend(extra.clone());
                    }
                    value
                };
                emit(
                    "response.content_part.added",
                    with(
                        at.clone(),
                        json!({"part": {"type": "output_text", "text": "", "annotations": []}}),
                    ),
                );
                let text = part["text"].as_str().unwrap_or_default();
                for piece in pieces(text) {
                    emit(
                        "response.output_text.delta",
                        with(at.clone(), json!({"delta": piece, "logprobs": []})),
                    );
                }
                emit(
                    "response.output_text.done",
                    with(at.clone(), json!({"text": text, "logprobs": []})),
                );
                emit(
                    "response.content_part.done",
                    with(at.clone(), json!({"part": part})),
                );
            }
        } else {
            added["arguments"] = json!("");
            emit(
                "response.output_item.added",
                json!({"output_index": index, "item": added}),
            );
            let arguments = item["arguments"].as_str().unwrap_or_default();
            for piece in pieces(arguments) {
                emit(
                    "response.function_call_arguments.delta",
                    json!({"item_id": item_id, "output_index": index, "delta": piece}),
                );
            }
            emit(
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": index, "arguments": arguments}),
            );
        }
        emit(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
    }
    let done = response_object(response, id, true);
    let kind = if done["status"] == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    emit(kind, json!({"response": done}));
    events
}

/// The status and OpenAI error body for `failure`.
pub fn error_body(failure: &Failure) -> (u16, Value) {
    super::openai_error_body(failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::encode;
    use crate::serve::tests::{parse_sse, rich_request, rich_response};
    use crate::{WireOptions, responses};

    #[test]
    fn a_request_round_trips_through_the_outbound_format_except_is_error() {
        // The Responses API has no stop sequences (the outbound side
        // refuses them).
        let mut request = rich_request();
        request.stop.clear();
        for stream in [false, true] {
            let options = WireOptions {
                stream,
                parallel_tool_calls: None,
            };
            let body = responses::request_body(&request, &options).unwrap();
            let inbound = parse_request(&body).unwrap();
            assert_eq!(inbound.stream, stream);
            // A call output has no is_error.
            let mut expected = request.clone();
            let Content::ToolResult { is_error, .. } = &mut expected.messages[2].content[1] else {
                panic!("the fixture changed");
            };
            *is_error = false;
            assert_eq!(inbound.request, expected);
        }
    }

    #[test]
    fn what_clients_send_is_accepted() {
        let body = json!({
            "model": "m",
            "instructions": "A",
            "input": [
                {"role": "developer", "content": "B"},
                {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "xx"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""},
                {"type": "function_call_output", "call_id": "c1",
                 "output": [{"type": "input_text", "text": "ok"}]},
            ],
            "tools": [{"type": "function", "name": "f", "strict": false,
                "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "f"},
            "max_output_tokens": 99,
            "store": false,
            "parallel_tool_calls": true,
            "reasoning": {"effort": "low", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "metadata": {"a": "b"},
            "user": "u",
            "text": {"format": {"type": "text"}, "verbosity": "low"},
            "stream": true,
        });
        let inbound = parse_request(&body).unwrap();
        assert!(inbound.stream);
        let r = inbound.request;
        assert_eq!(r.system.as_deref(), Some("A\n\nB"));
        assert_eq!(r.messages.len(), 3);
        assert_eq!(r.messages[1].role, Role::Assistant);
        assert_eq!(
            r.messages[2].content,
            vec![Content::ToolResult {
                call_id: "c1".into(),
                content: "ok".into(),
                is_error: false
            }]
        );
        assert_eq!(r.tool_choice, ToolChoice::Tool { name: "f".into() });
        assert_eq!(r.max_output_tokens, Some(99));
        let inbound = parse_request(&json!({"model": "m", "input": "hello"})).unwrap();
        assert_eq!(
            inbound.request.messages,
            vec![crate::Message::user("hello")]
        );
    }

    #[test]
    fn what_cannot_be_translated_is_refused_where_it_is() {
        let base = json!({"model": "m", "input": "hi"});
        let with = |key: &str, value: Value| {
            let mut body = base.clone();
            body[key] = value;
            parse_request(&body).unwrap_err().pointer
        };
        assert_eq!(
            with("tools", json!([{"type": "web_search"}])),
            "/tools/0/type"
        );
        assert_eq!(
            with("tool_choice", json!({"type": "web_search_preview"})),
            "/tool_choice/type"
        );
        assert_eq!(
            with("previous_response_id", json!("resp_1")),
            "/previous_response_id"
        );
        assert_eq!(with("background", json!(true)), "/background");
        assert_eq!(
            with(
                "text",
                json!({"format": {"type": "json_schema", "schema": {}}})
            ),
            "/text/format/type"
        );
        assert_eq!(with("input", json!(3)), "/input");
        let input = |input: Value| {
            parse_request(&json!({"model": "m", "input": input}))
                .unwrap_err()
                .pointer
        };
        assert_eq!(
            input(json!([{"role": "user", "content": [
                {"type": "input_text", "text": "a"}, {"type": "input_file", "file_id": "f"}]}])),
            "/input/0/content/1/type"
        );
        assert_eq!(
            input(json!([{"role": "user", "content": [
                {"type": "input_image", "image_url": "https://x/y.png"}]}])),
            "/input/0/content/0/image_url"
        );
        assert_eq!(
            input(json!([{"type": "function_call_output", "call_id": "c9", "output": "x"}])),
            "/input/0/call_id"
        );
        assert_eq!(
            input(
                json!([{"type": "function_call", "call_id": "c", "name": "f",
                "arguments": "\"x\""}])
            ),
            "/input/0/arguments"
        );
        assert_eq!(
            input(json!([{"type": "web_search_call", "id": "w"}])),
            "/input/0/type"
        );
    }

    #[test]
    fn a_response_body_parses_back() {
        for reason in [
            StopReason::EndTurn,
            StopReason::ToolUse,
            StopReason::MaxTokens,
            StopReason::Refusal,
        ] {
            let mut response = rich_response(reason);
            if reason == StopReason::EndTurn {
                // Tool calls in a completed response mean tool use.
                response.content.truncate(1);
            }
            let body = response_body(&response, "id");
            assert_eq!(body["object"], "response");
            assert_eq!(
                responses::parse_response(&body).unwrap(),
                response,
                "{reason:?}"
            );
        }
        let body = response_body(&rich_response(StopReason::MaxTokens), "id");
        assert_eq!(body["status"], "incomplete");
        assert_eq!(body["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(body["usage"]["input_tokens_details"]["cached_tokens"], 1024);
        assert_eq!(body["usage"]["total_tokens"], 1280);
        assert_eq!(body["output"][1]["call_id"], "call_a");
        // A stop sequence reads back as the end of a turn: the format
        // tells them not apart.
        let mut response = rich_response(StopReason::StopSequence);
        response.content.truncate(1);
        let back = responses::parse_response(&response_body(&response, "id")).unwrap();
        assert_eq!(back.stop_reason, StopReason::EndTurn);
    }

    #[test]
    fn the_stream_assembles_the_response() {
        for reason in [
            StopReason::EndTurn,
            StopReason::ToolUse,
            StopReason::MaxTokens,
            StopReason::Refusal,
        ] {
            let mut response = rich_response(reason);
            if reason == StopReason::EndTurn {
                response.content.truncate(1);
            }
            // Two text blocks around a call: separate items and parts.
            response.content.push(Content::text("And one more thing."));
            let events = stream_events(&response, "id");
            for (n, event) in events.iter().enumerate() {
                let data: Value = serde_json::from_str(&event.data).unwrap();
                assert_eq!(data["sequence_number"], n);
                assert_eq!(Some(data["type"].as_str().unwrap()), event.event.as_deref());
            }
            assert_eq!(events[0].event.as_deref(), Some("response.created"));
            assert_eq!(events[1].event.as_deref(), Some("response.in_progress"));
            let mut stream = responses::Stream::new(None);
            let mut done = false;
            for event in parse_sse(&encode(&events)) {
                assert!(!done, "an event after the end");
                done = stream.event(&event).unwrap();
            }
            assert!(done);
            let back = stream.finish().unwrap();
            if reason == StopReason::EndTurn {
                // Text blocks in a row are one streamed part each; the
                // stream keeps them apart as well.
                assert_eq!(back.content.len(), 2);
            }
            assert_eq!(back, response, "{reason:?}");
        }
    }
}
