//! The process-wide engine, its epoch ticker, linker and component cache.

#[cfg(feature = "compiler")]
use std::hash::Hasher;
use std::path::{Path, PathBuf};
#[cfg(feature = "compiler")]
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use hane_core::{
    ByteSize, Ledger, Limits, Policy,
    file::{FileCap, read_capped},
};
use sha2::{Digest as _, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Precompiled};

use crate::bindings;
use crate::error::LoadError;
use crate::operation::LoadedOperation;
use crate::state::CallState;

/// Settings of a [`Sandbox`]. Each method documents its default.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub(crate) fuel: bool,
    pub(crate) max_instances: u32,
    pub(crate) max_memory: ByteSize,
    pub(crate) epoch_tick: Duration,
    pub(crate) cache_dir: Option<PathBuf>,
    pub(crate) default_limits: Limits,
    pub(crate) keep_resident: ByteSize,
    pub(crate) engine: EngineKind,
    pub(crate) pooled: bool,
    pub(crate) files_on_calling_thread: bool,
}

/// Which of wasmtime's code generators runs guests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Cranelift compiles guests to native code: the fastest, but it needs
    /// memory that is written and then executed (a JIT).
    #[default]
    Cranelift,
    /// Pulley: guests are compiled to portable bytecode that wasmtime's
    /// interpreter runs, so no executable memory is mapped; about ten
    /// times slower than native code. Fuel, epochs and every limit work
    /// the same.
    Pulley,
}

/// The environment variable that chooses the engine of the `hane` binary.
pub const ENGINE_ENV: &str = "HANE_ENGINE";

/// A name that is not an [`EngineKind`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown engine `{0}`: expected cranelift or pulley")]
pub struct UnknownEngine(String);

impl EngineKind {
    /// Every engine, by name.
    pub const ALL: [EngineKind; 2] = [EngineKind::Cranelift, EngineKind::Pulley];

    /// `cranelift` or `pulley`.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Cranelift => "cranelift",
            EngineKind::Pulley => "pulley",
        }
    }

    /// The engine [`ENGINE_ENV`] names, `None` when it is unset or empty.
    ///
    /// # Errors
    ///
    /// It names no engine.
    pub fn from_env() -> Result<Option<Self>, UnknownEngine> {
        match std::env::var(ENGINE_ENV) {
            Ok(value) if !value.trim().is_empty() => value.trim().parse().map(Some),
            _ => Ok(None),
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for EngineKind {
    type Err = UnknownEngine;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| UnknownEngine(s.to_owned()))
    }
}

/// Pulley's target for this host: its pointer width and byte order.
pub(crate) fn pulley_host_target() -> &'static str {
    match (
        cfg!(target_pointer_width = "64"),
        cfg!(target_endian = "big"),
    ) {
        (true, false) => "pulley64",
        (true, true) => "pulley64be",
        (false, false) => "pulley32",
        (false, true) => "pulley32be",
    }
}

/// The triple this sandbox was built for, such as `x86_64-unknown-linux-gnu`.
pub(crate) const HOST_TARGET: &str = env!("HANE_SANDBOX_TARGET");

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            fuel: true,
            max_instances: 256,
            max_memory: ByteSize::gibibytes(4),
            epoch_tick: Duration::from_millis(1),
            cache_dir: default_cache_dir(),
            default_limits: Limits::default(),
            keep_resident: ByteSize::mebibytes(1),
            engine: EngineKind::default(),
            pooled: true,
            files_on_calling_thread: false,
        }
    }
}

/// The `sha256:` digest of a component's bytes: `sha256:` and 64 lowercase
/// hex digits. Operations name their component by it, receipts carry it,
/// and the compiled-component cache is keyed by it.
pub fn component_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// `$HANE_CACHE_DIR`, else `$XDG_CACHE_HOME/hane/components`, else
/// `$HOME/.cache/hane/components`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HANE_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("hane").join("components"))
}

