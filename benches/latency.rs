//! Per-call latency percentiles beside criterion's statistics: criterion
//! reports means and medians of batches, the targets in BENCHMARKS.md are
//! per-call p50 and p99. Page faults per call are counted too, because
//! they are where a fresh instance per call spends most of its time.
//!
//! Each benchmark records its row once, the first time criterion runs it,
//! so a filter (`cargo bench -- NAME`) selects rows as it selects
//! benchmarks.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Whether criterion is measuring (`cargo bench`), rather than running
/// each benchmark once as a smoke test (`cargo test --benches`,
/// `cargo bench -- --test`) or listing them.
pub fn measuring() -> bool {
    let mut bench = false;
    for arg in std::env::args() {
        match arg.as_str() {
            "--bench" => bench = true,
            "--test" | "--list" | "--profile-time" => return false,
            _ => {}
        }
    }
    bench
}

/// Per-call durations and the page faults taken while they ran.
pub struct Samples {
    times: Vec<Duration>,
    faults: Option<u64>,
}

impl Samples {
    /// The durations `run` returns, with the minor page faults this process
    /// and its waited-for children took meanwhile.
    pub fn measure(run: impl FnOnce() -> Vec<Duration>) -> Self {
        let before = minor_faults();
        let times = run();
        let faults = before
            .zip(minor_faults())
            .map(|(before, after)| after - before);
        Self { times, faults }
    }
}

/// Times `n` calls of `call` one by one, after `warm_up` untimed calls.
pub fn time_each(warm_up: usize, n: usize, mut call: impl FnMut()) -> Samples {
    for _ in 0..warm_up {
        call();
    }
    Samples::measure(|| {
        (0..n)
            .map(|_| {
                let start = Instant::now();
                call();
                start.elapsed()
            })
            .collect()
    })
}

/// Minor page faults of this process and of its children it waited for
/// (`/proc/self/stat` fields 10 and 11), where the file exists.
fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may
    // contain spaces; field 3 comes first.
    let mut fields = stat.get(stat.rfind(')')? + 2..)?.split_whitespace();
    let own: u64 = fields.nth(7)?.parse().ok()?;
    let children: u64 = fields.next()?.parse().ok()?;
    Some(own + children)
}

/// Rows of per-call samples, printed as one table at the end of the run.
pub struct LatencyTable {
    rows: Mutex<Vec<(String, Samples)>>,
}

impl LatencyTable {
    pub const fn new() -> Self {
        Self {
            rows: Mutex::new(Vec::new()),
        }
    }

    /// Records the samples `collect` returns as the row `name`, unless the
    /// row exists already or criterion is not measuring.
    pub fn record(&self, name: &str, collect: impl FnOnce() -> Samples) {
        if !measuring() || self.lock().iter().any(|(row, _)| row == name) {
            return;
        }
        let mut samples = collect();
        samples.times.sort_unstable();
        self.lock().push((name.to_owned(), samples));
    }

    /// Prints p50, p99, p99.9 and page faults per call of every row, and
    /// each row's p50 and p99 as multiples of those of the row `baseline`
    /// when it was recorded. Returns each row's p50, for differences.
    pub fn print(&self, title: &str, baseline: &str) -> Vec<(String, Duration)> {
        let rows = self.lock();
        if rows.is_empty() {
            return Vec::new();
        }
        let base = rows
            .iter()
            .find(|(row, _)| row == baseline)
            .map(|(_, s)| (percentile(&s.times, 0.5), percentile(&s.times, 0.99)));
        let width = rows.iter().map(|(row, _)| row.len()).max().unwrap_or(0);
        println!("\n{title} (per call; ×: multiple of `{baseline}`)");
        println!(
            "{:width$}  {:>6}  {:>10}  {:>10}  {:>10}  {:>6}  {:>6}  {:>11}",
            "", "n", "p50", "p99", "p99.9", "p50 ×", "p99 ×", "faults/call"
        );
        for (row, samples) in rows.iter() {
            let times = &samples.times;
            let [p50, p99, p999] = [0.5, 0.99, 0.999].map(|q| percentile(times, q));
            let ratio = |value: Duration, of: Duration| {
                format!("{:.2}", value.as_secs_f64() / of.as_secs_f64())
            };
            let (r50, r99) = base.map_or_else(
                || ("-".to_owned(), "-".to_owned()),
                |(b50, b99)| (ratio(p50, b50), ratio(p99, b99)),
            );
            let faults = samples.faults.map_or_else(
                || "-".to_owned(),
                |f| format!("{:.1}", f as f64 / times.len().max(1) as f64),
            );
            println!(
                "{row:width$}  {:>6}  {:>10}  {:>10}  {:>10}  {r50:>6}  {r99:>6}  {faults:>11}",
                times.len(),
                show(p50),
                show(p99),
                show(p999),
            );
        }
        rows.iter()
            .map(|(row, samples)| (row.clone(), percentile(&samples.times, 0.5)))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, Samples)>> {
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The `q` quantile of sorted samples (nearest rank).
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A duration in the unit that suits it.
fn show(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.2} µs")
    } else {
        format!("{:.3} ms", us / 1_000.0)
    }
}
