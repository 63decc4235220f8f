//! [`AgentRuntime`]: starts agent runs from the active release, drives
//! them, and passes every tool call through the [`ToolGateway`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use hane_core::{
    Control, ErrorKind, Impact, Input, InputId, InputKind, JsonText, Operation, Outcome, RunId,
    SessionEvent, SessionId, ToolCall, ToolCallId, ToolCallStatus,
};
use hane_sandbox::{Sandbox, SandboxConfig, StartError, describe_violations};
use hane_store::{
    Registry, RunQuery, RunRow, SqliteConfig, SqliteStore, StoreError, Synchronous, TaskRow,
};
use serde_json::Value;
use tokio::sync::watch;
use tracing::Instrument as _;

mod call;
mod config;
mod drive;
mod error;
mod events;
mod journal;
mod model;
mod queue;
mod releases;
mod resume;
mod takeover;

use call::RunTools;
use config::Operations;
pub use config::{OpenError, RuntimeConfig};
pub use error::RunError;

use crate::approvals::Proposals;
use crate::budget::DayBudget;
use crate::tools::Controls;
pub(crate) use call::ToolCalls;
pub use events::RunEvent;
pub use model::ModelConfig;
pub use queue::RunQueue;
pub(crate) use releases::Releases;
pub(crate) use resume::Replaying;
pub(crate) use takeover::Takeover;

pub(crate) use hane_core::{
    AgentRun, RunStatus, Task,
    run::{ToolCallEnd, ToolCallSummary},
};

use crate::approvals::ExecutionLedger;
use crate::budget::{BudgetExceeded, BudgetScope};
use crate::drivers::{self, ExternalDrivers, RunEnd, ToolCaller};
use crate::gateway::{Admitted, GatewayError, RunToken, RunTokenKey, Stop, ToolGateway};
use crate::lease::Lease;
use crate::release::{ActivationError, LoadedAgent, LoadedRelease, ReleaseLoadError, load_active};
use crate::tools::{self as translate, ControlService, ToolKind, ToolResult};
use hane_core::BoxFuture;
use hane_core::ToolDefinition;
use hane_delivery::DeliveryConfig;
use hane_manager::{Components, Ending, LocalConfig, LocalOperationManager, OperationManager};
use journal::Journal;

use crate::{Coordinator, CoordinatorConfig, CoordinatorError, Listed, coordinator::ending_event};

/// How long [`AgentRuntime::cancel`] waits for the cancelled run to end
/// before answering with the run as it is.
pub const CANCEL_SETTLES_WITHIN: Duration = Duration::from_secs(10);

/// The runs [`AgentRuntime::take_over`] took from dead processes.
#[derive(Debug, Clone, Default)]
pub struct TakenOver {
    /// Resumed here, as they were when resumed.
    pub resumed: Vec<AgentRun>,
    /// Ended `failed`.
    pub ended: Vec<AgentRun>,
}

impl TakenOver {
    /// Whether it took nothing.
    pub fn is_empty(&self) -> bool {
        self.resumed.is_empty() && self.ended.is_empty()
    }
}

/// A request to start a run.
#[derive(Debug, Clone, PartialEq)]
pub struct StartRun {
    /// The agent's name.
    pub agent: String,
    /// Its input.
    pub input: Value,
    /// Skip handovers and outbound actions; only keep a record.
    pub shadow: bool,
}

/// What a run starts with beside its request: for a message of a
/// conversation, the conversation so far, and that it is followed.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunContext {
    /// Earlier messages, which the `llm` driver puts before the task and a
    /// CLI driver's prompt before the input.
    pub(crate) history: Vec<hane_model_types::Message>,
    /// Keep the run's events for followers ([`AgentRuntime::follow`]).
    pub(crate) follow: bool,
    /// The release to run in, when not the active one: a candidate
    /// evaluated before it becomes active, or the release a workflow case
    /// started in.
    pub(crate) release: Option<Arc<LoadedRelease>>,
    /// The run's id, when chosen before it starts (a workflow step records
    /// it first, so the step's run is never started twice). The caller
    /// makes sure no run with this id is stored.
    pub(crate) id: Option<RunId>,
}

