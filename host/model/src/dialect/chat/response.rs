//! Chat Completions responses both ways: a provider's `chat.completion`
//! object decoded as the normalized response ([`parse_response`]), and
//! the normalized response encoded as the object a gateway client
//! expects ([`response_body`]), or as the error body of a failure
//! ([`error_body`]).

use serde_json::{Value, json};

use super::{call_entry, finish_reason, stop_reason, usage, usage_body};
use crate::dialect::Failure;
use crate::dialect::assemble::{has_tool_calls, id_at, parse_arguments, str_at};
use crate::dialect::failure::openai_error_body;
use crate::{Content, ModelError, ModelResponse};

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
    Ok(ModelResponse {
        stop_reason: stop_reason(str_at(choice, "/finish_reason"), has_tool_calls(&content)),
        content,
        usage: usage(&json["usage"]),
        model: str_at(json, "/model").to_owned(),
        request_id: id_at(json, "/id"),
    })
}

/// The response's tool calls as `tool_calls` entries.
fn tool_calls(response: &ModelResponse) -> Vec<Value> {
    response
        .content
        .iter()
        .filter_map(|c| match c {
            Content::ToolCall { id, name, input } => Some(call_entry(id, name, input)),
            _ => None,
        })
        .collect()
}

/// The `chat.completion` object for `response` (its text blocks joined,
/// then its tool calls). `created` is 0: these functions read no clock.
pub fn response_body(response: &ModelResponse, id: &str) -> Value {
    let text = response.text();
    let calls = tool_calls(response);
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
        "refusal": null,
    });
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": response.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(response.stop_reason),
        }],
        "usage": usage_body(response),
    })
}

/// The status and OpenAI error body for `failure`.
pub fn error_body(failure: &Failure) -> (u16, Value) {
    openai_error_body(failure)
}
