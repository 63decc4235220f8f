//! Chat Completions requests both ways: the normalized request encoded
//! as the body hane sends a provider ([`request_body`]), and the body a
//! gateway client sends decoded as the normalized request
//! ([`parse_request`]).

use serde_json::{Map, Value, json};

use super::call_entry;
use crate::dialect::cannot_carry;
use crate::dialect::inbound::{
    self, Calls, array, as_object, at, content_blocks, data_url, ends_in_tool, field, flag,
    function_spec, object, object_text, openai_tool_choice, optional_f64, optional_str,
    optional_u64, push, required_str, text_parts,
};
use crate::dialect::{Inbound, InboundError};
use crate::{Content, Message, ModelError, ModelRequest, Role, ToolChoice, ToolSpec, WireOptions};

/// The request body for `request`.
///
/// # Errors
///
/// [`ModelError::InvalidRequest`] for what this format cannot carry (an
/// image or a tool result in an assistant message, a tool call in a user
/// message).
pub fn request_body(request: &ModelRequest, options: &WireOptions) -> Result<Value, ModelError> {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for (m, message) in request.messages.iter().enumerate() {
        match message.role {
            Role::User => user_messages(m, &message.content, &mut messages)?,
            Role::Assistant => messages.push(assistant_message(m, &message.content)?),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert(
            "tool_choice".into(),
            match &request.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool { name } => {
                    json!({"type": "function", "function": {"name": name}})
                }
            },
        );
        if let Some(parallel) = options.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(parallel));
        }
    }
    if let Some(max) = request.max_output_tokens {
        // `max_tokens` is what most servers read; OpenAI's newer models
        // want `max_completion_tokens`. Both say the same.
        body.insert("max_tokens".into(), json!(max));
        body.insert("max_completion_tokens".into(), json!(max));
    }
    if !request.stop.is_empty() {
        body.insert("stop".into(), json!(request.stop));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if options.stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(body))
}

/// A block this format cannot carry, refused where it is.
fn refuse(m: usize, c: usize, what: &str) -> ModelError {
    cannot_carry("Chat Completions", m, c, what)
}

/// A user message's blocks as `user` messages, each tool result its own
/// `tool` message between them.
fn user_messages(m: usize, content: &[Content], out: &mut Vec<Value>) -> Result<(), ModelError> {
    let mut parts: Vec<Value> = Vec::new();
    let flush = |parts: &mut Vec<Value>, out: &mut Vec<Value>| {
        if parts.is_empty() {
            return;
        }
        let content = match parts.as_slice() {
            [one] if one["type"] == "text" => one["text"].clone(),
            _ => Value::Array(std::mem::take(parts)),
        };
        parts.clear();
        out.push(json!({"role": "user", "content": content}));
    };
    for (c, block) in content.iter().enumerate() {
        match block {
            Content::Text { text } => parts.push(json!({"type": "text", "text": text})),
            Content::Image { media_type, data } => parts.push(json!({
                "type": "image_url",
                "image_url": {"url": format!("data:{media_type};base64,{data}")}})),
            Content::ToolResult {
                call_id, content, ..
            } => {
                flush(&mut parts, out);
                out.push(json!({"role": "tool", "tool_call_id": call_id, "content": content}));
            }
            Content::ToolCall { .. } => return Err(refuse(m, c, "a tool call from the user")),
        }
    }
    flush(&mut parts, out);
    Ok(())
}

/// An assistant message: its text blocks one `content`, its tool calls
/// `tool_calls`.
fn assistant_message(m: usize, content: &[Content]) -> Result<Value, ModelError> {
    let mut text = String::new();
    let mut calls = Vec::new();
    for (c, block) in content.iter().enumerate() {
        match block {
            Content::Text { text: t } => text.push_str(t),
            Content::ToolCall { id, name, input } => calls.push(call_entry(id, name, input)),
            Content::Image { .. } => return Err(refuse(m, c, "an image from the assistant")),
            Content::ToolResult { .. } => {
                return Err(refuse(m, c, "a tool result from the assistant"));
            }
        }
    }
    let mut message = json!({"role": "assistant", "content": text});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
        if text.is_empty() {
            message["content"] = Value::Null;
        }
    }
    Ok(message)
}

