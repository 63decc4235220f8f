//! `Workflow` definitions: steps — an agent's run, or a task for a person
//! — each run only when its `when` holds, with inputs templated from the
//! case's input and earlier steps' outputs (the same `${PATH}` templates
//! and conditions as scripts, [`crate::Scope`]). A case, one
//! execution of a workflow, is `hane_core::WorkflowCase`.
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

use crate::script::{
    Condition, ScriptError, ValuePath, check_reference, check_step_id, check_templates,
};
use crate::{
    AGENTS_API_VERSION,
    agent::{check_dns_name, not_blank},
};
use crate::{ManifestError, Metadata, manifest::Source};
use hane_core::workflow::StepKind;

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
}
