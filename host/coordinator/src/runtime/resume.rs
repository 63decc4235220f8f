//! Resuming a run another process was running when it died.
//!
//! The run's own driver starts again from the run's input, and what the
//! run did before is answered instead of done again: each tool call the
//! session recorded, in order, by what its operations did (a `read` one
//! left running runs again; a `write` or `outbound` one left running is
//! `unknown`, never run again; one recorded and never started starts now),
//! each model turn by the answer recorded, each action and task by the one
//! the run already has. A run that asks for something else than it had at
//! the same point took another path: it ends `failed`, and nothing it
//! asks for after that is done.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use hane_core::{
    ActionRequest, ActionState, DeciderKind, Impact, LlmTurn, Operation, OperationId, Outcome,
    SessionEvent, ToolCallStatus,
};
use hane_manager::Ending;
use serde_json::Value;

use super::{AgentRun, AgentRuntime, LiveRun, RunError, Task, lock, now_ms};
use crate::Dispatched;
use crate::gateway::{Admitted, GatewayError, Stop};
use crate::tools::{self as translate, ToolKind, ToolResult};

/// How many queued runs a process without a limit claims at a time.
const CLAIMED_AT_ONCE: usize = 16;

/// A tool call as the session recorded it.
pub(crate) struct RecordedCall {
    tool: String,
    input: hane_core::JsonText,
    status: ToolCallStatus,
    operations: Vec<Operation>,
}

/// What a resumed run did before, not yet asked for again.
#[derive(Default)]
pub(crate) struct Replay {
    /// Tool calls, in order.
    calls: VecDeque<RecordedCall>,
    /// Model turns, in order.
    turns: VecDeque<LlmTurn>,
    /// The run's actions, oldest first.
    actions: VecDeque<ActionRequest>,
    /// The run's handovers and tasks, oldest first.
    tasks: VecDeque<Task>,
    /// How the recorded calls' operations ended.
    endings: HashMap<OperationId, Ending>,
    /// Operations of recorded calls that run now: `read` ones left
    /// running, and ones recorded but never started.
    running: HashMap<OperationId, Dispatched>,
    /// How many calls, turns, actions and tasks were answered so far.
    answered: usize,
}

/// What the next tool call, model call, action or task of a resumed run
/// is to do.
pub(crate) enum Next<T> {
    /// Go on as in any run: the run did not get this far before.
    Live,
    /// Answered from what the run had.
    Had(T),
    /// The run asked for something else than it had here; the message
    /// says what.
    Diverged(String),
}

impl Replay {
    /// Forgets everything: a run that took another path is answered from
    /// nothing it had.
    fn diverged<T>(&mut self, message: String) -> Next<T> {
        *self = Replay::default();
        Next::Diverged(message)
    }

    fn had<T>(&mut self, had: T) -> Next<T> {
        self.answered += 1;
        Next::Had(had)
    }

    /// The recorded call that tool call `tool` with `input` is.
    pub(crate) fn call(&mut self, tool: &str, input: &hane_core::JsonText) -> Next<RecordedCall> {
        let Some(had) = self.calls.front() else {
            return Next::Live;
        };
        if had.tool == tool && had.input == *input {
            let had = self.calls.pop_front().expect("looked at");
            return self.had(had);
        }
        let message = format!(
            "called `{tool}` with {} where it had called `{}` with {}",
            input.as_str(),
            had.tool,
            had.input.as_str()
        );
        self.diverged(message)
    }

    /// The recorded turn that a model call is, given the digest the call's
    /// request has with a turn's output cap.
    pub(crate) fn turn(&mut self, digest: impl FnOnce(u64) -> String) -> Next<LlmTurn> {
        let Some(had) = self.turns.front() else {
            return Next::Live;
        };
        let asked = digest(had.max_output_tokens);
        if asked == had.request_digest {
            let had = self.turns.pop_front().expect("looked at");
            return self.had(had);
        }
        let message = format!(
            "sent its model turn {} a request of digest {asked} where it had sent {}",
            had.turn, had.request_digest
        );
        self.diverged(message)
    }