impl SandboxConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether guests burn fuel and stop when it runs out. Default: on.
    /// Turning it off removes the fuel limit (and its small cost); the
    /// wall-clock limit still applies.
    pub fn fuel(&mut self, enable: bool) -> &mut Self {
        self.fuel = enable;
        self
    }

    /// Instances that may be alive at once; the pooling allocator reserves
    /// address space for this many up front. Default: 256.
    pub fn max_instances(&mut self, n: u32) -> &mut Self {
        self.max_instances = n.max(1);
        self
    }

    /// The largest memory limit any call may have. Default: `4Gi` (all a
    /// 32-bit guest can address).
    pub fn max_memory(&mut self, size: ByteSize) -> &mut Self {
        self.max_memory = size;
        self
    }

    /// How often the epoch advances; the wall-clock limit and cancellation
    /// act within about one tick. Default: 1 ms.
    pub fn epoch_tick(&mut self, tick: Duration) -> &mut Self {
        self.epoch_tick = tick.max(Duration::from_micros(100));
        self
    }

    /// Where compiled components are kept, or `None` to compile in memory
    /// on every load. Default: [`default_cache_dir`].
    pub fn cache_dir(&mut self, dir: Option<PathBuf>) -> &mut Self {
        self.cache_dir = dir;
        self
    }

    /// How much of each pooled memory and table stays mapped between
    /// instances and is reset in place. More costs resident memory per pool
    /// slot in use; less costs page faults on every call. Only used on
    /// Linux 6.7 and later, where `PAGEMAP_SCAN` lets the reset touch just
    /// the dirtied pages. Default: `1Mi`.
    pub fn keep_resident(&mut self, size: ByteSize) -> &mut Self {
        self.keep_resident = size;
        self
    }

    /// The engine that runs guests. Default: [`EngineKind::Cranelift`].
    /// Compiled components are cached per engine.
    pub fn engine(&mut self, engine: EngineKind) -> &mut Self {
        self.engine = engine;
        self
    }

    /// Whether instances come from a pool reserved when the sandbox starts
    /// (the default: each call then skips mapping its memories), or are
    /// allocated when they start. A process that runs a call or two
    /// (`hane op run`) saves reserving and sizing the pool. Compiled
    /// components are the same either way.
    pub fn pooled(&mut self, pooled: bool) -> &mut Self {
        self.pooled = pooled;
        self
    }

    /// Whether a guest's file operations run on the thread running its
    /// call rather than on tokio's blocking pool. A hop to the pool and
    /// back costs tens of microseconds per operation, but on the calling
    /// thread an operation holds that thread until it ends, and the time
    /// limit acts between operations, not during one: for a process that
    /// runs one call at a time on a thread of its own (`hane op run`).
    /// Default: off. Files that can block a reader forever (FIFOs,
    /// sockets, devices) are refused either way.
    pub fn files_on_calling_thread(&mut self, enable: bool) -> &mut Self {
        self.files_on_calling_thread = enable;
        self
    }

    /// The limits of a call that sets none. Default: [`Limits::default`].
    pub fn default_limits(&mut self, limits: Limits) -> &mut Self {
        self.default_limits = limits;
        self
    }
}

pub(crate) struct SandboxInner {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<CallState>,
    pub(crate) config: SandboxConfig,
    fingerprint: String,
    /// Whether instances come from the pooling allocator; compilation
    /// depends on it.
    #[cfg(feature = "compiler")]
    pooled: bool,
    /// The fingerprint of this engine compiling for [`HOST_TARGET`] with no
    /// CPU features inferred, which `hane op compile --target` gives
    /// artifacts; worked out on the first cache miss.
    #[cfg(feature = "compiler")]
    portable: OnceLock<Option<String>>,
    /// Components compiled (not loaded from the cache) so far.
    compilations: AtomicU64,
    /// What the `records` and `documents` capabilities read; each call
    /// takes the one current when it starts.
    ledger: RwLock<Arc<Ledger>>,
    /// Whether the epoch ticker has calls to tick for.
    pub(crate) ticker: Arc<Ticker>,
}

/// The calls running on the engine, which the epoch ticker thread ticks
/// for: it sleeps while there are none, so an idle process is not woken
/// every tick (and a host that runs no guest for a while, such as one
/// serving model calls, has no thread competing with its requests).
#[derive(Default)]
pub(crate) struct Ticker {
    running: Mutex<usize>,
    started: Condvar,
    /// Ticks so far.
    ticks: AtomicU64,
}

/// One running call, for as long as it lives.
pub(crate) struct Ticking(Arc<Ticker>);

impl Ticker {
    /// Counts a call as running until the returned guard is dropped.
    pub(crate) fn hold(self: &Arc<Self>) -> Ticking {
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.started.notify_one();
        Ticking(self.clone())
    }

