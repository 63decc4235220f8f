//! Two `hane serve` on one PostgreSQL database running their operations on
//! one `hane worker`, one of the servers killed with `kill -9` while runs
//! are live, twenty times over (and the worker too, every fifth time),
//! with a real SMTP server receiving the emails the runs send (reminders
//! the examples' policy approves by itself). After every cycle: each run
//! accepted is in the store and ended, once (its state does not change
//! again); and no email was sent twice: an action `delivered` has exactly
//! one message, an `unknown` one at most one, any other none, and no
//! message is of an action the store does not have. The operations ran on
//! the worker, reading the ledger the servers sent it.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hane_test_support::SmtpServer;
use serde_json::{Value, json};

use crate::common::{hane_on, ok, operator_key, request, serve_with};

const CYCLES: usize = 20;
/// Runs started per cycle, half on each server.
const RUNS: usize = 6;
/// The lease every process takes, in seconds.
const LEASE: &str = "1";

/// The examples, without their budget (its 50 emails a day would refuse
/// some of these), activated in a new database.
fn store() -> PathBuf {
    let release = hane_test_support::examples_copy();
    std::fs::remove_dir_all(release.path().join("budgets")).unwrap();
    let store = PathBuf::from(hane_test_support::postgres::database().url);
    ok(&hane_on(
        &store,
        &["release", "activate", release.path().to_str().unwrap()],
    ));
    store
}

fn start(addr: &str, key: &str, n: usize) -> Option<String> {
    let input = json!({"vehicle": "架空 300 あ 10-02", "to": format!("depot-{n}@fleet.example")});
    let (status, run) = request(
        addr,
        "POST",
        "/v1/agents/runs",
        key,
        Some(&json!({"agent": "inspection-reminder", "input": input})),
    );
    assert_eq!(status, 201, "{run}");
    run["id"].as_str().map(str::to_owned)
}

