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
//!
//! A `namespace` tool (Codex CLI offers an MCP server's tools as one,
//! such as `mcp__hane` holding `echo`) becomes one function per tool,
//! named `{namespace}__{name}` (`mcp__hane__echo`), and a `function_call`
//! item with a `namespace` is read under that joined name; a call of a
//! tool named `mcp__{server}__{name}` is answered as a `function_call` of
//! `name` in the namespace `mcp__{server}`, which is how such a client
//! finds its MCP tools.

use serde_json::{Map, Value, json};

use super::{
    Calls, Failure, Inbound, InboundError, SentBlocks, SseOut, array, as_object, at, data_url,
    ends_in_tool, field, flag, object, optional_f64, optional_str, optional_u64, push,
    required_str,
};
use crate::{
    Content, ModelRequest, ModelResponse, Role, StopReason, StreamEvent, ToolChoice, ToolSpec,
};

mod stream;

pub use stream::StreamWriter;

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
        let p = at("/tools", i);
        if tool.get("type").and_then(Value::as_str) == Some("namespace") {
            let namespace = required_str(as_object(tool, &p)?, &p, "name")?;
            for (j, inner) in array(as_object(tool, &p)?, &p, "tools")?.iter().enumerate() {
                let mut spec = tool_spec(inner, &at(&at(&p, "tools"), j))?;
                spec.name = format!("{namespace}__{}", spec.name);
                request.tools.push(spec);
            }
            continue;
        }
        request.tools.push(tool_spec(tool, &p)?);
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
            let name = match optional_str(item, p, "namespace")? {
                Some(namespace) => format!("{namespace}__{}", required_str(item, p, "name")?),
                None => required_str(item, p, "name")?.to_owned(),
            };
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
                name,
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
            } => items.push(function_call(
                json!({"type": "function_call", "id": format!("fc_{id}_{}", items.len()),
                "call_id": call_id, "arguments": crate::arguments_text(input),
                "status": "completed"}),
                name,
            )),
            _ => {}
        }
    }
    items
}

/// A `function_call` item with its `name`, and its `namespace` when the
/// name is an MCP tool's joined name (`mcp__{server}__{name}`).
fn function_call(mut item: Value, name: &str) -> Value {
    let split = name
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
        .filter(|(server, tool)| !server.is_empty() && !tool.is_empty());
    match split {
        Some((server, tool)) => {
            item["namespace"] = json!(format!("mcp__{server}"));
            item["name"] = json!(tool);
        }
        None => item["name"] = json!(name),
    }
    item
}