/// A run driven from outside, by whoever holds its token
/// ([`AgentRuntime::start_attached`]).
#[derive(Debug, Clone)]
pub struct AttachedRun {
    /// The run, as it started.
    pub run: AgentRun,
    /// Its token: every tool call and model call of the run carries it.
    pub token: RunToken,
}

/// A run in progress in this process.
pub(crate) struct LiveRun {
    pub(crate) run: Mutex<AgentRun>,
    pub(crate) agent: Arc<LoadedAgent>,
    /// The release the run started in: its decider policies decide the
    /// run's actions.
    pub(crate) release: Arc<LoadedRelease>,
    /// Model tokens reserved from the day's budget when the run started:
    /// the UTC day and how many.
    pub(crate) reservation: Option<(String, u64)>,
    /// The run's model, when its agent has one.
    pub(crate) model: Option<Arc<model::RunModel>>,
    pub(crate) session: Mutex<Option<SessionId>>,
    pub(crate) journal: std::sync::OnceLock<Arc<Journal>>,
    /// Set by a cancel; read before the run starts, when the gateway has
    /// no gate for it yet.
    pub(crate) cancelled: AtomicBool,
    /// Set when the run's end is being recorded, so it is recorded once.
    pub(crate) ending: AtomicBool,
    pub(crate) submitted: Mutex<Option<Value>>,
    /// Told when `submit_result` (or `submit_review`) accepted a result.
    pub(crate) result_ready: tokio::sync::Notify,
    /// For a run driven from outside ([`AgentRuntime::start_attached`]):
    /// where its token goes once its gate is open.
    pub(crate) attached: Mutex<Option<tokio::sync::oneshot::Sender<RunToken>>>,
    /// For a run of an external driver: what its start prepared.
    pub(crate) external: Mutex<Option<Box<dyn drivers::ExternalDriver>>>,
    /// The run's status, told to waiters on every change of the run (the
    /// run itself is read from `run` when wanted: a run of many tool calls
    /// is not copied on each).
    pub(crate) changes: watch::Sender<RunStatus>,
    /// The status the store has for the run, as this process last wrote
    /// (or read) it: where its next write moves it from.
    pub(crate) stored: Mutex<RunStatus>,
    /// The conversation so far, for a message's run.
    pub(crate) history: Vec<hane_model_types::Message>,
    /// What the run does, for followers, when it was started to be
    /// followed.
    pub(crate) events: Option<events::Events>,
    /// For a run resumed after its process died: what it did before, not
    /// yet asked for again.
    pub(crate) replay: Mutex<Option<resume::Replay>>,
}

impl LiveRun {
    /// `run` of `agent` from `release`, not yet driven, with nothing
    /// beside what its driver needs.
    pub(crate) fn new(
        run: AgentRun,
        agent: Arc<LoadedAgent>,
        release: Arc<LoadedRelease>,
        reservation: Option<(String, u64)>,
        model: Option<Arc<model::RunModel>>,
    ) -> Self {
        let (changes, _) = watch::channel(run.status);
        Self {
            stored: Mutex::new(run.status),
            run: Mutex::new(run),
            agent,
            release,
            reservation,
            model,
            session: Mutex::new(None),
            journal: std::sync::OnceLock::new(),
            cancelled: AtomicBool::new(false),
            ending: AtomicBool::new(false),
            submitted: Mutex::new(None),
            result_ready: tokio::sync::Notify::new(),
            attached: Mutex::new(None),
            external: Mutex::new(None),
            changes,
            history: Vec::new(),
            events: None,
            replay: Mutex::new(None),
        }
    }

    /// Applies `change` to the live run and tells waiters; the run as it
    /// is now.
    pub(crate) fn update(&self, change: impl FnOnce(&mut AgentRun)) -> AgentRun {
        let snapshot = {
            let mut run = lock(&self.run);
            change(&mut run);
            run.updated_at_ms = now_ms();
            run.clone()
        };
        tell(&self.changes, snapshot.status);
        snapshot
    }

