//! One operation call, side by side with the same work done by a native
//! process spawned per call (plain and under bubblewrap); throughput of
//! concurrent calls; and the cost of fuel metering. What each benchmark
//! measures, the command and the results: `BENCHMARKS.md`.

mod latency;

use std::future::Future;
use std::hint::black_box;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput};
use hane_builtins::test_programs::{GUEST_ECHO, GUEST_SPIN};
use hane_core::{Limits, Policy};
use hane_sandbox::{LoadedOperation, Sandbox, SandboxConfig};
use serde_json::Value;
use tokio::runtime::Runtime;
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentType, InstancePre, Lift, Linker, ResourceTable,
};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store,
};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use latency::{LatencyTable, Samples, measuring, time_each};

const ECHO_INPUT: &str = r#"{"message":"hello"}"#;
const ECHO_OUTPUT: &str = r#"{"message":"hello","length":5}"#;
const ECHO_NATIVE: &str = env!("CARGO_BIN_EXE_echo-native");
const SPIN_INPUT: &str = r#"{"iterations":5000000}"#;

/// The sandbox prefix of the bubblewrap variant: the whole file system
/// read-only, fresh /dev and /proc, every namespace unshared.
const BWRAP: &[&str] = &[
    "bwrap",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-all",
    "--die-with-parent",
];

/// Concurrent tasks in the throughput benchmark.
const TASKS: [u64; 3] = [2, 16, 64];
/// Concurrent tasks for the bare-engine rows of the throughput benchmark.
const BARE_TASKS: u64 = 16;

/// Per-call samples for the percentile table (after warm-up calls).
const CALL_SAMPLES: usize = 20_000;
const PROCESS_SAMPLES: usize = 2_000;
const BWRAP_SAMPLES: usize = 1_000;
const SPIN_SAMPLES: usize = 30;
/// Calls per round of the printed calls/s, and rounds (the median is
/// printed, so one interrupted round does not count).
const THROUGHPUT_CALLS: u64 = 20_000;
const THROUGHPUT_ROUNDS: usize = 5;

/// Bytes of each memory and table kept mapped between instances, as the
/// sandbox's default.
const KEEP_RESIDENT: usize = 1 << 20;

static CALLS: LatencyTable = LatencyTable::new();
static FUEL: LatencyTable = LatencyTable::new();
/// (benchmark, tasks, calls/s)
static CALLS_PER_SECOND: Mutex<Vec<(String, u64, f64)>> = Mutex::new(Vec::new());

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let metered = sandbox(true);
    call(&mut c, &metered);
    throughput(&mut c, &metered);
    fuel(&mut c, &metered);
    c.final_summary();

    CALLS.print("One call of test.echo", "hane-op-call");
    print_calls_per_second();
    FUEL.print("test.spin, 5,000,000 iterations", "spin-fuel-off");
}

