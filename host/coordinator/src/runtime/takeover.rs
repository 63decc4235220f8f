//! Taking over the runs and actions of processes whose lease lapsed:
//! resumed here where they can be, ended otherwise.

use super::*;

impl AgentRuntime {
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
            .leases()
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
                .push(Takeover::of(self).end_taken(run, &from, &why_not).await?);
        }
        // An action a dead process was delivering becomes `unknown` now,
        // not when some process next starts; one it approved and never
        // attempted goes out now.
        let recovered = Takeover::of(self).recover_actions(any).await;
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
}

/// What taking over a dead process's runs and actions does beside
/// resuming them: ending the runs that cannot be resumed, recovering the
/// actions it left.
pub(crate) struct Takeover<'a> {
    pub(crate) kernel: &'a AgentRuntime,
}

impl<'a> Takeover<'a> {
    pub(crate) fn of(kernel: &'a AgentRuntime) -> Self {
        Self { kernel }
    }

    /// Makes the actions a stopped process left mid-delivery `unknown`;
    /// with `resume`, also delivers the approved actions whose approver
    /// stopped before attempting them, once each, under the active
    /// release's budget (loaded first, if another process changed it).
    pub(crate) async fn recover_actions(
        &self,
        resume: bool,
    ) -> Result<crate::RecoveredActions, crate::ActionError> {
        if resume {
            self.refresh_budget().await?;
        }
        self.kernel.inner.actions.recover(resume).await
    }

    /// Loads the active release if another process changed it, which sets
    /// the execution ledger's budget to its Budget; none is fine.
    pub(crate) async fn refresh_budget(&self) -> Result<(), crate::ActionError> {
        match self.kernel.release().await {
            Ok(_) | Err(RunError::NoRelease) => Ok(()),
            Err(RunError::Store(e)) => Err(crate::ActionError::Store(e)),
            Err(e) => Err(crate::ActionError::Corrupt(e.to_string())),
        }
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
                self.kernel.inner.lease.holder()
            ),
        };
        if let Some(session) = &run.session {
            let coordinator = &self.kernel.inner.coordinator;
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
        let from = run.status;
        run.status = RunStatus::Failed;
        run.error = Some(reason.clone());
        run.result = None;
        run.updated_at_ms = now_ms();
        self.kernel.persist(&run, from).await?;
        if let Err(e) = self
            .kernel
            .inner
            .actions
            .withdraw_run(&run.id, &reason)
            .await
        {
            tracing::error!(run = %run.id, "withdrawing the pending actions of a run taken over: {e}");
        }
        tracing::warn!(run = %run.id, from = %from, "a dead process's run was taken over and ended");
        Ok(run)
    }
}
