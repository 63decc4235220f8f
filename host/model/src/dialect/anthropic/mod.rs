//! Anthropic Messages, both ways: as a client of a provider (`POST
//! {base}/messages`: the normalized request as wire JSON, the answer, a
//! JSON body or its event stream, as the normalized response) and as the
//! gateway's server side (a client's `POST /v1/messages` body as the
//! normalized request, the normalized response as a `message` object or
//! its named event stream).
//!
//! `max_tokens` is required by the API: the request's cap, else
//! [`DEFAULT_MAX_TOKENS`] (a client's request without it is refused).
//! Input tokens are reported as the provider's `input_tokens` plus its
//! cache reads and writes (the normalized count includes cached tokens);
//! cached tokens are `cache_read_input_tokens`, and hane's answers report
//! `input_tokens` without them.
//!
//! `system` (a string or text blocks) is the system text; `thinking` and
//! `redacted_thinking` blocks a client sends back are dropped, as are
//! `cache_control` marks. Refused in a client's request: server tools
//! (`web_search_…`, `bash_…`, …) and `mcp_servers`, images by URL or
//! file, documents and other block types, images in tool results, and a
//! tool result whose call is not in the conversation.

mod request;
mod response;
mod stream;
#[cfg(test)]
mod tests;

use serde_json::{Value, json};

use crate::dialect::assemble::{count, str_at};
use crate::{ModelResponse, StopReason, Usage};

pub use request::{parse_request, request_body};
pub use response::{error_body, parse_response, response_body};
pub use stream::{AnthropicStream, AnthropicWriter, ContentBlocks, stream_events};

/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The output cap sent when the request sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The stop reason a `stop_reason` says.
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

/// Whether a body or event is an `error`.
fn is_error(json: &Value) -> bool {
    str_at(json, "/type") == "error"
}

/// The `stop_reason` of a stop reason.
fn stop_word(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::Refusal => "refusal",
    }
}

/// The usage in Anthropic's terms: `input_tokens` leaves out the cache
/// reads (the normalized count includes them).
fn usage_body(response: &ModelResponse) -> Value {
    let u = response.usage;
    json!({
        "input_tokens": u.input_tokens.saturating_sub(u.cached_tokens),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached_tokens,
        "output_tokens": u.output_tokens,
    })
}