    /// Waits until a call runs, checking `alive` every second; false
    /// once it says the engine is gone.
    fn wait_for_calls(&self, alive: impl Fn() -> bool) -> bool {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        while *running == 0 {
            if !alive() {
                return false;
            }
            running = self
                .started
                .wait_timeout(running, Duration::from_secs(1))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

impl Drop for Ticking {
    fn drop(&mut self) {
        *self.0.running.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
    }
}

/// The sandbox could not start: the engine, its linker or its ticker
/// thread could not be created.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot start the sandbox: {0}")]
pub struct StartError(String);

/// The engine and everything shared by calls. Create one per process and
/// clone it freely (it is a reference).
#[derive(Clone)]
pub struct Sandbox {
    pub(crate) inner: Arc<SandboxInner>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// Builds the engine (component model, fuel, epoch interruption,
    /// pooling allocator, copy-on-write memory images), its linker and
    /// the epoch ticker thread.
    ///
    /// # Errors
    ///
    /// The engine cannot be created, typically because the pooling
    /// allocator cannot reserve its address space.
    pub fn new(config: &SandboxConfig) -> Result<Self, StartError> {
        Self::start(config).map_err(|e| StartError(format!("{e:#}")))
    }

    fn start(config: &SandboxConfig) -> Result<Self, wasmtime::Error> {
        // Without PAGEMAP_SCAN the kept region is reset with a full
        // memset, which costs more than the page faults it saves.
        let keep_resident = if pagemap_scan_available() {
            config.keep_resident.as_usize()
        } else {
            0
        };
        // The pooling allocator reserves address space for every slot up
        // front; under an address-space limit (RLIMIT_AS) that cannot hold
        // it, or when reserving fails, memories are allocated per instance
        // instead, with explicit bounds checks.
        let limit = address_space_limit();
        let reserved = pool_reservation(config);
        let pooled = limit.is_none_or(|limit| reserved <= limit / 2);
        let (engine, pooled) = match Engine::new(&engine_config(config, keep_resident, pooled)?) {
            Ok(engine) => (engine, pooled),
            Err(e) if pooled => {
                warn_on_demand(&format!(
                    "reserving {} of address space for {} instances failed ({e}); memories are allocated per instance instead",
                    ByteSize(reserved),
                    config.max_instances
                ));
                (
                    Engine::new(&engine_config(config, keep_resident, false)?)?,
                    false,
                )
            }
            Err(e) => return Err(e),
        };
        if !pooled && let Some(limit) = limit {
            let reserving = if config.pooled {
                format!("a pool of {} instances reserves", config.max_instances)
            } else {
                format!("the memories of {} instances reserve", config.max_instances)
            };
            warn_on_demand(&format!(
                "the address-space limit of {} cannot hold the {} {reserving}; memories are allocated per instance instead",
                ByteSize(limit),
                ByteSize(reserved),
            ));
        }

        let mut linker = Linker::<CallState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        crate::files::add_to_linker(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        bindings::hane::operation::types::add_to_linker::<CallState, HasSelf<CallState>>(
            &mut linker,
            |s| s,
        )?;
        bindings::hane::operation::log::add_to_linker::<CallState, HasSelf<CallState>>(
            &mut linker,
            |s| s,
        )?;
        crate::records::add_to_linker(&mut linker, |s| &mut s.records)?;
        crate::documents::add_to_linker(&mut linker, |s| &mut s.documents)?;
        crate::actions::add_to_linker(&mut linker, |s| &mut s.actions)?;

        let fingerprint = fingerprint(&engine);

        let ticker = Arc::new(Ticker::default());
        let weak = engine.weak();
        let tick = config.epoch_tick;
        let ticking = ticker.clone();
        std::thread::Builder::new()
            .name("hane-epoch".into())
            .spawn(move || {
                while ticking.wait_for_calls(|| weak.upgrade().is_some()) {
                    let Some(engine) = weak.upgrade() else {
                        return;
                    };
                    engine.increment_epoch();
                    drop(engine);
                    ticking.ticks.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(tick);
                }
            })
            .map_err(|e| wasmtime::format_err!("cannot start the epoch ticker thread: {e}"))?;

        Ok(Self {
            inner: Arc::new(SandboxInner {
                engine,
                linker,
                config: config.clone(),
                fingerprint,
                #[cfg(feature = "compiler")]
                pooled,
                #[cfg(feature = "compiler")]
                portable: OnceLock::new(),
                compilations: AtomicU64::new(0),
                ledger: RwLock::default(),
                ticker,
            }),
        })
    }

    /// Makes `ledger` what the `records` and `documents` capabilities read,
    /// from the next call on; calls already running keep the ledger they
    /// started with. Default: an empty ledger.
    ///
    /// What a call may read of it is still up to its policy's `records` and
    /// `documents` grants.
    pub fn set_ledger(&self, ledger: Arc<Ledger>) {
        *self.inner.ledger.write().unwrap_or_else(|e| e.into_inner()) = ledger;
    }

    /// The ledger calls starting now read.
    pub fn ledger(&self) -> Arc<Ledger> {
        self.inner
            .ledger
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The configuration this sandbox was built with.
    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    /// The limits of a call that sets none.
    pub fn default_limits(&self) -> Limits {
        self.inner.config.default_limits
    }

    /// Whether fuel is metered.
    pub fn fuel_enabled(&self) -> bool {
        self.inner.config.fuel
    }

    /// Loads a component file of at most [`FileCap::COMPONENT`] as an
    /// operation under `policy`.
    ///
    /// # Errors
    ///
    /// The file cannot be read within its cap, or see [`Sandbox::load`].
    pub async fn load_file(
        &self,
        path: &Path,
        policy: &Policy,
    ) -> Result<LoadedOperation, LoadError> {
        let bytes = read_capped(path, FileCap::COMPONENT).map_err(|source| LoadError::Read {
            path: path.display().to_string(),
            source,
        })?;
        self.load(&path.display().to_string(), &bytes, policy).await
    }

    /// Loads a component as an operation: compiles it (or reuses the
    /// cached compilation), checks its imports against `policy`, asks it to
    /// describe itself and compiles its schemas. `name` is used in errors.
    ///
    /// # Errors
    ///
    /// The bytes are not a component, it imports something unknown or not
    /// granted, it does not implement the `operation` world, or its
    /// descriptor's schemas are not valid JSON Schema.
    pub async fn load(
        &self,
        name: &str,
        bytes: &[u8],
        policy: &Policy,
    ) -> Result<LoadedOperation, LoadError> {
        self.load_with_digest(name, bytes, &component_digest(bytes), policy)
            .await
    }

    /// [`Sandbox::load`] of a component whose digest is known already (a
    /// built-in's, computed when hane was built), so it is not hashed
    /// again. `digest` must be [`component_digest`] of `bytes`: compiled
    /// components are cached under it.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::load`].
    pub async fn load_with_digest(
        &self,
        name: &str,
        bytes: &[u8],
        digest: &str,
        policy: &Policy,
    ) -> Result<LoadedOperation, LoadError> {
        let component = self.component(name, digest, bytes).await?;
        LoadedOperation::new(self.clone(), component, digest.to_owned(), policy).await
    }

    /// Describes a component without a policy: its descriptor, digest and
    /// imports (with the grant each needs). Nothing is refused for lack of
    /// a grant; only components hane cannot run at all are errors.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::load`], except for missing grants.
    pub async fn inspect(&self, name: &str, bytes: &[u8]) -> Result<Inspection, LoadError> {
        let digest = component_digest(bytes);
        let component = self.component(name, &digest, bytes).await?;
        let (imports, pre) = crate::operation::prepare(self, &component)?;
        let descriptor = crate::operation::describe(self, &pre).await?;
        Ok(Inspection {
            descriptor,
            digest,
            imports,
        })
    }

    /// The engine that runs guests.
    pub fn engine(&self) -> EngineKind {
        self.inner.config.engine
    }

    /// Components this sandbox compiled rather than loaded from its cache.
    #[doc(hidden)]
    pub fn compilations(&self) -> u64 {
        self.inner.compilations.load(Ordering::Relaxed)
    }

    /// Where the compiled form of the component with `digest` (as
    /// [`LoadedOperation::digest`] returns it) is cached for this engine, if the
    /// sandbox has a cache.
    pub fn cached_path(&self, digest: &str) -> Option<PathBuf> {
        let dir = self.inner.config.cache_dir.as_ref()?;
        Some(dir.join(artifact_name(digest, &self.inner.fingerprint)))
    }

    /// What the artifact at `path` (named as the cache names its files) is
    /// for, as far as its name tells: for this sandbox's engine, for this
    /// engine without inferred CPU features, or for another engine, version
    /// or target. A build without a compiler has no fingerprint of its
    /// own to compare, so it answers [`ArtifactFit::Unknown`] for every
    /// named artifact.
    pub fn artifact_fits(&self, path: &Path) -> ArtifactFit {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Some((_, fingerprint)) = name
            .strip_suffix(".cwasm")
            .and_then(|stem| stem.split_once('-'))
        else {
            return ArtifactFit::Unnamed;
        };
        if self.inner.fingerprint.is_empty() {
            ArtifactFit::Unknown
        } else if fingerprint == self.inner.fingerprint
            || self.portable_fingerprint() == Some(fingerprint)
        {
            ArtifactFit::ThisEngine
        } else {
            ArtifactFit::Other
        }
    }

    /// The fingerprint of this engine's settings compiling for
    /// [`HOST_TARGET`] with no CPU features inferred, when it differs from
    /// the engine's own.
    #[cfg(feature = "compiler")]
    fn portable_fingerprint(&self) -> Option<&str> {
        self.inner
            .portable
            .get_or_init(|| {
                if self.inner.config.engine == EngineKind::Pulley {
                    // Pulley infers nothing from the host.
                    return None;
                }
                let mut wasm = compile_settings(&self.inner.config, self.inner.pooled).ok()?;
                wasm.target(HOST_TARGET).ok()?;
                let engine = Engine::new(&wasm).ok()?;
                Some(fingerprint(&engine)).filter(|f| *f != self.inner.fingerprint)
            })
            .as_deref()
    }

    /// Without a compiler there are no fingerprints to compare.
    #[cfg(not(feature = "compiler"))]
    fn portable_fingerprint(&self) -> Option<&str> {
        None
    }

    /// The compiled component for `bytes`: from the cache on this thread
    /// (mapping a compiled file takes well under a millisecond), else
    /// [`Sandbox::compile_blocking`].
    async fn component(
        &self,
        name: &str,
        digest: &str,
        bytes: &[u8],
    ) -> Result<Component, LoadError> {
        if !is_compiled_artifact(bytes)
            && let Some(component) = self.cached(digest)
        {
            return Ok(component);
        }
        self.compile_blocking(name, digest, bytes).await
    }

    /// [`Sandbox::compile`] on a blocking thread: compiling takes from
    /// milliseconds to minutes (a large guest, an emulated CPU), and the
    /// runtime's workers must go on meanwhile (renewing the process's
    /// lease on the store, answering requests).
    async fn compile_blocking(
        &self,
        name: &str,
        digest: &str,
        bytes: &[u8],
    ) -> Result<Component, LoadError> {
        let (sandbox, name_owned, digest_owned) =
            (self.clone(), name.to_owned(), digest.to_owned());
        let bytes = bytes.to_vec();
        let compiled = tokio::task::spawn_blocking(move || {
            sandbox.compile(&name_owned, &digest_owned, &bytes)
        })
        .await;
        match compiled {
            Ok(compiled) => compiled,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(compile_error(
                name,
                wasmtime::format_err!("the compilation was stopped: {e}"),
            )),
        }
    }

    /// The compiled component for `bytes`; a compiled artifact given in
    /// place of a component is refused.
    fn compile(&self, name: &str, digest: &str, bytes: &[u8]) -> Result<Component, LoadError> {
        if is_compiled_artifact(bytes) {
            return Err(compile_error(
                name,
                wasmtime::format_err!(
                    "it is a compiled artifact (.cwasm); give the component itself, and put compiled artifacts in the component cache ($HANE_CACHE_DIR)"
                ),
            ));
        }
        self.compiled(name, digest, bytes)
    }

    /// The compiled component for `digest` from the disk cache, when it
    /// has an artifact for this engine (its own, or one compiled for this
    /// target with no CPU features inferred). A truncated or foreign file
    /// of its own is removed, to be compiled again and replaced.
    #[cfg(feature = "compiler")]
    fn cached(&self, digest: &str) -> Option<Component> {
        let engine = &self.inner.engine;
        let dir = self.inner.config.cache_dir.as_ref()?;
        let path = dir.join(artifact_name(digest, &self.inner.fingerprint));
        if path.exists() {
            match load_precompiled(engine, &path) {
                Ok(component) => return Some(component),
                Err(_) => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        let path = dir.join(artifact_name(digest, self.portable_fingerprint()?));
        if !path.exists() {
            return None;
        }
        load_precompiled(engine, &path)
            .inspect_err(|e| {
                tracing::warn!("ignoring the compiled component {}: {e:#}", path.display())
            })
            .ok()
    }

    /// Without a compiler, [`Sandbox::compiled`] looks for the artifact
    /// (and says why none fits).
    #[cfg(not(feature = "compiler"))]
    fn cached(&self, _digest: &str) -> Option<Component> {
        None
    }

    /// The compiled component for `bytes`, which [`Sandbox::cached`] did
    /// not find: compiled and cached, or kept in memory when the cache
    /// cannot be written.
    #[cfg(feature = "compiler")]
    fn compiled(&self, name: &str, digest: &str, bytes: &[u8]) -> Result<Component, LoadError> {
        let engine = &self.inner.engine;
        let Some(dir) = &self.inner.config.cache_dir else {
            self.inner.compilations.fetch_add(1, Ordering::Relaxed);
            return Component::new(engine, bytes).map_err(|e| compile_error(name, e));
        };
        let path = dir.join(artifact_name(digest, &self.inner.fingerprint));
        self.inner.compilations.fetch_add(1, Ordering::Relaxed);
        let compiled = engine
            .precompile_component(bytes)
            .map_err(|e| compile_error(name, e))?;
        if let Err(e) = write_artifact(dir, &path, &compiled) {
            warn_unwritable(dir, &e);
            return from_compiled(engine, &compiled).map_err(|e| compile_error(name, e));
        }
        load_precompiled(engine, &path).map_err(|e| LoadError::Cache {
            path: path.display().to_string(),
            message: format!("{e:#}"),
        })
    }

    /// Without a compiler: the first artifact in the cache named for
    /// `digest` that this engine accepts (wasmtime checks its version,
    /// target, CPU features and settings); none is an error saying how to
    /// make one.
    #[cfg(not(feature = "compiler"))]
    fn compiled(&self, name: &str, digest: &str, _bytes: &[u8]) -> Result<Component, LoadError> {
        let engine = &self.inner.engine;
        let prefix = format!("{}-", digest.trim_start_matches("sha256:"));
        let mut refused = Vec::new();
        let place = match &self.inner.config.cache_dir {
            Some(dir) => {
                let mut named: Vec<PathBuf> = std::fs::read_dir(dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|entry| entry.path())
                    .filter(|path| {
                        path.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".cwasm"))
                    })
                    .collect();
                named.sort();
                for path in named {
                    match load_precompiled(engine, &path) {
                        Ok(component) => return Ok(component),
                        Err(e) => refused.push(format!("{e:#}")),
                    }
                }
                format!("the component cache {}", dir.display())
            }
            None => "no component cache ($HANE_CACHE_DIR)".to_owned(),
        };
        let target = match self.inner.config.engine {
            EngineKind::Pulley => pulley_host_target(),
            EngineKind::Cranelift => HOST_TARGET,
        };
        let refused = if refused.is_empty() {
            String::new()
        } else {
            format!(" (refused: {})", refused.join("; "))
        };
        let engine = self.inner.config.engine;
        Err(LoadError::NotCompiled {
            name: name.to_owned(),
            message: format!(
                "this hane cannot compile components (it was built without the `compiler` feature), and {place} holds none of it for the {engine} engine{refused}; compile it ahead of time where hane can, with `hane op compile COMPONENT --engine {engine} --target {target} -o DIR`, and point $HANE_CACHE_DIR at DIR"
            ),
        })
    }
}

/// A compilation's error for the component `name`.
pub(crate) fn compile_error(name: &str, e: wasmtime::Error) -> LoadError {
    LoadError::Compile {
        name: name.to_owned(),
        message: format!("{e:#}"),
    }
}

/// Whether `bytes` are a component compiled by wasmtime (a `.cwasm`), not
/// a component.
pub fn is_compiled_artifact(bytes: &[u8]) -> bool {
    Engine::detect_precompiled(bytes).is_some()
}

/// What an artifact's file name says it is for; see [`Sandbox::artifact_fits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactFit {
    /// Named for this sandbox's engine, version and target.
    ThisEngine,
    /// Named for another engine, version, target or configuration.
    Other,
    /// Named as an artifact, but this build (without a compiler) cannot
    /// tell for which engine: only loading it says.
    Unknown,
    /// Not named `DIGEST-FINGERPRINT.cwasm`.
    Unnamed,
}

/// The cache's file name of the component with `digest` (`sha256:` and
/// hex) compiled by an engine with `fingerprint`.
pub(crate) fn artifact_name(digest: &str, fingerprint: &str) -> String {
    let hex_digest = digest.trim_start_matches("sha256:");
    format!("{hex_digest}-{fingerprint}.cwasm")
}

/// Writes `compiled` to `path` in `dir` through a temporary file, so a
/// reader never sees part of it.
#[cfg(feature = "compiler")]
fn write_artifact(dir: &Path, path: &Path, compiled: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.{:?}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("artifact"),
        std::process::id(),
        std::thread::current().id()
    ));
    let written = std::fs::write(&tmp, compiled).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Says once per process that the cache cannot be written.
#[cfg(feature = "compiler")]
fn warn_unwritable(dir: &Path, e: &std::io::Error) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        tracing::warn!(
            "cannot write compiled components to {} ({e}); compiling in memory instead",
            dir.display()
        );
    });
}

