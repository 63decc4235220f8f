//! The store on its two engines, side by side in one run:
//!
//! - `append/{sqlite,postgres}/{1,16,256}`: durable appends per second,
//!   one event each, from 1, 16 or 256 writers each on its own session;
//!   SQLite with every commit synced (the default), PostgreSQL on a server
//!   of its defaults (every commit synced);
//! - `runs/{sqlite,postgres}/{1,2}`: whole runs of a scripted agent (one
//!   `data.find_record` call and `submit_result`) per second, 32 in flight,
//!   started on one coordinator or spread over two coordinators (two
//!   runtimes, each with its own lease and connections) on one store.
//!
//! What it measures, the command and the results: `BENCHMARKS.md`.

mod appends;
mod examples;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use hane_coordinator::{AgentRuntime, RuntimeConfig, StartRun};
use hane_core::{RunStatus, SessionId};
use hane_manager::Components;
use hane_store::{PostgresStore, SessionStore, SqliteConfig, SqliteStore};
use serde_json::json;
use tokio::runtime::Runtime;

use appends::concurrent_appends;

/// Concurrent writers, each appending to its own session.
const WRITERS: [usize; 3] = [1, 16, 256];
/// Appends per round of the printed events/s, and rounds (the median is
/// printed).
const ROUND_APPENDS: u64 = 10_000;
/// Runs per round of the printed runs/s.
const ROUND_RUNS: u64 = 600;
const ROUNDS: usize = 3;
/// Runs in flight at once, over all coordinators.
const IN_FLIGHT: u64 = 32;

/// (row, per second)
static RATES: Mutex<Vec<(String, f64)>> = Mutex::new(Vec::new());

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory");
    let server = hane_test_support::postgres::durable_server();
    appends(&mut c, &rt, dir.path(), server);
    runs(&mut c, &rt, dir.path(), server);
    c.final_summary();
    print_rates();
}

fn measuring() -> bool {
    !std::env::args().any(|a| a == "--test" || a == "--list")
}

/// A store's sessions on `engine`, empty.
fn sessions(
    engine: &str,
    dir: &Path,
    server: &hane_test_support::postgres::Server,
) -> Arc<dyn SessionStore> {
    match engine {
        "sqlite" => Arc::new(
            SqliteStore::open(dir.join("appends.db"), &SqliteConfig::new())
                .expect("the store opens"),
        ),
        _ => {
            let db = server.database().expect("a database");
            Arc::new(PostgresStore::open(&db.url).expect("the store opens"))
        }
    }
}

fn appends(
    c: &mut Criterion,
    rt: &Runtime,
    dir: &Path,
    server: &hane_test_support::postgres::Server,
) {
    let mut group = c.benchmark_group("append");
    group
        .throughput(Throughput::Elements(1))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10);
    for engine in ["sqlite", "postgres"] {
        let store = sessions(engine, dir, server);
        let all: Vec<SessionId> = rt.block_on(async {
            let mut all = Vec::new();
            for _ in 0..WRITERS[WRITERS.len() - 1] {
                all.push(store.create_session().await.expect("a session").id);
            }
            all
        });
        for writers in WRITERS {
            let sessions = &all[..writers];
            let row = format!("append/{engine}/{writers}");
            group.bench_with_input(BenchmarkId::new(engine, writers), &writers, |b, _| {
                record(&row, ROUND_APPENDS, || {
                    rt.block_on(concurrent_appends(&store, sessions, ROUND_APPENDS))
                });
                b.iter_custom(|appends| rt.block_on(concurrent_appends(&store, sessions, appends)));
            });
        }
    }
    group.finish();
}

