//! Agents and their runs: releases of definitions, the Tool Gateway, the
//! translators, the scripted driver and the [`AgentRuntime`] that drives
//! runs.

mod action;
mod budget;
mod gateway;
mod journal;
mod outbound;
mod release;
mod run;
mod runtime;
mod script;
mod token;
mod tools;
mod translate;

pub use action::{
    ActionOutcome, ActionRequest, ActionState, Attempt, ConnectionTarget, DeciderKind, Decision,
    Person, Verdict, digest,
};
pub use budget::{
    ActiveBudget, BudgetExceeded, BudgetReport, BudgetScope, ReportAlert, ReportLimits,
    ReportUsage, utc_day,
};
pub use gateway::{Admitted, GatewayError, Stop, TOKEN_GRACE, ToolGateway};
pub use outbound::{ActionError, ExecutionLedger, Recovered};
pub use release::{
    ActivationError, LoadedAgent, LoadedRelease, ReleaseBody, SourceFile, activate_dir, load_active,
};
pub use run::{AgentRun, RunStatus, Task, ToolCallSummary};
pub use runtime::{AgentRuntime, OpenError, RunError, RuntimeConfig, StartRun};
pub use token::{RunToken, RunTokenKey, TokenError};
pub use tools::{ControlTool, OperationTool, ReleasedOperation, Tool, ToolDefinition, ToolKind};
pub use translate::{ToolResult, format, translate};