/// The short fingerprint of what `engine` compiles for and how, which
/// names its artifacts.
#[cfg(feature = "compiler")]
pub(crate) fn fingerprint(engine: &Engine) -> String {
    let mut h = Sha256Hasher(Sha256::new());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut h);
    hex::encode(&h.0.finalize()[..8])
}

/// Without a compiler wasmtime gives no fingerprint: artifacts are found
/// by their component's digest alone (see [`Sandbox::compiled`]).
#[cfg(not(feature = "compiler"))]
pub(crate) fn fingerprint(_engine: &Engine) -> String {
    String::new()
}

/// Whether the kernel has the `PAGEMAP_SCAN` ioctl (Linux 6.7 and later).
fn pagemap_scan_available() -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (6, 7),
        _ => false,
    }
}

/// What [`Sandbox::inspect`] found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Inspection {
    /// What the component says about itself.
    pub descriptor: crate::Descriptor,
    /// `sha256:` digest of its bytes.
    pub digest: String,
    /// Its imports and the grant each needs.
    pub imports: Vec<crate::Import>,
}

/// Maps a precompiled component from the cache, after checking that the
/// file is a wasmtime component artifact; wasmtime then checks that it was
/// compiled by a compatible engine (version, target, CPU features,
/// settings).
#[expect(
    unsafe_code,
    reason = "deserializing trusts the file; only files named for the digest of the bytes being loaded and for this engine are read"
)]
fn load_precompiled(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    match Engine::detect_precompiled_file(path) {
        Ok(Some(Precompiled::Component)) => {}
        Ok(Some(Precompiled::Module)) => {
            wasmtime::bail!(
                "{} is a compiled core module, not a component",
                path.display()
            )
        }
        Ok(None) | Err(_) => {
            wasmtime::bail!("{} is not a compiled component", path.display())
        }
    }
    // SAFETY: the file name carries the digest of the source bytes being
    // loaded and the fingerprint of an engine configuration compatible with
    // this one (which wasmtime checks again), and the cache writes files by
    // rename from a complete temporary file; a directory of artifacts made
    // by `hane op compile` is trusted as the cache is.
    unsafe { Component::deserialize_file(engine, path) }
}

