//! Start to exit of `/bin/true`: as a plain process, and in a container run
//! by bubblewrap and by runc (each without a service and with one service
//! forwarder), side by side in one run. Container rows time
//! `Runtime::start` and `Container::wait`; dropping the container (killing
//! what is left, removing its cgroups and runc's state) is timed apart.
//! What it measures, the command and the results: `BENCHMARKS.md`.

mod latency;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use criterion::Criterion;
use hane_container::{
    Bubblewrap, ContainerLimits, ContainerSpec, Exit, RootFs, Runc, Runtime, Service,
};

use latency::{LatencyTable, Samples};

/// Containers timed per row (after `SAMPLES / 10` untimed ones).
const SAMPLES: usize = 300;

static START_TO_EXIT: LatencyTable = LatencyTable::new();
static DROP: LatencyTable = LatencyTable::new();

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(20)
        .configure_from_args();
    containers(&mut c);
    c.final_summary();
    START_TO_EXIT.print("Start to exit of /bin/true", "plain");
    DROP.print(
        "Dropping the ended container (cgroups, runc state)",
        "bwrap",
    );
}

fn spec(services: Vec<Service>) -> ContainerSpec {
    ContainerSpec {
        root: RootFs::HostReadOnly,
        mounts: Vec::new(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: "/".into(),
        command: vec!["/bin/true".into()],
        services,
        limits: ContainerLimits {
            memory_bytes: Some(256 << 20),
            pids: Some(64),
            wall: Some(Duration::from_secs(30)),
            ..ContainerLimits::default()
        },
    }
}

/// One container's start to exit, and the time its drop took.
async fn once(runtime: &dyn Runtime, spec: ContainerSpec) -> (Duration, Duration) {
    let start = Instant::now();
    let mut container = runtime.start(spec).await.expect("start");
    assert_eq!(container.wait().await.expect("wait"), Exit::Code(0));
    let exited = start.elapsed();
    let dropped = Instant::now();
    drop(container);
    (exited, dropped.elapsed())
}

fn containers(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let bwrap = Bubblewrap::find().unwrap_or_else(|e| panic!("{e}"));
    let runc = Runc::find().unwrap_or_else(|e| panic!("{e}"));
    // A host service for the forwarder rows; /bin/true never connects, so
    // the rows time setting the forwarder up and tearing it down.
    let service = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        tokio::spawn(async move { while listener.accept().await.is_ok() {} });
        Service {
            port: 8080,
            host: addr,
        }
    });

    let mut group = c.benchmark_group("container");
    group.bench_function("plain", |b| {
        let run = || {
            let status = std::process::Command::new("/bin/true")
                .env_clear()
                .status()
                .expect("spawn /bin/true");
            assert!(status.success());
        };
        START_TO_EXIT.record("plain", || latency::time_each(SAMPLES / 10, SAMPLES, run));
        b.iter(run);
    });
    let rows: [(&str, &dyn Runtime, Vec<Service>); 4] = [
        ("bwrap", &bwrap, Vec::new()),
        ("bwrap-service", &bwrap, vec![service]),
        ("runc", &runc, Vec::new()),
        ("runc-service", &runc, vec![service]),
    ];
    for (name, runtime, services) in rows {
        group.bench_function(name, |b| {
            let mut drops = Vec::new();
            START_TO_EXIT.record(name, || {
                for _ in 0..SAMPLES / 10 {
                    rt.block_on(once(runtime, spec(services.clone())));
                }
                Samples::measure(|| {
                    (0..SAMPLES)
                        .map(|_| {
                            let (exited, dropped) =
                                rt.block_on(once(runtime, spec(services.clone())));
                            drops.push(dropped);
                            exited
                        })
                        .collect()
                })
            });
            if !drops.is_empty() {
                DROP.record(name, || Samples::measure(|| drops));
            }
            b.to_async(&rt)
                .iter(|| once(runtime, spec(services.clone())));
        });
    }
    group.finish();
}
