//! [`LocalOperationManager`]: runs operations in this process, in the
//! sandbox.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hane_core::{
    JsonText, Ledger, Operation, OperationFailure, OperationId, OperationOutput, Outcome, Policy,
    WasmCall,
    operation::{LogLine, OperationKind},
};
use hane_sandbox::{CancelToken, Sandbox};
use tokio::runtime::Handle;
use tokio::sync::{Notify, OnceCell, Semaphore};
use tracing::Instrument as _;

use super::{Components, Ending, OperationManager, Ticket, TicketSender, lock};

/// Settings of a [`LocalOperationManager`]. Each method documents its
/// default.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    concurrency: usize,
    queue: usize,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            concurrency: std::thread::available_parallelism().map_or(1, |n| n.get()),
            queue: 10_000,
        }
    }
}

impl LocalConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Operations that run at once; the rest wait in the queue, first
    /// come first served. A wasm call keeps a core busy, so more than the
    /// number of cores only adds latency. Default: the number of CPUs
    /// (`std::thread::available_parallelism`). At least 1.
    pub fn concurrency(&mut self, n: usize) -> &mut Self {
        self.concurrency = n.max(1);
        self
    }

    /// Operations that may wait for a free slot; one more fails at once
    /// with outcome `host_error`, so an overloaded manager says so instead
    /// of growing without bound. Default: 10,000.
    pub fn queue(&mut self, n: usize) -> &mut Self {
        self.queue = n;
        self
    }
}

/// Runs operations in this process: an actor runtime on tokio with
/// bounded concurrency and cancellation.
///
/// Each operation is a task that waits for a free slot, loads its
/// component (compiled once per digest and policy, off the async threads)
/// and calls it in the [`Sandbox`]. Cloning the manager is cheap; clones
/// share the queue, the slots and the loaded components.
///
/// # Examples
///
/// ```no_run
/// use hane_manager::{Components, Ending, LocalConfig, LocalOperationManager, OperationManager};
/// use hane_sandbox::{Sandbox, SandboxConfig};
///
/// # async fn run(operation: hane_core::Operation) -> anyhow::Result<()> {
/// let sandbox = Sandbox::new(&SandboxConfig::new())?;
/// let manager = LocalOperationManager::new(
///     sandbox,
///     Components::with_builtins(hane_builtins::all()),
///     LocalConfig::new().concurrency(2),
/// );
/// match manager.submit(operation).ending().await {
///     Ending::Succeeded(done) => println!("{}", done.output),
///     other => println!("{other:?}"),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct LocalOperationManager {
    inner: Arc<Inner>,
}

struct Inner {
    sandbox: Sandbox,
    components: Components,
    slots: Arc<Semaphore>,
    concurrency: usize,
    queue_limit: usize,
    queued: AtomicUsize,
    runtime: Handle,
    /// Operations queued or running, by id.
    active: Mutex<HashMap<OperationId, Arc<Cancel>>>,
    /// Loaded components by digest, then policy (policies are few per
    /// component and have no hash).
    loaded: Mutex<HashMap<String, Vec<Loaded>>>,
}

/// A component loaded under one policy, or being loaded.
type Loaded = (Policy, Arc<OnceCell<hane_sandbox::LoadedOperation>>);

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalOperationManager")
            .field("concurrency", &self.concurrency)
            .field("queue_limit", &self.queue_limit)
            .field("queued", &self.queued)
            .finish_non_exhaustive()
    }
}

/// How one operation is cancelled: `token` interrupts its call, `queued`
/// wakes it while it waits for a slot.
#[derive(Default)]
struct Cancel {
    token: CancelToken,
    queued: Notify,
}

impl LocalOperationManager {
    /// A manager running operations on the current tokio runtime, with the
    /// components in `components`. `submit` and `cancel` may then be called
    /// from any thread.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub fn new(sandbox: Sandbox, components: Components, config: &LocalConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                sandbox,
                components,
                slots: Arc::new(Semaphore::new(config.concurrency)),
                concurrency: config.concurrency,
                queue_limit: config.queue,
                queued: AtomicUsize::new(0),
                runtime: Handle::current(),
                active: Mutex::new(HashMap::new()),
                loaded: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The components this manager runs; add to them to run more.
    pub fn components(&self) -> &Components {
        &self.inner.components
    }

    /// How many operations run at once.
    pub fn concurrency(&self) -> usize {
        self.inner.concurrency
    }
}

