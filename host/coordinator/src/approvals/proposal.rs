//! Outbound tools inside a run: proposing an ActionRequest, choosing its
//! decider, review agents, waiting for the outcome; a run's charge against
//! the day's budget.

use crate::runtime::Replaying;
use std::future::Future;
use std::pin::Pin;

use hane_core::{ActionId, action::ProposedAction};
use hane_manifest::{Decider, PolicyVerdict};

use std::time::Duration;

use hane_core::{JsonText, RunId, TaskId};
use hane_store::TaskRow;
use serde_json::{Value, json};

use super::ledger::{ActionError, record};
use crate::budget::{BudgetExceeded, utc_day};
use crate::gateway::Stop;
use crate::runtime::{AgentRuntime, LiveRun, RunStatus, StartRun, Task, now_ms, task_row};
use crate::tools::{self, ToolResult};
use hane_core::ControlTool;
use hane_core::{
    ActionRequest, ActionState, DeciderKind, Decision, Verdict,
    address::{AddressError, check_api_path, check_recipient},
    approval::{ActionOutcome, ConnectionTarget},
    digest,
};

/// Where approval tasks go when neither the agent's `approval` nor its
/// `handover` names a group.
pub const DEFAULT_APPROVERS: &str = "approvers";

/// How often a run waiting for a decision checks whether it was stopped.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// Who decides an action, as chosen when it is proposed.
#[derive(Debug, Clone, PartialEq)]
enum Choice {
    Person(String),
    Agent(String),
    Policy(PolicyVerdict),
}

/// The group whose people decide the run's actions when no rule says
/// otherwise: the agent's `approval.assignment`, else its handover group,
/// else [`DEFAULT_APPROVERS`].
fn approval_group(live: &LiveRun) -> String {
    let spec = &live.agent.manifest.spec;
    spec.approval
        .as_ref()
        .and_then(|a| a.assignment.clone())
        .or_else(|| spec.handover.as_ref().map(|h| h.assignment.clone()))
        .unwrap_or_else(|| DEFAULT_APPROVERS.to_owned())
}

/// The pending ActionRequest a call of outbound tool `control` asks for,
/// with its content; or the refusal to report (a connection the agent
/// does not have).
fn action_request(
    live: &LiveRun,
    control: ControlTool,
    input: &Value,
) -> Result<(ActionRequest, Value), ToolResult> {
    let run = live.snapshot();
    let tool = control.name();
    let (recipient, content, connection) = recipient_and_content(live, control, input)?;
    let now = now_ms();
    let action = ActionRequest {
        id: ActionId::new(),
        run: run.id.clone(),
        agent: run.agent.clone(),
        tool: tool.to_owned(),
        digest: digest(tool, &recipient, &content),
        recipient,
        content: JsonText::from_value(&content),
        state: ActionState::Pending,
        decider: DeciderKind::Person,
        assignment: None,
        reviewer: None,
        rule: None,
        overridden: false,
        task: None,
        connection,
        trail: Vec::new(),
        attempts: Vec::new(),
        outcome: None,
        created_at_ms: now,
        updated_at_ms: now,
    };
    Ok((action, content))
}

/// The recipient and content a call fixes, and for `integration.execute`
/// the connection it goes through.
///
/// Every proposal, of an agent's call or an operation's, comes through
/// here before anything decides, matches or counts it: a recipient that
/// is not exactly one address of its kind ([`check_recipient`]), or a
/// path that is not a plain URL path ([`check_api_path`]), is refused as
/// invalid input naming the field, and nothing is stored.
fn recipient_and_content(
    live: &LiveRun,
    control: ControlTool,
    input: &Value,
) -> Result<(String, Value, Option<ConnectionTarget>), ToolResult> {
    let text = |field: &str| input[field].as_str().unwrap_or_default().to_owned();
    let invalid = |field: &str, e: AddressError| {
        ToolResult::error(
            "invalid_input",
            format!(
                "`{field}` of `{}` {e}; nothing was proposed",
                control.name()
            ),
        )
    };
    let to = |field: &str| -> Result<String, ToolResult> {
        let recipient = text(field);
        check_recipient(control, &recipient).map_err(|e| invalid(field, e))?;
        Ok(recipient)
    };
    match control {
        ControlTool::SendEmail => Ok((
            to("to")?,
            json!({"subject": text("subject"), "body": text("body")}),
            None,
        )),
        ControlTool::SendSms => Ok((to("to")?, json!({"text": text("text")}), None)),
        ControlTool::PlaceCall => Ok((to("to")?, json!({"message": text("message")}), None)),
        _ => connection_request(live, input),
    }
}

