//! Version 3 of the stored `session-event` and `action-request` items,
//! kept so items stored by earlier builds still read.
//!
//! Version 4 added the guest's own error kind to [`OperationFailure`].
//! Version 3 stored it only inside the message (`operation error: not
//! found: ...`), so a version 3 failure gets its kind back from there, the
//! one place that reading is still done.
//!
//! Version 4 of `action-request` added the connection's response cap and
//! documented response schema to an `integration.execute` action's
//! [`ConnectionTarget`], and the schema violations of its answer to its
//! outcome; a version 3 action reads with none of them.

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

/// Version 3 of an `action-request`: its connection target had no
/// response cap or schema, its outcome no schema violations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ActionRequest {
    pub(crate) id: hane_core::ActionId,
    pub(crate) run: hane_core::RunId,
    pub(crate) agent: String,
    pub(crate) tool: String,
    pub(crate) recipient: String,
    pub(crate) content: JsonText,
    pub(crate) digest: String,
    pub(crate) state: hane_core::ActionState,
    pub(crate) decider: hane_core::DeciderKind,
    pub(crate) assignment: Option<String>,
    pub(crate) reviewer: Option<String>,
    pub(crate) rule: Option<String>,
    pub(crate) overridden: bool,
    pub(crate) task: Option<hane_core::TaskId>,
    pub(crate) connection: Option<ConnectionTarget>,
    pub(crate) trail: Vec<hane_core::Decision>,
    pub(crate) attempts: Vec<hane_core::approval::Attempt>,
    pub(crate) outcome: Option<crate::v1::ActionOutcome>,
    pub(crate) created_at_ms: u64,
    pub(crate) updated_at_ms: u64,
}

/// Version 3 of an action's connection target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ConnectionTarget {
    pub(crate) name: String,
    pub(crate) base_url: String,
    pub(crate) credential: Option<String>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) ca_certificates: Option<String>,
}

impl From<ActionRequest> for hane_core::ActionRequest {
    fn from(old: ActionRequest) -> Self {
        hane_core::ActionRequest {
            id: old.id,
            run: old.run,
            agent: old.agent,
            tool: old.tool,
            recipient: old.recipient,
            content: old.content,
            digest: old.digest,
            state: old.state,
            decider: old.decider,
            assignment: old.assignment,
            reviewer: old.reviewer,
            rule: old.rule,
            overridden: old.overridden,
            task: old.task,
            connection: old
                .connection
                .map(|c| hane_core::approval::ConnectionTarget {
                    name: c.name,
                    base_url: c.base_url,
                    credential: c.credential,
                    timeout_ms: c.timeout_ms,
                    ca_certificates: c.ca_certificates,
                    max_response_bytes: None,
                    response_schema: None,
                }),
            trail: old.trail,
            attempts: old.attempts,
            outcome: old.outcome.map(Into::into),
            created_at_ms: old.created_at_ms,
            updated_at_ms: old.updated_at_ms,
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

    #[test]
    fn a_version_3_action_reads_with_no_response_schema_or_violations() {
        use crate::{Versioned, open};
        let old = ActionRequest {
            id: hane_core::ActionId::new(),
            run: hane_core::RunId::new(),
            agent: "service-booker".to_owned(),
            tool: "integration.execute".to_owned(),
            recipient: "fleet-maintenance".to_owned(),
            content: JsonText::parse(r#"{"method":"POST","path":"/bookings"}"#).unwrap(),
            digest: "sha256:00".to_owned(),
            state: hane_core::ActionState::Delivered,
            decider: hane_core::DeciderKind::Person,
            assignment: Some("fleet-desk".to_owned()),
            reviewer: None,
            rule: None,
            overridden: false,
            task: None,
            connection: Some(ConnectionTarget {
                name: "fleet-maintenance".to_owned(),
                base_url: "https://maintenance.fleet.example".to_owned(),
                credential: None,
                timeout_ms: Some(5000),
                ca_certificates: Some("-----BEGIN CERTIFICATE-----".to_owned()),
            }),
            trail: Vec::new(),
            attempts: Vec::new(),
            outcome: Some(crate::v1::ActionOutcome {
                state: hane_core::ActionState::Delivered,
                detail: "answered HTTP 201 Created".to_owned(),
                reconciled_by: None,
                at_ms: 3,
            }),
            created_at_ms: 1,
            updated_at_ms: 3,
        };
        let payload = postcard::to_allocvec(&old).unwrap();
        let mut sealed = b"HANE".to_vec();
        sealed.extend(
            postcard::to_allocvec(&(hane_core::ActionRequest::KIND, 3u16, payload.as_slice()))
                .unwrap(),
        );
        let read: hane_core::ActionRequest = open(&sealed).unwrap();
        let connection = read.connection.as_ref().unwrap();
        assert!(connection.ca_certificates.is_some());
        assert_eq!(connection.max_response_bytes, None);
        assert_eq!(connection.response_schema, None);
        assert!(read.outcome.as_ref().unwrap().schema_violations.is_empty());
        assert_eq!(read, hane_core::ActionRequest::from(old));
    }
}