/// Maps a component `engine` compiled just now, in memory.
#[cfg(feature = "compiler")]
#[expect(
    unsafe_code,
    reason = "deserializing trusts the bytes; these were produced by this engine a moment ago"
)]
fn from_compiled(engine: &Engine, compiled: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `compiled` is the output of `engine.precompile_component`.
    unsafe { Component::deserialize(engine, compiled) }
}

/// Feeds `Hash` output into SHA-256, for a fingerprint stable across runs.
#[cfg(feature = "compiler")]
struct Sha256Hasher(Sha256);

#[cfg(feature = "compiler")]
impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        let d = self.0.clone().finalize();
        u64::from_le_bytes(d[..8].try_into().unwrap_or_default())
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// What the engine's compilation depends on besides its allocator:
/// features, fuel, epochs, the target (Pulley's), and (`pooled` false) the
/// bounds of memories allocated per instance.
pub(crate) fn compile_settings(config: &SandboxConfig, pooled: bool) -> wasmtime::Result<Config> {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .consume_fuel(config.fuel)
        .epoch_interruption(true)
        .memory_init_cow(true);
    if config.engine == EngineKind::Pulley {
        wasm.target(pulley_host_target())?;
    }
    if !pooled {
        wasm.memory_reservation(0)
            .memory_reservation_for_growth(ON_DEMAND_GROWTH)
            .memory_guard_size(0)
            .guard_before_linear_memory(false)
            .memory_may_move(true);
    }
    Ok(wasm)
}

