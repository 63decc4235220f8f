//! Responses responses both ways: a provider's `response` object decoded
//! as the normalized response ([`parse_response`]), and the normalized
//! response encoded as the object a gateway client expects
//! ([`response_body`]), or as the error body of a failure
//! ([`error_body`]).

use serde_json::{Value, json};

use super::{envelope, failed, function_call, status, stop_reason, usage, usage_body};
use crate::dialect::Failure;
use crate::dialect::assemble::{arguments_text, has_tool_calls, id_at, parse_arguments, str_at};
use crate::dialect::failure::openai_error_body;
use crate::{Content, ModelError, ModelResponse};

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
    Ok(ModelResponse {
        stop_reason: stop_reason(json, has_tool_calls(&content), refused),
        content,
        usage: usage(&json["usage"]),
        model: str_at(json, "/model").to_owned(),
        request_id: id_at(json, "/id"),
    })
}

/// The output items: consecutive text blocks are the `output_text` parts
/// of one `message` item, each tool call a `function_call` item.
fn output(response: &ModelResponse, id: &str) -> Vec<Value> {
    let mut items: Vec<Value> = Vec::new();
    for block in &response.content {
        match block {
            Content::Text { text } => {
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                match items.last_mut() {
                    Some(item) if item["type"] == "message" => {
                        if let Some(parts) = item["content"].as_array_mut() {
                            parts.push(part);
                        }
                    }
                    _ => items.push(
                        json!({"type": "message", "id": format!("msg_{id}_{}", items.len()),
                        "status": "completed", "role": "assistant", "content": [part]}),
                    ),
                }
            }
            Content::ToolCall {
                id: call_id,
                name,
                input,
            } => items.push(function_call(
                json!({"type": "function_call", "id": format!("fc_{id}_{}", items.len()),
                "call_id": call_id, "arguments": arguments_text(input),
                "status": "completed"}),
                name,
            )),
            _ => {}
        }
    }
    items
}

/// The `response` object for `response`: `completed`, or `incomplete`
/// with `incomplete_details.reason` `max_output_tokens` (the cap) or
/// `content_filter` (a refusal). `created_at` is 0: these functions read
/// no clock.
pub fn response_body(response: &ModelResponse, id: &str) -> Value {
    envelope(
        id,
        &response.model,
        status(response),
        output(response, id),
        usage_body(response),
    )
}

/// The status and OpenAI error body for `failure`.
pub fn error_body(failure: &Failure) -> (u16, Value) {
    openai_error_body(failure)
}
