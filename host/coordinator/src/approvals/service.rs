//! [`Approvals`]: the approvals flow as people and servers reach it:
//! approving an action under the active release's budget, resuming the
//! deliveries a stopped process left, and decider overrides. Proposing an
//! action and choosing its decider happen inside a run's tool call
//! (`proposal`); reading, rejecting and reconciling actions are the
//! [`ExecutionLedger`]'s own.

use crate::runtime::Takeover;
use hane_core::{ActionRequest, Person};
use hane_store::OverrideRow;

use super::{ActionError, ExecutionLedger, RecoveredActions};
use crate::AgentRuntime;

/// Outbound actions as people decide them. A service over the run kernel:
/// it holds the kernel (for the active release, whose Budget bounds
/// deliveries) and the execution ledger.
#[derive(Debug, Clone)]
pub struct Approvals {
    runs: AgentRuntime,
    ledger: ExecutionLedger,
}

impl Approvals {
    /// The approvals of the actions of `runs`' runs.
    pub fn new(runs: &AgentRuntime) -> Self {
        Self {
            runs: runs.clone(),
            ledger: runs.actions().clone(),
        }
    }

    /// The execution ledger: actions read, rejected and reconciled.
    pub fn ledger(&self) -> &ExecutionLedger {
        &self.ledger
    }

    /// A person approves action `id` (see [`ExecutionLedger::approve`]), with
    /// the active release's budget as it is now: another process may have
    /// activated a release with another Budget since this one last looked.
    ///
    /// # Errors
    ///
    /// As [`ExecutionLedger::approve`], or the active release cannot be read.
    pub async fn approve(
        &self,
        id: &str,
        digest: &str,
        by: Person,
        reason: Option<String>,
    ) -> Result<ActionRequest, ActionError> {
        Takeover::of(&self.runs).refresh_budget().await?;
        self.ledger.approve(id, digest, by, reason).await
    }

    /// Delivers the approved actions whose approver stopped before
    /// attempting them, once each, under the active release's budget;
    /// actions left mid-delivery become `unknown`. For a long-running
    /// process such as `hane serve`, after it starts.
    ///
    /// # Errors
    ///
    /// The active release cannot be read, or the store failed.
    pub async fn resume_actions(&self) -> Result<RecoveredActions, ActionError> {
        Takeover::of(&self.runs).recover_actions(true).await
    }

    /// Every decider override (see [`ExecutionLedger::overrides`]).
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn overrides(&self) -> Result<Vec<OverrideRow>, ActionError> {
        self.ledger.overrides().await
    }

    /// Sends `tool`'s actions to people (see
    /// [`ExecutionLedger::add_override`]).
    ///
    /// # Errors
    ///
    /// `tool` is not an outbound tool, or the store failed.
    pub async fn add_override(
        &self,
        tool: &str,
        reason: &str,
        by: &str,
    ) -> Result<OverrideRow, ActionError> {
        self.ledger.add_override(tool, reason, by).await
    }

    /// Removes the override of `tool`; false when there was none.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn remove_override(&self, tool: &str) -> Result<bool, ActionError> {
        self.ledger.remove_override(tool).await
    }
}
