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

use hane_core::{
    ActionId, ActionRequest, ActionState, DeciderKind, Impact, LlmTurn, Operation, OperationId,
    Outcome, SessionEvent, TaskId, ToolCallStatus,
};
use hane_manager::Ending;
use serde_json::Value;

use super::{AgentRun, AgentRuntime, LiveRun, Releases, RunError, Task, ToolCalls, lock, now_ms};
use crate::approvals::Proposals;
use crate::coordinator::Dispatched;
use crate::gateway::{Admitted, GatewayError, Stop};
use crate::tools::Controls;
use crate::tools::{self as translate, ToolKind, ToolResult};

/// A tool call as the session recorded it.
pub(crate) struct RecordedCall {
    tool: String,
    input: hane_core::JsonText,
    status: ToolCallStatus,
    operations: Vec<Operation>,
}

/// One thing a resumed run did, as its history holds it.
enum Step {
    /// A tool call.
    Call(RecordedCall),
    /// A model turn.
    Turn(Box<LlmTurn>),
    /// An action it proposed, as the ledger has it (`None` when its
    /// process died after recording the proposal and before storing it).
    Action {
        tool: String,
        digest: String,
        had: Option<Box<ActionRequest>>,
    },
    /// A task it created, as the registry has it (`None` as for actions).
    Task {
        kind: String,
        assignment: String,
        title: String,
        had: Option<Task>,
    },
}

impl Step {
    /// What the run did, in words: `where it had …`.
    fn describe(&self) -> String {
        match self {
            Step::Call(call) => format!("called `{}` with {}", call.tool, call.input.as_str()),
            Step::Turn(turn) => format!(
                "sent {} as its model turn {}",
                turn.request_digest, turn.turn
            ),
            Step::Action { tool, digest, had } => match had {
                Some(had) => format!("proposed action {} (`{tool}`, digest {digest})", had.id),
                None => format!("proposed a `{tool}` action of digest {digest}"),
            },
            Step::Task {
                kind,
                assignment,
                title,
                had,
            } => match had {
                Some(had) => format!(
                    "created {kind} task {} for {assignment} titled {title:?}",
                    had.id
                ),
                None => format!("created a {kind} task for {assignment} titled {title:?}"),
            },
        }
    }
}

/// What a resumed run did before, not yet asked for again: one cursor
/// over its history, in the order the session recorded it, across tool
/// calls, model turns, actions and tasks.
#[derive(Default)]
pub(crate) struct Replay {
    /// What it did, in order, each with the position of its event in
    /// the session and when it was recorded.
    steps: VecDeque<(u64, u64, Step)>,
    /// How the recorded calls' operations ended.
    endings: HashMap<OperationId, Ending>,
    /// Operations of recorded calls that run now: `read` ones left
    /// running, and ones recorded but never started.
    running: HashMap<OperationId, Dispatched>,
    /// How many steps were answered so far.
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
    /// says what, and at which event of its session.
    Diverged(String),
}

impl Replay {
    /// What the run was doing, from its session's events, its actions
    /// (oldest first) and its handovers and tasks (oldest first). Actions
    /// and tasks a session of an older hane does not record are placed by
    /// the time they were made.
    fn from_history(
        events: Vec<hane_core::Recorded>,
        actions: Vec<ActionRequest>,
        tasks: Vec<Task>,
    ) -> Replay {
        let mut actions: HashMap<ActionId, ActionRequest> =
            actions.into_iter().map(|a| (a.id.clone(), a)).collect();
        let mut tasks: HashMap<TaskId, Task> =
            tasks.into_iter().map(|t| (t.id.clone(), t)).collect();
        let mut replay = Replay::default();
        for recorded in events {
            let step = match recorded.event {
                SessionEvent::ToolCallRecorded {
                    call,
                    status,
                    operations,
                } => Step::Call(RecordedCall {
                    tool: call.tool,
                    input: call.input,
                    status,
                    operations,
                }),
                SessionEvent::LlmTurn(turn) => Step::Turn(turn),
                SessionEvent::ActionProposed {
                    action,
                    tool,
                    digest,
                } => Step::Action {
                    had: actions.remove(&action).map(Box::new),
                    tool,
                    digest,
                },
                SessionEvent::TaskCreated {
                    task,
                    kind,
                    assignment,
                    title,
                } => Step::Task {
                    had: tasks.remove(&task),
                    kind,
                    assignment,
                    title,
                },
                SessionEvent::OperationCompleted { operation, result } => {
                    replay.endings.insert(operation, Ending::Succeeded(result));
                    continue;
                }
                SessionEvent::OperationFailed { operation, failure } => {
                    replay.endings.insert(operation, Ending::Failed(failure));
                    continue;
                }
                SessionEvent::OperationUnknown { operation, reason } => {
                    replay.endings.insert(operation, Ending::Lost { reason });
                    continue;
                }
                _ => continue,
            };
            replay.steps.push_back((recorded.seq, recorded.at_ms, step));
        }
        let mut unrecorded: Vec<(u64, Step)> = actions
            .into_values()
            .map(|a| {
                let step = Step::Action {
                    tool: a.tool.clone(),
                    digest: a.digest.clone(),
                    had: None,
                };
                (a.created_at_ms, step)
            })
            .chain(tasks.into_values().map(|t| {
                (
                    t.created_at_ms,
                    Step::Task {
                        kind: t.kind.clone(),
                        assignment: t.assignment.clone(),
                        title: t.title.clone(),
                        had: Some(t),
                    },
                )
            }))
            .collect();
        unrecorded.sort_by_key(|(at, _)| *at);
        for (at, step) in unrecorded {
            // After every step recorded at or before it was made.
            let index = replay
                .steps
                .partition_point(|(_, recorded, _)| *recorded <= at);
            replay.steps.insert(index, (u64::MAX, at, step));
        }
        replay
    }

