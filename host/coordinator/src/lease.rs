//! [`Lease`]: this process's claim to be alive, in the store it shares
//! with others. Runs are held under it and deliveries name it; while it is
//! renewed nobody takes them, and once it lapses anybody may.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hane_store::{Registry, StoreError};
use tokio::sync::Notify;

/// How long a lease lasts unless renewed, by default. A process that dies
/// leaves its runs and deliveries for this long before another takes
/// them.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(15);

/// The shortest lease accepted: renewals come every third of it, and a
/// store busy with another process's write can hold one back for longer.
pub const MIN_LEASE: Duration = Duration::from_millis(300);

/// The environment variable that sets every command's lease, in seconds
/// (`HANE_LEASE=15`, `HANE_LEASE=0.5`).
pub const LEASE_ENV: &str = "HANE_LEASE";

/// A lease of this process on a store, renewed every third of its length
/// by a thread of its own until it is released or dropped: no work on the
/// process's async runtime (a long compilation, a slow start on a small
/// or emulated CPU) can hold a renewal back. Cheap to clone; clones are
/// the same lease.
#[derive(Clone)]
pub struct Lease {
    inner: Arc<Inner>,
}

struct Inner {
    holder: String,
    registry: Registry,
    ttl: Duration,
    lapsed: AtomicBool,
    lost: Notify,
    /// Tells the renewing thread to stop.
    stop: Arc<Stop>,
    /// Called once, when it lapses.
    on_lost: Mutex<Vec<LostHook>>,
}

type LostHook = Box<dyn FnOnce() + Send>;

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.stop();
    }
}

/// A stop signal the renewing thread waits on beside its timer.
#[derive(Default)]
struct Stop {
    stopped: AtomicBool,
    notify: Notify,
}

impl Stop {
    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("holder", &self.inner.holder)
            .field("ttl", &self.inner.ttl)
            .finish()
    }
}

/// A lease length that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "{LEASE_ENV}=`{text}` is not a lease length: give seconds, at least {min} (such as `15` or `0.5`)",
    min = MIN_LEASE.as_secs_f64()
)]
pub struct BadLease {
    /// The text given, as an error shows it.
    pub text: String,
}

/// A lease length from `text`, in seconds.
///
/// # Errors
///
/// Not a number of seconds, or shorter than [`MIN_LEASE`].
pub fn parse_lease(text: &str) -> Result<Duration, BadLease> {
    let bad = || BadLease {
        text: hane_core::ids::IdError::shown(text),
    };
    let seconds: f64 = text.trim().parse().map_err(|_| bad())?;
    let ttl = Duration::try_from_secs_f64(seconds).map_err(|_| bad())?;
    if ttl < MIN_LEASE || ttl > Duration::from_secs(24 * 3600) {
        return Err(bad());
    }
    Ok(ttl)
}

/// The lease length [`LEASE_ENV`] sets, or [`DEFAULT_LEASE`] when it is
/// unset or empty.
///
/// # Errors
///
/// It is set to something [`parse_lease`] refuses.
pub fn lease_from_env() -> Result<Duration, BadLease> {
    match std::env::var(LEASE_ENV) {
        Ok(text) if !text.trim().is_empty() => parse_lease(&text),
        _ => Ok(DEFAULT_LEASE),
    }
}

/// This machine's name, for telling holders apart in listings.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

impl Lease {
    /// Takes a new lease of length `ttl` on `registry`'s store, blocking
    /// until it is stored, and starts the thread that renews it.
    ///
    /// # Errors
    ///
    /// The store failed, or the thread could not be started.
    pub fn acquire(registry: &Registry, ttl: Duration) -> Result<Lease, StoreError> {
        let ttl = ttl.max(MIN_LEASE);
        let host = host_name();
        let pid = std::process::id();
        let mut random = [0u8; 6];
        // Without randomness the host, the process id and the time still
        // tell holders apart.
        let _ = getrandom::fill(&mut random);
        let holder = format!(
            "{host}/{pid}/{}{}",
            hane_core::now_ms() % 1_000_000,
            hex::encode(random)
        );
        registry.leases().acquire(&holder, &host, pid, ttl)?;
        let stop = Arc::new(Stop::default());
        let lease = Lease {
            inner: Arc::new(Inner {
                holder,
                registry: registry.clone(),
                ttl,
                lapsed: AtomicBool::new(false),
                lost: Notify::new(),
                stop: stop.clone(),
                on_lost: Mutex::new(Vec::new()),
            }),
        };
        let weak = Arc::downgrade(&lease.inner);
        std::thread::Builder::new()
            .name("hane-lease".into())
            .spawn(move || {
                // A runtime of its own: timers, and the blocking pool the
                // store's calls run on.
                match tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                {
                    Ok(runtime) => runtime.block_on(renew(weak, stop)),
                    Err(e) => {
                        tracing::error!("the lease cannot be renewed: no runtime for it: {e}");
                        if let Some(inner) = weak.upgrade() {
                            lapse(&inner);
                        }
                    }
                }
            })
            .map_err(|e| {
                StoreError::Database(format!("starting the thread that renews the lease: {e}"))
            })?;
        Ok(lease)
    }