    /// As [`LiveRun::update`], without a copy of the run: what each
    /// tool call and model call does, so that a call's cost does not grow
    /// with the run's calls so far.
    pub(crate) fn amend(&self, change: impl FnOnce(&mut AgentRun)) {
        let status = {
            let mut run = lock(&self.run);
            change(&mut run);
            run.updated_at_ms = now_ms();
            run.status
        };
        tell(&self.changes, status);
    }

    pub(crate) fn snapshot(&self) -> AgentRun {
        lock(&self.run).clone()
    }

    /// The run's id, without a copy of the whole run (whose summaries grow
    /// with every call).
    pub(crate) fn run_id(&self) -> RunId {
        lock(&self.run).id.clone()
    }

    /// Whether it is a shadow run.
    pub(crate) fn is_shadow(&self) -> bool {
        lock(&self.run).shadow
    }

    /// The model tokens it has used so far.
    pub(crate) fn tokens_used(&self) -> u64 {
        lock(&self.run).tokens_used
    }

    /// Tells the run's followers of `event`, when it has any.
    pub(crate) fn tell(&self, event: impl FnOnce() -> RunEvent) {
        if let Some(events) = &self.events {
            events.send(event());
        }
    }
}

pub(crate) struct Inner {
    /// This process's lease: runs are stored held under it.
    pub(crate) lease: Lease,
    pub(crate) registry: Registry,
    pub(crate) coordinator: Coordinator,
    pub(crate) sandbox: Sandbox,
    pub(crate) components: Components,
    pub(crate) gateway: ToolGateway,
    pub(crate) release: RwLock<Option<Arc<LoadedRelease>>>,
    pub(crate) live: Mutex<HashMap<RunId, Arc<LiveRun>>>,
    pub(crate) actions: ExecutionLedger,
    pub(crate) models: model::Models,
    /// The drivers of agents whose driver runs outside this process.
    pub(crate) external: Option<Arc<dyn ExternalDrivers>>,
    /// The most runs this process drives at once before it leaves new
    /// ones queued for any process; 0 for no limit.
    pub(crate) max_runs: std::sync::atomic::AtomicUsize,
    /// Told when a run of this process ends: it may have room again.
    pub(crate) room: tokio::sync::Notify,
    /// The services answering control tools the kernel does not (see
    /// [`AgentRuntime::answer_controls`]); weak, so that a service holding
    /// the kernel is not kept alive by it.
    pub(crate) controls: RwLock<HashMap<hane_core::ControlTool, Weak<dyn ControlService>>>,
}

/// Starts and drives agent runs. Cheap to clone; clones share everything.
///
/// Each run gets a session in the store (its input is the session's first
/// input, with the run's id as the input id), a [`RunToken`] from the
/// gateway, and a task that drives it; every tool call goes through
/// [`AgentRuntime::call_tool`], which is the only way to reach a tool.
#[derive(Clone)]
pub struct AgentRuntime {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for AgentRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRuntime").finish_non_exhaustive()
    }
}

/// Tells the waiters of a run its status when it changed: most changes
/// (a tool call's summary, tokens used) leave it as it was, and waking
/// every waiter for each of them would cost a task's wake-up per call.
fn tell(changes: &watch::Sender<RunStatus>, status: RunStatus) {
    changes.send_if_modified(|told| {
        let changed = *told != status;
        *told = status;
        changed
    });
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) use hane_core::now_ms;

