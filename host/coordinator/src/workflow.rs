//! Workflow cases: started from the API, the CLI or an agent's
//! `workflow.start`, kept in the store after every step, and driven step
//! by step ([`Workflows::advance_case`]): an agent step's run is
//! recorded with its id before it starts, so a case resumed after a crash
//! never starts it twice; a task step waits for a person
//! ([`Workflows::complete_task`]).

use crate::runtime::Releases;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hane_core::{
    ErrorKind, JsonText, RunId, RunStatus, WorkflowCase, WorkflowCaseId, now_ms,
    workflow::{CaseStatus, CaseStep, CaseTask, StepKind, StepStatus},
};
use hane_manifest::Scope;
use hane_sandbox::describe_violations;
use hane_store::{CaseRow, Registry, StoreError};
use serde_json::{Value, json};

use crate::Listed;
use crate::release::{LoadedRelease, LoadedWorkflow};
use crate::runtime::{AgentRuntime, RunContext, RunError, StartRun, lock};
use crate::tools::{ControlCall, ControlService, ToolResult};
use hane_core::BoxFuture;

/// Why a case could not be started, read or moved on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// No release, or it could not be read.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The release has no workflow of this name.
    #[error("workflow `{workflow}` is not in release {release}{}", if .known.is_empty() { "; it has no Workflow".to_owned() } else { format!("; its workflows are {}", .known.join(", ")) })]
    UnknownWorkflow {
        /// The name asked for.
        workflow: String,
        /// The release.
        release: u64,
        /// Its workflows.
        known: Vec<String>,
    },
    /// The input does not match the workflow's input schema.
    #[error("invalid input for workflow `{workflow}`: {message}")]
    InvalidInput {
        /// The workflow.
        workflow: String,
        /// JSON Pointer into the input.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// No case has this id (or, for a case id the caller gave, not of this
    /// workflow).
    #[error("workflow case `{0}` not found")]
    NotFound(String),
    /// The case has no step of this id.
    #[error("case `{case}` has no step `{step}`; its steps are {}", .known.join(", "))]
    UnknownStep {
        /// The case.
        case: String,
        /// The step asked for.
        step: String,
        /// Its steps.
        known: Vec<String>,
    },
    /// The step is not a task waiting for a person.
    #[error("step `{step}` of case `{case}` is {status}, not a task waiting for a person")]
    NotWaiting {
        /// The case.
        case: String,
        /// The step.
        step: String,
        /// Where it is.
        status: String,
    },
    /// A task's result is not a map.
    #[error("a task's result must be a JSON object (a map)")]
    InvalidResult,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored case could not be read.
    #[error("{0}")]
    Corrupt(String),
}

impl WorkflowError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            WorkflowError::Run(e) => e.kind(),
            WorkflowError::UnknownWorkflow { .. }
            | WorkflowError::NotFound(_)
            | WorkflowError::UnknownStep { .. } => ErrorKind::NotFound,
            WorkflowError::InvalidInput { .. } | WorkflowError::InvalidResult => ErrorKind::Invalid,
            WorkflowError::NotWaiting { .. } => ErrorKind::Conflict,
            WorkflowError::Store(_) | WorkflowError::Corrupt(_) => ErrorKind::Internal,
        }
    }
}

/// One driver per case in this process: the lock each case's driver
/// holds while it moves the case on.
#[derive(Default)]
struct Driving(Mutex<HashMap<WorkflowCaseId, Arc<tokio::sync::Mutex<()>>>>);

impl Driving {
    fn lock_for(&self, id: &WorkflowCaseId) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.0).entry(id.clone()).or_default().clone()
    }

    /// Forgets the lock of a case that is over.
    fn forget(&self, id: &WorkflowCaseId) {
        lock(&self.0).remove(id);
    }
}

