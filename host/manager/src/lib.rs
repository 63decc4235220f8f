//! Operation managers: actor runtimes that run [`Operation`]s.
//!
//! [`LocalOperationManager`] runs them in this process, in the sandbox;
//! [`ProxyOperationManager`] sends them to `hane worker` in another
//! process (a [`Worker`]), over the [`protocol`] on TCP or a Unix socket.
//! Both find components by digest in a shared [`Components`] registry.
//!
//! # Examples
//!
//! Running a built-in operation in this process:
//!
//! ```
//! use hane_core::{Impact, JsonText, Limits, Operation, Policy, SessionId, ToolCallId, WasmCall};
//! use hane_manager::{Components, Ending, LocalConfig, LocalOperationManager, OperationManager};
//! use hane_sandbox::{Sandbox, SandboxConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! let components = Components::with_builtins(hane_builtins::all());
//! let find = components.builtin("data.find_record").expect("built in");
//! let manager = LocalOperationManager::new(
//!     Sandbox::new(&SandboxConfig::new())?,
//!     components,
//!     &LocalConfig::new(),
//! );
//! let call = WasmCall {
//!     name: "data.find_record".to_owned(),
//!     component: hane_manager::component_digest(&find),
//!     policy: Policy::default(),
//!     limits: Limits::default(),
//!     input: JsonText::parse(r#"{"collection": "vehicles", "match": {}}"#)?,
//! };
//! let operation = Operation::wasm(SessionId::new(), ToolCallId::new(), Impact::Read, call);
//! // It reads the ledger, and its policy grants no collection: it is
//! // refused before it runs, naming the grant it lacks.
//! let Ending::Failed(failure) = manager.submit(operation).ending().await else {
//!     panic!("a component ran without the grant it imports");
//! };
//! assert!(failure.message.contains("grants no collections"), "{}", failure.message);
//! # Ok(())
//! # }
//! ```

mod components;
mod local;
pub mod protocol;
mod proxy;
mod worker;

pub use components::{Components, component_digest};
pub use local::{LocalConfig, LocalOperationManager};
pub use protocol::{
    MAX_SECRET_FILE_BYTES, PROTOCOL_VERSION, ProtocolError, SecretError, WorkerSecret,
};
pub use proxy::{ConnectError, LEDGERS_KEPT, ProxyConfig, ProxyOperationManager};
pub use worker::{
    AddrError, DEFAULT_MAX_UNAUTHENTICATED, WORKER_LEDGERS_KEPT, Worker, WorkerAddr, WorkerListener,
};

use hane_core::{Operation, OperationFailure, OperationId, OperationOutput, Outcome};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// Runs operations, here or elsewhere. Implementations bound how many run
/// at once and can cancel one that is queued or running.
pub trait OperationManager: Send + Sync {
    /// Queues `operation`. Its progress arrives on the returned ticket:
    /// [`Update::Started`] when it starts, then exactly one
    /// [`Update::Finished`].
    fn submit(&self, operation: Operation) -> Ticket;

    /// Cancels the operation with this id, if it is queued or running. A
    /// queued one never starts; a running wasm call is interrupted within
    /// milliseconds. Its ticket then finishes as failed, with outcome
    /// `cancelled`.
    fn cancel(&self, id: &OperationId);

    /// The ledger operations submitted from now on read. A local manager
    /// shares its sandbox's ([`hane_sandbox::Sandbox::set_ledger`]), so the
    /// default does nothing; one that runs operations elsewhere sends it
    /// where they run.
    fn set_ledger(&self, ledger: &std::sync::Arc<hane_core::Ledger>) {
        let _ = ledger;
    }
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Ending {
    /// It produced output.
    Succeeded(OperationOutput),
    /// It failed, or never started (cancelled while queued, component not
    /// found, manager stopped).
    Failed(OperationFailure),
    /// It started, and what happened since cannot be known: the worker
    /// running it went away. Only a `read` operation may be run again.
    Lost {
        /// What went away.
        reason: String,
    },
}

impl Ending {
    /// A failure that never reached the sandbox: no receipt, no logs.
    pub fn failed(outcome: Outcome, message: impl Into<String>) -> Self {
        Ending::Failed(OperationFailure {
            outcome,
            guest_error: None,
            message: message.into(),
            receipt: None,
            logs: Vec::new(),
        })
    }
}

/// Locks a mutex whose every critical section leaves the data valid, so a
/// panic while it was held does not matter.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Progress of one operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[expect(
    clippy::large_enum_variant,
    reason = "two updates per operation, moved once each: boxing the ending would cost an allocation and save nothing"
)]
pub enum Update {
    /// It started running.
    Started,
    /// It ended.
    Finished(Ending),
}

/// The receiving end of one submitted operation's progress.
#[derive(Debug)]
pub struct Ticket {
    id: OperationId,
    updates: mpsc::UnboundedReceiver<Update>,
}

/// The sending end of a [`Ticket`], kept by the manager that runs it.
#[derive(Debug, Clone)]
pub struct TicketSender {
    updates: mpsc::UnboundedSender<Update>,
}

impl Ticket {
    /// A ticket for operation `id` and the sender its manager reports on.
    pub fn new(id: OperationId) -> (Ticket, TicketSender) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Ticket { id, updates: rx }, TicketSender { updates: tx })
    }

    /// The operation's id.
    pub fn id(&self) -> &OperationId {
        &self.id
    }

    /// The next update; `None` after [`Update::Finished`].
    pub async fn next(&mut self) -> Option<Update> {
        self.updates.recv().await
    }

    /// The next update if one has arrived, without waiting.
    pub fn try_next(&mut self) -> Option<Update> {
        self.updates.try_recv().ok()
    }

    /// Waits for the operation to end, skipping other updates. A manager
    /// that dropped the ticket without finishing it is reported as lost.
    pub async fn ending(mut self) -> Ending {
        while let Some(update) = self.updates.recv().await {
            if let Update::Finished(ending) = update {
                return ending;
            }
        }
        Ending::Lost {
            reason: "the operation manager stopped without reporting an ending".into(),
        }
    }
}

impl TicketSender {
    /// Reports that the operation started.
    pub fn started(&self) {
        // A dropped ticket means nobody waits for the outcome; nothing to do.
        let _ = self.updates.send(Update::Started);
    }

    /// Reports how the operation ended.
    pub fn finish(&self, ending: Ending) {
        let _ = self.updates.send(Update::Finished(ending));
    }
}
