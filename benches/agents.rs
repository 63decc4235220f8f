//! What the coordinator adds to a tool call, and what a whole scripted run
//! costs. Rows, side by side in one run:
//!
//! - `operation`: `data.find_record` called straight on the sandbox — the
//!   operation itself, which a tool call also pays;
//! - `run-1/…` and `run-21/…`: whole runs of scripted agents making one
//!   and twenty-one `data.find_record` calls (and `submit_result`), through
//!   the gateway, translators, store and local operation manager; the
//!   per-call cost is their difference over twenty, and the coordinator's
//!   overhead per call is that minus `operation`;
//! - `lease-qa/…`: the example `lease-qa` agent, three tool calls.
//!
//! Each runtime row runs twice: on a store that syncs every commit to disk
//! (`full`, the default) and on one that syncs at checkpoints (`normal`).
//! What it measures, the command and the results: `BENCHMARKS.md`.

mod examples;
mod latency;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::Criterion;
use hane_coordinator::{AgentRuntime, RuntimeConfig, StartRun};
use hane_core::RunStatus;
use hane_core::{Ledger, Policy};
use hane_manager::Components;
use hane_sandbox::{Sandbox, SandboxConfig};
use hane_store::Synchronous;
use serde_json::json;
use tokio::runtime::Runtime;

use examples::{copy_examples, examples};
use latency::{LatencyTable, time_each};

/// Runs timed per row (after a tenth as many untimed ones).
const SAMPLES: usize = 500;

/// Targets: the coordinator's overhead per tool call at p50, and a whole
/// three-call run at p50.
const PER_CALL_TARGET: Duration = Duration::from_micros(50);
const RUN_TARGET: Duration = Duration::from_millis(5);

static RUNS: LatencyTable = LatencyTable::new();

/// Runs of `run-21` whose tool calls' recorded durations are collected.
const CALLS_RUNS: usize = 200;