/// Workflow cases: each step a run of an agent or a task for people,
/// moved on in order as each ends. A service over the run kernel: it
/// starts and waits for step runs through [`AgentRuntime`], keeps cases in
/// the registry, and answers the `workflow.start` and `workflow.get_case`
/// tools of runs (see [`Services`](crate::Services)).
#[derive(Clone)]
pub struct Workflows {
    runs: AgentRuntime,
    registry: Registry,
    /// The cases being moved on in this process.
    driving: Arc<Driving>,
}

impl std::fmt::Debug for Workflows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workflows").finish_non_exhaustive()
    }
}

impl ControlService for Workflows {
    fn answer<'a>(&'a self, call: ControlCall<'a>) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            match call.tool {
                hane_core::ControlTool::WorkflowStart => self.workflow_start(&call).await,
                hane_core::ControlTool::WorkflowGetCase => self.workflow_get_case(&call).await,
                tool => ToolResult::error(
                    "failed",
                    format!("`{}` is not a workflow tool", tool.name()),
                ),
            }
        })
    }
}

impl Workflows {
    /// Workflow cases over the runs of `runs`, kept in its registry.
    pub fn new(runs: &AgentRuntime) -> Self {
        Self {
            runs: runs.clone(),
            registry: runs.registry().clone(),
            driving: Arc::default(),
        }
    }

    /// Starts a case of workflow `workflow` of the active release with
    /// `input`: stored `running`, then driven in the background.
    ///
    /// # Errors
    ///
    /// No release, no such workflow, an input its schema refuses, or the
    /// store failed; then nothing is stored.
    pub async fn start_case(
        &self,
        workflow: &str,
        input: Value,
    ) -> Result<WorkflowCase, WorkflowError> {
        let release = self.runs.release().await?;
        self.start_case_in(&release, workflow, input, None).await
    }

    pub(crate) async fn start_case_in(
        &self,
        release: &Arc<LoadedRelease>,
        workflow: &str,
        input: Value,
        started_by: Option<RunId>,
    ) -> Result<WorkflowCase, WorkflowError> {
        let loaded = workflow_of(release, workflow)?;
        if let Err(list) = loaded.input.check(&input) {
            return Err(WorkflowError::InvalidInput {
                workflow: workflow.to_owned(),
                path: list[0].instance_path.clone(),
                message: describe_violations(&list),
            });
        }
        let now = now_ms();
        let mut case = WorkflowCase {
            id: WorkflowCaseId::new(),
            workflow: workflow.to_owned(),
            release: release.info.number,
            input: JsonText::from_value(&input),
            status: CaseStatus::Running,
            steps: loaded
                .manifest
                .spec
                .steps
                .iter()
                .map(|step| CaseStep {
                    id: step.id.clone(),
                    kind: step.kind(),
                    status: StepStatus::Pending,
                    run: None,
                    task: None,
                    output: None,
                    error: None,
                    started_at_ms: None,
                    ended_at_ms: None,
                })
                .collect(),
            error: None,
            started_by,
            created_at_ms: now,
            updated_at_ms: now,
        };
        self.save_case_from(&mut case, None).await?;
        self.drive_in_background(case.id.clone());
        Ok(case)
    }

    /// Moves case `id` on in a task of its own.
    fn drive_in_background(&self, id: WorkflowCaseId) {
        let runtime = self.clone();
        tokio::spawn(async move {
            if let Err(e) = runtime.advance_case(&id).await {
                tracing::error!(case = %id, "moving a workflow case on: {e}");
            }
        });
    }

