//! Schedules end to end on a real store and runtime, the clock given to
//! each pass: a tick starts one run even with two schedulers (two
//! processes' worth) on one store; a schedule first seen runs nothing
//! from before; ticks missed while nothing ran are skipped or run once as
//! the schedule says; a run the budget refuses is recorded and not
//! retried; a workflow target starts a case per tick.

use std::path::{Path, PathBuf};

use hane_coordinator::AgentRuntime;
use hane_coordinator::schedule::Scheduler;
use hane_core::{AgentRun, RunStatus, schedule::TickOutcome};
use hane_store::{RunQuery, TickEnd, TickRow};
use serde_json::json;

use crate::agents::{release_with, runtime};
use crate::harness;

const SECOND: u64 = 1000;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;
/// 2025-06-01T00:00:00Z: a tick of every schedule below.
const T0: u64 = 1_748_736_000_000;

const AGENT: &str = "vehicle-check-scripted";

fn schedule(name: &str, cron: &str, extra: &str) -> (String, String) {
    (
        format!("{name}.yaml"),
        format!(
            "apiVersion: agents/v1alpha1
kind: Schedule
metadata:
  name: {name}
spec:
  cron: \"{cron}\"
  agent: {AGENT}
  input: {{ vehicle: \"架空 300 あ 10-02\" }}
{extra}"
        ),
    )
}

/// A release of the scripted vehicle check and `schedules`, plus `more`
/// files.
fn release(dir: &Path, schedules: &[(String, String)], more: &[(&str, &str)]) -> PathBuf {
    let agent = std::fs::read_to_string(
        harness::examples()
            .join("agents")
            .join(format!("{AGENT}.yaml")),
    )
    .unwrap();
    let mut files: Vec<(&str, &str)> = vec![("agent.yaml", agent.as_str())];
    files.extend(schedules.iter().map(|(f, t)| (f.as_str(), t.as_str())));
    files.extend_from_slice(more);
    release_with(dir, &files)
}

async fn activated(
    dir: &Path,
    schedules: &[(String, String)],
    more: &[(&str, &str)],
) -> AgentRuntime {
    let runtime = runtime(dir);
    runtime
        .activate(&release(dir, schedules, more))
        .await
        .unwrap();
    runtime
}

/// The ticks of `name`, oldest first, as (tick, outcome).
async fn ticks(runtime: &AgentRuntime, name: &str) -> Vec<TickRow> {
    let mut rows = runtime
        .registry()
        .ticks()
        .list(Some(name), 0)
        .await
        .unwrap();
    rows.reverse();
    rows
}

/// Every run of the agent, each waited for to its end.
async fn runs(runtime: &AgentRuntime) -> Vec<AgentRun> {
    let listed = runtime
        .list(RunQuery {
            agent: Some(AGENT.to_owned()),
            ..RunQuery::default()
        })
        .await
        .unwrap()
        .items;
    let mut ended = Vec::new();
    for run in listed {
        ended.push(match runtime.wait(&run.id).await {
            Ok(run) => run,
            // Started by the other runtime of a test, which drives it.
            Err(_) => run,
        });
    }
    ended
}

/// Presets what an earlier process did: `tick` of `name` started a run.
async fn handled(runtime: &AgentRuntime, name: &str, tick: u64) {
    let registry = runtime.registry();
    assert!(registry.ticks().claim(name, tick, "earlier").await.unwrap());
    registry
        .ticks()
        .finish(
            name,
            tick,
            TickEnd {
                run: Some("run_earlier".to_owned()),
                ..TickEnd::new(TickOutcome::Started)
            },
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn two_schedulers_on_one_store_start_each_tick_once() {
    let dir = tempfile::tempdir().unwrap();
    let first = activated(
        dir.path(),
        &[schedule("every-minute", "* * * * *", "")],
        &[],
    )
    .await;
    // A second runtime on the same file, as a second `hane serve` has.
    let second = runtime(dir.path());
    let (first_services, second_services) = (
        hane_coordinator::Services::new(first.clone()),
        hane_coordinator::Services::new(second.clone()),
    );
    let (mut a, mut b) = (
        Scheduler::new(&first_services),
        Scheduler::new(&second_services),
    );
    assert_ne!(a.id(), b.id());
    // Both see the schedule first just before 00:01.
    let seen = T0 + 59 * SECOND;
    let (next_a, next_b) = tokio::join!(a.pass(seen), b.pass(seen));
    assert_eq!((next_a, next_b), (Some(T0 + MINUTE), Some(T0 + MINUTE)));
    // Five ticks, each noticed by both at about the same time.
    for minute in 1..=5 {
        let now = T0 + minute * MINUTE + 300;
        let (next_a, next_b) = tokio::join!(a.pass(now), b.pass(now));
        assert_eq!(next_a, Some(T0 + (minute + 1) * MINUTE));
        assert_eq!(next_b, next_a);
    }
    let rows = ticks(&first, "every-minute").await;
    let times: Vec<u64> = rows.iter().map(|r| r.tick_ms).collect();
    assert_eq!(times, (1..=5).map(|m| T0 + m * MINUTE).collect::<Vec<_>>());
    let mut started = Vec::new();
    for row in &rows {
        assert_eq!(row.outcome, TickOutcome::Started, "{row:?}");
        assert!(
            [a.id(), b.id()].contains(&row.claimed_by.as_str()),
            "{row:?}"
        );
        started.push(row.run.clone().expect("a started tick names its run"));
    }
    let runs = runs(&first).await;
    assert_eq!(runs.len(), 5, "{runs:#?}");
    let mut run_ids: Vec<String> = runs.iter().map(|r| r.id.to_string()).collect();
    run_ids.sort();
    started.sort();
    assert_eq!(run_ids, started);
    for run in &runs {
        assert_eq!(
            run.input.to_value().unwrap(),
            json!({"vehicle": "架空 300 あ 10-02"})
        );
        assert!(!run.shadow);
    }
}

#[tokio::test]
async fn a_schedule_first_seen_runs_nothing_from_before() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(
        dir.path(),
        &[schedule("hourly", "0 * * * *", "  missed: runOnce\n")],
        &[],
    )
    .await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let mut scheduler = Scheduler::new(&services);
    // Seen at 00:30, long after ticks that nobody handled: no backfill.
    assert_eq!(scheduler.pass(T0 + 30 * MINUTE).await, Some(T0 + HOUR));
    assert_eq!(scheduler.pass(T0 + 59 * MINUTE).await, Some(T0 + HOUR));
    assert!(ticks(&runtime, "hourly").await.is_empty());
    assert!(runs(&runtime).await.is_empty());
    // 01:00 is after it was seen.
    scheduler.pass(T0 + HOUR + 2 * SECOND).await;
    let rows = ticks(&runtime, "hourly").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].tick_ms, rows[0].outcome),
        (T0 + HOUR, TickOutcome::Started)
    );
    let runs = runs(&runtime).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Succeeded, "{:?}", runs[0]);
}

