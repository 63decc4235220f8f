//! hane's coordinator: what stands between inputs and the sandbox.
//!
//! - the [`Inbox`], which deduplicates a session's inputs in memory in
//!   front of the store's durable check;
//! - the [`Coordinator`], which persists accepted inputs, commits tool
//!   calls with their operations, runs them on an operation manager
//!   (`hane-manager`) with their state written through the store, and
//!   after a crash resumes what is safe to resume;
//! - the run kernel, [`AgentRuntime`] (`runtime`): a run's life and
//!   nothing else — starting it from a release (`release`), driving it
//!   with its driver (`drivers`: scripted, llm, the CLI drivers), every
//!   tool call through the Tool Gateway and every model call through the
//!   Model Gateway (`gateway`), the translators and control tools
//!   (`tools`), its journal and resume, following, cancelling, and the
//!   lease under which this process holds its runs (`lease`);
//! - the services around it, each holding a kernel handle and the store
//!   parts it needs, with an error type of its own: [`Approvals`]
//!   (people's decisions and decider overrides, over the
//!   [`ExecutionLedger`]; an action's proposal and its decider are chosen
//!   inside the run's tool call, in `approvals` too), [`Budgets`], [`Conversations`], [`ReceptionDesk`],
//!   [`Evaluations`], [`Workflows`] and the [`schedule::Scheduler`];
//!   [`Services`] composes them in one place, as the binary, the server
//!   and the tests use them.

mod approvals;
pub mod budget;
pub mod conversation;
pub mod coordinator;
pub mod drivers;
pub mod evaluation;
pub mod gateway;
mod inbox;
pub mod integrations;
pub mod lease;
mod listing;
pub mod reception;
pub mod release;
mod runtime;
pub mod schedule;
mod services;
pub mod tools;
pub mod workflow;

pub use approvals::{ActionError, Approvals, ExecutionLedger, RecoveredActions};
pub use budget::{BudgetExceeded, BudgetReport, Budgets};
pub use conversation::Conversations;
pub use coordinator::{Coordinator, CoordinatorConfig, CoordinatorError};
pub use drivers::{
    ExternalDriver, ExternalDrivers, ExternalRun, Llm, ModelCaller, RunDriver, ToolCaller,
};
pub use evaluation::Evaluations;
pub use gateway::{GatewayError, RunToken, RunTokenKey, ToolGateway};
pub use inbox::Inbox;
pub use integrations::Integrations;
pub use lease::Lease;
pub use listing::{Listed, Skipped};
pub use reception::ReceptionDesk;
pub use release::{
    ActivationError, LoadedRelease, ReleaseBody, ReleaseLoadError, activate_dir, load_active,
};
pub use runtime::{
    AgentRuntime, AttachedRun, CANCEL_SETTLES_WITHIN, ModelConfig, OpenError, RunError, RunEvent,
    RuntimeConfig, StartRun, TakenOver,
};
pub use services::Services;
pub use tools::{ReleasedOperation, Tool, ToolResult};
pub use workflow::Workflows;
