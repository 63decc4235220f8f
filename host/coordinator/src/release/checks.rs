//! The checks of a release's evaluation suites and schedules against
//! the agents and workflows it has.

use super::*;

/// Each case's input must be one the suite's agent takes: a case that
/// could never run is found now.
pub(super) fn check_suite(
    file: &str,
    suite: &EvalSuiteManifest,
    agents: &BTreeMap<String, Arc<LoadedAgent>>,
    errors: &mut Vec<ManifestError>,
) {
    let error = |field: String, message: String| ManifestError {
        file: file.to_owned(),
        line: None,
        field,
        message,
    };
    // A suite naming no agent of the bundle was refused when the bundle
    // was read; one whose agent did not load has its agent's errors.
    let Some(agent) = agents.get(&suite.spec.agent) else {
        return;
    };
    for (i, case) in suite.spec.cases.iter().enumerate() {
        if let Err(list) = agent.input.check(&case.input) {
            errors.push(error(
                format!("spec.cases[{i}].input"),
                format!(
                    "not an input agent `{}` takes: {}",
                    suite.spec.agent,
                    describe_violations(&list)
                ),
            ));
        }
    }
}

/// A schedule's agent or workflow must be one of the release, and its
/// input one the agent or the workflow takes: a tick that could never
/// start is found now.
pub(super) fn check_schedule(
    file: &str,
    schedule: &ScheduleManifest,
    agents: &BTreeMap<String, Arc<LoadedAgent>>,
    workflows: &BTreeMap<String, Arc<LoadedWorkflow>>,
    errors: &mut Vec<ManifestError>,
) {
    let spec = &schedule.spec;
    let (field, kind, name, schema) = match spec.target() {
        Some(ScheduleTarget::Agent(agent)) => (
            "spec.agent",
            "agent",
            agent,
            agents.get(agent).map(|a| &a.input),
        ),
        Some(ScheduleTarget::Workflow(_)) if spec.shadow => {
            errors.push(ManifestError::new(
                file,
                "spec.shadow",
                "a workflow's cases have no shadow mode: a shadow schedule targets an agent"
                    .to_owned(),
            ));
            return;
        }
        Some(ScheduleTarget::Workflow(workflow)) => (
            "spec.workflow",
            "workflow",
            workflow,
            workflows.get(workflow).map(|w| &w.input),
        ),
        None => return,
    };
    let Some(schema) = schema else {
        let known: Vec<String> = match kind {
            "agent" => agents.keys().cloned().collect(),
            _ => workflows.keys().cloned().collect(),
        };
        errors.push(ManifestError::new(
            file,
            field,
            format!(
                "`{name}` is not a {kind} of this release; its {kind}s are {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        ));
        return;
    };
    if let Err(list) = schema.check(&spec.input) {
        errors.push(ManifestError::new(
            file,
            "spec.input",
            format!(
                "not an input {kind} `{name}` takes: {}",
                describe_violations(&list)
            ),
        ));
    }
}
