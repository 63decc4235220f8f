//! OpenAI Responses (`POST {base}/responses`): the normalized request as
//! wire JSON, and the wire answer (a JSON body or its event stream) as the
//! normalized response.
//!
//! System text is `instructions`; messages are `input` items (`message`
//! items with `input_text`/`input_image` or `output_text` parts,
//! `function_call` items, `function_call_output` items); `store` is always
//! `false` (hane keeps the conversation, the provider need not). Stop
//! sequences have no place in this API and are refused; a tool result's
//! `is_error` is not sent.

use serde_json::{Map, Value, json};

use crate::assemble::{Blocks, arguments_text, count, parse_arguments, str_at};
use crate::sse::SseEvent;
use crate::{
    Content, EventSink, ModelError, ModelRequest, ModelResponse, Role, StopReason, ToolChoice,
    Usage, WireOptions,
};

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
            let refuse = |what: &str| ModelError::InvalidRequest {
                message: format!(
                    "messages[{m}].content[{c}]: the Responses API cannot carry {what}"
                ),
            };
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
                (Content::Image { .. }, _) => return Err(refuse("an image from the assistant")),
                (Content::ToolCall { .. }, _) => return Err(refuse("a tool call from the user")),
                (Content::ToolResult { .. }, _) => {
                    return Err(refuse("a tool result from the assistant"));
                }
            }
        }
        flush(&mut parts, &mut input);
    }
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

fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: count(usage, "/input_tokens"),
        output_tokens: count(usage, "/output_tokens"),
        cached_tokens: count(usage, "/input_tokens_details/cached_tokens"),
    }
}

/// Why it stopped: `incomplete` for `max_output_tokens` is
/// [`StopReason::MaxTokens`], for `content_filter` [`StopReason::Refusal`].
fn stop_reason(response: &Value, has_tool_calls: bool, refused: bool) -> StopReason {
    if str_at(response, "/status") == "incomplete" {
        return match str_at(response, "/incomplete_details/reason") {
            "content_filter" => StopReason::Refusal,
            _ => StopReason::MaxTokens,
        };
    }
    if refused {
        StopReason::Refusal
    } else if has_tool_calls {
        StopReason::ToolUse
    } else {
        StopReason::EndTurn
    }
}

fn failed(response: &Value) -> Option<ModelError> {
    let error = response.get("error").filter(|e| !e.is_null())?;
    Some(crate::error::from_body(&json!({"error": error})))
}

/// The normalized response for a non-streamed answer (also the `response`
/// object of a `response.completed` event).
///
/// # Errors
///
/// The provider's error when the response failed.
pub fn parse_response(json: &Value) -> Result<ModelResponse, ModelError> {
    if let Some(error) = failed(json) {
        return Err(error);
    }
    let mut content = Vec::new();
    let mut refused = false;
    for item in json["output"].as_array().into_iter().flatten() {
        match str_at(item, "/type") {
            "message" => {
                for part in item["content"].as_array().into_iter().flatten() {
                    match str_at(part, "/type") {
                        "output_text" => content.push(Content::text(str_at(part, "/text"))),
                        "refusal" => {
                            refused = true;
                            content.push(Content::text(str_at(part, "/refusal")));
                        }
                        _ => {}
                    }
                }
            }
            "function_call" => content.push(Content::ToolCall {
                id: str_at(item, "/call_id").to_owned(),
                name: str_at(item, "/name").to_owned(),
                input: parse_arguments(str_at(item, "/arguments")),
            }),
            _ => {}
        }
    }
    let has_tool_calls = content
        .iter()
        .any(|c| matches!(c, Content::ToolCall { .. }));
    Ok(ModelResponse {
        stop_reason: stop_reason(json, has_tool_calls, refused),
        content,
        usage: usage(&json["usage"]),
        model: str_at(json, "/model").to_owned(),
        request_id: Some(str_at(json, "/id"))
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
    })
}

/// A streamed answer being assembled.
pub struct Stream<'a> {
    blocks: Blocks<'a>,
    completed: Option<Value>,
    refused: bool,
}

impl<'a> Stream<'a> {
    /// The start of a stream whose pieces go to `sink`.
    pub fn new(sink: Option<EventSink<'a>>) -> Self {
        Self {
            blocks: Blocks::new(sink),
            completed: None,
            refused: false,
        }
    }

    /// Takes in one event; `Ok(true)` once the response is complete
    /// (`response.completed` or `response.incomplete`).
    ///
    /// # Errors
    ///
    /// `error` and `response.failed` events, or an event that is not JSON.
    pub fn event(&mut self, event: &SseEvent) -> Result<bool, ModelError> {
        let json: Value = serde_json::from_str(&event.data).map_err(|e| {
            ModelError::Transport(format!(
                "a stream event is not JSON ({e}): {}",
                crate::error::bounded(&event.data)
            ))
        })?;
        let kind = match str_at(&json, "/type") {
            "" => event.event.as_str(),
            kind => kind,
        };
        // Items are told apart by their id (this server reuses an output
        // index for a second call), else by their output index.
        let call = |json: &Value, id: &str| match json.pointer(id).and_then(Value::as_str) {
            Some(id) if !id.is_empty() => format!("{id}.call"),
            _ => format!("{}.call", count(json, "/output_index")),
        };
        let key = |json: &Value| {
            format!(
                "{}.{}",
                count(json, "/output_index"),
                count(json, "/content_index")
            )
        };
        match kind {
            "response.output_item.added" => {
                let item = &json["item"];
                if str_at(item, "/type") == "function_call" {
                    self.blocks.tool_start(
                        &call(&json, "/item/id"),
                        str_at(item, "/call_id"),
                        str_at(item, "/name"),
                    );
                }
            }
            "response.output_text.delta" => self.blocks.text(&key(&json), str_at(&json, "/delta")),
            "response.refusal.delta" => {
                self.refused = true;
                self.blocks.text(&key(&json), str_at(&json, "/delta"));
            }
            "response.output_text.done" => {
                let key = key(&json);
                self.blocks.text(&key, "");
                self.blocks.complete(&key, str_at(&json, "/text"));
            }
            "response.function_call_arguments.delta" => self
                .blocks
                .tool_arguments(&call(&json, "/item_id"), str_at(&json, "/delta")),
            "response.function_call_arguments.done" => self
                .blocks
                .complete(&call(&json, "/item_id"), str_at(&json, "/arguments")),
            "response.completed" | "response.incomplete" => {
                self.completed = Some(json["response"].clone());
                return Ok(true);
            }
            "response.failed" => {
                return Err(failed(&json["response"]).unwrap_or_else(|| {
                    ModelError::Transport("the provider reported the response failed".into())
                }));
            }
            "error" => return Err(crate::error::from_body(&json)),
            _ => {}
        }
        Ok(false)
    }

    /// The completed response: content as streamed, status, usage, model
    /// and id from the final `response` object.
    ///
    /// # Errors
    ///
    /// [`ModelError::Transport`] when the stream ended before
    /// `response.completed`.
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        let Some(response) = self.completed else {
            return Err(ModelError::Transport(
                "the stream ended before the response was complete (no response.completed)".into(),
            ));
        };
        let has_tool_calls = self.blocks.has_tool_calls();
        Ok(ModelResponse {
            stop_reason: stop_reason(&response, has_tool_calls, self.refused),
            content: self.blocks.finish(),
            usage: usage(&response["usage"]),
            model: str_at(&response, "/model").to_owned(),
            request_id: Some(str_at(&response, "/id"))
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        })
    }
}
