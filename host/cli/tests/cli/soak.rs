//! The soak: `hane serve` on the embedded store (SQLite) under a steady mix
//! of runs, outbound actions a person approves, MCP calls and conversation
//! messages, while hostile peers hold connections (idle keep-alive ones,
//! silent ones, and ones that send their headers a byte at a time) and the
//! server is killed with `kill -9` and started again every
//! [`KILL_EVERY`]. A real SMTP server receives the emails.
//!
//! Afterwards: every run the API accepted has ended, once (its end does
//! not change again); every conversation message accepted has its run
//! ended; no email was sent twice, and every action delivered has its
//! one message; no action is left pending or executing. While it ran, a
//! request found no server only within [`RESTART_BOUND`] of a kill, the
//! server's resident memory stayed under [`RSS_BOUND`] and a normal read
//! (`GET /v1/agents/runs/{id}`) answered within [`P99_BOUND`] at the
//! 99th percentile.
//!
//! It runs for [`DEFAULT_SECS`] seconds; `HANE_SOAK_SECS` sets another
//! length (BENCHMARKS.md has the command and the figures of a run).

use std::collections::HashMap;
use std::io::Write as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use hane_test_support::{SmtpServer, try_request};
use serde_json::{Value, json};

use crate::common::{hane_on, ok, operator_key, serve_with};

const DEFAULT_SECS: u64 = 90;
const KILL_EVERY: Duration = Duration::from_secs(15);
/// How long after a kill requests may find no server: until the new one
/// listens.
const RESTART_BOUND: Duration = Duration::from_secs(10);
/// Bounds on what the server may use and how slow a read may get, with the
/// test suite running beside it on two cores.
const RSS_BOUND: u64 = 256 * 1024 * 1024;
const P99_BOUND: Duration = Duration::from_millis(250);
/// Hostile connections held open while the server runs.
const IDLE_KEEP_ALIVE: usize = 200;
const SILENT: usize = 50;
const SLOW: usize = 20;

/// Where the server listens now, and its process id.
struct Server {
    addr: RwLock<String>,
    pid: AtomicU64,
}

impl Server {
    fn addr(&self) -> String {
        self.addr.read().unwrap().clone()
    }
}

/// An HTTP/1.1 answer: its status and body.
struct Answer {
    status: u16,
    body: Value,
}

/// One request on its own connection; an error when the server is not
/// there or does not answer in time (it may be being restarted).
fn call(
    addr: &str,
    method: &str,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> Result<Answer, String> {
    let (status, body) = try_request(addr, method, path, key, body, Duration::from_secs(15))?;
    Ok(Answer { status, body })
}

/// What the load threads saw.
#[derive(Default)]
struct Tally {
    /// Runs accepted (201), by id.
    runs: Vec<String>,
    /// Runs of conversation messages accepted.
    messages: Vec<String>,
    /// Answers by kind of request.
    served: HashMap<&'static str, u64>,
    /// When requests found no server (it was being restarted).
    refused: Vec<Instant>,
    /// Latencies of the normal read.
    reads: Vec<Duration>,
    approved: u64,
}

impl Tally {
    /// One request of `kind`: answered, or it found no server.
    fn count(&mut self, kind: &'static str, reached: bool) {
        if reached {
            *self.served.entry(kind).or_default() += 1;
        } else {
            self.refused.push(Instant::now());
        }
    }

    fn served(&self, kind: &str) -> u64 {
        self.served.get(kind).copied().unwrap_or(0)
    }
}

/// Runs `step` on a thread of its own, `pause` after each time, until
/// `stop`.
fn lane(
    stop: &Arc<AtomicBool>,
    pause: Duration,
    mut step: impl FnMut() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let stop = stop.clone();
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            step();
            std::thread::sleep(pause);
        }
    })
}

fn start(store: &Path, smtp: &SmtpServer, server: &Server) -> Child {
    let (child, addr) = serve_with(
        store,
        &[("HANE_LEASE", "1"), ("HANE_SMTP_URL", &smtp.url())],
    );
    *server.addr.write().unwrap() = addr;
    server.pid.store(u64::from(child.id()), Ordering::SeqCst);
    child
}