impl AgentRuntime {
    /// Opens everything a runtime needs on the store at `path` (a SQLite
    /// file, or a PostgreSQL database when `path` is its address: see
    /// [`hane_store::postgres_url`]): the session store, the registry in
    /// the same database, a sandbox, the
    /// configured components, a local operation manager and a
    /// coordinator. A new store is made only where nothing is at `path`
    /// ([`Registry::created`] on [`AgentRuntime::registry`] says so);
    /// anything else there but a store is refused (see
    /// [`SqliteStore::open`]). It takes a lease on the store (see
    /// [`Lease`]); runs a dead process left live are ended by
    /// [`AgentRuntime::take_over`], which a process calls after opening
    /// (and a server again every so often).
    ///
    /// # Errors
    ///
    /// The store cannot be opened or the sandbox cannot start.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub fn open(path: &std::path::Path, config: &RuntimeConfig) -> Result<Self, OpenError> {
        let mut store_config = SqliteConfig::new();
        store_config.synchronous(config.synchronous);
        // The registry first, so that its `created` says whether this
        // open made the store.
        let registry = Registry::open_with(path, config.synchronous)?;
        let store: Arc<dyn hane_store::SessionStore> = match hane_store::postgres_url(path) {
            Some(url) => Arc::new(hane_store::PostgresStore::open(url)?),
            None => Arc::new(SqliteStore::open(path, &store_config)?),
        };
        let lease = Lease::acquire(
            &registry,
            config.lease.unwrap_or(crate::lease::DEFAULT_LEASE),
        )?;
        let sandbox = Sandbox::new(&config.sandbox)?;
        let components = config.components.clone();
        let manager: Arc<dyn OperationManager> = match &config.operations {
            Some(Operations(manager)) => manager.clone(),
            None => Arc::new(LocalOperationManager::new(
                sandbox.clone(),
                components.clone(),
                &config.local,
            )),
        };
        let coordinator = Coordinator::new(store, manager, &config.coordinator);
        let actions = ExecutionLedger::new(
            registry.clone(),
            config.delivery.clone(),
            config.scope.clone(),
            lease.clone(),
        );
        let mut runtime =
            Self::assemble(registry, coordinator, sandbox, components, actions, lease);
        if let Some(inner) = Arc::get_mut(&mut runtime.inner) {
            inner.models = model::Models::new(config.model.clone(), config.external.clone());
            inner.external = config.external.clone();
        }
        // Actions a stopped process left mid-delivery become `unknown`.
        // Approved ones never attempted are left to `resume_actions` (a
        // long-running server) or their next approval: a short command
        // must not start deliveries it may not live to finish.
        // Runs a dead process left live are ended by `take_over`, which
        // the caller awaits: a short command must not exit halfway
        // through, leaving them taken and not yet ended.
        let actions = runtime.inner.actions.clone();
        tokio::spawn(async move {
            if let Err(e) = actions.recover(false).await {
                tracing::error!("recovering outbound actions: {e}");
            }
        });
        runtime.watch_lease();
        Ok(runtime)
    }

    /// A runtime over `registry` (releases, runs, tasks), running tool
    /// calls through `coordinator`, whose operation manager finds
    /// components in `components`; `sandbox` loads components at
    /// activation and holds the active release's ledger. It takes a lease
    /// of [`DEFAULT_LEASE`](crate::lease::DEFAULT_LEASE) on the store.
    ///
    /// # Errors
    ///
    /// The lease could not be stored.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub fn new(
        registry: Registry,
        coordinator: Coordinator,
        sandbox: Sandbox,
        components: Components,
    ) -> Result<Self, StoreError> {
        let lease = Lease::acquire(&registry, crate::lease::DEFAULT_LEASE)?;
        let actions = ExecutionLedger::new(
            registry.clone(),
            DeliveryConfig::new(),
            BudgetScope::default(),
            lease.clone(),
        );
        let runtime = Self::assemble(registry, coordinator, sandbox, components, actions, lease);
        runtime.watch_lease();
        Ok(runtime)
    }

    /// Stops every live run when this process's lease is lost: another
    /// process may be taking them over. Each ends `failed` saying so (its
    /// end is not stored if the run was taken already).
    fn watch_lease(&self) {
        let weak = Arc::downgrade(&self.inner);
        self.inner.lease.on_lost(move || {
            let Some(inner) = weak.upgrade() else {
                return;
            };
            let message = format!(
                "this process's lease on the store (`{}`) was lost, so another process may take the run over: it was stopped here",
                inner.lease.holder()
            );
            let live: Vec<RunId> = lock(&inner.live).keys().cloned().collect();
            for id in live {
                inner.gateway.stop(&id, Stop::Failed(message.clone()));
            }
        });
    }

    fn assemble(
        registry: Registry,
        coordinator: Coordinator,
        sandbox: Sandbox,
        components: Components,
        actions: ExecutionLedger,
        lease: Lease,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                lease,
                registry,
                coordinator,
                sandbox,
                components,
                gateway: ToolGateway::new(RunTokenKey::generate()),
                release: RwLock::new(None),
                live: Mutex::new(HashMap::new()),
                actions,
                models: model::Models::default(),
                external: None,
                max_runs: std::sync::atomic::AtomicUsize::new(0),
                room: tokio::sync::Notify::new(),
                controls: RwLock::default(),
            }),
        }
    }

    /// The execution ledger of outbound actions.
    pub fn actions(&self) -> &ExecutionLedger {
        &self.inner.actions
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// The gateway.
    pub fn gateway(&self) -> &ToolGateway {
        &self.inner.gateway
    }

    /// The sandbox.
    pub fn sandbox(&self) -> &Sandbox {
        &self.inner.sandbox
    }

    /// Has `service` answer the control tools `tools` of every run from
    /// now on; the composition of services calls it. The kernel keeps only
    /// a weak handle: once `service` is dropped, those tools fail saying
    /// they are not served.
    pub(crate) fn answer_controls(
        &self,
        tools: &[hane_core::ControlTool],
        service: &Arc<dyn ControlService>,
    ) {
        let mut controls = self
            .inner
            .controls
            .write()
            .unwrap_or_else(|e| e.into_inner());
        for tool in tools {
            controls.insert(*tool, Arc::downgrade(service));
        }
    }

    /// Whether run `id` is driven by this process now.
    pub(crate) fn is_live(&self, id: &RunId) -> bool {
        lock(&self.inner.live).contains_key(id)
    }

    /// The runs queued for any process on this store, as this process
    /// takes its share of them.
    pub fn queue(&self) -> RunQueue<'_> {
        RunQueue { kernel: self }
    }

    /// How this process reaches models: credentials, retries, adapters.
    pub(crate) fn models(&self) -> &model::Models {
        &self.inner.models
    }

    /// Starts a run; it is `queued` when this returns, and goes on in the
    /// background.
    ///
    /// # Errors
    ///
    /// No release, unknown agent, input not valid against the agent's
    /// input schema, a driver this build cannot run, or the store failed.
    pub async fn start(&self, request: StartRun) -> Result<AgentRun, RunError> {
        self.start_with(request, None, RunContext::default()).await
    }

    /// As [`AgentRuntime::start`], with `context`.
    pub(crate) async fn start_in(
        &self,
        request: StartRun,
        context: RunContext,
    ) -> Result<AgentRun, RunError> {
        self.start_with(request, None, context).await
    }

    /// What run `id` does from now on, after what it did so far, until it
    /// ends, for a run started to be followed (a conversation's message);
    /// `None` for a run that is not live here or was not started so.
    pub fn follow(&self, id: &RunId) -> Option<tokio::sync::mpsc::UnboundedReceiver<RunEvent>> {
        let live = lock(&self.inner.live).get(id).cloned()?;
        live.events.as_ref().map(events::Events::follow)
    }

    /// Starts a run of `request.agent` that is driven from outside — by a
    /// CLI in a container, or any client the host hands the token to —
    /// instead of by the agent's driver, and returns its token once its
    /// gate is open. Everything else is as for [`AgentRuntime::start`]:
    /// the input is checked, the day's budget charged, and each tool call
    /// ([`AgentRuntime::call_tool`]) and model call
    /// ([`AgentRuntime::call_model`]) with the token passes the gateways.
    /// The run ends when `submit_result` accepts its result, when it is
    /// cancelled, or when `maxSeconds` pass.
    ///
    /// # Errors
    ///
    /// As [`AgentRuntime::start`] (any driver may be attached), or the run
    /// ended before its gate opened (its session could not be made, or it
    /// was cancelled at once).
    pub async fn start_attached(&self, request: StartRun) -> Result<AttachedRun, RunError> {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let run = self
            .start_with(request, Some(sender), RunContext::default())
            .await?;
        match receiver.await {
            Ok(token) => Ok(AttachedRun { run, token }),
            Err(_) => {
                let ended = self.wait(&run.id).await?;
                Err(RunError::EndedAtStart {
                    run: ended.id,
                    status: ended.status,
                    error: ended.error.unwrap_or_default(),
                })
            }
        }
    }

    async fn start_with(
        &self,
        request: StartRun,
        attached: Option<tokio::sync::oneshot::Sender<RunToken>>,
        context: RunContext,
    ) -> Result<AgentRun, RunError> {
        if self.inner.lease.lapsed() {
            return Err(RunError::LeaseLapsed);
        }
        let release = match context.release {
            Some(release) => release,
            None => self.release().await?,
        };
        let Some(agent) = release.agents.get(&request.agent).cloned() else {
            return Err(RunError::UnknownAgent {
                agent: request.agent,
                release: release.info.number,
                known: release.agents.keys().cloned().collect(),
            });
        };
        if let Err(list) = agent.input.check(&request.input) {
            let first = &list[0];
            return Err(RunError::InvalidInput {
                agent: request.agent,
                path: first.instance_path.clone(),
                message: describe_violations(&list),
            });
        }
        crate::integrations::check_credentials(&agent, &release, self.actions().delivery())?;
        let driver = agent.manifest.spec.driver;
        let model = match &agent.model {
            Some(agent_model) if driver.uses_model() => Some(Arc::new(
                self.inner
                    .models
                    .for_run(&release, agent_model, &agent)
                    .map_err(|e| RunError::ModelUnavailable {
                        agent: request.agent.clone(),
                        message: e.to_string(),
                    })?,
            )),
            _ => None,
        };
        // A run that uses a model reserves its maxModelTokens before it
        // starts; a run counts against agentRunsPerDay.
        let tokens = if driver == hane_manifest::Driver::Scripted {
            0
        } else {
            agent.manifest.spec.limits.max_model_tokens
        };
        let unavailable = match &self.inner.external {
            _ if attached.is_some() || !driver.is_cli() => Ok(None),
            _ if model.is_none() => {
                Err("it names no model and the release has no default ModelProvider".to_owned())
            }
            Some(external) => external
                .prepare(&agent)
                .map(Some)
                .map_err(|e| e.to_string()),
            None => Err(drivers::NoExternalDrivers.to_string()),
        };
        let external = match unavailable {
            Ok(external) => external,
            Err(reason) => {
                // The budget answers first: a run it cannot cover is
                // refused as such. Nothing is kept of a run that never
                // starts.
                let day = DayBudget::of(self)
                    .charge_run(&release, tokens, None)
                    .await?;
                DayBudget::of(self).give_back(&day, tokens, 0, false).await;
                return Err(RunError::DriverUnavailable {
                    agent: request.agent,
                    driver: driver.to_string(),
                    reason,
                });
            }
        };
        let now = now_ms();
        let mut run = AgentRun {
            id: context.id.unwrap_or_else(RunId::new),
            agent: request.agent,
            release: release.info.number,
            status: RunStatus::Queued,
            shadow: request.shadow || agent.manifest.spec.shadow,
            input: JsonText::from_value(&request.input),
            result: None,
            error: None,
            tool_calls: Vec::new(),
            tokens_used: 0,
            tasks: Vec::new(),
            session: None,
            created_at_ms: now,
            updated_at_ms: now,
            // Its driver drives it from its input alone: not one driven
            // from outside or a CLI's, nor a conversation's message, nor
            // one whose tools reach what a resumed run cannot find again
            // (the workflow cases it starts) or whose end another run
            // waits for in its process (a review).
            resumable: attached.is_none()
                && external.is_none()
                && context.history.is_empty()
                && matches!(
                    driver,
                    hane_manifest::Driver::Scripted | hane_manifest::Driver::Llm
                )
                && agent.manifest.spec.workflows.is_empty()
                && !agent.reviews(),
            resumed: 0,
        };
        // A process at its most runs leaves a run any process may start
        // queued for one with room (see `claim_queued`); only a run that
        // needs nothing of this process can wait so.
        let queued = run.resumable && self.queue().at_capacity();
        let mut row = run_row(&run, &self.inner.lease);
        if queued {
            row.holder = None;
        }
        // Counted against the day's budget and stored `queued` in one
        // transaction.
        let day = DayBudget::of(self)
            .charge_run(&release, tokens, Some(row))
            .await?;
        if queued {
            tracing::info!(run = %run.id, "at its most runs: the run waits queued for a process with room");
            run.updated_at_ms = now_ms();
            return Ok(run);
        }
        let reservation = (tokens > 0).then_some((day, tokens));
        let live = Arc::new(LiveRun {
            attached: Mutex::new(attached),
            external: Mutex::new(external),
            history: context.history,
            events: context.follow.then(events::Events::default),
            ..LiveRun::new(run.clone(), agent, release, reservation, model)
        });
        self.spawn_drive(live);
        Ok(run)
    }

    /// Starts a run and waits until it ends.
    ///
    /// # Errors
    ///
    /// As [`AgentRuntime::start`], or the store failed while it ran.
    pub async fn run_to_end(&self, request: StartRun) -> Result<AgentRun, RunError> {
        let run = self.start(request).await?;
        self.wait(&run.id).await
    }

    /// Waits until run `id` ends, and returns it.
    ///
    /// # Errors
    ///
    /// No such run, or the store failed.
    pub async fn wait(&self, id: &RunId) -> Result<AgentRun, RunError> {
        let live = lock(&self.inner.live).get(id).cloned();
        if let Some(live) = live {
            let mut changes = live.changes.subscribe();
            loop {
                if changes.borrow_and_update().is_final() {
                    break;
                }
                if changes.changed().await.is_err() {
                    break;
                }
            }
        }
        self.get(id).await
    }

    /// Waits until run `id` ended, wherever it runs: in this process as
    /// [`AgentRuntime::wait`], else by reading the store every half lease.
    ///
    /// # Errors
    ///
    /// No such run, or the store failed.
    pub(crate) async fn wait_in_store(&self, id: &RunId) -> Result<AgentRun, RunError> {
        loop {
            let run = self.wait(id).await?;
            if run.status.is_final() {
                return Ok(run);
            }
            tokio::time::sleep(self.inner.lease.ttl() / 2).await;
        }
    }

    /// Run `id` as it is now.
    ///
    /// # Errors
    ///
    /// No such run, or the store failed.
    pub async fn get(&self, id: &RunId) -> Result<AgentRun, RunError> {
        if let Some(live) = lock(&self.inner.live).get(id).cloned() {
            return Ok(live.snapshot());
        }
        let row = self
            .inner
            .registry
            .runs()
            .get(id.as_str())
            .await?
            .ok_or_else(|| RunError::NotFound(id.to_string()))?;
        decode(&row)
    }

    /// Runs matching `query`, newest first; a stored run that does not
    /// read is left out and named in [`Listed::skipped`].
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn list(&self, query: RunQuery) -> Result<Listed<AgentRun>, RunError> {
        let rows = self.inner.registry.runs().list(query).await?;
        let live = lock(&self.inner.live).clone();
        Ok(Listed::read(
            "run",
            rows,
            |row| &row.id,
            |row| {
                let id: Option<RunId> = row.id.parse().ok();
                match id.and_then(|id| live.get(&id).cloned()) {
                    Some(live) => Ok(live.snapshot()),
                    None => hane_stored::open(&row.body),
                }
            },
        ))
    }

    /// The tasks run `id` created, oldest first; a stored task that does
    /// not read is left out and named in [`Listed::skipped`].
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn tasks(&self, id: &RunId) -> Result<Listed<Task>, RunError> {
        let rows = self.inner.registry.tasks().of_run(id.as_str()).await?;
        Ok(Listed::read(
            "task",
            rows,
            |row| &row.id,
            |row| hane_stored::open(&row.body),
        ))
    }

    /// This process's lease on the store.
    pub fn lease(&self) -> &Lease {
        &self.inner.lease
    }

    /// Cancels run `id`: its next tool call is refused at once and its
    /// running operations are cancelled; it ends `cancelled`. Answers with
    /// the run once it has ended, or as it is after
    /// [`CANCEL_SETTLES_WITHIN`] if it has not.
    ///
    /// # Errors
    ///
    /// No such run, it already ended, or the store failed.
    pub async fn cancel(&self, id: &RunId) -> Result<AgentRun, RunError> {
        let Some(live) = lock(&self.inner.live).get(id).cloned() else {
            let run = self.get(id).await?;
            if !run.status.is_final() {
                return Err(RunError::NotHere {
                    run: run.id,
                    status: run.status,
                });
            }
            return Err(RunError::Finished {
                run: run.id,
                status: run.status,
            });
        };
        {
            let run = lock(&live.run);
            if run.status.is_final() {
                return Err(RunError::Finished {
                    run: run.id.clone(),
                    status: run.status,
                });
            }
        }
        // A run that has not started yet never starts.
        live.cancelled.store(true, Ordering::SeqCst);
        self.inner.gateway.stop(id, Stop::Cancelled);
        let session = lock(&live.session).clone();
        if let Some(session) = session {
            let input = Input {
                id: format!("cancel:{id}").parse().expect("a valid input id"),
                kind: InputKind::Control {
                    command: Control::Cancel {
                        reason: "the run was cancelled".to_owned(),
                    },
                },
            };
            self.inner.coordinator.deliver(&session, input).await?;
        }
        // Answer with the run as it ended: a run stops at its next tool
        // call or when its operations are cancelled, which is at once for
        // a guest and within a CLI's grace for a process. One that takes
        // longer is answered as it is then; it still ends `cancelled`.
        let mut changes = live.changes.subscribe();
        let _ = tokio::time::timeout(CANCEL_SETTLES_WITHIN, async {
            while !changes.borrow_and_update().is_final() {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        Ok(live.snapshot())
    }

    /// Stores `run` as it is now, moving it in the store from status
    /// `from`.
    pub(crate) async fn persist(&self, run: &AgentRun, from: RunStatus) -> Result<(), RunError> {
        self.inner
            .registry
            .runs()
            .update(from, run_row(run, &self.inner.lease))
            .await?;
        Ok(())
    }

    /// Stores `run`, live here, from the status the store has for it.
    async fn persist_live(&self, live: &LiveRun, run: &AgentRun) -> Result<(), RunError> {
        let from = *lock(&live.stored);
        self.persist(run, from).await?;
        *lock(&live.stored) = run.status;
        Ok(())
    }
}

/// A new task as the registry stores it: open.
pub(crate) fn task_row(task: &Task) -> TaskRow {
    TaskRow {
        id: task.id.to_string(),
        run: task.run.to_string(),
        kind: task.kind.clone(),
        assignment: task.assignment.clone(),
        state: hane_core::TaskState::Open,
        created_at_ms: task.created_at_ms,
        body: hane_stored::seal(task),
    }
}

fn run_row(run: &AgentRun, holder: &Lease) -> RunRow {
    RunRow {
        holder: Some(holder.holder().to_owned()),
        id: run.id.to_string(),
        agent: run.agent.clone(),
        status: run.status,
        created_at_ms: run.created_at_ms,
        updated_at_ms: run.updated_at_ms,
        body: hane_stored::seal(run),
    }
}

fn decode(row: &RunRow) -> Result<AgentRun, RunError> {
    hane_stored::open(&row.body).map_err(|e| RunError::Corrupt(format!("run {}: {e}", row.id)))
}

/// The text of a panic's payload.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
