//! [`Coordinator`]: persists accepted inputs, commits what is done about
//! them, runs committed operations with their state written through the
//! store, and recovers after a crash.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use hane_core::{
    Control, Impact, Input, InputId, InputKind, Operation, OperationFailure, OperationId,
    OperationState, Outcome, SessionEvent, SessionId,
};
use hane_store::{OperationRecord, SessionStore, StoreError};
use tokio::task::JoinHandle;

use hane_manager::{Ending, OperationManager};

use crate::Inbox;

/// Settings of a [`Coordinator`].
///
/// | setting | default |
/// |---|---|
/// | `inbox_capacity` | [`Inbox::DEFAULT_CAPACITY`] input ids per session |
/// | `inboxes` | 1024 sessions' inboxes kept in memory |
/// | `read_attempts` | 3 runs of a `read` operation whose worker went away |
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    inbox_capacity: usize,
    inboxes: usize,
    read_attempts: u32,
}

impl CoordinatorConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self {
            inbox_capacity: Inbox::DEFAULT_CAPACITY,
            inboxes: 1024,
            read_attempts: 3,
        }
    }

    /// Input ids each session's inbox keeps.
    pub fn inbox_capacity(&mut self, n: usize) -> &mut Self {
        self.inbox_capacity = n;
        self
    }

    /// Sessions whose inboxes are kept in memory; the least recently
    /// created one is dropped beyond this (the store still refuses its
    /// duplicates).
    pub fn inboxes(&mut self, n: usize) -> &mut Self {
        self.inboxes = n.max(1);
        self
    }

    /// How many times a `read` operation runs when the worker running it
    /// goes away (other impacts run once, whatever happens).
    pub fn read_attempts(&mut self, n: u32) -> &mut Self {
        self.read_attempts = n.max(1);
        self
    }
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// A coordinator failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoordinatorError {
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// [`Coordinator::execute_read`] was given an operation that is not
    /// `read`.
    #[error(
        "operation `{operation}` is {impact}: only read operations may run before they are recorded"
    )]
    NotRead {
        /// The operation.
        operation: OperationId,
        /// Its impact.
        impact: Impact,
    },
    /// The task running an operation stopped without recording an ending.
    #[error("operation `{operation}` stopped without an ending: {message}")]
    Aborted {
        /// The operation.
        operation: OperationId,
        /// Why.
        message: String,
    },
}

/// What became of a delivered input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Accepted and persisted as event `seq`.
    Accepted {
        /// The `input_accepted` event's position.
        seq: u64,
    },
    /// Already accepted before; nothing was done.
    Duplicate,
}

/// How a dispatched operation settled.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The operation.
    pub id: OperationId,
    /// Its recorded final state.
    pub state: OperationState,
    /// What the manager reported.
    pub ending: Ending,
}

/// An operation running under the coordinator.
#[derive(Debug)]
pub struct Dispatched {
    id: OperationId,
    handle: JoinHandle<Result<Settled, StoreError>>,
}

impl Dispatched {
    /// The operation's id.
    pub fn id(&self) -> &OperationId {
        &self.id
    }

    /// Waits until its final state is recorded.
    ///
    /// # Errors
    ///
    /// Recording a state failed, or the task running it was aborted.
    pub async fn settled(self) -> Result<Settled, CoordinatorError> {
        match self.handle.await {
            Ok(result) => Ok(result?),
            Err(e) => Err(CoordinatorError::Aborted {
                operation: self.id,
                message: e.to_string(),
            }),
        }
    }
}

/// What [`Coordinator::abandon`] settled.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Abandoned {
    /// Operations never started, or `read` ones: failed as cancelled.
    pub cancelled: Vec<OperationId>,
    /// `write` and `outbound` operations that were running: `unknown`.
    pub unknown: Vec<OperationId>,
}

