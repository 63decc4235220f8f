//! What the three APIs share when a streamed response is put together: the
//! blocks so far, keyed by the provider's own indices, and the
//! [`StreamEvent`]s they produce.

use std::collections::HashMap;

use serde_json::Value;

use super::sse::SseEvent;
use crate::{Content, EventSink, ModelError, StreamEvent};

/// A tool call's arguments as the model wrote them, made a [`Content::ToolCall`]
/// input.
///
/// Empty arguments are `{}` (a call of a tool without parameters). A JSON
/// object is the input. Anything else — JSON that does not parse, or an
/// array, string or number — is kept, not dropped: the input is then the
/// model's text as a JSON **string**. A string is never a valid input (a
/// tool's input schema is an object), so the caller (the llm driver) sees
/// at once that the call is malformed, can answer it with an error result
/// quoting the text, and the model can correct itself. The call is not
/// turned into an error, because the model did produce it and the turn
/// must be recorded as it was.
pub fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(object @ Value::Object(_)) => object,
        _ => Value::String(raw.to_owned()),
    }
}

/// A tool call's input as wire arguments text: an object as JSON, a string
/// (see [`parse_arguments`]) as the model's text again.
pub fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

#[derive(Debug)]
enum Block {
    Text(String),
    Tool {
        id: String,
        name: String,
        arguments: String,
    },
}

/// The blocks of a response being streamed in.
#[derive(Default)]
pub(crate) struct Blocks<'a> {
    blocks: Vec<Block>,
    by_key: HashMap<String, usize>,
    sink: Option<EventSink<'a>>,
}

impl<'a> Blocks<'a> {
    pub fn new(sink: Option<EventSink<'a>>) -> Self {
        Self {
            sink,
            ..Self::default()
        }
    }

    fn emit(&self, event: StreamEvent) {
        if let Some(sink) = self.sink {
            sink(event);
        }
    }

    /// Whether any tool call has been seen.
    pub fn has_tool_calls(&self) -> bool {
        self.blocks.iter().any(|b| matches!(b, Block::Tool { .. }))
    }

    /// Text for the block `key`, made when new.
    pub fn text(&mut self, key: &str, text: &str) {
        let index = match self.by_key.get(key) {
            Some(&index) => index,
            None => {
                self.blocks.push(Block::Text(String::new()));
                self.by_key.insert(key.to_owned(), self.blocks.len() - 1);
                self.blocks.len() - 1
            }
        };
        if let Block::Text(so_far) = &mut self.blocks[index]
            && !text.is_empty()
        {
            so_far.push_str(text);
            self.emit(StreamEvent::TextDelta {
                index,
                text: text.to_owned(),
            });
        }
    }

    /// Starts the tool call `key` (or names it, when its first piece had no
    /// name yet).
    pub fn tool_start(&mut self, key: &str, id: &str, name: &str) {
        if let Some(&index) = self.by_key.get(key) {
            if let Block::Tool {
                id: old_id,
                name: old_name,
                ..
            } = &mut self.blocks[index]
            {
                if old_id.is_empty() {
                    id.clone_into(old_id);
                }
                old_name.push_str(name);
            }
            return;
        }
        self.blocks.push(Block::Tool {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: String::new(),
        });
        let index = self.blocks.len() - 1;
        self.by_key.insert(key.to_owned(), index);
        self.emit(StreamEvent::ToolCallStart {
            index,
            id: id.to_owned(),
            name: name.to_owned(),
        });
    }

    /// More arguments for the tool call `key`.
    pub fn tool_arguments(&mut self, key: &str, json: &str) {
        if !self.by_key.contains_key(key) {
            self.tool_start(key, "", "");
        }
        let index = self.by_key[key];
        if let Block::Tool { arguments, .. } = &mut self.blocks[index]
            && !json.is_empty()
        {
            arguments.push_str(json);
            self.emit(StreamEvent::ToolCallDelta {
                index,
                json: json.to_owned(),
            });
        }
    }

    /// Replaces block `key`'s text or arguments by the complete value a
    /// provider sent when the block ended.
    pub fn complete(&mut self, key: &str, full: &str) {
        if let Some(&index) = self.by_key.get(key) {
            match &mut self.blocks[index] {
                Block::Text(text)
                | Block::Tool {
                    arguments: text, ..
                } => full.clone_into(text),
            }
        }
    }

    /// The blocks as content, empty text blocks left out.
    pub fn finish(self) -> Vec<Content> {
        self.blocks
            .into_iter()
            .filter_map(|block| match block {
                Block::Text(text) if text.is_empty() => None,
                Block::Text(text) => Some(Content::Text { text }),
                Block::Tool {
                    id,
                    name,
                    arguments,
                } => Some(Content::ToolCall {
                    id,
                    name,
                    input: parse_arguments(&arguments),
                }),
            })
            .collect()
    }
}

/// The `u64` at `pointer` in `value`, 0 when absent.
pub(crate) fn count(value: &Value, pointer: &str) -> u64 {
    value.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// The string at `pointer` in `value`, `""` when absent.
pub(crate) fn str_at<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The string at `pointer` in `value` as an id, `None` when absent or
/// empty.
pub(crate) fn id_at(value: &Value, pointer: &str) -> Option<String> {
    Some(str_at(value, pointer))
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Whether `content` has a tool call (which makes its stop reason tool
/// use, in the formats that do not say so themselves).
pub(crate) fn has_tool_calls(content: &[Content]) -> bool {
    content
        .iter()
        .any(|c| matches!(c, Content::ToolCall { .. }))
}

/// A stream event's data as JSON.
pub(crate) fn event_json(data: &str) -> Result<Value, ModelError> {
    serde_json::from_str(data).map_err(|e| {
        ModelError::Transport(format!(
            "a stream event is not JSON ({e}): {}",
            crate::error::bounded(data)
        ))
    })
}

/// A named stream event's kind: its data's `type`, else its `event:`
/// name.
pub(crate) fn event_kind<'e>(json: &'e Value, event: &'e SseEvent) -> &'e str {
    match str_at(json, "/type") {
        "" => event.event.as_str(),
        kind => kind,
    }
}

/// A stream that ended before the event that completes the response
/// (`last`, the event the format ends with).
pub(crate) fn incomplete(last: &str) -> ModelError {
    ModelError::Transport(format!(
        "the stream ended before the response was complete (no {last})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_that_are_not_an_object_are_kept_as_text() {
        assert_eq!(parse_arguments(""), serde_json::json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), serde_json::json!({"a": 1}));
        assert_eq!(parse_arguments("{\"a\":"), Value::String("{\"a\":".into()));
        assert_eq!(parse_arguments("[1]"), Value::String("[1]".into()));
        assert_eq!(arguments_text(&parse_arguments("{\"a\":")), "{\"a\":");
    }
}
