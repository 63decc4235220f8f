//! Agents end to end: releases activated from a directory, scripted runs
//! through the Tool Gateway, cancel, limits and run tokens.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hane_coordinator::{
    AgentRuntime, GatewayError, RunError, RuntimeConfig, StartRun,
    gateway::{Stop, TokenError},
};
use hane_core::RunId;
use hane_core::RunStatus;
use hane_manager::Components;
use hane_sandbox::SandboxConfig;
use hane_store::{RunQuery, SqliteConfig, SqliteStore};
use serde_json::{Value, json};

use crate::harness;

/// The tests' runtime settings: its own sandbox (the ledger is per
/// sandbox) sharing the tests' component cache.
pub fn config() -> RuntimeConfig {
    let mut sandbox = SandboxConfig::new();
    sandbox
        .cache_dir(Some(harness::cache_dir()))
        .max_instances(16);
    let mut config = RuntimeConfig::new();
    config
        .sandbox(sandbox)
        .components(Components::with_builtins(hane_builtins::all()));
    config
}

/// A runtime on a fresh store in `dir`, with [`config`].
pub fn runtime(dir: &Path) -> AgentRuntime {
    AgentRuntime::open(&dir.join("hane.db"), &config()).unwrap()
}

pub(crate) async fn activated(dir: &Path) -> AgentRuntime {
    let runtime = runtime(dir);
    runtime.activate(&harness::examples()).await.unwrap();
    runtime
}

fn start(agent: &str, input: Value) -> StartRun {
    StartRun {
        agent: agent.to_owned(),
        input,
        shadow: false,
    }
}

fn result(run: &hane_core::AgentRun) -> Value {
    run.result
        .as_ref()
        .unwrap_or_else(|| panic!("no result: {run:#?}"))
        .to_value()
        .unwrap()
}

/// A release directory: the examples' tools and ledger plus `agents`.
pub(crate) fn release_with(dir: &Path, agents: &[(&str, &str)]) -> PathBuf {
    let release = dir.join("release");
    for sub in ["tools", "ledger/records", "ledger/documents/leases"] {
        std::fs::create_dir_all(release.join(sub)).unwrap();
        for entry in std::fs::read_dir(harness::examples().join(sub)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), release.join(sub).join(entry.file_name())).unwrap();
            }
        }
    }
    // The file-based tools point at ../documents.
    std::fs::create_dir_all(release.join("documents")).unwrap();
    for (name, text) in agents {
        std::fs::write(release.join(name), text).unwrap();
    }
    release
}

#[tokio::test]
async fn the_seed_agent_activates_and_its_driver_is_refused_at_run_start() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let release = runtime.release().await.unwrap();
    let names: Vec<&str> = release.agents.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "driver-text",
            "inspection-reminder",
            "lease-qa",
            "service-booker",
            "sms-review",
            "vehicle-check",
            "vehicle-check-llm",
            "vehicle-check-scripted"
        ]
    );
    let err = runtime
        .start(start(
            "vehicle-check",
            json!({"vehicle": "架空 300 あ 10-02"}),
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::DriverUnavailable { ref driver, .. } if driver == "opencode"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("which this host cannot run"),
        "{err}"
    );
}

#[tokio::test]
async fn vehicle_check_scripted_finds_a_vehicle() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let run = runtime
        .run_to_end(start(
            "vehicle-check-scripted",
            json!({"vehicle": "架空 300 あ 10-02"}),
        ))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    let result = result(&run);
    assert_eq!(result["status"], "found");
    assert_eq!(result["model"], "Toyota Hiace Van");
    assert_eq!(result["inspectionExpiry"], "2027-03-31");
    assert_eq!(result["mileageKm"], "48210");
    let tools: Vec<&str> = run.tool_calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["data.find_record", "submit_result"]);
    assert!(run.tool_calls[0].operation.is_some());
    assert!(run.tasks.is_empty());
    // Stored: read back after the run left memory.
    let stored = runtime.get(&run.id).await.unwrap();
    assert_eq!(stored, run);
    // Its session holds the input, the calls and the states.
    let session = run.session.clone().unwrap();
    let events = runtime_store_events(&runtime, &session).await;
    assert!(events.contains(&"inputAccepted".to_owned()), "{events:?}");
    assert_eq!(
        events.iter().filter(|e| *e == "toolCallRecorded").count(),
        2
    );
    assert_eq!(events.last().map(String::as_str), Some("runStateChanged"));
    // Written behind the calls, and all there once the run has ended.
    let store = SqliteStore::open(runtime.registry().path(), &SqliteConfig::new()).unwrap();
    use hane_store::SessionStore as _;
    let op = run.tool_calls[0]
        .operation
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    let record = store.operation(&op).await.unwrap();
    assert_eq!(record.state, hane_core::OperationState::Succeeded);
    assert_eq!(record.attempts, 1);
}

