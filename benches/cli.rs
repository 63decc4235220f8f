//! One whole run of the seed's `vehicle-check` agent for a vehicle in the
//! fleet ledger, start to end, under each CLI driver (`codex`, `claude`,
//! `opencode`: the real CLI in bubblewrap, its model calls through the
//! Model Gateway over HTTP, its tool calls through the MCP server) and,
//! side by side, the same agent under the `llm` driver in process. Every
//! row replays the examples' recorded provider, so the model answers at
//! once and what is timed is hane and the CLI. What it measures, the
//! command and the results: `BENCHMARKS.md`.

mod examples;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use hane_cli_drivers::CliConfig;
use hane_coordinator::{AgentRuntime, RuntimeConfig, StartRun};
use hane_core::RunStatus;
use hane_manager::Components;
use tokio::runtime::Runtime;

use examples::copy_examples;

const FOUND: &str = "架空 300 あ 10-02";

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(10)
        .configure_from_args();
    runs(&mut c);
    c.final_summary();
}

/// The CLIs `cargo xtask provision` installs.
fn clis() -> PathBuf {
    let dir = std::env::var_os("HANE_TEST_CLIS")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || {
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../target/test-env/clis/node_modules")
            },
            PathBuf::from,
        );
    assert!(
        dir.join("@openai/codex/package.json").is_file(),
        "the coding CLIs are not installed in {}: run `cargo xtask provision`",
        dir.display()
    );
    dir
}

/// The examples (but their budget, whose runs a day would stop the
/// benchmark), with the seed's agent also under `codex` and `claude`.
fn release(dir: &Path) -> PathBuf {
    let release = dir.join("release");
    copy_examples(&release, examples::UNBUDGETED);
    let seed = std::fs::read_to_string(release.join("agents/vehicle-check.yaml")).unwrap();
    for driver in ["codex", "claude"] {
        let agent = seed
            .replace(
                "name: vehicle-check\n",
                &format!("name: vehicle-check-{driver}\n"),
            )
            .replace("driver: opencode", &format!("driver: {driver}"));
        std::fs::write(
            release.join(format!("agents/vehicle-check-{driver}.yaml")),
            agent,
        )
        .unwrap();
    }
    release
}

fn runtime(rt: &Runtime, dir: &Path) -> AgentRuntime {
    let bwrap = hane_container::Bubblewrap::find().unwrap_or_else(|e| panic!("{e}"));
    let mut cli = CliConfig::new();
    cli.clis(clis()).container(Arc::new(bwrap));
    let server = cli.server().clone();
    let mut config = RuntimeConfig::new();
    config
        .components(Components::with_builtins(hane_builtins::all()))
        .external_drivers(Arc::new(cli));
    let _entered = rt.enter();
    let runtime = AgentRuntime::open(&dir.join("hane.db"), &config).unwrap();
    rt.block_on(async {
        runtime.activate(&release(dir)).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        server.set(listener.local_addr().unwrap());
        tokio::spawn(hane_server::serve(
            listener,
            hane_coordinator::Services::new(runtime.clone()),
            std::future::pending(),
        ));
    });
    runtime
}

/// One run of `agent` for [`FOUND`], which must succeed with the vehicle
/// found.
async fn once(runtime: &AgentRuntime, agent: &str) -> Duration {
    let start = Instant::now();
    let run = runtime
        .run_to_end(StartRun {
            agent: agent.to_owned(),
            input: serde_json::json!({ "vehicle": FOUND }),
            shadow: false,
        })
        .await
        .unwrap();
    let took = start.elapsed();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    assert_eq!(
        run.result
            .as_ref()
            .and_then(|r| r.to_value().ok())
            .map(|r| r["status"].clone()),
        Some(serde_json::json!("found")),
        "{run:#?}"
    );
    took
}

fn runs(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&rt, dir.path());

    let mut group = c.benchmark_group("run");
    // Ten samples of one run each (a CLI's run takes seconds), not
    // criterion's growing batches.
    group.sampling_mode(SamplingMode::Flat);
    for (row, agent) in [
        ("llm", "vehicle-check-llm"),
        ("codex", "vehicle-check-codex"),
        ("claude", "vehicle-check-claude"),
        ("opencode", "vehicle-check"),
    ] {
        group.bench_function(row, |b| {
            b.to_async(&rt).iter(|| once(&runtime, agent));
        });
    }
    group.finish();
}
