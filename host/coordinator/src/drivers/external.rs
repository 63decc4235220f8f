//! Drivers that run outside this process, attached to their run: the
//! coding CLIs (`codex`, `claude`, `opencode`), each in a container.
//!
//! The kernel knows them only through [`ExternalDrivers`]: it asks them to
//! check an agent when a release is activated, to prepare a run when it
//! starts, and then hands the prepared driver the run's token and a
//! future that ends when hane ends the run. They reach the run's tools and
//! model only as any outside client does, through hane's HTTP server with
//! the run's token. `hane-cli-drivers` implements them; the binary (or a
//! test) passes them in [`RuntimeConfig::external_drivers`], so the
//! coordinator itself starts no process and links no container runtime.
//!
//! [`RuntimeConfig::external_drivers`]: crate::RuntimeConfig::external_drivers

use std::fmt;
use std::sync::Arc;

use hane_manifest::AgentManifest;
use hane_model::ModelAdapter;
use serde_json::Value;

use super::{BoxFuture, ModelInfo, RunEnd};
use crate::gateway::RunToken;
use crate::release::LoadedAgent;

/// Why an external driver cannot run an agent: what is missing, in words a
/// person can act on (a CLI not installed, an image not built, no
/// container runtime).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct CliDriverUnavailable(Box<dyn std::error::Error + Send + Sync>);

impl CliDriverUnavailable {
    /// The driver cannot run for `reason`.
    pub fn new(reason: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Box::new(reason))
    }
}

/// The drivers of agents whose `driver` runs outside this process.
pub trait ExternalDrivers: Send + Sync + fmt::Debug {
    /// Checks, when a release is activated, what an agent needs before
    /// any run of it (such as the image its `cliProfile` names).
    ///
    /// # Errors
    ///
    /// What is missing; the release is refused, naming the agent's file
    /// and `spec.cliProfile.image`.
    fn check(&self, agent: &AgentManifest) -> Result<(), CliDriverUnavailable>;

    /// Prepares a run of `agent` (whose driver
    /// [`is_cli`](hane_manifest::Driver::is_cli)): everything the run needs is
    /// found before it starts, so a run that cannot be driven is refused
    /// rather than failed.
    ///
    /// # Errors
    ///
    /// What is missing for this agent's driver.
    fn prepare(&self, agent: &LoadedAgent)
    -> Result<Box<dyn ExternalDriver>, CliDriverUnavailable>;

    /// The adapter through which a run of `agent` calls a `recorded`
    /// provider whose recording is `recording`: the driver's own requests
    /// differ from what a recording pins, so it may stand in front of it.
    fn recorded(
        &self,
        agent: &LoadedAgent,
        recording: Arc<dyn ModelAdapter>,
    ) -> Arc<dyn ModelAdapter>;
}

/// One prepared run of an external driver.
pub trait ExternalDriver: Send {
    /// Drives the run until `run.ended` ends (hane accepted its result,
    /// or stopped it) or the driver stops by itself; returns how it ended
    /// and what the driver printed, which is kept in the run's session.
    /// Nothing the driver started outlives the returned future.
    fn drive<'a>(
        self: Box<Self>,
        run: ExternalRun<'a>,
    ) -> BoxFuture<'a, (Result<(), RunEnd>, hane_core::CliOutput)>;
}

/// What the kernel hands an external driver for one run.
pub struct ExternalRun<'a> {
    /// The agent.
    pub agent: &'a LoadedAgent,
    /// The run's token: the driver's only key to the run's tools and
    /// model, through hane's HTTP server.
    pub token: &'a RunToken,
    /// The run's input.
    pub input: Value,
    /// The conversation before the task, for a conversation's message.
    pub history: &'a [hane_model_types::Message],
    /// The run's model, as its release defines it.
    pub model: &'a ModelInfo,
    /// Ends when the run ends on hane's side: `Ok` once `submit_result`
    /// accepted a result, else the gateway's stop (cancel, a limit,
    /// `maxSeconds`).
    pub ended: BoxFuture<'a, Result<(), RunEnd>>,
}

impl fmt::Debug for ExternalRun<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExternalRun")
            .field("agent", &self.agent.manifest.metadata.name)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// Why a run of an agent whose driver runs outside this process is
/// refused when the process has no external drivers.
#[derive(Debug, thiserror::Error)]
#[error(
    "this process runs no coding CLIs: it was built without external drivers (RuntimeConfig::external_drivers)"
)]
pub(crate) struct NoExternalDrivers;
