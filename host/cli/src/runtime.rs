//! The agent runtime every command that runs agents opens: the embedded
//! store, the registry beside it, a sandbox and a local operation manager;
//! and the settings it reads from the environment (delivery of outbound
//! actions, the budget's project and environment).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
#[cfg(feature = "containers")]
use hane_cli_drivers::{CliConfig, ServerAddress};
use hane_coordinator::{AgentRuntime, Services};
use hane_coordinator::{ModelConfig, RuntimeConfig, budget::BudgetScope};
use hane_delivery::DeliveryConfig;
use hane_manager::Components;
use hane_store::Registry;
#[cfg(feature = "containers")]
use std::path::PathBuf;

#[cfg(feature = "containers")]
use hane_container::ImageStore;
use hane_manager::WorkerAddr;
use hane_manager::WorkerSecret;

/// The environment variables the runtime reads, for `--help`.
pub(crate) const ENVIRONMENT_HELP: &str = "\
Environment:
  HANE_PROJECT              The project whose daily Budget applies [default: default]
  HANE_ENVIRONMENT          The environment whose daily Budget applies [default: default]
  HANE_LEASE                Seconds this process's lease on the store lasts unless renewed: how
                            long the runs and deliveries of a process that died wait before
                            another process takes them [default: 15, at least 0.3]
  HANE_ENGINE               cranelift or pulley: the engine that runs operations; pulley
                            interprets them, for hosts with no JIT [default: cranelift]
  HANE_MAX_INSTANCES        Operations that may run at once in this process; each reserves about
                            8 GiB of address space up front (a device whose address space is
                            smaller wants fewer) [default: 256]
  HANE_CACHE_DIR            Compiled components, such as `hane op compile` writes; may be
                            read-only [default: $XDG_CACHE_HOME/hane/components]. Tokenizer
                            tables are cached in its `tokenizers` folder [default:
                            $XDG_CACHE_HOME/hane/tokenizers]

Delivery of approved outbound actions (an action whose channel is not configured fails, saying
what to set; nothing is sent):
  HANE_SMTP_URL             Email: smtp://[user[:password]@]host[:port]?from=ADDRESS[&tls=none|
                            starttls|tls] (smtps:// means tls=tls; starttls is the default and is
                            never downgraded)
  HANE_SMTP_PASSWORD        The SMTP password, overriding one in HANE_SMTP_URL
  HANE_SMTP_CA_FILE         A PEM file of extra root certificates for the SMTP server
  HANE_SMS_URL              The SMS provider's endpoint (http:// or https://)
  HANE_SMS_TOKEN            Its bearer token
  HANE_CALL_URL             The call provider's endpoint
  HANE_CALL_TOKEN           Its bearer token
  HANE_CREDENTIAL_<NAME>    The secret of the credential an integration connection or a
                            ModelProvider names: the name upper-cased, other characters than
                            letters and digits as `_`
  HANE_DELIVERY_TIMEOUT_MS  How long one delivery attempt may take [default: 30000]

CLI drivers (codex, claude, opencode):
  HANE_CLIS                 The node_modules directory holding the CLIs' npm packages
                            (@openai/codex, @anthropic-ai/claude-code, opencode-ai)
  HANE_CONTAINER_RUNTIME    bwrap or runc, or the path of either [default: bwrap on PATH]
  HANE_IMAGES               The image store `hane image build` fills, whose images agents'
                            cliProfile.image names [default: `images` beside the store]

A variable set to the empty string counts as unset; a malformed one stops the command, naming it.";

/// The variable naming the project whose Budget applies.
const PROJECT_ENV: &str = "HANE_PROJECT";

/// The variable naming the environment whose Budget applies.
const ENVIRONMENT_ENV: &str = "HANE_ENVIRONMENT";

/// The project and environment usage is counted against: `HANE_PROJECT`
/// and `HANE_ENVIRONMENT`, each `default` when unset or empty.
pub(crate) fn scope_from_env() -> BudgetScope {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let default = BudgetScope::default();
    BudgetScope {
        project: var(PROJECT_ENV).unwrap_or(default.project),
        environment: var(ENVIRONMENT_ENV).unwrap_or(default.environment),
    }
}

/// How approved actions are delivered, from the `HANE_*` delivery
/// variables.
///
/// # Errors
///
/// A variable is malformed; the error is a
/// [`hane_delivery::ConfigError`] naming it.
pub(crate) fn delivery_from_env() -> anyhow::Result<DeliveryConfig> {
    DeliveryConfig::from_env().context("reading the delivery settings from the environment")
}

/// The variable naming the CLIs' `node_modules`.
#[cfg(feature = "containers")]
const CLIS_ENV: &str = "HANE_CLIS";

/// The variable choosing the container runtime.
#[cfg(feature = "containers")]
const CONTAINER_ENV: &str = "HANE_CONTAINER_RUNTIME";