/// (a) `op.call` of the trivial operation on a current-thread runtime,
/// what it is made of, and (b) a native process per call.
fn call(c: &mut Criterion, sandbox: &Sandbox) {
    let rt = current_thread();
    let echo = load(&rt, sandbox, GUEST_ECHO);
    let limits = Limits::default();
    let first = rt.block_on(echo.call(ECHO_INPUT, &limits));
    assert_eq!(first.result.as_deref().ok(), Some(ECHO_OUTPUT));

    let mut group = c.benchmark_group("call");
    group.bench_function("hane-op-call", |b| {
        CALLS.record("hane-op-call", || {
            time_each_async(&rt, CALL_SAMPLES, || echo.call(ECHO_INPUT, &limits))
        });
        b.to_async(&rt).iter(|| echo.call(ECHO_INPUT, &limits));
    });

    // The parts of a call that can be measured from outside the sandbox.
    let bare = BareEcho::new(Reset::InPlace);
    let madvise = BareEcho::new(Reset::Madvise);
    assert_eq!(rt.block_on(bare.run(ECHO_INPUT)), ECHO_OUTPUT);
    assert_eq!(rt.block_on(madvise.run(ECHO_INPUT)), ECHO_OUTPUT);
    group.bench_function("wasmtime-instantiate", |b| {
        CALLS.record("wasmtime-instantiate", || {
            time_each_async(&rt, CALL_SAMPLES, || bare.instantiate())
        });
        b.to_async(&rt).iter(|| bare.instantiate());
    });
    for (name, bare) in [
        ("wasmtime-instantiate-run", &bare),
        ("wasmtime-instantiate-run-madvise", &madvise),
    ] {
        group.bench_function(name, |b| {
            CALLS.record(name, || {
                time_each_async(&rt, CALL_SAMPLES, || bare.run(ECHO_INPUT))
            });
            b.to_async(&rt).iter(|| bare.run(ECHO_INPUT));
        });
    }
    let checks = SchemaChecks::new(&echo);
    group.bench_function("json-schema-checks", |b| {
        CALLS.record("json-schema-checks", || {
            time_each(CALL_SAMPLES / 10, CALL_SAMPLES, || checks.check())
        });
        b.iter(|| checks.check());
    });

    // A process per call takes about a millisecond: fewer, flat samples.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(30)
        .measurement_time(Duration::from_secs(5));
    let mut native = Command::new(ECHO_NATIVE);
    run_echo(&mut native).expect("echo-native");
    group.bench_function("process-spawn", |b| {
        CALLS.record("process-spawn", || {
            time_each(PROCESS_SAMPLES / 20, PROCESS_SAMPLES, || {
                run_echo(&mut native).expect("echo-native");
            })
        });
        b.iter(|| run_echo(&mut native).expect("echo-native"));
    });
    let mut bwrap = Command::new(BWRAP[0]);
    bwrap.args(&BWRAP[1..]).arg(ECHO_NATIVE);
    match run_echo(&mut bwrap) {
        Ok(()) => {
            group.bench_function("bwrap-spawn", |b| {
                CALLS.record("bwrap-spawn", || {
                    time_each(BWRAP_SAMPLES / 20, BWRAP_SAMPLES, || {
                        run_echo(&mut bwrap).expect("bwrap echo-native");
                    })
                });
                b.iter(|| run_echo(&mut bwrap).expect("bwrap echo-native"));
            });
        }
        Err(e) => println!(
            "note: skipping call/bwrap-spawn: {e} (install it with `apt-get install -y bubblewrap`)"
        ),
    }
    group.finish();
}

/// (c) Calls per second with concurrent tasks, each calling in a loop,
/// on a two-worker runtime; the bare engine's rows show how much of the
/// limit is the engine's.
fn throughput(c: &mut Criterion, sandbox: &Sandbox) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let echo = load(&rt, sandbox, GUEST_ECHO);
    let hane = move || {
        let echo = echo.clone();
        async move {
            let call = echo.call(ECHO_INPUT, &Limits::default()).await;
            assert!(call.result.is_ok(), "{:?}", call.result);
        }
    };
    let bare_run = |bare: BareEcho| {
        let bare = Arc::new(bare);
        move || {
            let bare = bare.clone();
            async move {
                black_box(bare.run(ECHO_INPUT).await);
            }
        }
    };

    let mut group = c.benchmark_group("throughput");
    group.throughput(Throughput::Elements(1));
    for tasks in TASKS {
        concurrent(&mut group, &rt, "hane-op-call", tasks, &hane);
    }
    for (name, reset) in [
        ("wasmtime-instantiate-run", Reset::InPlace),
        ("wasmtime-instantiate-run-madvise", Reset::Madvise),
    ] {
        let bare = bare_run(BareEcho::new(reset));
        concurrent(&mut group, &rt, name, BARE_TASKS, &bare);
    }
    group.finish();
}

/// Benchmarks `call` made by `tasks` concurrent tasks.
fn concurrent<F, Fut>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    rt: &Runtime,
    name: &str,
    tasks: u64,
    call: &F,
) where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    group.bench_with_input(BenchmarkId::new(name, tasks), &tasks, |b, &tasks| {
        record_calls_per_second(rt, name, tasks, call);
        b.iter_custom(|calls| rt.block_on(concurrent_calls(call, tasks, calls)));
    });
}

/// `calls` calls shared by `tasks` tasks; the time they took.
async fn concurrent_calls<F, Fut>(call: &F, tasks: u64, calls: u64) -> Duration
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let call = call.clone();
        let n = calls / tasks + u64::from(task < calls % tasks);
        set.spawn(async move {
            for _ in 0..n {
                call().await;
            }
        });
    }
    while let Some(joined) = set.join_next().await {
        joined.expect("task");
    }
    start.elapsed()
}

