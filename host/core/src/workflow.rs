//! Workflows: a `Workflow` definition's steps — an agent's run, or a task
//! for a person — each run only when its `when` holds, with inputs
//! templated from the case's input and earlier steps' outputs (the same
//! `${PATH}` templates and conditions as scripts, [`crate::Scope`]); and a
//! case, one execution of a workflow, as the store keeps it.
//!
//! ```yaml
//! apiVersion: agents/v1alpha1
//! kind: Workflow
//! metadata:
//!   name: lease-inquiry
//! spec:
//!   purpose: Answer a lease question; a person finds a contract the ledger lacks
//!   input: { type: object, required: [contract_no], properties: { contract_no: { type: string } } }
//!   steps:
//!     - id: answer
//!       agent: lease-qa
//!       input: { contract_no: "${input.contract_no}" }
//!     - id: desk
//!       when: { equals: { path: steps.answer.status, value: handed_over } }
//!       task: { assignment: leasing-desk, title: "Find lease contract ${input.contract_no}" }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::{AGENTS_API_VERSION, check_dns_name, not_blank};
use crate::manifest::{ManifestError, Metadata, Source};
use crate::script::{
    Condition, ScriptError, ValuePath, check_reference, check_step_id, check_templates,
};
use crate::{JsonText, Lifecycle, RunId, UnknownState, WorkflowCaseId};

/// The most steps a workflow may have.
pub const MAX_WORKFLOW_STEPS: usize = 50;

/// A `Workflow` manifest (`agents/v1alpha1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowManifest {
    /// Must be `agents/v1alpha1`.
    pub api_version: String,
    /// Must be `Workflow`.
    pub kind: String,
    /// The name: lowercase letters, digits and `-`, starting with a letter.
    pub metadata: Metadata,
    /// What it does and its steps.
    pub spec: WorkflowSpec,
}

/// `spec` of a `Workflow` manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowSpec {
    /// What the workflow is for.
    pub purpose: String,
    /// JSON Schema of a case's input; any map when absent.
    #[serde(default = "object_schema")]
    pub input: Value,
    /// One to [`MAX_WORKFLOW_STEPS`] steps, run in order.
    pub steps: Vec<WorkflowStep>,
}

fn object_schema() -> Value {
    serde_json::json!({ "type": "object" })
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// One step of a workflow: exactly one of `agent` (with its `input`) and
/// `task`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowStep {
    /// The step's id: later steps read its output as `steps.ID`.
    pub id: String,
    /// When present, the step runs only if this holds; otherwise it is
    /// skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
    /// The agent this step runs; its result is the step's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The agent's input, a map whose strings may hold `${PATH}`
    /// templates; `{}` when absent.
    #[serde(default = "empty_object")]
    pub input: Value,
    /// A task for a person; what the person submits is the step's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskStep>,
}

/// A step done by a person, through the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskStep {
    /// The group the task is for, such as `leasing-desk`.
    pub assignment: String,
    /// What to do; may hold `${PATH}` templates.
    pub title: String,
    /// Anything that helps, templated like an agent step's input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// What kind of work a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// An agent's run.
    Agent,
    /// A person's task.
    Task,
}

impl WorkflowStep {
    /// An agent step or a task step.
    pub fn kind(&self) -> StepKind {
        if self.task.is_some() {
            StepKind::Task
        } else {
            StepKind::Agent
        }
    }
}

