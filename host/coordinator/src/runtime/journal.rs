//! [`Journal`]: a run's session history, written behind the run.

use std::sync::Arc;
use std::time::Duration;

use hane_core::{SessionEvent, SessionId};
use hane_store::SessionStore;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// How long events given to [`Journal::record_later`] may wait for others
/// to share their commit.
pub(crate) const LINGER: Duration = Duration::from_millis(5);

/// Why a journal could not store what was given to it.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum JournalError {
    /// The task that writes it is gone.
    #[error("the journal's writer stopped")]
    Stopped,
    /// An append failed; nothing after it was written.
    #[error("the history of session {session} could not be written: {reason}")]
    Write {
        /// The session.
        session: SessionId,
        /// The store's error, as it said it (it is told to every flush
        /// waiting, so it is kept as its words).
        reason: String,
    },
}

enum Entry {
    Events(Vec<SessionEvent>),
    Later(Vec<SessionEvent>),
    Flush(oneshot::Sender<Result<(), JournalError>>),
}

/// What the writer took from the queue for one append.
#[derive(Default)]
struct Batch {
    events: Vec<SessionEvent>,
    flushes: Vec<oneshot::Sender<Result<(), JournalError>>>,
    /// Whether everything in it may wait for [`LINGER`].
    patient: bool,
}

impl Batch {
    fn take(&mut self, entry: Entry) {
        match entry {
            Entry::Events(batch) => {
                self.patient = false;
                self.events.extend(batch);
            }
            Entry::Later(batch) => self.events.extend(batch),
            Entry::Flush(done) => {
                self.patient = false;
                self.flushes.push(done);
            }
        }
    }
}

/// The next batch, from `first` and whatever is queued behind it; a batch
/// of only [`Entry::Later`] waits up to [`LINGER`] for more, and stops
/// waiting at the first entry that may not wait.
async fn next_batch(first: Entry, entries: &mut mpsc::UnboundedReceiver<Entry>) -> Batch {
    let mut batch = Batch {
        patient: true,
        ..Batch::default()
    };
    batch.take(first);
    while let Ok(entry) = entries.try_recv() {
        batch.take(entry);
    }
    let deadline = Instant::now() + LINGER;
    while batch.patient {
        match tokio::time::timeout_at(deadline, entries.recv()).await {
            Ok(Some(entry)) => batch.take(entry),
            // The journal was dropped, or the wait is over.
            Ok(None) | Err(_) => break,
        }
    }
    batch
}

/// Writes one session's events in the order they are given, without making
/// the writer wait: whatever is queued when the store is free goes in one
/// append. [`Journal::flush`] waits until everything given so far is
/// stored.
///
/// The agent runtime writes the calls of `read` operations and of control
/// tools here, and LLM turns: a crash can lose the last of them (the
/// process's, those still queued; the machine's, those not yet synced to
/// disk: they are appended with [`SessionStore::append_deferred`]), and
/// both kinds of call are safe to run again. Anything that must be on disk
/// before it happens — an input, a `write` or `outbound` operation
/// starting, a run's end — is flushed first and written directly, which
/// syncs what the journal wrote before it.
pub(crate) struct Journal {
    queue: mpsc::UnboundedSender<Entry>,
}

impl Journal {
    /// A journal of `session`, with a task that writes it to `store`.
    pub(crate) fn new(store: Arc<dyn SessionStore>, session: SessionId) -> Self {
        let (queue, mut entries) = mpsc::unbounded_channel::<Entry>();
        tokio::spawn(async move {
            let mut failed: Option<JournalError> = None;
            while let Some(first) = entries.recv().await {
                let Batch {
                    events, flushes, ..
                } = next_batch(first, &mut entries).await;
                // After a failure nothing more is written: later events may
                // depend on what was lost.
                if !events.is_empty()
                    && failed.is_none()
                    && let Err(e) = store.append_deferred(&session, events).await
                {
                    failed = Some(JournalError::Write {
                        session: session.clone(),
                        reason: e.to_string(),
                    });
                }
                for done in flushes {
                    let _ = done.send(failed.clone().map_or(Ok(()), Err));
                }
            }
        });
        Self { queue }
    }

    /// Queues `events` after everything queued before.
    pub(crate) fn record(&self, events: Vec<SessionEvent>) {
        // The task ends only when the journal is dropped.
        let _ = self.queue.send(Entry::Events(events));
    }

    /// Queues `events` after everything queued before, to be written
    /// within [`LINGER`] together with whatever else arrives by then (or at
    /// once with the next events that may not wait, or a flush): an LLM
    /// turn, which the gateway has already counted, costs a commit of its
    /// own only when nothing else shares it.
    pub(crate) fn record_later(&self, events: Vec<SessionEvent>) {
        let _ = self.queue.send(Entry::Later(events));
    }

    /// Waits until everything queued so far is stored.
    ///
    /// # Errors
    ///
    /// A write failed; the message says which session and why.
    pub(crate) async fn flush(&self) -> Result<(), JournalError> {
        let (done, stored) = oneshot::channel();
        self.queue
            .send(Entry::Flush(done))
            .map_err(|_| JournalError::Stopped)?;
        stored.await.map_err(|_| JournalError::Stopped)?
    }
}

#[cfg(test)]
mod tests {
    use hane_store::{SqliteConfig, SqliteStore};

    use super::*;

    fn state(run: &str) -> SessionEvent {
        SessionEvent::RunStateChanged {
            run: run.to_owned(),
            state: "running".to_owned(),
        }
    }

    async fn names(store: &SqliteStore, session: &SessionId) -> Vec<String> {
        store
            .read(session, 0..u64::MAX)
            .await
            .unwrap()
            .into_iter()
            .map(|r| match r.event {
                SessionEvent::RunStateChanged { run, .. } => run,
                other => panic!("unexpected event {other:?}"),
            })
            .collect()
    }

    async fn journal() -> (tempfile::TempDir, Arc<SqliteStore>, SessionId, Journal) {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(SqliteStore::open(dir.path().join("s.db"), &SqliteConfig::new()).unwrap());
        let session = store.create_session().await.unwrap().id;
        let journal = Journal::new(store.clone(), session.clone());
        (dir, store, session, journal)
    }

    #[tokio::test]
    async fn events_that_may_wait_are_written_after_the_linger_without_a_flush() {
        let (_dir, store, session, journal) = journal().await;
        journal.record_later(vec![state("a")]);
        journal.record_later(vec![state("b")]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while names(&store, &session).await.is_empty() {
            assert!(
                Instant::now() < deadline,
                "nothing was written 10 s after the linger of {LINGER:?}"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(names(&store, &session).await, ["a", "b"]);
    }

    #[tokio::test]
    async fn events_that_may_not_wait_and_flushes_take_waiting_ones_along_in_order() {
        let (_dir, store, session, journal) = journal().await;
        journal.record_later(vec![state("a")]);
        journal.record(vec![state("b")]);
        journal.record_later(vec![state("c")]);
        journal.flush().await.unwrap();
        assert_eq!(names(&store, &session).await, ["a", "b", "c"]);
    }

    #[tokio::test]
    async fn a_dropped_journal_still_writes_what_was_waiting() {
        let (_dir, store, session, journal) = journal().await;
        journal.record_later(vec![state("a")]);
        drop(journal);
        let deadline = Instant::now() + Duration::from_secs(10);
        while names(&store, &session).await.is_empty() {
            assert!(Instant::now() < deadline, "the waiting event was lost");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(names(&store, &session).await, ["a"]);
    }
}