/// The exact HTTP request an `integration.execute` call (or an exposed
/// write tool's) fixes, and the connection it goes through: the operation
/// must be one the connection allows and the agent may use, must not be a
/// read (reads run at once with `integration.read`), and its input must
/// match the operation's schema. The credential is not part of it: the
/// host adds it when the action is delivered.
fn connection_request(
    live: &LiveRun,
    input: &Value,
) -> Result<(String, Value, Option<ConnectionTarget>), ToolResult> {
    let agent = &live.agent.manifest;
    let name = input["connection"].as_str().unwrap_or_default();
    let selector = input["operation"].as_str().unwrap_or_default();
    let denied = |message: String| Err(ToolResult::error("denied", message));
    let Some(connection) = live.release.connections.get(name) else {
        return denied(format!(
            "{}; nothing was proposed",
            crate::integrations::not_listed(agent, name)
        ));
    };
    let Some(allowed) = connection.find(selector) else {
        let names: Vec<&str> = connection.allowed.keys().map(String::as_str).collect();
        return Err(ToolResult::error(
            "not_found",
            format!(
                "connection `{name}` allows no operation `{selector}`; it allows {}; nothing was proposed",
                names.join(", ")
            ),
        ));
    };
    let operation = &allowed.operation;
    let op_name = operation.name();
    if !crate::integrations::may_use(&live.agent, name, &op_name) {
        return denied(format!(
            "connection `{name}` is not one of agent `{}`'s connections, and none of its tools exposes operation `{op_name}`; nothing was proposed",
            agent.metadata.name
        ));
    }
    if operation.is_read() {
        return denied(format!(
            "operation `{op_name}` only reads ({} {}): run it with integration.read; nothing was proposed",
            operation.method, operation.path
        ));
    }
    let call = input.get("input").cloned().unwrap_or_else(|| json!({}));
    let invalid = |problem: String| {
        Err(ToolResult::error(
            "invalid_input",
            format!("invalid input for operation `{op_name}`: {problem}; nothing was proposed"),
        ))
    };
    if let Err(list) = allowed.input.check(&call) {
        return invalid(hane_sandbox::describe_violations(&list));
    }
    let request = match operation.request(&call) {
        Ok(request) => request,
        Err(problem) => return invalid(problem),
    };
    check_api_path(&request.path_and_query).map_err(|e| {
        ToolResult::error(
            "invalid_input",
            format!("the path of operation `{op_name}` {e}; nothing was proposed"),
        )
    })?;
    // The body's Content-Type is the delivery's to set, with the body.
    let headers: serde_json::Map<String, Value> = request
        .headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("content-type"))
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let mut content = json!({
        "operation": op_name,
        "method": request.method,
        "path": request.path_and_query,
    });
    if !headers.is_empty() {
        content["headers"] = Value::Object(headers);
    }
    if let Some(body) = request.body {
        content["body"] = body;
    }
    let spec = &connection.manifest.spec;
    let target = ConnectionTarget {
        name: name.to_owned(),
        base_url: spec.base_url.clone(),
        credential: spec.credential.clone(),
        timeout_ms: Some(u64::try_from(spec.timeout.0.as_millis()).unwrap_or(u64::MAX)),
        ca_certificates: connection.ca_certificates.clone(),
        max_response_bytes: Some(spec.max_response_bytes.bytes()),
        response_schema: operation.output_schema.as_ref().map(JsonText::from_value),
    };
    Ok((name.to_owned(), content, Some(target)))
}

