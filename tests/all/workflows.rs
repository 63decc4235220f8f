//! Workflows end to end on the examples' `lease-inquiry`: a case running
//! its agent steps, waiting for a person's task and going on when it is
//! done — also in another runtime on the same store, as after a restart;
//! a step whose run was recorded but never started is started once, one
//! whose run a stopped process left running is never started again; an
//! agent starting a case with `workflow.start` (only a workflow it lists,
//! and nothing in a shadow run); and definitions that could never run
//! refused at activation.

use std::path::Path;

use hane_coordinator::workflow::WorkflowError;
use hane_coordinator::{ActivationError, AgentRuntime, StartRun};
use hane_core::{
    AgentRun, JsonText, RunId, RunStatus, WorkflowCase, now_ms,
    workflow::{CaseStatus, StepStatus},
};
use hane_store::{CaseRow, RunQuery, RunRow};
use hane_test_support::{examples_copy, replace_in};
use serde_json::{Value, json};

use crate::agents::{activated, runtime};

fn output(case: &WorkflowCase, step: usize) -> Value {
    case.steps[step]
        .output
        .as_ref()
        .unwrap_or_else(|| panic!("step {step} has no output: {case:#?}"))
        .to_value()
        .unwrap()
}

async fn lease_qa_runs(runtime: &AgentRuntime) -> usize {
    runtime
        .list(RunQuery {
            agent: Some("lease-qa".to_owned()),
            ..RunQuery::default()
        })
        .await
        .unwrap()
        .items
        .len()
}

/// A case of `lease-inquiry` for a contract the ledger lacks, moved on to
/// the leasing desk's task.
async fn waiting_case(services: &hane_coordinator::Services) -> WorkflowCase {
    let started = services
        .workflows
        .start_case("lease-inquiry", json!({"contract_no": "C-9999"}))
        .await
        .unwrap();
    assert_eq!(started.status, CaseStatus::Running);
    let case = services.workflows.advance_case(&started.id).await.unwrap();
    assert_eq!(case.status, CaseStatus::Waiting, "{case:#?}");
    case
}

