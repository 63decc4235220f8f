//! The SQLite session store with every commit synced (`Synchronous::Full`):
//! durable appends per second with group commit against one transaction
//! per append, the cost of a fork as the history grows, and the time to
//! open a store and read a long session. What each benchmark measures, the
//! command and the results: `BENCHMARKS.md`.

mod appends;
mod latency;

use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use hane_core::SessionId;
use hane_store::{SessionStore, SqliteConfig, SqliteStore, Synchronous};
use tokio::runtime::Runtime;

use appends::{concurrent_appends, event};
use latency::{LatencyTable, Samples, measuring, time_each};

/// Concurrent writers, each appending to its own session.
const WRITERS: [usize; 3] = [1, 16, 256];
/// The two ways of committing compared: `max_batch` of each.
const MODES: [(&str, usize); 2] = [("group-commit", 1024), ("one-tx-per-append", 1)];
/// Appends per round of the printed events/s, per mode (one transaction per
/// append is about a hundred times slower), and rounds (the median is
/// printed).
const ROUND_APPENDS: [u64; 2] = [40_000, 2_000];
const ROUNDS: usize = 3;

/// History lengths forked, and forks timed for each.
const HISTORIES: [u64; 3] = [1_000, 100_000, 1_000_000];
const FORK_SAMPLES: usize = 300;
/// Events per batch when building histories.
const BUILD_BATCH: u64 = 10_000;

/// The session that is opened and read.
const READ_EVENTS: u64 = 100_000;
const READ_SAMPLES: usize = 20;

static FORKS: LatencyTable = LatencyTable::new();
static OPEN_READ: LatencyTable = LatencyTable::new();
/// (mode, writers, events/s)
static EVENTS_PER_SECOND: Mutex<Vec<(String, usize, f64)>> = Mutex::new(Vec::new());

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
    appends(&mut c, &rt, dir.path());
    forks(&mut c, &rt, dir.path());
    open_and_read(&mut c, &rt, dir.path());
    c.final_summary();

    print_events_per_second();
    FORKS.print("Fork at the end of a history, and one fsync", "fork-1k");
    OPEN_READ.print(
        "Open the store and read a 100,000-event session",
        "open-and-read-100k",
    );
}

fn open(path: &Path, max_batch: usize) -> SqliteStore {
    let mut config = SqliteConfig::new();
    config.synchronous(Synchronous::Full).max_batch(max_batch);
    SqliteStore::open(path, &config).expect("the store opens")
}

/// (1) Events per second, one event per durable append, from concurrent
/// writers: group commit against one transaction per append.
fn appends(c: &mut Criterion, rt: &Runtime, dir: &Path) {
    let mut group = c.benchmark_group("append");
    group
        .throughput(Throughput::Elements(1))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10);
    for ((mode, max_batch), round) in MODES.into_iter().zip(ROUND_APPENDS) {
        let store: Arc<dyn SessionStore> =
            Arc::new(open(&dir.join(format!("{mode}.db")), max_batch));
        let sessions: Vec<SessionId> = rt.block_on(async {
            let mut sessions = Vec::new();
            for _ in 0..WRITERS[WRITERS.len() - 1] {
                sessions.push(store.create_session().await.expect("a session").id);
            }
            sessions
        });
        for writers in WRITERS {
            let sessions = &sessions[..writers];
            group.bench_with_input(BenchmarkId::new(mode, writers), &writers, |b, _| {
                record_events_per_second(rt, &store, sessions, mode, round);
                b.iter_custom(|appends| rt.block_on(concurrent_appends(&store, sessions, appends)));
            });
        }
    }
    group.finish();
}

/// Times [`ROUNDS`] rounds of `round` appends for the printed events/s,
/// once per mode and number of writers.
fn record_events_per_second(
    rt: &Runtime,
    store: &Arc<dyn SessionStore>,
    sessions: &[SessionId],
    mode: &str,
    round: u64,
) {
    let writers = sessions.len();
    let recorded =
        |rates: &[(String, usize, f64)]| rates.iter().any(|(m, w, _)| m == mode && *w == writers);
    if !measuring() || recorded(&EVENTS_PER_SECOND.lock().unwrap()) {
        return;
    }
    rt.block_on(concurrent_appends(store, sessions, round / 10));
    let mut rates: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let took = rt.block_on(concurrent_appends(store, sessions, round));
            round as f64 / took.as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    EVENTS_PER_SECOND
        .lock()
        .unwrap()
        .push((mode.to_owned(), writers, rates[rates.len() / 2]));
}

