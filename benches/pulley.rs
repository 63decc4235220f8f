//! Pulley, wasmtime's interpreter, against cranelift's native code, side
//! by side in one run: one call of the trivial `test.echo` (where the
//! per-call work around the guest dominates) and of the CPU-bound
//! `test.spin` (where the guest's own code does). The `×` columns are the
//! ratio to cranelift. What each benchmark measures, the command and the
//! results: `BENCHMARKS.md`.

mod latency;

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, SamplingMode};
use hane_builtins::test_programs::{GUEST_ECHO, GUEST_SPIN};
use hane_core::{Limits, Policy};
use hane_sandbox::{EngineKind, LoadedOperation, Sandbox, SandboxConfig};
use tokio::runtime::Runtime;

use latency::{LatencyTable, time_each};

const ECHO_INPUT: &str = r#"{"message":"hello"}"#;
const ECHO_OUTPUT: &str = r#"{"message":"hello","length":5}"#;
/// Fewer iterations than the sandbox benchmark's spin: the interpreter
/// takes tens of times longer.
const SPIN_INPUT: &str = r#"{"iterations":1000000}"#;

/// Per-call samples for the percentile tables (after warm-up calls).
const ECHO_SAMPLES: usize = 5_000;
const SPIN_SAMPLES: usize = 20;

static ECHO: LatencyTable = LatencyTable::new();
static SPIN: LatencyTable = LatencyTable::new();

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    let rt = current_thread();
    let limits = Limits::default();
    let engines: Vec<(EngineKind, LoadedOperation, LoadedOperation)> = EngineKind::ALL
        .into_iter()
        .map(|engine| {
            let sandbox = sandbox(engine);
            let echo = load(&rt, &sandbox, GUEST_ECHO);
            let spin = load(&rt, &sandbox, GUEST_SPIN);
            (engine, echo, spin)
        })
        .collect();
    // The same answers and the same fuel on both engines.
    let answers: Vec<_> = engines
        .iter()
        .map(|(_, echo, spin)| {
            let echo = rt.block_on(echo.call(ECHO_INPUT, &limits));
            assert_eq!(echo.result.as_deref().ok(), Some(ECHO_OUTPUT));
            let spin = rt.block_on(spin.call(SPIN_INPUT, &limits));
            (spin.result.expect("spin"), spin.receipt.fuel_consumed)
        })
        .collect();
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");

    let mut group = c.benchmark_group("pulley-echo");
    for (engine, echo, _) in &engines {
        let name = format!("echo-{engine}");
        group.bench_function(&name, |b| {
            ECHO.record(&name, || {
                time_each(ECHO_SAMPLES / 10, ECHO_SAMPLES, || {
                    black_box(rt.block_on(echo.call(ECHO_INPUT, &limits)));
                })
            });
            b.to_async(&rt).iter(|| echo.call(ECHO_INPUT, &limits));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("pulley-spin");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(6));
    for (engine, _, spin) in &engines {
        let name = format!("spin-{engine}");
        group.bench_function(&name, |b| {
            SPIN.record(&name, || {
                time_each(2, SPIN_SAMPLES, || {
                    black_box(rt.block_on(spin.call(SPIN_INPUT, &limits)).result).expect("spin");
                })
            });
            b.to_async(&rt).iter(|| spin.call(SPIN_INPUT, &limits));
        });
    }
    group.finish();
    c.final_summary();

    ECHO.print("One call of test.echo", "echo-cranelift");
    SPIN.print("test.spin, 1,000,000 iterations", "spin-cranelift");
}

/// The sandbox benchmark's settings on `engine`, on the benchmarks'
/// component cache (which keeps each engine's compilations apart).
fn sandbox(engine: EngineKind) -> Sandbox {
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let mut config = SandboxConfig::new();
    config
        .engine(engine)
        .max_instances(16)
        .cache_dir(Some(cache));
    Sandbox::new(&config).expect("sandbox")
}

fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn load(rt: &Runtime, sandbox: &Sandbox, path: &str) -> LoadedOperation {
    rt.block_on(sandbox.load_file(path.as_ref(), &Policy::default()))
        .unwrap_or_else(|e| panic!("loading {path}: {e}"))
}
