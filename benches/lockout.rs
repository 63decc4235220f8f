//! Lock-out by idle and silent peers, side by side with no flood: how long
//! a new HTTP client waits for its answer from `hane serve` (cap: 1,024
//! connections) while 2,000 idle keep-alive connections are held open and
//! more keep coming, and how long a coordinator with the secret takes to
//! connect to `hane worker` (64 unauthenticated places) while 3,000 silent
//! connections are held from four other loopback addresses and more keep
//! coming. The target: within a second. What it measures, the command and
//! the results: `BENCHMARKS.md`.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hane_manager::{Components, ProxyOperationManager, WorkerAddr, WorkerSecret};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

const IDLE_HTTP: usize = 2_000;
const SILENT_WORKER: usize = 3_000;
const SAMPLES: usize = 30;
const SECRET: &str = "the lockout benchmark's secret";

fn hane_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hane"))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let http = rt.block_on(http());
    let worker = rt.block_on(worker());
    println!("\n| peer | flood held | samples | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|---|---|");
    for (what, held, times) in http.into_iter().chain(worker) {
        let (p50, p99, max) = summary(times);
        println!("| {what} | {held} | {SAMPLES} | {p50:.2?} | {p99:.2?} | {max:.2?} | 1 s |");
    }
}

fn summary(mut times: Vec<Duration>) -> (Duration, Duration, Duration) {
    times.sort_unstable();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    (at(0.5), at(0.99), *times.last().unwrap())
}

/// One request on a new connection: the time until its whole answer.
async fn one_request(addr: &str) -> Duration {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    started.elapsed()
}

async fn http() -> Vec<(&'static str, usize, Vec<Duration>)> {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    // `hane serve` wants a key to let anyone in; /healthz needs none.
    let made = Command::new(hane_binary())
        .args(["keys", "create", "ops", "--role", "operator", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let (mut serve, addr) = hane_test_support::serve(&hane_binary(), &store, &[]);
    let mut quiet = Vec::new();
    for _ in 0..SAMPLES {
        quiet.push(one_request(&addr).await);
    }
    // The flood: each connection makes one request, reads its answer and
    // stays open, idle; new ones keep coming.
    let stop = Arc::new(AtomicBool::new(false));
    let open = Arc::new(AtomicUsize::new(0));
    let flood = {
        let (addr, stop, open) = (addr.clone(), stop.clone(), open.clone());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut stream) = TcpStream::connect(&addr).await else {
                    continue;
                };
                if stream
                    .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                    .await
                    .is_err()
                {
                    continue;
                }
                let mut buffer = [0; 1024];
                let _ = stream.read(&mut buffer).await;
                held.push(stream);
                if held.len() > IDLE_HTTP {
                    held.remove(0);
                }
                open.store(held.len(), Ordering::Relaxed);
                if held.len() == IDLE_HTTP {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        })
    };
    while open.load(Ordering::Relaxed) < IDLE_HTTP {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut flooded = Vec::new();
    for _ in 0..SAMPLES {
        flooded.push(one_request(&addr).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    flood.await.unwrap();
    let _ = serve.kill();
    let _ = serve.wait();
    vec![
        ("HTTP client, no flood", 0, quiet),
        ("HTTP client, idle keep-alive flood", IDLE_HTTP, flooded),
    ]
}

async fn connect(addr: &WorkerAddr) -> Duration {
    let started = Instant::now();
    let proxy = ProxyOperationManager::connect(
        addr.clone(),
        WorkerSecret::new(SECRET.as_bytes()).unwrap(),
        Components::new(),
    )
    .await
    .expect("the coordinator is admitted");
    let took = started.elapsed();
    drop(proxy);
    took
}

async fn worker() -> Vec<(&'static str, usize, Vec<Duration>)> {
    let mut child = Command::new(hane_binary())
        .args(["worker", "--listen", "127.0.0.1:0"])
        .env("HANE_WORKER_SECRET", SECRET)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("RUST_LOG", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let at = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    let addr: WorkerAddr = at.parse().unwrap();
    let WorkerAddr::Tcp { port, .. } = addr.clone() else {
        panic!("a TCP worker")
    };
    let mut quiet = Vec::new();
    for _ in 0..SAMPLES {
        quiet.push(connect(&addr).await);
    }
    // Four flooding addresses, each holding its share, new connections
    // replacing its oldest.
    let stop = Arc::new(AtomicBool::new(false));
    let open = Arc::new(AtomicUsize::new(0));
    let floods: Vec<_> = (2..6)
        .map(|last| {
            let (stop, open) = (stop.clone(), open.clone());
            tokio::spawn(async move {
                let from = format!("127.0.0.{last}:0").parse().unwrap();
                let to = format!("127.0.0.1:{port}").parse().unwrap();
                let share = SILENT_WORKER / 4;
                let mut held = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let socket = TcpSocket::new_v4().unwrap();
                    socket.bind(from).unwrap();
                    if let Ok(stream) = socket.connect(to).await {
                        held.push(stream);
                    }
                    if held.len() > share {
                        held.remove(0);
                    } else {
                        open.fetch_add(1, Ordering::Relaxed);
                    }
                    if held.len() == share {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            })
        })
        .collect();
    while open.load(Ordering::Relaxed) < SILENT_WORKER {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut flooded = Vec::new();
    for _ in 0..SAMPLES {
        flooded.push(connect(&addr).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for flood in floods {
        flood.await.unwrap();
    }
    let _ = child.kill();
    let _ = child.wait();
    vec![
        ("coordinator to worker, no flood", 0, quiet),
        (
            "coordinator to worker, silent flood",
            SILENT_WORKER,
            flooded,
        ),
    ]
}