#[tokio::test]
async fn missed_ticks_are_skipped_or_run_once_as_the_schedule_says() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(
        dir.path(),
        &[
            schedule("hourly-skip", "0 * * * *", "  missed: skip\n"),
            schedule(
                "hourly-once",
                "0 * * * *",
                "  missed: runOnce\n  shadow: true\n",
            ),
        ],
        &[],
    )
    .await;
    // Both last ran at 00:00; no process ran them until 03:10.
    handled(&runtime, "hourly-skip", T0).await;
    handled(&runtime, "hourly-once", T0).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let mut scheduler = Scheduler::new(&services);
    let back = T0 + 3 * HOUR + 10 * MINUTE;
    assert_eq!(scheduler.pass(back).await, Some(T0 + 4 * HOUR));

    // skip: 01:00, 02:00 and 03:00 passed and none runs; the newest is
    // recorded saying so.
    let skip = ticks(&runtime, "hourly-skip").await;
    assert_eq!(skip.len(), 2, "{skip:?}");
    assert_eq!(
        (skip[1].tick_ms, skip[1].outcome, skip[1].run.as_deref()),
        (T0 + 3 * HOUR, TickOutcome::Skipped, None)
    );
    assert_eq!(
        skip[1].error.as_deref(),
        Some(
            "3 ticks from 2025-06-01 01:00:00 UTC to 2025-06-01 03:00:00 UTC passed while no process ran the schedule; missed: skip"
        )
    );

    // runOnce: one run for 03:00, the two before passed over.
    let once = ticks(&runtime, "hourly-once").await;
    let outcomes: Vec<(u64, TickOutcome)> = once.iter().map(|r| (r.tick_ms, r.outcome)).collect();
    assert_eq!(
        outcomes,
        [
            (T0, TickOutcome::Started),
            (T0 + 2 * HOUR, TickOutcome::Skipped),
            (T0 + 3 * HOUR, TickOutcome::Started),
        ]
    );
    assert_eq!(
        once[1].error.as_deref(),
        Some(
            "2 ticks from 2025-06-01 01:00:00 UTC to 2025-06-01 02:00:00 UTC passed while no process ran the schedule; missed: runOnce"
        )
    );
    let runs = runs(&runtime).await;
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(once[2].run.as_deref(), Some(runs[0].id.as_str()));
    assert!(runs[0].shadow);

    // Nothing more at the same time, from this process or another.
    scheduler.pass(back + SECOND).await;
    Scheduler::new(&hane_coordinator::Services::new(runtime.clone()))
        .pass(back + SECOND)
        .await;
    assert_eq!(ticks(&runtime, "hourly-skip").await.len(), 2);
    assert_eq!(ticks(&runtime, "hourly-once").await.len(), 3);
    assert_eq!(runs_count(&runtime).await, 1);

    // Back within the grace of a tick, skip runs it too.
    scheduler.pass(T0 + 4 * HOUR + 30 * SECOND).await;
    let skip = ticks(&runtime, "hourly-skip").await;
    assert_eq!(
        (skip[2].tick_ms, skip[2].outcome),
        (T0 + 4 * HOUR, TickOutcome::Started)
    );
    assert_eq!(runs_count(&runtime).await, 3);
}

