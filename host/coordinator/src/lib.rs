//! hane's coordinator: what stands between inputs and the sandbox.
//!
//! - the [`Inbox`], which deduplicates a session's inputs in memory in
//!   front of the store's durable check;
//! - [`OperationManager`]s, which run operations: [`LocalOperationManager`]
//!   in this process, [`ProxyOperationManager`] in a `hane worker`
//!   process reached over TCP or a Unix socket;
//! - the [`Coordinator`], which persists accepted inputs, commits tool
//!   calls with their operations, runs them with their state written
//!   through the store, and after a crash resumes what is safe to resume.

pub mod agent;
mod coordinator;
pub mod delivery;
mod inbox;
pub mod manager;

pub use agent::AgentRuntime;
pub use coordinator::{
    Coordinator, CoordinatorConfig, CoordinatorError, Delivery, Dispatched, Recovery, Settled,
    ending_event,
};
pub use inbox::Inbox;
pub use manager::{
    Ending, LocalOperationManager, OperationManager, ProxyOperationManager, Ticket, Update,
};