/// Times [`THROUGHPUT_ROUNDS`] rounds of [`THROUGHPUT_CALLS`] calls for the
/// printed calls/s, once per benchmark and task count.
fn record_calls_per_second<F, Fut>(rt: &Runtime, name: &str, tasks: u64, call: &F)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let recorded =
        |rates: &[(String, u64, f64)]| rates.iter().any(|(n, t, _)| n == name && *t == tasks);
    if !measuring() || recorded(&CALLS_PER_SECOND.lock().unwrap()) {
        return;
    }
    rt.block_on(concurrent_calls(call, tasks, THROUGHPUT_CALLS / 10));
    let mut rates: Vec<f64> = (0..THROUGHPUT_ROUNDS)
        .map(|_| {
            let took = rt.block_on(concurrent_calls(call, tasks, THROUGHPUT_CALLS));
            THROUGHPUT_CALLS as f64 / took.as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    let rate = rates[rates.len() / 2];
    CALLS_PER_SECOND
        .lock()
        .unwrap()
        .push((name.to_owned(), tasks, rate));
}

fn print_calls_per_second() {
    let rates = CALLS_PER_SECOND.lock().unwrap();
    if rates.is_empty() {
        return;
    }
    println!(
        "\nConcurrent calls of test.echo on a 2-worker runtime \
         (median of {THROUGHPUT_ROUNDS} rounds of {THROUGHPUT_CALLS} calls)"
    );
    let width = rates.iter().map(|(n, _, _)| n.len()).max().unwrap_or(0);
    println!("{:width$}  {:>5}  {:>10}", "", "tasks", "calls/s");
    for (name, tasks, rate) in rates.iter() {
        println!("{name:width$}  {tasks:>5}  {rate:>10.0}");
    }
}

/// (d) The CPU-bound guest with fuel metered and without.
fn fuel(c: &mut Criterion, metered: &Sandbox) {
    let rt = current_thread();
    let unmetered = sandbox(false);
    let on = load(&rt, metered, GUEST_SPIN);
    let off = load(&rt, &unmetered, GUEST_SPIN);
    let limits = Limits::default();
    let spin = |op: &LoadedOperation| rt.block_on(op.call(SPIN_INPUT, &limits));
    let (metered_call, unmetered_call) = (spin(&on), spin(&off));
    assert!(metered_call.receipt.fuel_consumed > 0);
    assert_eq!(unmetered_call.receipt.fuel_consumed, 0);
    assert_eq!(metered_call.result.ok(), unmetered_call.result.ok());

    let mut group = c.benchmark_group("fuel");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    for (name, op) in [("spin-fuel-on", &on), ("spin-fuel-off", &off)] {
        group.bench_function(name, |b| {
            FUEL.record(name, || {
                time_each(3, SPIN_SAMPLES, || {
                    black_box(spin(op).result.expect("spin"));
                })
            });
            b.to_async(&rt).iter(|| op.call(SPIN_INPUT, &limits));
        });
    }
    group.finish();
}

fn sandbox(fuel: bool) -> Sandbox {
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let mut config = SandboxConfig::new();
    config.fuel(fuel).max_instances(256).cache_dir(Some(cache));
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

/// [`time_each`] for async calls, all inside one `block_on` as criterion's
/// async iteration does, after `n / 10` untimed calls.
fn time_each_async<F: Future>(rt: &Runtime, n: usize, mut call: impl FnMut() -> F) -> Samples {
    rt.block_on(async {
        for _ in 0..n / 10 {
            black_box(call().await);
        }
    });
    Samples::measure(|| {
        rt.block_on(async {
            let mut samples = Vec::with_capacity(n);
            for _ in 0..n {
                let start = Instant::now();
                black_box(call().await);
                samples.push(start.elapsed());
            }
            samples
        })
    })
}

/// Spawns `command`, writes the echo input to its stdin and checks its
/// output.
fn run_echo(command: &mut Command) -> Result<(), String> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(ECHO_INPUT.as_bytes())
        .map_err(|e| format!("cannot write stdin: {e}"))?;
    drop(stdin);
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot wait: {e}"))?;
    if !out.status.success() || out.stdout != ECHO_OUTPUT.as_bytes() {
        return Err(format!(
            "{:?} failed ({}): {}{}",
            command.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr).trim_end(),
        ));
    }
    Ok(())
}

/// The echo component on a bare engine configured like the sandbox's
/// (pooling allocator, copy-on-write images, memories reset in place,
/// fuel, epochs) with only WASI linked: instantiation and the call itself,
/// without what hane does around them (input and output checks, captured
/// stdio, the HTTP gate, the memory limiter, the deadline, the receipt).
struct BareEcho {
    engine: Engine,
    pre: InstancePre<BareState>,
    run: ComponentExportIndex,
}