fn kill_9(mut child: Child) {
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// The run as the server at `addr` has it.
fn run(addr: &str, key: &str, id: &str) -> Value {
    let (status, run) = request(addr, "GET", &format!("/v1/agents/runs/{id}"), key, None);
    assert_eq!(status, 200, "{run}");
    run
}

/// Every action in the store, by id, with its state.
fn actions(addr: &str, key: &str) -> HashMap<String, String> {
    let (status, listed) = request(addr, "GET", "/v1/agents/action-requests", key, None);
    assert_eq!(status, 200, "{listed}");
    listed["actionRequests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["id"].as_str().unwrap().to_owned(),
                a["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The secret the servers and the worker share.
const WORKER_SECRET: &str = "the chaos test's worker secret";

fn serve(store: &Path, smtp: &SmtpServer, worker: &str) -> (Child, String) {
    serve_with(
        store,
        &[
            ("HANE_LEASE", LEASE),
            ("HANE_SMTP_URL", &smtp.url()),
            ("HANE_WORKER", worker),
            ("HANE_WORKER_SECRET", WORKER_SECRET),
        ],
    )
}

/// `hane worker` listening on `listen`, logging what it runs to `log`;
/// the address it listens on.
fn worker(listen: &str, log: &Path) -> (Child, String) {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["worker", "--listen", listen])
        .env("HANE_WORKER_SECRET", WORKER_SECRET)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("RUST_LOG", "hane_manager=info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("start hane worker");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("hane worker did not start: {line}"))
        .to_owned();
    (child, addr)
}

#[test]
fn twenty_kills_of_one_of_two_servers_lose_nothing_and_send_nothing_twice() {
    let smtp = SmtpServer::start(&[]);
    let store = store();
    let key = operator_key(&store);
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("worker.log");
    let (mut running, at) = worker("127.0.0.1:0", &log);
    let mut servers = [serve(&store, &smtp, &at), serve(&store, &smtp, &at)];
    let mut ended: HashMap<String, Value> = HashMap::new();
    let mut n = 0;
    for cycle in 0..CYCLES {
        let victim = cycle % 2;
        // Half the runs on each server, all at once.
        let addrs = [servers[0].1.clone(), servers[1].1.clone()];
        let starts: Vec<_> = (0..RUNS)
            .map(|i| {
                let (addr, key) = (addrs[i % 2].clone(), key.clone());
                n += 1;
                let n = n;
                std::thread::spawn(move || start(&addr, &key, n))
            })
            .collect();
        let accepted: Vec<String> = starts
            .into_iter()
            .map(|s| s.join().unwrap().expect("an accepted run has an id"))
            .collect();
        // Killed while its runs are live: at once, or a little later.
        std::thread::sleep(Duration::from_millis((cycle as u64 * 7) % 30));
        let (doomed, _) = std::mem::replace(&mut servers[victim], serve(&store, &smtp, &at));
        kill_9(doomed);
        // The worker dies too, now and then, and comes back where it was:
        // what it was running is lost, a read runs again, a write is
        // `unknown`.
        if cycle % 5 == 4 {
            kill_9(running);
            running = worker(&at, &log).0;
        }
        let survivor = servers[1 - victim].1.clone();
        // Every run accepted ends: on its own, or resumed by a live
        // server once the dead one's lease lapsed.
        let deadline = Instant::now() + Duration::from_secs(60);
        for id in &accepted {
            loop {
                let got = run(&survivor, &key, id);
                if !matches!(got["status"].as_str(), Some("queued" | "running")) {
                    assert!(
                        matches!(got["status"].as_str(), Some("succeeded" | "failed")),
                        "cycle {cycle}: {got:#}"
                    );
                    ended.insert(id.clone(), got);
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "cycle {cycle}: never ended: {got:#}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        check_mail(&smtp, &actions(&survivor, &key), cycle);
    }
    // No run's end changed afterwards.
    let addr = servers[0].1.clone();
    for (id, first) in &ended {
        let now = run(&addr, &key, id);
        assert_eq!(
            (&now["status"], &now["error"], &now["result"]),
            (&first["status"], &first["error"], &first["result"]),
            "run {id} changed after it ended"
        );
    }
    assert_eq!(ended.len(), CYCLES * RUNS);
    // An action a killed server was delivering is made `unknown` by the
    // survivor's next look, never left `executing`.
    let deadline = Instant::now() + Duration::from_secs(20);
    while actions(&addr, &key).values().any(|s| s == "executing") {
        assert!(Instant::now() < deadline, "actions left executing");
        std::thread::sleep(Duration::from_millis(100));
    }
    check_mail(&smtp, &actions(&addr, &key), CYCLES);
    let mut runs: HashMap<String, usize> = HashMap::new();
    for run in ended.values() {
        *runs
            .entry(run["status"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    let mut states: HashMap<String, usize> = HashMap::new();
    for state in actions(&addr, &key).into_values() {
        *states.entry(state).or_default() += 1;
    }
    eprintln!("runs by status: {runs:?}; actions by state: {states:?}");
    // The kills hit live runs (some were resumed by the survivor), and
    // the emails went out.
    let resumed = ended.values().filter(|run| run["resumed"] != 0).count();
    eprintln!("runs resumed after a kill: {resumed}");
    assert!(resumed > 0, "no kill found a live run: {runs:?}");
    assert!(
        states.get("delivered").copied().unwrap_or(0) > 0,
        "{states:?}"
    );
    for (server, _) in servers {
        kill_9(server);
    }
    kill_9(running);
    // The operations ran on the worker, the ledger's records found there.
    let logged = std::fs::read_to_string(&log).unwrap();
    let ran = logged.matches("operation succeeded").count();
    eprintln!("operations the worker ran: {ran}");
    // Each run that succeeded found its vehicle there once at least.
    let succeeded = runs.get("succeeded").copied().unwrap_or(0);
    assert!(ran >= succeeded, "{ran} < {succeeded}: {logged}");
}

/// No message twice, none of an action the store lacks, one for each
/// action delivered, at most one for one whose delivery is unknown.
fn check_mail(smtp: &SmtpServer, actions: &HashMap<String, String>, cycle: usize) {
    let mailed = smtp.messages_by_action();
    for (action, count) in &mailed {
        let state = actions
            .get(action)
            .unwrap_or_else(|| panic!("cycle {cycle}: a message of {action}, which is not stored"));
        assert_eq!(
            *count, 1,
            "cycle {cycle}: {action} ({state}) sent {count} times"
        );
        assert!(
            matches!(state.as_str(), "delivered" | "unknown" | "executing"),
            "cycle {cycle}: {action} is {state} but was sent"
        );
    }
    for (action, state) in actions {
        if state == "delivered" {
            assert_eq!(
                mailed.get(action),
                Some(&1),
                "cycle {cycle}: {action} delivered without its message"
            );
        }
    }
}
