//! Responses requests both ways: the normalized request encoded as the
//! body hane sends a provider ([`request_body`]), and the body a gateway
//! client sends decoded as the normalized request ([`parse_request`]).

use serde_json::{Map, Value, json};

use crate::dialect::assemble::arguments_text;
use crate::dialect::inbound::{
    self, Calls, array, as_object, at, content_blocks, data_url, ends_in_tool, field, flag,
    function_spec, object, object_text, openai_tool_choice, optional_f64, optional_str,
    optional_u64, push, required_str, text_parts,
};
use crate::dialect::{Inbound, InboundError, cannot_carry, misplaced};
use crate::{Content, Message, ModelError, ModelRequest, Role, ToolChoice, ToolSpec, WireOptions};

/// The messages as `input` items: each message's text and images one
/// `message` item, split where a tool call or result is its own item.
fn input_items(request: &ModelRequest) -> Result<Vec<Value>, ModelError> {
    let mut input = Vec::new();
    for (m, message) in request.messages.iter().enumerate() {
        let mut parts = Vec::new();
        let (role, text_type) = match message.role {
            Role::User => ("user", "input_text"),
            Role::Assistant => ("assistant", "output_text"),
        };
        let flush = |parts: &mut Vec<Value>, input: &mut Vec<Value>| {
            if !parts.is_empty() {
                input.push(
                    json!({"type": "message", "role": role, "content": std::mem::take(parts)}),
                );
            }
        };
        for (c, block) in message.content.iter().enumerate() {
            match (block, message.role) {
                (Content::Text { text }, _) => parts.push(json!({"type": text_type, "text": text})),
                (Content::Image { media_type, data }, Role::User) => parts.push(json!({
                    "type": "input_image",
                    "image_url": format!("data:{media_type};base64,{data}")})),
                (
                    Content::ToolCall {
                        id,
                        name,
                        input: args,
                    },
                    Role::Assistant,
                ) => {
                    flush(&mut parts, &mut input);
                    input.push(json!({"type": "function_call", "call_id": id, "name": name,
                        "arguments": arguments_text(args)}));
                }
                (
                    Content::ToolResult {
                        call_id, content, ..
                    },
                    Role::User,
                ) => {
                    flush(&mut parts, &mut input);
                    input.push(json!({"type": "function_call_output", "call_id": call_id,
                        "output": content}));
                }
                (other, _) => {
                    return Err(cannot_carry("the Responses API", m, c, misplaced(other)));
                }
            }
        }
        flush(&mut parts, &mut input);
    }
    Ok(input)
}

/// The request body for `request`.
///
/// # Errors
///
/// [`ModelError::InvalidRequest`] for what this API cannot carry: stop
/// sequences, an image or tool result from the assistant, a tool call from
/// the user.
pub fn request_body(request: &ModelRequest, options: &WireOptions) -> Result<Value, ModelError> {
    if !request.stop.is_empty() {
        return Err(ModelError::InvalidRequest {
            message: "the Responses API has no stop sequences; the request sets `stop`".into(),
        });
    }
    let input = input_items(request)?;
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    if let Some(system) = &request.system {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(input));
    body.insert("store".into(), json!(false));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                "parameters": t.input_schema})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert(
            "tool_choice".into(),
            match &request.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool { name } => json!({"type": "function", "name": name}),
            },
        );
        if let Some(parallel) = options.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(parallel));
        }
    }
    if let Some(max) = request.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if options.stream {
        body.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(body))
}

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
        Some(Value::String(text)) => request.messages.push(Message::user(text.clone())),
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
    request.system = inbound::system(system);
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
        request.tool_choice = openai_tool_choice(choice, "/name")?;
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

/// One `input` item added to the request: a message (or system text), a
/// call, a call's output; `reasoning` dropped.
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
            let call = function_call(item, p, calls)?;
            push(&mut request.messages, Role::Assistant, vec![call], |_| true);
        }
        "function_call_output" => {
            let result = call_output(item, p, calls)?;
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

/// A `function_call` item as a tool call (its name joined to its
/// `namespace`, when it has one), added to `calls`.
fn function_call(
    item: &Map<String, Value>,
    p: &str,
    calls: &mut Calls,
) -> Result<Content, InboundError> {
    let call_id = required_str(item, p, "call_id")?;
    let name = match optional_str(item, p, "namespace")? {
        Some(namespace) => format!("{namespace}__{}", required_str(item, p, "name")?),
        None => required_str(item, p, "name")?.to_owned(),
    };
    let raw = optional_str(item, p, "arguments")?.unwrap_or_default();
    let input = object_text(raw, &at(p, "arguments"))?;
    calls.add(call_id);
    Ok(Content::ToolCall {
        id: call_id.to_owned(),
        name,
        input,
    })
}

/// A `function_call_output` item as the tool result of a call in
/// `calls`.
fn call_output(item: &Map<String, Value>, p: &str, calls: &Calls) -> Result<Content, InboundError> {
    let call_id = required_str(item, p, "call_id")?;
    calls.check(call_id, &at(p, "call_id"))?;
    let content = match field(item, "output") {
        None => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => text_parts(
            parts,
            &at(p, "output"),
            &["input_text", "output_text"],
            |other| format!("a {other:?} call output part is not supported"),
        )?
        .concat(),
        Some(_) => {
            return Err(InboundError::new(
                at(p, "output"),
                "must be a string or an array of parts",
            ));
        }
    };
    Ok(Content::ToolResult {
        call_id: call_id.to_owned(),
        content,
        is_error: false,
    })
}

/// A message item's content: text and refusal parts, and images from
/// the user.
fn message_content(
    item: &Map<String, Value>,
    p: &str,
    role: &str,
) -> Result<Vec<Content>, InboundError> {
    content_blocks(item, p, |part, pp| match required_str(part, pp, "type")? {
        "input_text" | "output_text" | "text" => Ok(Content::text(required_str(part, pp, "text")?)),
        "refusal" => Ok(Content::text(required_str(part, pp, "refusal")?)),
        "input_image" if role == "user" => {
            if field(part, "file_id").is_some() {
                return Err(InboundError::new(
                    at(pp, "file_id"),
                    "images by file id are not supported",
                ));
            }
            let url = required_str(part, pp, "image_url")?;
            let (media_type, data) = data_url(url, &at(pp, "image_url"))?;
            Ok(Content::Image { media_type, data })
        }
        other => Err(InboundError::new(
            at(pp, "type"),
            format!("a {other:?} part is not supported in a {role} message"),
        )),
    })
}

/// A `function` tool (a `namespace` tool is read by [`parse_request`]).
fn tool_spec(tool: &Value, p: &str) -> Result<ToolSpec, InboundError> {
    let tool = as_object(tool, p)?;
    let kind = required_str(tool, p, "type")?;
    if kind != "function" {
        return Err(InboundError::new(
            at(p, "type"),
            format!("the built-in tool {kind:?} is not supported, only functions"),
        ));
    }
    function_spec(tool, p)
}
