//! Evaluations end to end: the examples' suite passing as shadow runs,
//! shadow cases sending and handing over nothing (a real SMTP server stays
//! empty), a broken candidate release refused by gating while a good one
//! is activated, the comparison naming the regressed case, and suites that
//! could never run refused at activation.

use std::path::Path;

use hane_coordinator::evaluation::EvalError;
use hane_coordinator::{ActivationError, AgentRuntime};
use hane_core::{
    ActionState, Evaluation,
    evaluation::{CaseChange, CaseOutcome},
};
use hane_delivery::{DeliveryConfig, SmtpConfig, SmtpTls};
use hane_test_support::{SmtpServer, examples_copy, replace_in};
use serde_json::json;

use crate::agents::activated;

const BROKEN_LESSEE: (&str, &str) = (
    "lessee: \"${steps.contract.records.0.lessee}\"",
    "lessee: \"${input.contract_no}\"",
);

/// A copy of the examples whose lease-qa answers the contract number as
/// the lessee.
fn broken_examples() -> tempfile::TempDir {
    let dir = examples_copy();
    replace_in(
        &dir.path().join("agents/lease-qa.yaml"),
        BROKEN_LESSEE.0,
        BROKEN_LESSEE.1,
    );
    dir
}

#[tokio::test]
async fn the_example_suite_passes_as_shadow_runs_and_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let mut seen = Vec::new();
    let evaluation = services
        .evaluations
        .evaluate("lease-qa-eval", |case| seen.push(case.name.clone()))
        .await
        .unwrap();
    assert_eq!(evaluation.passed, 2, "{evaluation:#?}");
    assert!(evaluation.meets_pass_rate());
    assert_eq!((evaluation.release, evaluation.candidate), (1, false));
    seen.sort();
    assert_eq!(
        seen,
        ["Contract in the ledger", "Contract not in the ledger"]
    );
    for case in &evaluation.cases {
        assert_eq!(case.outcome, CaseOutcome::Passed, "{case:#?}");
        assert!(case.differences.is_empty() && case.error.is_none());
        let run = runtime.get(case.run.as_ref().unwrap()).await.unwrap();
        assert!(run.shadow, "{run:#?}");
        // The handover of the missing contract is only recorded.
        assert!(runtime.tasks(&run.id).await.unwrap().items.is_empty());
    }
    let stored = services
        .evaluations
        .get(evaluation.id.as_str())
        .await
        .unwrap();
    assert_eq!(stored, evaluation);
    let listed = services
        .evaluations
        .list(Some("lease-qa-eval".to_owned()), 0)
        .await
        .unwrap()
        .items;
    assert_eq!(listed, [evaluation]);
    assert!(matches!(
        services.evaluations.evaluate("nobody-eval", |_| {}).await,
        Err(EvalError::UnknownSuite { known, .. }) if known == ["lease-qa-eval"]
    ));
}

const REMINDER_EVAL: &str = r#"
apiVersion: agents/v1alpha1
kind: EvalSuite
metadata:
  name: reminder-eval
spec:
  agent: inspection-reminder
  cases:
    - name: A depot the policy approves
      input: { vehicle: "架空 300 あ 10-02", to: shinagawa@fleet.example }
      expect: { status: shadowed }
    - name: An address a person approves
      input: { vehicle: "架空 300 あ 10-02", to: depot@elsewhere.example }
      expect: { status: shadowed }
"#;

#[tokio::test]
async fn shadow_cases_send_nothing_and_hand_over_nothing() {
    let smtp = SmtpServer::start(&[]);
    let mut config = SmtpConfig::new("127.0.0.1", SmtpTls::None, "hane@fleet.example");
    config.port = smtp.port;
    let mut delivery = DeliveryConfig::new();
    delivery.smtp(config);
    let mut runtime_config = crate::agents::config();
    runtime_config.delivery(delivery);
    let dir = tempfile::tempdir().unwrap();
    let runtime = AgentRuntime::open(&dir.path().join("hane.db"), &runtime_config).unwrap();
    let services = hane_coordinator::Services::new(runtime.clone());
    let release = examples_copy();
    std::fs::write(
        release.path().join("evals/reminder-eval.yaml"),
        REMINDER_EVAL,
    )
    .unwrap();
    runtime.activate(release.path()).await.unwrap();
    let evaluation = services
        .evaluations
        .evaluate("reminder-eval", |_| {})
        .await
        .unwrap();
    assert_eq!(evaluation.passed, 2, "{evaluation:#?}");
    let handover = services
        .evaluations
        .evaluate("lease-qa-eval", |_| {})
        .await
        .unwrap();
    assert_eq!(handover.passed, 2, "{handover:#?}");
    // Nothing reached the SMTP server; every action is only a record; no
    // person has a task.
    assert!(smtp.messages().is_empty(), "{}", smtp.log());
    let actions = runtime.actions().list(None, None).await.unwrap().items;
    assert_eq!(actions.len(), 2);
    assert!(actions.iter().all(|a| a.state == ActionState::Shadowed));
    for case in evaluation.cases.iter().chain(&handover.cases) {
        let run = case.run.as_ref().unwrap();
        assert!(runtime.tasks(run).await.unwrap().items.is_empty());
    }
}

fn case_change(comparison: &hane_core::evaluation::EvaluationComparison, name: &str) -> CaseChange {
    comparison
        .cases
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}: {comparison:#?}"))
        .change
}

