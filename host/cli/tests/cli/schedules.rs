//! `hane serve` starts a schedule's runs once per tick: two servers on one
//! store, a schedule firing every two seconds, and what the store says
//! afterwards through `hane schedules ticks` and `hane runs list`.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::common::{failed, hane_on, json, ok, operator_key, text};

const SCHEDULE: &str = "every-two-seconds";
const AGENT: &str = "vehicle-check-scripted";
const VEHICLE: &str = "架空 300 あ 10-02";

/// Copies the directory `from` into `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The examples plus a schedule of the scripted vehicle check, every two
/// seconds (six fields: seconds first).
fn release(dir: &Path) -> std::path::PathBuf {
    let release = dir.join("release");
    copy_dir(&hane_test_support::examples(), &release);
    std::fs::create_dir_all(release.join("schedules")).unwrap();
    std::fs::write(
        release.join("schedules").join(format!("{SCHEDULE}.yaml")),
        format!(
            "apiVersion: agents/v1alpha1
kind: Schedule
metadata:
  name: {SCHEDULE}
spec:
  cron: \"*/2 * * * * *\"
  timeZone: Asia/Tokyo
  agent: {AGENT}
  input: {{ vehicle: \"{VEHICLE}\" }}
"
        ),
    )
    .unwrap();
    release
}

/// A running `hane serve`, killed when dropped; its stderr read as it
/// comes.
struct Server {
    child: Child,
    stderr: Option<JoinHandle<String>>,
}

impl Server {
    /// Starts `hane serve` on a free loopback port and waits until it
    /// listens.
    fn start(store: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hane"))
            .args(["serve", "--listen", "127.0.0.1:0", "--store"])
            .arg(store)
            .env("HANE_CACHE_DIR", hane_test_support::component_cache())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run hane serve");
        let (listening, heard) = mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                if line.starts_with("listening on ") {
                    let _ = listening.send(());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let mut server = Self {
            child,
            stderr: Some(reader),
        };
        if heard.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = server.child.kill();
            let said = server.stderr.take().unwrap().join().unwrap();
            panic!("hane serve did not start listening: {said}");
        }
        server
    }

    /// Stops it as a person would (SIGTERM) and returns what it said.
    fn stop(mut self) -> String {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        let said = self.stderr.take().unwrap().join().unwrap();
        assert_eq!(exit.code(), Some(0), "{exit}: {said}");
        said
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_schedule_starts_one_run_per_tick_with_two_servers_on_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let release = release(dir.path());
    let activated = ok(&hane_on(
        &store,
        &["release", "activate", release.to_str().unwrap()],
    ));
    assert!(activated.contains(", 1 schedule, "), "{activated}");
    operator_key(&store);

    let listed = json(&hane_on(&store, &["schedules", "list", "--json"]));
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["name"], SCHEDULE);
    assert_eq!(listed[0]["agent"], AGENT);
    assert_eq!(listed[0]["timeZone"], "Asia/Tokyo");
    let next = listed[0]["nextTickMs"].as_u64().unwrap();
    let now = now_ms();
    assert!(
        next > now - 1000 && next <= now + 2000 && next.is_multiple_of(2000),
        "{next} at {now}"
    );
    assert!(
        listed[0]["nextTickLocal"]
            .as_str()
            .unwrap()
            .ends_with(" JST"),
        "{listed:?}"
    );

    let first = Server::start(&store);
    let second = Server::start(&store);
    let both_from = now_ms();
    std::thread::sleep(Duration::from_millis(8000));
    let both_until = now_ms();
    let said = [first.stop(), second.stop()];

    let ticks = json(&hane_on(
        &store,
        &["schedules", "ticks", "--schedule", SCHEDULE, "--json"],
    ));
    let mut ticks: Vec<Value> = ticks.as_array().unwrap().clone();
    ticks.reverse();
    let times: Vec<u64> = ticks
        .iter()
        .map(|t| t["tickMs"].as_u64().unwrap())
        .collect();
    // Every tick while both ran was handled: ticks fall every 2 s, and
    // each process handles those after it first saw the schedule. (Half a
    // second before the stop, so that a tick being claimed as the servers
    // stop is not counted on.)
    let expected = (both_from / 2000 + 1..=(both_until - 500) / 2000).count();
    assert!(
        times.len() >= expected && expected >= 3,
        "{} ticks handled in {} ms with both serving: {times:?}\n{said:?}",
        times.len(),
        both_until - both_from
    );
    // Consecutive: none missed in between, none twice.
    for pair in times.windows(2) {
        assert_eq!(pair[1] - pair[0], 2000, "{times:?}");
    }
    let mut runs_started = Vec::new();
    for tick in &ticks {
        assert_eq!(tick["outcome"], "started", "{tick}\n{said:?}");
        runs_started.push(tick["run"].as_str().unwrap().to_owned());
    }

    let runs = json(&hane_on(
        &store,
        &[
            "runs", "list", "--agent", AGENT, "--limit", "1000", "--json",
        ],
    ));
    let runs = runs.as_array().unwrap();
    let mut run_ids: Vec<String> = runs
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    run_ids.sort();
    runs_started.sort();
    assert_eq!(run_ids, runs_started, "one run per tick, each tick's own");
    for run in runs {
        assert_eq!(run["input"]["vehicle"], VEHICLE, "{run}");
    }
    // The claims carry the processes' leases: HOST/PID/DIGITS.
    let claimers: std::collections::BTreeSet<&str> = ticks
        .iter()
        .map(|t| t["claimedBy"].as_str().unwrap())
        .collect();
    assert!(
        claimers.iter().all(|c| c.split('/').count() == 3),
        "{claimers:?}"
    );

    // The same, for people: newest first, a line a tick.
    let table = ok(&hane_on(&store, &["schedules", "ticks", "--limit", "2"]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    let newest = ticks.last().unwrap();
    assert!(
        lines[0].contains(&format!(
            "{SCHEDULE}  started  {}",
            newest["run"].as_str().unwrap()
        )) && lines[0].starts_with(newest["tick"].as_str().unwrap()),
        "{table}"
    );
}

#[test]
fn without_a_release_there_is_nothing_to_list() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let said = failed(&hane_on(&store, &["schedules", "list"]), 2);
    assert!(said.contains("no release is active"), "{said}");
    let out = hane_on(&store, &["schedules", "ticks"]);
    assert_eq!(ok(&out), "");
    assert!(
        text(&out.stderr).contains("no ticks handled yet"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        json(&hane_on(&store, &["schedules", "ticks", "--json"])),
        serde_json::json!([])
    );
}

#[test]
fn ticks_of_a_schedule_that_does_not_exist_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    for args in [
        &["schedules", "ticks", "--schedule", "NO-SUCH"][..],
        &["schedules", "ticks", "--schedule", "NO-SUCH", "--json"],
    ] {
        let said = failed(&hane_on(&store, args), 2);
        assert!(
            said.contains("no schedule `NO-SUCH`") && said.contains("has no schedules"),
            "{said}"
        );
    }
}
