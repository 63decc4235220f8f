//! The control tools the host runs itself: results, reviews, tasks for
//! people; the outbound ones go to `approvals`.

use crate::approvals::Proposals;
use crate::runtime::Replaying;
use hane_core::{JsonText, RunId, TaskId};
use hane_sandbox::describe_violations;
use serde_json::{Value, json};
use std::sync::Weak;

use std::sync::Arc;

use super::{ControlTool, ToolResult};
use crate::integrations::ApiTool;
use crate::release::{LoadedAgent, LoadedRelease};
use crate::runtime::{AgentRuntime, LiveRun, Task, lock, now_ms, task_row};
use hane_core::BoxFuture;

/// A service outside the run kernel that answers some control tools of a
/// run (the workflow tools, answered by [`Workflows`](crate::Workflows)):
/// the kernel admits the call through the Tool Gateway and records it; the
/// service does the work. Registered with
/// [`AgentRuntime::answer_controls`] where the services are composed.
pub(crate) trait ControlService: Send + Sync + std::fmt::Debug {
    /// Answers `call`.
    fn answer<'a>(&'a self, call: ControlCall<'a>) -> BoxFuture<'a, ToolResult>;
}

/// A control tool's call, as a [`ControlService`] sees it: the tool, its
/// input, and the run calling it, as it is now.
pub(crate) struct ControlCall<'a> {
    /// The tool.
    pub(crate) tool: ControlTool,
    /// Its input, valid against the tool's schema.
    pub(crate) input: &'a Value,
    /// The run calling it.
    pub(crate) run: RunId,
    /// Whether that run is a shadow run, which records what it would do
    /// and sends nothing.
    pub(crate) shadow: bool,
    /// The run's agent.
    pub(crate) agent: &'a LoadedAgent,
    /// The release the run started in.
    pub(crate) release: &'a Arc<LoadedRelease>,
    /// The exposed tool the call came through, for a tool an exposure
    /// makes of a connection's operation.
    pub(crate) exposure: Option<&'a ApiTool>,
}

/// A task a control tool asks for: a handover or a task for a group.
struct TaskRequest {
    kind: &'static str,
    title: String,
    assignment: String,
}

/// What a control tool that created task `id` answers.
fn task_created(kind: &str, id: &TaskId, assignment: &str) -> ToolResult {
    ToolResult::Output(json!({
        "task": id.to_string(),
        "assignment": assignment,
        "shadow": false,
        "summary": format!("{kind} task {id} for {assignment}"),
    }))
}

/// `submit_result`: the run's result, once it matches the agent's output
/// schema and has a `status`.
fn submit_result(live: &LiveRun, input: &Value) -> ToolResult {
    if let Err(list) = live.agent.output.check(input) {
        return ToolResult::error(
            "invalid_input",
            format!(
                "the result does not match the agent's output schema: {}",
                describe_violations(&list)
            ),
        );
    }
    if !input.get("status").is_some_and(Value::is_string) {
        return ToolResult::error("invalid_input", "the result must have a `status` string");
    }
    *lock(&live.submitted) = Some(input.clone());
    live.result_ready.notify_one();
    ToolResult::Output(json!({"accepted": true}))
}

/// `submit_review`: a review agent's decision, as its run's result.
fn submit_review(live: &LiveRun, input: &Value) -> ToolResult {
    let decision = input["decision"].as_str().unwrap_or_default();
    *lock(&live.submitted) = Some(json!({
        "status": decision,
        "decision": decision,
        "reason": input.get("reason").cloned().unwrap_or(Value::Null),
    }));
    live.result_ready.notify_one();
    ToolResult::Output(json!({"accepted": true}))
}

/// What `request_human_help` (a handover to the agent's `handover` group)
/// or `tasks.create` (a task for the given group, else the handover group)
/// asks for, or why it cannot be done.
fn task_request(
    live: &LiveRun,
    control: ControlTool,
    input: &Value,
) -> Result<TaskRequest, ToolResult> {
    let spec = &live.agent.manifest.spec;
    if control == ControlTool::RequestHumanHelp {
        let Some(handover) = &spec.handover else {
            return Err(ToolResult::error(
                "denied",
                format!(
                    "agent `{}` has no handover",
                    live.agent.manifest.metadata.name
                ),
            ));
        };
        return Ok(TaskRequest {
            kind: "handover",
            title: input["reason"].as_str().unwrap_or_default().to_owned(),
            assignment: handover.assignment.clone(),
        });
    }
    let assignment = input
        .get("assignment")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| spec.handover.as_ref().map(|h| h.assignment.clone()));
    let Some(assignment) = assignment else {
        return Err(ToolResult::error(
            "invalid_input",
            "no `assignment` given and the agent has no handover group",
        ));
    };
    Ok(TaskRequest {
        kind: "task",
        title: input["title"].as_str().unwrap_or_default().to_owned(),
        assignment,
    })
}

