//! Reading a client's request body: the normalized request it asks for,
//! the JSON helpers that name the place at fault in a refusal, and the
//! rules every format follows to make normalized messages of its own.

use std::collections::HashSet;
use std::fmt::Display;

use serde_json::{Map, Value};

use crate::{Content, Message, ModelRequest, Role, ToolChoice, ToolSpec};

/// A client's request, normalized.
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    /// The request.
    pub request: ModelRequest,
    /// Whether the client asked for an event stream.
    pub stream: bool,
    /// Whether the event stream is to end with the usage. Chat Completions
    /// sends it only when the client asks (`stream_options.include_usage`,
    /// a chunk with no choices that a careless client may trip on); the
    /// Responses and Messages streams always carry it, so `true` for them.
    pub include_usage: bool,
}

/// Why a client's request cannot be served: what, and where in its body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.pointer, .message))]
pub struct InboundError {
    /// A JSON Pointer to the part of the body at fault, such as
    /// `/messages/2/content/0/type`; empty for the body as a whole.
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

fn describe(pointer: &str, message: &str) -> String {
    if pointer.is_empty() {
        message.to_owned()
    } else {
        format!("{pointer}: {message}")
    }
}

impl InboundError {
    /// An error at `pointer`.
    pub fn new(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

/// `base` with one more reference token (`~` and `/` escaped).
pub(crate) fn at(base: &str, token: impl Display) -> String {
    let token = token.to_string().replace('~', "~0").replace('/', "~1");
    format!("{base}/{token}")
}

/// The body as an object.
pub(crate) fn object(body: &Value) -> Result<&Map<String, Value>, InboundError> {
    body.as_object()
        .ok_or_else(|| InboundError::new("", "the request body is not a JSON object"))
}

/// The field `key` of `map`, `None` when absent or null.
pub(crate) fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    map.get(key).filter(|v| !v.is_null())
}

/// The string at `map[key]`, required.
pub(crate) fn required_str<'v>(
    map: &'v Map<String, Value>,
    base: &str,
    key: &str,
) -> Result<&'v str, InboundError> {
    match field(map, key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(InboundError::new(at(base, key), "must be a string")),
        None => Err(InboundError::new(at(base, key), "is required")),
    }
}

/// The string at `map[key]`, when present.
pub(crate) fn optional_str<'v>(
    map: &'v Map<String, Value>,
    base: &str,
    key: &str,
) -> Result<Option<&'v str>, InboundError> {
    match field(map, key) {
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(InboundError::new(at(base, key), "must be a string")),
        None => Ok(None),
    }
}

/// The object at `value`.
pub(crate) fn as_object<'v>(
    value: &'v Value,
    pointer: &str,
) -> Result<&'v Map<String, Value>, InboundError> {
    value
        .as_object()
        .ok_or_else(|| InboundError::new(pointer, "must be an object"))
}

/// The array at `map[key]` (empty when absent).
pub(crate) fn array<'v>(
    map: &'v Map<String, Value>,
    base: &str,
    key: &str,
) -> Result<&'v [Value], InboundError> {
    match field(map, key) {
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(InboundError::new(at(base, key), "must be an array")),
        None => Ok(&[]),
    }
}

/// The non-negative integer at `map[key]`, when present.
pub(crate) fn optional_u64(
    map: &Map<String, Value>,
    key: &str,
) -> Result<Option<u64>, InboundError> {
    match field(map, key) {
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| InboundError::new(at("", key), "must be a non-negative integer")),
        None => Ok(None),
    }
}

/// The number at `map[key]`, when present.
pub(crate) fn optional_f64(
    map: &Map<String, Value>,
    key: &str,
) -> Result<Option<f64>, InboundError> {
    match field(map, key) {
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| InboundError::new(at("", key), "must be a number")),
        None => Ok(None),
    }
}

/// The boolean at `map[key]`, `false` when absent.
pub(crate) fn flag(map: &Map<String, Value>, base: &str, key: &str) -> Result<bool, InboundError> {
    match field(map, key) {
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(InboundError::new(at(base, key), "must be a boolean")),
        None => Ok(false),
    }
}

/// An image data URL (`data:image/png;base64,...`) as media type and
/// base64 data; other URLs are refused (hane sends images inline).
pub(crate) fn data_url(url: &str, pointer: &str) -> Result<(String, String), InboundError> {
    url.strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
        .and_then(|(head, data)| {
            head.strip_suffix(";base64")
                .map(|media| (media.to_owned(), data.to_owned()))
        })
        .filter(|(media, _)| !media.is_empty())
        .ok_or_else(|| {
            InboundError::new(
                pointer,
                "only base64 data URLs are supported for images (hane does not fetch URLs)",
            )
        })
}

/// The tool call ids seen so far in a conversation, so that a result of
/// an unknown call is refused.
#[derive(Debug, Default)]
pub(crate) struct Calls(HashSet<String>);

impl Calls {
    pub fn add(&mut self, id: &str) {
        self.0.insert(id.to_owned());
    }

    pub fn check(&self, id: &str, pointer: &str) -> Result<(), InboundError> {
        if self.0.contains(id) {
            Ok(())
        } else {
            Err(InboundError::new(
                pointer,
                format!("no tool call with id {id:?} precedes this tool result"),
            ))
        }
    }
}

