//! Several processes on one store. Runs whose process died are never left
//! `running` for good: of two `hane serve`, the one still alive resumes
//! the run the other was running when it was killed (`kill -9`), once the
//! dead one's lease lapses: the run waits for the action it had proposed,
//! not a new one, and ends once a person decides it, while the
//! survivor's own runs go on. A run a killed `hane run` left is resumed
//! by the next `hane serve` (short commands leave it to one), and a run
//! that cannot be resumed (driven from outside) is ended by the next
//! command that opens the store. And one day's budget holds across
//! processes: of 100 concurrent starts on two servers, exactly as many as
//! it allows start. Each test runs on a SQLite file and on a PostgreSQL
//! database.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{hane_on, json, ok, operator_key, request, serve_with};

/// An agent that proposes an email a person decides, then ends with the
/// action's state.
const RELEASE: &str = include_str!("../../../../tests/fixtures/notify.yaml");

/// The lease every process here takes, in seconds.
const LEASE: &str = "1";

fn input() -> Value {
    json!({"email": "driver@example.com", "subject": "Your van is ready", "body": "Gate 3."})
}

/// The engine a test's store is on.
#[derive(Clone, Copy)]
enum Engine {
    Sqlite,
    Postgres,
}

/// For each `fn NAME(engine: Engine)` named, a module `NAME` with the
/// tests `sqlite` and `postgres`.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn sqlite() {
                    super::$name(super::Engine::Sqlite);
                }

                #[test]
                fn postgres() {
                    super::$name(super::Engine::Postgres);
                }
            }
        )*
    };
}

/// A new store on `engine`: a file in `dir`, or a fresh database.
fn new_store(dir: &Path, engine: Engine) -> PathBuf {
    match engine {
        Engine::Sqlite => dir.join("hane.db"),
        Engine::Postgres => PathBuf::from(hane_test_support::postgres::database().url),
    }
}

fn store_with_notify(dir: &Path, engine: Engine) -> PathBuf {
    store_with(dir, engine, &[("notify.yaml", RELEASE)])
}

