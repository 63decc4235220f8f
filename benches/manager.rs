//! One operation of `test.echo` submitted through the local operation
//! manager, side by side with the same operation through the proxy
//! operation manager to a worker on a Unix socket; the difference is what
//! the proxy costs per operation. The worker is served in this process, on
//! a runtime of its own on its own thread, so the two sides talk only
//! through the socket. A third row is the floor under any proxy: one small
//! frame to a thread that answers with another, over the same kind of
//! socket. What it measures, the command and the results: `BENCHMARKS.md`.

mod latency;

use std::path::PathBuf;
use std::time::Duration;

use criterion::Criterion;
use hane_builtins::test_programs::GUEST_ECHO;
use hane_core::{
    Impact, JsonText, Limits, Operation, OperationId, Policy, SessionId, ToolCallId, WasmCall,
};
use hane_manager::protocol::{ClientMessage, FrameReader, FrameWriter, WorkerMessage};
use hane_manager::{
    Components, LocalConfig, LocalOperationManager, ProxyOperationManager, Worker, WorkerAddr,
    WorkerListener, WorkerSecret,
};
use hane_manager::{Ending, OperationManager};
use hane_sandbox::{Sandbox, SandboxConfig};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::runtime::Runtime;

use latency::{LatencyTable, time_each};

const ECHO_INPUT: &str = r#"{"message":"hello"}"#;
const ECHO_OUTPUT: &str = r#"{"message":"hello","length":5}"#;

/// Operations timed per row of the percentile table (after `n / 10`
/// untimed ones).
const SAMPLES: usize = 20_000;

/// The target of the proxy's cost per operation, at p50.
const OVERHEAD_TARGET: Duration = Duration::from_micros(100);

static OPERATIONS: LatencyTable = LatencyTable::new();

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    managers(&mut c);
    c.final_summary();

    let p50 = OPERATIONS.print("One operation of test.echo, submitted and awaited", "local");
    let p50_of = |name: &str| p50.iter().find(|(row, _)| row == name).map(|(_, d)| *d);
    if let (Some(local), Some(proxy)) = (p50_of("local"), p50_of("proxy-unix")) {
        let overhead = proxy.saturating_sub(local);
        println!(
            "proxy overhead per operation (p50 difference): {:.2} µs (target ≤ {} µs)",
            overhead.as_secs_f64() * 1e6,
            OVERHEAD_TARGET.as_micros()
        );
    }
}

fn managers(c: &mut Criterion) {
    let sandbox = sandbox();
    let components = Components::new();
    let echo = components.insert(std::fs::read(GUEST_ECHO).expect("test.echo component"));
    let operation = echo_operation(&echo);

    let rt = current_thread();
    let local = {
        let _entered = rt.enter();
        LocalOperationManager::new(
            sandbox.clone(),
            components.clone(),
            LocalConfig::new().concurrency(1),
        )
    };

    let dir = tempfile::tempdir().expect("socket dir");
    let addr = WorkerAddr::Unix(dir.path().join("worker.sock"));
    let secret = WorkerSecret::new(b"benchmark secret").expect("secret");
    // The worker holds no component: the first operation ships test.echo,
    // the rest find it.
    serve_worker(sandbox, &addr, secret.clone());
    let proxy = rt
        .block_on(ProxyOperationManager::connect(addr, secret, components))
        .expect("connect to the worker");

    let mut group = c.benchmark_group("manager");
    for (name, manager) in [
        ("local", &local as &dyn OperationManager),
        ("proxy-unix", &proxy),
    ] {
        let run = || rt.block_on(manager.submit(operation.clone()).ending());
        match run() {
            Ending::Succeeded(done) => assert_eq!(done.output.as_str(), ECHO_OUTPUT),
            other => panic!("{name}: test.echo did not succeed: {other:?}"),
        }
        group.bench_function(name, |b| {
            OPERATIONS.record(name, || {
                time_each(SAMPLES / 10, SAMPLES, || {
                    assert!(matches!(run(), Ending::Succeeded(_)));
                })
            });
            b.to_async(&rt)
                .iter(|| manager.submit(operation.clone()).ending());
        });
    }

    let pinger = rt.block_on(Pinger::start());
    group.bench_function("socket-round-trip", |b| {
        OPERATIONS.record("socket-round-trip", || {
            time_each(SAMPLES / 10, SAMPLES, || rt.block_on(pinger.ping()))
        });
        b.to_async(&rt).iter(|| pinger.ping());
    });
    group.finish();
}

/// Serves a worker on `addr` from a thread of its own, with the same
/// sandbox; it runs until the process exits.
fn serve_worker(sandbox: Sandbox, addr: &WorkerAddr, secret: WorkerSecret) {
    let rt = current_thread();
    let listener = rt
        .block_on(WorkerListener::bind(addr))
        .expect("bind the worker socket");
    std::thread::spawn(move || {
        rt.block_on(async {
            let manager = LocalOperationManager::new(
                sandbox,
                Components::new(),
                LocalConfig::new().concurrency(1),
            );
            Worker::new(manager, secret).serve(listener).await;
        });
    });
}

/// Sends one small frame to a thread that answers each with another, over
/// a Unix socket, with the protocol's framing: what a round trip costs
/// without any operation.
struct Pinger {
    id: OperationId,
    /// Used by one ping at a time; the lock is never contended.
    link: tokio::sync::Mutex<(FrameReader<OwnedReadHalf>, FrameWriter<OwnedWriteHalf>)>,
    _dir: tempfile::TempDir,
}

impl Pinger {
    async fn start() -> Self {
        let dir = tempfile::tempdir().expect("socket dir");
        let path = dir.path().join("pong.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        std::thread::spawn(move || {
            current_thread().block_on(async {
                listener.set_nonblocking(true).expect("nonblocking");
                let listener = UnixListener::from_std(listener).expect("listener");
                let (stream, _) = listener.accept().await.expect("accept");
                let (read, write) = stream.into_split();
                let (mut reader, mut writer) = (FrameReader::new(read), FrameWriter::new(write));
                reader.authenticated();
                while let Ok(ClientMessage::Cancel { id }) = reader.next().await {
                    if writer
                        .send_now(&WorkerMessage::Started { id })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        });
        let (read, write) = UnixStream::connect(&path)
            .await
            .expect("connect")
            .into_split();
        Self {
            id: OperationId::new(),
            link: tokio::sync::Mutex::new((FrameReader::new(read), FrameWriter::new(write))),
            _dir: dir,
        }
    }

    async fn ping(&self) {
        let mut link = self.link.lock().await;
        let (reader, writer) = &mut *link;
        let ping = ClientMessage::Cancel {
            id: self.id.clone(),
        };
        writer.send_now(&ping).await.expect("ping");
        let pong: WorkerMessage = reader.next().await.expect("pong");
        assert!(matches!(pong, WorkerMessage::Started { .. }));
    }
}

fn echo_operation(digest: &str) -> Operation {
    Operation::wasm(
        SessionId::new(),
        ToolCallId::new(),
        Impact::Read,
        WasmCall {
            name: "test.echo".into(),
            component: digest.to_owned(),
            policy: Policy::default(),
            limits: Limits::default(),
            input: JsonText::parse(ECHO_INPUT).expect("JSON"),
        },
    )
}

fn sandbox() -> Sandbox {
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let mut config = SandboxConfig::new();
    config.max_instances(16).cache_dir(Some(cache));
    Sandbox::new(&config).expect("sandbox")
}

fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}