/// Runs the control tools of a run in the host.
pub(crate) struct Controls<'a> {
    pub(crate) kernel: &'a AgentRuntime,
}

impl<'a> Controls<'a> {
    pub(crate) fn of(kernel: &'a AgentRuntime) -> Self {
        Self { kernel }
    }

    /// The service answering `tool`, while it lives.
    pub(crate) fn control_service(&self, tool: ControlTool) -> Option<Arc<dyn ControlService>> {
        self.kernel
            .inner
            .controls
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tool)
            .and_then(Weak::upgrade)
    }
    /// Runs a control tool of `live`'s run in the host.
    pub(crate) async fn control(
        &self,
        live: &LiveRun,
        control: ControlTool,
        input: &Value,
    ) -> ToolResult {
        match control {
            ControlTool::SubmitResult => submit_result(live, input),
            ControlTool::SubmitReview => submit_review(live, input),
            ControlTool::SendEmail
            | ControlTool::SendSms
            | ControlTool::PlaceCall
            | ControlTool::IntegrationExecute => {
                Proposals::of(self.kernel)
                    .propose(live, control, input)
                    .await
            }
            ControlTool::WorkflowStart
            | ControlTool::WorkflowGetCase
            | ControlTool::IntegrationDescribe
            | ControlTool::IntegrationRead => {
                self.answer_elsewhere(live, control, input, None).await
            }
            ControlTool::RequestHumanHelp | ControlTool::CreateTask => {
                match task_request(live, control, input) {
                    Ok(request) => self.create_task(live, request, input).await,
                    Err(refused) => refused,
                }
            }
        }
    }

    /// Runs a call of a tool an exposure makes of a connection's
    /// operation: a read as `integration.read` of that operation, anything
    /// else as `integration.execute` of it, an outbound action.
    pub(crate) async fn api(&self, live: &LiveRun, tool: &ApiTool, input: &Value) -> ToolResult {
        let generic = tool.generic_input(input);
        if tool.impact == hane_core::Impact::Read {
            self.answer_elsewhere(live, ControlTool::IntegrationRead, &generic, Some(tool))
                .await
        } else {
            Proposals::of(self.kernel)
                .propose(live, ControlTool::IntegrationExecute, &generic)
                .await
        }
    }

    /// Has the service registered for `control` answer it.
    async fn answer_elsewhere(
        &self,
        live: &LiveRun,
        control: ControlTool,
        input: &Value,
        exposure: Option<&ApiTool>,
    ) -> ToolResult {
        let Some(service) = self.control_service(control) else {
            return ToolResult::error(
                "failed",
                format!(
                    "`{}` is not served by this process: its service was not composed with the runtime",
                    control.name()
                ),
            );
        };
        service
            .answer(ControlCall {
                tool: control,
                input,
                run: live.run_id(),
                shadow: live.is_shadow(),
                agent: &live.agent,
                release: &live.release,
                exposure,
            })
            .await
    }

    /// Stores the task `request` for the run, or in a shadow run only says
    /// what it would have created.
    async fn create_task(&self, live: &LiveRun, request: TaskRequest, input: &Value) -> ToolResult {
        let run = live.snapshot();
        let TaskRequest {
            kind,
            title,
            assignment,
        } = request;
        if run.shadow {
            return ToolResult::Output(json!({
                "task": null,
                "assignment": assignment,
                "shadow": true,
                "summary": format!("shadow run: would create a {kind} task for {assignment}"),
            }));
        }
        // A resumed run's task it had created is that one, not another.
        match Replaying::of(self.kernel).replayed_task(live, kind, &assignment, &title) {
            Ok(Some(task)) => {
                live.amend(|r| r.tasks.push(task.id.clone()));
                return task_created(kind, &task.id, &assignment);
            }
            Ok(None) => {}
            Err(diverged) => return diverged,
        }
        let task = Task {
            id: TaskId::new(),
            run: run.id.clone(),
            kind: kind.to_owned(),
            assignment: assignment.clone(),
            title,
            details: input.get("details").map(JsonText::from_value),
            created_at_ms: now_ms(),
        };
        // In the run's session before it is stored, so that the run,
        // resumed, meets the task where it created it.
        if let Some(journal) = live.journal.get() {
            journal.record(vec![hane_core::SessionEvent::TaskCreated {
                task: task.id.clone(),
                kind: task.kind.clone(),
                assignment: task.assignment.clone(),
                title: task.title.clone(),
            }]);
            if let Err(e) = journal.flush().await {
                return ToolResult::error("failed", e.to_string());
            }
        }
        if let Err(e) = self
            .kernel
            .inner
            .registry
            .tasks()
            .create(task_row(&task))
            .await
        {
            return ToolResult::error("failed", format!("the task could not be stored: {e}"));
        }
        live.amend(|r| r.tasks.push(task.id.clone()));
        task_created(kind, &task.id, &assignment)
    }
}
