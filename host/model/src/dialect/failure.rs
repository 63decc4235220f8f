//! What went wrong serving a gateway request, and the error bodies that
//! say so in each format: OpenAI's (Chat Completions and Responses share
//! it) and Anthropic's. A provider's error body is read back by
//! [`crate::error::from_body`].

use serde_json::Value;

use super::InboundError;
use crate::ModelError;

/// What went wrong serving a request, for a format's `error_body`.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The client's request cannot be translated.
    Inbound(InboundError),
    /// The model call failed.
    Model(ModelError),
    /// Any other failure: the HTTP status to answer and a message.
    Status {
        /// The HTTP status.
        status: u16,
        /// The message.
        message: String,
    },
}

impl From<InboundError> for Failure {
    fn from(error: InboundError) -> Self {
        Failure::Inbound(error)
    }
}

impl From<ModelError> for Failure {
    fn from(error: ModelError) -> Self {
        Failure::Model(error)
    }
}

/// A failure's class, which picks the status and the error's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Invalid,
    ContextTooLong,
    Authentication,
    Permission,
    NotFound,
    RateLimited,
    Overloaded,
    Timeout,
    Upstream,
    Internal,
}

/// The class, message, and the status when the failure fixed one.
pub(crate) fn classify(failure: &Failure) -> (Class, String, Option<u16>) {
    match failure {
        Failure::Inbound(error) => (Class::Invalid, error.to_string(), None),
        Failure::Model(error) => {
            let class = match error {
                ModelError::Authentication { .. } => Class::Authentication,
                ModelError::RateLimited { .. } => Class::RateLimited,
                ModelError::Overloaded { .. } => Class::Overloaded,
                ModelError::ContextTooLong { .. } => Class::ContextTooLong,
                ModelError::InvalidRequest { .. } => Class::Invalid,
                ModelError::Timeout(_) => Class::Timeout,
                ModelError::Transport(_) => Class::Upstream,
                // A recording answers the same way every time: a client
                // that tries again (CLIs do on a 5xx, for minutes) only
                // waits longer for the same refusal.
                ModelError::Recording(_) | ModelError::RecordingMismatch { .. } => Class::Invalid,
                _ => Class::Internal,
            };
            (class, error.to_string(), None)
        }
        Failure::Status { status, message } => {
            let class = match status {
                401 => Class::Authentication,
                403 => Class::Permission,
                404 => Class::NotFound,
                429 => Class::RateLimited,
                503 | 529 => Class::Overloaded,
                504 => Class::Timeout,
                502 => Class::Upstream,
                400..=499 => Class::Invalid,
                _ => Class::Internal,
            };
            (class, message.clone(), Some(*status))
        }
    }
}

/// The status for `class` (`overloaded`: 529 for Anthropic, 503 for
/// OpenAI).
pub(crate) fn status_of(class: Class, overloaded: u16) -> u16 {
    match class {
        Class::Invalid | Class::ContextTooLong => 400,
        Class::Authentication => 401,
        Class::Permission => 403,
        Class::NotFound => 404,
        Class::RateLimited => 429,
        Class::Overloaded => overloaded,
        Class::Timeout => 504,
        Class::Upstream => 502,
        Class::Internal => 500,
    }
}

/// The OpenAI error body (Chat Completions and Responses share it):
/// `{"error": {"message", "type", "param", "code"}}`.
pub(crate) fn openai_error_body(failure: &Failure) -> (u16, Value) {
    let (class, message, status) = classify(failure);
    let (kind, code) = match class {
        Class::Invalid => ("invalid_request_error", Value::Null),
        Class::ContextTooLong => ("invalid_request_error", "context_length_exceeded".into()),
        Class::Authentication => ("authentication_error", "invalid_api_key".into()),
        Class::Permission => ("permission_error", Value::Null),
        Class::NotFound => ("not_found_error", Value::Null),
        Class::RateLimited => ("rate_limit_error", "rate_limit_exceeded".into()),
        Class::Overloaded => ("server_error", "overloaded".into()),
        Class::Timeout => ("server_error", "timeout".into()),
        Class::Upstream => ("server_error", "upstream_error".into()),
        Class::Internal => ("server_error", Value::Null),
    };
    let param = match failure {
        Failure::Inbound(error) if !error.pointer.is_empty() => {
            Value::String(error.pointer.clone())
        }
        _ => Value::Null,
    };
    let body = serde_json::json!({"error": {
        "message": message, "type": kind, "param": param, "code": code}});
    (status.unwrap_or_else(|| status_of(class, 503)), body)
}

