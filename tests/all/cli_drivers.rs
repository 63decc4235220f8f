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

use hane_cli_drivers::{CliConfig, ServerAddress};
use hane_coordinator::{AgentRuntime, RunError, StartRun};
use hane_core::RunStatus;
use serde_json::json;

use crate::agents::release_with;

pub(crate) const FOUND: &str = "架空 300 あ 10-02";
pub(crate) const UNKNOWN: &str = "架空 999 ん 00-00";
/// The recording makes the model call data.get_record, a tool of the
/// release outside the agent's tools.
const FORBIDDEN: &str = "架空 222 ら 22-22";
/// The recording gives up on it without a result.
const GIVES_UP: &str = "架空 000 な 00-00";
/// In no turn of the recording.
const UNRECORDED: &str = "架空 111 な 11-11";

/// A provider whose endpoint refuses every connection: the Model Gateway
/// answers each call with a 502, and a CLI retries it until hane stops
/// the run.
const UNREACHABLE: &str = "apiVersion: platform/v1alpha1
kind: ModelProvider
metadata:
  name: unreachable
spec:
  api: chat-completions
  baseUrl: http://127.0.0.1:9/v1
  models:
    - name: nothing
      contextWindow: 200000
      maxOutputTokens: 4096
";

/// The `spec` line that points an agent at [`UNREACHABLE`].
const UNREACHABLE_MODEL: &str = "  model: unreachable/nothing\n";

