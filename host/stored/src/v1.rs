//! Version 1 of the stored `operation`, `session-event`, `agent-run` and
//! `action-request` items, kept so items stored by earlier builds still
//! read.
//!
//! Version 2 of `agent-run` added whether the run can be resumed and how
//! often it was; a version 1 run reads as one that cannot be and never
//! was (its process ran it before runs were resumed).
//!
//! Version 2 added the `records` and `documents` grants to [`Policy`] and
//! their call counts to [`HostCalls`]. Postcard is not self-describing, so
//! a version 1 payload decodes only as these mirrors of the old shapes; each
//! converts to the current type with nothing granted and nothing counted
//! where version 1 had no field (nor the `actions` grant version 3 added).
//!
//! Only types whose layout changed are mirrored; the rest are shared.

use serde::{Deserialize, Serialize};

use hane_core::{
    Impact, Input, InputId, JsonText, Limits, OperationId, Outcome, SessionId, ToolCall,
    ToolCallId, ToolCallStatus,
    operation::LogLine,
    policy::{DirGrant, EnvGrant, HostPattern},
};

/// Decodes a version 1 payload as `Old` and converts it to the current type.
pub(crate) fn upgrade<Old, New>(version: u16, payload: &[u8]) -> Result<New, postcard::Error>
where
    Old: serde::de::DeserializeOwned + Into<New>,
{
    debug_assert_eq!(version, 1, "only version 1 is upgraded");
    postcard::from_bytes::<Old>(payload).map(Into::into)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Policy {
    pub(crate) files: Vec<DirGrant>,
    pub(crate) env: Vec<EnvGrant>,
    pub(crate) http: Vec<HostPattern>,
}

impl From<Policy> for hane_core::Policy {
    fn from(old: Policy) -> Self {
        hane_core::Policy {
            files: old.files,
            env: old.env,
            http: old.http,
            records: Vec::new(),
            documents: Vec::new(),
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
pub(crate) struct HostCalls {
    pub(crate) log: u32,
    pub(crate) http_requests: u32,
    pub(crate) denied: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Receipt {
    pub(crate) operation: String,
    pub(crate) version: String,
    pub(crate) digest: String,
    pub(crate) outcome: Outcome,
    pub(crate) fuel_consumed: u64,
    pub(crate) wall_time_us: u64,
    pub(crate) peak_memory_bytes: u64,
    pub(crate) host_calls: HostCalls,
    pub(crate) output_bytes: u64,
    pub(crate) log_bytes: u64,
}

impl From<Receipt> for hane_core::Receipt {
    fn from(old: Receipt) -> Self {
        hane_core::Receipt {
            operation: old.operation,
            version: old.version,
            digest: old.digest,
            outcome: old.outcome,
            fuel_consumed: old.fuel_consumed,
            wall_time_us: old.wall_time_us,
            peak_memory_bytes: old.peak_memory_bytes,
            host_calls: hane_core::receipt::HostCalls {
                log: old.host_calls.log,
                http_requests: old.host_calls.http_requests,
                denied: old.host_calls.denied,
                records: 0,
                documents: 0,
            },
            output_bytes: old.output_bytes,
            log_bytes: old.log_bytes,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OperationOutput {
    pub(crate) output: JsonText,
    pub(crate) receipt: Receipt,
    pub(crate) logs: Vec<LogLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OperationFailure {
    pub(crate) outcome: Outcome,
    pub(crate) message: String,
    pub(crate) receipt: Option<Receipt>,
    pub(crate) logs: Vec<LogLine>,
}

/// The variants of version 1, in their order (postcard encodes the index).
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
                operations: operations.into_iter().map(Into::into).collect(),
            },
            SessionEvent::OperationStarted { operation, attempt } => {
                New::OperationStarted { operation, attempt }
            }
            SessionEvent::OperationCompleted { operation, result } => New::OperationCompleted {
                operation,
                result: hane_core::OperationOutput {
                    output: result.output,
                    receipt: result.receipt.into(),
                    logs: result.logs,
                    proposals: Vec::new(),
                },
            },
            SessionEvent::OperationFailed { operation, failure } => New::OperationFailed {
                operation,
                failure: crate::v3::OperationFailure {
                    outcome: failure.outcome,
                    message: failure.message,
                    receipt: failure.receipt.map(Into::into),
                    logs: failure.logs,
                }
                .into(),
            },
            SessionEvent::OperationUnknown { operation, reason } => {
                New::OperationUnknown { operation, reason }
            }
            SessionEvent::RunStateChanged { run, state } => New::RunStateChanged { run, state },
            SessionEvent::Forked { parent, at } => New::Forked { parent, at },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AgentRun {
    pub(crate) id: hane_core::RunId,
    pub(crate) agent: String,
    pub(crate) release: u64,
    pub(crate) status: hane_core::RunStatus,
    pub(crate) shadow: bool,
    pub(crate) input: JsonText,
    pub(crate) result: Option<JsonText>,
    pub(crate) error: Option<String>,
    pub(crate) tool_calls: Vec<hane_core::run::ToolCallSummary>,
    pub(crate) tokens_used: u64,
    pub(crate) tasks: Vec<hane_core::TaskId>,
    pub(crate) session: Option<SessionId>,
    pub(crate) created_at_ms: u64,
    pub(crate) updated_at_ms: u64,
}

impl From<AgentRun> for hane_core::AgentRun {
    fn from(old: AgentRun) -> Self {
        hane_core::AgentRun {
            id: old.id,
            agent: old.agent,
            release: old.release,
            status: old.status,
            shadow: old.shadow,
            input: old.input,
            result: old.result,
            error: old.error,
            tool_calls: old.tool_calls,
            tokens_used: old.tokens_used,
            tasks: old.tasks,
            session: old.session,
            created_at_ms: old.created_at_ms,
            updated_at_ms: old.updated_at_ms,
            resumable: false,
            resumed: 0,
        }
    }
}

/// Version 1 of an `action-request`: its connection target had no
/// timeout.
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
    pub(crate) outcome: Option<ActionOutcome>,
    pub(crate) created_at_ms: u64,
    pub(crate) updated_at_ms: u64,
}

/// An action's outcome as versions 1 to 3 of an `action-request` stored
/// it: without the schema violations of a delivered answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ActionOutcome {
    pub(crate) state: hane_core::ActionState,
    pub(crate) detail: String,
    pub(crate) reconciled_by: Option<String>,
    pub(crate) at_ms: u64,
}

impl From<ActionOutcome> for hane_core::approval::ActionOutcome {
    fn from(old: ActionOutcome) -> Self {
        hane_core::approval::ActionOutcome {
            state: old.state,
            detail: old.detail,
            reconciled_by: old.reconciled_by,
            at_ms: old.at_ms,
            schema_violations: Vec::new(),
        }
    }
}

/// Version 1 of an action's connection target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ConnectionTarget {
    pub(crate) name: String,
    pub(crate) base_url: String,
    pub(crate) credential: Option<String>,
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
                    timeout_ms: None,
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

    /// An envelope as a version 1 build sealed it.
    fn sealed_v1<T: Serialize>(kind: &str, item: &T) -> Vec<u8> {
        let payload = postcard::to_allocvec(item).unwrap();
        let mut blob = b"HANE".to_vec();
        blob.extend(postcard::to_allocvec(&(kind, 1u16, payload.as_slice())).unwrap());
        blob
    }

    fn operation() -> Operation {
        Operation {
            id: OperationId::new(),
            session: SessionId::new(),
            tool_call: ToolCallId::new(),
            impact: Impact::Read,
            kind: OperationKind::Wasm(WasmCall {
                name: "documents.search".into(),
                component: "sha256:ab".into(),
                policy: Policy {
                    files: vec!["docs:/documents".parse().unwrap()],
                    env: vec!["LANG=C".parse().unwrap()],
                    http: vec!["https://*.example.com".parse().unwrap()],
                },
                limits: Limits::default(),
                input: JsonText::parse(r#"{"query":"tyre"}"#).unwrap(),
            }),
        }
    }

    fn receipt() -> Receipt {
        Receipt {
            operation: "documents.search".into(),
            version: "0.1.0".into(),
            digest: "sha256:00".into(),
            outcome: Outcome::Denied,
            fuel_consumed: 5,
            wall_time_us: 6,
            peak_memory_bytes: 7,
            host_calls: HostCalls {
                log: 1,
                http_requests: 2,
                denied: 3,
            },
            output_bytes: 8,
            log_bytes: 9,
        }
    }

    #[test]
    fn a_version_1_operation_reads_with_no_ledger_grants() {
        let old = operation();
        let read: hane_core::Operation =
            open(&sealed_v1(hane_core::Operation::KIND, &old)).unwrap();
        assert_eq!(read.id, old.id);
        let hane_core::operation::OperationKind::Wasm(call) = &read.kind else {
            panic!("a wasm call");
        };
        assert_eq!(call.policy.files.len(), 1);
        assert_eq!(call.policy.env.len(), 1);
        assert_eq!(call.policy.http.len(), 1);
        assert!(call.policy.records.is_empty());
        assert!(call.policy.documents.is_empty());
        assert_eq!(read, hane_core::Operation::from(old));
    }

    #[test]
    fn version_1_events_read_with_no_ledger_grants_or_counts() {
        let op = operation();
        let events = [
            SessionEvent::ToolCallRecorded {
                call: ToolCall {
                    id: ToolCallId::new(),
                    tool: "documents.search".into(),
                    input: JsonText::parse("{}").unwrap(),
                },
                status: ToolCallStatus::Submitted {
                    operations: vec![op.id.clone()],
                },
                operations: vec![op.clone()],
            },
            SessionEvent::OperationCompleted {
                operation: op.id.clone(),
                result: OperationOutput {
                    output: JsonText::parse("[]").unwrap(),
                    receipt: receipt(),
                    logs: vec![],
                },
            },
            SessionEvent::OperationFailed {
                operation: op.id.clone(),
                failure: OperationFailure {
                    outcome: Outcome::Denied,
                    message: "denied".into(),
                    receipt: Some(receipt()),
                    logs: vec![],
                },
            },
            SessionEvent::Forked {
                parent: SessionId::new(),
                at: 3,
            },
        ];
        for old in events {
            let read: hane_core::SessionEvent =
                open(&sealed_v1(hane_core::SessionEvent::KIND, &old)).unwrap();
            match &read {
                hane_core::SessionEvent::ToolCallRecorded { operations, .. } => {
                    let hane_core::operation::OperationKind::Wasm(call) = &operations[0].kind
                    else {
                        panic!("a wasm call");
                    };
                    assert!(call.policy.records.is_empty() && call.policy.documents.is_empty());
                    assert_eq!(call.policy.http.len(), 1);
                }
                hane_core::SessionEvent::OperationCompleted { result, .. } => {
                    let calls = result.receipt.host_calls;
                    assert_eq!((calls.log, calls.http_requests, calls.denied), (1, 2, 3));
                    assert_eq!((calls.records, calls.documents), (0, 0));
                }
                hane_core::SessionEvent::OperationFailed { failure, .. } => {
                    let calls = failure.receipt.as_ref().unwrap().host_calls;
                    assert_eq!((calls.denied, calls.records, calls.documents), (3, 0, 0));
                }
                hane_core::SessionEvent::Forked { at, .. } => assert_eq!(*at, 3),
                other => panic!("unexpected {other:?}"),
            }
            assert_eq!(read, hane_core::SessionEvent::from(old));
        }
    }

    #[test]
    fn a_version_1_run_reads_as_one_that_cannot_be_resumed() {
        let old = AgentRun {
            id: hane_core::RunId::new(),
            agent: "notify".into(),
            release: 3,
            status: hane_core::RunStatus::Running,
            shadow: false,
            input: JsonText::parse(r#"{"email":"a@example.com"}"#).unwrap(),
            result: None,
            error: None,
            tool_calls: Vec::new(),
            tokens_used: 12,
            tasks: Vec::new(),
            session: Some(SessionId::new()),
            created_at_ms: 1,
            updated_at_ms: 2,
        };
        let read: hane_core::AgentRun = open(&sealed_v1(hane_core::AgentRun::KIND, &old)).unwrap();
        assert!(!read.resumable);
        assert_eq!(read.resumed, 0);
        assert_eq!(
            (read.id.clone(), read.tokens_used, read.session.clone()),
            (old.id.clone(), 12, old.session.clone())
        );
        assert_eq!(read, hane_core::AgentRun::from(old));
    }

    #[test]
    fn a_version_1_action_reads_with_no_connection_timeout() {
        let old = ActionRequest {
            id: hane_core::ActionId::new(),
            run: hane_core::RunId::new(),
            agent: "crm-update".to_owned(),
            tool: "integration.execute".to_owned(),
            recipient: "crm".to_owned(),
            content: JsonText::parse(r#"{"method":"PATCH","path":"/contacts/7"}"#).unwrap(),
            digest: "sha256:00".to_owned(),
            state: hane_core::ActionState::Unknown,
            decider: hane_core::DeciderKind::Person,
            assignment: Some("crm-desk".to_owned()),
            reviewer: None,
            rule: None,
            overridden: false,
            task: None,
            connection: Some(ConnectionTarget {
                name: "crm".to_owned(),
                base_url: "https://crm.example.com".to_owned(),
                credential: Some("crm-api".to_owned()),
            }),
            trail: Vec::new(),
            attempts: Vec::new(),
            outcome: None,
            created_at_ms: 1,
            updated_at_ms: 2,
        };
        let read: hane_core::ActionRequest =
            open(&sealed_v1(hane_core::ActionRequest::KIND, &old)).unwrap();
        let connection = read.connection.as_ref().unwrap();
        assert_eq!(connection.credential.as_deref(), Some("crm-api"));
        assert_eq!(connection.timeout_ms, None);
        assert_eq!(read, hane_core::ActionRequest::from(old));
    }
}
