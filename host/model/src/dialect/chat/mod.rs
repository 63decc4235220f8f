//! OpenAI Chat Completions, both ways: as a client of a provider (`POST
//! {base}/chat/completions`: the normalized request as wire JSON, the
//! answer, a JSON body or its event stream, as the normalized response)
//! and as the gateway's server side (a client's `POST /chat/completions`
//! body as the normalized request, the normalized response as a
//! `chat.completion` object or its `chat.completion.chunk` stream).
//!
//! System text is a leading `system` message (read back from `system` and
//! `developer` messages wherever they are, joined); tool calls are an
//! assistant message's `tool_calls` (arguments a JSON *string*); each tool
//! result is its own `tool` message with `tool_call_id` (read back joined
//! with the user message it follows or precedes into one normalized user
//! message); images are `image_url` parts with a data URL. A tool
//! result's `is_error` has no place in this format and is not sent; an
//! assistant message's text blocks are one `content` string.
//!
//! Refused in a client's request: `n` other than 1, `logprobs`, audio
//! (`audio`, `modalities`, `input_audio` parts), `file` parts, image URLs
//! that are not data URLs, structured output (`response_format` other
//! than `text`), the legacy `functions` and `function_call`, tools that
//! are not functions, and a tool result whose call is not in the
//! conversation.

mod request;
mod response;
mod stream;
#[cfg(test)]
mod tests;

use serde_json::{Value, json};

use crate::dialect::assemble::{arguments_text, count};
use crate::{ModelResponse, StopReason, Usage};

pub use request::{parse_request, request_body};
pub use response::{error_body, parse_response, response_body};
pub use stream::{ChatStream, ChatWriter, Chunks, stream_events};

/// The stop reason a `finish_reason` says, tool use whenever the answer
/// has tool calls.
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

/// The `finish_reason` of a stop reason (a stop sequence is `stop`, as
/// the end of a turn).
fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Refusal => "content_filter",
    }
}

/// A tool call as a `tool_calls` entry, its arguments a JSON string.
fn call_entry(id: &str, name: &str, input: &Value) -> Value {
    json!({"id": id, "type": "function",
        "function": {"name": name, "arguments": arguments_text(input)}})
}

/// The usage an answer's `usage` object reports.
fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: count(usage, "/prompt_tokens"),
        output_tokens: count(usage, "/completion_tokens"),
        cached_tokens: count(usage, "/prompt_tokens_details/cached_tokens"),
    }
}

/// The `usage` object of `response`.
fn usage_body(response: &ModelResponse) -> Value {
    let u = response.usage;
    json!({
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total(),
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    })
}
