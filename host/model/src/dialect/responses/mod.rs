//! OpenAI Responses, both ways: as a client of a provider (`POST
//! {base}/responses`: the normalized request as wire JSON, the answer, a
//! JSON body or its event stream, as the normalized response) and as the
//! gateway's server side (a client's `POST /responses` body as the
//! normalized request, the normalized response as a `response` object or
//! its named event stream).
//!
//! System text is `instructions` (read back with `system`/`developer`
//! input messages, joined); messages are `input` items (`message` items
//! with `input_text`/`input_image` or `output_text` parts,
//! `function_call` items, which join the assistant message before them,
//! and `function_call_output` items, which join the user message before
//! them); `store` is always `false` (hane keeps the conversation, the
//! provider need not). Stop sequences have no place in this API and are
//! refused; a tool result's `is_error` is not sent. `reasoning` items
//! (which a stateless client sends back) are dropped.
//!
//! Refused in a client's request: `previous_response_id` and
//! `conversation` (hane keeps no responses), `background`, built-in tools
//! (`web_search`, `file_search`, …) and tool choices of them, structured
//! output (`text.format` other than `text`), `prompt` templates, file and
//! audio inputs, image URLs that are not data URLs, other item types, and
//! a call output whose call is not in the input.
//!
//! A `namespace` tool (Codex CLI offers an MCP server's tools as one,
//! such as `mcp__hane` holding `echo`) becomes one function per tool,
//! named `{namespace}__{name}` (`mcp__hane__echo`), and a `function_call`
//! item with a `namespace` is read under that joined name; a call of a
//! tool named `mcp__{server}__{name}` is answered as a `function_call` of
//! `name` in the namespace `mcp__{server}`, which is how such a client
//! finds its MCP tools.

mod request;
mod response;
mod stream;
#[cfg(test)]
mod tests;

use serde_json::{Value, json};

use crate::dialect::assemble::{count, str_at};
use crate::{ModelError, ModelResponse, StopReason, Usage};

pub use request::{parse_request, request_body};
pub use response::{error_body, parse_response, response_body};
pub use stream::{Items, ResponsesStream, ResponsesWriter, stream_events};

/// The usage a `response` object's `usage` reports.
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

/// The error of a failed `response` object, when it is one.
fn failed(response: &Value) -> Option<ModelError> {
    let error = response.get("error").filter(|e| !e.is_null())?;
    Some(crate::error::from_body(&json!({"error": error})))
}

/// A `function_call` item with its `name`, and its `namespace` when the
/// name is an MCP tool's joined name (`mcp__{server}__{name}`).
fn function_call(mut item: Value, name: &str) -> Value {
    let split = name
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
        .filter(|(server, tool)| !server.is_empty() && !tool.is_empty());
    match split {
        Some((server, tool)) => {
            item["namespace"] = json!(format!("mcp__{server}"));
            item["name"] = json!(tool);
        }
        None => item["name"] = json!(name),
    }
    item
}

/// A finished response's `status` and `incomplete_details`.
fn status(response: &ModelResponse) -> (&'static str, Value) {
    match response.stop_reason {
        StopReason::MaxTokens => ("incomplete", json!({"reason": "max_output_tokens"})),
        StopReason::Refusal => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

/// The `usage` object of `response`.
fn usage_body(response: &ModelResponse) -> Value {
    let u = response.usage;
    json!({
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.total(),
    })
}

/// A `response` object.
fn envelope(
    id: &str,
    model: &str,
    (status, incomplete): (&str, Value),
    output: Vec<Value>,
    usage: Value,
) -> Value {
    json!({
        "id": id,
        "object": "response",
        "created_at": 0,
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "model": model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "store": false,
        "usage": usage,
    })
}
