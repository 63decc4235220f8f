//! The runs queued for any process: this process's room for runs, and
//! claiming queued runs when it has some.

use std::sync::atomic::Ordering;

use super::takeover::Takeover;
use super::{AgentRun, AgentRuntime, RunError, lock};

/// How many queued runs a process without a limit claims at a time.
const CLAIMED_AT_ONCE: usize = 16;

/// This process's share of the runs queued for any process on its store
/// ([`AgentRuntime::queue`]).
#[derive(Debug, Clone, Copy)]
pub struct RunQueue<'a> {
    pub(crate) kernel: &'a AgentRuntime,
}

impl RunQueue<'_> {
    /// Sets the most runs this process drives at once (`None`: no limit,
    /// the default). At its most, a new run that any process may start
    /// ([`AgentRun::resumable`]) is stored `queued` for any process, and
    /// the first with room starts it ([`RunQueue::claim_queued`]).
    pub fn set_max_runs(&self, max: Option<usize>) {
        self.kernel
            .inner
            .max_runs
            .store(max.unwrap_or(0), Ordering::SeqCst);
    }

    /// Whether this process drives as many runs as it may.
    pub(crate) fn at_capacity(&self) -> bool {
        self.room() == 0
    }

    /// How many more runs this process may drive now.
    fn room(&self) -> usize {
        match self.kernel.inner.max_runs.load(Ordering::SeqCst) {
            0 => CLAIMED_AT_ONCE,
            max => max.saturating_sub(lock(&self.kernel.inner.live).len()),
        }
    }

    /// Starts here runs queued for any process (oldest first), as many as
    /// this process has room for; each is claimed by one process however
    /// many claim at once. Returns the runs started.
    ///
    /// A process whose own lease lapsed claims nothing.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn claim_queued(&self) -> Result<Vec<AgentRun>, RunError> {
        let room = self.room();
        if room == 0 || self.kernel.inner.lease.lapsed() {
            return Ok(Vec::new());
        }
        let claimed = self
            .kernel
            .inner
            .registry
            .runs()
            .claim_queued(self.kernel.inner.lease.holder(), room)
            .await?;
        let mut started = Vec::with_capacity(claimed.len());
        for row in claimed {
            let run = match hane_stored::open::<AgentRun>(&row.body) {
                Ok(run) => run,
                Err(e) => {
                    tracing::error!(run = %row.id, "a queued run cannot be read: {e}");
                    continue;
                }
            };
            // Only an older hane left a run no process held that cannot
            // be started by another.
            if !run.resumable {
                Takeover::of(self.kernel)
                    .end_taken(run, "a process of an older hane", "not resumed")
                    .await?;
                continue;
            }
            match self.kernel.resume(run.clone(), None).await {
                Ok(run) => started.push(run),
                Err(e) => {
                    tracing::error!(run = %run.id, "a queued run cannot start here: {e}");
                    let why = format!(
                        "it could not be started by `{}` ({e})",
                        self.kernel.inner.lease.holder()
                    );
                    Takeover::of(self.kernel)
                        .end_taken(run, "a process of this store", &why)
                        .await?;
                }
            }
        }
        Ok(started)
    }

    /// Claims queued runs ([`RunQueue::claim_queued`]) whenever this
    /// process may have room: when one of its runs ends, and every `every`
    /// (another process may have queued some). Until dropped.
    pub async fn serve_queue(&self, every: std::time::Duration) {
        let mut ticks = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = self.kernel.inner.room.notified() => {}
            }
            if let Err(e) = self.claim_queued().await {
                tracing::error!("claiming queued runs: {e}");
            }
        }
    }
}