/// The normalized request for a Chat Completions request body.
///
/// # Errors
///
/// [`InboundError`] for a malformed body or what hane cannot translate.
pub fn parse_request(body: &Value) -> Result<Inbound, InboundError> {
    let map = object(body)?;
    refuse_unsupported(map)?;
    let mut request = ModelRequest::new(required_str(map, "", "model")?);
    let mut system = Vec::new();
    let mut calls = Calls::default();
    for (i, message) in array(map, "", "messages")?.iter().enumerate() {
        let p = at("/messages", i);
        let message_map = as_object(message, &p)?;
        match required_str(message_map, &p, "role")? {
            "system" | "developer" => system.push(text_only(message_map, &p)?),
            "user" => {
                let blocks = user_content(message_map, &p)?;
                push(&mut request.messages, Role::User, blocks, ends_in_tool);
            }
            "assistant" => {
                let blocks = assistant_content(message_map, &p, &mut calls)?;
                request.messages.push(Message {
                    role: Role::Assistant,
                    content: blocks,
                });
            }
            "tool" => {
                let call_id = required_str(message_map, &p, "tool_call_id")?;
                calls.check(call_id, &at(&p, "tool_call_id"))?;
                let content = text_only(message_map, &p)?;
                push(
                    &mut request.messages,
                    Role::User,
                    vec![Content::ToolResult {
                        call_id: call_id.to_owned(),
                        content,
                        is_error: false,
                    }],
                    |_| true,
                );
            }
            other => {
                return Err(InboundError::new(
                    at(&p, "role"),
                    format!("the role {other:?} is not supported"),
                ));
            }
        }
    }
    request.system = inbound::system(system);
    for (i, tool) in array(map, "", "tools")?.iter().enumerate() {
        request.tools.push(tool_spec(tool, &at("/tools", i))?);
    }
    if let Some(choice) = field(map, "tool_choice") {
        request.tool_choice = openai_tool_choice(choice, "/function/name")?;
    }
    request.max_output_tokens = match optional_u64(map, "max_completion_tokens")? {
        Some(max) => Some(max),
        None => optional_u64(map, "max_tokens")?,
    };
    request.stop = match field(map, "stop") {
        Some(Value::String(stop)) => vec![stop.clone()],
        Some(Value::Array(stops)) => stops
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| InboundError::new(at("/stop", i), "must be a string"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(InboundError::new("/stop", "must be a string or an array")),
        None => Vec::new(),
    };
    request.temperature = optional_f64(map, "temperature")?;
    let stream = flag(map, "", "stream")?;
    let include_usage = match field(map, "stream_options") {
        None => false,
        Some(options) => flag(
            as_object(options, "/stream_options")?,
            "/stream_options",
            "include_usage",
        )?,
    };
    Ok(Inbound {
        request,
        stream,
        include_usage,
    })
}

/// Refuses what the body asks for that hane cannot honour.
fn refuse_unsupported(map: &Map<String, Value>) -> Result<(), InboundError> {
    if let Some(n) = field(map, "n")
        && n.as_u64() != Some(1)
    {
        return Err(InboundError::new(
            "/n",
            "only one choice (n = 1) is supported",
        ));
    }
    if field(map, "logprobs").is_some_and(|v| v != &Value::Bool(false)) {
        return Err(InboundError::new("/logprobs", "logprobs are not supported"));
    }
    if field(map, "top_logprobs").is_some_and(|v| v.as_u64() != Some(0)) {
        return Err(InboundError::new(
            "/top_logprobs",
            "logprobs are not supported",
        ));
    }
    if field(map, "audio").is_some() {
        return Err(InboundError::new("/audio", "audio output is not supported"));
    }
    if let Some(modalities) = field(map, "modalities")
        && modalities
            .as_array()
            .is_none_or(|m| m.iter().any(|m| m != "text"))
    {
        return Err(InboundError::new(
            "/modalities",
            "only the text modality is supported",
        ));
    }
    if let Some(format) = field(map, "response_format")
        && format.get("type").and_then(Value::as_str) != Some("text")
    {
        return Err(InboundError::new(
            "/response_format/type",
            "structured output (response_format) is not supported",
        ));
    }
    for legacy in ["functions", "function_call"] {
        if field(map, legacy).is_some() {
            return Err(InboundError::new(
                at("", legacy),
                "the legacy function calling fields are not supported; use tools",
            ));
        }
    }
    Ok(())
}

/// A message's content as text: a string, or text parts joined.
fn text_only(message: &Map<String, Value>, p: &str) -> Result<String, InboundError> {
    match field(message, "content") {
        None => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            Ok(text_parts(parts, &at(p, "content"), &["text"], |other| {
                format!("a {other:?} part is not supported here, only text")
            })?
            .concat())
        }
        Some(_) => Err(InboundError::new(
            at(p, "content"),
            "must be a string or an array of parts",
        )),
    }
}