impl WorkflowManifest {
    /// Parses and validates a `Workflow` manifest; `file` names it in
    /// errors.
    ///
    /// # Errors
    ///
    /// Malformed YAML, unknown or missing fields, a wrong `apiVersion` or
    /// `kind`, no steps or more than [`MAX_WORKFLOW_STEPS`], a step that is
    /// not exactly one of an agent and a task, repeated step ids, and
    /// templates or conditions that read a step that has not run before.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: Self = source.parse_manifest(AGENTS_API_VERSION, "Workflow")?;
        let fail = |field: &str, message: String| source.error(field, message);
        check_dns_name(&manifest.metadata.name)
            .map_err(|m| fail("metadata.name", m.to_string()))?;
        let spec = &manifest.spec;
        not_blank(&spec.purpose).map_err(|m| fail("spec.purpose", m.to_string()))?;
        if !spec.input.is_object() {
            return Err(fail(
                "spec.input",
                "must be a JSON Schema (a map)".to_owned(),
            ));
        }
        if spec.steps.is_empty() || spec.steps.len() > MAX_WORKFLOW_STEPS {
            return Err(fail(
                "spec.steps",
                format!(
                    "expected 1 to {MAX_WORKFLOW_STEPS} steps, found {}",
                    spec.steps.len()
                ),
            ));
        }
        check_steps(&spec.steps).map_err(|e| {
            let field = if e.field.is_empty() {
                format!("spec.steps[{}]", e.step)
            } else {
                format!("spec.steps[{}].{}", e.step, e.field)
            };
            fail(&field, e.message)
        })?;
        Ok(manifest)
    }
}

fn check_steps(steps: &[WorkflowStep]) -> Result<(), ScriptError> {
    let all: BTreeMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let mut earlier: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, step) in steps.iter().enumerate() {
        let fail = |field: &str, message: String| ScriptError {
            step: i,
            field: field.to_owned(),
            message,
        };
        check_step_id(&step.id).map_err(|m| fail("id", m.to_string()))?;
        if let Some(&j) = earlier.get(step.id.as_str()) {
            return Err(fail("id", format!("step {j} already has id `{}`", step.id)));
        }
        let refers =
            |field: &str, path: &ValuePath| check_reference(i, field, path, &earlier, &all);
        if let Some(when) = &step.when {
            refers(when.field(), when.path())?;
        }
        match (&step.agent, &step.task) {
            (Some(agent), None) => {
                check_dns_name(agent).map_err(|m| fail("agent", m.to_string()))?;
                if !step.input.is_object() {
                    return Err(fail("input", "must be a map".to_owned()));
                }
                check_templates(i, &step.input, &refers)?;
            }
            (None, Some(task)) => {
                if step.input.as_object().is_some_and(|m| !m.is_empty()) {
                    return Err(fail(
                        "input",
                        "a task step has no input: put what the person needs in `task.details`"
                            .to_owned(),
                    ));
                }
                not_blank(&task.assignment).map_err(|m| fail("task.assignment", m.to_string()))?;
                not_blank(&task.title).map_err(|m| fail("task.title", m.to_string()))?;
                check_templates(i, &Value::String(task.title.clone()), &|_, path| {
                    refers("task.title", path)
                })?;
                if let Some(details) = &task.details {
                    check_templates(i, details, &|_, path| refers("task.details", path))?;
                }
            }
            (Some(_), Some(_)) => {
                return Err(fail(
                    "",
                    "a step is an agent's run (`agent`) or a person's task (`task`), not both"
                        .to_owned(),
                ));
            }
            (None, None) => {
                return Err(fail(
                    "",
                    "a step needs `agent` (an agent's run) or `task` (a person's task)".to_owned(),
                ));
            }
        }
        earlier.insert(&step.id, i);
    }
    Ok(())
}

/// Where a case is; its transitions are [`Lifecycle::TRANSITIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(
    description = "A case starts `running`, waits while a person's task is open, and ends `succeeded` or `failed`"
)]
pub enum CaseStatus {
    /// A step is running or about to.
    Running,
    /// A person's task is open.
    Waiting,
    /// Every step ran or was skipped.
    Succeeded,
    /// A step failed; `error` says which and why.
    Failed,
}

impl CaseStatus {
    /// Every status, in order.
    pub const ALL: [CaseStatus; 4] = [
        CaseStatus::Running,
        CaseStatus::Waiting,
        CaseStatus::Succeeded,
        CaseStatus::Failed,
    ];

    /// Its name, as the API and the store write it.
    pub fn as_str(self) -> &'static str {
        match self {
            CaseStatus::Running => "running",
            CaseStatus::Waiting => "waiting",
            CaseStatus::Succeeded => "succeeded",
            CaseStatus::Failed => "failed",
        }
    }

    /// Whether the case is over.
    pub fn is_final(self) -> bool {
        matches!(self, CaseStatus::Succeeded | CaseStatus::Failed)
    }
}