struct BareState {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for BareState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The `error` variant of `wit/operation.wit`.
#[derive(ComponentType, Lift)]
#[component(variant)]
enum GuestError {
    #[component(name = "invalid-input")]
    InvalidInput(String),
    #[component(name = "not-found")]
    NotFound(String),
    #[component(name = "denied")]
    Denied(String),
    #[component(name = "failed")]
    Failed(String),
}

/// How pooled memories and tables are reset when an instance ends.
#[derive(Clone, Copy)]
enum Reset {
    /// As the sandbox does: the first [`KEEP_RESIDENT`] bytes stay mapped
    /// and only the pages the instance dirtied are reset (`PAGEMAP_SCAN`,
    /// Linux 6.7 and later).
    InPlace,
    /// Wasmtime's default: `madvise` unmaps them, and the next instance
    /// faults them back in.
    Madvise,
}

impl BareEcho {
    fn new(reset: Reset) -> Self {
        let n = 256;
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(n)
            .total_core_instances(n * 8)
            .max_core_instances_per_component(32)
            .total_memories(n * 2)
            .max_memories_per_component(4)
            .total_tables(n * 4)
            .max_tables_per_component(8)
            .table_elements(100_000)
            .total_stacks(n);
        if let Reset::InPlace = reset {
            pool.linear_memory_keep_resident(KEEP_RESIDENT)
                .table_keep_resident(KEEP_RESIDENT)
                .pagemap_scan(Enabled::Auto);
        }
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            .memory_init_cow(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).expect("engine");
        let component = Component::from_file(&engine, GUEST_ECHO).expect("compile test.echo");
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).expect("link WASI");
        // Echo imports only the types of `hane:operation`, not `log`.
        linker
            .instance("hane:operation/types@0.1.0")
            .expect("link hane:operation/types");
        let pre = linker.instantiate_pre(&component).expect("instance-pre");
        let run = component
            .get_export_index(None, "run")
            .expect("a `run` export");
        Self { engine, pre, run }
    }

    fn store(&self) -> Store<BareState> {
        let state = BareState {
            wasi: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
        };
        let mut store = Store::new(&self.engine, state);
        store.set_fuel(Limits::default().fuel).expect("fuel");
        store.set_epoch_deadline(1);
        store
    }

    /// A store and an instance, dropped.
    async fn instantiate(&self) {
        let mut store = self.store();
        black_box(
            self.pre
                .instantiate_async(&mut store)
                .await
                .expect("instance"),
        );
    }

    /// A store, an instance and one call of `run`.
    async fn run(&self, input: &str) -> String {
        let mut store = self.store();
        let instance = self
            .pre
            .instantiate_async(&mut store)
            .await
            .expect("instance");
        let run = instance
            .get_typed_func::<(&str,), (Result<String, GuestError>,)>(&mut store, &self.run)
            .expect("`run` is func(string) -> result<string, error>");
        match run
            .call_async(&mut store, (input,))
            .await
            .expect("no trap")
            .0
        {
            Ok(output) => output,
            Err(
                GuestError::InvalidInput(m)
                | GuestError::NotFound(m)
                | GuestError::Denied(m)
                | GuestError::Failed(m),
            ) => panic!("echo failed: {m}"),
        }
    }
}

/// What a call does with JSON on the host: parses the input and output and
/// checks each against the operation's schema (compiled as the sandbox
/// compiles them).
struct SchemaChecks {
    input: jsonschema::Validator,
    output: jsonschema::Validator,
}

impl SchemaChecks {
    fn new(op: &LoadedOperation) -> Self {
        let compile = |text: &str| {
            let schema: Value = serde_json::from_str(text).expect("schema JSON");
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(&schema)
                .expect("schema")
        };
        let descriptor = op.descriptor();
        Self {
            input: compile(&descriptor.input_schema),
            output: compile(&descriptor.output_schema),
        }
    }

    fn check(&self) {
        let input: Value = serde_json::from_str(ECHO_INPUT).expect("input JSON");
        assert!(self.input.is_valid(&input));
        let output: Value = serde_json::from_str(ECHO_OUTPUT).expect("output JSON");
        assert!(self.output.is_valid(&output));
    }
}