impl LocalOperationManager {
    /// As [`OperationManager::submit`], the operation reading `ledger`
    /// instead of the sandbox's (a worker runs each client's operations on
    /// the ledger it sent).
    pub fn submit_reading(&self, operation: Operation, ledger: Arc<Ledger>) -> Ticket {
        self.queue(operation, Some(ledger))
    }

    fn queue(&self, operation: Operation, ledger: Option<Arc<Ledger>>) -> Ticket {
        let (ticket, sender) = Ticket::new(operation.id.clone());
        let inner = &self.inner;
        match inner.admit(&operation) {
            Ok(cancel) => {
                let span = tracing::info_span!(
                    "operation",
                    operation = %operation.id,
                    name = operation.summary(),
                    session = %operation.session,
                );
                inner.runtime.spawn(
                    inner
                        .clone()
                        .run(operation, sender, cancel, ledger)
                        .instrument(span),
                );
            }
            Err(refusal) => {
                tracing::warn!(operation = %operation.id, "operation refused: {refusal}");
                sender.finish(Ending::failed(Outcome::HostError, refusal.to_string()));
            }
        }
        ticket
    }
}

impl OperationManager for LocalOperationManager {
    /// Queues `operation`. It fails at once, without starting, when its
    /// component is not in the registry, when the queue is full, or when an
    /// operation with the same id is queued or running here. It reads the
    /// sandbox's ledger.
    fn submit(&self, operation: Operation) -> Ticket {
        self.queue(operation, None)
    }

    fn cancel(&self, id: &OperationId) {
        if let Some(cancel) = lock(&self.inner.active).get(id) {
            cancel.token.cancel();
            cancel.queued.notify_one();
        }
    }
}

impl Inner {
    /// Queues `operation` as active, or says why it cannot even be queued.
    fn admit(&self, operation: &Operation) -> Result<Arc<Cancel>, AdmitError> {
        let OperationKind::Wasm(call) = &operation.kind else {
            return Err(AdmitError::NotWasm {
                summary: operation.summary().to_owned(),
            });
        };
        if !self.components.contains(&call.component) {
            return Err(AdmitError::UnknownComponent {
                component: call.component.clone(),
                name: call.name.clone(),
            });
        }
        let mut active = lock(&self.active);
        if active.contains_key(&operation.id) {
            return Err(AdmitError::Duplicate {
                id: operation.id.clone(),
            });
        }
        let waiting = self.queued.fetch_add(1, Ordering::SeqCst);
        if waiting >= self.queue_limit {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(AdmitError::QueueFull { waiting });
        }
        let cancel = Arc::new(Cancel::default());
        active.insert(operation.id.clone(), cancel.clone());
        Ok(cancel)
    }

    async fn run(
        self: Arc<Self>,
        operation: Operation,
        ticket: TicketSender,
        cancel: Arc<Cancel>,
        ledger: Option<Arc<Ledger>>,
    ) {
        let active = ActiveGuard {
            inner: &self,
            id: &operation.id,
        };
        let slot = tokio::select! {
            biased;
            () = cancel.queued.notified() => None,
            slot = self.slots.clone().acquire_owned() => slot.ok(),
        };
        self.queued.fetch_sub(1, Ordering::SeqCst);
        let ending = match &slot {
            Some(_) if !cancel.token.is_cancelled() => {
                ticket.started();
                self.execute(&operation, &cancel.token, ledger).await
            }
            _ => Ending::failed(Outcome::Cancelled, "cancelled before it started"),
        };
        // Gone from `active` before the ending is reported, so the same id
        // may be submitted again as soon as it is; the slot is freed after,
        // so the next operation starts only once this one has finished.
        drop(active);
        ticket.finish(ending);
        drop(slot);
    }