impl std::fmt::Display for CaseStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for CaseStatus {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::lifecycle::parse(s)
    }
}

impl Lifecycle for CaseStatus {
    const KIND: &'static str = "workflow case";
    const ALL: &'static [Self] = &CaseStatus::ALL;
    const INITIAL: &'static [Self] = &[CaseStatus::Running];
    const TRANSITIONS: &'static [(Self, Self)] = {
        use CaseStatus::*;
        &[
            // A step moved on.
            (Running, Running),
            // A person's task step was reached.
            (Running, Waiting),
            (Running, Succeeded),
            (Running, Failed),
            // The person completed the task.
            (Waiting, Running),
        ]
    };

    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// Where a step of a case is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not reached yet.
    Pending,
    /// Its run was started (or is about to be, with the id it has).
    Running,
    /// Its task waits for a person.
    Waiting,
    /// It ended with an output.
    Done,
    /// Its `when` did not hold.
    Skipped,
    /// It failed; the case failed with it.
    Failed,
}

impl StepStatus {
    /// Its name, as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Running => "running",
            StepStatus::Waiting => "waiting",
            StepStatus::Done => "done",
            StepStatus::Skipped => "skipped",
            StepStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for StepStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A person's task of a case, as rendered when the step was reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CaseTask {
    /// The group it is for.
    pub assignment: String,
    /// What to do.
    pub title: String,
    /// Anything that helps.
    pub details: Option<JsonText>,
    /// Who completed it.
    pub completed_by: Option<String>,
}

/// One step of a case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CaseStep {
    /// The step's id.
    pub id: String,
    /// An agent's run or a person's task.
    pub kind: StepKind,
    /// Where it is.
    pub status: StepStatus,
    /// The run of an agent step; set (with the id the run will have)
    /// before the run starts, so a case resumed after a crash never starts
    /// a step's run twice.
    pub run: Option<RunId>,
    /// The task of a task step, once reached.
    pub task: Option<CaseTask>,
    /// Its output: the run's result, or what the person submitted.
    pub output: Option<JsonText>,
    /// Why it failed.
    pub error: Option<String>,
    /// When it started and ended, in milliseconds since the Unix epoch.
    pub started_at_ms: Option<u64>,
    /// When it ended.
    pub ended_at_ms: Option<u64>,
}

/// One execution of a workflow, kept in the store and resumed at its step
/// after a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct WorkflowCase {
    /// Its id.
    pub id: WorkflowCaseId,
    /// The workflow.
    pub workflow: String,
    /// The release whose definitions it runs.
    #[schemars(range(min = 1))]
    pub release: u64,
    /// Its input.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub input: JsonText,
    /// Where it is.
    pub status: CaseStatus,
    /// Each step of the workflow, in order.
    pub steps: Vec<CaseStep>,
    /// Why it failed.
    pub error: Option<String>,
    /// The run whose `workflow.start` started it, if one did.
    pub started_by: Option<RunId>,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
}

impl crate::Versioned for WorkflowCase {
    const KIND: &'static str = "workflow-case";
    const VERSION: u16 = 1;
}

