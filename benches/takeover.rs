//! How long the runs of a coordinator that died wait for another: two
//! `hane serve` on one store, ten runs started on the first (each waiting
//! for a person's decision), the first killed with `kill -9`, and the time
//! until the second has resumed all ten, for leases of 1 s and 2 s, on a
//! SQLite file and on a PostgreSQL database (a server of its default
//! durability). The target is at most twice the lease; before leases such
//! runs stayed `running` for good. What it measures, the command and the
//! results: `BENCHMARKS.md`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use hane_test_support::{request, serve};
use serde_json::json;

/// Runs live on the coordinator that dies.
const RUNS: usize = 10;

const NOTIFY: &str = include_str!("../tests/fixtures/notify.yaml");

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20))
        .sample_size(10)
        .configure_from_args();
    let dir = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("takeover");
    group.sampling_mode(SamplingMode::Flat);
    let mut report = Vec::new();
    for engine in ["sqlite", "postgres"] {
        let store = store(dir.path(), engine);
        let key = hane(&store, &["keys", "create", "ops", "--role", "operator"]);
        for lease in ["1", "2"] {
            let env = [("HANE_LEASE", lease)];
            let (mut survivor, at) = serve(&hane_binary(), &store, &env);
            let mut times = Vec::new();
            group.bench_function(format!("ten-runs/{engine}/lease-{lease}s"), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let took = one_death(&store, &env, &key, &at);
                        times.push(took);
                        total += took;
                    }
                    total
                });
            });
            let _ = survivor.kill();
            let _ = survivor.wait();
            times.sort_unstable();
            report.push((engine, lease, times));
        }
    }
    group.finish();
    c.final_summary();
    println!("\nfrom kill -9 to all {RUNS} runs resumed by the other coordinator");
    println!("| store | lease | runs | p50 | max | target (2 × lease) |");
    println!("|---|---|---|---|---|---|");
    for (engine, lease, times) in report {
        println!(
            "| {engine} | {lease} s | {} | {:.2} s | {:.2} s | {} s |",
            times.len(),
            times[times.len() / 2].as_secs_f64(),
            times[times.len() - 1].as_secs_f64(),
            2 * lease.parse::<u64>().unwrap()
        );
    }
}

/// Starts a coordinator, gives it [`RUNS`] live runs, kills it, and
/// times how long until the survivor at `at` has resumed them all (each
/// then waits again for its decision, there).
fn one_death(store: &Path, env: &[(&str, &str)], key: &str, at: &str) -> Duration {
    let (mut doomed, doomed_at) = serve(&hane_binary(), store, env);
    let input = json!({"agent": "notify", "input": {
        "email": "driver@example.com", "subject": "Your van is ready", "body": "Gate 3."
    }});
    let runs: Vec<String> = (0..RUNS)
        .map(|_| {
            let (status, run) = request(&doomed_at, "POST", "/v1/agents/runs", key, Some(&input));
            assert_eq!(status, 201, "{run}");
            run["id"].as_str().unwrap().to_owned()
        })
        .collect();
    // Every run waits for its decision before the kill.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, listed) = request(
            &doomed_at,
            "GET",
            "/v1/agents/action-requests?state=pending",
            key,
            None,
        );
        let pending = listed["actionRequests"].as_array().unwrap();
        if runs
            .iter()
            .all(|r| pending.iter().any(|a| a["run"] == r.as_str()))
        {
            break;
        }
        assert!(Instant::now() < deadline, "the runs proposed nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    doomed.kill().unwrap();
    let killed = Instant::now();
    doomed.wait().unwrap();
    let mut live = runs;
    while !live.is_empty() {
        live.retain(|run| {
            let (status, got) = request(at, "GET", &format!("/v1/agents/runs/{run}"), key, None);
            assert_eq!(status, 200, "{got}");
            assert_eq!(got["status"], "running", "{got}");
            got["resumed"] == 0
        });
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "runs not resumed"
        );
        if !live.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    killed.elapsed()
}

fn hane_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hane"))
}

/// Runs `hane ARGS --store STORE`; its stdout, trimmed.
fn hane(store: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new(hane_binary())
        .args(args)
        .arg("--store")
        .arg(store)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// A store on `engine` with the notify agent (no budget) active.
fn store(dir: &Path, engine: &str) -> PathBuf {
    let release = dir.join("release");
    std::fs::create_dir_all(&release).unwrap();
    std::fs::write(release.join("notify.yaml"), NOTIFY).unwrap();
    let store = match engine {
        "sqlite" => dir.join("hane.db"),
        _ => PathBuf::from(
            hane_test_support::postgres::durable_server()
                .database()
                .unwrap()
                .url,
        ),
    };
    hane(&store, &["release", "activate", release.to_str().unwrap()]);
    store
}
