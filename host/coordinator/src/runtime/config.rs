//! [`RuntimeConfig`]: how [`AgentRuntime::open`] sets up what it opens.

use super::*;

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
/// | `external_drivers` | none: runs of agents whose driver is a coding CLI are refused, and so are releases naming a `cliProfile` |
/// | `lease` | [`DEFAULT_LEASE`](crate::lease::DEFAULT_LEASE) |
/// | `operations` | a [`LocalOperationManager`] over the sandbox, with `local` and `components` |
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    pub(super) sandbox: SandboxConfig,
    pub(super) synchronous: Synchronous,
    pub(super) local: LocalConfig,
    pub(super) coordinator: CoordinatorConfig,
    pub(super) delivery: DeliveryConfig,
    pub(super) scope: BudgetScope,
    pub(super) components: Components,
    pub(super) model: ModelConfig,
    pub(super) external: Option<Arc<dyn ExternalDrivers>>,
    pub(super) lease: Option<Duration>,
    pub(super) operations: Option<Operations>,
}

/// The operation manager a [`RuntimeConfig`] names instead of a local one.
#[derive(Clone)]
pub(super) struct Operations(pub(super) Arc<dyn OperationManager>);

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

    /// The drivers of agents whose driver runs outside this process (the
    /// coding CLIs, which `hane-cli-drivers` runs in containers).
    pub fn external_drivers(&mut self, drivers: Arc<dyn ExternalDrivers>) -> &mut Self {
        self.external = Some(drivers);
        self
    }

    /// How long this process's lease on the store lasts unless renewed
    /// (see [`Lease`]): how long its runs and deliveries wait after it
    /// dies before another process takes them. At least
    /// [`MIN_LEASE`](crate::lease::MIN_LEASE).
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
