//! Crash tests: a real host process (`crash-host`) is killed with SIGKILL
//! at chosen points and started again on the same store. Whatever the
//! point, no accepted input is lost or handled twice, and no `write`
//! operation runs again; `read` operations do.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hane_core::{
    Impact, InputKind, Limits, OperationId, OperationState, Policy, SessionEvent, SessionId,
};
use hane_store::{SessionStore, SqliteConfig, SqliteStore};
use serde_json::json;

use crate::harness;

/// Long enough that a kill after the journal line lands mid-operation.
const SLOW: u64 = 400_000_000;

enum KillAt {
    /// When the host prints a line starting with this; the host holds
    /// there (`CRASH_HOST_HOLD`) until the kill.
    Line(&'static str),
    /// When the journal holds this line this many times: the operation
    /// has had its effect and is still running.
    Journal(&'static str, usize),
}

struct Scenario {
    dir: tempfile::TempDir,
}

impl Scenario {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("journal")).unwrap();
        let step = |input: &str, impact: Impact, iterations: u64| {
            json!({
                "input": input,
                "impact": impact,
                "component": hane_builtins::test_programs::GUEST_JOURNAL,
                "tool": "test.journal",
                "tool_input": {"path": "/journal/log.txt", "line": input, "iterations": iterations},
                "policy": Policy {
                    files: vec![format!("{}:/journal:rw", dir.path().join("journal").display()).parse().unwrap()],
                    ..Policy::default()
                },
                "limits": Limits { fuel: u64::MAX / 2, timeout: hane_core::Duration::seconds(120), ..Limits::default() },
            })
        };
        let plan = json!({
            "store": dir.path().join("hane.db"),
            "session_file": dir.path().join("session"),
            "cache_dir": harness::cache_dir(),
            "steps": [
                step("in-1", Impact::Write, SLOW),
                step("in-2", Impact::Read, SLOW),
                step("in-3", Impact::Write, 0),
            ],
        });
        std::fs::write(dir.path().join("plan.json"), plan.to_string()).unwrap();
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn start(&self, hold: Option<&str>) -> Child {
        let mut command = Command::new(env!("CARGO_BIN_EXE_crash-host"));
        command
            .arg(self.path("plan.json"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        match hold {
            Some(prefix) => command.env("CRASH_HOST_HOLD", prefix),
            None => command.env_remove("CRASH_HOST_HOLD"),
        };
        command.spawn().expect("start crash-host")
    }

    /// Runs the host until `at`, then kills it with SIGKILL. Returns what
    /// it printed.
    fn run_and_kill(&self, at: KillAt) -> Vec<String> {
        let hold = match at {
            KillAt::Line(prefix) => Some(prefix),
            KillAt::Journal(..) => None,
        };
        let mut child = self.start(hold);
        let stdout = child.stdout.take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        match at {
            KillAt::Line(prefix) => {
                let mut reader = BufReader::new(stdout);
                let mut seen = Vec::new();
                loop {
                    assert!(
                        Instant::now() < deadline,
                        "the host never printed `{prefix}`"
                    );
                    let mut line = String::new();
                    let n = reader.read_line(&mut line).unwrap();
                    assert!(n > 0, "the host ended before `{prefix}`: {seen:?}");
                    seen.push(line.trim_end().to_owned());
                    if line.starts_with(prefix) {
                        break;
                    }
                }
                kill(child);
                seen
            }
            KillAt::Journal(line, count) => {
                // Drained on a thread so the host never blocks on a full pipe.
                let lines = std::thread::spawn(move || {
                    BufReader::new(stdout)
                        .lines()
                        .map_while(Result::ok)
                        .collect::<Vec<_>>()
                });
                while self.journal_count(line) < count {
                    assert!(
                        Instant::now() < deadline,
                        "the journal never got `{line}` {count} times"
                    );
                    assert!(
                        child.try_wait().unwrap().is_none(),
                        "the host ended before writing `{line}` {count} times"
                    );
                    std::thread::sleep(Duration::from_millis(2));
                }
                kill(child);
                lines.join().unwrap()
            }
        }
    }

    /// Runs the host to its end.
    fn run_to_end(&self) -> Vec<String> {
        let output = self.start(None).wait_with_output().unwrap();
        let lines: Vec<String> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert!(output.status.success(), "crash-host failed: {lines:?}");
        assert_eq!(lines.last().map(String::as_str), Some("done"), "{lines:?}");
        lines
    }

    /// How many whole lines (newline included) the journal holds equal to
    /// `line`; a line still being written does not count.
    fn journal_count(&self, line: &str) -> usize {
        std::fs::read_to_string(self.path("journal/log.txt"))
            .unwrap_or_default()
            .split_inclusive('\n')
            .filter(|l| l.strip_suffix('\n') == Some(line))
            .count()
    }

    /// The final state, read from the store after the host has stopped.
    fn outcome(&self) -> Outcome {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let store = SqliteStore::open(self.path("hane.db"), &SqliteConfig::new()).unwrap();
            let session: SessionId = std::fs::read_to_string(self.path("session"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            let events = store.read(&session, 0..u64::MAX).await.unwrap();
            let mut outcome = Outcome::default();
            for recorded in &events {
                match &recorded.event {
                    SessionEvent::InputAccepted { input } => match &input.kind {
                        InputKind::Crash { operation, .. } => {
                            outcome.crash_inputs += 1;
                            outcome.crashed.extend(operation.iter().cloned());
                        }
                        _ => *outcome.accepted.entry(input.id.to_string()).or_default() += 1,
                    },
                    SessionEvent::InputHandled { input } => {
                        *outcome.handled.entry(input.to_string()).or_default() += 1;
                    }
                    SessionEvent::ToolCallRecorded {
                        call, operations, ..
                    } => {
                        let line = call.input.to_value().unwrap()["line"]
                            .as_str()
                            .unwrap()
                            .to_owned();
                        for op in operations {
                            outcome.ids.insert(line.clone(), op.id.clone());
                            let record = store.operation(&op.id).await.unwrap();
                            outcome
                                .operations
                                .insert(line.clone(), (record.state, record.attempts));
                        }
                    }
                    _ => {}
                }
            }
            outcome
        })
    }

    /// What holds whatever the kill point.
    fn check_invariants(&self) -> Outcome {
        let outcome = self.outcome();
        for input in ["in-1", "in-2", "in-3"] {
            assert_eq!(
                outcome.accepted.get(input),
                Some(&1),
                "{input} accepted once: {outcome:?}"
            );
            assert_eq!(
                outcome.handled.get(input),
                Some(&1),
                "{input} handled once: {outcome:?}"
            );
        }
        assert_eq!(outcome.operations.len(), 3, "{outcome:?}");
        for (line, (state, _)) in &outcome.operations {
            assert!(state.is_final(), "{line} is {state} after the last run");
        }
        // Writes never run twice.
        for line in ["in-1", "in-3"] {
            let count = self.journal_count(line);
            assert!(count <= 1, "{line} ran {count} times");
            if outcome.operations[line].0 == OperationState::Succeeded {
                assert_eq!(count, 1, "{line} succeeded without its effect");
            }
        }
        // Reads end up done.
        assert_eq!(
            outcome.operations["in-2"].0,
            OperationState::Succeeded,
            "{outcome:?}"
        );
        outcome
    }
}

fn kill(mut child: Child) {
    // `Child::kill` sends SIGKILL: no destructor, no flush, no goodbye.
    child.kill().unwrap();
    child.wait().unwrap();
}

#[derive(Debug, Default)]
struct Outcome {
    accepted: HashMap<String, usize>,
    handled: HashMap<String, usize>,
    crash_inputs: usize,
    /// The operations the crash inputs name.
    crashed: Vec<OperationId>,
    /// By journal line: state and attempts.
    operations: HashMap<String, (OperationState, u32)>,
    /// By journal line: the operation's id.
    ids: HashMap<String, OperationId>,
}

impl Outcome {
    /// How many crash inputs name the operation that wrote `line`.
    fn crashes_of(&self, line: &str) -> usize {
        let id = &self.ids[line];
        self.crashed.iter().filter(|op| *op == id).count()
    }
}

#[test]
pub(crate) fn without_a_crash_every_input_is_handled_once_despite_redelivery() {
    let scenario = Scenario::new();
    let lines = scenario.run_to_end();
    assert_eq!(
        lines.iter().filter(|l| l.ends_with(" accepted")).count(),
        3,
        "{lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.ends_with(" duplicate")).count(),
        6,
        "{lines:?}"
    );
    let outcome = scenario.check_invariants();
    assert!(
        outcome
            .operations
            .values()
            .all(|(s, _)| *s == OperationState::Succeeded)
    );
    assert_eq!(outcome.crash_inputs, 0);
    // A second run redelivers everything and does nothing.
    let lines = scenario.run_to_end();
    assert!(lines.iter().all(|l| !l.ends_with(" accepted")), "{lines:?}");
    assert_eq!(scenario.journal_count("in-1"), 1);
}

#[test]
fn an_input_accepted_before_a_crash_is_handled_after_it() {
    let scenario = Scenario::new();
    scenario.run_and_kill(KillAt::Line("delivered in-1 accepted"));
    let lines = scenario.run_to_end();
    assert!(lines.contains(&"unhandled in-1".to_owned()), "{lines:?}");
    let outcome = scenario.check_invariants();
    assert_eq!(outcome.operations["in-1"].0, OperationState::Succeeded);
}

#[test]
fn an_operation_committed_before_a_crash_runs_at_most_once() {
    let scenario = Scenario::new();
    scenario.run_and_kill(KillAt::Line("committed in-1"));
    scenario.run_to_end();
    scenario.check_invariants();
}

#[test]
fn a_write_operation_killed_midway_becomes_unknown_and_never_runs_again() {
    let scenario = Scenario::new();
    scenario.run_and_kill(KillAt::Journal("in-1", 1));
    let lines = scenario.run_to_end();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("recovered") && l.ends_with("unknown=1")),
        "{lines:?}"
    );
    let outcome = scenario.check_invariants();
    assert_eq!(outcome.operations["in-1"].0, OperationState::Unknown);
    assert_eq!(scenario.journal_count("in-1"), 1);
    assert_eq!(outcome.crash_inputs, 1);
    // Recovering again changes nothing.
    scenario.run_to_end();
    assert_eq!(scenario.outcome().crash_inputs, 1);
    assert_eq!(scenario.journal_count("in-1"), 1);
}

#[test]
fn a_read_operation_killed_midway_runs_again_even_twice() {
    let scenario = Scenario::new();
    scenario.run_and_kill(KillAt::Journal("in-2", 1));
    // And again while it runs the second time.
    scenario.run_and_kill(KillAt::Journal("in-2", 2));
    scenario.run_to_end();
    let outcome = scenario.check_invariants();
    assert_eq!(scenario.journal_count("in-2"), 3);
    assert_eq!(outcome.operations["in-2"], (OperationState::Succeeded, 3));
    assert_eq!(outcome.crash_inputs, 2);
}

#[test]
fn a_crash_after_an_operation_settled_repeats_nothing() {
    let scenario = Scenario::new();
    scenario.run_and_kill(KillAt::Line("delivered in-2 accepted"));
    scenario.run_to_end();
    let outcome = scenario.check_invariants();
    assert_eq!(outcome.operations["in-1"], (OperationState::Succeeded, 1));
    // The kill lands right after in-2 is accepted; in-1 had settled
    // before it and must not be touched by recovery.
    assert_eq!(outcome.crashes_of("in-1"), 0);
}