async fn runtime_store_events(
    runtime: &AgentRuntime,
    session: &hane_core::SessionId,
) -> Vec<String> {
    let db = runtime.registry().path().to_owned();
    let store = SqliteStore::open(&db, &SqliteConfig::new()).unwrap();
    use hane_store::SessionStore as _;
    store
        .read(session, 0..u64::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.event.name().to_owned())
        .collect()
}

#[tokio::test]
async fn vehicle_check_scripted_hands_over_a_missing_vehicle() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let run = runtime
        .run_to_end(start(
            "vehicle-check-scripted",
            json!({"vehicle": "架空 999 ん 00-00"}),
        ))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    assert_eq!(result(&run)["status"], "handed_over");
    let tools: Vec<&str> = run.tool_calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(
        tools,
        ["data.find_record", "request_human_help", "submit_result"]
    );
    let tasks = runtime.tasks(&run.id).await.unwrap().items;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].kind, "handover");
    assert_eq!(tasks[0].assignment, "fleet-desk");
    assert!(
        tasks[0].title.contains("架空 999 ん 00-00"),
        "{}",
        tasks[0].title
    );
    assert_eq!(run.tasks, vec![tasks[0].id.clone()]);

    // In shadow, the handover is only recorded.
    let shadow = runtime
        .run_to_end(StartRun {
            shadow: true,
            ..start(
                "vehicle-check-scripted",
                json!({"vehicle": "架空 999 ん 00-00"}),
            )
        })
        .await
        .unwrap();
    assert_eq!(shadow.status, RunStatus::Succeeded);
    assert!(shadow.shadow);
    assert!(runtime.tasks(&shadow.id).await.unwrap().items.is_empty());
    assert!(
        shadow.tool_calls[1].detail.contains("shadow"),
        "{:?}",
        shadow.tool_calls[1]
    );
}

#[tokio::test]
async fn lease_qa_reads_a_summary_or_hands_over() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let run = runtime
        .run_to_end(start("lease-qa", json!({"contract_no": "C-1001"})))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    let answer = result(&run);
    assert_eq!(answer["status"], "answered");
    assert_eq!(answer["lessee"], "Kita Logistics");
    assert!(
        answer["summary"].as_str().unwrap().contains("36 months"),
        "{answer}"
    );
    assert_eq!(run.tool_calls.len(), 3);

    let missing = runtime
        .run_to_end(start("lease-qa", json!({"contract_no": "C-9999"})))
        .await
        .unwrap();
    assert_eq!(result(&missing)["status"], "handed_over");
    assert_eq!(
        runtime.tasks(&missing.id).await.unwrap().items[0].assignment,
        "leasing-desk"
    );
}

