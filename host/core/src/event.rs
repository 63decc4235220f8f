//! [`SessionEvent`]: the items of a session's history.

use serde::{Deserialize, Serialize};

use crate::{
    ActionId, Input, InputId, JsonText, Operation, OperationFailure, OperationId, OperationOutput,
    SessionId, TaskId, ToolCallId,
};

/// One item of a session's append-only history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
#[non_exhaustive]
pub enum SessionEvent {
    /// An input was accepted; it is persisted before anything acts on it.
    InputAccepted {
        /// The input.
        input: Input,
    },
    /// The coordinator acted on an accepted input; appended in the same
    /// batch as the first thing it did about it, so an input without this
    /// event was accepted and not yet acted on.
    InputHandled {
        /// The input's id.
        input: InputId,
    },
    /// The model answered one request.
    ModelTurn {
        /// The model that answered.
        model: String,
        /// Tokens of the request.
        input_tokens: u64,
        /// Tokens of the answer.
        output_tokens: u64,
        /// The answer, normalized.
        response: JsonText,
    },
    /// A tool call was translated; its status and the operations it
    /// produced are committed together with this event.
    ToolCallRecorded {
        /// The call.
        call: ToolCall,
        /// Whether it was accepted.
        status: ToolCallStatus,
        /// The operations it produced, all `pending`.
        operations: Vec<Operation>,
    },
    /// An operation started (again, for a `read` operation after a crash).
    OperationStarted {
        /// Which operation.
        operation: OperationId,
        /// 1 for the first run, more for runs after a crash.
        attempt: u32,
    },
    /// An operation finished with output.
    OperationCompleted {
        /// Which operation.
        operation: OperationId,
        /// Its output, receipt and logs.
        result: OperationOutput,
    },
    /// An operation finished with an error.
    OperationFailed {
        /// Which operation.
        operation: OperationId,
        /// The error.
        failure: OperationFailure,
    },
    /// An operation was interrupted where running it again is not safe.
    OperationUnknown {
        /// Which operation.
        operation: OperationId,
        /// What interrupted it.
        reason: String,
    },
    /// A run in the session changed state.
    RunStateChanged {
        /// The run.
        run: String,
        /// Its new state, such as `running` or `succeeded`.
        state: String,
    },
    /// The session was forked from another; the first event of a fork.
    Forked {
        /// The session forked from.
        parent: SessionId,
        /// How many of the parent's events the fork shares.
        at: u64,
    },
    /// One LLM turn of a run: a model call through the Model Gateway.
    /// Written by version 5 and later; [`SessionEvent::ModelTurn`] is the
    /// shorter form no build writes any more.
    LlmTurn(Box<LlmTurn>),
    /// What a CLI driver's CLI printed: its own event stream (JSON
    /// lines on stdout) and the tail of its stderr, capped. Written by
    /// version 6 and later.
    CliOutput(Box<CliOutput>),
    /// A run proposed an outbound action: appended (and on disk) before
    /// the action is stored, so that a resumed run meets its actions in
    /// its history where it proposed them. Written by version 7 and later.
    ActionProposed {
        /// The action's id.
        action: ActionId,
        /// Its tool, such as `communication.send_email`.
        tool: String,
        /// The digest of its recipient and content.
        digest: String,
    },
    /// A run created a task for people (a handover or a task): appended
    /// (and on disk) before the task is stored. Written by version 7 and
    /// later.
    TaskCreated {
        /// The task's id.
        task: TaskId,
        /// `handover` or `task`.
        kind: String,
        /// The group it is for.
        assignment: String,
        /// Its title.
        title: String,
    },
}

/// The output of a CLI driver's CLI (`codex`, `claude`, `opencode`) for
/// one run, as the driver captured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CliOutput {
    /// The driver, such as `codex`.
    pub driver: String,
    /// The CLI's version, as its package names it.
    pub version: String,
    /// The lines of its stdout (its JSON event stream), in order, up to
    /// the driver's cap.
    pub events: Vec<String>,
    /// Bytes of stdout left out beyond the cap.
    pub events_omitted_bytes: u64,
    /// The last bytes of its stderr.
    pub stderr_tail: String,
    /// How the CLI's process ended, such as `exit code 1`, or `stopped by
    /// hane` when the run ended first.
    pub exit: String,
}

/// One model call of a run, as the Model Gateway records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmTurn {
    /// Which turn of the run, from 1.
    pub turn: u32,
    /// The `ModelProvider` that served it.
    pub provider: String,
    /// The model asked for.
    pub model: String,
    /// SHA-256 of the request's canonical JSON.
    pub request_digest: String,
    /// The normalized completed response; the model the upstream named
    /// and its request id are inside.
    pub response: JsonText,
    /// Tokens of the request, as the upstream reported them.
    pub input_tokens: u64,
    /// Tokens of the answer.
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache.
    pub cached_tokens: u64,
    /// How long the call took, retries included, in milliseconds.
    pub latency_ms: u64,
    /// The output cap the gateway set: the model's cap, or what the run
    /// had left if less.
    pub max_output_tokens: u64,
    /// The context builder's report: what was omitted, truncated or
    /// compacted to fit the model's window.
    pub context: JsonText,
}

impl SessionEvent {
    /// The name of the event, as in exports.
    pub fn name(&self) -> &'static str {
        match self {
            SessionEvent::InputAccepted { .. } => "inputAccepted",
            SessionEvent::InputHandled { .. } => "inputHandled",
            SessionEvent::ModelTurn { .. } => "modelTurn",
            SessionEvent::ToolCallRecorded { .. } => "toolCallRecorded",
            SessionEvent::OperationStarted { .. } => "operationStarted",
            SessionEvent::OperationCompleted { .. } => "operationCompleted",
            SessionEvent::OperationFailed { .. } => "operationFailed",
            SessionEvent::OperationUnknown { .. } => "operationUnknown",
            SessionEvent::RunStateChanged { .. } => "runStateChanged",
            SessionEvent::Forked { .. } => "forked",
            SessionEvent::LlmTurn(_) => "llmTurn",
            SessionEvent::CliOutput(_) => "cliOutput",
            SessionEvent::ActionProposed { .. } => "actionProposed",
            SessionEvent::TaskCreated { .. } => "taskCreated",
        }
    }
}

/// A request to use a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call's id.
    pub id: ToolCallId,
    /// The tool, such as `documents.search`.
    pub tool: String,
    /// The arguments.
    pub input: JsonText,
}

/// The translation outcome of a tool call; how its operations run is
/// tracked separately, by operation state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// The call failed validation; nothing runs.
    Rejected {
        /// What was wrong, for the model to act on.
        message: String,
    },
    /// The call was accepted and produced these operations.
    Submitted {
        /// The operations, in order.
        operations: Vec<OperationId>,
    },
}

/// An event as stored: its place in the session and when it was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    /// The event's position in the session, from 0. A fork shares its
    /// parent's positions below the fork point.
    pub seq: u64,
    /// When it was appended, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The event.
    pub event: SessionEvent,
}
