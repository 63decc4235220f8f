//! hane's shared vocabulary: the limits a call runs under, the policy that
//! grants it capabilities, the receipt it leaves, the ids and events that
//! sessions, runs and actions are made of, and the text forms people write
//! them in (`64Mi`, `5s`, `https://*.example.com`).
//!
//! What a release is written in (its YAML manifests and their checks) is
//! `hane-manifest`; how each of these types is stored and read back across
//! versions is `hane-stored`. Enums here are externally tagged because
//! postcard, the stored and wire format, is not self-describing.
//!
//! This crate has no runtime dependencies (no tokio, no wasmtime) so every
//! other part of hane — the sandbox, the store, the coordinator, the CLI —
//! can share these types and their serialized forms. The root re-exports
//! the names most parts use; the rest are in their modules.
//!
//! # Examples
//!
//! ```
//! use hane_core::{ByteSize, Limits, LimitsSpec};
//!
//! let spec: LimitsSpec = serde_json::from_str(r#"{"memory":"32Mi","timeout":"2s"}"#).unwrap();
//! let limits = spec.apply_to(Limits::default());
//! assert_eq!(limits.memory, ByteSize::mebibytes(32));
//! ```

pub mod action;
pub mod address;
pub mod approval;
pub mod conversation;
pub mod credential;
mod error_kind;
pub mod evaluation;
pub mod event;
pub mod file;
pub mod ids;
pub mod input;
mod json;
pub mod ledger;
pub mod lifecycle;
pub mod ontology;
pub mod operation;
pub mod policy;
pub mod quantity;
pub mod receipt;
pub mod reception;
pub mod run;
pub mod schedule;
pub mod tool;
pub mod workflow;

pub use approval::{ActionRequest, ActionState, DeciderKind, Decision, Person, Verdict, digest};
pub use conversation::Conversation;
pub use error_kind::ErrorKind;
pub use evaluation::Evaluation;
pub use event::{CliOutput, LlmTurn, Recorded, SessionEvent, ToolCall, ToolCallStatus};
pub use ids::{
    ActionId, ConversationId, EvaluationId, InputId, OperationId, ReceptionId, RunId, SessionId,
    TaskId, ToolCallId, WorkflowCaseId, now_ms,
};
pub use input::{Control, Input, InputKind};
pub use json::JsonText;
pub use ledger::Ledger;
pub use lifecycle::{IllegalTransition, Lifecycle};
pub use operation::{Operation, OperationFailure, OperationOutput, OperationState, WasmCall};
pub use policy::{Access, Policy};
pub use quantity::{ByteSize, Duration, Limits, LimitsSpec};
pub use receipt::{Impact, Outcome, Receipt};
pub use reception::{Reception, ReceptionStatus};
pub use run::{AgentRun, RunStatus, Task, TaskState};
pub use tool::{ControlTool, ToolDefinition};
pub use workflow::WorkflowCase;

/// A boxed future that can be sent between threads: what the object-safe
/// async traits of hane's crates (model adapters, drivers, container
/// runtimes) return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Serializes `item` with postcard and reads it back, as the store does
/// inside its envelope.
#[cfg(test)]
fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(item: &T) -> T {
    postcard::from_bytes(&postcard::to_allocvec(item).unwrap()).unwrap()
}
