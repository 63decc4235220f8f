//! An evaluation of 50 cases of the scripted `lease-qa` agent, end to end:
//! 50 shadow runs (each three tool calls, or a handover recorded only),
//! their results compared with what the cases expect, and the evaluation
//! stored. Rows, side by side in one run:
//!
//! - `evaluation-50/…`: `Evaluations::evaluate`, at most eight cases at
//!   once;
//! - `one-by-one-50/…`: the same 50 shadow runs started one after another
//!   with `run_to_end`, each result compared with
//!   `hane_core::evaluation::compare_result` — the same work as a plain loop would do
//!   it, without storing an evaluation.
//!
//! Each row runs on a store that syncs every commit (`full`, the default)
//! and one that syncs at checkpoints (`normal`). Target: the evaluation
//! of 50 cases within 2 s. What it measures, the command and the results:
//! `BENCHMARKS.md`.

mod examples;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::Criterion;
use hane_coordinator::{AgentRuntime, RuntimeConfig, StartRun};
use hane_core::evaluation::compare_result;
use hane_manager::Components;
use hane_store::Synchronous;
use serde_json::{Value, json};

use examples::copy_examples;

const CASES: usize = 50;
const TARGET: Duration = Duration::from_secs(2);

/// The suite's cases: the three contracts of the ledger in turn (answered
/// with their lessee), every fifth case one that is not (handed over).
fn cases() -> Vec<(Value, Value)> {
    let lessees = [
        ("C-1001", "Kita Logistics"),
        ("C-1002", "Minato Catering"),
        ("C-1003", "Aoba Florists"),
    ];
    (0..CASES)
        .map(|i| {
            if i % 5 == 4 {
                let contract = format!("C-9{i:03}");
                (
                    json!({ "contract_no": contract }),
                    json!({ "status": "handed_over", "contract_no": contract }),
                )
            } else {
                let (contract, lessee) = lessees[i % 3];
                (
                    json!({ "contract_no": contract }),
                    json!({ "status": "answered", "lessee": lessee }),
                )
            }
        })
        .collect()
}

/// The examples' agents, tools and ledger (not their budget, whose 200
/// runs a day would stop the benchmark) and the 50-case suite.
fn release(dir: &Path) -> PathBuf {
    let release = dir.join("release");
    copy_examples(&release, examples::UNBUDGETED);
    let mut suite = String::from(
        "apiVersion: agents/v1alpha1\nkind: EvalSuite\nmetadata:\n  name: lease-qa-50\nspec:\n  agent: lease-qa\n  cases:\n",
    );
    for (i, (input, expect)) in cases().iter().enumerate() {
        suite.push_str(&format!(
            "    - name: case {i}\n      input: {input}\n      expect: {expect}\n"
        ));
    }
    std::fs::create_dir_all(release.join("evals")).unwrap();
    std::fs::write(release.join("evals/lease-qa-50.yaml"), suite).unwrap();
    release
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(10))
        .sample_size(10)
        .configure_from_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let release = release(dir.path());
    let mut group = c.benchmark_group("evals");
    let mut slowest = Duration::ZERO;
    for (sync, synchronous) in [("full", Synchronous::Full), ("normal", Synchronous::Normal)] {
        let mut config = RuntimeConfig::new();
        config
            .synchronous(synchronous)
            .components(Components::with_builtins(hane_builtins::all()));
        let store = dir.path().join(format!("{sync}.db"));
        let runtime = {
            let _entered = rt.enter();
            AgentRuntime::open(&store, &config).unwrap()
        };
        rt.block_on(runtime.activate(&release)).unwrap();
        let evaluations = hane_coordinator::Evaluations::new(&runtime);
        // Every case passes, or the row measures something else.
        let evaluation = rt
            .block_on(evaluations.evaluate("lease-qa-50", |_| {}))
            .unwrap();
        assert_eq!(evaluation.passed as usize, CASES, "{evaluation:#?}");

        group.bench_function(format!("evaluation-{CASES}/{sync}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let evaluation = rt
                        .block_on(evaluations.evaluate("lease-qa-50", |_| {}))
                        .unwrap();
                    let took = start.elapsed();
                    assert_eq!(evaluation.passed as usize, CASES);
                    slowest = slowest.max(took);
                    total += took;
                }
                total
            });
        });
        group.bench_function(format!("one-by-one-{CASES}/{sync}"), |b| {
            b.iter(|| {
                rt.block_on(async {
                    let mut passed = 0;
                    for (input, expect) in cases() {
                        let run = runtime
                            .run_to_end(StartRun {
                                agent: "lease-qa".to_owned(),
                                input,
                                shadow: true,
                            })
                            .await
                            .unwrap();
                        let result = run.result.and_then(|r| r.to_value().ok());
                        if result.is_some() && compare_result(&expect, result.as_ref()).is_empty() {
                            passed += 1;
                        }
                    }
                    assert_eq!(passed, CASES);
                })
            });
        });
    }
    group.finish();
    c.final_summary();
    println!(
        "\nslowest evaluation of {CASES} cases: {:.3} s (target ≤ {} s)",
        slowest.as_secs_f64(),
        TARGET.as_secs()
    );
}