#[tokio::test]
async fn a_case_runs_its_steps_and_skips_what_its_conditions_rule_out() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let started = services
        .workflows
        .start_case("lease-inquiry", json!({"contract_no": "C-1001"}))
        .await
        .unwrap();
    let case = services.workflows.advance_case(&started.id).await.unwrap();
    assert_eq!(case.status, CaseStatus::Succeeded, "{case:#?}");
    let statuses: Vec<StepStatus> = case.steps.iter().map(|s| s.status).collect();
    assert_eq!(
        statuses,
        [StepStatus::Done, StepStatus::Skipped, StepStatus::Skipped]
    );
    assert_eq!(output(&case, 0)["lessee"], "Kita Logistics");
    let run = runtime
        .get(case.steps[0].run.as_ref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        run.input.to_value().unwrap(),
        json!({"contract_no": "C-1001"})
    );
    assert_eq!(services.workflows.case(&case.id).await.unwrap(), case);
    // Bad input and unknown workflows are refused; nothing is stored.
    let refused = services
        .workflows
        .start_case("lease-inquiry", json!({"contract_no": 7}))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, WorkflowError::InvalidInput { path, .. } if path == "/contract_no"),
        "{refused}"
    );
    assert!(matches!(
        services.workflows.start_case("nothing", json!({})).await,
        Err(WorkflowError::UnknownWorkflow { known, .. }) if known == ["lease-inquiry"]
    ));
    assert_eq!(
        services
            .workflows
            .cases(None, None, 0)
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn a_waiting_case_goes_on_in_another_runtime_once_its_task_is_done() {
    let dir = tempfile::tempdir().unwrap();
    let case = {
        let first = activated(dir.path()).await;
        waiting_case(&hane_coordinator::Services::new(first)).await
    };
    assert_eq!(output(&case, 0)["status"], "handed_over");
    let task = case.steps[1].task.as_ref().unwrap();
    assert_eq!(task.assignment, "leasing-desk");
    assert_eq!(
        task.title,
        "Find lease contract C-9999: it is not in the ledger"
    );

    // As after a restart: another runtime on the same store.
    let second = runtime(dir.path());
    let second_services = hane_coordinator::Services::new(second.clone());
    assert_eq!(
        second_services
            .workflows
            .case(&case.id)
            .await
            .unwrap()
            .status,
        CaseStatus::Waiting
    );
    for (step, wanted) in [
        ("answer", "an agent's run (done)"),
        ("again", "an agent's run (pending)"),
    ] {
        let refused = second_services
            .workflows
            .complete_task(&case.id, step, json!({}), "desk")
            .await
            .unwrap_err();
        assert!(refused.to_string().contains(wanted), "{refused}");
    }
    assert!(matches!(
        second_services
            .workflows
            .complete_task(&case.id, "desk", json!("C-1002"), "desk")
            .await,
        Err(WorkflowError::InvalidResult)
    ));
    assert!(matches!(
        second_services.workflows.complete_task(&case.id, "nobody", json!({}), "desk").await,
        Err(WorkflowError::UnknownStep { known, .. }) if known == ["answer", "desk", "again"]
    ));
    let completed = second_services
        .workflows
        .complete_task(&case.id, "desk", json!({"contract_no": "C-1002"}), "desk")
        .await
        .unwrap();
    assert_eq!(completed.steps[1].status, StepStatus::Done);
    let done = second_services
        .workflows
        .advance_case(&case.id)
        .await
        .unwrap();
    assert_eq!(done.status, CaseStatus::Succeeded, "{done:#?}");
    assert_eq!(output(&done, 2)["lessee"], "Minato Catering");
    assert_eq!(
        done.steps[1].task.as_ref().unwrap().completed_by.as_deref(),
        Some("desk")
    );
    // The first step ran once, in the first runtime.
    assert_eq!(lease_qa_runs(&second).await, 2);
}

/// Stores `case`, stored waiting, as it is, as a driver would have.
async fn store(runtime: &AgentRuntime, case: &WorkflowCase) {
    runtime
        .registry()
        .cases()
        .update(
            CaseStatus::Waiting,
            CaseRow {
                id: case.id.to_string(),
                workflow: case.workflow.clone(),
                status: case.status,
                created_at_ms: case.created_at_ms,
                updated_at_ms: now_ms(),
                body: hane_stored::seal(case),
            },
        )
        .await
        .unwrap();
}

/// `case`, its desk task done, stopped with its last step `running` on
/// run `run` as a process that died would have left it.
fn stopped_at_last_step(case: &WorkflowCase, run: &RunId) -> WorkflowCase {
    let mut case = case.clone();
    case.steps[1].status = StepStatus::Done;
    case.steps[1].output = Some(JsonText::from_value(&json!({"contract_no": "C-1003"})));
    case.steps[2].status = StepStatus::Running;
    case.steps[2].run = Some(run.clone());
    case.status = CaseStatus::Running;
    case
}

#[tokio::test]
async fn a_step_run_recorded_but_never_started_is_started_once() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let case = waiting_case(&services).await;
    let run = RunId::new();
    // Counted before the case is stored stopped: any driver that moves it
    // on from then (the one `start_case` spawned may still be waiting for
    // the case's lock) starts the step's run, and only the first does.
    let before = lease_qa_runs(&runtime).await;
    store(&runtime, &stopped_at_last_step(&case, &run)).await;
    // Two drivers at once, as after a restart with resume_cases: one
    // starts the run, the other finds it done.
    assert_eq!(services.workflows.resume_cases().await.unwrap(), 1);
    let done = services.workflows.advance_case(&case.id).await.unwrap();
    assert_eq!(done.status, CaseStatus::Succeeded, "{done:#?}");
    assert_eq!(done.steps[2].run.as_ref(), Some(&run));
    assert_eq!(output(&done, 2)["lessee"], "Aoba Florists");
    assert_eq!(
        runtime.get(&run).await.unwrap().status,
        RunStatus::Succeeded
    );
    assert_eq!(lease_qa_runs(&runtime).await, before + 1);
}

#[tokio::test]
async fn a_step_run_left_running_by_a_stopped_process_is_not_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let case = waiting_case(&services).await;
    // The run as the stopped process stored it: started, never ended.
    let run = RunId::new();
    let now = now_ms();
    let left = AgentRun {
        id: run.clone(),
        agent: "lease-qa".to_owned(),
        release: 1,
        status: RunStatus::Running,
        shadow: false,
        input: JsonText::from_value(&json!({"contract_no": "C-1003"})),
        result: None,
        error: None,
        tool_calls: Vec::new(),
        tokens_used: 0,
        tasks: Vec::new(),
        session: None,
        created_at_ms: now,
        updated_at_ms: now,
        // As a build before resumable runs stored it.
        resumable: false,
        resumed: 0,
    };
    let row = RunRow {
        id: run.to_string(),
        agent: left.agent.clone(),
        status: RunStatus::Queued,
        created_at_ms: now,
        updated_at_ms: now,
        body: hane_stored::seal(&left),
        holder: Some("stopped-host/1/1".to_owned()),
    };
    let registry = runtime.registry();
    registry.runs().insert(row.clone()).await.unwrap();
    let running = RunRow {
        status: left.status,
        ..row
    };
    registry
        .runs()
        .update(RunStatus::Queued, running)
        .await
        .unwrap();
    let before = lease_qa_runs(&runtime).await;
    store(&runtime, &stopped_at_last_step(&case, &run)).await;
    let failed = services.workflows.advance_case(&case.id).await.unwrap();
    assert_eq!(failed.status, CaseStatus::Failed, "{failed:#?}");
    assert_eq!(failed.steps[2].status, StepStatus::Failed);
    let error = failed.error.as_deref().unwrap();
    assert!(
        error.starts_with(&format!(
            "step `again`: its run {run} was left running by a process that stopped; it is not started again"
        )),
        "{error}"
    );
    assert_eq!(lease_qa_runs(&runtime).await, before);
}