/// Records `choice` on `action`: who decides it, and a policy's decision
/// itself (made with the proposal, in its transaction). Returns the
/// approval task a person's decision needs.
fn assign(action: &mut ActionRequest, choice: &Choice, group: &str) -> Option<TaskRow> {
    match choice {
        Choice::Person(assignment) => {
            action.decider = DeciderKind::Person;
            action.assignment = Some(assignment.clone());
            let row = approval_task(action, assignment);
            action.task = row.id.parse().ok();
            Some(row)
        }
        Choice::Agent(reviewer) => {
            action.decider = DeciderKind::Agent;
            action.reviewer = Some(reviewer.clone());
            // The people who decide it if the agent escalates, or an
            // override sends it to people first.
            action.assignment = Some(group.to_owned());
            None
        }
        Choice::Policy(verdict) => {
            action.decider = DeciderKind::Policy;
            let by = format!(
                "policy:{}",
                action.rule.as_deref().unwrap_or("decider policy")
            );
            let verdict = match verdict {
                PolicyVerdict::Approve => Verdict::Approve,
                PolicyVerdict::Reject => Verdict::Reject,
            };
            let decision = Decision {
                kind: DeciderKind::Policy,
                by,
                verdict,
                reason: None,
                digest: action.digest.clone(),
                at_ms: action.created_at_ms,
            };
            record(action, decision);
            None
        }
    }
}

/// The approval task of `action` for people of `assignment`.
fn approval_task(action: &ActionRequest, assignment: &str) -> TaskRow {
    let task = Task {
        id: TaskId::new(),
        run: action.run.clone(),
        kind: "approval".to_owned(),
        assignment: assignment.to_owned(),
        title: format!("Approve {} to {}", action.tool, action.recipient),
        details: Some(JsonText::from_value(&json!({
            "action": action.id,
            "digest": action.digest,
        }))),
        created_at_ms: now_ms(),
    };
    task_row(&task)
}

/// What an outbound tool returns: the action's state and who decided;
/// for a customer API's operation, how its answer departs from the
/// documented schema too.
fn action_result(action: &ActionRequest) -> ToolResult {
    let decided_by = action
        .trail
        .iter()
        .rev()
        .find(|d| d.verdict != Verdict::Escalate)
        .map(|d| d.kind.as_str());
    let violations: &[String] = action
        .outcome
        .as_ref()
        .map_or(&[], |o| &o.schema_violations);
    let mut result = json!({
        "action": action.id,
        "state": action.state,
        "digest": action.digest,
        "detail": action.outcome.as_ref().map(|o| o.detail.clone()).unwrap_or_default(),
        "decidedBy": decided_by,
        "humanApproved": action.human_approved(),
        "summary": format!(
            "{} to {}: {}{}",
            action.tool,
            action.recipient,
            action.state,
            crate::integrations::violations_note(violations)
        ),
    });
    if action.connection.is_some() {
        result["schemaViolations"] = json!(violations);
    }
    ToolResult::Output(result)
}

/// Records in the run's session that it proposes `action`, so that the
/// run, resumed, meets the action where it proposed it.
fn record_proposal(live: &LiveRun, action: &ActionRequest) {
    if let Some(journal) = live.journal.get() {
        journal.record(vec![hane_core::SessionEvent::ActionProposed {
            action: action.id.clone(),
            tool: action.tool.clone(),
            digest: action.digest.clone(),
        }]);
    }
}

/// The outbound tools of runs: proposals fixed into ActionRequests, their
/// deciders chosen and asked, their outcomes waited for.
pub(crate) struct Proposals<'a> {
    pub(crate) kernel: &'a AgentRuntime,
}

impl<'a> Proposals<'a> {
    pub(crate) fn of(kernel: &'a AgentRuntime) -> Self {
        Self { kernel }
    }