/// The engine's settings: with a pooling allocator sized by `config`, or
/// (`pooled` false) allocating each instance's memories when it starts,
/// reserving no more address space than they use.
fn engine_config(
    config: &SandboxConfig,
    keep_resident: usize,
    pooled: bool,
) -> wasmtime::Result<Config> {
    let mut wasm = compile_settings(config, pooled)?;
    // Memories allocated per instance with the pool's reservations and
    // guards compile to the same code as pooled ones.
    if !pooled || !config.pooled {
        wasm.allocation_strategy(InstanceAllocationStrategy::OnDemand);
        return Ok(wasm);
    }
    let mut pool = PoolingAllocationConfig::default();
    let n = config.max_instances;
    pool.total_component_instances(n)
        // A Rust component has a handful of core instances (the program,
        // the WASI adapter and shims); room for more keeps other
        // toolchains working.
        .total_core_instances(n.saturating_mul(8))
        .max_core_instances_per_component(32)
        .total_memories(n.saturating_mul(2))
        .max_memories_per_component(4)
        .total_tables(n.saturating_mul(4))
        .max_tables_per_component(8)
        .table_elements(crate::state::MAX_TABLE_ELEMENTS)
        .total_stacks(n)
        .max_memory_size(config.max_memory.as_usize())
        // Resetting the first pages of a memory in place, instead of
        // unmapping them, saves the page faults every fresh instance
        // would otherwise take on its stack and heap; with PAGEMAP_SCAN
        // (Linux 6.7+) only the pages the guest dirtied are reset.
        .linear_memory_keep_resident(keep_resident)
        .table_keep_resident(keep_resident)
        .pagemap_scan(wasmtime::Enabled::Auto);
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Ok(wasm)
}