    async fn execute(
        &self,
        operation: &Operation,
        cancel: &CancelToken,
        ledger: Option<Arc<Ledger>>,
    ) -> Ending {
        let OperationKind::Wasm(call) = &operation.kind else {
            unreachable!("refused at submit");
        };
        let loaded = match self.load(call).await {
            Ok(loaded) => loaded,
            Err(e) => return Ending::failed(Outcome::HostError, e.to_string()),
        };
        let done = match ledger {
            Some(ledger) => {
                loaded
                    .call_reading(call.input.as_str(), &call.limits, cancel, ledger)
                    .await
            }
            None => {
                loaded
                    .call_with(call.input.as_str(), &call.limits, cancel)
                    .await
            }
        };
        let logs = done
            .logs
            .into_iter()
            .map(|record| LogLine {
                level: record.level.to_owned(),
                message: record.message,
            })
            .collect();
        match done.result.map(JsonText::parse) {
            Ok(Ok(output)) => {
                let receipt = &done.receipt;
                tracing::info!(
                    fuel = receipt.fuel_consumed,
                    wall_us = receipt.wall_time_us,
                    peak_memory = receipt.peak_memory_bytes,
                    "operation succeeded"
                );
                Ending::Succeeded(OperationOutput {
                    output,
                    receipt: done.receipt,
                    logs,
                    proposals: done.proposals,
                })
            }
            // Not expected: the sandbox has checked the output against its
            // schema.
            Ok(Err(e)) => Ending::Failed(OperationFailure {
                outcome: Outcome::InvalidOutput,
                guest_error: None,
                message: format!("the output is not JSON: {e}"),
                receipt: Some(done.receipt),
                logs,
            }),
            Err(e) => {
                let outcome = e.outcome();
                match outcome {
                    // The guest's own error is an answer, not an incident.
                    Outcome::OperationError | Outcome::InvalidInput => {
                        tracing::info!(outcome = outcome.as_str(), "operation failed: {e}");
                    }
                    _ => tracing::warn!(outcome = outcome.as_str(), "operation stopped: {e}"),
                }
                Ending::Failed(OperationFailure {
                    outcome,
                    guest_error: e.guest_error(),
                    message: e.to_string(),
                    receipt: Some(done.receipt),
                    logs,
                })
            }
        }
    }

    /// The component of `call` loaded under its policy, loaded once however
    /// many operations ask at the same time. A failed load is not kept, so
    /// the next operation tries again.
    async fn load(
        &self,
        call: &WasmCall,
    ) -> Result<hane_sandbox::LoadedOperation, ComponentLoadError> {
        let cell = {
            let mut loaded = lock(&self.loaded);
            let by_policy = loaded.entry(call.component.clone()).or_default();
            match by_policy.iter().find(|(policy, _)| *policy == call.policy) {
                Some((_, cell)) => cell.clone(),
                None => {
                    let cell = Arc::new(OnceCell::new());
                    by_policy.push((call.policy.clone(), cell.clone()));
                    cell
                }
            }
        };
        let loaded = cell
            .get_or_try_init(|| async {
                let bytes = self.components.get(&call.component).ok_or_else(|| {
                    ComponentLoadError::Unavailable {
                        component: call.component.clone(),
                    }
                })?;
                let sandbox = self.sandbox.clone();
                let runtime = self.runtime.clone();
                let name = call.name.clone();
                let policy = call.policy.clone();
                // Compiling with cranelift takes up to seconds of CPU; it
                // runs on a blocking thread so the async threads go on.
                tokio::task::spawn_blocking(move || {
                    runtime.block_on(sandbox.load(&name, &bytes, &policy))
                })
                .await
                .map_err(|source| ComponentLoadError::Stopped {
                    component: call.component.clone(),
                    source,
                })?
                .map_err(|source| ComponentLoadError::Load {
                    component: call.component.clone(),
                    source,
                })
            })
            .await?;
        Ok(loaded.clone())
    }
}

/// Why [`Inner::admit`] refused an operation before queueing it; the
/// operation fails with outcome `host_error` and this text.
#[derive(Debug, thiserror::Error)]
enum AdmitError {
    #[error("the local operation manager runs wasm operations only, not `{summary}`")]
    NotWasm { summary: String },
    #[error(
        "component {component} of `{name}` is not available here: it is not among this manager's components"
    )]
    UnknownComponent { component: String, name: String },
    #[error("operation {id} is already queued or running")]
    Duplicate { id: OperationId },
    #[error("the operation queue is full: {waiting} operations are waiting")]
    QueueFull { waiting: usize },
}

/// Why [`Inner::load`] could not load a call's component; the operation
/// fails with outcome `host_error` and this text.
#[derive(Debug, thiserror::Error)]
enum ComponentLoadError {
    #[error("component {component} is not available")]
    Unavailable { component: String },
    #[error("loading component {component} stopped: {source}")]
    Stopped {
        component: String,
        #[source]
        source: tokio::task::JoinError,
    },
    #[error("cannot load component {component}: {source}")]
    Load {
        component: String,
        #[source]
        source: hane_sandbox::LoadError,
    },
}

/// Removes an operation from [`Inner::active`] when dropped, also when
/// its task unwinds.
struct ActiveGuard<'a> {
    inner: &'a Inner,
    id: &'a OperationId,
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        lock(&self.inner.active).remove(self.id);
    }
}
