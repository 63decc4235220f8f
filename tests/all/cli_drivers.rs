//! The CLI drivers against the real CLIs at the versions
//! `tests/clis/package.json` pins, in real containers (bubblewrap), with
//! the Model Gateway replaying `tests/fixtures/cli-drivers`' recording
//! through hane's transcript of the CLI's requests (see
//! `hane_coordinator`'s `drivers::cli::transcript`: hane's tools under their
//! own names, the CLI's own tools as it names them, the prompt hane wrote
//! exactly). The CLIs come from `HANE_TEST_CLIS` (else
//! `target/test-env/clis/node_modules`), bubblewrap from `HANE_TEST_BWRAP`
//! (else `PATH`); a test fails, saying to run `cargo xtask provision`, when
//! they are missing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hane_coordinator::{AgentRuntime, CliConfig, RunError, StartRun};
use hane_core::RunStatus;
use serde_json::json;

use crate::agents::release_with;

const FOUND: &str = "架空 300 あ 10-02";
const UNKNOWN: &str = "架空 999 ん 00-00";
/// The recording gives up on it without a result.
const GIVES_UP: &str = "架空 000 な 00-00";
/// In no turn of the recording: every model call fails, and the CLI
/// retries until hane stops it.
const UNRECORDED: &str = "架空 111 な 11-11";

/// One CLI test at a time: they count the CLI's processes on the host,
/// and the CLIs are CPU-bound at start on a 2-core machine.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The installed CLIs.
fn clis() -> PathBuf {
    let dir = std::env::var_os("HANE_TEST_CLIS")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || hane_test_support::repository().join("target/test-env/clis/node_modules"),
            PathBuf::from,
        );
    assert!(
        dir.join("@openai/codex/package.json").is_file(),
        "the coding CLIs are not installed in {}: run `cargo xtask provision` and export what it prints",
        dir.display()
    );
    dir
}

/// bubblewrap.
fn bwrap() -> Arc<dyn hane_container::Runtime> {
    let runtime = match std::env::var_os("HANE_TEST_BWRAP").filter(|p| !p.is_empty()) {
        Some(path) => hane_container::Bubblewrap::new(PathBuf::from(path)),
        None => hane_container::Bubblewrap::find()
            .expect("bubblewrap is not installed: run `cargo xtask provision`"),
    };
    Arc::new(runtime)
}

/// The vehicle-check agent of `examples/`, unchanged but for its name
/// and driver (and the extra `extra` lines under `spec`).
fn vehicle_check(name: &str, driver: &str, extra: &str) -> String {
    let text =
        std::fs::read_to_string(hane_test_support::examples().join("agents/vehicle-check.yaml"))
            .unwrap();
    let text = text
        .replace("name: vehicle-check\n", &format!("name: {name}\n"))
        .replace("driver: opencode", &format!("driver: {driver}"));
    if extra.is_empty() {
        text
    } else {
        text.replace("spec:\n", &format!("spec:\n{extra}"))
    }
}

/// A runtime on a release with `agents`, the CLI drivers configured, and
/// hane's HTTP server on a loopback port.
async fn served(dir: &Path, agents: &[(&str, String)]) -> AgentRuntime {
    let files: Vec<(&str, &str)> = agents.iter().map(|(f, t)| (*f, t.as_str())).collect();
    let release = release_with(dir, &files);
    let fixtures = hane_test_support::repository().join("tests/fixtures/cli-drivers");
    for sub in ["providers", "recordings"] {
        std::fs::create_dir_all(release.join(sub)).unwrap();
        for entry in std::fs::read_dir(fixtures.join(sub)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), release.join(sub).join(entry.file_name())).unwrap();
        }
    }
    let mut cli = CliConfig::new();
    cli.clis(clis()).container(bwrap());
    let mut config = crate::agents::config();
    config.cli(cli);
    let runtime = AgentRuntime::open(&dir.join("hane.db"), &config).unwrap();
    runtime.activate(&release).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    runtime.set_server_address(listener.local_addr().unwrap());
    tokio::spawn(hane_server::serve(
        listener,
        runtime.clone(),
        std::future::pending(),
    ));
    runtime
}

fn start(agent: &str, vehicle: &str) -> StartRun {
    StartRun {
        agent: agent.to_owned(),
        input: json!({ "vehicle": vehicle }),
        shadow: false,
    }
}