    /// Takes the next step when `matches` it; else the run diverged, and
    /// `asked` says what it asked for.
    fn take(
        &mut self,
        matches: impl FnOnce(&Step) -> bool,
        asked: impl FnOnce(&Step) -> String,
    ) -> Next<Step> {
        let Some((seq, _, had)) = self.steps.front() else {
            return Next::Live;
        };
        if matches(had) {
            let (_, _, had) = self.steps.pop_front().expect("looked at");
            self.answered += 1;
            return Next::Had(had);
        }
        let at = match *seq {
            u64::MAX => "in its history".to_owned(),
            seq => format!("at event {seq} of its session"),
        };
        let message = format!("{} where it had {} ({at})", asked(had), had.describe());
        // A run that took another path is answered from nothing it had.
        *self = Replay::default();
        Next::Diverged(message)
    }

    /// The recorded call that tool call `tool` with `input` is.
    pub(crate) fn call(&mut self, tool: &str, input: &hane_core::JsonText) -> Next<RecordedCall> {
        let next = self.take(
            |had| matches!(had, Step::Call(had) if had.tool == tool && had.input == *input),
            |_| format!("called `{tool}` with {}", input.as_str()),
        );
        next.map(|step| match step {
            Step::Call(call) => call,
            _ => unreachable!("matched a call"),
        })
    }

    /// The recorded turn that a model call is, given the digest the call's
    /// request has with a turn's output cap.
    pub(crate) fn turn(&mut self, digest: impl Fn(u64) -> String) -> Next<LlmTurn> {
        let next = self.take(
            |had| matches!(had, Step::Turn(had) if digest(had.max_output_tokens) == had.request_digest),
            |had| match had {
                Step::Turn(had) => format!(
                    "sent its model turn {} a request of digest {}",
                    had.turn,
                    digest(had.max_output_tokens)
                ),
                _ => "sent a model request".to_owned(),
            },
        );
        next.map(|step| match step {
            Step::Turn(turn) => *turn,
            _ => unreachable!("matched a turn"),
        })
    }

    /// The action that a proposal of `tool` with `digest` is; `Had(None)`
    /// when the run had recorded the proposal but not stored the action.
    pub(crate) fn action(&mut self, tool: &str, digest: &str) -> Next<Option<ActionRequest>> {
        let next = self.take(
            |had| matches!(had, Step::Action { tool: t, digest: d, .. } if t == tool && d == digest),
            |_| format!("proposed a `{tool}` action of digest {digest}"),
        );
        next.map(|step| match step {
            Step::Action { had, .. } => had.map(|had| *had),
            _ => unreachable!("matched an action"),
        })
    }

    /// The task that a `kind` task for `assignment` titled `title` is;
    /// `Had(None)` as for actions.
    pub(crate) fn task(&mut self, kind: &str, assignment: &str, title: &str) -> Next<Option<Task>> {
        let next = self.take(
            |had| {
                matches!(had, Step::Task { kind: k, assignment: a, title: t, .. }
                    if k == kind && a == assignment && t == title)
            },
            |_| format!("created a {kind} task for {assignment} titled {title:?}"),
        );
        next.map(|step| match step {
            Step::Task { had, .. } => had,
            _ => unreachable!("matched a task"),
        })
    }
}