/// Where the CLI drivers' CLIs are (`HANE_CLIS`) and which container
/// runtime runs them (`HANE_CONTAINER_RUNTIME`: `bwrap`, `runc` or the
/// path of either; bubblewrap on `PATH` by default). What is missing is
/// left unset, and a CLI driver's run is then refused, naming it.
///
/// # Errors
///
/// `HANE_CONTAINER_RUNTIME` names a runtime that cannot be found.
#[cfg(feature = "containers")]
pub(crate) fn cli_from_env() -> anyhow::Result<CliConfig> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut config = CliConfig::new();
    config.server_address(server_address().clone());
    if let Some(dir) = var(CLIS_ENV) {
        config.clis(PathBuf::from(dir));
    }
    let runtime: Option<Arc<dyn hane_container::Runtime>> = match var(CONTAINER_ENV) {
        None => hane_container::Bubblewrap::find()
            .ok()
            .map(|b| Arc::new(b) as Arc<dyn hane_container::Runtime>),
        Some(name) => {
            let path = Path::new(&name);
            let file = path
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or_default();
            let named = || format!("{CONTAINER_ENV}={}", path.display());
            let runtime: Arc<dyn hane_container::Runtime> = match (file, path.is_absolute()) {
                ("bwrap", false) => {
                    Arc::new(hane_container::Bubblewrap::find().with_context(named)?)
                }
                ("bwrap", true) => Arc::new(hane_container::Bubblewrap::new(path)),
                ("runc", false) => Arc::new(hane_container::Runc::find().with_context(named)?),
                ("runc", true) => {
                    let state = std::env::temp_dir().join("hane-runc");
                    Arc::new(hane_container::Runc::new(path, state).with_context(named)?)
                }
                _ => anyhow::bail!("{}: expected bwrap, runc or the path of either", named()),
            };
            Some(runtime)
        }
    };
    if let Some(runtime) = runtime {
        config.container(runtime);
    }
    Ok(config)
}

/// Where this process's HTTP server listens, for the CLI drivers'
/// containers (which reach the Model Gateway and the MCP server there):
/// set by the command that starts the server, read by every runtime of
/// the process.
#[cfg(feature = "containers")]
pub(crate) fn server_address() -> &'static ServerAddress {
    static SERVER: std::sync::OnceLock<ServerAddress> = std::sync::OnceLock::new();
    SERVER.get_or_init(ServerAddress::default)
}

/// The operations built into this binary, which releases and `hane op run`
/// name `builtin:NAME` (or `NAME`).
pub(crate) fn builtins() -> Components {
    // Their digests were computed when hane was built: hashing 4.8 MB
    // here would cost every command a few milliseconds.
    Components::with_digested_builtins(hane_builtins::digested())
}

/// The variable capping how many operations run at once in a process.
pub(crate) const MAX_INSTANCES_ENV: &str = "HANE_MAX_INSTANCES";

/// The most instances [`MAX_INSTANCES_ENV`] may ask for.
const MOST_INSTANCES: u32 = 4096;

/// The number of instances `$HANE_MAX_INSTANCES` sets, `None` when it is
/// unset or empty.
///
/// # Errors
///
/// It is not a whole number from 1 to [`MOST_INSTANCES`].
pub(crate) fn max_instances_from_env() -> Result<Option<u32>, String> {
    let Some(value) = std::env::var_os(MAX_INSTANCES_ENV).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let text = value.to_string_lossy();
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=MOST_INSTANCES).contains(&n) => Ok(Some(n)),
        _ => Err(format!(
            "${MAX_INSTANCES_ENV}=`{text}` is not a number of instances: give a whole number from 1 to {MOST_INSTANCES}"
        )),
    }
}

/// The sandbox settings of every command that runs operations: the
/// engine `$HANE_ENGINE` names and the instances `$HANE_MAX_INSTANCES`
/// allows (`main` refuses other values first).
pub(crate) fn sandbox_config() -> hane_sandbox::SandboxConfig {
    let mut config = hane_sandbox::SandboxConfig::new();
    if let Ok(Some(engine)) = hane_sandbox::EngineKind::from_env() {
        config.engine(engine);
    }
    if let Ok(Some(n)) = max_instances_from_env() {
        config.max_instances(n);
    }
    config
}

/// Opens the runtime on the store at `path`, with the services around it, making the store where
/// nothing is (and saying so), with delivery, model credentials and the
/// budget's scope from the environment.
pub(crate) async fn open_runtime(path: &Path) -> anyhow::Result<Services> {
    open_runtime_with(path, ModelConfig::from_vars(std::env::vars())).await
}