/// What recovery found and did.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Operations committed but never started, now started.
    pub resumed: Vec<Dispatched>,
    /// `read` operations that were running, started again.
    pub rerun: Vec<Dispatched>,
    /// `write` and `outbound` operations that were running, now `unknown`.
    pub unknown: Vec<OperationId>,
}

#[derive(Default)]
struct Sessions {
    inboxes: HashMap<SessionId, Inbox>,
    order: VecDeque<SessionId>,
    running: HashMap<SessionId, HashSet<OperationId>>,
}

struct Inner {
    store: Arc<dyn SessionStore>,
    manager: Arc<dyn OperationManager>,
    config: CoordinatorConfig,
    sessions: Mutex<Sessions>,
}

/// Owns what a guest must never touch: the store and the dispatch of
/// operations. Cheap to clone; clones share everything.
///
/// The rules it keeps:
/// - an input is persisted before anything acts on it, and a session
///   accepts each input id once (the [`Inbox`] first, the store always);
/// - an operation is recorded `running` before it is handed to the
///   manager, so a crash can never hide that it may have started;
/// - after a crash, [`Coordinator::recover`] starts what never started,
///   runs `read` operations again, and marks `write` and `outbound` ones
///   `unknown` instead of running them again.
#[derive(Clone)]
pub struct Coordinator {
    inner: Arc<Inner>,
}