    /// Moves case `id` on as far as it goes: each step in turn, until a
    /// person's task waits, or the case succeeded or failed; and returns
    /// it then. One driver moves a case at a time in this process; a second
    /// call waits for the first and returns the case as it left it.
    ///
    /// A step found `running` whose run is not live here: a run that was
    /// never stored is started (with the id the step recorded); one that
    /// ended is taken as it ended; one left `queued` or `running` by a
    /// process that stopped is not started again, and the step fails
    /// saying so.
    ///
    /// # Errors
    ///
    /// No such case, or the store failed. What goes wrong in a step fails
    /// the step and the case, which is returned.
    pub async fn advance_case(&self, id: &WorkflowCaseId) -> Result<WorkflowCase, WorkflowError> {
        let guard = self.driving.lock_for(id);
        let _driving = guard.lock().await;
        let mut case = self.read_case(id).await?;
        if case.status.is_final() || case.status == CaseStatus::Waiting {
            return Ok(case);
        }
        let release = match Releases::of(&self.runs)
            .release_numbered(case.release)
            .await
        {
            Ok(release) => release,
            Err(e) => {
                case.status = CaseStatus::Failed;
                case.error = Some(format!("release {} cannot be read: {e}", case.release));
                self.save_case(&mut case).await?;
                return Ok(case);
            }
        };
        let Some(workflow) = release.workflows.get(&case.workflow).cloned() else {
            case.status = CaseStatus::Failed;
            case.error = Some(format!(
                "workflow `{}` is not in release {}",
                case.workflow, case.release
            ));
            self.save_case(&mut case).await?;
            return Ok(case);
        };
        loop {
            if case.status.is_final() || case.status == CaseStatus::Waiting {
                break;
            }
            let next = case.steps.iter().position(|s| {
                matches!(
                    s.status,
                    StepStatus::Pending | StepStatus::Running | StepStatus::Waiting
                )
            });
            let Some(i) = next else {
                case.status = CaseStatus::Succeeded;
                self.save_case(&mut case).await?;
                break;
            };
            self.step(&release, &workflow, &mut case, i).await?;
        }
        if case.status.is_final() {
            self.driving.forget(id);
        }
        Ok(case)
    }

