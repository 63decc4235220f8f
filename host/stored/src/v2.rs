//! Version 2 of the stored `operation`, `session-event` and
//! `action-request` items, kept so items stored by earlier builds still
//! read.
//!
//! Version 3 added the `actions` grant to [`Policy`] and the proposals an
//! operation made to [`OperationOutput`]. Postcard is not
//! self-describing, so a version 2 payload decodes only as these mirrors of
//! the old shapes; each converts to the current type with no action
//! granted. Only types whose layout changed, and those that hold them, are
//! mirrored; the rest are shared.
//!
//! Version 3 of `action-request` added the connection's CA certificates to
//! an `integration.execute` action's [`ConnectionTarget`]; a version 2
//! action reads with none (its delivery trusts the platform's and
//! Mozilla's roots, as it did).

use serde::{Deserialize, Serialize};

use hane_core::{
    Impact, Input, InputId, JsonText, Limits, OperationId, Receipt, SessionId, ToolCall,
    ToolCallId, ToolCallStatus,
    operation::LogLine,
    policy::{DirGrant, EnvGrant, HostPattern},
};

/// Decodes a version 2 payload as `Old` and converts it to the current type.
pub(crate) fn upgrade<Old, New>(version: u16, payload: &[u8]) -> Result<New, postcard::Error>
where
    Old: serde::de::DeserializeOwned + Into<New>,
{
    debug_assert_eq!(version, 2, "only version 2 is upgraded here");
    postcard::from_bytes::<Old>(payload).map(Into::into)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Policy {
    pub(crate) files: Vec<DirGrant>,
    pub(crate) env: Vec<EnvGrant>,
    pub(crate) http: Vec<HostPattern>,
    pub(crate) records: Vec<String>,
    pub(crate) documents: Vec<String>,
}

impl From<Policy> for hane_core::Policy {
    fn from(old: Policy) -> Self {
        hane_core::Policy {
            files: old.files,
            env: old.env,
            http: old.http,
            records: old.records,
            documents: old.documents,
            actions: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct WasmCall {
    pub(crate) name: String,
    pub(crate) component: String,
    pub(crate) policy: Policy,
    pub(crate) limits: Limits,
    pub(crate) input: JsonText,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum OperationKind {
    Wasm(WasmCall),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Operation {
    pub(crate) id: OperationId,
    pub(crate) session: SessionId,
    pub(crate) tool_call: ToolCallId,
    pub(crate) impact: Impact,
    pub(crate) kind: OperationKind,
}

impl From<Operation> for hane_core::Operation {
    fn from(old: Operation) -> Self {
        let OperationKind::Wasm(call) = old.kind;
        hane_core::Operation {
            id: old.id,
            session: old.session,
            tool_call: old.tool_call,
            impact: old.impact,
            kind: hane_core::operation::OperationKind::Wasm(hane_core::WasmCall {
                name: call.name,
                component: call.component,
                policy: call.policy.into(),
                limits: call.limits,
                input: call.input,
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OperationOutput {
    pub(crate) output: JsonText,
    pub(crate) receipt: Receipt,
    pub(crate) logs: Vec<LogLine>,
}

impl From<OperationOutput> for hane_core::OperationOutput {
    fn from(old: OperationOutput) -> Self {
        hane_core::OperationOutput {
            output: old.output,
            receipt: old.receipt,
            logs: old.logs,
            proposals: Vec::new(),
        }
    }
}

/// The variants of version 2, in their order (postcard encodes the index).
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
        failure: crate::v3::OperationFailure,
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
                operations: operations.into_iter().map(Into::into).collect(),
            },
            SessionEvent::OperationStarted { operation, attempt } => {
                New::OperationStarted { operation, attempt }
            }
            SessionEvent::OperationCompleted { operation, result } => New::OperationCompleted {
                operation,
                result: result.into(),
            },
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

/// Version 2 of an `action-request`: its connection target had no CA
/// certificates.
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

/// Version 2 of an action's connection target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ConnectionTarget {
    pub(crate) name: String,
    pub(crate) base_url: String,
    pub(crate) credential: Option<String>,
    pub(crate) timeout_ms: Option<u64>,
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
                    ca_certificates: None,
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
    use crate::{Versioned, open};

    /// An envelope as a version 2 build sealed it.
    fn sealed_v2<T: Serialize>(kind: &str, item: &T) -> Vec<u8> {
        let payload = postcard::to_allocvec(item).unwrap();
        let mut blob = b"HANE".to_vec();
        blob.extend(postcard::to_allocvec(&(kind, 2u16, payload.as_slice())).unwrap());
        blob
    }

    #[test]
    fn a_version_2_action_reads_with_no_ca_certificates() {
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
                credential: Some("fleet-maintenance".to_owned()),
                timeout_ms: Some(5000),
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
        let read: hane_core::ActionRequest =
            open(&sealed_v2(hane_core::ActionRequest::KIND, &old)).unwrap();
        let connection = read.connection.as_ref().unwrap();
        assert_eq!(connection.timeout_ms, Some(5000));
        assert_eq!(connection.ca_certificates, None);
        assert!(read.outcome.as_ref().unwrap().schema_violations.is_empty());
        assert_eq!(read, hane_core::ActionRequest::from(old));
    }
}