impl<T> Next<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Next<U> {
        match self {
            Next::Live => Next::Live,
            Next::Had(had) => Next::Had(f(had)),
            Next::Diverged(message) => Next::Diverged(message),
        }
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
        let release = Releases::of(self).release_numbered(run.release).await?;
        let Some(agent) = release.agents.get(&run.agent).cloned() else {
            return Err(RunError::UnknownAgent {
                agent: run.agent.clone(),
                release: release.info.number,
                known: release.agents.keys().cloned().collect(),
            });
        };
        let model = match &agent.model {
            Some(agent_model) if agent.manifest.spec.driver.uses_model() => Some(Arc::new(
                self.inner
                    .models
                    .for_run(&release, agent_model, &agent)
                    .map_err(|e| RunError::ModelUnavailable {
                        agent: run.agent.clone(),
                        message: e.to_string(),
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
            let actions = self
                .inner
                .actions
                .list(None, Some(&run.id))
                .await
                .map_err(|e| RunError::Corrupt(e.to_string()))?
                .items;
            let tasks = self
                .tasks(&run.id)
                .await?
                .items
                .into_iter()
                .filter(|task| task.kind == "handover" || task.kind == "task")
                .collect();
            replay = Replay::from_history(events, actions, tasks);
            for dispatched in recovery.resumed.into_iter().chain(recovery.rerun) {
                replay.running.insert(dispatched.id().clone(), dispatched);
            }
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
        let reservation = (agent.manifest.spec.driver != hane_manifest::Driver::Scripted
            && tokens > 0)
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
}

/// Answers a resumed run's calls, turns, actions and tasks from what it
/// had, in order, until it goes beyond it or takes another path.
pub(crate) struct Replaying<'a> {
    pub(crate) kernel: &'a AgentRuntime,
}

impl<'a> Replaying<'a> {
    pub(crate) fn of(kernel: &'a AgentRuntime) -> Self {
        Self { kernel }
    }

    /// Stops run `run`, which took another path than it had when it was
    /// resumed: it ends `failed` saying so.
    pub(crate) fn diverged(&self, run: &hane_core::RunId, message: &str) -> GatewayError {
        let message = format!(
            "the run was resumed after its process stopped, and then {message}: it took another path than it had, so it ends here and nothing it asks for is done"
        );
        tracing::warn!(run = %run, "{message}");
        self.kernel.inner.gateway.stop(run, Stop::Failed(message));
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
        let live = lock(&self.kernel.inner.live).get(&admitted.run).cloned();
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
            (_, ToolKind::Control(control)) => {
                Controls::of(self.kernel)
                    .control(&live, *control, input)
                    .await
            }
            (_, ToolKind::Api(api)) => Controls::of(self.kernel).api(&live, api, input).await,
            (_, ToolKind::Operation(op)) => {
                let mut ending = None;
                for operation in &had.operations {
                    ending = Some(self.replayed_ending(&live, operation).await);
                }
                let result = translate::format(&had.status, ending.as_ref());
                match ending {
                    Some(Ending::Succeeded(output)) if op.operation.impact == Impact::Outbound => {
                        Proposals::of(self.kernel)
                            .operation_actions(&live, result, &output.proposals)
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
            (Impact::Read, Some(journal)) => ToolCalls::of(self.kernel).execute_read(journal, operation).await,
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
        let run = live.run_id();
        let had = match live.replayed(|r| r.action(&action.tool, &action.digest)) {
            Next::Live => return Ok(None),
            Next::Diverged(message) => {
                let e = self.diverged(&run, &message);
                return Err(ToolResult::error("failed", e.to_string()));
            }
            // Proposed, and never stored: it is proposed now.
            Next::Had(None) => return Ok(None),
            Next::Had(Some(had)) => had,
        };
        if let Some(task) = &had.task {
            live.amend(|r| r.tasks.push(task.clone()));
        }
        let ledger = &self.kernel.inner.actions;
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
                    Proposals::of(self.kernel)
                        .review(had.clone(), reviewer, group)
                        .await
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
            Next::Had(task) => Ok(task),
            Next::Diverged(message) => {
                let e = self.diverged(&live.run_id(), &message);
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
        let mut replay = Replay::from_history(
            vec![
                call("data.find_record", json!({"collection": "vehicles"})),
                call("submit_result", json!({"status": "found"})),
            ],
            Vec::new(),
            Vec::new(),
        );
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
        let mut replay = Replay::from_history(
            vec![
                call("data.find_record", json!({"collection": "vehicles"})),
                call("submit_result", json!({"status": "found"})),
            ],
            Vec::new(),
            Vec::new(),
        );
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
        let mut replay = Replay::from_history(
            vec![
                at(1, 0, SessionEvent::LlmTurn(Box::new(turn("a")))),
                at(2, 0, SessionEvent::LlmTurn(Box::new(turn("b")))),
            ],
            Vec::new(),
            Vec::new(),
        );
        // The digest is taken with the output cap the turn had.
        assert!(matches!(
            replay.turn(|cap| if cap == 512 { "a".to_owned() } else { "x".to_owned() }),
            Next::Had(had) if had.request_digest == "a"
        ));
        assert!(matches!(
            replay.turn(|_| "c".to_owned()),
            Next::Diverged(message) if message.contains("digest c") && message.contains("sent b")
        ));
        assert!(replay.steps.is_empty());
    }

    fn at(seq: u64, at_ms: u64, event: SessionEvent) -> Recorded {
        Recorded { seq, at_ms, event }
    }

    fn task(kind: &str, title: &str, created_at_ms: u64) -> Task {
        Task {
            id: TaskId::new(),
            run: hane_core::RunId::new(),
            kind: kind.to_owned(),
            assignment: "fleet-desk".to_owned(),
            title: title.to_owned(),
            details: None,
            created_at_ms,
        }
    }

    fn created(seq: u64, task: &Task) -> Recorded {
        at(
            seq,
            task.created_at_ms,
            SessionEvent::TaskCreated {
                task: task.id.clone(),
                kind: task.kind.clone(),
                assignment: task.assignment.clone(),
                title: task.title.clone(),
            },
        )
    }

    #[test]
    fn one_cursor_answers_calls_and_tasks_in_the_order_the_session_has_them() {
        let handover = task("handover", "not in the ledger", 5);
        let mut first = call("data.find_record", json!({"collection": "vehicles"}));
        first.seq = 1;
        let mut last = call("submit_result", json!({"status": "handed_over"}));
        last.seq = 3;
        let mut replay = Replay::from_history(
            vec![first, created(2, &handover), last],
            Vec::new(),
            vec![handover.clone()],
        );
        assert!(matches!(
            replay.call("data.find_record", &text(json!({"collection": "vehicles"}))),
            Next::Had(_)
        ));
        assert!(matches!(
            replay.task("handover", "fleet-desk", "not in the ledger"),
            Next::Had(Some(had)) if had.id == handover.id
        ));
        assert!(matches!(
            replay.call("submit_result", &text(json!({"status": "handed_over"}))),
            Next::Had(_)
        ));
        assert_eq!(replay.answered, 3);
    }

    #[test]
    fn asking_for_another_kind_than_the_next_step_diverges_naming_its_event() {
        let handover = task("handover", "not in the ledger", 5);
        let mut first = call("data.find_record", json!({"collection": "vehicles"}));
        first.seq = 1;
        let mut replay = Replay::from_history(
            vec![first, created(2, &handover)],
            Vec::new(),
            vec![handover.clone()],
        );
        assert!(matches!(
            replay.call("data.find_record", &text(json!({"collection": "vehicles"}))),
            Next::Had(_)
        ));
        // Per kind, the call would have been live: in one history it is
        // where the run had made a handover.
        let Next::Diverged(message) =
            replay.call("submit_result", &text(json!({"status": "found"})))
        else {
            panic!("a call where the run had created a task diverges");
        };
        assert_eq!(
            message,
            format!(
                "called `submit_result` with {{\"status\":\"found\"}} where it had created handover task {} for fleet-desk titled \"not in the ledger\" (at event 2 of its session)",
                handover.id
            )
        );
        assert!(matches!(
            replay.task("handover", "fleet-desk", "not in the ledger"),
            Next::Live
        ));
    }

    #[test]
    fn a_task_recorded_and_never_stored_is_made_again() {
        let handover = task("handover", "not in the ledger", 5);
        let mut replay = Replay::from_history(vec![created(1, &handover)], Vec::new(), Vec::new());
        assert!(matches!(
            replay.task("handover", "fleet-desk", "not in the ledger"),
            Next::Had(None)
        ));
    }

    #[test]
    fn a_task_an_older_session_does_not_record_is_placed_by_its_time() {
        let handover = task("handover", "not in the ledger", 15);
        let mut first = call("data.find_record", json!({"collection": "vehicles"}));
        (first.seq, first.at_ms) = (1, 10);
        let mut last = call("submit_result", json!({"status": "handed_over"}));
        (last.seq, last.at_ms) = (2, 20);
        let mut replay =
            Replay::from_history(vec![first, last], Vec::new(), vec![handover.clone()]);
        assert!(matches!(
            replay.call("data.find_record", &text(json!({"collection": "vehicles"}))),
            Next::Had(_)
        ));
        let Next::Diverged(message) =
            replay.call("submit_result", &text(json!({"status": "handed_over"})))
        else {
            panic!("the task comes between the calls");
        };
        assert!(message.ends_with("(in its history)"), "{message}");
    }
}
