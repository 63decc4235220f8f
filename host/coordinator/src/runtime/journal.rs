//! [`Journal`]: a run's session history, written behind the run.

use std::sync::Arc;

use hane_core::{SessionEvent, SessionId};
use hane_store::SessionStore;
use tokio::sync::{mpsc, oneshot};

enum Entry {
    Events(Vec<SessionEvent>),
    Flush(oneshot::Sender<Result<(), String>>),
}

/// Writes one session's events in the order they are given, without making
/// the writer wait: whatever is queued when the store is free goes in one
/// append. [`Journal::flush`] waits until everything given so far is
/// stored.
///
/// The agent runtime writes the calls of `read` operations and of control
/// tools here: a crash can lose the last of them, and both are safe to run
/// again. Anything that must be on disk before it happens — an input, a
/// `write` or `outbound` operation starting, a run's end — is flushed
/// first and written directly.
pub(crate) struct Journal {
    queue: mpsc::UnboundedSender<Entry>,
}

impl Journal {
    /// A journal of `session`, with a task that writes it to `store`.
    pub(crate) fn new(store: Arc<dyn SessionStore>, session: SessionId) -> Self {
        let (queue, mut entries) = mpsc::unbounded_channel::<Entry>();
        tokio::spawn(async move {
            let mut failed: Option<String> = None;
            while let Some(first) = entries.recv().await {
                let mut events = Vec::new();
                let mut flushes = Vec::new();
                let mut next = Some(first);
                while let Some(entry) = next.take().or_else(|| entries.try_recv().ok()) {
                    match entry {
                        Entry::Events(batch) => events.extend(batch),
                        Entry::Flush(done) => flushes.push(done),
                    }
                }
                // After a failure nothing more is written: later events may
                // depend on what was lost.
                if !events.is_empty()
                    && failed.is_none()
                    && let Err(e) = store.append(&session, events).await
                {
                    failed = Some(format!(
                        "the history of session {session} could not be written: {e}"
                    ));
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

    /// Waits until everything queued so far is stored.
    ///
    /// # Errors
    ///
    /// A write failed; the message says which session and why.
    pub(crate) async fn flush(&self) -> Result<(), String> {
        let (done, stored) = oneshot::channel();
        self.queue
            .send(Entry::Flush(done))
            .map_err(|_| "the journal's writer stopped".to_owned())?;
        stored
            .await
            .map_err(|_| "the journal's writer stopped".to_owned())?
    }
}