/// A finished response's `status` and `incomplete_details`.
fn status(response: &ModelResponse) -> (&'static str, Value) {
    match response.stop_reason {
        StopReason::MaxTokens => ("incomplete", json!({"reason": "max_output_tokens"})),
        StopReason::Refusal => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

fn usage(response: &ModelResponse) -> Value {
    let u = response.usage;
    json!({
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.total(),
    })
}

/// A `response` object.
fn envelope(
    id: &str,
    model: &str,
    (status, incomplete): (&str, Value),
    output: Vec<Value>,
    usage: Value,
) -> Value {
    json!({
        "id": id,
        "object": "response",
        "created_at": 0,
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "model": model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "store": false,
        "usage": usage,
    })
}

/// The `response` object for `response`: `completed`, or `incomplete`
/// with `incomplete_details.reason` `max_output_tokens` (the cap) or
/// `content_filter` (a refusal). `created_at` is 0: these functions read
/// no clock.
pub fn response_body(response: &ModelResponse, id: &str) -> Value {
    envelope(
        id,
        &response.model,
        status(response),
        output(response, id),
        usage(response),
    )
}

/// The events OpenAI streams for `response`: what a [`StreamWriter`]
/// writes when each block streams in pieces.
pub fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
    let mut writer = StreamWriter::new(id, &response.model, response.usage.input_tokens);
    let mut out = writer.start();
    for event in super::streamed(response) {
        out.extend(writer.event(&event));
    }
    out.extend(writer.finish(response));
    out
}

/// The status and OpenAI error body for `failure`.
pub fn error_body(failure: &Failure) -> (u16, Value) {
    super::openai_error_body(failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::encode;
    use crate::serve::tests::{
        merged, parse_sse, rate_limited, read_back, rich_request, rich_response, streamed_cases,
        upstream,
    };
    use crate::{Api, ModelError, WireOptions, arguments_text, responses};

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

    const DELTAS: [&str; 1] = ["/delta"];

    /// What `writer` writes for `events`, then the final `response`.
    fn written(
        writer: &mut StreamWriter,
        events: &[StreamEvent],
        response: &ModelResponse,
    ) -> Vec<SseOut> {
        let mut out = writer.start();
        for event in events {
            out.extend(writer.event(event));
        }
        out.extend(writer.finish(response));
        out
    }

    /// Checks that `out` is a whole stream: numbered, started, items and
    /// parts one at a time and numbered from 0, deltas inside them, ended
    /// by the response whose items are the ones streamed. Returns that
    /// response.
    fn check(out: &[SseOut]) -> Value {
        let data: Vec<Value> = out
            .iter()
            .map(|e| serde_json::from_str(&e.data).unwrap())
            .collect();
        for (n, (event, data)) in out.iter().zip(&data).enumerate() {
            assert_eq!(data["sequence_number"], n);
            assert_eq!(Some(data["type"].as_str().unwrap()), event.event.as_deref());
        }
        assert_eq!(data[0]["type"], "response.created");
        assert_eq!(data[1]["type"], "response.in_progress");
        let last = &data[data.len() - 1];
        assert!(
            last["type"] == "response.completed" || last["type"] == "response.incomplete",
            "{last}"
        );
        let mut ids = Vec::new();
        let mut item: Option<(u64, String, bool)> = None;
        let mut part: Option<u64> = None;
        let mut parts = 0;
        for data in &data[2..data.len() - 1] {
            let kind = data["type"].as_str().unwrap();
            let at = |item: &Option<(u64, String, bool)>, call: bool| {
                let (index, id, is_call) = item.as_ref().expect("an event outside an item");
                assert_eq!(data["output_index"], *index);
                if kind != "response.output_item.done" {
                    assert_eq!(data["item_id"], id.as_str());
                }
                assert_eq!(*is_call, call, "{kind} in the wrong item");
            };
            match kind {
                "response.output_item.added" => {
                    assert!(item.is_none(), "an item added inside another");
                    assert_eq!(data["output_index"], ids.len());
                    let id = data["item"]["id"].as_str().unwrap().to_owned();
                    ids.push(id.clone());
                    item = Some((
                        ids.len() as u64 - 1,
                        id,
                        data["item"]["type"] == "function_call",
                    ));
                    parts = 0;
                }
                "response.content_part.added" => {
                    at(&item, false);
                    assert!(part.is_none());
                    assert_eq!(data["content_index"], parts);
                    part = Some(parts);
                    parts += 1;
                }
                "response.output_text.delta" | "response.output_text.done" => {
                    at(&item, false);
                    assert_eq!(data["content_index"], part.expect("text outside a part"));
                }
                "response.content_part.done" => {
                    at(&item, false);
                    assert_eq!(data["content_index"], part.take().expect("no part open"));
                }
                "response.function_call_arguments.delta"
                | "response.function_call_arguments.done" => at(&item, true),
                "response.output_item.done" => {
                    let call = data["item"]["type"] == "function_call";
                    at(&item, call);
                    assert!(part.is_none(), "an item done with a part open");
                    assert_eq!(data["item"]["id"], item.take().unwrap().1.as_str());
                }
                other => panic!("unexpected {other}"),
            }
        }
        assert!(item.is_none(), "an item left open");
        let response = last["response"].clone();
        for output in response["output"].as_array().unwrap() {
            assert!(ids.iter().any(|id| output["id"] == id.as_str()), "{output}");
        }
        response
    }

    #[test]
    fn pieces_as_they_come_give_the_stream_of_the_final_response() {
        for (response, upstreams) in streamed_cases() {
            for api in upstreams {
                let (events, last) = upstream(api, &response);
                let mut writer = StreamWriter::new("id", "shown", 0);
                let out = written(&mut writer, &events, &last);
                let done = check(&out);
                assert_eq!(done, response_body(&last, "id"));
                let expected = stream_events(&last, "id");
                // The model given shows until the response is known.
                assert_eq!(
                    merged(&out[2..], &DELTAS),
                    merged(&expected[2..], &DELTAS),
                    "{api:?} {response:?}"
                );
                let back = read_back(Api::Responses, &out).unwrap();
                assert_eq!(
                    ModelResponse {
                        request_id: last.request_id.clone(),
                        ..back
                    },
                    last
                );
            }
        }
    }

    #[test]
    fn a_response_that_did_not_stream_is_written_whole_at_the_finish() {
        for (response, _) in streamed_cases() {
            let mut writer = StreamWriter::new("id", "model-x", 0);
            let mut out = writer.start();
            out.extend(writer.finish(&response));
            assert_eq!(out, stream_events(&response, "id"));
            let mut writer = StreamWriter::new("id", "model-x", 0);
            assert_eq!(writer.finish(&response), out);
            check(&out);
            assert_eq!(read_back(Api::Responses, &out).unwrap(), response);
        }
    }

    #[test]
    fn what_did_not_stream_is_written_at_the_finish() {
        let response = rich_response(StopReason::ToolUse);
        let Content::Text { text } = &response.content[0] else {
            panic!("the fixture changed");
        };
        let Content::ToolCall { id, name, input } = &response.content[1] else {
            panic!("the fixture changed");
        };
        let arguments = arguments_text(input);
        let half = |s: &str| s.chars().take(s.chars().count() / 2).collect::<String>();
        let cases = [
            vec![StreamEvent::TextDelta {
                index: 0,
                text: half(text),
            }],
            vec![
                StreamEvent::TextDelta {
                    index: 0,
                    text: text.clone(),
                },
                StreamEvent::ToolCallStart {
                    index: 1,
                    id: id.clone(),
                    name: name.clone(),
                },
                StreamEvent::ToolCallDelta {
                    index: 1,
                    json: half(&arguments),
                },
            ],
        ];
        for events in cases {
            let mut writer = StreamWriter::new("id", "model-x", 0);
            let out = written(&mut writer, &events, &response);
            check(&out);
            assert_eq!(
                merged(&out, &DELTAS),
                merged(&stream_events(&response, "id"), &DELTAS)
            );
            assert_eq!(read_back(Api::Responses, &out).unwrap(), response);
        }
    }

    #[test]
    fn a_response_that_contradicts_the_stream_still_ends_it_well() {
        let response = rich_response(StopReason::ToolUse);
        let final_output = response_body(&response, "id")["output"].clone();
        let text = |index, text: &str| StreamEvent::TextDelta {
            index,
            text: text.into(),
        };
        let call = |index, id: &str| StreamEvent::ToolCallStart {
            index,
            id: id.into(),
            name: "other".into(),
        };
        let json = |index, json: &str| StreamEvent::ToolCallDelta {
            index,
            json: json.into(),
        };
        // The final response wins in what closes the stream, where the
        // streamed blocks line up with its blocks.
        let lined_up = [
            // Text the final text does not extend.
            vec![text(0, "Hello wor")],
            // Calls with other ids, names and arguments.
            vec![
                text(0, "Checking"),
                call(1, "call_z"),
                json(1, "{\"x\":"),
                call(2, "call_y"),
            ],
        ];
        for (n, events) in lined_up.into_iter().enumerate() {
            let mut writer = StreamWriter::new("id", "model-x", 0);
            let out = written(&mut writer, &events, &response);
            let done = check(&out);
            assert_eq!(done["output"], final_output);
            if n == 0 {
                // The text was still open: its done event has the final
                // text (the second case's was done when the call began).
                let text_done = out
                    .iter()
                    .find(|e| e.event.as_deref() == Some("response.output_text.done"))
                    .unwrap();
                let text_done: Value = serde_json::from_str(&text_done.data).unwrap();
                assert_eq!(text_done["text"], final_output[0]["content"][0]["text"]);
            }
            read_back(Api::Responses, &out).unwrap();
        }
        let others = [
            // More calls than the final response has.
            vec![
                text(0, "Checking"),
                call(1, "call_a"),
                call(2, "call_b"),
                call(3, "call_x"),
            ],
            // A call where the final response has text, and text for it.
            vec![call(0, "call_a"), text(0, "late")],
            // Blocks interleaved, and arguments with no start.
            vec![
                text(5, "x"),
                json(2, "{"),
                text(5, "z"),
                text(7, ""),
                json(2, "}"),
            ],
        ];
        for events in others {
            let mut writer = StreamWriter::new("id", "model-x", 0);
            let out = written(&mut writer, &events, &response);
            let done = check(&out);
            // Only blocks the final response has.
            assert_eq!(done["output"].as_array().unwrap().len(), 3, "{done}");
            let back = read_back(Api::Responses, &out).unwrap();
            assert_eq!(back.usage, response.usage);
        }
    }

    #[test]
    fn a_piece_of_an_item_done_already_is_in_the_completed_response() {
        // Chat Completions has one text: text after a tool call extends
        // the first block, whose item is done by then.
        let mut response = rich_response(StopReason::ToolUse);
        response.content.truncate(2);
        response.content.push(Content::text(" Then more."));
        let (events, last) = upstream(Api::ChatCompletions, &response);
        assert_eq!(last.content.len(), 2);
        let mut writer = StreamWriter::new("id", "model-x", 0);
        let out = written(&mut writer, &events, &last);
        let done = check(&out);
        assert_eq!(done, response_body(&last, "id"));
    }

    #[test]
    fn a_failure_after_the_start_is_an_error_and_a_failed_response() {
        let mut writer = StreamWriter::new("resp_1", "m", 10);
        let mut out = writer.start();
        out.extend(writer.event(&StreamEvent::TextDelta {
            index: 0,
            text: "Hi".into(),
        }));
        let failed = writer.fail(&rate_limited());
        let names: Vec<_> = failed.iter().map(|e| e.event.as_deref().unwrap()).collect();
        assert_eq!(names, ["error", "response.failed"]);
        let error: Value = serde_json::from_str(&failed[0].data).unwrap();
        // What the openai SDK raises: an `error` event with an `error`
        // object that has a message.
        assert_eq!(error["error"], error_body(&rate_limited()).1["error"]);
        assert_eq!(
            error["error"]["message"],
            "rate limited by the provider: slow down"
        );
        assert_eq!(error["message"], error["error"]["message"]);
        assert_eq!(error["code"], "rate_limit_exceeded");
        // What Codex reads: the failed response's error.
        let failed_response: Value = serde_json::from_str(&failed[1].data).unwrap();
        assert_eq!(failed_response["response"]["status"], "failed");
        assert_eq!(failed_response["response"]["id"], "resp_1");
        assert_eq!(
            failed_response["response"]["error"]["code"],
            "rate_limit_exceeded"
        );
        out.extend(failed);
        for (n, event) in out.iter().enumerate() {
            let data: Value = serde_json::from_str(&event.data).unwrap();
            assert_eq!(data["sequence_number"], n);
        }
        assert!(matches!(
            read_back(Api::Responses, &out),
            Err(ModelError::RateLimited { .. })
        ));
        // Each of the two events alone reads as the error.
        for one in &out[out.len() - 2..] {
            let mut stream = responses::Stream::new(None);
            let event = &parse_sse(&encode(std::slice::from_ref(one)))[0];
            assert!(matches!(
                stream.event(event),
                Err(ModelError::RateLimited { .. })
            ));
        }
        assert!(
            writer
                .finish(&rich_response(StopReason::EndTurn))
                .is_empty()
        );
        assert!(writer.fail(&rate_limited()).is_empty());
    }
}
