//! [`AgentRun`]: one run of an agent, as stored and as reported.

use std::fmt;
use std::str::FromStr;

use crate::{JsonText, Lifecycle, RunId, SessionId, TaskId, lifecycle::UnknownState};
use serde::{Deserialize, Serialize};

/// Where a run is. It starts `queued`, then `running`, and ends in one of
/// the other four; its transitions are [`Lifecycle::TRANSITIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(description = "A run starts `queued` or `running` and ends in one of the others")]
pub enum RunStatus {
    /// Accepted, not started yet.
    Queued,
    /// Its driver is calling tools.
    Running,
    /// It ended with a result that its agent's output schema accepts.
    Succeeded,
    /// It ended with an error.
    Failed,
    /// It was cancelled.
    Cancelled,
    /// It went over one of its agent's limits.
    LimitExceeded,
}

impl RunStatus {
    /// Every status, in order.
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::Cancelled,
        RunStatus::LimitExceeded,
    ];

    /// The status as written in the API, such as `limit_exceeded`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::LimitExceeded => "limit_exceeded",
        }
    }

    /// Whether the run has ended.
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Queued | RunStatus::Running)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run status that is not one of [`RunStatus::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown run status `{0}`: expected one of queued, running, succeeded, failed, cancelled, limit_exceeded"
)]
pub struct UnknownRunStatus(pub String);

impl FromStr for RunStatus {
    type Err = UnknownRunStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownRunStatus(s.to_owned()))
    }
}

impl Lifecycle for RunStatus {
    const KIND: &'static str = "run";
    const ALL: &'static [Self] = &RunStatus::ALL;
    const INITIAL: &'static [Self] = &[RunStatus::Queued];
    const TRANSITIONS: &'static [(Self, Self)] = {
        use RunStatus::*;
        &[
            // A process starts it.
            (Queued, Running),
            // It never started: its session could not be made or its
            // store write failed, or a process that took it over from a
            // dead one (or claimed it from the queue) could not start it.
            (Queued, Failed),
            // Cancelled before it started.
            (Queued, Cancelled),
            // A process that took it over from a dead one resumes it.
            (Running, Running),
            (Running, Succeeded),
            (Running, Failed),
            (Running, Cancelled),
            (Running, LimitExceeded),
        ]
    };

    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// Where a task for people is: [`Lifecycle::TRANSITIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Waiting for a person.
    Open,
    /// Nothing more to do: the action it asked a decision on was decided
    /// or withdrawn.
    Done,
}

impl TaskState {
    /// The state as stored, such as `open`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Open => "open",
            TaskState::Done => "done",
        }
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TaskState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::lifecycle::parse(s)
    }
}

impl Lifecycle for TaskState {
    const KIND: &'static str = "task";
    const ALL: &'static [Self] = &[TaskState::Open, TaskState::Done];
    const INITIAL: &'static [Self] = &[TaskState::Open];
    const TRANSITIONS: &'static [(Self, Self)] = &[(TaskState::Open, TaskState::Done)];

    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// How one tool call of a run ended. Stored and shown as its name
/// (`succeeded`), as it was when it was a string, so stored runs read the
/// same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ToolCallEnd {
    /// It ran and answered.
    Succeeded,
    /// It ran and failed (the operation's outcome is in the detail).
    Failed,
    /// The gateway or the translator refused it.
    Rejected,
    /// Not done: a handover in a shadow run.
    Skipped,
}

impl ToolCallEnd {
    /// Every end.
    pub const ALL: [ToolCallEnd; 4] = [
        ToolCallEnd::Succeeded,
        ToolCallEnd::Failed,
        ToolCallEnd::Rejected,
        ToolCallEnd::Skipped,
    ];

    /// Its name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCallEnd::Succeeded => "succeeded",
            ToolCallEnd::Failed => "failed",
            ToolCallEnd::Rejected => "rejected",
            ToolCallEnd::Skipped => "skipped",
        }
    }
}

/// Serialized through its name ([`ToolCallEnd::as_str`]).
impl schemars::JsonSchema for ToolCallEnd {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ToolCallEnd".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let ends: Vec<&str> = Self::ALL.iter().map(|e| e.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": ends })
    }
}

impl fmt::Display for ToolCallEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ToolCallEnd {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|end| end.as_str() == s)
            .ok_or_else(|| UnknownState {
                kind: "tool call",
                name: s.to_owned(),
                expected: Self::ALL.map(Self::as_str).join(", "),
            })
    }
}

impl TryFrom<String> for ToolCallEnd {
    type Error = UnknownState;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        name.parse()
    }
}

impl From<ToolCallEnd> for String {
    fn from(end: ToolCallEnd) -> Self {
        end.as_str().to_owned()
    }
}

/// How one tool call of a run went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct ToolCallSummary {
    /// The tool.
    pub tool: String,
    /// How it ended (a failure's outcome is in `detail`).
    pub status: ToolCallEnd,
    /// What the driver was told went wrong, or what a control tool did.
    pub detail: String,
    /// The operation that ran it, for operation-backed tools.
    pub operation: Option<String>,
    /// How long the call took, in microseconds.
    pub duration_us: u64,
}

/// One run of an agent: its input, what it did and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct AgentRun {
    /// The run's id.
    pub id: RunId,
    /// The agent's name.
    pub agent: String,
    /// The release the agent came from.
    pub release: u64,
    /// Where it is.
    pub status: RunStatus,
    /// A shadow run skips handovers and outbound actions and only keeps a
    /// record of them.
    pub shadow: bool,
    /// The input, valid against the agent's input schema.
    pub input: JsonText,
    /// The result given with `submit_result`, for a succeeded run.
    pub result: Option<JsonText>,
    /// Why it failed, was cancelled or exceeded a limit.
    pub error: Option<String>,
    /// Its tool calls, in order.
    pub tool_calls: Vec<ToolCallSummary>,
    /// Model tokens used.
    pub tokens_used: u64,
    /// Tasks for people it created, such as handovers.
    pub tasks: Vec<TaskId>,
    /// The session holding its history.
    pub session: Option<SessionId>,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
    /// Whether a process that takes the run over from a dead one resumes
    /// it from its session (its agent's own `scripted` or `llm` driver
    /// drives it from its input alone) rather than ending it `failed`.
    /// Runs stored before this field (version 1) read as not resumable.
    #[serde(default)]
    pub resumable: bool,
    /// How many times a process took the run over from a dead one and
    /// resumed it.
    #[serde(default)]
    pub resumed: u32,
}

/// A task for people that a run created, such as a handover.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Task {
    /// The task's id.
    pub id: TaskId,
    /// The run that created it.
    pub run: RunId,
    /// `handover` (from `request_human_help`) or `task` (from
    /// `tasks.create`).
    #[schemars(extend("enum" = ["handover", "task", "approval"]))]
    pub kind: String,
    /// The group it is assigned to.
    pub assignment: String,
    /// What the agent wrote: a reason or a title.
    pub title: String,
    /// More the agent wrote, if anything.
    pub details: Option<JsonText>,
    /// When it was created.
    pub created_at_ms: u64,
}