impl WorkflowCase {
    /// The outputs of the steps that are done, by id: what templates read
    /// as `steps.ID`.
    pub fn outputs(&self) -> BTreeMap<String, Value> {
        self.steps
            .iter()
            .filter(|s| s.status == StepStatus::Done)
            .filter_map(|s| Some((s.id.clone(), s.output.as_ref()?.to_value().ok()?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
apiVersion: agents/v1alpha1
kind: Workflow
metadata:
  name: lease-inquiry
spec:
  purpose: Answer a lease question
  input: { type: object, required: [contract_no] }
  steps:
    - id: answer
      agent: lease-qa
      input: { contract_no: "${input.contract_no}" }
    - id: desk
      when: { equals: { path: steps.answer.status, value: handed_over } }
      task:
        assignment: leasing-desk
        title: "Find lease contract ${input.contract_no}"
        details: { answer: "${steps.answer}" }
    - id: again
      when: { notEmpty: steps.desk.contract_no }
      agent: lease-qa
      input: { contract_no: "${steps.desk.contract_no}" }
"#;

    fn error(text: &str) -> String {
        WorkflowManifest::from_yaml("w.yaml", text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_workflow_parses_with_its_steps() {
        let w = WorkflowManifest::from_yaml("w.yaml", GOOD).unwrap();
        let kinds: Vec<StepKind> = w.spec.steps.iter().map(WorkflowStep::kind).collect();
        assert_eq!(kinds, [StepKind::Agent, StepKind::Task, StepKind::Agent]);
        assert_eq!(
            w.spec.steps[1].task.as_ref().unwrap().assignment,
            "leasing-desk"
        );
    }

    #[test]
    fn bad_steps_are_refused_naming_the_field() {
        let later = GOOD.replace(
            "title: \"Find lease contract ${input.contract_no}\"",
            "title: \"Find ${steps.again.status}\"",
        );
        assert!(
            error(&later).contains(
                "spec.steps[1].task.title: `steps.again.status` names step 2, which runs later"
            ),
            "{}",
            error(&later)
        );
        let both = GOOD.replace("      task:\n", "      agent: lease-qa\n      task:\n");
        assert!(
            error(&both).contains("spec.steps[1]: a step is an agent's run"),
            "{}",
            error(&both)
        );
        let neither = GOOD.replace(
            "      agent: lease-qa\n      input: { contract_no: \"${input.contract_no}\" }\n",
            "",
        );
        assert!(
            error(&neither).contains("spec.steps[0]: a step needs `agent`"),
            "{}",
            error(&neither)
        );
        let twice = GOOD.replace("id: again", "id: answer");
        assert!(
            error(&twice).contains("spec.steps[2].id: step 0 already has id `answer`"),
            "{}",
            error(&twice)
        );
        let unknown = GOOD.replace("    - id: desk\n", "    - id: desk\n      retries: 3\n");
        assert!(error(&unknown).contains("retries"), "{}", error(&unknown));
        let bad_when = GOOD.replace("path: steps.answer.status", "path: steps.nothing.status");
        assert!(
            error(&bad_when).contains("spec.steps[1].when.equals.path"),
            "{}",
            error(&bad_when)
        );
    }

    #[test]
    fn a_case_round_trips_and_gives_its_outputs() {
        let case = WorkflowCase {
            id: WorkflowCaseId::new(),
            workflow: "lease-inquiry".to_owned(),
            release: 2,
            input: JsonText::parse(r#"{"contract_no":"C-9999"}"#).unwrap(),
            status: CaseStatus::Waiting,
            steps: vec![
                CaseStep {
                    id: "answer".to_owned(),
                    kind: StepKind::Agent,
                    status: StepStatus::Done,
                    run: Some(RunId::new()),
                    task: None,
                    output: Some(JsonText::parse(r#"{"status":"handed_over"}"#).unwrap()),
                    error: None,
                    started_at_ms: Some(1),
                    ended_at_ms: Some(2),
                },
                CaseStep {
                    id: "desk".to_owned(),
                    kind: StepKind::Task,
                    status: StepStatus::Waiting,
                    run: None,
                    task: Some(CaseTask {
                        assignment: "leasing-desk".to_owned(),
                        title: "Find it".to_owned(),
                        details: None,
                        completed_by: None,
                    }),
                    output: None,
                    error: None,
                    started_at_ms: Some(3),
                    ended_at_ms: None,
                },
            ],
            error: None,
            started_by: None,
            created_at_ms: 1,
            updated_at_ms: 3,
        };
        assert_eq!(
            crate::open::<WorkflowCase>(&crate::seal(&case)).unwrap(),
            case
        );
        let outputs = case.outputs();
        assert_eq!(outputs.len(), 1);
        assert_eq!(outputs["answer"]["status"], "handed_over");
        assert!(!CaseStatus::Waiting.is_final() && CaseStatus::Failed.is_final());
    }
}