/// Recorded durations of tool calls, by store mode and tool.
static CALLS: Mutex<BTreeMap<(String, String), Vec<Duration>>> = Mutex::new(BTreeMap::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

const FIND: &str = r#"{"collection": "vehicles", "match": {"registration": "架空 300 あ 10-02"}}"#;

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    agents(&mut c);
    c.final_summary();

    let p50 = RUNS.print(
        "Scripted agent runs and the operation they call",
        "operation",
    );
    let p50_of = |name: &str| p50.iter().find(|(row, _)| row == name).map(|(_, d)| *d);
    let Some(operation) = p50_of("operation") else {
        return;
    };
    let calls = lock(&CALLS);
    if !calls.is_empty() {
        println!(
            "\nOne tool call as its run recorded it (from the gateway's check to the result the driver gets), {CALLS_RUNS} runs of run-21"
        );
        println!(
            "{:24} {:>6} {:>10} {:>10} {:>22}",
            "", "n", "p50", "p99", "p50 minus `operation`"
        );
    }
    for ((sync, tool), times) in calls.iter() {
        let mut times = times.clone();
        times.sort_unstable();
        let at =
            |q: f64| times[((q * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1];
        let (p50, p99) = (at(0.5), at(0.99));
        let minus = if tool == "data.find_record" {
            format!(
                "{:.1} µs",
                p50.saturating_sub(operation).as_secs_f64() * 1e6
            )
        } else {
            "-".to_owned()
        };
        println!(
            "{:24} {:>6} {:>7.1} µs {:>7.1} µs {minus:>22}",
            format!("{tool}/{sync}"),
            times.len(),
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6,
        );
    }
    drop(calls);
    for sync in ["full", "normal"] {
        if let (Some(one), Some(many)) = (
            p50_of(&format!("run-1/{sync}")),
            p50_of(&format!("run-21/{sync}")),
        ) {
            let per_call = many.saturating_sub(one) / 20;
            println!(
                "{sync}: one tool call {:.1} µs, of which the operation {:.1} µs: coordinator overhead {:.1} µs per call (target ≤ {} µs)",
                per_call.as_secs_f64() * 1e6,
                operation.as_secs_f64() * 1e6,
                per_call.saturating_sub(operation).as_secs_f64() * 1e6,
                PER_CALL_TARGET.as_micros()
            );
        }
        if let Some(lease) = p50_of(&format!("lease-qa/{sync}")) {
            println!(
                "{sync}: lease-qa, three tool calls: {:.3} ms (target ≤ {} ms)",
                lease.as_secs_f64() * 1e3,
                RUN_TARGET.as_millis()
            );
        }
    }
}

fn agent(name: &str, finds: usize) -> String {
    let mut script = String::new();
    for _ in 0..finds {
        script.push_str(&format!(
            "    - tool: data.find_record\n      input: {FIND}\n"
        ));
    }
    format!(
        "apiVersion: agents/v1alpha1\nkind: Agent\nmetadata:\n  name: {name}\nspec:\n  purpose: Looks a vehicle up {finds} times\n  input: {{ type: object }}\n  output: {{ type: object, required: [status], properties: {{ status: {{ type: string }} }} }}\n  driver: scripted\n  tools: [data.find_record]\n  limits: {{ maxToolCalls: 30 }}\n  script:\n{script}    - tool: submit_result\n      input: {{ status: done }}\n"
    )
}

/// The examples (but their budget) plus the two benchmark agents, in
/// `dir`.
fn release(dir: &Path) -> PathBuf {
    let release = dir.join("release");
    // Not `budgets/`: its 200 runs a day would stop the benchmark. The
    // llm agent's model is a recording, which it copies too.
    copy_examples(&release, examples::UNBUDGETED);
    std::fs::write(release.join("agents/run-1.yaml"), agent("run-1", 1)).unwrap();
    std::fs::write(release.join("agents/run-21.yaml"), agent("run-21", 21)).unwrap();
    release
}

fn runtime(rt: &Runtime, dir: &Path, synchronous: Synchronous, release: &Path) -> AgentRuntime {
    let mut config = RuntimeConfig::new();
    config
        .synchronous(synchronous)
        .components(Components::with_builtins(hane_builtins::all()));
    let _entered = rt.enter();
    let runtime = AgentRuntime::open(&dir.join("hane.db"), &config).unwrap();
    rt.block_on(runtime.activate(release)).unwrap();
    runtime
}

fn agents(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let release = release(dir.path());
    let mut group = c.benchmark_group("agents");

    // The operation alone, on a sandbox holding the same ledger.
    let sandbox = Sandbox::new(&SandboxConfig::new()).unwrap();
    sandbox.set_ledger(Arc::new(
        Ledger::load_dir(&examples().join("ledger")).unwrap(),
    ));
    let policy = Policy {
        records: vec!["vehicles".into()],
        ..Policy::default()
    };
    let find = rt
        .block_on(sandbox.load(
            "data.find_record",
            hane_builtins::get("data.find_record").unwrap(),
            &policy,
        ))
        .unwrap();
    let limits = sandbox.default_limits();
    let call = || rt.block_on(find.call(FIND, &limits));
    assert!(call().result.is_ok());
    group.bench_function("operation", |b| {
        RUNS.record("operation", || {
            time_each(SAMPLES, SAMPLES * 10, || assert!(call().result.is_ok()))
        });
        b.iter(call);
    });

    for (sync, synchronous) in [("full", Synchronous::Full), ("normal", Synchronous::Normal)] {
        let store_dir = dir.path().join(sync);
        std::fs::create_dir_all(&store_dir).unwrap();
        let runtime = runtime(&rt, &store_dir, synchronous, &release);
        for (agent, input) in [
            ("run-1", json!({})),
            ("run-21", json!({})),
            ("lease-qa", json!({"contract_no": "C-1001"})),
        ] {
            let start = || StartRun {
                agent: agent.to_owned(),
                input: input.clone(),
                shadow: false,
            };
            let run = || rt.block_on(runtime.run_to_end(start())).unwrap();
            let first = run();
            assert_eq!(first.status, RunStatus::Succeeded, "{first:#?}");
            let name = format!("{agent}/{sync}");
            group.bench_function(&name, |b| {
                RUNS.record(&name, || {
                    time_each(SAMPLES / 10, SAMPLES, || {
                        assert_eq!(run().status, RunStatus::Succeeded);
                    })
                });
                if agent == "run-21"
                    && latency::measuring()
                    && !lock(&CALLS).keys().any(|(s, _)| s == sync)
                {
                    for _ in 0..CALLS_RUNS {
                        for call in run().tool_calls {
                            lock(&CALLS)
                                .entry((sync.to_owned(), call.tool))
                                .or_default()
                                .push(Duration::from_micros(call.duration_us));
                        }
                    }
                }
                b.iter(run);
            });
        }
    }
    group.finish();
}
