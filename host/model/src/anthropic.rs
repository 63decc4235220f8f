//! Anthropic Messages (`POST {base}/messages`): the normalized request as
//! wire JSON, and the wire answer (a JSON body or its event stream) as the
//! normalized response.
//!
//! `max_tokens` is required by the API: the request's cap, else
//! [`DEFAULT_MAX_TOKENS`]. Input tokens are reported as the provider's
//! `input_tokens` plus its cache reads and writes (the normalized count
//! includes cached tokens); cached tokens are `cache_read_input_tokens`.

use serde_json::{Map, Value, json};

use crate::assemble::{Blocks, count, parse_arguments, str_at};
use crate::sse::SseEvent;
use crate::{
    Content, EventSink, ModelError, ModelRequest, ModelResponse, Role, StopReason, ToolChoice,
    Usage, WireOptions,
};

/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The output cap sent when the request sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

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
            let refuse = |what: &str| ModelError::InvalidRequest {
                message: format!(
                    "messages[{m}].content[{c}]: Anthropic Messages cannot carry {what}"
                ),
            };
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
                (Content::Image { .. }, _) => return Err(refuse("an image from the assistant")),
                (Content::ToolCall { .. }, _) => return Err(refuse("a tool call from the user")),
                (Content::ToolResult { .. }, _) => {
                    return Err(refuse("a tool result from the assistant"));
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

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        // `end_turn`, and `pause_turn` (a server tool's pause, which hane
        // does not use).
        _ => StopReason::EndTurn,
    }
}

/// Adds what `usage` reports to `into` (a stream reports input in
/// `message_start` and output in `message_delta`).
fn add_usage(into: &mut Usage, usage: &Value) {
    let cached = count(usage, "/cache_read_input_tokens");
    let input =
        count(usage, "/input_tokens") + cached + count(usage, "/cache_creation_input_tokens");
    if input > 0 {
        into.input_tokens = input;
        into.cached_tokens = cached;
    }
    if usage.get("output_tokens").is_some() {
        into.output_tokens = count(usage, "/output_tokens");
    }
}

fn is_error(json: &Value) -> bool {
    str_at(json, "/type") == "error"
}

/// The normalized response for a non-streamed answer.
///
/// # Errors
///
/// The provider's error when the body is one.
pub fn parse_response(json: &Value) -> Result<ModelResponse, ModelError> {
    if is_error(json) {
        return Err(crate::error::from_body(json));
    }
    let mut content = Vec::new();
    for block in json["content"].as_array().into_iter().flatten() {
        match str_at(block, "/type") {
            "text" => content.push(Content::text(str_at(block, "/text"))),
            "tool_use" => content.push(Content::ToolCall {
                id: str_at(block, "/id").to_owned(),
                name: str_at(block, "/name").to_owned(),
                input: match &block["input"] {
                    object @ Value::Object(_) => object.clone(),
                    other => parse_arguments(&other.to_string()),
                },
            }),
            _ => {}
        }
    }
    let mut usage = Usage::default();
    add_usage(&mut usage, &json["usage"]);
    Ok(ModelResponse {
        content,
        stop_reason: stop_reason(str_at(json, "/stop_reason")),
        usage,
        model: str_at(json, "/model").to_owned(),
        request_id: Some(str_at(json, "/id"))
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
    })
}

/// A streamed answer being assembled.
pub struct Stream<'a> {
    blocks: Blocks<'a>,
    usage: Usage,
    model: String,
    id: Option<String>,
    stop_reason: Option<String>,
    stopped: bool,
}

impl<'a> Stream<'a> {
    /// The start of a stream whose pieces go to `sink`.
    pub fn new(sink: Option<EventSink<'a>>) -> Self {
        Self {
            blocks: Blocks::new(sink),
            usage: Usage::default(),
            model: String::new(),
            id: None,
            stop_reason: None,
            stopped: false,
        }
    }

    /// Takes in one event; `Ok(true)` once the message is complete
    /// (`message_stop`).
    ///
    /// # Errors
    ///
    /// `error` events, or an event that is not JSON.
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
        let key = format!("{}", count(&json, "/index"));
        match kind {
            "message_start" => {
                let message = &json["message"];
                self.model = str_at(message, "/model").to_owned();
                self.id = Some(str_at(message, "/id"))
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned);
                add_usage(&mut self.usage, &message["usage"]);
            }
            "content_block_start" => {
                let block = &json["content_block"];
                match str_at(block, "/type") {
                    "text" => self.blocks.text(&key, str_at(block, "/text")),
                    "tool_use" => {
                        self.blocks
                            .tool_start(&key, str_at(block, "/id"), str_at(block, "/name"));
                        // The start carries `input: {}`; the arguments
                        // follow as `input_json_delta`s.
                        if let Some(input) = block["input"].as_object()
                            && !input.is_empty()
                        {
                            self.blocks
                                .tool_arguments(&key, &block["input"].to_string());
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = &json["delta"];
                match str_at(delta, "/type") {
                    "text_delta" => self.blocks.text(&key, str_at(delta, "/text")),
                    "input_json_delta" => {
                        self.blocks
                            .tool_arguments(&key, str_at(delta, "/partial_json"));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = json["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                add_usage(&mut self.usage, &json["usage"]);
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => return Err(crate::error::from_body(&json)),
            _ => {}
        }
        Ok(false)
    }

    /// The completed response.
    ///
    /// # Errors
    ///
    /// [`ModelError::Transport`] when the stream ended before
    /// `message_stop`.
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        if !self.stopped {
            return Err(ModelError::Transport(
                "the stream ended before the response was complete (no message_stop)".into(),
            ));
        }
        Ok(ModelResponse {
            content: self.blocks.finish(),
            stop_reason: stop_reason(self.stop_reason.as_deref().unwrap_or("end_turn")),
            usage: self.usage,
            model: self.model,
            request_id: self.id,
        })
    }
}