    /// The action that a proposal of `tool` with `digest` is.
    pub(crate) fn action(&mut self, tool: &str, digest: &str) -> Next<ActionRequest> {
        let Some(had) = self.actions.front() else {
            return Next::Live;
        };
        if had.tool == tool && had.digest == digest {
            let had = self.actions.pop_front().expect("looked at");
            return self.had(had);
        }
        let message = format!(
            "proposed a `{tool}` action of digest {digest} where it had proposed action {} (`{}`, digest {})",
            had.id, had.tool, had.digest
        );
        self.diverged(message)
    }

    /// The task that a `kind` task for `assignment` titled `title` is.
    pub(crate) fn task(&mut self, kind: &str, assignment: &str, title: &str) -> Next<Task> {
        let Some(had) = self.tasks.front() else {
            return Next::Live;
        };
        if had.kind == kind && had.assignment == assignment && had.title == title {
            let had = self.tasks.pop_front().expect("looked at");
            return self.had(had);
        }
        let message = format!(
            "created a {kind} task for {assignment} titled {title:?} where it had created {} task {} for {} titled {:?}",
            had.kind, had.id, had.assignment, had.title
        );
        self.diverged(message)
    }
}

impl LiveRun {
    /// `pick` on what the run had, when it was resumed; [`Next::Live`]
    /// otherwise.
    pub(crate) fn replayed<T>(&self, pick: impl FnOnce(&mut Replay) -> Next<T>) -> Next<T> {
        match lock(&self.replay).as_mut() {
            Some(replay) => pick(replay),
            None => Next::Live,
        }
    }
}

/// What a run was doing, from its session's events.
fn recorded(events: Vec<hane_core::Recorded>) -> Replay {
    let mut replay = Replay::default();
    for recorded in events {
        match recorded.event {
            SessionEvent::ToolCallRecorded {
                call,
                status,
                operations,
            } => replay.calls.push_back(RecordedCall {
                tool: call.tool,
                input: call.input,
                status,
                operations,
            }),
            SessionEvent::LlmTurn(turn) => replay.turns.push_back(*turn),
            SessionEvent::OperationCompleted { operation, result } => {
                replay.endings.insert(operation, Ending::Succeeded(result));
            }
            SessionEvent::OperationFailed { operation, failure } => {
                replay.endings.insert(operation, Ending::Failed(failure));
            }
            SessionEvent::OperationUnknown { operation, reason } => {
                replay.endings.insert(operation, Ending::Lost { reason });
            }
            _ => {}
        }
    }
    replay
}

impl AgentRuntime {
    /// Resumes `run`, which this process took over from `from`, a dead
    /// one, or claimed from the queue (`from` is `None`): in this process,
    /// from its session (see the module's documentation). A run that had
    /// not started starts.
    ///
    /// # Errors
    ///
    /// Its release or agent cannot be loaded, its model is not available
    /// here, or the store failed; then it is not resumed.
    pub(crate) async fn resume(
        &self,
        mut run: AgentRun,
        from: Option<&str>,
    ) -> Result<AgentRun, RunError> {
        let release = self.release_numbered(run.release).await?;
        let Some(agent) = release.agents.get(&run.agent).cloned() else {
            return Err(RunError::UnknownAgent {
                agent: run.agent.clone(),
                release: release.info.number,
                known: release.agents.keys().cloned().collect(),
            });
        };
        let model = match &agent.model {
            Some(agent_model) if agent.manifest.spec.driver.uses_model() => Some(Arc::new(
                self.run_model(&release, agent_model, &agent)
                    .map_err(|message| RunError::ModelUnavailable {
                        agent: run.agent.clone(),
                        message,
                    })?,
            )),
            _ => None,
        };
        let mut replay = Replay::default();
        if let Some(session) = &run.session {
            // Operations left running: reads run again, writes and
            // outbound ones become `unknown`, ones never started start.
            let recovery = self.inner.coordinator.recover_session(session).await?;
            let events = self
                .inner
                .coordinator
                .store()
                .read(session, 0..u64::MAX)
                .await?;
            replay = recorded(events);
            for dispatched in recovery.resumed.into_iter().chain(recovery.rerun) {
                replay.running.insert(dispatched.id().clone(), dispatched);
            }
            replay.actions = self
                .inner
                .actions
                .list(None, Some(&run.id))
                .await
                .map_err(|e| RunError::Corrupt(e.to_string()))?
                .items
                .into();
            replay.tasks = self
                .tasks(&run.id)
                .await?
                .items
                .into_iter()
                .filter(|task| task.kind == "handover" || task.kind == "task")
                .collect();
            self.inner
                .coordinator
                .commit(
                    session,
                    vec![SessionEvent::RunStateChanged {
                        run: run.id.to_string(),
                        state: format!("resumed by {}", self.inner.lease.holder()),
                    }],
                )
                .await?;
        }
        // What it did is counted again as it is answered.
        run.tool_calls.clear();
        run.tasks.clear();
        run.tokens_used = 0;
        if from.is_some() {
            run.resumed += 1;
        }
        run.updated_at_ms = now_ms();
        let tokens = agent.manifest.spec.limits.max_model_tokens;
        let reservation = (agent.manifest.spec.driver != hane_core::Driver::Scripted && tokens > 0)
            .then(|| (crate::budget::utc_day(run.created_at_ms), tokens));
        let live = LiveRun::new(run.clone(), agent, release, reservation, model);
        *lock(&live.replay) = Some(replay);
        match from {
            Some(from) => {
                tracing::warn!(run = %run.id, from = %from, "a dead process's run is resumed here");
            }
            None => tracing::info!(run = %run.id, "a queued run starts here"),
        }
        self.spawn_drive(Arc::new(live));
        Ok(run)
    }