/// One CLI test at a time: they count the CLI's processes on the host,
/// and the CLIs are CPU-bound at start on a 2-core machine.
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The installed CLIs.
pub(crate) fn clis() -> PathBuf {
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
pub(crate) fn bwrap() -> Arc<dyn hane_container::Runtime> {
    let runtime = match std::env::var_os("HANE_TEST_BWRAP").filter(|p| !p.is_empty()) {
        Some(path) => hane_container::Bubblewrap::new(PathBuf::from(path)),
        None => hane_container::Bubblewrap::find()
            .expect("bubblewrap is not installed: run `cargo xtask provision`"),
    };
    Arc::new(runtime)
}

/// The vehicle-check agent of `examples/`, unchanged but for its name
/// and driver (and the extra `extra` lines under `spec`).
pub(crate) fn vehicle_check(name: &str, driver: &str, extra: &str) -> String {
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

/// A release in `dir` with `agents` and the recorded provider of
/// `tests/fixtures/cli-drivers`.
pub(crate) fn release_with_recording(dir: &Path, agents: &[(&str, String)]) -> PathBuf {
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
    release
}

/// A runtime on a release with `agents`, the CLI drivers configured, and
/// hane's HTTP server on a loopback port.
async fn served(dir: &Path, agents: &[(&str, String)]) -> AgentRuntime {
    let mut cli = CliConfig::new();
    cli.clis(clis()).container(bwrap());
    served_with(dir, agents, cli).await
}

/// [`served`] with `cli` as the CLI drivers' configuration.
pub(crate) async fn served_with(
    dir: &Path,
    agents: &[(&str, String)],
    cli: CliConfig,
) -> AgentRuntime {
    let release = release_with_recording(dir, agents);
    let server = cli.server().clone();
    let runtime = open_with(dir, cli);
    runtime.activate(&release).await.unwrap();
    serve(&runtime, &server).await;
    runtime
}

/// A runtime on the store in `dir` with `cli` as the CLI drivers'
/// configuration, no release active.
pub(crate) fn open_with(dir: &Path, cli: CliConfig) -> AgentRuntime {
    let mut config = crate::agents::config();
    config.external_drivers(Arc::new(cli));
    AgentRuntime::open(&dir.join("hane.db"), &config).unwrap()
}

/// hane's HTTP server for `runtime` on a loopback port, told to the CLI
/// drivers through `server`.
pub(crate) async fn serve(runtime: &AgentRuntime, server: &ServerAddress) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    server.set(listener.local_addr().unwrap());
    tokio::spawn(hane_server::serve(
        listener,
        hane_coordinator::Services::new(runtime.clone()),
        std::future::pending(),
    ));
}

pub(crate) fn start(agent: &str, vehicle: &str) -> StartRun {
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
    let tasks = runtime.tasks(&run.id).await.unwrap().items;
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
                vehicle_check("vehicle-check-codex", "codex", UNREACHABLE_MODEL),
            ),
            (
                "short.yaml",
                vehicle_check("vehicle-check-short", "codex", UNREACHABLE_MODEL)
                    .replace("maxSeconds: 120", "maxSeconds: 2"),
            ),
            ("unreachable.yaml", UNREACHABLE.to_owned()),
        ],
    )
    .await;
    let binary = clis()
        .join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
        .display()
        .to_string();

    // Every model call fails upstream (a 502) and codex retries: it runs
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
async fn a_release_naming_an_image_is_refused_without_an_image_store_and_a_run_without_clis() {
    let dir = tempfile::tempdir().unwrap();
    let digest = format!("sha256:{}", "0".repeat(64));
    let pinned = vehicle_check(
        "vehicle-check-pinned",
        "codex",
        &format!("  cliProfile:\n    cliVersion: 0.171.0\n    image: {digest}\n"),
    );
    let release = release_with_recording(dir.path(), &[("pinned.yaml", pinned)]);
    let mut cli = CliConfig::new();
    cli.clis(clis()).container(bwrap());
    let runtime = open_with(dir.path(), cli);
    let err = runtime.activate(&release).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "pinned.yaml: spec.cliProfile.image: image {digest} cannot be found: no image store is configured (build it with `hane image build codex-baseline`)"
        )),
        "{text}"
    );
    assert!(matches!(runtime.release().await, Err(RunError::NoRelease)));

    // No CLIs, no container runtime, no server.
    let bare = tempfile::tempdir().unwrap();
    let release = release_with_recording(
        bare.path(),
        &[(
            "codex.yaml",
            vehicle_check("vehicle-check-codex", "codex", ""),
        )],
    );
    let runtime = open_with(bare.path(), CliConfig::new());
    runtime.activate(&release).await.unwrap();
    let err = runtime
        .start(start("vehicle-check-codex", FOUND))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("no directory of installed CLIs"),
        "{err}"
    );

    // A runtime given no external drivers at all refuses the run and a
    // release naming an image, saying why.
    let none = tempfile::tempdir().unwrap();
    let runtime =
        AgentRuntime::open(&none.path().join("hane.db"), &crate::agents::config()).unwrap();
    runtime.activate(&release).await.unwrap();
    let err = runtime
        .start(start("vehicle-check-codex", FOUND))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("this process runs no coding CLIs"),
        "{err}"
    );
    let pinned = release_with_recording(
        none.path(),
        &[(
            "pinned.yaml",
            vehicle_check(
                "vehicle-check-pinned",
                "codex",
                &format!("  cliProfile:\n    cliVersion: 0.171.0\n    image: {digest}\n"),
            ),
        )],
    );
    let err = runtime.activate(&pinned).await.unwrap_err().to_string();
    assert!(
        err.contains("pinned.yaml: spec.cliProfile.image: this process runs no coding CLIs"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_runs_the_vehicle_check_agent_unchanged_and_hands_over_an_unknown_one() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let manifest =
        std::fs::read_to_string(hane_test_support::examples().join("agents/vehicle-check.yaml"))
            .unwrap();
    let runtime = served(dir.path(), &[("vehicle-check.yaml", manifest)]).await;
    let started = Instant::now();
    let run = runtime
        .run_to_end(start("vehicle-check", FOUND))
        .await
        .unwrap();
    let output = runtime.cli_output(&run.id).await.unwrap().unwrap();
    assert_eq!(
        run.status,
        RunStatus::Succeeded,
        "{:?}\n{:#?}\n{}",
        run.error,
        output.events,
        output.stderr_tail
    );
    eprintln!("opencode, found: {:?}", started.elapsed());
    let result = run.result.unwrap().to_value().unwrap();
    assert_eq!(result["status"], "found");
    assert_eq!(result["model"], "Toyota Hiace Van");
    let tools: Vec<&str> = run.tool_calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["data.find_record", "submit_result"]);
    assert_eq!(run.tokens_used, 900 + 30 + 1000 + 40);
    assert_eq!(output.driver, "opencode");
    assert_eq!(output.version, "1.18.33");
    assert!(
        output.events.iter().any(|e| e.contains("\"tool_use\"")),
        "{:#?}",
        output.events
    );

    let started = Instant::now();
    let run = runtime
        .run_to_end(start("vehicle-check", UNKNOWN))
        .await
        .unwrap();
    let output = runtime.cli_output(&run.id).await.unwrap().unwrap();
    assert_eq!(
        run.status,
        RunStatus::Succeeded,
        "{:?}\n{:#?}\n{}",
        run.error,
        output.events,
        output.stderr_tail
    );
    eprintln!("opencode, handed over: {:?}", started.elapsed());
    let result = run.result.unwrap().to_value().unwrap();
    assert_eq!(result["status"], "handed_over");
    let tools: Vec<&str> = run.tool_calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(
        tools,
        ["data.find_record", "request_human_help", "submit_result"]
    );
    let tasks = runtime.tasks(&run.id).await.unwrap().items;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].assignment, "fleet-desk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_finds_a_known_vehicle_and_hands_over_an_unknown_one() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let runtime = served(
        dir.path(),
        &[(
            "claude.yaml",
            vehicle_check("vehicle-check-claude", "claude", ""),
        )],
    )
    .await;
    let started = Instant::now();
    let run = runtime
        .run_to_end(start("vehicle-check-claude", FOUND))
        .await
        .unwrap();
    let output = runtime.cli_output(&run.id).await.unwrap().unwrap();
    assert_eq!(
        run.status,
        RunStatus::Succeeded,
        "{:?}\n{:#?}\n{}",
        run.error,
        output.events,
        output.stderr_tail
    );
    eprintln!("claude, found: {:?}", started.elapsed());
    let result = run.result.unwrap().to_value().unwrap();
    assert_eq!(result["status"], "found");
    assert_eq!(result["model"], "Toyota Hiace Van");
    let tools: Vec<&str> = run.tool_calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["data.find_record", "submit_result"]);
    assert_eq!(run.tokens_used, 900 + 30 + 1000 + 40);
    assert_eq!(output.driver, "claude");
    assert_eq!(output.version, "2.1.197");
    let init = output
        .events
        .iter()
        .filter_map(|e| serde_json::from_str::<serde_json::Value>(e).ok())
        .find(|e| e["type"] == "system" && e["subtype"] == "init")
        .expect("claude's system/init event");
    assert_eq!(
        init["mcp_servers"],
        json!([{"name": "hane", "status": "connected"}]),
        "{init:#}"
    );

    let run = runtime
        .run_to_end(start("vehicle-check-claude", UNKNOWN))
        .await
        .unwrap();
    let output = runtime.cli_output(&run.id).await.unwrap().unwrap();
    assert_eq!(
        run.status,
        RunStatus::Succeeded,
        "{:?}\n{:#?}\n{}",
        run.error,
        output.events,
        output.stderr_tail
    );
    let result = run.result.unwrap().to_value().unwrap();
    assert_eq!(result["status"], "handed_over");
    let tasks = runtime.tasks(&run.id).await.unwrap().items;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].assignment, "fleet-desk");
}