/// Whether any process still runs the CLI of the run (its per-run
/// directory is in its environment, its binary in its command line).
fn cli_processes(binary: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmd| String::from_utf8_lossy(cmd).starts_with(binary))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_finds_a_known_vehicle_and_hands_over_an_unknown_one() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let runtime = served(
        dir.path(),
        &[(
            "codex.yaml",
            vehicle_check("vehicle-check-codex", "codex", ""),
        )],
    )
    .await;
    let run = runtime
        .run_to_end(start("vehicle-check-codex", FOUND))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let result = run.result.unwrap().to_value().unwrap();
    assert_eq!(result["status"], "found");
    assert_eq!(result["model"], "Toyota Hiace Van");
    let tools: Vec<&str> = run.tool_calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["data.find_record", "submit_result"]);
    assert_eq!(run.tokens_used, 900 + 30 + 1000 + 40);
    let output = runtime.cli_output(&run.id).await.unwrap().unwrap();
    assert_eq!(output.driver, "codex");
    assert_eq!(output.version, "0.171.0");
    assert!(
        output.events.iter().any(|e| e.contains("\"turn.started\"")),
        "{:#?}",
        output.events
    );

    let run = runtime
        .run_to_end(start("vehicle-check-codex", UNKNOWN))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let result = run.result.unwrap().to_value().unwrap();
    assert_eq!(result["status"], "handed_over");
    let tasks = runtime.tasks(&run.id).await.unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].assignment, "fleet-desk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_that_exits_without_a_result_fails_the_run_with_its_error() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let runtime = served(
        dir.path(),
        &[(
            "codex.yaml",
            vehicle_check("vehicle-check-codex", "codex", ""),
        )],
    )
    .await;
    let run = runtime
        .run_to_end(start("vehicle-check-codex", GIVES_UP))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let error = run.error.unwrap();
    assert!(
        error.starts_with("codex: it exited (exit code 0) without a result"),
        "{error}"
    );
    assert!(run.result.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_mid_run_kills_the_container_and_max_seconds_ends_limit_exceeded() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let runtime = served(
        dir.path(),
        &[
            (
                "codex.yaml",
                vehicle_check("vehicle-check-codex", "codex", ""),
            ),
            (
                "short.yaml",
                vehicle_check("vehicle-check-short", "codex", "")
                    .replace("maxSeconds: 120", "maxSeconds: 2"),
            ),
        ],
    )
    .await;
    let binary = clis()
        .join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
        .display()
        .to_string();

    // Every model call of this vehicle fails and codex retries: it runs
    // until hane stops it.
    let run = runtime
        .start(start("vehicle-check-codex", UNRECORDED))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while cli_processes(&binary) == 0 {
        assert!(Instant::now() < deadline, "codex never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cancelled_at = Instant::now();
    runtime.cancel(&run.id).await.unwrap();
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::Cancelled);
    assert!(cancelled_at.elapsed() < Duration::from_secs(3));
    assert_eq!(
        cli_processes(&binary),
        0,
        "the container outlived the cancel"
    );
    let output = runtime.cli_output(&run.id).await.unwrap().unwrap();
    assert_eq!(output.exit, "stopped by hane");

    let started = Instant::now();
    let run = runtime
        .run_to_end(start("vehicle-check-short", UNRECORDED))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::LimitExceeded, "{:?}", run.error);
    assert!(run.error.unwrap().contains("maxSeconds"));
    assert!(started.elapsed() < Duration::from_secs(6));
    assert_eq!(cli_processes(&binary), 0);
}

#[tokio::test]
async fn a_cli_run_is_refused_when_its_profile_pins_another_version_or_nothing_is_configured() {
    let dir = tempfile::tempdir().unwrap();
    let pinned = vehicle_check(
        "vehicle-check-pinned",
        "codex",
        "  cliProfile:\n    cliVersion: 0.170.0\n    image: codex-baseline\n",
    );
    let runtime = served(dir.path(), &[("pinned.yaml", pinned)]).await;
    let err = runtime
        .start(start("vehicle-check-pinned", FOUND))
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::DriverUnavailable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("0.170.0") && text.contains("0.171.0"),
        "{text}"
    );

    // No CLIs, no container runtime, no server.
    let bare = tempfile::tempdir().unwrap();
    let release = release_with(
        bare.path(),
        &[(
            "codex.yaml",
            &vehicle_check("vehicle-check-codex", "codex", ""),
        )],
    );
    let fixtures = hane_test_support::repository().join("tests/fixtures/cli-drivers");
    for sub in ["providers", "recordings"] {
        std::fs::create_dir_all(release.join(sub)).unwrap();
        for entry in std::fs::read_dir(fixtures.join(sub)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), release.join(sub).join(entry.file_name())).unwrap();
        }
    }
    let runtime =
        AgentRuntime::open(&bare.path().join("hane.db"), &crate::agents::config()).unwrap();
    runtime.activate(&release).await.unwrap();
    let err = runtime
        .start(start("vehicle-check-codex", FOUND))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("no directory of installed CLIs"),
        "{err}"
    );
}
