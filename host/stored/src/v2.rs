//! Version 2 of the stored `operation` and `session-event` items, kept so
//! items stored by earlier builds still read.
//!
//! Version 3 added the `actions` grant to [`Policy`] and the proposals an
//! operation made to [`OperationOutput`]. Postcard is not
//! self-describing, so a version 2 payload decodes only as these mirrors of
//! the old shapes; each converts to the current type with no action
//! granted. Only types whose layout changed, and those that hold them, are
//! mirrored; the rest are shared.

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
