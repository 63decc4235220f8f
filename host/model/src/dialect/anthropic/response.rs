//! Messages responses both ways: a provider's `message` object decoded
//! as the normalized response ([`parse_response`]), and the normalized
//! response encoded as the object a gateway client expects
//! ([`response_body`]), or as the error body of a failure
//! ([`error_body`]).

use serde_json::{Value, json};

use super::{add_usage, is_error, stop_reason, stop_word, usage_body};
use crate::dialect::Failure;
use crate::dialect::assemble::{id_at, parse_arguments, str_at};
use crate::dialect::failure::anthropic_error_body;
use crate::{Content, ModelError, ModelResponse, Usage};

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
        request_id: id_at(json, "/id"),
    })
}

/// The content blocks of `response`.
fn blocks(response: &ModelResponse) -> Vec<Value> {
    response
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(json!({"type": "text", "text": text})),
            Content::ToolCall { id, name, input } => {
                Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
            }
            _ => None,
        })
        .collect()
}

/// The `message` object for `response`.
pub fn response_body(response: &ModelResponse, id: &str) -> Value {
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": response.model,
        "content": blocks(response),
        "stop_reason": stop_word(response.stop_reason),
        "stop_sequence": null,
        "usage": usage_body(response),
    })
}

/// The status and Anthropic error body for `failure`.
pub fn error_body(failure: &Failure) -> (u16, Value) {
    anthropic_error_body(failure)
}