/// The recording's turns for [`FORBIDDEN`] match only a request whose
/// tools are exactly hane's three (and the CLI's own), so a run that gets
/// past its first turn was offered nothing else; the model then calls
/// `data.get_record` under the CLI's MCP name for hane's tools, and the
/// call never runs. No CLI sends a call of a tool its MCP server did not
/// list (each refuses it itself, as the record shows); the Tool Gateway's
/// own refusal of such a call over MCP is `mcp.rs`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_outside_the_agent_s_tools_is_never_offered_and_a_call_to_it_is_refused() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let runtime = served(
        dir.path(),
        &[
            (
                "claude.yaml",
                vehicle_check("vehicle-check-claude", "claude", ""),
            ),
            (
                "codex.yaml",
                vehicle_check("vehicle-check-codex", "codex", ""),
            ),
            (
                "opencode.yaml",
                vehicle_check("vehicle-check-opencode", "opencode", ""),
            ),
        ],
    )
    .await;
    for agent in [
        "vehicle-check-claude",
        "vehicle-check-codex",
        "vehicle-check-opencode",
    ] {
        let run = runtime.run_to_end(start(agent, FORBIDDEN)).await.unwrap();
        let output = runtime.cli_output(&run.id).await.unwrap().unwrap();
        assert_eq!(
            run.status,
            RunStatus::Succeeded,
            "{agent}: {:?}\n{:#?}\n{}",
            run.error,
            output.events,
            output.stderr_tail
        );
        let result = run.result.unwrap().to_value().unwrap();
        assert_eq!(result["status"], "refused");
        let tools: Vec<&str> = run.tool_calls.iter().map(|c| c.tool.as_str()).collect();
        assert_eq!(tools, ["submit_result"], "{agent}");
        let events: Vec<serde_json::Value> = output
            .events
            .iter()
            .filter_map(|e| serde_json::from_str(e).ok())
            .collect();
        if agent == "vehicle-check-claude" {
            let init = events
                .iter()
                .find(|e| e["type"] == "system" && e["subtype"] == "init")
                .expect("claude's system/init event");
            assert_eq!(
                init["tools"],
                json!([
                    "mcp__hane__data-find_record",
                    "mcp__hane__request_human_help",
                    "mcp__hane__submit_result"
                ]),
                "{init:#}"
            );
            let refusal = events
                .iter()
                .flat_map(|e| {
                    e["message"]["content"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .find(|c| c["type"] == "tool_result" && c["is_error"] == true)
                .expect("the refused call's result");
            assert!(
                refusal["content"]
                    .as_str()
                    .unwrap()
                    .contains("No such tool available: mcp__hane__data-get_record"),
                "{refusal:#}"
            );
        } else if agent == "vehicle-check-opencode" {
            // Its tool list is hane's three (the recording's turn pins it).
            let refused = events
                .iter()
                .find(|e| e["type"] == "tool_use" && e["part"]["tool"] == "hane_data-get_record")
                .expect("opencode's event of the refused call");
            assert_eq!(refused["part"]["state"]["status"], "error", "{refused:#}");
            assert!(
                refused["part"]["state"]["error"]
                    .as_str()
                    .unwrap()
                    .contains("Available tools: hane_data-find_record, hane_request_human_help, hane_submit_result"),
                "{refused:#}"
            );
        } else {
            assert!(
                !events.iter().any(|e| e["item"]["type"] == "mcp_tool_call"
                    && e["item"]["tool"] != "submit_result"),
                "{events:#?}"
            );
            assert!(
                output.stderr_tail.contains("unsupported call: mcp__hane")
                    && output.stderr_tail.contains("data-get_record"),
                "{}",
                output.stderr_tail
            );
        }
    }
}

/// The seed's agent under opencode on the real local model (llama.cpp's
/// server, SmolLM2): what a 135M model does is not asserted, only that
/// the run ends in a valid state with every turn counted.
#[tokio::test]
async fn a_live_run_on_the_local_model_ends_in_a_valid_state_with_its_tokens_counted() {
    let _one = ONE_AT_A_TIME.lock().await;
    let llama = hane_test_support::LlamaServer::shared();
    let dir = tempfile::tempdir().unwrap();
    let agent = vehicle_check(
        "vehicle-check-live",
        "opencode",
        &format!("  model: llama/{}\n", llama.model()),
    );
    let release = release_with(dir.path(), &[("live.yaml", &agent)]);
    std::fs::write(
        release.join("llama.yaml"),
        format!(
            "apiVersion: platform/v1alpha1\nkind: ModelProvider\nmetadata:\n  name: llama\nspec:\n  api: chat-completions\n  baseUrl: {}/v1\n  credential: llama\n  temperature: 0\n  models:\n    - {{ name: {}, contextWindow: 4096, maxOutputTokens: 64 }}\n",
            llama.base_url(),
            llama.model()
        ),
    )
    .unwrap();
    let mut model = hane_coordinator::ModelConfig::new();
    model.credential("llama", hane_core::credential::Secret::new(llama.api_key()));
    let mut cli = CliConfig::new();
    cli.clis(clis()).container(bwrap());
    let server = cli.server().clone();
    let mut config = crate::agents::config();
    config.external_drivers(Arc::new(cli)).model(model);
    let runtime = AgentRuntime::open(&dir.path().join("hane.db"), &config).unwrap();
    runtime.activate(&release).await.unwrap();
    serve(&runtime, &server).await;

    let run = runtime
        .run_to_end(start("vehicle-check-live", FOUND))
        .await
        .unwrap();
    let turns = runtime.llm_turns(&run.id).await.unwrap();
    let output = runtime
        .cli_output(&run.id)
        .await
        .unwrap()
        .expect("its CLI output");
    eprintln!(
        "live opencode run: {} after {} turns, {} tool calls: {:?}; CLI {}",
        run.status,
        turns.len(),
        run.tool_calls.len(),
        run.error,
        output.exit
    );
    assert!(
        matches!(
            run.status,
            RunStatus::Succeeded | RunStatus::Failed | RunStatus::LimitExceeded
        ),
        "{run:#?}"
    );
    assert!(!turns.is_empty(), "{run:#?}\n{output:#?}");
    for turn in &turns {
        assert!(turn.input_tokens > 0, "{turn:#?}");
        assert!(turn.max_output_tokens <= 64, "{turn:#?}");
    }
    let counted: u64 = turns.iter().map(|t| t.input_tokens + t.output_tokens).sum();
    assert_eq!(run.tokens_used, counted, "{run:#?}");
    if run.status == RunStatus::Failed {
        assert!(
            run.error
                .as_deref()
                .is_some_and(|e| e.starts_with("opencode")),
            "{run:#?}"
        );
    }
}

/// runc.
fn runc() -> Arc<dyn hane_container::Runtime> {
    let runtime = match std::env::var_os("HANE_TEST_RUNC").filter(|p| !p.is_empty()) {
        Some(path) => hane_container::Runc::new(
            PathBuf::from(path),
            std::env::temp_dir().join("hane-runc-cli"),
        )
        .unwrap(),
        None => hane_container::Runc::find()
            .expect("runc is not installed: run `cargo xtask provision`"),
    };
    Arc::new(runtime)
}

/// The other container runtime behind the same trait: codex's run in
/// runc (an OCI bundle, its `config.json` from `oci-spec`) is the run in
/// bubblewrap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_the_same_in_runc() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cli = CliConfig::new();
    cli.clis(clis()).container(runc());
    let runtime = served_with(
        dir.path(),
        &[(
            "codex.yaml",
            vehicle_check("vehicle-check-codex", "codex", ""),
        )],
        cli,
    )
    .await;
    for (vehicle, status) in [(FOUND, "found"), (UNKNOWN, "handed_over")] {
        let run = runtime
            .run_to_end(start("vehicle-check-codex", vehicle))
            .await
            .unwrap();
        assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
        assert_eq!(run.result.unwrap().to_value().unwrap()["status"], status);
        let output = runtime.cli_output(&run.id).await.unwrap().unwrap();
        assert_eq!(
            (output.driver.as_str(), output.version.as_str()),
            ("codex", "0.171.0")
        );
    }
    let binary = clis()
        .join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
        .display()
        .to_string();
    assert_eq!(cli_processes(&binary), 0, "a container outlived its run");
}
