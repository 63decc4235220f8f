//! Messages requests both ways: the normalized request encoded as the
//! body hane sends a provider ([`request_body`]), and the body a gateway
//! client sends decoded as the normalized request ([`parse_request`]).

use serde_json::{Map, Value, json};

use super::DEFAULT_MAX_TOKENS;
use crate::dialect::inbound::{
    self, Calls, array, as_object, at, field, flag, object, optional_f64, optional_str,
    required_str, text_parts,
};
use crate::dialect::{Inbound, InboundError, cannot_carry, misplaced};
use crate::{Content, Message, ModelError, ModelRequest, Role, ToolChoice, ToolSpec, WireOptions};

/// The request body for `request`.
///
/// # Errors
///
/// [`ModelError::InvalidRequest`] for what this API cannot carry: an image
/// or tool result from the assistant, a tool call from the user.
pub fn request_body(request: &ModelRequest, options: &WireOptions) -> Result<Value, ModelError> {
    let mut messages = Vec::new();
    for (m, message) in request.messages.iter().enumerate() {
        let mut blocks = Vec::new();
        for (c, block) in message.content.iter().enumerate() {
            blocks.push(match (block, message.role) {
                (Content::Text { text }, _) => json!({"type": "text", "text": text}),
                (Content::Image { media_type, data }, Role::User) => json!({"type": "image",
                    "source": {"type": "base64", "media_type": media_type, "data": data}}),
                (Content::ToolCall { id, name, input }, Role::Assistant) => {
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                }
                (
                    Content::ToolResult {
                        call_id,
                        content,
                        is_error,
                    },
                    Role::User,
                ) => {
                    let mut result = json!({"type": "tool_result", "tool_use_id": call_id,
                        "content": content});
                    if *is_error {
                        result["is_error"] = json!(true);
                    }
                    result
                }
                (other, _) => {
                    return Err(cannot_carry("Anthropic Messages", m, c, misplaced(other)));
                }
            });
        }
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({"role": role, "content": blocks}));
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert(
        "max_tokens".into(),
        json!(request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if let Some(system) = &request.system {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description,
                "input_schema": t.input_schema})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let mut choice = match &request.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool { name } => json!({"type": "tool", "name": name}),
        };
        if let Some(parallel) = options.parallel_tool_calls
            && request.tool_choice != ToolChoice::None
        {
            choice["disable_parallel_tool_use"] = json!(!parallel);
        }
        body.insert("tool_choice".into(), choice);
    }
    if !request.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(request.stop));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if options.stream {
        body.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(body))
}

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
    request.system = system(map)?;
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

/// One content block of a message from `role`; `None` for a block that
/// is dropped.
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
        ("tool_result", Role::User) => tool_result(block, p, calls)?,
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

/// The `system` text: a string, or text blocks joined by blank lines.
fn system(map: &Map<String, Value>) -> Result<Option<String>, InboundError> {
    match field(map, "system") {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(Value::Array(blocks)) => {
            let pieces = text_parts(blocks, "/system", &["text"], |other| {
                format!("a {other:?} system block is not supported")
            })?;
            Ok(inbound::system(
                pieces.into_iter().map(str::to_owned).collect(),
            ))
        }
        Some(_) => Err(InboundError::new(
            "/system",
            "must be a string or an array of text blocks",
        )),
    }
}

/// A `tool_result` block of a call in `calls`: its text, or its text
/// blocks joined by lines.
fn tool_result(
    block: &Map<String, Value>,
    p: &str,
    calls: &Calls,
) -> Result<Content, InboundError> {
    let call_id = required_str(block, p, "tool_use_id")?;
    calls.check(call_id, &at(p, "tool_use_id"))?;
    let content = match field(block, "content") {
        None => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => text_parts(blocks, &at(p, "content"), &["text"], |other| {
            format!("a {other:?} block in a tool result is not supported, only text")
        })?
        .join("\n"),
        Some(_) => {
            return Err(InboundError::new(
                at(p, "content"),
                "must be a string or an array of blocks",
            ));
        }
    };
    Ok(Content::ToolResult {
        call_id: call_id.to_owned(),
        content,
        is_error: flag(block, p, "is_error")?,
    })
}

/// A `base64` image block.
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

/// A client tool.
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

/// A `tool_choice` object.
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