#[tokio::test]
async fn bad_input_and_unknown_agents_are_refused_before_a_run_exists() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let err = runtime
        .start(start("vehicle-check-scripted", json!({"vehicle": 7})))
        .await
        .unwrap_err();
    let RunError::InvalidInput { path, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(path, "/vehicle");
    let err = runtime.start(start("nobody", json!({}))).await.unwrap_err();
    assert!(err.to_string().contains("vehicle-check-scripted"), "{err}");
    assert!(
        runtime
            .list(RunQuery::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

const TWO_CALLS_ALLOWED: &str = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: greedy
spec:
  purpose: Looks a vehicle up three times, which is one more than it may
  input: { type: object }
  output: { type: object, required: [status], properties: { status: { type: string } } }
  driver: scripted
  tools: [data.find_record]
  limits: { maxToolCalls: 2 }
  script:
    - tool: data.find_record
      input: { collection: vehicles, match: { id: V-001 } }
    - tool: data.find_record
      input: { collection: vehicles, match: { id: V-002 } }
    - tool: data.find_record
      input: { collection: vehicles, match: { id: V-003 } }
    - tool: submit_result
      input: { status: done }
"#;

#[tokio::test]
async fn a_run_over_max_tool_calls_ends_limit_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    let release = release_with(dir.path(), &[("greedy.yaml", TWO_CALLS_ALLOWED)]);
    let runtime = runtime(dir.path());
    runtime.activate(&release).await.unwrap();
    let run = runtime
        .run_to_end(start("greedy", json!({})))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::LimitExceeded, "{run:#?}");
    assert!(
        run.error.as_deref().unwrap().contains("maxToolCalls"),
        "{run:?}"
    );
    let statuses: Vec<&str> = run.tool_calls.iter().map(|c| c.status.as_str()).collect();
    assert_eq!(statuses, ["succeeded", "succeeded", "rejected"]);
    assert!(run.result.is_none());
}

fn spin_release(dir: &Path) -> PathBuf {
    let spin = hane_builtins::test_programs::GUEST_SPIN;
    let op = format!(
        "apiVersion: operations/v1alpha1\nkind: Operation\nmetadata:\n  name: test.spin\nspec:\n  component: {spin}\n  limits:\n    timeout: 60s\n    fuel: 100000000000000\n"
    );
    let agent = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: slow
spec:
  purpose: Spins for a long time, then looks a vehicle up
  input: { type: object }
  output: { type: object, required: [status], properties: { status: { type: string } } }
  driver: scripted
  tools: [test.spin, data.find_record]
  script:
    - tool: test.spin
      input: { iterations: 100000000000 }
    - tool: data.find_record
      input: { collection: vehicles, match: { id: V-001 } }
    - tool: submit_result
      input: { status: done }
"#;
    release_with(dir, &[("spin.yaml", &op), ("slow.yaml", agent)])
}

#[tokio::test]
async fn a_cancelled_run_stops_its_operation_and_makes_no_further_call() {
    let dir = tempfile::tempdir().unwrap();
    let release = spin_release(dir.path());
    let runtime = runtime(dir.path());
    runtime.activate(&release).await.unwrap();
    let run = runtime.start(start("slow", json!({}))).await.unwrap();
    // Wait until the spin operation has started.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = runtime.get(&run.id).await.unwrap();
        if let Some(session) = &now.session
            && runtime_store_events(&runtime, session)
                .await
                .iter()
                .any(|e| e == "operationStarted")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the spin call never started: {now:#?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The answer is the run as it ended, not as it was when asked.
    let answered = runtime.cancel(&run.id).await.unwrap();
    assert_eq!(answered.status, RunStatus::Cancelled, "{answered:#?}");
    let ended = tokio::time::timeout(Duration::from_secs(20), runtime.wait(&run.id))
        .await
        .expect("a cancelled run ends promptly")
        .unwrap();
    assert_eq!(ended.status, RunStatus::Cancelled, "{ended:#?}");
    let tools: Vec<&str> = ended.tool_calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["test.spin"], "{ended:#?}");
    assert!(
        ended.tool_calls[0].detail.contains("cancelled"),
        "{:?}",
        ended.tool_calls[0]
    );
    // Cancelling again is refused: it has ended.
    assert!(matches!(
        runtime.cancel(&run.id).await,
        Err(RunError::Finished {
            status: RunStatus::Cancelled,
            ..
        })
    ));
}

#[tokio::test]
async fn a_run_of_another_process_is_reported_not_driven_here() {
    let dir = tempfile::tempdir().unwrap();
    let release = spin_release(dir.path());
    let driving = runtime(dir.path());
    driving.activate(&release).await.unwrap();
    let run = driving.start(start("slow", json!({}))).await.unwrap();
    // A second runtime on the same store, as `hane serve` beside a
    // `hane run`, sees the run but does not drive it.
    let other = runtime(dir.path());
    let seen = other.get(&run.id).await.unwrap();
    assert!(!seen.status.is_final(), "{seen:?}");
    let err = other.cancel(&run.id).await.unwrap_err();
    assert!(matches!(err, RunError::NotHere { .. }), "{err:?}");
    assert!(
        err.to_string().contains("not driven by this process"),
        "{err}"
    );
    driving.cancel(&run.id).await.unwrap();
    let ended = driving.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::Cancelled);
    assert!(matches!(
        other.cancel(&run.id).await,
        Err(RunError::Finished { .. })
    ));
}

