//! The agent runtime every command that runs agents opens: the embedded
//! store, the registry beside it, a sandbox and a local operation manager.

use std::path::Path;

use anyhow::Context as _;
use hane_coordinator::AgentRuntime;
use hane_coordinator::agent::RuntimeConfig;

/// Opens the runtime on the store at `path`, creating the store if needed.
pub(crate) async fn open_runtime(path: &Path) -> anyhow::Result<AgentRuntime> {
    AgentRuntime::open(path, &RuntimeConfig::new())
        .with_context(|| format!("opening {}", path.display()))
}