/// A store on `engine` with a release of `files` active.
fn store_with(dir: &Path, engine: Engine, files: &[(&str, &str)]) -> PathBuf {
    let release = dir.join("release");
    std::fs::create_dir_all(&release).unwrap();
    for (name, text) in files {
        let file = release.join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let store = new_store(dir, engine);
    ok(&hane_on(
        &store,
        &["release", "activate", release.to_str().unwrap()],
    ));
    store
}

/// The pending actions in `store`, by run.
fn pending(store: &Path) -> Vec<Value> {
    json(&hane_on(
        store,
        &["approvals", "list", "--state", "pending", "--json"],
    ))
    .as_array()
    .unwrap()
    .clone()
}

fn pending_of(store: &Path, run: &str) -> Option<Value> {
    pending(store).into_iter().find(|a| a["run"] == run)
}

/// Waits until `run` has proposed its action.
fn proposed(store: &Path, run: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(action) = pending_of(store, run) {
            return action;
        }
        assert!(Instant::now() < deadline, "run {run} proposed nothing");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn start_run(addr: &str, key: &str) -> String {
    start_notify(addr, key)["id"].as_str().unwrap().to_owned()
}

fn kill_9(mut child: Child) {
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// The actions run `run` proposed, in any state.
fn actions_of(store: &Path, run: &str) -> Vec<Value> {
    json(&hane_on(
        store,
        &[
            "approvals",
            "list",
            "--state",
            "all",
            "--run",
            run,
            "--json",
        ],
    ))
    .as_array()
    .unwrap()
    .clone()
}

fn get_run(addr: &str, key: &str, run: &str) -> Value {
    let (status, body) = request(addr, "GET", &format!("/v1/agents/runs/{run}"), key, None);
    assert_eq!(status, 200, "{body}");
    body
}

/// Waits until `run`, in `store`, was resumed by a process that took it
/// over: it says so, and its session too. It never stopped `running`
/// meanwhile.
fn resumed(store: &Path, run: &str, since: Instant) -> Duration {
    loop {
        let shown = json(&hane_on(store, &["runs", "show", run, "--json"]));
        assert_eq!(shown["status"], "running", "{shown:#}");
        if shown["resumed"] == 1 {
            let session = shown["session"].as_str().unwrap();
            let events = hane_on(store, &["session", "show", session, "--json"]);
            assert!(
                String::from_utf8_lossy(&events.stdout).contains("resumed by"),
                "{}",
                String::from_utf8_lossy(&events.stdout)
            );
            return since.elapsed();
        }
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "never resumed: {shown:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Rejects `action` through the server at `addr`, then waits until `run`
/// ends: it must succeed with the action's state, the action it had.
fn reject_and_end(addr: &str, key: &str, run: &str, action: &Value) -> Value {
    let id = action["id"].as_str().unwrap();
    reject_and_end_with(
        addr,
        key,
        run,
        action,
        &json!({"status": "rejected", "action": id}),
    )
}

/// Rejects `action` through the server at `addr`, then waits until `run`
/// ends: it must succeed with `result`.
fn reject_and_end_with(addr: &str, key: &str, run: &str, action: &Value, result: &Value) -> Value {
    let id = action["id"].as_str().unwrap();
    let (status, decided) = request(
        addr,
        "POST",
        &format!("/v1/agents/action-requests/{id}/reject"),
        key,
        Some(&json!({"digest": action["digest"], "reason": "not today"})),
    );
    assert_eq!(status, 200, "{decided:#}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ended = get_run(addr, key, run);
        if ended["status"] != "running" {
            assert_eq!(ended["status"], "succeeded", "{ended:#}");
            assert_eq!(&ended["result"], result, "{ended:#}");
            return ended;
        }
        assert!(Instant::now() < deadline, "never ended: {ended:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn a_killed_servers_run_is_resumed_by_the_other_server_and_its_own_go_on(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_notify(dir.path(), engine);
    let key = operator_key(&store);
    let env = [("HANE_LEASE", LEASE)];
    let (first, first_addr) = serve_with(&store, &env);
    let (second, second_addr) = serve_with(&store, &env);
    let doomed = start_run(&first_addr, &key);
    let survivor = start_run(&second_addr, &key);
    let had = proposed(&store, &doomed);
    let kept = proposed(&store, &survivor);
    assert_eq!(
        get_run(&first_addr, &key, &doomed)["resumable"],
        true,
        "a scripted run can be resumed"
    );

    kill_9(first);
    let took = resumed(&store, &doomed, Instant::now());
    // The lease is 1 s and the survivor looks every half of its own: the
    // run is resumed within a few seconds even on a loaded machine.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // Resumed, the run waits for the action it had, not for a new one:
    // its proposal is answered by the ledger, not made again.
    assert_eq!(pending_of(&store, &doomed).unwrap()["id"], had["id"]);
    let ended = reject_and_end(&second_addr, &key, &doomed, &had);
    let tools: Vec<&Value> = ended["toolCalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| &call["tool"])
        .collect();
    assert_eq!(
        tools,
        [&json!("communication.send_email"), &json!("submit_result")],
        "{ended:#}"
    );
    let actions = actions_of(&store, &doomed);
    assert_eq!(actions.len(), 1, "one action, proposed once: {actions:?}");

    // The survivor's run was not touched: its action waits for a person,
    // and once decided the run ends on its own.
    assert_eq!(get_run(&second_addr, &key, &survivor)["status"], "running");
    reject_and_end(&second_addr, &key, &survivor, &kept);
    kill_9(second);
}

/// An agent of the `llm` driver that proposes an email, with the
/// recording of its model's two turns.
const NOTIFY_LLM: [(&str, &str); 2] = [
    (
        "notify-llm.yaml",
        include_str!("../../../../tests/fixtures/notify-llm/notify-llm.yaml"),
    ),
    (
        "recordings/notify-llm.json",
        include_str!("../../../../tests/fixtures/notify-llm/recordings/notify-llm.json"),
    ),
];

/// The events of `run`'s session named `name` (such as `llm_turn`).
fn session_events(store: &Path, run: &str, name: &str) -> Vec<Value> {
    let shown = json(&hane_on(store, &["runs", "show", run, "--json"]));
    let session = shown["session"].as_str().unwrap();
    json(&hane_on(store, &["session", "show", session, "--json"]))["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["event"].get(name).cloned())
        .collect()
}

fn a_killed_servers_llm_run_is_resumed_without_asking_its_model_again(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), engine, &NOTIFY_LLM);
    let key = operator_key(&store);
    let env = [("HANE_LEASE", LEASE)];
    let (first, first_addr) = serve_with(&store, &env);
    let (second, second_addr) = serve_with(&store, &env);
    let (status, run) = request(
        &first_addr,
        "POST",
        "/v1/agents/runs",
        &key,
        Some(&json!({"agent": "notify-llm", "input": {"email": "driver@example.com"}})),
    );
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["resumable"], true, "{run:#}");
    let run = run["id"].as_str().unwrap().to_owned();
    let had = proposed(&store, &run);
    // Its first model turn is in its session (written behind the run).
    let deadline = Instant::now() + Duration::from_secs(30);
    while session_events(&store, &run, "llmTurn").is_empty() {
        assert!(Instant::now() < deadline, "no model turn recorded");
        std::thread::sleep(Duration::from_millis(50));
    }

    kill_9(first);
    resumed(&store, &run, Instant::now());
    assert_eq!(pending_of(&store, &run).unwrap()["id"], had["id"]);
    let ended = reject_and_end_with(&second_addr, &key, &run, &had, &json!({"status": "done"}));
    // The model was asked twice in all: its first turn was answered from
    // the session, not sent again, and still counts.
    let turns = session_events(&store, &run, "llmTurn");
    let digests: Vec<&Value> = turns.iter().map(|t| &t["requestDigest"]).collect();
    assert_eq!(turns.len(), 2, "{turns:#?}");
    assert_ne!(digests[0], digests[1]);
    assert_eq!(ended["tokensUsed"], 300 + 40 + 400 + 20, "{ended:#}");
    assert_eq!(actions_of(&store, &run).len(), 1);
    kill_9(second);
}

fn a_run_a_killed_hane_run_left_is_resumed_by_the_next_that_can(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_notify(dir.path(), engine);
    let child = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["run", "notify", "--input", &input().to_string(), "--json"])
        .arg("--store")
        .arg(&store)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("HANE_LEASE", LEASE)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start hane run");
    let deadline = Instant::now() + Duration::from_secs(60);
    let action = loop {
        if let Some(action) = pending(&store).pop() {
            break action;
        }
        assert!(Instant::now() < deadline, "no action proposed");
        std::thread::sleep(Duration::from_millis(100));
    };
    let run = action["run"].as_str().unwrap().to_owned();
    kill_9(child);
    // Past the dead process's lease, a short command leaves the run to a
    // process that resumes it: it would not live to finish it.
    std::thread::sleep(Duration::from_millis(1500));
    let listed = hane_on(&store, &["runs", "show", &run, "--json"]);
    assert_eq!(json(&listed)["status"], "running");
    let stderr = String::from_utf8_lossy(&listed.stderr).into_owned();
    assert!(!stderr.contains("left by a stopped process"), "{stderr}");
    assert_eq!(pending(&store).len(), 1);

    // A server resumes it: the run waits for the action it had.
    let key = operator_key(&store);
    let (server, addr) = serve_with(&store, &[("HANE_LEASE", LEASE)]);
    resumed(&store, &run, Instant::now());
    assert_eq!(pending_of(&store, &run).unwrap()["id"], action["id"]);
    reject_and_end(&addr, &key, &run, &action);
    assert_eq!(actions_of(&store, &run).len(), 1);
    kill_9(server);
}

/// Starts a run of `notify` through `addr`; the run as the answer has it.
fn start_notify(addr: &str, key: &str) -> Value {
    let (status, run) = request(
        addr,
        "POST",
        "/v1/agents/runs",
        key,
        Some(&json!({"agent": "notify", "input": input()})),
    );
    assert_eq!(status, 201, "{run}");
    run
}

fn runs_past_a_servers_most_wait_queued_for_the_first_with_room(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_notify(dir.path(), engine);
    let key = operator_key(&store);
    let env = [("HANE_LEASE", LEASE), ("HANE_MAX_RUNS", "1")];
    let (a, a_addr) = serve_with(&store, &env);
    let first = start_notify(&a_addr, &key);
    let first_id = first["id"].as_str().unwrap();
    let first_action = proposed(&store, first_id);
    // The server is at its most: the next run waits, queued, for anyone.
    let second = start_notify(&a_addr, &key);
    assert_eq!(second["status"], "queued", "{second:#}");
    let second_id = second["id"].as_str().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(get_run(&a_addr, &key, second_id)["status"], "queued");
    assert!(pending_of(&store, second_id).is_none());

    // A second server with room starts it.
    let (b, b_addr) = serve_with(&store, &env);
    let second_action = proposed(&store, second_id);
    // Both are full now: a third waits until the first ends, and then
    // starts in the server that had it.
    let third = start_notify(&b_addr, &key);
    assert_eq!(third["status"], "queued", "{third:#}");
    let third_id = third["id"].as_str().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(pending_of(&store, third_id).is_none());
    reject_and_end(&a_addr, &key, first_id, &first_action);
    let third_action = proposed(&store, third_id);
    reject_and_end(&b_addr, &key, second_id, &second_action);
    reject_and_end(&a_addr, &key, third_id, &third_action);
    for run in [first_id, second_id, third_id] {
        assert_eq!(actions_of(&store, run).len(), 1, "{run}");
        assert_eq!(get_run(&a_addr, &key, run)["resumed"], 0);
    }
    kill_9(a);
    kill_9(b);
}

/// An agent driven from outside: a run of it cannot be resumed.
const ATTACHED: &str = "apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: outside
spec:
  purpose: Be driven by a client that holds the run's token
  input: { type: object }
  driver: scripted
  script:
    - tool: submit_result
      input: { status: done }
  tools: []
  limits: { maxToolCalls: 4, maxSeconds: 120 }
  output:
    type: object
    required: [status]
    properties:
      status: { type: string }
";

fn a_run_a_killed_process_left_that_cannot_be_resumed_is_ended_by_the_next_command(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), engine, &[("outside.yaml", ATTACHED)]);
    let key = operator_key(&store);
    let (server, addr) = serve_with(&store, &[("HANE_LEASE", LEASE)]);
    let (status, run) = request(
        &addr,
        "POST",
        "/v1/agents/runs",
        &key,
        Some(&json!({"agent": "outside", "input": {}, "attach": true})),
    );
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["resumable"], false, "{run:#}");
    let run = run["id"].as_str().unwrap().to_owned();
    kill_9(server);
    // Past the dead process's lease, any command that opens the runtime
    // ends the run before it lists it.
    std::thread::sleep(Duration::from_millis(1500));
    let listed = hane_on(&store, &["runs", "list", "--json"]);
    let stderr = String::from_utf8_lossy(&listed.stderr).into_owned();
    let runs = json(&listed);
    let ended = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == run.as_str())
        .unwrap();
    assert_eq!(ended["status"], "failed", "{ended:#}");
    let error = ended["error"].as_str().unwrap();
    assert!(
        error.contains("stopped (its lease lapsed)") && error.contains("not resumed"),
        "{error}"
    );
    assert!(
        stderr.contains("1 run(s) left by a stopped process ended"),
        "{stderr}"
    );
    // Nothing more is taken the next time.
    let again = hane_on(&store, &["runs", "list", "--json"]);
    assert!(
        !String::from_utf8_lossy(&again.stderr).contains("left by a stopped process"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

fn a_server_whose_lease_is_lost_stops(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_notify(dir.path(), engine);
    operator_key(&store);
    let (mut server, _) = serve_with(&store, &[("HANE_LEASE", LEASE)]);
    // Its lease taken from it, as another process would once it lapsed.
    let taken = match engine {
        Engine::Sqlite => {
            let db = rusqlite::Connection::open(&store).unwrap();
            db.busy_timeout(Duration::from_secs(5)).unwrap();
            db.execute("DELETE FROM leases", []).unwrap()
        }
        Engine::Postgres => {
            let url = store.to_str().unwrap();
            let name = url.rsplit('/').next().unwrap();
            let deleted = hane_test_support::postgres::server()
                .psql(
                    name,
                    "WITH gone AS (DELETE FROM leases RETURNING 1) SELECT count(*) FROM gone",
                )
                .unwrap();
            deleted.trim().parse().unwrap()
        }
    };
    assert!(taken >= 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = server.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still serving without a lease");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(1), "{status}");
}

/// An agent whose run ends at once.
const QUICK: &str = "apiVersion: agents/v1alpha1
kind: Agent
metadata: { name: quick }
spec:
  purpose: End at once
  input: { type: object }
  driver: scripted
  script:
    - tool: submit_result
      input: { status: done }
  limits: { maxToolCalls: 2, maxSeconds: 30 }
  output:
    type: object
    required: [status]
    properties:
      status: { type: string }
";

/// The runs a day allows.
const RUNS_PER_DAY: usize = 30;

fn two_servers_never_start_more_runs_than_the_days_budget(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let budget = format!(
        "apiVersion: platform/v1alpha1\nkind: Budget\nmetadata:\n  name: daily\nspec:\n  agentRunsPerDay: {RUNS_PER_DAY}\n"
    );
    let store = store_with(
        dir.path(),
        engine,
        &[("quick.yaml", QUICK), ("budget.yaml", &budget)],
    );
    let key = operator_key(&store);
    let (first, first_addr) = serve_with(&store, &[]);
    let (second, second_addr) = serve_with(&store, &[]);
    // 50 starts on each server at once, from 100 threads released together.
    let gate = std::sync::Arc::new(std::sync::Barrier::new(100));
    let starts: Vec<_> = (0..100)
        .map(|i| {
            let addr = if i % 2 == 0 {
                &first_addr
            } else {
                &second_addr
            }
            .clone();
            let (key, gate) = (key.clone(), gate.clone());
            std::thread::spawn(move || {
                gate.wait();
                request(
                    &addr,
                    "POST",
                    "/v1/agents/runs",
                    &key,
                    Some(&json!({"agent": "quick", "input": {}})),
                )
            })
        })
        .collect();
    let mut started = 0;
    for start in starts {
        let (status, body) = start.join().unwrap();
        match status {
            201 => started += 1,
            429 => assert_eq!(body["error"]["code"], "budget_exceeded", "{body:#}"),
            _ => panic!("{status}: {body:#}"),
        }
    }
    assert_eq!(started, RUNS_PER_DAY);
    kill_9(first);
    kill_9(second);
    let runs = json(&hane_on(&store, &["runs", "list", "--json"]));
    assert_eq!(runs.as_array().unwrap().len(), RUNS_PER_DAY);
}

on_both!(
    a_killed_servers_run_is_resumed_by_the_other_server_and_its_own_go_on,
    a_killed_servers_llm_run_is_resumed_without_asking_its_model_again,
    runs_past_a_servers_most_wait_queued_for_the_first_with_room,
    a_run_a_killed_hane_run_left_is_resumed_by_the_next_that_can,
    a_run_a_killed_process_left_that_cannot_be_resumed_is_ended_by_the_next_command,
    a_server_whose_lease_is_lost_stops,
    two_servers_never_start_more_runs_than_the_days_budget,
);
