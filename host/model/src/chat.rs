//! OpenAI Chat Completions (`POST {base}/chat/completions`): the normalized
//! request as wire JSON, and the wire answer (a JSON body or its event
//! stream) as the normalized response.
//!
//! System text is a leading `system` message; tool calls are an assistant
//! message's `tool_calls` (arguments a JSON *string*); each tool result is
//! its own `tool` message with `tool_call_id`; images are `image_url`
//! parts with a data URL. A tool result's `is_error` has no place in this
//! format and is not sent.

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

fn refuse(m: usize, c: usize, what: &str) -> ModelError {
    ModelError::InvalidRequest {
        message: format!("messages[{m}].content[{c}]: Chat Completions cannot carry {what}"),
    }
}

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

fn assistant_message(m: usize, content: &[Content]) -> Result<Value, ModelError> {
    let mut text = String::new();
    let mut calls = Vec::new();
    for (c, block) in content.iter().enumerate() {
        match block {
            Content::Text { text: t } => text.push_str(t),
            Content::ToolCall { id, name, input } => calls.push(json!({
                "id": id, "type": "function",
                "function": {"name": name, "arguments": arguments_text(input)}})),
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

fn stop_reason(finish: &str, has_tool_calls: bool) -> StopReason {
    match finish {
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        // Some servers say `stop` after tool calls.
        _ if has_tool_calls => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    }
}

fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: count(usage, "/prompt_tokens"),
        output_tokens: count(usage, "/completion_tokens"),
        cached_tokens: count(usage, "/prompt_tokens_details/cached_tokens"),
    }
}

fn request_id(json: &Value) -> Option<String> {
    json.get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The normalized response for a non-streamed answer.
///
/// # Errors
///
/// [`ModelError::Transport`] when the answer has no choice; the provider's
/// error when it is one.
pub fn parse_response(json: &Value) -> Result<ModelResponse, ModelError> {
    if json.get("error").is_some_and(|e| !e.is_null()) {
        return Err(crate::error::from_body(json));
    }
    let choice = json
        .pointer("/choices/0")
        .ok_or_else(|| ModelError::Transport("the answer has no choices".into()))?;
    let message = &choice["message"];
    let mut content = Vec::new();
    match &message["content"] {
        Value::String(text) if !text.is_empty() => content.push(Content::text(text.clone())),
        Value::Array(parts) => {
            let text: String = parts.iter().map(|p| str_at(p, "/text")).collect();
            if !text.is_empty() {
                content.push(Content::text(text));
            }
        }
        _ => {}
    }
    if let Some(refusal) = message["refusal"].as_str().filter(|r| !r.is_empty()) {
        content.push(Content::text(refusal));
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        content.push(Content::ToolCall {
            id: str_at(call, "/id").to_owned(),
            name: str_at(call, "/function/name").to_owned(),
            input: match &call["function"]["arguments"] {
                Value::String(raw) => parse_arguments(raw),
                Value::Null => parse_arguments(""),
                // Some servers send the object itself.
                other => parse_arguments(&other.to_string()),
            },
        });
    }
    let has_tool_calls = content
        .iter()
        .any(|c| matches!(c, Content::ToolCall { .. }));
    Ok(ModelResponse {
        stop_reason: stop_reason(str_at(choice, "/finish_reason"), has_tool_calls),
        content,
        usage: usage(&json["usage"]),
        model: str_at(json, "/model").to_owned(),
        request_id: request_id(json),
    })
}

/// A streamed answer being assembled.
pub struct Stream<'a> {
    blocks: Blocks<'a>,
    finish_reason: Option<String>,
    usage: Usage,
    model: String,
    id: Option<String>,
    done: bool,
}

impl<'a> Stream<'a> {
    /// The start of a stream whose pieces go to `sink`.
    pub fn new(sink: Option<EventSink<'a>>) -> Self {
        Self {
            blocks: Blocks::new(sink),
            finish_reason: None,
            usage: Usage::default(),
            model: String::new(),
            id: None,
            done: false,
        }
    }

    /// Takes in one event; `Ok(true)` once the stream is complete
    /// (`[DONE]`).
    ///
    /// # Errors
    ///
    /// The provider's error event, or an event that is not JSON.
    pub fn event(&mut self, event: &SseEvent) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let json: Value = serde_json::from_str(data).map_err(|e| {
            ModelError::Transport(format!(
                "a stream event is not JSON ({e}): {}",
                crate::error::bounded(data)
            ))
        })?;
        if json.get("error").is_some_and(|e| !e.is_null()) {
            return Err(crate::error::from_body(&json));
        }
        if self.id.is_none() {
            self.id = request_id(&json);
        }
        if let Some(model) = json["model"].as_str().filter(|m| !m.is_empty()) {
            model.clone_into(&mut self.model);
        }
        if json["usage"].is_object() {
            self.usage = usage(&json["usage"]);
        }
        for choice in json["choices"].as_array().into_iter().flatten() {
            let delta = &choice["delta"];
            if let Some(text) = delta["content"].as_str() {
                self.blocks.text("text", text);
            }
            if let Some(text) = delta["refusal"].as_str() {
                self.blocks.text("text", text);
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let key = format!("tool{}", count(call, "/index"));
                let name = str_at(call, "/function/name");
                let id = str_at(call, "/id");
                if !name.is_empty() || !id.is_empty() {
                    self.blocks.tool_start(&key, id, name);
                }
                match &call["function"]["arguments"] {
                    Value::String(more) => self.blocks.tool_arguments(&key, more),
                    Value::Null => {}
                    other => self.blocks.tool_arguments(&key, &other.to_string()),
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(false)
    }

    /// The completed response.
    ///
    /// # Errors
    ///
    /// [`ModelError::Transport`] when the stream ended before a
    /// `finish_reason` (a stream that ends after one but without `[DONE]`
    /// is accepted: some servers close instead).
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        let Some(reason) = self.finish_reason else {
            return Err(ModelError::Transport(
                "the stream ended before the response was complete (no finish_reason)".into(),
            ));
        };
        let has_tool_calls = self.blocks.has_tool_calls();
        Ok(ModelResponse {
            content: self.blocks.finish(),
            stop_reason: stop_reason(&reason, has_tool_calls),
            usage: self.usage,
            model: self.model,
            request_id: self.id,
        })
    }
}