fn print_events_per_second() {
    let rates = EVENTS_PER_SECOND.lock().unwrap();
    if rates.is_empty() {
        return;
    }
    println!(
        "\nDurable appends of one event, Synchronous::Full, one session per writer \
         (median of {ROUNDS} rounds)"
    );
    let width = rates.iter().map(|(m, _, _)| m.len()).max().unwrap_or(0);
    println!("{:width$}  {:>7}  {:>10}", "", "writers", "events/s");
    for (mode, writers, rate) in rates.iter() {
        println!("{mode:width$}  {writers:>7}  {rate:>10.0}");
    }
}

/// Appends `events` events to `session` in large batches.
async fn fill(store: &SqliteStore, session: &SessionId, events: u64) {
    let mut next = 0;
    while next < events {
        let end = (next + BUILD_BATCH).min(events);
        store
            .append(session, (next..end).map(event).collect())
            .await
            .expect("a batch");
        next = end;
    }
}

fn size_name(events: u64) -> String {
    match events {
        n if n >= 1_000_000 => format!("{}m", n / 1_000_000),
        n if n >= 1_000 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

/// (2) A fork at the end of histories of growing length: it must not
/// depend on the length.
fn forks(c: &mut Criterion, rt: &Runtime, dir: &Path) {
    let store = open(&dir.join("forks.db"), 1024);
    let histories: Vec<(u64, SessionId)> = rt.block_on(async {
        let mut histories = Vec::new();
        for events in HISTORIES {
            let session = store.create_session().await.expect("a session").id;
            fill(&store, &session, events).await;
            histories.push((events, session));
        }
        histories
    });
    let fork = |session: &SessionId, at: u64| {
        let info = rt.block_on(store.fork(session, at)).expect("fork");
        assert_eq!(info.len, at + 1);
    };

    let mut group = c.benchmark_group("fork");
    group.sampling_mode(SamplingMode::Flat).sample_size(20);
    // What a durable commit cannot go below: one 4 KiB write and `fsync`
    // (how SQLite syncs), on the same file system.
    let file = std::fs::File::create(dir.join("fsync-probe")).expect("a probe file");
    let page = [0u8; 4096];
    let mut sync = || {
        file.write_all_at(&page, 0).expect("write");
        file.sync_all().expect("fsync");
    };
    group.bench_function("fsync-4k", |b| {
        FORKS.record("fsync-4k", || {
            time_each(FORK_SAMPLES / 10, FORK_SAMPLES, &mut sync)
        });
        b.iter(&mut sync);
    });
    for (events, session) in &histories {
        let name = format!("fork-{}", size_name(*events));
        group.bench_function(&name, |b| {
            FORKS.record(&name, || {
                time_each(FORK_SAMPLES / 10, FORK_SAMPLES, || fork(session, *events))
            });
            b.iter(|| fork(session, *events));
        });
    }
    group.finish();
}

/// (3) Opening the store and reading a whole 100,000-event session.
fn open_and_read(c: &mut Criterion, rt: &Runtime, dir: &Path) {
    let path = dir.join("read.db");
    let session = {
        let store = open(&path, 1024);
        rt.block_on(async {
            let session = store.create_session().await.expect("a session").id;
            fill(&store, &session, READ_EVENTS).await;
            session
        })
    };
    // Each run opens the file afresh; the handle is dropped outside the
    // timed part.
    let run = |read: bool| -> Duration {
        let start = Instant::now();
        let store = open(&path, 1024);
        if read {
            let events = rt
                .block_on(store.read(&session, 0..u64::MAX))
                .expect("read");
            assert_eq!(events.len() as u64, READ_EVENTS);
        }
        let took = start.elapsed();
        drop(store);
        took
    };
    let mut group = c.benchmark_group("open-read");
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    for (name, read) in [("open-and-read-100k", true), ("open", false)] {
        group.bench_function(name, |b| {
            OPEN_READ.record(name, || {
                run(read);
                Samples::measure(|| (0..READ_SAMPLES).map(|_| run(read)).collect())
            });
            b.iter_custom(|n| (0..n).map(|_| run(read)).sum());
        });
    }
    group.finish();
}
