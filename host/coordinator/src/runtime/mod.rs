//! [`AgentRuntime`]: starts agent runs from the active release, drives
//! them, and passes every tool call through the [`ToolGateway`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
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

mod events;
mod journal;
mod model;
mod resume;

pub use events::RunEvent;
pub use model::ModelConfig;

pub(crate) use hane_core::{AgentRun, RunStatus, Task, ToolCallSummary};

use crate::approvals::ExecutionLedger;
use crate::budget::{BudgetExceeded, BudgetScope};
use crate::drivers::{self, BoxFuture, CliConfig, RunEnd, ToolCaller};
use crate::gateway::{Admitted, GatewayError, RunToken, RunTokenKey, Stop, ToolGateway};
use crate::lease::Lease;
use crate::release::{ActivationError, LoadError, LoadedAgent, LoadedRelease, load_active};
use crate::tools::{self as translate, ToolDefinition, ToolKind, ToolResult};
use hane_delivery::DeliveryConfig;
use hane_manager::{Components, Ending, LocalConfig, LocalOperationManager, OperationManager};
use journal::Journal;

use crate::{Coordinator, CoordinatorConfig, CoordinatorError, Listed, ending_event};

/// Why a run could not be started, read or cancelled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// No release was activated yet.
    #[error("no release is active: activate one with `hane release activate DIR`")]
    NoRelease,
    /// The active release has no agent of this name.
    #[error("agent `{agent}` is not in the active release {release}{}", if .known.is_empty() { String::new() } else { format!("; its agents are {}", .known.join(", ")) })]
    UnknownAgent {
        /// The name asked for.
        agent: String,
        /// The release.
        release: u64,
        /// Its agents.
        known: Vec<String>,
    },
    /// The input does not match the agent's input schema.
    #[error("invalid input for agent `{agent}`: {message}")]
    InvalidInput {
        /// The agent.
        agent: String,
        /// JSON Pointer into the input, such as `/vehicle`; empty for the
        /// input itself.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The agent's driver cannot run in this host: a CLI driver whose
    /// CLI, container runtime or HTTP server is missing, or whose
    /// installed CLI is not the version its `cliProfile` pins.
    #[error("agent `{agent}` uses driver `{driver}`, which this host cannot run: {reason}")]
    DriverUnavailable {
        /// The agent.
        agent: String,
        /// Its driver.
        driver: String,
        /// What is missing or wrong.
        reason: String,
    },
    /// The agent's model cannot be reached from this process.
    #[error("agent `{agent}` cannot call its model: {message}")]
    ModelUnavailable {
        /// The agent.
        agent: String,
        /// Why, such as a credential missing from the environment.
        message: String,
    },
    /// The day's budget does not allow the run.
    #[error(transparent)]
    Budget(#[from] BudgetExceeded),
    /// No run has this id.
    #[error("run `{0}` not found")]
    NotFound(String),
    /// The run already ended.
    #[error("run `{run}` already ended as {status}")]
    Finished {
        /// The run.
        run: RunId,
        /// How it ended.
        status: RunStatus,
    },
    /// An attached run ended before its gate opened.
    #[error("run `{run}` ended as {status} before it could be attached: {error}")]
    EndedAtStart {
        /// The run.
        run: RunId,
        /// How it ended.
        status: RunStatus,
        /// Why.
        error: String,
    },
    /// The run has not ended, but no driver in this process runs it: another
    /// hane process started it, or the process that did stopped.
    #[error(
        "run `{run}` is {status} in the store but not driven by this process: another hane process runs it, or the one that did has stopped"
    )]
    NotHere {
        /// The run.
        run: RunId,
        /// Its stored status.
        status: RunStatus,
    },
    /// This process's lease on the store lapsed: another may be taking
    /// its runs over, so it starts none.
    #[error(
        "this process's lease on the store lapsed, so another may take what it runs for dead: it starts no run; restart it"
    )]
    LeaseLapsed,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The coordinator failed.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    /// A stored item could not be read.
    #[error("{0}")]
    Corrupt(String),
}

impl RunError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            RunError::UnknownAgent { .. } | RunError::NotFound(_) => ErrorKind::NotFound,
            RunError::InvalidInput { .. } | RunError::DriverUnavailable { .. } => {
                ErrorKind::Invalid
            }
            RunError::NoRelease
            | RunError::Finished { .. }
            | RunError::NotHere { .. }
            | RunError::EndedAtStart { .. }
            | RunError::ModelUnavailable { .. } => ErrorKind::Conflict,
            RunError::Budget(_) => ErrorKind::LimitExceeded,
            RunError::Store(_)
            | RunError::Coordinator(_)
            | RunError::Corrupt(_)
            | RunError::LeaseLapsed => ErrorKind::Internal,
        }
    }
}

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
    pub(crate) history: Vec<hane_context::Message>,
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
    /// For a run of a CLI driver: what its start found (the CLI, its
    /// version, the container runtime, the server's address).
    pub(crate) cli: Mutex<Option<drivers::cli::Prepared>>,
    /// The run's status, told to waiters on every change of the run (the
    /// run itself is read from `run` when wanted: a run of many tool calls
    /// is not copied on each).
    pub(crate) changes: watch::Sender<RunStatus>,
    /// The conversation so far, for a message's run.
    pub(crate) history: Vec<hane_context::Message>,
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
            cli: Mutex::new(None),
            changes,
            history: Vec::new(),
            events: None,
            replay: Mutex::new(None),
        }
    }

    pub(crate) fn snapshot(&self) -> AgentRun {
        lock(&self.run).clone()
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
    pub(crate) model_config: ModelConfig,
    pub(crate) adapters: model::Adapters,
    pub(crate) cli: CliConfig,
    /// Conversations taking a message now.
    pub(crate) conversations: crate::conversation::Sending,
    /// Workflow cases being moved on in this process.
    pub(crate) cases: crate::workflow::Driving,
    /// The most runs this process drives at once before it leaves new
    /// ones queued for any process; 0 for no limit.
    pub(crate) max_runs: std::sync::atomic::AtomicUsize,
    /// Told when a run of this process ends: it may have room again.
    pub(crate) room: tokio::sync::Notify,
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

/// A call the gateway admitted, translated and not yet run.
struct PlannedCall {
    live: Arc<LiveRun>,
    session: SessionId,
    journal: Arc<Journal>,
    call: ToolCall,
    status: ToolCallStatus,
    operations: Vec<Operation>,
}

/// A run's door to its tools: every call goes through
/// [`AgentRuntime::call_tool`] with the run's token.
struct RunTools<'a> {
    runtime: &'a AgentRuntime,
    token: &'a RunToken,
}