    /// Sets the most runs this process drives at once (`None`: no limit,
    /// the default). At its most, a new run that any process may start
    /// ([`AgentRun::resumable`]) is stored `queued` for any process, and
    /// the first with room starts it ([`AgentRuntime::claim_queued`]).
    pub fn set_max_runs(&self, max: Option<usize>) {
        self.inner
            .max_runs
            .store(max.unwrap_or(0), Ordering::SeqCst);
    }

    /// Whether this process drives as many runs as it may.
    pub(crate) fn at_capacity(&self) -> bool {
        self.room() == 0
    }

    /// How many more runs this process may drive now.
    fn room(&self) -> usize {
        match self.inner.max_runs.load(Ordering::SeqCst) {
            0 => CLAIMED_AT_ONCE,
            max => max.saturating_sub(lock(&self.inner.live).len()),
        }
    }

    /// Starts here runs queued for any process (oldest first), as many as
    /// this process has room for; each is claimed by one process however
    /// many claim at once. Returns the runs started.
    ///
    /// A process whose own lease lapsed claims nothing.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn claim_queued(&self) -> Result<Vec<AgentRun>, RunError> {
        let room = self.room();
        if room == 0 || self.inner.lease.lapsed() {
            return Ok(Vec::new());
        }
        let claimed = self
            .inner
            .registry
            .claim_queued_runs(self.inner.lease.holder(), room)
            .await?;
        let mut started = Vec::with_capacity(claimed.len());
        for row in claimed {
            let run = match hane_core::open::<AgentRun>(&row.body) {
                Ok(run) => run,
                Err(e) => {
                    tracing::error!(run = %row.id, "a queued run cannot be read: {e}");
                    continue;
                }
            };
            // Only an older hane left a run no process held that cannot
            // be started by another.
            if !run.resumable {
                self.end_taken(run, "a process of an older hane", "not resumed")
                    .await?;
                continue;
            }
            match self.resume(run.clone(), None).await {
                Ok(run) => started.push(run),
                Err(e) => {
                    tracing::error!(run = %run.id, "a queued run cannot start here: {e}");
                    let why = format!(
                        "it could not be started by `{}` ({e})",
                        self.inner.lease.holder()
                    );
                    self.end_taken(run, "a process of this store", &why).await?;
                }
            }
        }
        Ok(started)
    }

    /// Claims queued runs ([`AgentRuntime::claim_queued`]) whenever this
    /// process may have room: when one of its runs ends, and every `every`
    /// (another process may have queued some). Until dropped.
    pub async fn serve_queue(&self, every: std::time::Duration) {
        let mut ticks = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = self.inner.room.notified() => {}
            }
            if let Err(e) = self.claim_queued().await {
                tracing::error!("claiming queued runs: {e}");
            }
        }
    }

    /// Stops run `run`, which took another path than it had when it was
    /// resumed: it ends `failed` saying so.
    pub(crate) fn diverged(&self, run: &hane_core::RunId, message: &str) -> GatewayError {
        let message = format!(
            "the run was resumed after its process stopped, and then {message}: it took another path than it had, so it ends here and nothing it asks for is done"
        );
        tracing::warn!(run = %run, "{message}");
        self.inner.gateway.stop(run, Stop::Failed(message));
        GatewayError::NotRunning(run.clone())
    }

    /// Tool call `tool` with `input` of a resumed run, when the run had
    /// made it: answered by what its operations did or do now; a control
    /// tool runs again (an action or a task it makes is the one the run
    /// had). `None` when the run had not got this far.
    ///
    /// # Errors
    ///
    /// The run asked for something else than it had.
    pub(crate) async fn replay_call(
        &self,
        admitted: &Admitted,
        tool: &str,
        input: &Value,
    ) -> Result<Option<ToolResult>, GatewayError> {
        let live = lock(&self.inner.live).get(&admitted.run).cloned();
        let Some(live) = live else {
            return Ok(None);
        };
        let text = translate::input_text(input);
        let had = match live.replayed(|r| r.call(tool, &text)) {
            Next::Live => return Ok(None),
            Next::Diverged(message) => return Err(self.diverged(&admitted.run, &message)),
            Next::Had(had) => had,
        };
        let result = match (&had.status, &admitted.tool.kind) {
            (ToolCallStatus::Rejected { .. }, _) => translate::format(&had.status, None),
            (_, ToolKind::Control(control)) => self.control(&live, *control, input).await,
            (_, ToolKind::Operation(op)) => {
                let mut ending = None;
                for operation in &had.operations {
                    ending = Some(self.replayed_ending(&live, operation).await);
                }
                let result = translate::format(&had.status, ending.as_ref());
                match ending {
                    Some(Ending::Succeeded(output)) if op.operation.impact == Impact::Outbound => {
                        self.operation_actions(&live, result, &output.proposals)
                            .await
                    }
                    _ => result,
                }
            }
        };
        Ok(Some(result))
    }

    /// How `operation` of a recorded call ended, or ends now that it runs.
    async fn replayed_ending(&self, live: &LiveRun, operation: &Operation) -> Ending {
        let (ended, running) = match lock(&live.replay).as_mut() {
            Some(replay) => (
                replay.endings.get(&operation.id).cloned(),
                replay.running.remove(&operation.id),
            ),
            None => (None, None),
        };
        if let Some(ending) = ended {
            return ending;
        }
        if let Some(running) = running {
            return match running.settled().await {
                Ok(settled) => settled.ending,
                Err(e) => Ending::failed(Outcome::HostError, e.to_string()),
            };
        }
        // Neither ended nor left to run: the store lost it.
        match (operation.impact, live.journal.get()) {
            (Impact::Read, Some(journal)) => self.execute_read(journal, operation).await,
            _ => Ending::Lost {
                reason: "the run was resumed and its session has no record of how this operation ended; it is not run again".to_owned(),
            },
        }
    }

    /// The action a resumed run had where it now proposes `action`, now
    /// settled: asked again of its decider if that was a review agent or
    /// a policy that approved it, whose process died before it acted.
    pub(crate) async fn replayed_action(
        &self,
        live: &LiveRun,
        action: &ActionRequest,
    ) -> Result<Option<ActionRequest>, ToolResult> {
        let run = live.snapshot().id;
        let had = match live.replayed(|r| r.action(&action.tool, &action.digest)) {
            Next::Live => return Ok(None),
            Next::Diverged(message) => {
                let e = self.diverged(&run, &message);
                return Err(ToolResult::error("failed", e.to_string()));
            }
            Next::Had(had) => had,
        };
        if let Some(task) = &had.task {
            self.amend(live, |r| r.tasks.push(task.clone()));
        }
        let ledger = &self.inner.actions;
        let again = match (had.state, had.decider, &had.reviewer) {
            (ActionState::Pending, DeciderKind::Agent, Some(_)) => true,
            (ActionState::Approved, _, _) => had.attempts.is_empty(),
            _ => false,
        };
        if again {
            let decided = match had.state {
                ActionState::Approved => ledger.execute(had.id.as_str()).await.map(drop),
                _ => {
                    let reviewer = had.reviewer.clone().expect("matched");
                    let group = had.assignment.clone().unwrap_or_default();
                    self.review(had.clone(), reviewer, group).await
                }
            };
            if let Err(e) = decided {
                tracing::warn!(action = %had.id, "deciding a resumed run's action again: {e}");
            }
        }
        Ok(Some(had))
    }

    /// The task a resumed run had where it now creates a `kind` task for
    /// `assignment` titled `title`.
    pub(crate) fn replayed_task(
        &self,
        live: &LiveRun,
        kind: &str,
        assignment: &str,
        title: &str,
    ) -> Result<Option<Task>, ToolResult> {
        match live.replayed(|r| r.task(kind, assignment, title)) {
            Next::Live => Ok(None),
            Next::Had(task) => Ok(Some(task)),
            Next::Diverged(message) => {
                let e = self.diverged(&live.snapshot().id, &message);
                Err(ToolResult::error("failed", e.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use hane_core::{JsonText, Recorded, ToolCall, ToolCallId};
    use serde_json::json;

    use super::*;

    fn call(tool: &str, input: Value) -> Recorded {
        Recorded {
            seq: 0,
            at_ms: 0,
            event: SessionEvent::ToolCallRecorded {
                call: ToolCall {
                    id: ToolCallId::new(),
                    tool: tool.to_owned(),
                    input: JsonText::from_value(&input),
                },
                status: ToolCallStatus::Submitted {
                    operations: Vec::new(),
                },
                operations: Vec::new(),
            },
        }
    }

    fn text(value: Value) -> JsonText {
        JsonText::from_value(&value)
    }

    #[test]
    fn recorded_calls_are_answered_in_order_then_the_run_goes_on_live() {
        let mut replay = recorded(vec![
            call("data.find_record", json!({"collection": "vehicles"})),
            call("submit_result", json!({"status": "found"})),
        ]);
        assert!(matches!(
            replay.call("data.find_record", &text(json!({"collection": "vehicles"}))),
            Next::Had(had) if had.tool == "data.find_record"
        ));
        assert!(matches!(
            replay.call("submit_result", &text(json!({"status": "found"}))),
            Next::Had(_)
        ));
        assert_eq!(replay.answered, 2);
        assert!(matches!(
            replay.call("submit_result", &text(json!({"status": "found"}))),
            Next::Live
        ));
    }

    #[test]
    fn a_call_other_than_the_one_recorded_diverges_and_forgets_the_rest() {
        let mut replay = recorded(vec![
            call("data.find_record", json!({"collection": "vehicles"})),
            call("submit_result", json!({"status": "found"})),
        ]);
        let Next::Diverged(message) =
            replay.call("data.find_record", &text(json!({"collection": "leases"})))
        else {
            panic!("a different input is another call");
        };
        assert!(
            message.contains(r#"{"collection":"leases"}"#)
                && message.contains(r#"{"collection":"vehicles"}"#),
            "{message}"
        );
        // Nothing recorded answers anything after that.
        assert!(matches!(
            replay.call("submit_result", &text(json!({"status": "found"}))),
            Next::Live
        ));
    }

    #[test]
    fn a_model_turn_is_answered_only_for_the_request_it_had() {
        let turn = |digest: &str| LlmTurn {
            turn: 1,
            provider: "p".to_owned(),
            model: "m".to_owned(),
            request_digest: digest.to_owned(),
            response: text(json!({})),
            input_tokens: 10,
            output_tokens: 2,
            cached_tokens: 0,
            latency_ms: 1,
            max_output_tokens: 512,
            context: text(json!({})),
        };
        let mut replay = Replay::default();
        replay.turns.extend([turn("a"), turn("b")]);
        // The digest is taken with the output cap the turn had.
        assert!(matches!(
            replay.turn(|cap| if cap == 512 { "a".to_owned() } else { "x".to_owned() }),
            Next::Had(had) if had.request_digest == "a"
        ));
        assert!(matches!(
            replay.turn(|_| "c".to_owned()),
            Next::Diverged(message) if message.contains("digest c") && message.contains("sent b")
        ));
        assert!(replay.turns.is_empty());
    }
}