    /// Moves step `i` of `case` on by one state, storing the case after.
    async fn step(
        &self,
        release: &Arc<LoadedRelease>,
        workflow: &LoadedWorkflow,
        case: &mut WorkflowCase,
        i: usize,
    ) -> Result<(), WorkflowError> {
        let definition = &workflow.manifest.spec.steps[i];
        let scope = Scope {
            input: case.input.to_value().unwrap_or(Value::Null),
            steps: case.outputs(),
        };
        match case.steps[i].status {
            StepStatus::Pending => {
                case.steps[i].started_at_ms = Some(now_ms());
                if let Some(when) = &definition.when
                    && !scope.holds(when)
                {
                    case.steps[i].status = StepStatus::Skipped;
                    case.steps[i].ended_at_ms = Some(now_ms());
                    return self.save_case(case).await;
                }
                match (&definition.agent, &definition.task) {
                    (Some(agent), _) => {
                        let input = match scope.render(&definition.input) {
                            Ok(input) => input,
                            Err(e) => {
                                fail(case, i, format!("its input: {e}"));
                                return self.save_case(case).await;
                            }
                        };
                        // Recorded before the run starts: a crash after
                        // this never starts a second run for the step.
                        let run = RunId::new();
                        case.steps[i].status = StepStatus::Running;
                        case.steps[i].run = Some(run.clone());
                        self.save_case(case).await?;
                        if let Err(e) = self.start_step_run(release, agent, input, run).await {
                            fail(case, i, format!("its run could not start: {e}"));
                            return self.save_case(case).await;
                        }
                        Ok(())
                    }
                    (None, Some(task)) => {
                        let title = scope.render(&Value::String(task.title.clone()));
                        let details = task.details.as_ref().map(|d| scope.render(d)).transpose();
                        match (title, details) {
                            (Ok(title), Ok(details)) => {
                                case.steps[i].task = Some(CaseTask {
                                    assignment: task.assignment.clone(),
                                    title: match title {
                                        Value::String(title) => title,
                                        other => other.to_string(),
                                    },
                                    details: details.as_ref().map(JsonText::from_value),
                                    completed_by: None,
                                });
                                case.steps[i].status = StepStatus::Waiting;
                                case.status = CaseStatus::Waiting;
                            }
                            (Err(e), _) | (_, Err(e)) => fail(case, i, format!("its task: {e}")),
                        }
                        self.save_case(case).await
                    }
                    (None, None) => {
                        fail(
                            case,
                            i,
                            "it is neither an agent's run nor a task".to_owned(),
                        );
                        self.save_case(case).await
                    }
                }
            }
            StepStatus::Running => {
                let Some(run) = case.steps[i].run.clone() else {
                    fail(case, i, "it is running but names no run".to_owned());
                    return self.save_case(case).await;
                };
                let live = self.runs.is_live(&run);
                if !live {
                    match self.registry.runs().get(run.as_str()).await? {
                        None => {
                            // Recorded, never started: the process stopped
                            // in between. Started now, once.
                            let agent = definition.agent.clone().unwrap_or_default();
                            let input = scope.render(&definition.input);
                            let started = match input {
                                Ok(input) => self
                                    .start_step_run(release, &agent, input, run.clone())
                                    .await
                                    .map_err(|e| format!("its run could not start: {e}")),
                                Err(e) => Err(format!("its input: {e}")),
                            };
                            if let Err(message) = started {
                                fail(case, i, message);
                                return self.save_case(case).await;
                            }
                        }
                        // A run that can be resumed is, by whichever
                        // process takes it over (this one among them):
                        // its end is waited for in the store.
                        Some(row)
                            if !row.status.is_final()
                                && hane_stored::open::<hane_core::AgentRun>(&row.body)
                                    .is_ok_and(|run| run.resumable) =>
                        {
                            self.runs.wait_in_store(&run).await?;
                        }
                        Some(row) if !row.status.is_final() => {
                            fail(
                                case,
                                i,
                                format!(
                                    "its run {run} was left {} by a process that stopped; it is not started again",
                                    row.status
                                ),
                            );
                            return self.save_case(case).await;
                        }
                        Some(_) => {}
                    }
                }
                let ended = self.runs.wait(&run).await?;
                let step = &mut case.steps[i];
                step.ended_at_ms = Some(now_ms());
                match (&ended.result, ended.status) {
                    (Some(result), RunStatus::Succeeded) => {
                        step.status = StepStatus::Done;
                        step.output = Some(result.clone());
                    }
                    (_, status) => {
                        let why = ended
                            .error
                            .clone()
                            .unwrap_or_else(|| "no result".to_owned());
                        fail(case, i, format!("its run {run} ended {status}: {why}"));
                    }
                }
                self.save_case(case).await
            }
            StepStatus::Waiting => {
                case.status = CaseStatus::Waiting;
                self.save_case(case).await
            }
            StepStatus::Done | StepStatus::Skipped | StepStatus::Failed => Ok(()),
        }
    }

    async fn start_step_run(
        &self,
        release: &Arc<LoadedRelease>,
        agent: &str,
        input: Value,
        id: RunId,
    ) -> Result<(), RunError> {
        let context = RunContext {
            release: Some(release.clone()),
            id: Some(id),
            ..RunContext::default()
        };
        let request = StartRun {
            agent: agent.to_owned(),
            input,
            shadow: false,
        };
        self.runs.start_in(request, context).await.map(drop)
    }

    /// A person completes task step `step` of case `id` with `result`
    /// (a map, which later steps read as `steps.STEP`); the case then goes
    /// on in the background.
    ///
    /// # Errors
    ///
    /// No such case or step, the step is not a task waiting for a person,
    /// the result is not a map, or the store failed; then nothing changed.
    pub async fn complete_task(
        &self,
        id: &WorkflowCaseId,
        step: &str,
        result: Value,
        by: &str,
    ) -> Result<WorkflowCase, WorkflowError> {
        if !result.is_object() {
            return Err(WorkflowError::InvalidResult);
        }
        let guard = self.driving.lock_for(id);
        let driving = guard.lock().await;
        let mut case = self.read_case(id).await?;
        let Some(i) = case.steps.iter().position(|s| s.id == step) else {
            return Err(WorkflowError::UnknownStep {
                case: id.to_string(),
                step: step.to_owned(),
                known: case.steps.iter().map(|s| s.id.clone()).collect(),
            });
        };
        let found = &mut case.steps[i];
        if found.kind != StepKind::Task || found.status != StepStatus::Waiting {
            return Err(WorkflowError::NotWaiting {
                case: id.to_string(),
                step: step.to_owned(),
                status: match found.kind {
                    StepKind::Agent => format!("an agent's run ({})", found.status),
                    StepKind::Task => found.status.to_string(),
                },
            });
        }
        found.status = StepStatus::Done;
        found.output = Some(JsonText::from_value(&result));
        found.ended_at_ms = Some(now_ms());
        if let Some(task) = &mut found.task {
            task.completed_by = Some(by.to_owned());
        }
        let from = case.status;
        case.status = CaseStatus::Running;
        self.save_case_from(&mut case, Some(from)).await?;
        drop(driving);
        self.drive_in_background(case.id.clone());
        Ok(case)
    }