#[tokio::test]
async fn the_gateway_refuses_the_next_call_after_a_cancel_and_bad_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let agent = runtime.release().await.unwrap().agents["vehicle-check-scripted"].clone();
    let gateway = runtime.gateway();
    let run = RunId::new();
    let token = gateway.open(&run, agent);
    gateway.admit(&token, "data.find_record").unwrap();
    // A tool outside the agent's `tools` is refused, naming what it may call.
    let err = gateway.admit(&token, "documents.read_summary").unwrap_err();
    assert!(
        matches!(err, GatewayError::ToolNotAllowed { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("data.find_record"), "{err}");
    // After a cancel the very next call is refused, long before expiry.
    assert!(gateway.stop(&run, Stop::Cancelled));
    assert_eq!(
        runtime
            .call_tool(&token, "data.find_record", json!({}))
            .await,
        Err(GatewayError::Cancelled(run.clone()))
    );
    // Forged: signed by another key; and expired.
    let forged = hane_coordinator::RunTokenKey::generate().issue(&run, Duration::from_secs(60));
    assert_eq!(
        runtime
            .call_tool(&forged, "data.find_record", json!({}))
            .await,
        Err(GatewayError::Token(TokenError::BadSignature))
    );
    let expired = gateway
        .key()
        .issue_until(&run, SystemTime::now() - Duration::from_secs(1));
    assert_eq!(
        runtime
            .call_tool(&expired, "data.find_record", json!({}))
            .await,
        Err(GatewayError::Token(TokenError::Expired))
    );
    // A token for a run that is not running here.
    let stranger = gateway.key().issue(&RunId::new(), Duration::from_secs(60));
    assert!(matches!(
        runtime
            .call_tool(&stranger, "data.find_record", json!({}))
            .await,
        Err(GatewayError::NotRunning(_))
    ));
}

#[tokio::test]
async fn a_failed_activation_leaves_the_previous_release_active() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    let broken = release_with(
        dir.path(),
        &[(
            "broken.yaml",
            "apiVersion: agents/v1alpha1\nkind: Agent\nmetadata:\n  name: broken\nspec:\n  purpose: x\n  input: { type: object }\n  output: { type: object, required: [status] }\n  driver: scripted\n  script: [{ tool: submit_result, input: {} }]\n  limits:\n    maxToolCalls: many\n",
        )],
    );
    let err = runtime.activate(&broken).await.unwrap_err().to_string();
    assert!(err.contains("broken.yaml:12"), "{err}");
    assert!(err.contains("spec.limits.maxToolCalls"), "{err}");
    let releases = runtime.registry().releases().list().await.unwrap();
    assert_eq!(releases.len(), 1);
    assert!(releases[0].active);
    assert_eq!(runtime.release().await.unwrap().info.number, 1);

    // A second good release, then a rollback to the first.
    let second = release_with(&dir.path().join("2"), &[("greedy.yaml", TWO_CALLS_ALLOWED)]);
    assert_eq!(runtime.activate(&second).await.unwrap().number, 2);
    assert!(
        runtime
            .release()
            .await
            .unwrap()
            .agents
            .contains_key("greedy")
    );
    assert_eq!(
        runtime
            .registry()
            .releases()
            .rollback(None)
            .await
            .unwrap()
            .number,
        1
    );
    let release = runtime.release().await.unwrap();
    assert_eq!(release.info.number, 1);
    assert!(!release.agents.contains_key("greedy"));
}

#[tokio::test]
async fn runs_are_listed_by_agent_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path()).await;
    for vehicle in ["架空 300 あ 10-02", "架空 500 さ 12-34"] {
        runtime
            .run_to_end(start(
                "vehicle-check-scripted",
                json!({ "vehicle": vehicle }),
            ))
            .await
            .unwrap();
    }
    runtime
        .run_to_end(start("lease-qa", json!({"contract_no": "C-1002"})))
        .await
        .unwrap();
    let all = runtime.list(RunQuery::default()).await.unwrap().items;
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].agent, "lease-qa", "newest first");
    let vehicles = runtime
        .list(RunQuery {
            agent: Some("vehicle-check-scripted".into()),
            ..RunQuery::default()
        })
        .await
        .unwrap()
        .items;
    assert_eq!(vehicles.len(), 2);
    let failed = runtime
        .list(RunQuery {
            status: Some(RunStatus::Failed),
            ..RunQuery::default()
        })
        .await
        .unwrap()
        .items;
    assert!(failed.is_empty());
}