    /// An outbound tool call: fixes recipient and content into an
    /// ActionRequest, has its decider decide, waits until it is settled
    /// and returns the outcome. Nothing is sent here unless a policy or a
    /// review agent approved it; a person's approval sends it from
    /// wherever the person approves.
    pub(crate) async fn propose(
        &self,
        live: &LiveRun,
        control: ControlTool,
        input: &Value,
    ) -> ToolResult {
        let run = live.snapshot();
        let (mut action, content) = match action_request(live, control, input) {
            Ok(fixed) => fixed,
            Err(refused) => return refused,
        };
        let ledger = &self.kernel.inner.actions;
        // A resumed run's action it had proposed is that one, not another.
        let had = match Replaying::of(self.kernel)
            .replayed_action(live, &action)
            .await
        {
            Ok(had) => had,
            Err(diverged) => return diverged,
        };
        if let Some(had) = had {
            if had.state.is_settled() {
                return action_result(&had);
            }
            return match self.wait_action(&run.id, had.id.as_str()).await {
                Ok(settled) => action_result(&settled),
                Err(e) => ToolResult::error("failed", e.to_string()),
            };
        }
        if run.shadow {
            record_proposal(live, &action);
            return self.record_shadowed(action).await;
        }
        if let Err(e) = self.actions_left().await {
            return ToolResult::error("budget_exceeded", e.to_string());
        }
        let group = approval_group(live);
        let choice = match self.choose(live, &mut action, &group, &content).await {
            Ok(choice) => choice,
            Err(e) => return ToolResult::error("failed", e.to_string()),
        };
        let task = assign(&mut action, &choice, &group);
        // What led to the action (the model's turn, the call) is stored
        // before it: a run resumed after a crash finds the action where
        // its session says it made the call, not a model asked again.
        record_proposal(live, &action);
        if let Some(journal) = live.journal.get()
            && let Err(e) = journal.flush().await
        {
            return ToolResult::error("failed", e.to_string());
        }
        let action = match ledger.propose(action, task).await {
            Ok(action) => action,
            Err(e) => {
                return ToolResult::error(
                    "failed",
                    format!("the action could not be recorded: {e}"),
                );
            }
        };
        if let Some(task) = &action.task {
            live.amend(|r| r.tasks.push(task.clone()));
        }
        if matches!(choice, Choice::Person(_)) {
            live.tell(|| crate::runtime::RunEvent::ActionPending {
                action: action.id.clone(),
                tool: action.tool.clone(),
                recipient: action.recipient.clone(),
                digest: action.digest.clone(),
                assignment: action.assignment.clone(),
            });
        }
        if let Err(unknown) = self.decide_now(&action, choice, group).await {
            return unknown;
        }
        let settled = match self.wait_action(&run.id, action.id.as_str()).await {
            Ok(settled) => settled,
            // The run stopped: its end withdraws the action (see `drive`).
            Err(e) => return ToolResult::error("failed", e.to_string()),
        };
        if let Some(task) = &settled.task
            && !live.snapshot().tasks.contains(task)
        {
            live.amend(|r| r.tasks.push(task.clone()));
        }
        action_result(&settled)
    }

    /// A shadow run's action: recorded as what would have been proposed;
    /// no decider is asked and nothing is sent.
    async fn record_shadowed(&self, mut action: ActionRequest) -> ToolResult {
        action.state = ActionState::Shadowed;
        action.outcome = Some(ActionOutcome {
            state: ActionState::Shadowed,
            detail:
                "shadow run: recorded what would have been proposed; not sent, no decider asked"
                    .to_owned(),
            reconciled_by: None,
            at_ms: action.created_at_ms,
            schema_violations: Vec::new(),
        });
        match self.kernel.inner.actions.propose(action, None).await {
            Ok(action) => action_result(&action),
            Err(e) => ToolResult::error("failed", format!("the action could not be recorded: {e}")),
        }
    }

    /// What the decider chosen when `action` was proposed does right away:
    /// a policy's approval executes it, a review agent reviews it; a person
    /// decides later. An error is the result to report: after a failure
    /// the action may or may not have gone out.
    async fn decide_now(
        &self,
        action: &ActionRequest,
        choice: Choice,
        group: String,
    ) -> Result<(), ToolResult> {
        let ledger = &self.kernel.inner.actions;
        let decided = match choice {
            Choice::Person(_) | Choice::Policy(PolicyVerdict::Reject) => Ok(()),
            Choice::Policy(PolicyVerdict::Approve) => {
                ledger.execute(action.id.as_str()).await.map(drop)
            }
            Choice::Agent(reviewer) => self.review(action.clone(), reviewer, group).await,
        };
        match decided {
            // A person may have decided first (an override lets people
            // decide while a review agent still works): their decision
            // stands.
            Ok(()) | Err(ActionError::AlreadyDecided { .. }) => Ok(()),
            // It may have been sent before the error: never report it as
            // not sent.
            Err(e) => Err(ToolResult::error(
                "unknown",
                format!(
                    "action {}: {e}; it may or may not have gone out and is not sent again",
                    action.id
                ),
            )),
        }
    }

