//! The three model wire formats, OpenAI Chat Completions ([`chat`]),
//! OpenAI Responses ([`responses`]) and Anthropic Messages
//! ([`anthropic`]), each one dialect read two ways: as a client of a
//! provider (the normalized [`ModelRequest`](crate::ModelRequest) encoded
//! to the wire, the provider's answer decoded, whole or as it streams in)
//! and as the server side of hane's Model Gateway (a client's request
//! decoded, the normalized [`ModelResponse`](crate::ModelResponse) encoded
//! as a JSON body or as the event stream that client's provider would
//! have sent).
//!
//! Each format's folder holds its request (`request.rs`, both ways), its
//! response (`response.rs`, both ways) and its stream (`stream.rs`: the
//! events in, assembled into the response, and the events out, written by
//! a [`StreamWriter`]). What the formats share lives here: server-sent
//! event framing ([`sse`]), tool call arguments and the assembly of a
//! streamed answer ([`assemble`]), the failures and their error bodies
//! ([`failure`]), reading a client's request body ([`inbound`]) and the
//! writers' common part ([`writer`]).
//!
//! Decoding a client's request is pure and strict: what the normalized
//! request cannot carry is refused with an [`InboundError`] naming the
//! place in the body; fields that change nothing hane can honour and lose
//! nothing the client relies on (such as `metadata`, `user`, `store`) are
//! accepted and ignored.

pub mod anthropic;
pub mod assemble;
pub mod chat;
pub mod failure;
pub mod inbound;
pub mod responses;
pub mod sse;
pub mod writer;

#[cfg(test)]
mod tests;

use crate::{Content, ModelError};

pub use failure::Failure;
pub use inbound::{Inbound, InboundError};
pub use sse::{SseOut, encode};
pub use writer::{StreamWriter, Writer};

/// A normalized request's block a format cannot carry, refused naming
/// its place (`messages[m].content[c]`) and `format`.
pub(crate) fn cannot_carry(format: &str, m: usize, c: usize, what: &str) -> ModelError {
    ModelError::InvalidRequest {
        message: format!("messages[{m}].content[{c}]: {format} cannot carry {what}"),
    }
}

/// What a block in a message of the wrong role is, for [`cannot_carry`]:
/// only the user sends images and tool results, only the assistant tool
/// calls.
pub(crate) fn misplaced(block: &Content) -> &'static str {
    match block {
        Content::Image { .. } => "an image from the assistant",
        Content::ToolCall { .. } => "a tool call from the user",
        Content::ToolResult { .. } => "a tool result from the assistant",
        Content::Text { .. } => "text",
    }
}