    /// Starts a driver for every case left `running` (by this process
    /// before a restart, or one that stopped). For a long-running process
    /// such as `hane serve`, after it starts. Returns how many.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn resume_cases(&self) -> Result<usize, WorkflowError> {
        let rows = self
            .registry
            .cases()
            .list(None, Some(CaseStatus::Running), 0)
            .await?;
        for row in &rows {
            match row.id.parse::<WorkflowCaseId>() {
                Ok(id) => self.drive_in_background(id),
                Err(e) => tracing::error!("a stored case id `{}` does not read: {e}", row.id),
            }
        }
        Ok(rows.len())
    }

    /// The case with this id.
    ///
    /// # Errors
    ///
    /// [`WorkflowError::NotFound`], or the store failed.
    pub async fn case(&self, id: &WorkflowCaseId) -> Result<WorkflowCase, WorkflowError> {
        self.read_case(id).await
    }

    /// Cases, newest first, of `workflow` (or every workflow) in `status`
    /// (or any); at most `limit` (0: the store's cap). A stored case that
    /// does not read is left out and named in [`Listed::skipped`].
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn cases(
        &self,
        workflow: Option<String>,
        status: Option<CaseStatus>,
        limit: u32,
    ) -> Result<Listed<WorkflowCase>, WorkflowError> {
        let rows = self.registry.cases().list(workflow, status, limit).await?;
        Ok(Listed::read(
            "workflow case",
            rows,
            |row| &row.id,
            |row| hane_stored::open(&row.body),
        ))
    }

    async fn read_case(&self, id: &WorkflowCaseId) -> Result<WorkflowCase, WorkflowError> {
        let row = self
            .registry
            .cases()
            .get(id.as_str())
            .await?
            .ok_or_else(|| WorkflowError::NotFound(id.to_string()))?;
        open_case(&row)
    }

    /// Stores `case` as it is now, its `updated_at_ms` set to now, as its
    /// driver moves it on: from `running` in the store, the only status a
    /// case is driven in ([`Workflows::advance_case`] returns a case in
    /// any other at once, and stops at a step that leaves it so).
    async fn save_case(&self, case: &mut WorkflowCase) -> Result<(), WorkflowError> {
        self.save_case_from(case, Some(CaseStatus::Running)).await
    }

    /// Stores `case` as it is now, its `updated_at_ms` set to now, moving
    /// it in the store from status `from`; `None` for a new case.
    async fn save_case_from(
        &self,
        case: &mut WorkflowCase,
        from: Option<CaseStatus>,
    ) -> Result<(), WorkflowError> {
        case.updated_at_ms = now_ms();
        let row = CaseRow {
            id: case.id.to_string(),
            workflow: case.workflow.clone(),
            status: case.status,
            created_at_ms: case.created_at_ms,
            updated_at_ms: case.updated_at_ms,
            body: hane_stored::seal(&*case),
        };
        let registry = &self.registry;
        match from {
            None => registry.cases().insert(row).await?,
            Some(from) => registry.cases().update(from, row).await?,
        }
        Ok(())
    }

    /// `workflow.start`: a case of a workflow the agent lists in its
    /// `workflows`, in the run's release; in a shadow run only what would
    /// start.
    async fn workflow_start(&self, call: &ControlCall<'_>) -> ToolResult {
        let input = call.input;
        let name = input["workflow"].as_str().unwrap_or_default();
        let spec = &call.agent.manifest.spec;
        if !spec.workflows.iter().any(|w| w == name) {
            return ToolResult::error(
                "denied",
                format!(
                    "agent `{}` may start only the workflows in its spec.workflows: {}",
                    call.agent.manifest.metadata.name,
                    if spec.workflows.is_empty() {
                        "none".to_owned()
                    } else {
                        spec.workflows.join(", ")
                    }
                ),
            );
        }
        let case_input = input.get("input").cloned().unwrap_or_else(|| json!({}));
        if call.shadow {
            return ToolResult::Output(json!({
                "case": null,
                "status": null,
                "shadow": true,
                "summary": format!("shadow run: would start a case of workflow {name}"),
            }));
        }
        match self
            .start_case_in(call.release, name, case_input, Some(call.run.clone()))
            .await
        {
            Ok(case) => ToolResult::Output(json!({
                "case": case.id.to_string(),
                "status": case.status.as_str(),
                "shadow": false,
            })),
            Err(e @ WorkflowError::InvalidInput { .. }) => {
                ToolResult::error("invalid_input", e.to_string())
            }
            Err(e) => ToolResult::error("failed", e.to_string()),
        }
    }

    /// `workflow.get_case`: a case of a workflow the agent lists in its
    /// `workflows`: its status and each step's status and output.
    async fn workflow_get_case(&self, call: &ControlCall<'_>) -> ToolResult {
        let input = call.input;
        let given = input["case"].as_str().unwrap_or_default();
        let spec = &call.agent.manifest.spec;
        let not_found = || {
            ToolResult::error(
                "not_found",
                format!("no case `{given}` of a workflow this agent may start"),
            )
        };
        let Ok(id) = given.parse::<WorkflowCaseId>() else {
            return not_found();
        };
        let case = match self.read_case(&id).await {
            Ok(case) => case,
            Err(WorkflowError::NotFound(_)) => return not_found(),
            Err(e) => return ToolResult::error("failed", e.to_string()),
        };
        if !spec.workflows.contains(&case.workflow) {
            return not_found();
        }
        let steps: Vec<Value> = case
            .steps
            .iter()
            .map(|s| {
                json!({
                    "id": s.id,
                    "status": s.status.as_str(),
                    "output": s.output.as_ref().and_then(|o| o.to_value().ok()),
                    "error": s.error,
                })
            })
            .collect();
        ToolResult::Output(json!({
            "case": case.id.to_string(),
            "workflow": case.workflow,
            "status": case.status.as_str(),
            "steps": steps,
            "error": case.error,
        }))
    }
}

/// Step `i` failed with `message`, and the case with it.
fn fail(case: &mut WorkflowCase, i: usize, message: String) {
    let step = &mut case.steps[i];
    step.status = StepStatus::Failed;
    step.ended_at_ms = Some(now_ms());
    case.error = Some(format!("step `{}`: {message}", step.id));
    step.error = Some(message);
    case.status = CaseStatus::Failed;
}

fn workflow_of(
    release: &LoadedRelease,
    workflow: &str,
) -> Result<Arc<LoadedWorkflow>, WorkflowError> {
    release
        .workflows
        .get(workflow)
        .cloned()
        .ok_or_else(|| WorkflowError::UnknownWorkflow {
            workflow: workflow.to_owned(),
            release: release.info.number,
            known: release.workflows.keys().cloned().collect(),
        })
}

fn open_case(row: &CaseRow) -> Result<WorkflowCase, WorkflowError> {
    hane_stored::open(&row.body)
        .map_err(|e| WorkflowError::Corrupt(format!("workflow case `{}`: {e}", row.id)))
}
