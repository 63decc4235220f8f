//! `hane op run` as a whole process (start, load, one call, exit), with
//! its compiled-component cache warm and cold. Built as a bench of
//! `hane-cli` so the `hane` binary is at hand. What it measures, the
//! command and the results: `BENCHMARKS.md`.

mod latency;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};

use latency::{LatencyTable, Samples, time_each};

const HANE: &str = env!("CARGO_BIN_EXE_hane");
const INPUT: &str = r#"{"query":"tyre tread"}"#;

/// Runs per row of the percentile table (after warm-up runs). A cold run
/// compiles the component with cranelift, about half a second.
const WARM_SAMPLES: usize = 300;
const COLD_SAMPLES: usize = 20;

static RUNS: LatencyTable = LatencyTable::new();

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    op_run(&mut c);
    c.final_summary();
    RUNS.print("hane op run documents.search", "op-run-warm");
}

fn op_run(c: &mut Criterion) {
    let warm = tempfile::tempdir().expect("cache dir");
    run_search(warm.path()).expect("hane op run");

    let mut group = c.benchmark_group("op-run");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(30)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("op-run-warm", |b| {
        RUNS.record("op-run-warm", || {
            time_each(WARM_SAMPLES / 30, WARM_SAMPLES, || {
                run_search(warm.path()).expect("hane op run");
            })
        });
        b.iter(|| run_search(warm.path()).expect("hane op run"));
    });

    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("op-run-cold", |b| {
        RUNS.record("op-run-cold", || {
            // One untimed run brings the binary into the page cache.
            cold_run();
            Samples::measure(|| (0..COLD_SAMPLES).map(|_| cold_run()).collect())
        });
        b.iter_custom(|runs| (0..runs).map(|_| cold_run()).sum());
    });
    group.finish();
}

/// One run with a fresh, empty cache directory (created and removed
/// outside the timed part).
fn cold_run() -> Duration {
    let cold = tempfile::tempdir().expect("cache dir");
    let start = Instant::now();
    run_search(cold.path()).expect("hane op run");
    start.elapsed()
}

/// `hane op run documents.search` over `examples/documents` with its
/// component cache in `cache`.
fn run_search(cache: &Path) -> Result<(), String> {
    let documents = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/documents");
    let out = Command::new(HANE)
        .args([
            "op",
            "run",
            "documents.search",
            "--input",
            INPUT,
            "--allow-dir",
        ])
        .arg(&documents)
        .env("HANE_CACHE_DIR", cache)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {HANE}: {e}"))?;
    if !out.status.success() || out.stdout.is_empty() {
        return Err(format!(
            "hane op run failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    Ok(())
}