async fn runs_count(runtime: &AgentRuntime) -> usize {
    runs(runtime).await.len()
}

#[tokio::test]
async fn a_run_the_budget_refuses_is_recorded_and_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let budget = "apiVersion: platform/v1alpha1
kind: Budget
metadata:
  name: one-run
spec:
  agentRunsPerDay: 1
";
    let runtime = activated(
        dir.path(),
        &[schedule("hourly", "0 * * * *", "")],
        &[("budget.yaml", budget)],
    )
    .await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let mut scheduler = Scheduler::new(&services);
    scheduler.pass(T0 + 30 * MINUTE).await;
    scheduler.pass(T0 + HOUR).await;
    scheduler.pass(T0 + 2 * HOUR).await;
    let rows = ticks(&runtime, "hourly").await;
    let outcomes: Vec<TickOutcome> = rows.iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [TickOutcome::Started, TickOutcome::Refused]);
    let error = rows[1].error.as_deref().unwrap();
    assert!(error.contains("agentRunsPerDay"), "{error}");
    // Refused is final: the next pass does not try 02:00 again.
    scheduler.pass(T0 + 2 * HOUR + 10 * SECOND).await;
    assert_eq!(ticks(&runtime, "hourly").await.len(), 2);
    assert_eq!(runs_count(&runtime).await, 1);
}

const RENEWALS: &str = "apiVersion: agents/v1alpha1
kind: Schedule
metadata:
  name: renewals
spec:
  cron: \"0 * * * *\"
  workflow: lease-inquiry
  input: { contract_no: C-1001 }
";

/// The examples' lease-qa and its workflow, as files of a release.
fn lease_files() -> (String, String) {
    let read = |path: &str| std::fs::read_to_string(harness::examples().join(path)).unwrap();
    (
        read("agents/lease-qa.yaml"),
        read("workflows/lease-inquiry.yaml"),
    )
}

#[tokio::test]
async fn a_workflow_schedule_starts_a_case_per_tick() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, workflow) = lease_files();
    let runtime = activated(
        dir.path(),
        &[],
        &[
            ("lease-qa.yaml", &agent),
            ("lease-inquiry.yaml", &workflow),
            ("renewals.yaml", RENEWALS),
        ],
    )
    .await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let mut scheduler = Scheduler::new(&services);
    scheduler.pass(T0 + 30 * MINUTE).await;
    scheduler.pass(T0 + HOUR).await;
    scheduler.pass(T0 + 2 * HOUR).await;
    let rows = ticks(&runtime, "renewals").await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        assert_eq!(row.outcome, TickOutcome::Started, "{row:?}");
        assert_eq!(row.run, None);
        let id = row.workflow_case.as_deref().unwrap().parse().unwrap();
        let case = services.workflows.advance_case(&id).await.unwrap();
        assert_eq!(
            case.status,
            hane_core::workflow::CaseStatus::Succeeded,
            "{case:#?}"
        );
        assert_eq!(case.workflow, "lease-inquiry");
    }
    assert_eq!(
        services
            .workflows
            .cases(None, None, 0)
            .await
            .unwrap()
            .items
            .len(),
        2
    );
}

#[tokio::test]
async fn a_workflow_schedule_that_could_never_start_is_an_activation_error() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, workflow) = lease_files();
    for (schedule, wanted) in [
        (
            RENEWALS.replace("C-1001", "X"),
            "renewals.yaml: spec.input: not an input workflow `lease-inquiry` takes",
        ),
        (
            RENEWALS.replace(
                "workflow: lease-inquiry",
                "workflow: lease-inquiry\n  shadow: true",
            ),
            "renewals.yaml: spec.shadow: a workflow's cases have no shadow mode",
        ),
        (
            RENEWALS.replace("workflow: lease-inquiry", "workflow: lease-audit"),
            "spec.workflow: no Workflow named `lease-audit` in this bundle",
        ),
    ] {
        let sub = dir.path().join(wanted.len().to_string());
        let release = release(
            &sub,
            &[],
            &[
                ("lease-qa.yaml", &agent),
                ("lease-inquiry.yaml", &workflow),
                ("renewals.yaml", &schedule),
            ],
        );
        std::fs::create_dir_all(&sub).unwrap();
        let error = runtime(&sub).activate(&release).await.unwrap_err();
        let message = error.to_string();
        assert!(message.contains(wanted), "{message}");
    }
}

#[tokio::test]
async fn a_schedule_whose_input_its_agent_refuses_is_an_activation_error() {
    let dir = tempfile::tempdir().unwrap();
    let (file, text) = schedule("hourly", "0 * * * *", "");
    let text = text.replace("vehicle: \"架空 300 あ 10-02\"", "plate: KT-12");
    let release = release(dir.path(), &[(file, text)], &[]);
    let error = runtime(dir.path()).activate(&release).await.unwrap_err();
    let message = error.to_string();
    assert!(
        message
            .contains("hourly.yaml: spec.input: not an input agent `vehicle-check-scripted` takes"),
        "{message}"
    );
}
