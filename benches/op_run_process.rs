//! `hane op run` as a whole process (start, load, one call, exit), beside
//! `/bin/true` in the same run: with the compiled-component cache warm,
//! cold, and holding only what `hane op compile` wrote (a first run from a
//! precompiled artifact). The bench build of `hane` (dynamically linked
//! against glibc) is measured always; the static binary `cargo xtask
//! dist` builds for this machine is measured too when it has been built.
//! Each binary's peak resident memory in a warm run is printed after the
//! table. Built as a bench of `hane-cli` so the `hane` binary is at hand.
//! What it measures, the command and the results: `BENCHMARKS.md`.

mod latency;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
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
/// The largest resident set of any run, per binary (KiB).
static PEAK_RSS: Mutex<Vec<(&'static str, u64)>> = Mutex::new(Vec::new());

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    op_run(&mut c);
    c.final_summary();
    RUNS.print("hane op run documents.search", "true");
    for (binary, kib) in PEAK_RSS.lock().unwrap().iter() {
        println!(
            "peak RSS of a warm `hane op run` ({binary}): {:.1} MiB",
            *kib as f64 / 1024.0
        );
    }
}

/// A `hane` to measure.
struct Hane {
    /// Its row names' suffix: `` for the bench build, `-static`.
    suffix: &'static str,
    path: PathBuf,
}

/// The static binary for this machine's architecture, if `cargo xtask
/// dist` has built it (`$HANE_BENCH_STATIC` names another).
fn static_hane() -> Option<Hane> {
    let path = std::env::var_os("HANE_BENCH_STATIC")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
                "../../target/{}-unknown-linux-musl/dist/hane",
                std::env::consts::ARCH
            ))
        });
    if path.is_file() {
        Some(Hane {
            suffix: "-static",
            path,
        })
    } else {
        eprintln!(
            "note: no static hane at {}: build it with `cargo xtask dist {}-unknown-linux-musl` to measure it too",
            path.display(),
            std::env::consts::ARCH
        );
        None
    }
}

fn op_run(c: &mut Criterion) {
    let mut group = c.benchmark_group("op-run");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(30)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("true", |b| {
        RUNS.record("true", || {
            time_each(WARM_SAMPLES / 30, WARM_SAMPLES, || {
                run(&mut Command::new("true")).expect("true");
            })
        });
        b.iter(|| run(&mut Command::new("true")).expect("true"));
    });

    let hanes = std::iter::once(Hane {
        suffix: "",
        path: PathBuf::from(HANE),
    })
    .chain(static_hane());
    for hane in hanes {
        let warm = tempfile::tempdir().expect("cache dir");
        search(&hane, warm.path()).expect("hane op run");
        let name = format!("op-run-warm{}", hane.suffix);
        group.bench_function(&name, |b| {
            RUNS.record(&name, || {
                time_each(WARM_SAMPLES / 30, WARM_SAMPLES, || {
                    let rss = search(&hane, warm.path()).expect("hane op run");
                    let mut peaks = PEAK_RSS.lock().unwrap();
                    match peaks.iter_mut().find(|(s, _)| *s == hane.name()) {
                        Some((_, peak)) => *peak = (*peak).max(rss),
                        None => peaks.push((hane.name(), rss)),
                    }
                })
            });
            b.iter(|| search(&hane, warm.path()).expect("hane op run"));
        });

        // A fresh cache holding only the artifact `hane op compile` wrote.
        let compiled = tempfile::tempdir().expect("artifacts dir");
        run(Command::new(&hane.path)
            .args(["op", "compile", "documents.search", "-o"])
            .arg(compiled.path()))
        .expect("hane op compile");
        let name = format!("op-run-precompiled{}", hane.suffix);
        group.bench_function(&name, |b| {
            RUNS.record(&name, || {
                Samples::measure(|| {
                    (0..WARM_SAMPLES / 3)
                        .map(|_| precompiled_run(&hane, compiled.path()))
                        .collect()
                })
            });
            b.iter_custom(|runs| {
                (0..runs)
                    .map(|_| precompiled_run(&hane, compiled.path()))
                    .sum()
            });
        });
    }

    let hane = Hane {
        suffix: "",
        path: PathBuf::from(HANE),
    };
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("op-run-cold", |b| {
        RUNS.record("op-run-cold", || {
            // One untimed run brings the binary into the page cache.
            cold_run(&hane);
            Samples::measure(|| (0..COLD_SAMPLES).map(|_| cold_run(&hane)).collect())
        });
        b.iter_custom(|runs| (0..runs).map(|_| cold_run(&hane)).sum());
    });
    group.finish();
}

impl Hane {
    fn name(&self) -> &'static str {
        if self.suffix.is_empty() {
            "bench build"
        } else {
            "static"
        }
    }
}

/// One run with a fresh, empty cache directory (created and removed
/// outside the timed part).
fn cold_run(hane: &Hane) -> Duration {
    let cold = tempfile::tempdir().expect("cache dir");
    let start = Instant::now();
    search(hane, cold.path()).expect("hane op run");
    start.elapsed()
}

/// One run with a fresh cache directory holding a copy of the artifacts
/// in `compiled` (copied outside the timed part).
fn precompiled_run(hane: &Hane, compiled: &Path) -> Duration {
    let cache = tempfile::tempdir().expect("cache dir");
    for entry in std::fs::read_dir(compiled).expect("artifacts") {
        let entry = entry.expect("artifact");
        std::fs::copy(entry.path(), cache.path().join(entry.file_name())).expect("copy");
    }
    let start = Instant::now();
    search(hane, cache.path()).expect("hane op run");
    start.elapsed()
}

/// `hane op run documents.search` over `examples/documents` with its
/// component cache in `cache`; its peak resident set in KiB.
fn search(hane: &Hane, cache: &Path) -> Result<u64, String> {
    let documents = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/documents");
    let mut command = Command::new(&hane.path);
    command
        .args([
            "op",
            "run",
            "documents.search",
            "--input",
            INPUT,
            "--allow-dir",
        ])
        .arg(&documents)
        .env("HANE_CACHE_DIR", cache);
    let (stdout, rss) = run(&mut command)?;
    if stdout.is_empty() {
        return Err("hane op run printed nothing".to_owned());
    }
    Ok(rss)
}

/// Runs `command` to its end: its stdout and peak resident set (KiB), or
/// what went wrong with its stderr.
fn run(command: &mut Command) -> Result<(Vec<u8>, u64), String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    // Small outputs: one pipe read to its end, then the other.
    let _ = child.stdout.take().expect("piped").read_to_end(&mut stdout);
    let _ = child.stderr.take().expect("piped").read_to_end(&mut stderr);
    let (status, rss) = wait4(child.id());
    if !status.success() {
        return Err(format!(
            "{command:?} failed ({status}): {}",
            String::from_utf8_lossy(&stderr).trim_end()
        ));
    }
    Ok((stdout, rss))
}

/// Waits for the child `pid`: its exit status and peak resident set
/// (KiB), which `std::process::Child::wait` does not report.
#[expect(
    unsafe_code,
    reason = "wait4 is a system call with no safe wrapper among the dependencies"
)]
fn wait4(pid: u32) -> (ExitStatus, u64) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unwaited child; both pointers are valid.
    let waited = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(
        waited,
        pid as libc::pid_t,
        "wait4: {}",
        std::io::Error::last_os_error()
    );
    (ExitStatus::from_raw(status), usage.ru_maxrss as u64)
}