    /// The result of an outbound operation: its output and what became of
    /// each action it proposed, `{"output": …, "actions": [...]}`. Each
    /// proposal goes through exactly what a call of its outbound tool
    /// goes through (schema, connection, shadow, budget, decider, wait);
    /// one that does not pass is reported `refused` with the reason, and
    /// the others go on.
    pub(crate) async fn operation_actions(
        &self,
        live: &LiveRun,
        result: ToolResult,
        proposals: &[ProposedAction],
    ) -> ToolResult {
        let ToolResult::Output(output) = result else {
            return result;
        };
        let mut actions = Vec::new();
        for proposal in proposals {
            let outcome = match tools::proposal_input(proposal) {
                Ok((control, input)) => self.propose(live, control, &input).await,
                Err(e) => ToolResult::error("invalid_input", e.to_string()),
            };
            actions.push(match outcome {
                ToolResult::Output(mut value) => {
                    value["proposal"] = json!(proposal.id);
                    value
                }
                ToolResult::Error { kind, message } => json!({
                    "proposal": proposal.id,
                    "tool": proposal.tool,
                    "state": "refused",
                    "error": {"kind": kind, "message": message},
                }),
            });
        }
        ToolResult::Output(json!({"output": output, "actions": actions}))
    }

    /// An error when today's external actions are used up, so no action
    /// is proposed that could not be sent.
    async fn actions_left(&self) -> Result<(), ProposalError> {
        let ledger = &self.kernel.inner.actions;
        let Some(budget) = ledger.budget() else {
            return Ok(());
        };
        let Some(limit) = budget.spec.external_actions_per_day else {
            return Ok(());
        };
        let day = utc_day(now_ms());
        let (usage, _) = self
            .kernel
            .inner
            .registry
            .usage()
            .of_day(&day, &ledger.scope().key())
            .await?;
        if usage.actions >= limit {
            return Err(ProposalError::Budget(BudgetExceeded {
                budget: budget.name,
                limit: "externalActionsPerDay",
                limit_value: limit,
                used: usage.actions,
                requested: 1,
                day,
            }));
        }
        Ok(())
    }

    /// Chooses who decides `action`: people when an override names its
    /// tool; else the first matching rule of the agent's DeciderPolicy,
    /// or its default; else a person of `group`.
    async fn choose(
        &self,
        live: &LiveRun,
        action: &mut ActionRequest,
        group: &str,
        content: &Value,
    ) -> Result<Choice, ProposalError> {
        let overrides = self.kernel.inner.registry.overrides().list().await?;
        if overrides.iter().any(|o| o.tool == action.tool) {
            action.overridden = true;
            return Ok(Choice::Person(group.to_owned()));
        }
        let spec = &live.agent.manifest.spec;
        let Some(name) = spec.approval.as_ref().and_then(|a| a.decider.as_deref()) else {
            return Ok(Choice::Person(group.to_owned()));
        };
        let Some(policy) = live.release.decider_policies.get(name) else {
            return Err(ProposalError::NoPolicy {
                policy: name.to_owned(),
                release: live.release.info.number,
            });
        };
        let Some((index, decider)) = policy.decide(&action.tool, &action.recipient, content) else {
            return Ok(Choice::Person(group.to_owned()));
        };
        action.rule = Some(match index {
            Some(i) => match &policy.rules[i].name {
                Some(rule) => format!("{name} rule {} ({rule})", i + 1),
                None => format!("{name} rule {}", i + 1),
            },
            None => format!("{name} default"),
        });
        Ok(match decider {
            Decider::Person(group) => Choice::Person(group.clone()),
            Decider::Agent(agent) => Choice::Agent(agent.clone()),
            Decider::Policy(verdict) => Choice::Policy(*verdict),
        })
    }