const EXPOSED: &str = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: exposed
spec:
  purpose: Looks a vehicle up through a tool exposed under its own name
  input: { type: object }
  output: { type: object, required: [status, model], properties: { status: { type: string }, model: { type: string } } }
  driver: scripted
  tools: [fleet.lookup]
  toolExposures: [fleet-lookup]
  script:
    - id: found
      tool: fleet.lookup
      input: { collection: vehicles, match: { id: V-003 } }
    - tool: submit_result
      input: { status: found, model: "${steps.found.records.0.model}" }
---
apiVersion: agents/v1alpha1
kind: ToolExposure
metadata:
  name: fleet-lookup
spec:
  tool: fleet.lookup
  operation: data.find_record
  description: Finds a vehicle of the fleet by any of its fields.
  timeout: 1s
"#;

#[tokio::test]
async fn a_tool_exposure_offers_an_operation_under_its_own_name() {
    let dir = tempfile::tempdir().unwrap();
    let release = release_with(dir.path(), &[("exposed.yaml", EXPOSED)]);
    let runtime = runtime(dir.path());
    runtime.activate(&release).await.unwrap();
    let tools = runtime.tools().await.unwrap();
    let lookup = tools.iter().find(|t| t.name == "fleet.lookup").unwrap();
    assert_eq!(lookup.operation.as_deref(), Some("data.find_record"));
    assert_eq!(
        lookup.description,
        "Finds a vehicle of the fleet by any of its fields."
    );
    assert_eq!(lookup.timeout, "1s");
    assert_eq!(lookup.impact, "read");
    assert!(
        lookup.input_schema["properties"]["collection"].is_object(),
        "{lookup:?}"
    );
    for name in [
        "data.find_record",
        "submit_result",
        "request_human_help",
        "tasks.create",
    ] {
        assert!(tools.iter().any(|t| t.name == name), "{name} missing");
    }
    let run = runtime
        .run_to_end(start("exposed", json!({})))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    assert_eq!(result(&run)["model"], "Honda N-VAN");
    // The operation itself is not among the agent's tools.
    let agent = runtime.release().await.unwrap().agents["exposed"].clone();
    let token = runtime.gateway().open(&RunId::new(), agent);
    assert!(matches!(
        runtime.gateway().admit(&token, "data.find_record"),
        Err(GatewayError::ToolNotAllowed { .. })
    ));
}

/// Compiling the release's components (here all of them: the cache is
/// empty) takes far longer than the lease, on a runtime with one thread:
/// the lease is renewed meanwhile, so the process keeps it.
#[tokio::test]
async fn compiling_at_activation_does_not_cost_the_process_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let mut sandbox = SandboxConfig::new();
    sandbox
        .cache_dir(Some(dir.path().join("cache")))
        .max_instances(16);
    let lease = Duration::from_millis(300);
    let mut config = RuntimeConfig::new();
    config
        .sandbox(sandbox)
        .components(Components::with_builtins(hane_builtins::all()))
        .lease(lease);
    let runtime = AgentRuntime::open(&dir.path().join("hane.db"), &config).unwrap();
    let started = std::time::Instant::now();
    runtime.activate(&harness::examples()).await.unwrap();
    let took = started.elapsed();
    assert!(
        took > lease * 3,
        "compiling took {took:?}, too little to test renewing a {lease:?} lease"
    );
    // A renewal that was due during the compilation would have found the
    // lease lapsed; one more round of renewals must go through too.
    tokio::time::sleep(lease).await;
    assert!(!runtime.lease().lapsed(), "activation took {took:?}");
    let run = runtime
        .run_to_end(start(
            "vehicle-check-scripted",
            json!({"vehicle": "架空 300 あ 10-02"}),
        ))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
}