/// The hostile peers: idle keep-alive connections (each has made one
/// request), silent ones, and slow ones sending a header a byte at a time.
/// Held until `stop`; made again after each restart.
fn hostile(server: Arc<Server>, key: &str, stop: &Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let mut held: Vec<TcpStream> = Vec::new();
    let mut slow: Vec<TcpStream> = Vec::new();
    let mut at = String::new();
    let mut byte = 0usize;
    let header = format!(
        "GET /v1/agents/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nX-Slow: "
    );
    lane(stop, Duration::from_millis(500), move || {
        let now = server.addr();
        if now != at {
            held.clear();
            slow.clear();
            at = now;
            for _ in 0..IDLE_KEEP_ALIVE {
                if let Ok(mut s) = TcpStream::connect(&at) {
                    let _ = write!(s, "GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n");
                    held.push(s);
                }
            }
            held.extend((0..SILENT).filter_map(|_| TcpStream::connect(&at).ok()));
            slow.extend((0..SLOW).filter_map(|_| TcpStream::connect(&at).ok()));
        }
        // The header, then a value that never ends.
        let next = header.as_bytes().get(byte).copied().unwrap_or(b'a');
        for s in &mut slow {
            let _ = s.write_all(&[next]);
        }
        byte += 1;
    })
}

#[test]
fn a_killed_server_under_load_and_hostile_peers_loses_nothing_and_sends_nothing_twice() {
    let secs = std::env::var("HANE_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECS);
    let smtp = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let store = examples_without_budget(dir.path());
    let key = operator_key(&store);
    let server = Arc::new(Server {
        addr: RwLock::new(String::new()),
        pid: AtomicU64::new(0),
    });
    let mut child = start(&store, &smtp, &server);
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let max_rss = Arc::new(AtomicU64::new(0));

    let mut threads = vec![hostile(server.clone(), &key, &stop)];
    // Runs: reminders the policy approves itself, reminders that wait for
    // a person, and read-only checks.
    for lane_n in 0..2u64 {
        let (server, key, tally) = (server.clone(), key.clone(), tally.clone());
        let mut n = 0u64;
        threads.push(lane(&stop, Duration::from_millis(100), move || {
            n += 1;
            let (agent, input) = match (n + lane_n) % 3 {
                0 => ("inspection-reminder", json!({"vehicle": "架空 300 あ 10-02", "to": format!("depot-{lane_n}-{n}@fleet.example")})),
                1 => ("inspection-reminder", json!({"vehicle": "架空 300 あ 10-02", "to": format!("office-{lane_n}-{n}@elsewhere.example")})),
                _ => ("vehicle-check-scripted", json!({"vehicle": "架空 500 さ 12-34"})),
            };
            let body = json!({"agent": agent, "input": input});
            let answer = call(&server.addr(), "POST", "/v1/agents/runs", &key, Some(&body));
            let mut tally = tally.lock().unwrap();
            if let Ok(a) = &answer {
                assert_eq!(a.status, 201, "starting a run: {}", a.body);
                tally.runs.push(a.body["id"].as_str().unwrap().to_owned());
            }
            tally.count("runs", answer.is_ok());
        }));
    }
    // A person approving what waits for one, with the digest shown.
    {
        let (server, key, tally) = (server.clone(), key.clone(), tally.clone());
        threads.push(lane(&stop, Duration::from_millis(200), move || {
            approve_pending(&server.addr(), &key, &tally);
        }));
    }
    // MCP: the release's tools called statelessly.
    {
        let (server, key, tally) = (server.clone(), key.clone(), tally.clone());
        let mut id = 0;
        threads.push(lane(&stop, Duration::from_millis(100), move || {
            id += 1;
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "data-find_record",
                "arguments": {"collection": "vehicles", "match": {"registration": "架空 500 さ 12-34"}},
            }});
            let answer = call(&server.addr(), "POST", "/mcp/release", &key, Some(&body));
            if let Ok(a) = &answer {
                assert_eq!(a.status, 200, "{}", a.body);
                assert_eq!(a.body["result"]["isError"], false, "{}", a.body);
            }
            tally.lock().unwrap().count("mcp", answer.is_ok());
        }));
    }
    // Conversation messages, one at a time, each waited for.
    {
        let (server, key, tally) = (server.clone(), key.clone(), tally.clone());
        let mut conversation: Option<String> = None;
        threads.push(lane(&stop, Duration::from_millis(100), move || {
            let addr = server.addr();
            let step = match &conversation {
                None => call(&addr, "POST", "/v1/agents/conversations", &key, Some(&json!({"agent": "vehicle-check-scripted"})))
                    .map(|a| {
                        assert_eq!(a.status, 201, "{}", a.body);
                        conversation = a.body["id"].as_str().map(str::to_owned);
                    }),
                Some(id) => call(&addr, "POST", &format!("/v1/agents/conversations/{id}/messages"), &key,
                    Some(&json!({"text": "check it", "input": {"vehicle": "架空 500 さ 12-34"}, "wait": true})))
                    .map(|a| match a.status {
                        200 | 201 => {
                            let run = a.body["run"]["id"].as_str().or(a.body["entry"]["run"].as_str());
                            let run = run.unwrap_or_else(|| panic!("a message's run: {}", a.body)).to_owned();
                            tally.lock().unwrap().messages.push(run);
                        }
                        // The previous message's run was on a killed
                        // server and has not ended yet.
                        409 => std::thread::sleep(Duration::from_millis(300)),
                        _ => panic!("a message: {} {}", a.status, a.body),
                    }),
            };
            tally.lock().unwrap().count("conversations", step.is_ok());
        }));
    }
    // The normal read whose latency is bounded.
    {
        let (server, key, tally) = (server.clone(), key.clone(), tally.clone());
        threads.push(lane(&stop, Duration::from_millis(25), move || {
            let Some(run) = tally.lock().unwrap().runs.first().cloned() else {
                return;
            };
            let began = Instant::now();
            let path = format!("/v1/agents/runs/{run}");
            let answer = call(&server.addr(), "GET", &path, &key, None);
            let took = began.elapsed();
            let mut tally = tally.lock().unwrap();
            if let Ok(a) = &answer {
                assert_eq!(a.status, 200, "{}", a.body);
                tally.reads.push(took);
            }
            tally.count("reads", answer.is_ok());
        }));
    }
    // The server's resident memory, sampled.
    {
        let (server, max_rss) = (server.clone(), max_rss.clone());
        threads.push(lane(&stop, Duration::from_millis(250), move || {
            if let Some(rss) = rss(server.pid.load(Ordering::SeqCst)) {
                max_rss.fetch_max(rss, Ordering::SeqCst);
            }
        }));
    }

    let began = Instant::now();
    let mut kills: Vec<Instant> = Vec::new();
    while began.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(
            KILL_EVERY.min(Duration::from_secs(secs).saturating_sub(began.elapsed())),
        );
        if began.elapsed() + Duration::from_secs(1) < Duration::from_secs(secs) {
            kills.push(Instant::now());
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            child = start(&store, &smtp, &server);
        }
    }
    stop.store(true, Ordering::SeqCst);
    for thread in threads {
        thread.join().expect("a load thread failed");
    }

    // Everything accepted ends; what waits for a person is approved.
    let addr = server.addr();
    let tally = Arc::try_unwrap(tally).ok().unwrap().into_inner().unwrap();
    let mut ended: HashMap<String, Value> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let wanted: Vec<&String> = tally.runs.iter().chain(&tally.messages).collect();
    let spare = Mutex::new(Tally::default());
    for id in &wanted {
        loop {
            let run = call(&addr, "GET", &format!("/v1/agents/runs/{id}"), &key, None).unwrap();
            assert_eq!(run.status, 200, "{}", run.body);
            let status = run.body["status"].as_str().unwrap_or_default().to_owned();
            if !matches!(status.as_str(), "queued" | "running") {
                assert!(
                    matches!(status.as_str(), "succeeded" | "failed"),
                    "{:#}",
                    run.body
                );
                ended.insert((*id).clone(), run.body);
                break;
            }
            assert!(Instant::now() < deadline, "never ended: {:#}", run.body);
            approve_pending(&addr, &key, &spare);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // No end changed afterwards.
    for (id, first) in &ended {
        let now = call(&addr, "GET", &format!("/v1/agents/runs/{id}"), &key, None)
            .unwrap()
            .body;
        assert_eq!(
            (&now["status"], &now["result"], &now["error"]),
            (&first["status"], &first["result"], &first["error"]),
            "run {id} changed after it ended"
        );
    }
    // No action left undecided or half-sent (the listing of each such
    // state is short); none sent twice; every one a run delivered has its
    // one message.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let undone: Vec<String> = ["pending", "approved", "executing"]
            .iter()
            .flat_map(|state| actions(&addr, &key, state))
            .collect();
        if undone.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "actions left undone: {undone:?}");
        approve_pending(&addr, &key, &spare);
        std::thread::sleep(Duration::from_millis(200));
    }
    let mailed = smtp.messages_by_action();
    let mut by_state: HashMap<String, usize> = HashMap::new();
    for (action, count) in &mailed {
        let shown = call(
            &addr,
            "GET",
            &format!("/v1/agents/action-requests/{action}"),
            &key,
            None,
        )
        .unwrap();
        assert_eq!(
            shown.status, 200,
            "a message of {action}, which is not stored: {}",
            shown.body
        );
        let state = shown.body["state"].as_str().unwrap().to_owned();
        assert_eq!(*count, 1, "{action} ({state}) sent {count} times");
        assert!(
            matches!(state.as_str(), "delivered" | "unknown"),
            "{action} is {state} but was sent"
        );
        *by_state.entry(state).or_default() += 1;
    }
    let mut delivered_by_runs = 0;
    for run in ended.values() {
        if run["result"]["status"] == "delivered" {
            let action = run["result"]["action"].as_str().unwrap();
            assert_eq!(
                mailed.get(action),
                Some(&1),
                "{action} delivered without its message"
            );
            delivered_by_runs += 1;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let mut reads = tally.reads.clone();
    reads.sort();
    let p = |q: f64| reads[((reads.len() as f64 * q) as usize).min(reads.len() - 1)];
    let (p50, p99) = (p(0.50), p(0.99));
    let rss = max_rss.load(Ordering::SeqCst);
    let served: u64 = tally.served.values().sum();
    eprintln!(
        "soak: {secs} s, {} kills survived; {served} requests served ({:?}), {} refused while restarting; \
         runs {} ended, messages {}; emails by action state {by_state:?} ({delivered_by_runs} delivered by runs), {} approved by a person; \
         read p50 {p50:?} p99 {p99:?}; server RSS at most {:.1} MiB",
        kills.len(),
        tally.served,
        tally.refused.len(),
        ended.len(),
        tally.messages.len(),
        tally.approved + spare.lock().unwrap().approved,
        rss as f64 / (1024.0 * 1024.0),
    );
    assert!(!kills.is_empty() || secs < 16, "no kill");
    // A request finds no server only while it is being started again.
    for refused in &tally.refused {
        assert!(
            kills
                .iter()
                .any(|kill| *refused >= *kill && *refused - *kill <= RESTART_BOUND),
            "a request was refused {:?} into the soak, not within {RESTART_BOUND:?} of a kill",
            *refused - began
        );
    }
    assert!(
        tally.runs.len() > 10,
        "too little load: {} runs",
        tally.runs.len()
    );
    assert!(
        tally.served("mcp") > 10 && !tally.messages.is_empty(),
        "too little load"
    );
    assert!(
        by_state.get("delivered").copied().unwrap_or(0) > 0,
        "{by_state:?}"
    );
    assert!(p99 <= P99_BOUND, "read p99 {p99:?} over {P99_BOUND:?}");
    assert!(
        rss > 0 && rss <= RSS_BOUND,
        "server RSS {rss} over {RSS_BOUND}"
    );
}

/// Approves every action waiting for a person, with its digest.
fn approve_pending(addr: &str, key: &str, tally: &Mutex<Tally>) {
    let Ok(listed) = call(
        addr,
        "GET",
        "/v1/agents/action-requests?state=pending",
        key,
        None,
    ) else {
        return;
    };
    for action in listed.body["actionRequests"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let id = action["id"].as_str().unwrap();
        let Ok(shown) = call(
            addr,
            "GET",
            &format!("/v1/agents/action-requests/{id}"),
            key,
            None,
        ) else {
            return;
        };
        let digest = shown.body["digest"]
            .as_str()
            .unwrap_or_else(|| panic!("a digest: {}", shown.body))
            .to_owned();
        let body = json!({"digest": digest, "reason": "the soak's person"});
        if let Ok(a) = call(
            addr,
            "POST",
            &format!("/v1/agents/action-requests/{id}/approve"),
            key,
            Some(&body),
        ) {
            // 409: decided meanwhile (an earlier answer lost to a kill).
            assert!(
                matches!(a.status, 200 | 409),
                "approving {id}: {} {}",
                a.status,
                a.body
            );
            if a.status == 200 {
                tally.lock().unwrap().approved += 1;
            }
        }
    }
}

/// The ids of the actions in `state`.
fn actions(addr: &str, key: &str, state: &str) -> Vec<String> {
    let path = format!("/v1/agents/action-requests?state={state}");
    let listed = call(addr, "GET", &path, key, None).unwrap();
    assert_eq!(listed.status, 200, "{}", listed.body);
    listed.body["actionRequests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Resident memory of process `pid`, in bytes.
fn rss(pid: u64) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The examples without their budget (its daily email cap would refuse
/// some reminders), activated in a new store in `dir`.
fn examples_without_budget(dir: &Path) -> PathBuf {
    let release = hane_test_support::examples_copy();
    std::fs::remove_dir_all(release.path().join("budgets")).unwrap();
    let store = dir.join("hane.db");
    ok(&hane_on(
        &store,
        &["release", "activate", release.path().to_str().unwrap()],
    ));
    store
}