#[tokio::test]
async fn gating_refuses_a_broken_candidate_and_activates_a_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let baseline = services
        .evaluations
        .evaluate("lease-qa-eval", |_| {})
        .await
        .unwrap();

    let broken = broken_examples();
    let mut progress = Vec::new();
    let gated = services
        .evaluations
        .activate_evaluated(broken.path(), |suite, total, case| {
            progress.push((suite.to_owned(), total, case.name.clone()));
        })
        .await
        .unwrap();
    assert!(!gated.activated);
    assert_eq!(progress.len(), 2);
    assert!(
        progress
            .iter()
            .all(|(s, total, _)| s == "lease-qa-eval" && *total == 2)
    );
    // Stored as release 2, never active; release 1 still runs.
    assert_eq!(gated.release.number, 2);
    assert_eq!(
        runtime.registry().releases().active_number().await.unwrap(),
        Some(1)
    );
    assert_eq!(runtime.release().await.unwrap().info.number, 1);
    let [candidate]: [Evaluation; 1] = gated.evaluations.try_into().unwrap();
    assert!(candidate.candidate && !candidate.meets_pass_rate());
    assert_eq!(candidate.release, 2);
    let failed: Vec<&str> = candidate.failed().map(|c| c.name.as_str()).collect();
    assert_eq!(failed, ["Contract in the ledger"]);
    let difference = &candidate.failed().next().unwrap().differences[0];
    assert_eq!(difference.path, "/lessee");
    assert_eq!(
        difference.found.as_ref().unwrap().to_value().unwrap(),
        json!("C-1001")
    );
    // The active release still answers the right lessee.
    let again = services
        .evaluations
        .evaluate("lease-qa-eval", |_| {})
        .await
        .unwrap();
    assert_eq!((again.passed, again.release), (2, 1));

    let compared = services
        .evaluations
        .compare(baseline.id.as_str(), candidate.id.as_str())
        .await
        .unwrap();
    assert_eq!(
        case_change(&compared, "Contract in the ledger"),
        CaseChange::Regressed
    );
    assert_eq!(
        case_change(&compared, "Contract not in the ledger"),
        CaseChange::Unchanged
    );
    let back = services
        .evaluations
        .compare(candidate.id.as_str(), again.id.as_str())
        .await
        .unwrap();
    assert_eq!(
        case_change(&back, "Contract in the ledger"),
        CaseChange::Fixed
    );

    // A candidate that still answers right becomes active.
    let good = examples_copy();
    replace_in(
        &good.path().join("agents/lease-qa.yaml"),
        "Summarize a vehicle lease contract",
        "Summarize a lease contract of a vehicle",
    );
    let gated = services
        .evaluations
        .activate_evaluated(good.path(), |_, _, _| {})
        .await
        .unwrap();
    assert!(gated.activated, "{gated:#?}");
    assert_eq!(gated.release.number, 3);
    assert_eq!(runtime.release().await.unwrap().info.number, 3);
    assert!(gated.evaluations[0].candidate && gated.evaluations[0].meets_pass_rate());
}

#[tokio::test]
async fn a_candidate_with_another_ledger_is_not_evaluated_before_it_is_active() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let changed = examples_copy();
    replace_in(
        &changed.path().join("ledger/records/vehicles.csv"),
        "Toyota Hiace Van",
        "Toyota HiAce Van",
    );
    let refused = services
        .evaluations
        .activate_evaluated(changed.path(), |_, _, _| {})
        .await
        .unwrap_err();
    assert!(
        matches!(refused, EvalError::LedgerChanged { active: 1, .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains("without --eval"), "{refused}");
    // Nothing was stored.
    assert_eq!(runtime.registry().releases().list().await.unwrap().len(), 1);
}

fn write_suite(release: &Path, name: &str, agent: &str, input: &str) {
    std::fs::write(
        release.join(format!("evals/{name}.yaml")),
        format!(
            "apiVersion: agents/v1alpha1\nkind: EvalSuite\nmetadata:\n  name: {name}\nspec:\n  agent: {agent}\n  cases:\n    - name: one\n      input: {input}\n      expect: {{ status: answered }}\n"
        ),
    )
    .unwrap();
}

#[tokio::test]
async fn a_suite_that_could_never_run_is_refused_at_activation() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = crate::agents::runtime(dir.path());
    let refused = |release: &Path| {
        let runtime = runtime.clone();
        let release = release.to_owned();
        async move {
            let Err(ActivationError::Invalid(errors)) = runtime.activate(&release).await else {
                panic!("activated a release whose suite cannot run");
            };
            errors.iter().map(ToString::to_string).collect::<Vec<_>>()
        }
    };
    let release = examples_copy();
    write_suite(release.path(), "nobody-eval", "nobody", "{ x: 1 }");
    let shown = refused(release.path()).await;
    assert!(
        shown.len() == 1
            && shown[0].contains("nobody-eval.yaml:6: spec.agent: no Agent named `nobody`"),
        "{shown:#?}"
    );
    let release = examples_copy();
    write_suite(
        release.path(),
        "bad-input-eval",
        "lease-qa",
        "{ contract_no: X-1 }",
    );
    let shown = refused(release.path()).await;
    assert!(
        shown.len() == 1
            && shown[0].starts_with(
                "evals/bad-input-eval.yaml: spec.cases[0].input: not an input agent `lease-qa` takes"
            )
            && shown[0].contains("X-1"),
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