/// Adds `block` to the conversation: to the last message when it has
/// `role` and `join` says so for it, else as a new message.
pub(crate) fn push(
    messages: &mut Vec<Message>,
    role: Role,
    blocks: Vec<Content>,
    join: impl Fn(&Message) -> bool,
) {
    match messages.last_mut() {
        Some(last) if last.role == role && join(last) => last.content.extend(blocks),
        _ => messages.push(Message {
            role,
            content: blocks,
        }),
    }
}

/// Whether the message ends in a tool call or result: a message part that
/// follows continues it (the formats that put tool calls and results
/// apart from messages split one normalized message there).
pub(crate) fn ends_in_tool(message: &Message) -> bool {
    matches!(
        message.content.last(),
        Some(Content::ToolCall { .. } | Content::ToolResult { .. })
    )
}

/// The system text: its pieces joined by blank lines, `None` when none.
pub(crate) fn system(pieces: Vec<String>) -> Option<String> {
    if pieces.is_empty() {
        None
    } else {
        Some(pieces.join("\n\n"))
    }
}

/// A tool call's arguments text as its input: the object it is the JSON
/// text of, `{}` for empty text.
pub(crate) fn object_text(text: &str, pointer: &str) -> Result<Value, InboundError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(object @ Value::Object(_)) => Ok(object),
        _ => Err(InboundError::new(
            pointer,
            "must be the JSON text of an object",
        )),
    }
}

/// An OpenAI function tool's `name`, `description` and `parameters` (Chat
/// Completions nests them in `function`, Responses does not), the object
/// at `p`.
pub(crate) fn function_spec(
    function: &Map<String, Value>,
    p: &str,
) -> Result<ToolSpec, InboundError> {
    Ok(ToolSpec {
        name: required_str(function, p, "name")?.to_owned(),
        description: optional_str(function, p, "description")?
            .unwrap_or_default()
            .to_owned(),
        input_schema: field(function, "parameters")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
    })
}

/// An OpenAI `tool_choice`: `auto`, `none` or `required`, or an object of
/// type `function` whose name is at `name` (a pointer into it).
pub(crate) fn openai_tool_choice(choice: &Value, name: &str) -> Result<ToolChoice, InboundError> {
    match choice {
        Value::String(word) => match word.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(InboundError::new(
                "/tool_choice",
                format!("the tool choice {other:?} is not supported"),
            )),
        },
        Value::Object(map) if map.get("type").and_then(Value::as_str) == Some("function") => {
            let tool = choice
                .pointer(name)
                .and_then(Value::as_str)
                .ok_or_else(|| InboundError::new(format!("/tool_choice{name}"), "is required"))?;
            Ok(ToolChoice::Tool {
                name: tool.to_owned(),
            })
        }
        Value::Object(_) => Err(InboundError::new(
            "/tool_choice/type",
            "only a function tool choice is supported",
        )),
        _ => Err(InboundError::new(
            "/tool_choice",
            "must be a string or an object",
        )),
    }
}

/// The texts of `parts` (the array at `p`): objects of a type among
/// `kinds` with their `text`; another type is refused with what
/// `refusal` says of it.
pub(crate) fn text_parts<'v>(
    parts: &'v [Value],
    p: &str,
    kinds: &[&str],
    refusal: impl Fn(&str) -> String,
) -> Result<Vec<&'v str>, InboundError> {
    let mut texts = Vec::new();
    for (j, part) in parts.iter().enumerate() {
        let pp = at(p, j);
        let part = as_object(part, &pp)?;
        match required_str(part, &pp, "type")? {
            kind if kinds.contains(&kind) => texts.push(required_str(part, &pp, "text")?),
            other => return Err(InboundError::new(at(&pp, "type"), refusal(other))),
        }
    }
    Ok(texts)
}

/// A message's `content` as blocks: none when absent, one text for a
/// string, else each part of the array as `part` reads it (given the
/// part and where it is).
pub(crate) fn content_blocks(
    message: &Map<String, Value>,
    p: &str,
    mut part: impl FnMut(&Map<String, Value>, &str) -> Result<Content, InboundError>,
) -> Result<Vec<Content>, InboundError> {
    let parts = match field(message, "content") {
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
    let base = at(p, "content");
    parts
        .iter()
        .enumerate()
        .map(|(j, value)| {
            let pp = at(&base, j);
            part(as_object(value, &pp)?, &pp)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inbound_error_shows_its_pointer() {
        assert_eq!(
            InboundError::new("/messages/0", "bad").to_string(),
            "/messages/0: bad"
        );
        assert_eq!(InboundError::new("", "bad").to_string(), "bad");
        assert_eq!(at("/a", "b/c~d"), "/a/b~1c~0d");
    }

    #[test]
    fn data_urls_are_split_and_other_urls_refused() {
        assert_eq!(
            data_url("data:image/jpeg;base64,AAAA", "/p").unwrap(),
            ("image/jpeg".to_owned(), "AAAA".to_owned())
        );
        assert_eq!(
            data_url("https://example.com/a.png", "/p")
                .unwrap_err()
                .pointer,
            "/p"
        );
    }
}