    /// The holder's name: `HOST/PID/` and digits unique to this lease.
    pub fn holder(&self) -> &str {
        &self.inner.holder
    }

    /// Its length.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// Whether it lapsed before it could be renewed: what it held may
    /// belong to another process now.
    pub fn lapsed(&self) -> bool {
        self.inner.lapsed.load(Ordering::SeqCst)
    }

    /// Waits until the lease lapses.
    pub async fn lost(&self) {
        loop {
            let lost = self.inner.lost.notified();
            tokio::pin!(lost);
            lost.as_mut().enable();
            if self.lapsed() {
                return;
            }
            lost.await;
        }
    }

    /// Calls `hook` once when the lease lapses (at once if it has).
    pub fn on_lost(&self, hook: impl FnOnce() + Send + 'static) {
        let mut hooks = self.inner.on_lost.lock().unwrap_or_else(|e| e.into_inner());
        if self.lapsed() {
            drop(hooks);
            hook();
        } else {
            hooks.push(Box::new(hook));
        }
    }

    /// Stops renewing and gives the lease up, so that whatever it still
    /// holds is taken over at once rather than when it would lapse.
    ///
    /// # Errors
    ///
    /// The store failed; the lease then lapses by itself.
    pub async fn release(&self) -> Result<(), StoreError> {
        self.inner.stop.stop();
        self.inner
            .registry
            .leases()
            .give_up(&self.inner.holder)
            .await
    }
}

/// Renews the lease every third of its length while it is held by
/// anyone, until it is stopped (released or dropped); stops once it has
/// lapsed: the store said so, or no renewal went through for a whole
/// lease (others take it for dead by then).
async fn renew(lease: std::sync::Weak<Inner>, stop: Arc<Stop>) {
    let Some(every) = lease.upgrade().map(|l| l.ttl / 3) else {
        return;
    };
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    let mut renewed = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = stop.notify.notified() => return,
        }
        if stop.stopped() {
            return;
        }
        let Some(inner) = lease.upgrade() else {
            return;
        };
        let renewal = inner
            .registry
            .leases()
            .renew(&inner.holder, inner.ttl)
            .await;
        // Given up meanwhile: its row is gone, and that is no lapse.
        if stop.stopped() {
            return;
        }
        let why = match renewal {
            Ok(true) => {
                renewed = tokio::time::Instant::now();
                continue;
            }
            Ok(false) => "it lapsed before it was renewed".to_owned(),
            Err(e) if renewed.elapsed() >= inner.ttl => {
                format!("no renewal went through for a whole lease (the last error: {e})")
            }
            Err(e) => {
                tracing::warn!(holder = %inner.holder, "renewing the lease: {e}");
                continue;
            }
        };
        tracing::error!(
            holder = %inner.holder,
            "this process's lease on the store is lost: {why}; what it ran may be taken over by another process, so it stops its runs and starts nothing more"
        );
        lapse(&inner);
        return;
    }
}

fn lapse(inner: &Inner) {
    let hooks = {
        let mut hooks = inner.on_lost.lock().unwrap_or_else(|e| e.into_inner());
        inner.lapsed.store(true, Ordering::SeqCst);
        std::mem::take(&mut *hooks)
    };
    inner.lost.notify_waiters();
    for hook in hooks {
        hook();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_lengths_are_read_as_seconds() {
        assert_eq!(parse_lease("15").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_lease(" 0.5 ").unwrap(), Duration::from_millis(500));
        for bad in ["", "abc", "-1", "0", "0.1", "inf", "NaN", "100000"] {
            let error = parse_lease(bad).unwrap_err().to_string();
            assert!(error.starts_with("HANE_LEASE=`"), "{error}");
            assert!(error.contains("at least 0.3"), "{error}");
        }
    }
}