/// A user message's content: text and images.
fn user_content(message: &Map<String, Value>, p: &str) -> Result<Vec<Content>, InboundError> {
    content_blocks(message, p, |part, pp| {
        match required_str(part, pp, "type")? {
            "text" => Ok(Content::text(required_str(part, pp, "text")?)),
            "image_url" => {
                let image = field(part, "image_url")
                    .ok_or_else(|| InboundError::new(at(pp, "image_url"), "is required"))?;
                let url = match image {
                    Value::String(url) => url.as_str(),
                    other => required_str(as_object(other, &at(pp, "image_url"))?, pp, "url")?,
                };
                let (media_type, data) = data_url(url, &at(&at(pp, "image_url"), "url"))?;
                Ok(Content::Image { media_type, data })
            }
            "input_audio" => Err(InboundError::new(
                at(pp, "type"),
                "audio content is not supported",
            )),
            other => Err(InboundError::new(
                at(pp, "type"),
                format!("a {other:?} part is not supported"),
            )),
        }
    })
}

/// An assistant message's content: its text (or refusal) parts, then its
/// tool calls, each added to `calls`.
fn assistant_content(
    message: &Map<String, Value>,
    p: &str,
    calls: &mut Calls,
) -> Result<Vec<Content>, InboundError> {
    let mut blocks = Vec::new();
    match field(message, "content") {
        Some(Value::String(text)) if !text.is_empty() => blocks.push(Content::text(text.clone())),
        None | Some(Value::String(_)) => {}
        Some(Value::Array(parts)) => {
            for (j, part) in parts.iter().enumerate() {
                let pp = at(&at(p, "content"), j);
                let part = as_object(part, &pp)?;
                let key = match required_str(part, &pp, "type")? {
                    "text" => "text",
                    "refusal" => "refusal",
                    other => {
                        return Err(InboundError::new(
                            at(&pp, "type"),
                            format!("a {other:?} part is not supported in an assistant message"),
                        ));
                    }
                };
                blocks.push(Content::text(required_str(part, &pp, key)?));
            }
        }
        Some(_) => {
            return Err(InboundError::new(
                at(p, "content"),
                "must be a string or an array of parts",
            ));
        }
    }
    if field(message, "audio").is_some() {
        return Err(InboundError::new(
            at(p, "audio"),
            "audio content is not supported",
        ));
    }
    for (k, call) in array(message, p, "tool_calls")?.iter().enumerate() {
        let pc = at(&at(p, "tool_calls"), k);
        let call = as_object(call, &pc)?;
        if let Some(kind) = optional_str(call, &pc, "type")?
            && kind != "function"
        {
            return Err(InboundError::new(
                at(&pc, "type"),
                format!("a {kind:?} tool call is not supported"),
            ));
        }
        let id = required_str(call, &pc, "id")?;
        let pf = at(&pc, "function");
        let function = as_object(
            field(call, "function").ok_or_else(|| InboundError::new(&pf, "is required"))?,
            &pf,
        )?;
        let name = required_str(function, &pf, "name")?;
        let input = arguments(field(function, "arguments"), &at(&pf, "arguments"))?;
        calls.add(id);
        blocks.push(Content::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            input,
        });
    }
    Ok(blocks)
}

/// A tool call's `arguments` (a JSON string, or the object itself) as its
/// input object.
fn arguments(raw: Option<&Value>, pointer: &str) -> Result<Value, InboundError> {
    match raw {
        None => Ok(json!({})),
        Some(Value::String(text)) => object_text(text, pointer),
        Some(object @ Value::Object(_)) => Ok(object.clone()),
        Some(_) => Err(InboundError::new(
            pointer,
            "must be the JSON text of an object",
        )),
    }
}

/// A `function` tool.
fn tool_spec(tool: &Value, p: &str) -> Result<ToolSpec, InboundError> {
    let tool = as_object(tool, p)?;
    let kind = required_str(tool, p, "type")?;
    if kind != "function" {
        return Err(InboundError::new(
            at(p, "type"),
            format!("a {kind:?} tool is not supported, only functions"),
        ));
    }
    let pf = at(p, "function");
    let function = as_object(
        field(tool, "function").ok_or_else(|| InboundError::new(&pf, "is required"))?,
        &pf,
    )?;
    function_spec(function, &pf)
}
