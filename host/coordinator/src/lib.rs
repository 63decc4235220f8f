//! hane's coordinator: what stands between inputs and the sandbox.
//!
//! - the [`Inbox`], which deduplicates a session's inputs in memory in
//!   front of the store's durable check;
//! - the [`Coordinator`], which persists accepted inputs, commits tool
//!   calls with their operations, runs them on an operation manager
//!   (`hane-manager`) with their state written through the store, and
//!   after a crash resumes what is safe to resume;
//! - agents and their runs, one module per part of the platform:
//!   `release` (a directory of definitions checked and activated as one),
//!   `gateway` (the Tool Gateway and the RunToken), `tools` (definitions,
//!   translators, the control tools the host runs), `drivers` (the
//!   [`Driver`] seam and the scripted driver), `approvals` (proposals,
//!   deciders and the [`ExecutionLedger`]; delivery through
//!   `hane-delivery`), `budget` (the day's limits), `schedule` (the runs
//!   a release's `Schedule`s start, once per tick across processes), and
//!   `runtime`, the [`AgentRuntime`] façade that starts and drives runs.

mod approvals;
mod budget;
pub mod conversation;
mod coordinator;
mod drivers;
pub mod evaluation;
mod gateway;
mod inbox;
mod lease;
mod listing;
pub mod reception;
mod release;
mod runtime;
pub mod schedule;
mod tools;
pub mod workflow;

pub use approvals::{ActionError, ExecutionLedger, Recovered};
pub use budget::{
    ActiveBudget, BudgetExceeded, BudgetReport, BudgetScope, ReportAlert, ReportLimits,
    ReportUsage, utc_day,
};
pub use coordinator::{
    Abandoned, Coordinator, CoordinatorConfig, CoordinatorError, Dispatched, Received, Recovery,
    Settled, ending_event,
};
pub use drivers::{
    BASELINE_PROFILES, BoxFuture, CliConfig, CliImageProfile, Driver, IMAGE_PREFIX, Llm,
    MAX_RESULT_BYTES, ModelCall, ModelCaller, ModelInfo, REMINDER, RunEnd, ServerAddress,
    ToolCaller, UNTRUSTED_NOTE, model_tool_name, task_message,
};
pub use gateway::model::{InFlight, ModelAdmitted, ModelCallError, input_slack};
pub use gateway::{
    Admitted, GatewayError, RunToken, RunTokenKey, Stop, TOKEN_GRACE, TokenError, ToolGateway,
};
pub use inbox::Inbox;
pub use lease::{
    BadLease, DEFAULT_LEASE, LEASE_ENV, Lease, MIN_LEASE, lease_from_env, parse_lease,
};
pub use listing::{Listed, Skipped};
pub use release::{
    ActivationError, AgentModel, LoadError, LoadedAgent, LoadedProvider, LoadedRelease,
    ReleaseBody, ReleasedProvider, SourceFile, activate_dir, load_active,
};
pub use runtime::{
    AgentRuntime, AttachedRun, ModelConfig, OpenError, RunError, RunEvent, RuntimeConfig, StartRun,
    TakenOver,
};
pub use tools::{
    ControlTool, OperationTool, ReleasedOperation, Tool, ToolDefinition, ToolKind, ToolResult,
    format, translate,
};