impl ToolCaller for RunTools<'_> {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        input: Value,
    ) -> BoxFuture<'a, Result<ToolResult, GatewayError>> {
        Box::pin(self.runtime.call_tool(self.token, tool, input))
    }
}

/// How [`AgentRuntime::open`] sets up what it opens.
///
/// | setting | default |
/// |---|---|
/// | `sandbox` | [`SandboxConfig::new`] (its own defaults, cache in `$HANE_CACHE_DIR`) |
/// | `synchronous` | [`Synchronous::Full`]: every commit on disk before it is acknowledged |
/// | `local` | [`LocalConfig::new`] |
/// | `coordinator` | [`CoordinatorConfig::new`] |
/// | `delivery` | [`DeliveryConfig::new`]: no adapter, every approved action fails saying what to configure |
/// | `components` | [`Components::new`]: none built in, so `builtin:` components are refused at activation |
/// | `scope` | project `default`, environment `default` |
/// | `model` | [`ModelConfig::new`] |
/// | `cli` | [`CliConfig::new`]: no CLIs and no container runtime, so CLI drivers' runs are refused |
/// | `lease` | [`DEFAULT_LEASE`](crate::DEFAULT_LEASE) |
/// | `operations` | a [`LocalOperationManager`] over the sandbox, with `local` and `components` |
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    sandbox: SandboxConfig,
    synchronous: Synchronous,
    local: LocalConfig,
    coordinator: CoordinatorConfig,
    delivery: DeliveryConfig,
    scope: BudgetScope,
    components: Components,
    model: ModelConfig,
    cli: CliConfig,
    lease: Option<Duration>,
    operations: Option<Operations>,
}

/// The operation manager a [`RuntimeConfig`] names instead of a local one.
#[derive(Clone)]
struct Operations(Arc<dyn OperationManager>);

impl std::fmt::Debug for Operations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Operations(..)")
    }
}

impl RuntimeConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The sandbox's settings.
    pub fn sandbox(&mut self, config: SandboxConfig) -> &mut Self {
        self.sandbox = config;
        self
    }

    /// How the store and the registry sync their commits.
    pub fn synchronous(&mut self, synchronous: Synchronous) -> &mut Self {
        self.synchronous = synchronous;
        self
    }

    /// The local operation manager's settings.
    pub fn local(&mut self, config: LocalConfig) -> &mut Self {
        self.local = config;
        self
    }

    /// The coordinator's settings.
    pub fn coordinator(&mut self, config: CoordinatorConfig) -> &mut Self {
        self.coordinator = config;
        self
    }

    /// How approved outbound actions are delivered, with the host's
    /// credentials.
    pub fn delivery(&mut self, config: DeliveryConfig) -> &mut Self {
        self.delivery = config;
        self
    }

    /// The components runs may use besides their releases' own: the
    /// binary's built-in operations, which releases name `builtin:NAME`.
    pub fn components(&mut self, components: Components) -> &mut Self {
        self.components = components;
        self
    }

    /// The project and environment whose Budget applies.
    pub fn scope(&mut self, scope: BudgetScope) -> &mut Self {
        self.scope = scope;
        self
    }

    /// How model providers are reached: credentials, recording, retries.
    pub fn model(&mut self, config: ModelConfig) -> &mut Self {
        self.model = config;
        self
    }

    /// Where the CLI drivers' CLIs are, which container runtime runs them,
    /// and (through [`CliConfig::server`], or later
    /// [`AgentRuntime::set_server_address`]) where hane's HTTP server is.
    pub fn cli(&mut self, config: CliConfig) -> &mut Self {
        self.cli = config;
        self
    }

    /// How long this process's lease on the store lasts unless renewed
    /// (see [`Lease`]): how long its runs and deliveries wait after it
    /// dies before another process takes them. At least
    /// [`MIN_LEASE`](crate::MIN_LEASE).
    pub fn lease(&mut self, ttl: Duration) -> &mut Self {
        self.lease = Some(ttl);
        self
    }

    /// Runs operations on `manager` instead of a local operation manager
    /// over the sandbox: a [`hane_manager::ProxyOperationManager`] runs
    /// them on a `hane worker`. It is told each release's ledger as the
    /// release becomes the one runs use.
    pub fn operations(&mut self, manager: Arc<dyn OperationManager>) -> &mut Self {
        self.operations = Some(Operations(manager));
        self
    }
}