/// The examples but their budget, and `run-1`: one `data.find_record`
/// call, then `submit_result`.
fn release(dir: &Path) -> PathBuf {
    let release = dir.join("release");
    examples::copy_examples(&release, examples::UNBUDGETED);
    std::fs::write(
        release.join("agents/run-1.yaml"),
        r#"apiVersion: agents/v1alpha1
kind: Agent
metadata: { name: run-1 }
spec:
  purpose: Looks a vehicle up once
  input: { type: object }
  output: { type: object, required: [status], properties: { status: { type: string } } }
  driver: scripted
  tools: [data.find_record]
  limits: { maxToolCalls: 5 }
  script:
    - tool: data.find_record
      input: { collection: vehicles, match: { registration: "架空 300 あ 10-02" } }
    - tool: submit_result
      input: { status: done }
"#,
    )
    .unwrap();
    release
}

/// `count` runtimes on the store at `store`, the release active.
fn coordinators(rt: &Runtime, store: &Path, release: &Path, count: usize) -> Vec<AgentRuntime> {
    let mut config = RuntimeConfig::new();
    config.components(Components::with_builtins(hane_builtins::all()));
    let _entered = rt.enter();
    let runtimes: Vec<AgentRuntime> = (0..count)
        .map(|_| AgentRuntime::open(store, &config).expect("the runtime opens"))
        .collect();
    // The others load the active release they find, as other processes
    // do.
    rt.block_on(runtimes[0].activate(release))
        .expect("the release activates");
    runtimes
}

/// `runs` runs to their end, [`IN_FLIGHT`] at a time, started on the
/// coordinators in turn.
async fn concurrent_runs(runtimes: &[AgentRuntime], runs: u64) -> Duration {
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    let per_task = runs / IN_FLIGHT;
    for t in 0..IN_FLIGHT {
        let runtime = runtimes[t as usize % runtimes.len()].clone();
        let n = per_task + u64::from(t < runs % IN_FLIGHT);
        set.spawn(async move {
            for _ in 0..n {
                let run = runtime
                    .run_to_end(StartRun {
                        agent: "run-1".into(),
                        input: json!({}),
                        shadow: false,
                    })
                    .await
                    .expect("the run");
                assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
            }
        });
    }
    while let Some(joined) = set.join_next().await {
        joined.expect("run task");
    }
    start.elapsed()
}

fn runs(c: &mut Criterion, rt: &Runtime, dir: &Path, server: &hane_test_support::postgres::Server) {
    let release = release(dir);
    let mut group = c.benchmark_group("runs");
    group
        .throughput(Throughput::Elements(1))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10);
    for engine in ["sqlite", "postgres"] {
        for count in [1, 2] {
            let store = match engine {
                "sqlite" => dir.join(format!("runs-{count}.db")),
                _ => PathBuf::from(server.database().expect("a database").url),
            };
            let runtimes = coordinators(rt, &store, &release, count);
            let row = format!("runs/{engine}/{count}");
            group.bench_with_input(BenchmarkId::new(engine, count), &count, |b, _| {
                record(&row, ROUND_RUNS, || {
                    rt.block_on(concurrent_runs(&runtimes, ROUND_RUNS))
                });
                b.iter_custom(|runs| rt.block_on(concurrent_runs(&runtimes, runs.max(IN_FLIGHT))));
            });
        }
    }
    group.finish();
}

/// Times [`ROUNDS`] rounds of `round` items (after one of a tenth as many)
/// for the printed rate, once per row.
fn record(row: &str, round: u64, mut time: impl FnMut() -> Duration) {
    if !measuring() || RATES.lock().unwrap().iter().any(|(r, _)| r == row) {
        return;
    }
    let _ = time();
    let mut rates: Vec<f64> = (0..ROUNDS)
        .map(|_| round as f64 / time().as_secs_f64())
        .collect();
    rates.sort_by(f64::total_cmp);
    RATES
        .lock()
        .unwrap()
        .push((row.to_owned(), rates[rates.len() / 2]));
}

fn print_rates() {
    let rates = RATES.lock().unwrap();
    if rates.is_empty() {
        return;
    }
    println!("\nPer second, the median of {ROUNDS} rounds");
    for (row, rate) in rates.iter() {
        println!("{row:24} {rate:>10.0}");
    }
}
