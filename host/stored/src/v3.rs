//! Version 3 of the stored `session-event` item, kept so items stored by
//! earlier builds still read.
//!
//! Version 4 added the guest's own error kind to [`OperationFailure`].
//! Version 3 stored it only inside the message (`operation error: not
//! found: ...`), so a version 3 failure gets its kind back from there, the
//! one place that reading is still done.

use serde::{Deserialize, Serialize};

use hane_core::{
    Input, InputId, JsonText, Operation, OperationId, OperationOutput, Outcome, Receipt, SessionId,
    ToolCall, ToolCallStatus,
    operation::{GuestErrorKind, LogLine},
};

/// Decodes a version 3 payload as `Old` and converts it to the current type.
pub(crate) fn upgrade<Old, New>(version: u16, payload: &[u8]) -> Result<New, postcard::Error>
where
    Old: serde::de::DeserializeOwned + Into<New>,
{
    debug_assert_eq!(version, 3, "only version 3 is upgraded here");
    postcard::from_bytes::<Old>(payload).map(Into::into)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OperationFailure {
    pub(crate) outcome: Outcome,
    pub(crate) message: String,
    pub(crate) receipt: Option<Receipt>,
    pub(crate) logs: Vec<LogLine>,
}

impl From<OperationFailure> for hane_core::OperationFailure {
    fn from(old: OperationFailure) -> Self {
        let guest_error = match old.outcome {
            Outcome::OperationError => Some(guest_error_kind(&old.message)),
            _ => None,
        };
        hane_core::OperationFailure {
            outcome: old.outcome,
            guest_error,
            message: old.message,
            receipt: old.receipt,
            logs: old.logs,
        }
    }
}

/// The guest's error kind from a message the sandbox wrote as `operation
/// error: <kind>: <message>`.
fn guest_error_kind(message: &str) -> GuestErrorKind {
    let message = message.strip_prefix("operation error: ").unwrap_or(message);
    [
        ("invalid input: ", GuestErrorKind::InvalidInput),
        ("not found: ", GuestErrorKind::NotFound),
        ("denied: ", GuestErrorKind::Denied),
    ]
    .into_iter()
    .find(|(prefix, _)| message.starts_with(prefix))
    .map_or(GuestErrorKind::Failed, |(_, kind)| kind)
}

/// The variants of version 3, in their order (postcard encodes the index).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum SessionEvent {
    InputAccepted {
        input: Input,
    },
    InputHandled {
        input: InputId,
    },
    ModelTurn {
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        response: JsonText,
    },
    ToolCallRecorded {
        call: ToolCall,
        status: ToolCallStatus,
        operations: Vec<Operation>,
    },
    OperationStarted {
        operation: OperationId,
        attempt: u32,
    },
    OperationCompleted {
        operation: OperationId,
        result: OperationOutput,
    },
    OperationFailed {
        operation: OperationId,
        failure: OperationFailure,
    },
    OperationUnknown {
        operation: OperationId,
        reason: String,
    },
    RunStateChanged {
        run: String,
        state: String,
    },
    Forked {
        parent: SessionId,
        at: u64,
    },
}

impl From<SessionEvent> for hane_core::SessionEvent {
    fn from(old: SessionEvent) -> Self {
        use hane_core::SessionEvent as New;
        match old {
            SessionEvent::InputAccepted { input } => New::InputAccepted { input },
            SessionEvent::InputHandled { input } => New::InputHandled { input },
            SessionEvent::ModelTurn {
                model,
                input_tokens,
                output_tokens,
                response,
            } => New::ModelTurn {
                model,
                input_tokens,
                output_tokens,
                response,
            },
            SessionEvent::ToolCallRecorded {
                call,
                status,
                operations,
            } => New::ToolCallRecorded {
                call,
                status,
                operations,
            },
            SessionEvent::OperationStarted { operation, attempt } => {
                New::OperationStarted { operation, attempt }
            }
            SessionEvent::OperationCompleted { operation, result } => {
                New::OperationCompleted { operation, result }
            }
            SessionEvent::OperationFailed { operation, failure } => New::OperationFailed {
                operation,
                failure: failure.into(),
            },
            SessionEvent::OperationUnknown { operation, reason } => {
                New::OperationUnknown { operation, reason }
            }
            SessionEvent::RunStateChanged { run, state } => New::RunStateChanged { run, state },
            SessionEvent::Forked { parent, at } => New::Forked { parent, at },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_3_failure_gets_its_guest_error_kind_from_the_message() {
        let failure = |outcome, message: &str| {
            hane_core::OperationFailure::from(OperationFailure {
                outcome,
                message: message.into(),
                receipt: None,
                logs: Vec::new(),
            })
            .guest_error
        };
        let error = Outcome::OperationError;
        assert_eq!(
            failure(error, "operation error: not found: no record `V-9`"),
            Some(GuestErrorKind::NotFound)
        );
        assert_eq!(
            failure(error, "operation error: invalid input: `n` is negative"),
            Some(GuestErrorKind::InvalidInput)
        );
        assert_eq!(
            failure(error, "operation error: denied: not yours"),
            Some(GuestErrorKind::Denied)
        );
        assert_eq!(
            failure(error, "operation error: failed: disk full"),
            Some(GuestErrorKind::Failed)
        );
        assert_eq!(failure(Outcome::Timeout, "not found: x"), None);
    }
}
