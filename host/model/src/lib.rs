//! hane's model adapters: one [`ModelAdapter`] trait, and adapters for the
//! OpenAI Chat Completions, OpenAI Responses and Anthropic Messages APIs
//! and for recorded responses.
//!
//! An adapter sends a prepared [`ModelRequest`] and returns the normalized,
//! completed [`ModelResponse`]. It owns authentication (the credential
//! comes from the host's environment and is never printed), timeouts,
//! cancellation (dropping the future cancels the upstream request) and the
//! provider's errors, which it maps to a typed [`ModelError`] the caller can
//! act on.
//!
//! Each wire format is one [`dialect`], read both ways: the adapters
//! speak it to a provider, and hane's Model Gateway serves it to clients.

mod adapter;
pub mod dialect;
pub mod error;
pub mod recording;
mod retry;

use dialect::assemble;

use std::time::Duration;

use hane_core::BoxFuture;

pub use adapter::{
    AdapterConfig, AdapterConfigError, Api, DEFAULT_TIMEOUT, HttpAdapter, MAX_ERROR_BODY_BYTES,
    MAX_RESPONSE_BYTES, WireOptions, adapter,
};
pub use assemble::{arguments_text, parse_arguments};
pub use hane_model_types::{
    Content, Message, ModelRequest, ModelResponse, Role, StopReason, ToolChoice, ToolSpec, Usage,
};
pub use recording::{
    MAX_RECORDING_BYTES, RECORDING_FORMAT, RECORDING_VERSION, Recorder, Recording, RecordingError,
    ReplayAdapter, Turn, pin,
};
pub use retry::{RetryPolicy, send_with_retry};

/// A piece of a response as it streams in, normalized across providers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// More text of content block `index`.
    TextDelta {
        /// The block's index in the response's content.
        index: usize,
        /// The text.
        text: String,
    },
    /// A tool call began at content block `index`.
    ToolCallStart {
        /// The block's index.
        index: usize,
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's arguments, as JSON text.
    ToolCallDelta {
        /// The block's index.
        index: usize,
        /// The JSON text.
        json: String,
    },
}

/// Receives [`StreamEvent`]s while a response streams in.
pub type EventSink<'a> = &'a (dyn Fn(StreamEvent) + Send + Sync);

/// Sends prepared requests to one provider.
pub trait ModelAdapter: Send + Sync + std::fmt::Debug {
    /// Sends `request` and returns the completed response. When `events`
    /// is given, each piece of the response goes to it as it arrives.
    /// Dropping the future cancels the request.
    ///
    /// # Errors
    ///
    /// [`ModelError`]: what went wrong, typed so the caller can act.
    fn send<'a>(
        &'a self,
        request: &'a ModelRequest,
        events: Option<EventSink<'a>>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>>;
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider refused the credential.
    #[error("the provider refused the credential: {message}")]
    Authentication {
        /// The provider's message.
        message: String,
    },
    /// The provider limits the rate; try again after `retry_after`.
    #[error("rate limited by the provider{}: {message}", retry_hint(.retry_after))]
    RateLimited {
        /// The provider's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
        /// The provider's message.
        message: String,
    },
    /// The provider is overloaded or failed on its side (5xx).
    #[error("the provider is overloaded or failed{}: {message}", retry_hint(.retry_after))]
    Overloaded {
        /// The provider's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
        /// The provider's message.
        message: String,
    },
    /// The input does not fit the model's context window.
    #[error("the request does not fit the model's context window: {message}")]
    ContextTooLong {
        /// The provider's message.
        message: String,
    },
    /// The provider refused the request as invalid.
    #[error("the provider refused the request: {message}")]
    InvalidRequest {
        /// The provider's message.
        message: String,
    },
    /// No complete answer within the time allowed.
    #[error("the model call timed out after {0:?}")]
    Timeout(Duration),
    /// The call was cancelled.
    #[error("the model call was cancelled")]
    Cancelled,
    /// The connection failed, or the provider's answer could not be read.
    #[error("transport: {0}")]
    Transport(String),
    /// A replayed request differs from the recorded one in what a
    /// recording pins (see [`recording`]); reported against the recorded
    /// turn that comes closest.
    #[error(
        "no turn of recording {path} matches the request; the closest, turn {turn}, differs at {place}: {detail}"
    )]
    RecordingMismatch {
        /// The recording file.
        path: String,
        /// The closest turn, from 1.
        turn: usize,
        /// Where the request differs, such as `messages[3].content[0]`.
        place: String,
        /// How, such as `recorded a tool_call to documents_search, got text`.
        detail: String,
    },
    /// A recording cannot answer (more requests than turns) or cannot be
    /// written.
    #[error("{0}")]
    Recording(String),
}

impl From<hane_http::Error> for ModelError {
    fn from(error: hane_http::Error) -> Self {
        ModelError::Transport(error.to_string())
    }
}

fn retry_hint(after: &Option<Duration>) -> String {
    after.map_or_else(String::new, |d| {
        format!(" (retry after {} s)", d.as_secs_f64())
    })
}

impl ModelError {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. }
                | ModelError::Overloaded { .. }
                | ModelError::Timeout(_)
                | ModelError::Transport(_)
        )
    }

    /// How long the provider asked to wait, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after, .. }
            | ModelError::Overloaded { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
