//! Events and operations the store tests append, shared by the test
//! targets (`#[path]`-included); not every target uses every one.
#![allow(dead_code, reason = "each target uses some of these")]

use hane_core::{
    Impact, Input, InputKind, JsonText, Limits, Operation, OperationFailure, OperationId,
    OperationOutput, Outcome, Policy, Receipt, SessionEvent, SessionId, ToolCall, ToolCallId,
    ToolCallStatus, WasmCall, operation::OperationKind,
};
use hane_store::SessionStore;

/// Every event of `session`.
pub async fn history(store: &dyn SessionStore, session: &SessionId) -> Vec<SessionEvent> {
    store
        .read(session, 0..u64::MAX)
        .await
        .expect("the session reads")
        .into_iter()
        .map(|r| r.event)
        .collect()
}

pub fn run(state: &str) -> SessionEvent {
    SessionEvent::RunStateChanged {
        run: "run-1".into(),
        state: state.into(),
    }
}

pub fn accepted(id: &str) -> SessionEvent {
    SessionEvent::InputAccepted {
        input: Input {
            id: id.parse().expect("a valid input id"),
            kind: InputKind::External {
                payload: JsonText::parse(r#"{"order":17}"#).unwrap(),
            },
        },
    }
}

pub fn forked(parent: &SessionId, at: u64) -> SessionEvent {
    SessionEvent::Forked {
        parent: parent.clone(),
        at,
    }
}

pub fn operation(session: &SessionId, impact: Impact) -> Operation {
    Operation {
        id: OperationId::new(),
        session: session.clone(),
        tool_call: ToolCallId::new(),
        impact,
        kind: OperationKind::Wasm(WasmCall {
            name: "documents.search".into(),
            component: "sha256:00".into(),
            policy: Policy::default(),
            limits: Limits::default(),
            input: JsonText::parse(r#"{"query":"tyre"}"#).unwrap(),
        }),
    }
}

pub fn tool_call<'a>(operations: impl IntoIterator<Item = &'a Operation>) -> SessionEvent {
    let operations: Vec<Operation> = operations.into_iter().cloned().collect();
    SessionEvent::ToolCallRecorded {
        call: ToolCall {
            id: ToolCallId::new(),
            tool: "documents.search".into(),
            input: JsonText::parse(r#"{"query":"tyre"}"#).unwrap(),
        },
        status: ToolCallStatus::Submitted {
            operations: operations.iter().map(|op| op.id.clone()).collect(),
        },
        operations,
    }
}

pub fn started(op: &Operation, attempt: u32) -> SessionEvent {
    SessionEvent::OperationStarted {
        operation: op.id.clone(),
        attempt,
    }
}

pub fn completed(op: &Operation) -> SessionEvent {
    SessionEvent::OperationCompleted {
        operation: op.id.clone(),
        result: OperationOutput {
            output: JsonText::parse(r#"{"hits":[]}"#).unwrap(),
            receipt: Receipt {
                operation: "documents.search".into(),
                version: "0.1.0".into(),
                digest: "sha256:00".into(),
                outcome: Outcome::Succeeded,
                fuel_consumed: 1,
                wall_time_us: 1,
                peak_memory_bytes: 1,
                host_calls: Default::default(),
                output_bytes: 11,
                log_bytes: 0,
            },
            logs: vec![],
            proposals: Vec::new(),
        },
    }
}

pub fn failed(op: &Operation) -> SessionEvent {
    SessionEvent::OperationFailed {
        operation: op.id.clone(),
        failure: OperationFailure {
            outcome: Outcome::Cancelled,
            guest_error: None,
            message: "cancelled".into(),
            receipt: None,
            logs: vec![],
        },
    }
}

pub fn unknown(op: &Operation) -> SessionEvent {
    SessionEvent::OperationUnknown {
        operation: op.id.clone(),
        reason: "the host restarted while it ran".into(),
    }
}