/// Why [`AgentRuntime::open`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The store could not be opened. Its errors name the store's file
    /// and what was being done, so nothing is added here.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The sandbox could not start.
    #[error(transparent)]
    Sandbox(#[from] StartError),
}

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
        let lease = Lease::acquire(&registry, config.lease.unwrap_or(crate::DEFAULT_LEASE))?;
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
            inner.model_config = config.model.clone();
            inner.cli = config.cli.clone();
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
    /// of [`DEFAULT_LEASE`](crate::DEFAULT_LEASE) on the store.
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
        let lease = Lease::acquire(&registry, crate::DEFAULT_LEASE)?;
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
                model_config: ModelConfig::default(),
                adapters: model::Adapters::default(),
                cli: CliConfig::default(),
                conversations: Default::default(),
                cases: Default::default(),
                max_runs: std::sync::atomic::AtomicUsize::new(0),
                room: tokio::sync::Notify::new(),
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

    /// Tells the CLI drivers where hane's HTTP server listens (the Model
    /// Gateway and the MCP server): their containers' service forwards
    /// there. Until it is set, CLI drivers' runs are refused.
    pub fn set_server_address(&self, address: std::net::SocketAddr) {
        self.inner.cli.server().set(address);
    }

    /// Checks the release in `dir` and makes it active (see
    /// [`activate_dir`](crate::activate_dir)); runs started afterwards use it.
    ///
    /// # Errors
    ///
    /// What is wrong with the release; nothing changed.
    pub async fn activate(
        &self,
        dir: &std::path::Path,
    ) -> Result<hane_store::ReleaseInfo, ActivationError> {
        let (info, loaded) = crate::release::activate_dir(
            dir,
            &self.inner.sandbox,
            &self.inner.components,
            &self.inner.registry,
            &self.inner.cli,
        )
        .await?;
        self.install(Arc::new(loaded)).await?;
        Ok(info)
    }

    /// The active release, loaded again when another process activated or
    /// rolled back since.
    ///
    /// # Errors
    ///
    /// [`RunError::NoRelease`], or the store failed.
    pub async fn release(&self) -> Result<Arc<LoadedRelease>, RunError> {
        let number = self.inner.registry.active_number().await?;
        let current = self
            .inner
            .release
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match (number, current) {
            (None, _) => Err(RunError::NoRelease),
            (Some(n), Some(current)) if current.info.number == n => Ok(current),
            (Some(_), _) => {
                let unloaded = |e| match e {
                    LoadError::Store(e) => RunError::Store(e),
                    e => RunError::Corrupt(e.to_string()),
                };
                let loaded = load_active(&self.inner.registry)
                    .await
                    .map_err(unloaded)?
                    .ok_or(RunError::NoRelease)?;
                let loaded = Arc::new(loaded);
                self.install(loaded.clone()).await.map_err(unloaded)?;
                Ok(loaded)
            }
        }
    }

    /// Release `number`: the active one, or one loaded from the store (its
    /// components made known to the operation manager), such as the
    /// release a workflow case started in.
    ///
    /// # Errors
    ///
    /// No such release, it does not read, or the store failed.
    pub(crate) async fn release_numbered(
        &self,
        number: u64,
    ) -> Result<Arc<LoadedRelease>, RunError> {
        let active = self.release().await?;
        if active.info.number == number {
            return Ok(active);
        }
        let unloaded = |e| match e {
            LoadError::Store(e) => RunError::Store(e),
            e => RunError::Corrupt(e.to_string()),
        };
        let loaded = crate::release::load_numbered(&self.inner.registry, number)
            .await
            .map_err(unloaded)?
            .ok_or_else(|| RunError::Corrupt(format!("release {number} is not in the store")))?;
        let loaded = Arc::new(loaded);
        self.install_components(&loaded).await.map_err(unloaded)?;
        Ok(loaded)
    }

    /// Makes `release` the one runs use: its components known to the
    /// operation manager, its ledger in the sandbox.
    async fn install(&self, release: Arc<LoadedRelease>) -> Result<(), LoadError> {
        self.install_components(&release).await?;
        self.inner.sandbox.set_ledger(release.ledger.clone());
        self.inner.coordinator.manager().set_ledger(&release.ledger);
        self.inner
            .actions
            .set_budget(release.budget_for(self.inner.actions.scope()));
        *self
            .inner
            .release
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(release);
        Ok(())
    }

    /// Makes `release`'s components known to the operation manager, from
    /// the store.
    pub(crate) async fn install_components(
        &self,
        release: &LoadedRelease,
    ) -> Result<(), LoadError> {
        for digest in &release.digests {
            if self.inner.components.contains(digest) {
                continue;
            }
            let bytes = self
                .inner
                .registry
                .component(digest)
                .await?
                .ok_or_else(|| LoadError::Corrupt {
                    release: release.info.number,
                    message: format!("component {digest} is missing from the store"),
                })?;
            self.inner.components.insert(bytes);
        }
        Ok(())
    }

    /// Every tool the active release offers.
    ///
    /// # Errors
    ///
    /// No release is active, or the store failed.
    pub async fn tools(&self) -> Result<Vec<ToolDefinition>, RunError> {
        Ok(self.release().await?.tools.values().cloned().collect())
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
        let driver = agent.manifest.spec.driver;
        let model = match &agent.model {
            Some(agent_model) if driver.uses_model() => Some(Arc::new(
                self.run_model(&release, agent_model, &agent)
                    .map_err(|message| RunError::ModelUnavailable {
                        agent: request.agent.clone(),
                        message,
                    })?,
            )),
            _ => None,
        };
        // A run that uses a model reserves its maxModelTokens before it
        // starts; a run counts against agentRunsPerDay.
        let tokens = if driver == hane_core::Driver::Scripted {
            0
        } else {
            agent.manifest.spec.limits.max_model_tokens
        };
        let unavailable = match drivers::cli::Cli::of(driver) {
            _ if attached.is_some() => Ok(None),
            Some(_) if model.is_none() => {
                Err("it names no model and the release has no default ModelProvider".to_owned())
            }
            Some(cli) => self.inner.cli.prepare(cli, &agent).map(Some),
            None if !driver.is_available_in_this_build() => {
                Err("this build does not have it".to_owned())
            }
            None => Ok(None),
        };
        let cli = match unavailable {
            Ok(cli) => cli,
            Err(reason) => {
                // The budget answers first: a run it cannot cover is
                // refused as such. Nothing is kept of a run that never
                // starts.
                let day = self.charge_run(&release, tokens, None).await?;
                self.give_back(&day, tokens, 0, false).await;
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
                && cli.is_none()
                && context.history.is_empty()
                && matches!(driver, hane_core::Driver::Scripted | hane_core::Driver::Llm)
                && agent.manifest.spec.workflows.is_empty()
                && !agent.reviews(),
            resumed: 0,
        };
        // A process at its most runs leaves a run any process may start
        // queued for one with room (see `claim_queued`); only a run that
        // needs nothing of this process can wait so.
        let queued = run.resumable && self.at_capacity();
        let mut row = run_row(&run, &self.inner.lease);
        if queued {
            row.holder = None;
        }
        // Counted against the day's budget and stored `queued` in one
        // transaction.
        let day = self.charge_run(&release, tokens, Some(row)).await?;
        if queued {
            tracing::info!(run = %run.id, "at its most runs: the run waits queued for a process with room");
            run.updated_at_ms = now_ms();
            return Ok(run);
        }
        let reservation = (tokens > 0).then_some((day, tokens));
        let live = Arc::new(LiveRun {
            attached: Mutex::new(attached),
            cli: Mutex::new(cli),
            history: context.history,
            events: context.follow.then(events::Events::default),
            ..LiveRun::new(run.clone(), agent, release, reservation, model)
        });
        self.spawn_drive(live);
        Ok(run)
    }

    /// Drives `live` in a task of its own, from now on a run of this
    /// process.
    pub(crate) fn spawn_drive(&self, live: Arc<LiveRun>) {
        let run = live.snapshot();
        lock(&self.inner.live).insert(run.id.clone(), live.clone());
        let runtime = self.clone();
        let span = tracing::info_span!("run", run = %run.id, agent = %run.agent);
        let driving = {
            let live = live.clone();
            tokio::spawn(async move { runtime.drive(live).await }.instrument(span))
        };
        // A driver that panics (a bug, or a model's answer no code
        // expected) ends its run `failed`; nothing waits for it forever.
        let runtime = self.clone();
        tokio::spawn(async move {
            if let Err(e) = driving.await
                && e.is_panic()
            {
                let message = panic_message(e.into_panic());
                runtime.end_after_panic(&live, message).await;
            }
        });
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
            .run(id.as_str())
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
        let rows = self.inner.registry.runs(query).await?;
        let live = lock(&self.inner.live).clone();
        Ok(Listed::read(
            "run",
            rows,
            |row| &row.id,
            |row| {
                let id: Option<RunId> = row.id.parse().ok();
                match id.and_then(|id| live.get(&id).cloned()) {
                    Some(live) => Ok(live.snapshot()),
                    None => hane_core::open(&row.body),
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
        let rows = self.inner.registry.tasks_of_run(id.as_str()).await?;
        Ok(Listed::read(
            "task",
            rows,
            |row| &row.id,
            |row| hane_core::open(&row.body),
        ))
    }

    /// This process's lease on the store.
    pub fn lease(&self) -> &Lease {
        &self.inner.lease
    }

    /// Takes over the runs whose process died (its lease lapsed or was
    /// given up) while they were `queued` or `running`. With `resume`,
    /// a run that can be resumed ([`AgentRun::resumable`]) is resumed
    /// here from its session: its driver starts again from its input, and
    /// what it did before is answered, not done again (a tool call by
    /// what its operations did: a `read` one left running runs again, a
    /// `write` or `outbound` one is `unknown`; a model turn by the answer
    /// recorded; an action or task by the one it had). Every other run is
    /// ended `failed`, saying so: the operations its process left
    /// unsettled are settled ([`Coordinator::abandon`]), its pending
    /// actions are withdrawn, and its session records the end. Without
    /// `resume` (a short command, which would not live to finish what it
    /// resumed), runs that can be resumed are left for a process that
    /// resumes them. Each run is taken by one process, however many look
    /// at once. An action a dead process was delivering becomes `unknown`,
    /// and, when a run was taken, an approved one it never attempted is
    /// delivered now. Returns what was taken.
    ///
    /// A process whose own lease lapsed takes nothing.
    ///
    /// # Errors
    ///
    /// The store failed; runs taken but not yet ended or resumed are taken
    /// again by the next call of any process once this one's lease lapses.
    pub async fn take_over(&self, resume: bool) -> Result<TakenOver, RunError> {
        let lease = &self.inner.lease;
        let mut taken_over = TakenOver::default();
        if lease.lapsed() {
            return Ok(taken_over);
        }
        let taken = self
            .inner
            .registry
            .take_over_runs(lease.holder(), move |row| {
                resume || !decode(row).is_ok_and(|run| run.resumable)
            })
            .await?;
        let any = !taken.is_empty();
        for taken in taken {
            let run = match decode(&taken.run) {
                Ok(run) => run,
                Err(e) => {
                    tracing::error!(run = %taken.run.id, "a run taken over cannot be read: {e}");
                    continue;
                }
            };
            let from = match &taken.from {
                Some(holder) => format!("`{holder}`"),
                None => "a process of an older hane".to_owned(),
            };
            let why_not = if run.resumable && resume {
                match self.resume(run.clone(), Some(&from)).await {
                    Ok(resumed) => {
                        taken_over.resumed.push(resumed);
                        continue;
                    }
                    Err(e) => {
                        tracing::error!(run = %run.id, "a run taken over cannot be resumed: {e}");
                        format!("it could not be resumed ({e})")
                    }
                }
            } else {
                "not resumed".to_owned()
            };
            taken_over
                .ended
                .push(self.end_taken(run, &from, &why_not).await?);
        }
        // An action a dead process was delivering becomes `unknown` now,
        // not when some process next starts; one it approved and never
        // attempted goes out now.
        let recovered = if any {
            self.resume_actions().await
        } else {
            self.inner.actions.recover(false).await
        };
        match recovered {
            Ok(recovered) if !recovered.unknown.is_empty() => tracing::warn!(
                actions = recovered.unknown.len(),
                "actions a dead process was delivering are now unknown"
            ),
            Ok(_) => {}
            Err(e) => tracing::error!("looking for actions a dead process was delivering: {e}"),
        }
        Ok(taken_over)
    }

    /// Ends `run`, taken over from `from`, `failed`: see
    /// [`AgentRuntime::take_over`]. `why_not` says why it was not resumed.
    pub(crate) async fn end_taken(
        &self,
        mut run: AgentRun,
        from: &str,
        why_not: &str,
    ) -> Result<AgentRun, RunError> {
        let reason = match run.status {
            RunStatus::Queued => format!(
                "the process that accepted it ({from}) stopped before it started (its lease lapsed): it was never started, and {why_not}"
            ),
            _ => format!(
                "the process running it ({from}) stopped (its lease lapsed): `{}` ended it, {why_not}; what it did is in its session, and a write or outbound call it was making is `unknown`",
                self.inner.lease.holder()
            ),
        };
        if let Some(session) = &run.session {
            let coordinator = &self.inner.coordinator;
            coordinator.abandon(session, &reason).await?;
            coordinator
                .commit(
                    session,
                    vec![SessionEvent::RunStateChanged {
                        run: run.id.to_string(),
                        state: RunStatus::Failed.as_str().to_owned(),
                    }],
                )
                .await?;
        }
        run.status = RunStatus::Failed;
        run.error = Some(reason.clone());
        run.result = None;
        run.updated_at_ms = now_ms();
        self.persist(&run).await?;
        if let Err(e) = self.inner.actions.withdraw_run(&run.id, &reason).await {
            tracing::error!(run = %run.id, "withdrawing the pending actions of a run taken over: {e}");
        }
        tracing::warn!(run = %run.id, from = %from, "a dead process's run was taken over and ended");
        Ok(run)
    }

    /// Cancels run `id`: its next tool call is refused at once and its
    /// running operations are cancelled; it ends `cancelled`.
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
        Ok(live.snapshot())
    }

    pub(crate) async fn persist(&self, run: &AgentRun) -> Result<(), RunError> {
        self.inner
            .registry
            .put_run(run_row(run, &self.inner.lease))
            .await?;
        Ok(())
    }

    /// Applies `change` to the live run and tells waiters; the run as it
    /// is now.
    pub(crate) fn update(&self, live: &LiveRun, change: impl FnOnce(&mut AgentRun)) -> AgentRun {
        let snapshot = {
            let mut run = lock(&live.run);
            change(&mut run);
            run.updated_at_ms = now_ms();
            run.clone()
        };
        tell(&live.changes, snapshot.status);
        snapshot
    }

    /// As [`AgentRuntime::update`], without a copy of the run: what each
    /// tool call and model call does, so that a call's cost does not grow
    /// with the run's calls so far.
    pub(crate) fn amend(&self, live: &LiveRun, change: impl FnOnce(&mut AgentRun)) {
        let status = {
            let mut run = lock(&live.run);
            change(&mut run);
            run.updated_at_ms = now_ms();
            run.status
        };
        tell(&live.changes, status);
    }

    pub(crate) async fn drive(&self, live: Arc<LiveRun>) {
        let ended = self.drive_inner(&live).await;
        self.finish(&live, ended).await;
    }

    /// Ends a run whose driver panicked: as `failed`, through
    /// [`AgentRuntime::finish`] when it had not begun, else in memory, so
    /// waiters hear of it.
    async fn end_after_panic(&self, live: &Arc<LiveRun>, message: String) {
        tracing::error!(run = %live.snapshot().id, "the run's driver panicked: {message}");
        let ended = Err(RunEnd::Failed(format!(
            "the run's driver panicked: {message}"
        )));
        if !live.ending.load(Ordering::SeqCst) {
            self.finish(live, ended).await;
            return;
        }
        let run = self.update(live, |r| {
            if !r.status.is_final() {
                r.status = RunStatus::Failed;
                r.error = Some(format!("the run's driver panicked while ending: {message}"));
            }
        });
        self.inner.gateway.close(&run.id);
        lock(&self.inner.live).remove(&run.id);
        let _ = self.persist(&run).await;
    }

    /// Records how a run ended, once.
    async fn finish(&self, live: &Arc<LiveRun>, ended: Result<(), RunEnd>) {
        if live.ending.swap(true, Ordering::SeqCst) {
            return;
        }
        let id = live.snapshot().id;
        let (status, error) = match ended {
            Ok(()) => (RunStatus::Succeeded, None),
            Err(RunEnd::Gateway(GatewayError::Cancelled(_))) => {
                (RunStatus::Cancelled, Some("cancelled".to_owned()))
            }
            Err(RunEnd::Gateway(GatewayError::LimitExceeded { message, .. })) => {
                (RunStatus::LimitExceeded, Some(message))
            }
            Err(RunEnd::Gateway(e)) => (RunStatus::Failed, Some(e.to_string())),
            Err(RunEnd::Failed(message)) => (RunStatus::Failed, Some(message)),
        };
        // A cancel or limit wins over what the driver made of it (a
        // cancelled operation is an error to the driver).
        let (status, error) = match self.inner.gateway.stopped(&id) {
            Some(Stop::Cancelled) => (RunStatus::Cancelled, Some("cancelled".to_owned())),
            Some(Stop::LimitExceeded(message)) => (RunStatus::LimitExceeded, Some(message)),
            Some(Stop::Failed(message)) => (RunStatus::Failed, Some(message)),
            None => (status, error),
        };
        // Model calls still in flight end now, and what they used counts.
        if let Some(used) = self.inner.gateway.end_model_calls(&id).await {
            self.amend(live, |r| r.tokens_used = used);
        }
        self.inner.gateway.close(&id);
        // What the run did is stored before its end is.
        let (status, error) = match live.journal.get() {
            Some(journal) => match journal.flush().await {
                Ok(()) => (status, error),
                Err(e) => (RunStatus::Failed, Some(e)),
            },
            None => (status, error),
        };
        let result = lock(&live.submitted).take();
        let session = lock(&live.session).clone();
        if let Some(session) = &session {
            let _ = self
                .inner
                .coordinator
                .commit(
                    session,
                    vec![SessionEvent::RunStateChanged {
                        run: id.to_string(),
                        state: status.as_str().to_owned(),
                    }],
                )
                .await;
        }
        let mut run = {
            let mut run = lock(&live.run);
            run.status = status;
            run.error = error;
            run.result = match status {
                RunStatus::Succeeded => result.as_ref().map(JsonText::from_value),
                _ => None,
            };
            run.updated_at_ms = now_ms();
            run.clone()
        };
        // Stored before waiters hear of the end, so a read or a list after
        // `wait` finds it. A store failure leaves the run `running` in the
        // store; the run in memory says so.
        if let Err(e) = self.persist(&run).await {
            tracing::error!(run = %id, "the run ended but could not be stored: {e}");
            run.error = Some(format!("the run ended but could not be stored: {e}"));
            *lock(&live.run) = run.clone();
        }
        match run.status {
            RunStatus::Succeeded => tracing::info!(status = run.status.as_str(), "run ended"),
            _ => tracing::warn!(
                status = run.status.as_str(),
                error = run.error.as_deref().unwrap_or_default(),
                "run ended"
            ),
        }
        if let Some((day, tokens)) = &live.reservation {
            self.give_back(day, *tokens, run.tokens_used, true).await;
        }
        // A run stopped by its time limit or a cancel while an action
        // waited (the driver dropped mid-call) leaves it pending: nothing
        // waits for it any more, so it must not go out later.
        let why = format!("the run ended {}", run.status);
        if let Err(e) = self.inner.actions.withdraw_run(&id, &why).await {
            tracing::error!(run = %id, "withdrawing the run's pending actions: {e}");
        }
        lock(&self.inner.live).remove(&id);
        self.inner.room.notify_one();
        live.changes.send_replace(run.status);
        live.tell(|| RunEvent::End(Box::new(run)));
    }

    async fn drive_inner(&self, live: &Arc<LiveRun>) -> Result<(), RunEnd> {
        let run = live.snapshot();
        if live.cancelled.load(Ordering::SeqCst) {
            return Err(RunEnd::Gateway(GatewayError::Cancelled(run.id)));
        }
        // A run resumed after its process died has its session already.
        let session = match &run.session {
            Some(session) => session.clone(),
            None => self
                .open_session(&run)
                .await
                .map_err(|e| RunEnd::Failed(e.to_string()))?,
        };
        *lock(&live.session) = Some(session.clone());
        let _ = live.journal.set(Arc::new(Journal::new(
            self.inner.coordinator.store().clone(),
            session.clone(),
        )));
        let token = self.inner.gateway.open(&run.id, live.agent.clone());
        // A cancel that came while the session was being made.
        if live.cancelled.load(Ordering::SeqCst) {
            self.inner.gateway.stop(&run.id, Stop::Cancelled);
        }
        let running = self.update(live, |r| {
            r.status = RunStatus::Running;
            r.session = Some(session);
        });
        self.persist(&running)
            .await
            .map_err(|e| RunEnd::Failed(e.to_string()))?;
        let input = run
            .input
            .to_value()
            .map_err(|e| RunEnd::Failed(e.to_string()))?;
        self.drive_within_limit(live, &token, input).await
    }

    /// The run's session: created with the run's input as its first,
    /// handled input (the run's id is the input's id) and the run marked
    /// running in it.
    async fn open_session(&self, run: &AgentRun) -> Result<SessionId, RunError> {
        let coordinator = &self.inner.coordinator;
        let session = coordinator.store().create_session().await?.id;
        let input = Input {
            id: run
                .id
                .as_str()
                .parse::<InputId>()
                .expect("a run id is a valid input id"),
            kind: InputKind::External {
                payload: run.input.clone(),
            },
        };
        coordinator.deliver(&session, input.clone()).await?;
        let handled = vec![
            SessionEvent::InputHandled { input: input.id },
            SessionEvent::RunStateChanged {
                run: run.id.to_string(),
                state: RunStatus::Running.as_str().to_owned(),
            },
        ];
        coordinator.commit(&session, handled).await?;
        Ok(session)
    }

    /// Runs the agent's driver until it ends or the run's `maxSeconds`
    /// pass, which stops the run as `limit_exceeded`.
    async fn drive_within_limit(
        &self,
        live: &LiveRun,
        token: &RunToken,
        input: Value,
    ) -> Result<(), RunEnd> {
        let run = live.snapshot().id;
        let max = Duration::from_secs(live.agent.manifest.spec.limits.max_seconds);
        let attached = lock(&live.attached).take();
        if let Some(sender) = attached {
            let _ = sender.send(token.clone());
            return match tokio::time::timeout(max, self.attached_until_end(live, &run)).await {
                Ok(ended) => ended,
                Err(_) => Err(self.out_of_time(&run, max)),
            };
        }
        let prepared = lock(&live.cli).take();
        if let Some(prepared) = prepared {
            return self
                .drive_cli(live, &run, token, input, prepared, max)
                .await;
        }
        let Some(drivers::Chosen::Driver(driver)) =
            drivers::for_agent(&live.agent, live.history.clone())
        else {
            return Err(RunEnd::Failed(format!(
                "driver `{}` is not available in this build",
                live.agent.manifest.spec.driver
            )));
        };
        let tools = RunTools {
            runtime: self,
            token,
        };
        let models = live.model.as_ref().map(|model| model::RunModels {
            runtime: self,
            token,
            info: model.info.clone(),
            live,
        });
        let models = models.as_ref().map(|m| m as &dyn drivers::ModelCaller);
        match tokio::time::timeout(max, driver.drive(&tools, models, input)).await {
            Ok(result) => result,
            Err(_) => Err(self.out_of_time(&run, max)),
        }
    }

    /// A CLI driver's run: the CLI in its container, until hane ends the
    /// run (its result accepted, a cancel, a limit, `maxSeconds`) or the
    /// CLI exits; what it printed goes into the run's session.
    async fn drive_cli(
        &self,
        live: &LiveRun,
        run: &RunId,
        token: &RunToken,
        input: Value,
        prepared: drivers::cli::Prepared,
        max: Duration,
    ) -> Result<(), RunEnd> {
        let Some(model) = live.model.as_ref() else {
            return Err(RunEnd::Failed(
                "a CLI driver's run needs a model".to_owned(),
            ));
        };
        let ended = async move {
            match tokio::time::timeout(max, self.attached_until_end(live, run)).await {
                Ok(ended) => ended,
                Err(_) => Err(self.out_of_time(run, max)),
            }
        };
        let (ended, output) = drivers::cli::drive(drivers::cli::CliRun {
            prepared,
            agent: &live.agent,
            token,
            input,
            history: &live.history,
            model: &model.info,
            ended: Box::pin(ended),
        })
        .await;
        if let Some(journal) = live.journal.get() {
            journal.record(vec![SessionEvent::CliOutput(Box::new(output))]);
        }
        ended
    }

    /// Stops `run` for running longer than `max`.
    fn out_of_time(&self, run: &RunId, max: Duration) -> RunEnd {
        let message = format!("maxSeconds: the run took longer than {} s", max.as_secs());
        tracing::warn!(run = %run, "{message}");
        self.inner
            .gateway
            .stop(run, Stop::LimitExceeded(message.clone()));
        RunEnd::Gateway(GatewayError::LimitExceeded {
            run: run.clone(),
            message,
        })
    }

    /// An attached run, until `submit_result` accepts its result or the
    /// gateway stops it.
    async fn attached_until_end(&self, live: &LiveRun, run: &RunId) -> Result<(), RunEnd> {
        tokio::select! {
            () = live.result_ready.notified() => Ok(()),
            stop = self.inner.gateway.wait_stopped(run) => Err(match stop {
                Some(Stop::Failed(message)) => RunEnd::Failed(message),
                Some(stop) => RunEnd::Gateway(GatewayError::from_stop(run.clone(), stop)),
                None => RunEnd::Failed("the run's gate closed while it was attached".to_owned()),
            }),
        }
    }

    /// Calls `tool` with `input` for the run `token` names. This is the
    /// one way any driver reaches a tool: the gateway checks the token,
    /// the tool and the limits; the translator validates the input; the
    /// call and its operations are committed to the run's session before
    /// anything runs.
    ///
    /// # Errors
    ///
    /// The gateway refused the call. A call that was let through and
    /// failed is an `Ok` [`ToolResult::Error`], which the driver can act
    /// on.
    #[tracing::instrument(name = "tool_call", skip_all, fields(tool = tool, run, call))]
    pub async fn call_tool(
        &self,
        token: &RunToken,
        tool: &str,
        input: Value,
    ) -> Result<ToolResult, GatewayError> {
        let started = Instant::now();
        let admitted = match self.inner.gateway.admit(token, tool) {
            Ok(admitted) => admitted,
            Err(e) => {
                tracing::warn!(tool, "tool call refused: {e}");
                if let Ok(run) = self.inner.gateway.key().verify(token) {
                    self.summarize(&run, tool, "rejected", e.to_string(), None, started);
                }
                return Err(e);
            }
        };
        // A resumed run's call it had made is answered, not made again.
        if let Some(result) = self.replay_call(&admitted, tool, &input).await? {
            self.summarize_result(&admitted.run, tool, &result, None, started);
            return Ok(result);
        }
        let planned = self.plan_call(&admitted, tool, &input)?;
        let span = tracing::Span::current();
        span.record("run", tracing::field::display(&admitted.run));
        span.record("call", tracing::field::display(&planned.call.id));
        let operation = planned.operations.first().map(|op| op.id.to_string());
        let result = if planned
            .operations
            .iter()
            .all(|op| op.impact == Impact::Read)
        {
            self.run_reads(&admitted, &input, planned).await
        } else {
            self.run_effects(&admitted, planned).await
        };
        match &result {
            ToolResult::Output(_) => tracing::info!("tool call succeeded"),
            ToolResult::Error { kind, message } => {
                tracing::info!(error = kind.as_str(), "tool call failed: {message}");
            }
        }
        self.summarize_result(&admitted.run, tool, &result, operation, started);
        Ok(result)
    }

    /// Finds the run of an admitted call and translates the call into its
    /// status and operations; nothing runs yet.
    fn plan_call(
        &self,
        admitted: &Admitted,
        tool: &str,
        input: &Value,
    ) -> Result<PlannedCall, GatewayError> {
        let not_running = || GatewayError::NotRunning(admitted.run.clone());
        let live = lock(&self.inner.live)
            .get(&admitted.run)
            .cloned()
            .ok_or_else(not_running)?;
        let session = lock(&live.session).clone().ok_or_else(not_running)?;
        let call = ToolCall {
            id: ToolCallId::new(),
            tool: tool.to_owned(),
            input: translate::input_text(input),
        };
        let (status, operations) = translate::translate(&admitted.tool, &session, &call, input);
        let journal = live.journal.get().cloned().ok_or_else(not_running)?;
        Ok(PlannedCall {
            live,
            session,
            journal,
            call,
            status,
            operations,
        })
    }

    /// Reads and control tools: recorded behind the call (see `Journal`),
    /// so the call waits on the operation, not the disk; both are safe to
    /// run again after a crash.
    async fn run_reads(
        &self,
        admitted: &Admitted,
        input: &Value,
        planned: PlannedCall,
    ) -> ToolResult {
        let PlannedCall {
            live,
            journal,
            call,
            status,
            operations,
            ..
        } = planned;
        let mut events = vec![SessionEvent::ToolCallRecorded {
            call,
            status: status.clone(),
            operations: operations.clone(),
        }];
        events.extend(operations.iter().map(|op| SessionEvent::OperationStarted {
            operation: op.id.clone(),
            attempt: 1,
        }));
        journal.record(events);
        match (&status, &admitted.tool.kind) {
            (ToolCallStatus::Rejected { .. }, _) => translate::format(&status, None),
            (_, ToolKind::Control(control)) => self.control(&live, *control, input).await,
            (_, ToolKind::Operation(_)) => {
                let mut ending = None;
                for op in &operations {
                    ending = Some(self.execute_read(&journal, op).await);
                }
                translate::format(&status, ending.as_ref())
            }
        }
    }

    /// Runs read operation `op`, again where that may help, and journals
    /// its further attempts and its ending.
    async fn execute_read(&self, journal: &Journal, op: &Operation) -> Ending {
        match self.inner.coordinator.execute_read(op).await {
            Ok((done, attempts)) => {
                let mut events: Vec<SessionEvent> = (2..=attempts)
                    .map(|attempt| SessionEvent::OperationStarted {
                        operation: op.id.clone(),
                        attempt,
                    })
                    .collect();
                events.push(ending_event(&op.id, &done).1);
                journal.record(events);
                done
            }
            Err(e) => Ending::failed(Outcome::HostError, e.to_string()),
        }
    }

    /// A call whose operation may change something: it is on disk as
    /// `running` before it starts, everything journaled before it first;
    /// an outbound operation's proposals then become actions of the run.
    async fn run_effects(&self, admitted: &Admitted, planned: PlannedCall) -> ToolResult {
        let PlannedCall {
            live,
            session,
            journal,
            call,
            status,
            operations,
        } = planned;
        if let Err(e) = journal.flush().await {
            return ToolResult::error("failed", e);
        }
        let recorded = vec![SessionEvent::ToolCallRecorded {
            call,
            status: status.clone(),
            operations,
        }];
        let dispatched = match self.inner.coordinator.commit(&session, recorded).await {
            Ok(dispatched) => dispatched,
            Err(e) => {
                return ToolResult::error("failed", format!("the call could not be recorded: {e}"));
            }
        };
        let mut ending = None;
        for d in dispatched {
            ending = Some(match d.settled().await {
                Ok(settled) => settled.ending,
                Err(e) => Ending::failed(Outcome::HostError, e.to_string()),
            });
        }
        let result = translate::format(&status, ending.as_ref());
        match (&admitted.tool.kind, ending) {
            (ToolKind::Operation(op), Some(Ending::Succeeded(output)))
                if op.operation.impact == Impact::Outbound =>
            {
                self.operation_actions(&live, result, &output.proposals)
                    .await
            }
            _ => result,
        }
    }

    fn summarize_result(
        &self,
        run: &RunId,
        tool: &str,
        result: &ToolResult,
        operation: Option<String>,
        started: Instant,
    ) {
        let (status, detail) = match result {
            ToolResult::Output(value) => (
                "succeeded",
                value
                    .get("summary")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_default(),
            ),
            ToolResult::Error { kind, message } => ("failed", format!("{kind}: {message}")),
        };
        self.summarize(run, tool, status, detail, operation, started);
    }

    fn summarize(
        &self,
        run: &RunId,
        tool: &str,
        status: &str,
        detail: String,
        operation: Option<String>,
        started: Instant,
    ) {
        let Some(live) = lock(&self.inner.live).get(run).cloned() else {
            return;
        };
        let summary = ToolCallSummary {
            tool: tool.to_owned(),
            status: status.to_owned(),
            detail,
            operation,
            duration_us: started.elapsed().as_micros() as u64,
        };
        if live.events.is_some() {
            live.tell(|| RunEvent::ToolCall(summary.clone()));
        }
        self.amend(&live, |run| run.tool_calls.push(summary));
    }
}

/// A new task as the registry stores it: open.
pub(crate) fn task_row(task: &Task) -> TaskRow {
    TaskRow {
        id: task.id.to_string(),
        run: task.run.to_string(),
        kind: task.kind.clone(),
        assignment: task.assignment.clone(),
        state: "open".to_owned(),
        created_at_ms: task.created_at_ms,
        body: hane_core::seal(task),
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
        body: hane_core::seal(run),
    }
}

fn decode(row: &RunRow) -> Result<AgentRun, RunError> {
    hane_core::open(&row.body).map_err(|e| RunError::Corrupt(format!("run {}: {e}", row.id)))
}

/// The text of a panic's payload.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
