//! The agent runtime every command that runs agents opens: the embedded
//! store, the registry beside it, a sandbox and a local operation manager.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use hane_coordinator::manager::{Components, LocalConfig};
use hane_coordinator::{AgentRuntime, Coordinator, CoordinatorConfig, LocalOperationManager};
use hane_sandbox::{Sandbox, SandboxConfig};
use hane_store::{Registry, SqliteConfig, SqliteStore};

/// Opens the runtime on the store at `path`, creating the store if needed.
pub(crate) async fn open_runtime(path: &Path) -> anyhow::Result<AgentRuntime> {
    let store = Arc::new(
        SqliteStore::open(path, &SqliteConfig::new())
            .with_context(|| format!("opening the store at {}", path.display()))?,
    );
    let registry = Registry::open(path)
        .with_context(|| format!("opening the registry at {}", path.display()))?;
    let sandbox = Sandbox::new(&SandboxConfig::new()).context("starting the sandbox")?;
    let components = Components::with_builtins();
    let manager = Arc::new(LocalOperationManager::new(
        sandbox.clone(),
        components.clone(),
        &LocalConfig::new(),
    ));
    let coordinator = Coordinator::new(store, manager, &CoordinatorConfig::new());
    Ok(AgentRuntime::new(
        registry,
        coordinator,
        sandbox,
        components,
    ))
}
