//! hane's coordinator: what stands between inputs and the sandbox.
//!
//! - the [`Inbox`], which deduplicates a session's inputs in memory in
//!   front of the store's durable check;
//! - the [`Coordinator`], which persists accepted inputs, commits tool
//!   calls with their operations, runs them on an operation manager
//!   (`hane-manager`) with their state written through the store, and
//!   after a crash resumes what is safe to resume;
//! - [`agent`]: releases, the Tool Gateway, translators, drivers, approvals
//!   and the execution ledger, and the [`AgentRuntime`] that drives runs;
//!   approved actions are delivered through `hane-delivery`.

pub mod agent;
mod coordinator;
mod inbox;

pub use agent::AgentRuntime;
pub use coordinator::{
    Coordinator, CoordinatorConfig, CoordinatorError, Dispatched, Received, Recovery, Settled,
    ending_event,
};
pub use inbox::Inbox;