const STARTER: &str = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: lease-starter
spec:
  purpose: Starts a lease inquiry and reads its case
  input: { type: object, required: [contract_no, workflow] }
  output: { type: object, required: [status] }
  driver: scripted
  tools: [workflow.start, workflow.get_case]
  workflows: [lease-inquiry]
  script:
    - id: start
      tool: workflow.start
      input: { workflow: "${input.workflow}", input: { contract_no: "${input.contract_no}" } }
    - when: { empty: steps.start.case }
      tool: submit_result
      input: { status: not_started, start: "${steps.start}" }
    - id: read
      tool: workflow.get_case
      input: { case: "${steps.start.case}" }
    - tool: submit_result
      input: { status: started, case: "${steps.start.case}", workflow: "${steps.read.workflow}" }
"#;

fn starter_release() -> tempfile::TempDir {
    let release = examples_copy();
    std::fs::write(release.path().join("agents/lease-starter.yaml"), STARTER).unwrap();
    release
}

async fn start_through(runtime: &AgentRuntime, workflow: &str, shadow: bool) -> AgentRun {
    runtime
        .run_to_end(StartRun {
            agent: "lease-starter".to_owned(),
            input: json!({"contract_no": "C-1001", "workflow": workflow}),
            shadow,
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn an_agent_starts_only_the_workflows_it_lists_and_none_in_a_shadow_run() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let services = hane_coordinator::Services::new(runtime.clone());
    let release = starter_release();
    runtime.activate(release.path()).await.unwrap();

    let run = start_through(&runtime, "lease-inquiry", false).await;
    let result = run.result.as_ref().unwrap().to_value().unwrap();
    assert_eq!(result["status"], "started", "{run:#?}");
    assert_eq!(result["workflow"], "lease-inquiry");
    let id = result["case"].as_str().unwrap().parse().unwrap();
    let case = services.workflows.advance_case(&id).await.unwrap();
    assert_eq!(case.status, CaseStatus::Succeeded);
    assert_eq!(case.started_by.as_ref(), Some(&run.id));

    let shadow = start_through(&runtime, "lease-inquiry", true).await;
    let result = shadow.result.as_ref().unwrap().to_value().unwrap();
    assert_eq!(result["status"], "not_started", "{shadow:#?}");
    assert_eq!(result["start"]["shadow"], true);

    let denied = start_through(&runtime, "another", false).await;
    let call = denied
        .tool_calls
        .iter()
        .find(|c| c.tool == "workflow.start")
        .unwrap();
    assert!(
        call.detail
            .contains("may start only the workflows in its spec.workflows: lease-inquiry"),
        "{denied:#?}"
    );
    assert_ne!(denied.status, RunStatus::Succeeded, "{denied:#?}");
    assert_eq!(
        services
            .workflows
            .cases(None, None, 0)
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

fn refused_errors(
    release: &Path,
    runtime: &AgentRuntime,
) -> impl Future<Output = Vec<String>> + use<> {
    let runtime = runtime.clone();
    let release = release.to_owned();
    async move {
        let Err(ActivationError::Invalid(errors)) = runtime.activate(&release).await else {
            panic!("activated a release whose workflows cannot run");
        };
        errors.iter().map(ToString::to_string).collect()
    }
}

#[tokio::test]
async fn workflows_that_could_never_run_are_refused_at_activation() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path());
    let release = examples_copy();
    replace_in(
        &release.path().join("workflows/lease-inquiry.yaml"),
        "    - id: again\n      when: { notEmpty: steps.desk.contract_no }\n      agent: lease-qa",
        "    - id: again\n      when: { notEmpty: steps.desk.contract_no }\n      agent: lease-oracle",
    );
    let shown = refused_errors(release.path(), &runtime).await;
    assert!(
        shown.len() == 1
            && shown[0].contains("lease-inquiry.yaml:")
            && shown[0]
                .ends_with("spec.steps[2].agent: no Agent named `lease-oracle` in this bundle"),
        "{shown:#?}"
    );
    let release = starter_release();
    replace_in(
        &release.path().join("agents/lease-starter.yaml"),
        "workflows: [lease-inquiry]",
        "workflows: [lease-inquiry, fleet-audit]",
    );
    let shown = refused_errors(release.path(), &runtime).await;
    assert!(
        shown.len() == 1
            && shown[0]
                .ends_with("spec.workflows[1]: no Workflow named `fleet-audit` in this bundle"),
        "{shown:#?}"
    );
    assert!(
        runtime
            .registry()
            .releases()
            .list()
            .await
            .unwrap()
            .is_empty()
    );
}