/// The Anthropic error body: `{"type": "error", "error": {"type",
/// "message"}}`.
pub(crate) fn anthropic_error_body(failure: &Failure) -> (u16, Value) {
    let (class, message, status) = classify(failure);
    let kind = match class {
        Class::Invalid | Class::ContextTooLong => "invalid_request_error",
        Class::Authentication => "authentication_error",
        Class::Permission => "permission_error",
        Class::NotFound => "not_found_error",
        Class::RateLimited => "rate_limit_error",
        Class::Overloaded => "overloaded_error",
        Class::Timeout => "timeout_error",
        Class::Upstream | Class::Internal => "api_error",
    };
    let body = serde_json::json!({"type": "error", "error": {"type": kind, "message": message}});
    (status.unwrap_or_else(|| status_of(class, 529)), body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_to_the_status_a_client_acts_on() {
        use std::time::Duration;
        let cases = [
            (
                Failure::Model(ModelError::Authentication {
                    message: "no".into(),
                }),
                401,
                401,
            ),
            (
                Failure::Model(ModelError::RateLimited {
                    retry_after: None,
                    message: "slow".into(),
                }),
                429,
                429,
            ),
            (
                Failure::Model(ModelError::Overloaded {
                    retry_after: None,
                    message: "busy".into(),
                }),
                503,
                529,
            ),
            (
                Failure::Model(ModelError::ContextTooLong {
                    message: "long".into(),
                }),
                400,
                400,
            ),
            (
                Failure::Model(ModelError::InvalidRequest {
                    message: "bad".into(),
                }),
                400,
                400,
            ),
            (
                Failure::Model(ModelError::Timeout(Duration::from_secs(3))),
                504,
                504,
            ),
            (
                Failure::Model(ModelError::Transport("eof".into())),
                502,
                502,
            ),
            (InboundError::new("/n", "no").into(), 400, 400),
            (
                Failure::Model(ModelError::RecordingMismatch {
                    path: "r.json".into(),
                    turn: 1,
                    place: "messages[0]".into(),
                    detail: "recorded text, got a tool call".into(),
                }),
                400,
                400,
            ),
            (
                Failure::Model(ModelError::Recording("no turn left".into())),
                400,
                400,
            ),
            (
                Failure::Status {
                    status: 404,
                    message: "no such model".into(),
                },
                404,
                404,
            ),
        ];
        for (failure, openai, anthropic) in cases {
            let (status, body) = openai_error_body(&failure);
            assert_eq!(status, openai, "{failure:?}");
            assert!(body["error"]["message"].is_string());
            assert!(body["error"]["type"].is_string());
            assert!(body["error"].get("param").is_some() && body["error"].get("code").is_some());
            let (status, body) = anthropic_error_body(&failure);
            assert_eq!(status, anthropic, "{failure:?}");
            assert_eq!(body["type"], "error");
            assert!(body["error"]["type"].is_string() && body["error"]["message"].is_string());
        }
        let (_, body) = openai_error_body(&InboundError::new("/n", "no").into());
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["param"], "/n");
        let (_, body) = anthropic_error_body(&InboundError::new("/n", "no").into());
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["message"], "/n: no");
    }

    #[test]
    fn error_bodies_read_back_as_the_same_kind_of_error() {
        let cases = [
            ModelError::Authentication {
                message: "bad key".into(),
            },
            ModelError::RateLimited {
                retry_after: None,
                message: "slow down".into(),
            },
            ModelError::Overloaded {
                retry_after: None,
                message: "busy".into(),
            },
            ModelError::InvalidRequest {
                message: "bad".into(),
            },
        ];
        for error in cases {
            for (status, body) in [
                openai_error_body(&error.clone().into()),
                anthropic_error_body(&error.clone().into()),
            ] {
                let back = crate::error::from_status(
                    http::StatusCode::from_u16(status).unwrap(),
                    &http::HeaderMap::new(),
                    &body.to_string(),
                );
                assert_eq!(
                    std::mem::discriminant(&back),
                    std::mem::discriminant(&error),
                    "{error:?} -> {back:?}"
                );
            }
        }
    }
}
