//! Workflow cases: one execution of a workflow, as the store keeps it,
//! resumed at its step after a restart. The definitions they run are
//! `hane_manifest::workflow::WorkflowManifest`s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{JsonText, Lifecycle, RunId, WorkflowCaseId, lifecycle::UnknownState};

/// What kind of work a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// An agent's run.
    Agent,
    /// A person's task.
    Task,
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
        assert_eq!(crate::round_trip(&case), case);
        let outputs = case.outputs();
        assert_eq!(outputs.len(), 1);
        assert_eq!(outputs["answer"]["status"], "handed_over");
        assert!(!CaseStatus::Waiting.is_final() && CaseStatus::Failed.is_final());
    }
}