    /// Runs review agent `reviewer` on `action` and records its decision
    /// as an agent's: approve (then executes), reject, or escalate to a
    /// person of `group`. A review run that ends without a decision
    /// escalates.
    ///
    /// Boxed: a review is a run, whose tool calls may propose actions.
    pub(crate) fn review(
        &self,
        action: ActionRequest,
        reviewer: String,
        group: String,
    ) -> Pin<Box<dyn Future<Output = Result<(), ActionError>> + Send + '_>> {
        Box::pin(async move {
            if reviewer == action.agent {
                // An agent reviewing its own actions would review this
                // review's actions too, without end.
                let escalation = Some(approval_task(&action, &group));
                let decision = Decision {
                    kind: DeciderKind::Agent,
                    by: format!("agent:{reviewer}"),
                    verdict: Verdict::Escalate,
                    reason: Some("an agent does not review its own actions".to_owned()),
                    digest: action.digest.clone(),
                    at_ms: now_ms(),
                };
                self.kernel
                    .inner
                    .actions
                    .decide(action.id.as_str(), decision, escalation, None)
                    .await?;
                return Ok(());
            }
            let (verdict, reason, by) = self.review_run(&action, &reviewer).await;
            // Also for an approval: an override set meanwhile escalates it.
            let escalation = Some(approval_task(&action, &group));
            self.kernel
                .inner
                .actions
                .decide(
                    action.id.as_str(),
                    Decision {
                        kind: DeciderKind::Agent,
                        by,
                        verdict,
                        reason,
                        digest: action.digest.clone(),
                        at_ms: now_ms(),
                    },
                    escalation,
                    None,
                )
                .await?;
            if verdict == Verdict::Approve {
                self.kernel
                    .inner
                    .actions
                    .execute(action.id.as_str())
                    .await?;
            }
            Ok(())
        })
    }

    /// Runs review agent `reviewer` on `action` to its end: its verdict,
    /// its reason and who decided. A run that ends without a decision, or
    /// cannot start, escalates.
    async fn review_run(
        &self,
        action: &ActionRequest,
        reviewer: &str,
    ) -> (Verdict, Option<String>, String) {
        let input = json!({
            "action": {
                "id": action.id,
                "agent": action.agent,
                "run": action.run,
                "tool": action.tool,
                "recipient": action.recipient,
                "content": action.content,
                "digest": action.digest,
            }
        });
        let request = StartRun {
            agent: reviewer.to_owned(),
            input,
            shadow: false,
        };
        let run = match self.kernel.run_to_end(request).await {
            Ok(run) => run,
            Err(e) => {
                return (
                    Verdict::Escalate,
                    Some(format!("the review agent could not start: {e}")),
                    format!("agent:{reviewer}"),
                );
            }
        };
        let by = format!("agent:{reviewer} ({})", run.id);
        let result = run.result.as_ref().and_then(|r| r.to_value().ok());
        let decision = result
            .as_ref()
            .and_then(|r| r["decision"].as_str())
            .and_then(|d| match d {
                "approve" => Some(Verdict::Approve),
                "reject" => Some(Verdict::Reject),
                "escalate" => Some(Verdict::Escalate),
                _ => None,
            });
        match (run.status, decision) {
            (RunStatus::Succeeded, Some(verdict)) => (
                verdict,
                result.and_then(|r| r["reason"].as_str().map(str::to_owned)),
                by,
            ),
            (status, _) => (
                Verdict::Escalate,
                Some(format!(
                    "the review run ended {status} without a decision{}",
                    run.error.map(|e| format!(": {e}")).unwrap_or_default()
                )),
                by,
            ),
        }
    }

    /// Waits until action `id` is settled, or the run `run` is stopped.
    async fn wait_action(&self, run: &RunId, id: &str) -> Result<ActionRequest, ProposalError> {
        loop {
            match tokio::time::timeout(STOP_CHECK, self.kernel.inner.actions.wait_settled(id)).await
            {
                Ok(settled) => return Ok(settled?),
                Err(_) => match self.kernel.inner.gateway.stopped(run) {
                    Some(Stop::Cancelled) => {
                        return Err(ProposalError::Cancelled {
                            action: id.to_owned(),
                        });
                    }
                    Some(Stop::LimitExceeded(message) | Stop::Failed(message)) => {
                        return Err(ProposalError::Stopped {
                            action: id.to_owned(),
                            message,
                        });
                    }
                    None => {}
                },
            }
        }
    }
}

/// Why a proposed action could not be made or waited for; the run's
/// driver is told it as the call's error.
#[derive(Debug, thiserror::Error)]
enum ProposalError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] hane_store::StoreError),
    /// The ledger failed.
    #[error(transparent)]
    Action(#[from] ActionError),
    /// Today's external actions are used up.
    #[error(transparent)]
    Budget(BudgetExceeded),
    /// The agent names a decider policy its release lacks.
    #[error("the agent's decider policy `{policy}` is not in release {release}")]
    NoPolicy {
        /// The policy.
        policy: String,
        /// The release.
        release: u64,
    },
    /// The run was cancelled while the action waited.
    #[error("the run was cancelled while action {action} waited for a decision")]
    Cancelled {
        /// The action.
        action: String,
    },
    /// The run was stopped while the action waited.
    #[error("{message} while action {action} waited for a decision")]
    Stopped {
        /// The action.
        action: String,
        /// Why the run stopped.
        message: String,
    },
}