impl Coordinator {
    /// A coordinator over `store`, running operations on `manager`.
    pub fn new(
        store: Arc<dyn SessionStore>,
        manager: Arc<dyn OperationManager>,
        config: &CoordinatorConfig,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                manager,
                config: config.clone(),
                sessions: Mutex::new(Sessions::default()),
            }),
        }
    }

    /// The operation manager that runs what it dispatches.
    pub fn manager(&self) -> &Arc<dyn OperationManager> {
        &self.inner.manager
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.inner.store
    }

    /// Accepts `input` for `session` unless it was accepted before. A
    /// `cancel` control input cancels the session's running operations.
    ///
    /// # Errors
    ///
    /// The store failed, or the session does not exist.
    pub async fn deliver(
        &self,
        session: &SessionId,
        input: Input,
    ) -> Result<Received, CoordinatorError> {
        if self
            .inner
            .sessions()
            .inbox(session, &self.inner.config)
            .contains(&input.id)
        {
            return Ok(Received::Duplicate);
        }
        let id = input.id.clone();
        let cancel = matches!(
            input.kind,
            InputKind::Control {
                command: Control::Cancel { .. }
            }
        );
        let delivery = match self
            .inner
            .store
            .append(session, vec![SessionEvent::InputAccepted { input }])
            .await
        {
            Ok(appended) => Received::Accepted {
                seq: appended.first_seq,
            },
            Err(StoreError::DuplicateInput { .. }) => Received::Duplicate,
            Err(e) => return Err(e.into()),
        };
        let mut sessions = self.inner.sessions();
        sessions.inbox(session, &self.inner.config).remember(id);
        if cancel && delivery != Received::Duplicate {
            for operation in sessions.running.get(session).into_iter().flatten() {
                self.inner.manager.cancel(operation);
            }
        }
        Ok(delivery)
    }

    /// Appends `events` to `session` in one transaction, then starts every
    /// operation that a `tool_call_recorded` event among them produced.
    ///
    /// A `read` operation is recorded `running` in that same transaction,
    /// which saves a write per call: a crash after the commit makes
    /// recovery run it (again), which is safe for a read whether or not it
    /// had started. `write` and `outbound` operations are recorded
    /// `running` on their own, just before they start, so that recovery can
    /// tell one that never started (started then) from one that may have
    /// had its effect (`unknown`).
    ///
    /// # Errors
    ///
    /// The store refused the batch; then nothing was appended and nothing
    /// started.
    pub async fn commit(
        &self,
        session: &SessionId,
        mut events: Vec<SessionEvent>,
    ) -> Result<Vec<Dispatched>, CoordinatorError> {
        let operations: Vec<Operation> = events
            .iter()
            .filter_map(|event| match event {
                SessionEvent::ToolCallRecorded { operations, .. } => Some(operations.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        events.extend(
            operations
                .iter()
                .filter(|op| op.impact == Impact::Read)
                .map(|op| SessionEvent::OperationStarted {
                    operation: op.id.clone(),
                    attempt: 1,
                }),
        );
        self.inner.store.append(session, events).await?;
        Ok(operations
            .into_iter()
            .map(|operation| {
                let recorded = operation.impact == Impact::Read;
                self.dispatch_with(operation, 1, recorded)
            })
            .collect())
    }

    /// Runs a `read` operation whose recording the caller owns: nothing is
    /// written here. The caller records `tool_call_recorded` and
    /// `operation_started` (attempt 1) before or while it runs, and the
    /// ending after (see [`ending_event`]); a crash in between leaves it
    /// unrecorded or `running`, and either way running it again is safe,
    /// because it only reads. It can be cancelled like any running
    /// operation, by id or by a `cancel` input to its session. A read whose
    /// worker went away runs again, up to the configured attempts; the
    /// second value is how many attempts ran.
    ///
    /// # Errors
    ///
    /// [`CoordinatorError::NotRead`] for an operation that is not `read`:
    /// those must be recorded `running` before they start, by
    /// [`Coordinator::commit`].
    pub async fn execute_read(
        &self,
        operation: &Operation,
    ) -> Result<(Ending, u32), CoordinatorError> {
        if operation.impact != Impact::Read {
            return Err(CoordinatorError::NotRead {
                operation: operation.id.clone(),
                impact: operation.impact,
            });
        }
        self.inner.remember_running(operation);
        let mut attempt = 1;
        let ending = loop {
            match self.inner.attempt(operation, attempt).await {
                Some(ending) => break ending,
                None => attempt += 1,
            }
        };
        self.inner.forget_running(&operation.session, &operation.id);
        Ok((ending, attempt))
    }

    /// Cancels a queued or running operation; it settles as failed with
    /// outcome `cancelled`.
    pub fn cancel(&self, operation: &OperationId) {
        self.inner.manager.cancel(operation);
    }

    /// Resumes after a restart, from what the store says.
    ///
    /// - `pending` operations never started: they start now.
    /// - `running` `read` operations run again (a new attempt).
    /// - `running` `write` and `outbound` operations may have had their
    ///   effect: they become `unknown` and never run again by themselves.
    ///
    /// Each interrupted operation is also recorded in its session as a
    /// `crash` input, whose id makes a second recovery add nothing.
    ///
    /// # Errors
    ///
    /// The store failed; recovery can be run again.
    pub async fn recover(&self) -> Result<Recovery, CoordinatorError> {
        self.recover_where(|_| true).await
    }

    /// As [`Coordinator::recover`], for the operations of `session` only:
    /// the session of a run another process was running and this one
    /// takes over. The session must not be live in this process.
    ///
    /// # Errors
    ///
    /// The store failed; recovery can be run again.
    pub async fn recover_session(&self, session: &SessionId) -> Result<Recovery, CoordinatorError> {
        self.recover_where(|operation| operation.session == *session)
            .await
    }

    async fn recover_where(
        &self,
        wanted: impl Fn(&Operation) -> bool,
    ) -> Result<Recovery, CoordinatorError> {
        let mut recovery = Recovery::default();
        let records = self.unsettled().await?;
        for record in records {
            let operation = record.operation;
            if !wanted(&operation) {
                continue;
            }
            match (record.state, operation.impact) {
                (OperationState::Running, Impact::Read) => {
                    let attempt = record.attempts + 1;
                    let crash = crash_input(
                        &operation,
                        format!("crash/{}/{attempt}", operation.id),
                        "the host stopped while it ran; it reads only, so it runs again",
                    );
                    self.deliver(&operation.session, crash).await?;
                    recovery.rerun.push(self.dispatch(operation, attempt));
                }
                (OperationState::Running, impact) => {
                    let reason = format!(
                        "the host stopped while it ran; a {impact} operation is never run again by itself"
                    );
                    let crash = crash_input(&operation, format!("crash/{}", operation.id), &reason);
                    self.deliver(&operation.session, crash).await?;
                    self.inner
                        .store
                        .append(
                            &operation.session,
                            vec![SessionEvent::OperationUnknown {
                                operation: operation.id.clone(),
                                reason,
                            }],
                        )
                        .await?;
                    recovery.unknown.push(operation.id);
                }
                _ => recovery.resumed.push(self.dispatch(operation, 1)),
            }
        }
        Ok(recovery)
    }

    /// Settles the operations another process left unsettled in
    /// `session`, whose run it no longer runs: a `write` or `outbound`
    /// operation that was running becomes `unknown` (it may have had its
    /// effect, and never runs again by itself); one never started, or a
    /// `read` one, fails as cancelled. `reason` says what happened. The
    /// session must not be live in this process.
    ///
    /// # Errors
    ///
    /// The store failed; what was settled stays settled, and a second
    /// call settles the rest.
    pub async fn abandon(
        &self,
        session: &SessionId,
        reason: &str,
    ) -> Result<Abandoned, CoordinatorError> {
        let mut abandoned = Abandoned::default();
        let records = self.unsettled().await?;
        for record in records {
            let operation = record.operation;
            if operation.session != *session {
                continue;
            }
            let event = match (record.state, operation.impact) {
                (OperationState::Running, Impact::Write | Impact::Outbound) => {
                    abandoned.unknown.push(operation.id.clone());
                    SessionEvent::OperationUnknown {
                        operation: operation.id,
                        reason: reason.to_owned(),
                    }
                }
                _ => {
                    abandoned.cancelled.push(operation.id.clone());
                    SessionEvent::OperationFailed {
                        operation: operation.id,
                        failure: OperationFailure {
                            outcome: Outcome::Cancelled,
                            guest_error: None,
                            message: reason.to_owned(),
                            receipt: None,
                            logs: Vec::new(),
                        },
                    }
                }
            };
            self.inner.store.append(session, vec![event]).await?;
        }
        Ok(abandoned)
    }

    /// Every operation still `pending` or `running` in the store.
    async fn unsettled(&self) -> Result<Vec<OperationRecord>, CoordinatorError> {
        Ok(self
            .inner
            .store
            .operations(&[OperationState::Pending, OperationState::Running])
            .await?)
    }

    /// The external and control inputs `session` accepted that no
    /// `input_handled` event answers yet, oldest first: what a restarted
    /// coordinator still has to act on.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn unhandled_inputs(
        &self,
        session: &SessionId,
    ) -> Result<Vec<Input>, CoordinatorError> {
        let events = self.inner.store.read(session, 0..u64::MAX).await?;
        let handled: HashSet<&InputId> = events
            .iter()
            .filter_map(|recorded| match &recorded.event {
                SessionEvent::InputHandled { input } => Some(input),
                _ => None,
            })
            .collect();
        Ok(events
            .iter()
            .filter_map(|recorded| match &recorded.event {
                SessionEvent::InputAccepted { input }
                    if !matches!(input.kind, InputKind::Crash { .. })
                        && !handled.contains(&input.id) =>
                {
                    Some(input.clone())
                }
                _ => None,
            })
            .collect())
    }

    fn dispatch(&self, operation: Operation, attempt: u32) -> Dispatched {
        self.dispatch_with(operation, attempt, false)
    }

    /// Runs `operation` as attempt `attempt`; `recorded` when its
    /// `operation_started` for this attempt is already stored.
    fn dispatch_with(&self, operation: Operation, attempt: u32, recorded: bool) -> Dispatched {
        let id = operation.id.clone();
        let inner = Arc::clone(&self.inner);
        let handle = tokio::spawn(async move { inner.run(operation, attempt, recorded).await });
        Dispatched { id, handle }
    }
}

impl Inner {
    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        // The table holds no invariant a panic could break halfway.
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn run(
        &self,
        operation: Operation,
        mut attempt: u32,
        mut recorded: bool,
    ) -> Result<Settled, StoreError> {
        let session = operation.session.clone();
        let id = operation.id.clone();
        self.remember_running(&operation);
        let result = async {
            loop {
                // Recorded before the manager sees it: from here on a crash
                // leaves it `running`, and recovery knows it may have run.
                if !std::mem::take(&mut recorded) {
                    self.store
                        .append(
                            &session,
                            vec![SessionEvent::OperationStarted {
                                operation: id.clone(),
                                attempt,
                            }],
                        )
                        .await?;
                }
                let Some(ending) = self.attempt(&operation, attempt).await else {
                    attempt += 1;
                    continue;
                };
                let (state, event) = ending_event(&id, &ending);
                self.store.append(&session, vec![event]).await?;
                return Ok(Settled {
                    id: id.clone(),
                    state,
                    ending,
                });
            }
        }
        .await;
        self.forget_running(&session, &id);
        result
    }

    /// Runs attempt `attempt` of `operation`; `None` when the worker
    /// running it went away and, being a read with attempts left, it runs
    /// again.
    async fn attempt(&self, operation: &Operation, attempt: u32) -> Option<Ending> {
        let ending = self.manager.submit(operation.clone()).ending().await;
        let again = matches!(ending, Ending::Lost { .. })
            && operation.impact == Impact::Read
            && attempt < self.config.read_attempts;
        (!again).then_some(ending)
    }

    /// Marks `operation` running in its session, so a `cancel` input
    /// reaches it.
    fn remember_running(&self, operation: &Operation) {
        self.sessions()
            .running
            .entry(operation.session.clone())
            .or_default()
            .insert(operation.id.clone());
    }

    fn forget_running(&self, session: &SessionId, id: &OperationId) {
        let mut sessions = self.sessions();
        if let Some(running) = sessions.running.get_mut(session) {
            running.remove(id);
            if running.is_empty() {
                sessions.running.remove(session);
            }
        }
    }
}

/// The state an operation that ended as `ending` is in, and the event that
/// records it.
pub fn ending_event(id: &OperationId, ending: &Ending) -> (OperationState, SessionEvent) {
    match ending {
        Ending::Succeeded(result) => (
            OperationState::Succeeded,
            SessionEvent::OperationCompleted {
                operation: id.clone(),
                result: result.clone(),
            },
        ),
        Ending::Failed(failure) => (
            OperationState::Failed,
            SessionEvent::OperationFailed {
                operation: id.clone(),
                failure: failure.clone(),
            },
        ),
        Ending::Lost { reason } => (
            OperationState::Unknown,
            SessionEvent::OperationUnknown {
                operation: id.clone(),
                reason: reason.clone(),
            },
        ),
    }
}

impl Sessions {
    fn inbox(&mut self, session: &SessionId, config: &CoordinatorConfig) -> &mut Inbox {
        if !self.inboxes.contains_key(session) {
            if self.order.len() >= config.inboxes
                && let Some(oldest) = self.order.pop_front()
            {
                self.inboxes.remove(&oldest);
            }
            self.order.push_back(session.clone());
        }
        self.inboxes
            .entry(session.clone())
            .or_insert_with(|| Inbox::new(config.inbox_capacity))
    }
}

fn crash_input(operation: &Operation, id: String, reason: &str) -> Input {
    Input {
        // Operation ids are short and printable, so this is a valid input id.
        id: id.parse().expect("crash input ids are valid"),
        kind: InputKind::Crash {
            operation: Some(operation.id.clone()),
            reason: reason.to_owned(),
        },
    }
}