/// Address space a pooled memory slot reserves besides the memory itself:
/// wasmtime's default guard regions before and after it.
const POOL_GUARDS: u64 = 2 * (32 << 20);

/// The address space the pooling allocator reserves for `config`, about.
fn pool_reservation(config: &SandboxConfig) -> u64 {
    // Each slot holds a memory up to its reservation (4 GiB by default, on
    // 64-bit hosts) or the largest memory allowed, whichever is more.
    let slot = config.max_memory.bytes().max(4 << 30) + POOL_GUARDS;
    u64::from(config.max_instances)
        .saturating_mul(2)
        .saturating_mul(slot)
}

/// Address space a memory allocated per instance reserves beyond its size,
/// to grow into before it is moved.
const ON_DEMAND_GROWTH: u64 = 16 << 20;

/// The process's address-space limit (`RLIMIT_AS`), if it has one.
fn address_space_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max address space"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// Says once per process that memories are allocated per instance.
fn warn_on_demand(why: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| tracing::warn!("{why}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_ticker_sleeps_while_no_call_runs_and_ticks_while_one_does() {
        let mut config = SandboxConfig::new();
        config.cache_dir(None);
        let sandbox = Sandbox::new(&config).unwrap();
        let ticker = &sandbox.inner.ticker;
        let ticks_in = |during: Duration| {
            let from = ticker.ticks.load(Ordering::Relaxed);
            std::thread::sleep(during);
            ticker.ticks.load(Ordering::Relaxed) - from
        };
        // At 1 ms a tick, 500 ms of ticking is hundreds of ticks.
        let idle = ticks_in(Duration::from_millis(500));
        assert_eq!(idle, 0, "{idle} ticks in 500 ms with no call");

        let held = ticker.hold();
        let busy = ticks_in(Duration::from_millis(200));
        assert!(
            busy >= 50,
            "only {busy} ticks in 200 ms with a call running"
        );
        drop(held);
        // The tick under way when the call ended may still count.
        std::thread::sleep(Duration::from_millis(50));
        let after = ticks_in(Duration::from_millis(300));
        assert_eq!(after, 0, "{after} ticks in 300 ms after the call ended");
    }
}
