//! [`Operation`]: a serializable description of work, and how it ended.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{
    Impact, JsonText, Lifecycle, Limits, OperationId, Outcome, Policy, Receipt, SessionId,
    ToolCallId,
};

/// Work produced by a tool call, to be run by an operation manager, here or
/// in another process. It carries everything needed to run it, so it can be
/// stored, sent to a worker, and run again after a crash when its impact
/// allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    /// This operation's id.
    pub id: OperationId,
    /// The session it belongs to.
    pub session: SessionId,
    /// The tool call that produced it.
    pub tool_call: ToolCallId,
    /// What it may do to the world outside; decides what recovery does
    /// with it when it was interrupted.
    pub impact: Impact,
    /// What to run.
    pub kind: OperationKind,
}

/// The kinds of work an operation describes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OperationKind {
    /// One call of a WebAssembly component.
    Wasm(WasmCall),
}

/// One call of a component, with the policy and limits it runs under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmCall {
    /// The operation's name, such as `documents.search`.
    pub name: String,
    /// `sha256:` digest of the component's bytes; the manager finds the
    /// bytes by it.
    pub component: String,
    /// What the call may touch.
    pub policy: Policy,
    /// The limits of the call.
    pub limits: Limits,
    /// The input JSON.
    pub input: JsonText,
}

impl Operation {
    /// A new operation, with a new id, that calls a component for
    /// `tool_call` of `session`.
    pub fn wasm(session: SessionId, tool_call: ToolCallId, impact: Impact, call: WasmCall) -> Self {
        Self {
            id: OperationId::new(),
            session,
            tool_call,
            impact,
            kind: OperationKind::Wasm(call),
        }
    }

    /// A short description for timelines, such as `documents.search`.
    pub fn summary(&self) -> &str {
        match &self.kind {
            OperationKind::Wasm(call) => &call.name,
        }
    }
}

/// Where an operation is. `pending → running → succeeded | failed |
/// unknown`; a `read` operation found running after a crash goes to
/// `running` again. Every transition is in [`Lifecycle::TRANSITIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationState {
    /// Committed with its tool call, not started.
    Pending,
    /// Started and not yet finished.
    Running,
    /// Finished with output.
    Succeeded,
    /// Finished with an error.
    Failed,
    /// Interrupted where running it again is not safe; a person decides
    /// what happened.
    Unknown,
}

impl OperationState {
    /// Every state, in lifecycle order.
    pub const ALL: [OperationState; 5] = [
        OperationState::Pending,
        OperationState::Running,
        OperationState::Succeeded,
        OperationState::Failed,
        OperationState::Unknown,
    ];

    /// The snake_case name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationState::Pending => "pending",
            OperationState::Running => "running",
            OperationState::Succeeded => "succeeded",
            OperationState::Failed => "failed",
            OperationState::Unknown => "unknown",
        }
    }

    /// Whether nothing more happens to the operation.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            OperationState::Succeeded | OperationState::Failed | OperationState::Unknown
        )
    }
}

impl fmt::Display for OperationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operation state's name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown operation state `{0}`: expected pending, running, succeeded, failed or unknown")]
pub struct UnknownOperationState(pub String);

impl FromStr for OperationState {
    type Err = UnknownOperationState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownOperationState(s.to_owned()))
    }
}

impl Lifecycle for OperationState {
    const KIND: &'static str = "operation";
    const ALL: &'static [Self] = &OperationState::ALL;
    const INITIAL: &'static [Self] = &[OperationState::Pending];
    const TRANSITIONS: &'static [(Self, Self)] = {
        use OperationState::*;
        &[
            (Pending, Running),
            // Cancelled before it started.
            (Pending, Failed),
            // Run again after a crash: a `read` operation only, which the
            // store checks by the operation's impact.
            (Running, Running),
            (Running, Succeeded),
            (Running, Failed),
            (Running, Unknown),
        ]
    };

    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// One message an operation logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogLine {
    /// `trace` to `error`, or `stdout`/`stderr`.
    pub level: String,
    /// The message.
    pub message: String,
}

/// What a successful operation produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationOutput {
    /// The output JSON.
    pub output: JsonText,
    /// What the call consumed.
    pub receipt: Receipt,
    /// What it logged.
    pub logs: Vec<LogLine>,
    /// The outbound actions it proposed through the `actions` capability,
    /// in order; nothing was sent.
    pub proposals: Vec<crate::action::ProposedAction>,
}

/// The kind of error a guest returned, from the WIT `error` variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuestErrorKind {
    /// `invalid-input`: the guest refused its input.
    InvalidInput,
    /// `not-found`: what the input named does not exist.
    NotFound,
    /// `denied`: the guest refused the request itself.
    Denied,
    /// `failed`: anything else.
    Failed,
}

impl GuestErrorKind {
    /// The snake_case name, as a tool result's error kind.
    pub const fn as_str(self) -> &'static str {
        match self {
            GuestErrorKind::InvalidInput => "invalid_input",
            GuestErrorKind::NotFound => "not_found",
            GuestErrorKind::Denied => "denied",
            GuestErrorKind::Failed => "failed",
        }
    }
}

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationFailure {
    /// The kind of failure.
    pub outcome: Outcome,
    /// The guest's own error kind, when `outcome` is `operation_error`.
    pub guest_error: Option<GuestErrorKind>,
    /// The error in words, such as `fuel exhausted: ...`.
    pub message: String,
    /// The receipt, when the call reached the sandbox.
    pub receipt: Option<Receipt>,
    /// What it logged.
    pub logs: Vec<LogLine>,
}