/// [`open_runtime`] with `model` as the model settings.
pub(crate) async fn open_runtime_with(path: &Path, model: ModelConfig) -> anyhow::Result<Services> {
    let mut config = RuntimeConfig::new();
    let components = builtins();
    // Operations run on the worker $HANE_WORKER names, else here.
    if let Some(worker) = worker_from_env(&components).await? {
        config.operations(Arc::new(worker));
    }
    config
        .sandbox(sandbox_config())
        .delivery(delivery_from_env()?)
        .scope(scope_from_env())
        .components(components)
        .lease(hane_coordinator::lease::lease_from_env()?)
        .model(model);
    // The coding CLIs run in containers: a build without them (the device
    // build) refuses their agents, saying so.
    #[cfg(feature = "containers")]
    config.external_drivers({
        let mut cli = cli_from_env()?;
        cli.images(store_for(path));
        Arc::new(cli)
    });
    // The store's errors name its file and what is wrong with it; a
    // context here would only say the path again.
    let runtime = AgentRuntime::open(path, &config)?;
    note_created(runtime.registry());
    // Runs a dead process left live are ended before anything is listed
    // or started, so none is shown `running` with nobody running it; one
    // that can be resumed is left to a process that resumes it (`hane
    // serve`, `hane run`): a short command would not live to finish it.
    take_over(&runtime, false).await;
    // Every service around the runtime, composed once for this process.
    Ok(Services::new(runtime))
}

/// Takes over the runs a dead process left live (see
/// [`AgentRuntime::take_over`]), saying on stderr what it did with them;
/// the runs resumed here.
pub(crate) async fn take_over(runtime: &AgentRuntime, resume: bool) -> Vec<hane_core::AgentRun> {
    match runtime.take_over(resume).await {
        Ok(taken) => {
            if !taken.ended.is_empty() {
                eprintln!(
                    "hane: {} run(s) left by a stopped process ended (see each run's error)",
                    taken.ended.len()
                );
            }
            if !taken.resumed.is_empty() {
                eprintln!(
                    "hane: {} run(s) left by a stopped process resumed here",
                    taken.resumed.len()
                );
            }
            taken.resumed
        }
        Err(e) => {
            eprintln!("hane: the runs of a stopped process could not be taken over: {e}");
            Vec::new()
        }
    }
}

/// Opens the registry in the store at `path`, making the store where
/// nothing is (and saying so).
pub(crate) fn open_registry(path: &Path) -> anyhow::Result<Registry> {
    let registry = Registry::open(path)?;
    note_created(&registry);
    Ok(registry)
}

/// Says on stderr, in one line, that opening made a new store: a
/// mistyped path is seen at once instead of as a store with nothing in
/// it.
fn note_created(registry: &Registry) {
    if registry.created() {
        eprintln!("hane: created a new store at {}", registry.path().display());
    }
}

/// The environment variable naming the worker a coordinator runs its
/// operations on.
const WORKER_ENV: &str = "HANE_WORKER";

/// Whether $HANE_WORKER names a worker (is set and not empty).
pub(crate) fn worker_named() -> bool {
    std::env::var_os(WORKER_ENV).is_some_and(|v| !v.is_empty())
}

/// The worker $HANE_WORKER names (an address as `hane worker --listen`
/// takes), connected with the secret in $HANE_WORKER_SECRET and sending it
/// `components` on demand; none when $HANE_WORKER is unset or empty.
pub(crate) async fn worker_from_env(
    components: &Components,
) -> anyhow::Result<Option<hane_manager::ProxyOperationManager>> {
    let Some(addr) = std::env::var_os(WORKER_ENV).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let addr: WorkerAddr = addr
        .to_str()
        .with_context(|| format!("${WORKER_ENV} is not UTF-8"))?
        .parse()
        .with_context(|| format!("${WORKER_ENV}"))?;
    let secret = secret_from_env(&format!(
        "${WORKER_ENV} names a worker, and the secret it shares with its clients is not set: set ${SECRET_ENV}"
    ))?;
    let proxy =
        hane_manager::ProxyOperationManager::connect(addr, secret, components.clone()).await?;
    Ok(Some(proxy))
}

/// The image store of the store at `store`: `$HANE_IMAGES`, else
/// `images` beside it.
#[cfg(feature = "containers")]
pub(crate) fn store_for(store: &Path) -> ImageStore {
    match std::env::var_os(IMAGES_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => ImageStore::new(PathBuf::from(dir)),
        // Beside the default store when the store is a database.
        None if hane_store::postgres_url(store).is_some() => ImageStore::new(
            crate::context::default_data_dir()
                .unwrap_or_else(|| PathBuf::from("."))
                .join("images"),
        ),
        None => ImageStore::new(
            store
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .join("images"),
        ),
    }
}

/// The environment variable holding the shared secret when no
/// `--secret-file` is given.
const SECRET_ENV: &str = "HANE_WORKER_SECRET";

/// The secret in $HANE_WORKER_SECRET; `missing` says what to do when it is
/// not set.
pub(crate) fn secret_from_env(missing: &str) -> anyhow::Result<WorkerSecret> {
    match std::env::var_os(SECRET_ENV) {
        Some(value) => WorkerSecret::new(value.as_encoded_bytes())
            .with_context(|| format!("${SECRET_ENV} does not hold a usable secret")),
        None => anyhow::bail!("{missing}"),
    }
}

/// The variable naming the image store's directory.
#[cfg(feature = "containers")]
pub(crate) const IMAGES_ENV: &str = "HANE_IMAGES";
