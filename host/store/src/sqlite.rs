//! [`SqliteStore`]: the session store in one SQLite file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use hane_core::{SessionEvent, SessionId};
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::mark::Mark;
use crate::query::Fail;
use crate::schema;
use crate::sql::{Lite, Sql};
use crate::writer::{Prepared, Reply, Request, Writer};
use crate::{Appended, SessionInfo, SessionStore, StoreError, StoreFuture};

/// How hard SQLite works to keep a commit through a crash. In WAL mode:
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Every commit is synced to disk before it is acknowledged: it
    /// survives a power loss. The default.
    #[default]
    Full,
    /// The log is synced only at checkpoints: a commit survives the
    /// process crashing, but the last ones may be lost if the machine
    /// does.
    Normal,
    /// Never synced: for tests and scratch data only.
    Off,
}

impl Synchronous {
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
            Synchronous::Off => "OFF",
        }
    }
}

/// How a [`SqliteStore`] is opened.
///
/// | Setting | Default |
/// |---|---|
/// | [`synchronous`](Self::synchronous) | [`Synchronous::Full`] |
/// | [`max_batch`](Self::max_batch) | 1024 requests |
/// | [`readers`](Self::readers) | 4 threads |
///
/// # Examples
///
/// ```
/// use hane_store::{SqliteConfig, Synchronous};
///
/// let mut config = SqliteConfig::new();
/// config.synchronous(Synchronous::Normal).max_batch(256).readers(2);
/// ```
#[derive(Debug, Clone)]
pub struct SqliteConfig {
    synchronous: Synchronous,
    max_batch: usize,
    readers: usize,
}

impl Default for SqliteConfig {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Full,
            max_batch: 1024,
            readers: 4,
        }
    }
}

impl SqliteConfig {
    /// The defaults listed above.
    pub fn new() -> Self {
        Self::default()
    }

    /// How hard commits are kept through crashes. Default:
    /// [`Synchronous::Full`].
    pub fn synchronous(&mut self, synchronous: Synchronous) -> &mut Self {
        self.synchronous = synchronous;
        self
    }

    /// The most write requests (appends, forks, new sessions) committed
    /// together in one transaction. The writer takes one request, then
    /// those already waiting, up to this many; a sync to disk is paid once
    /// per group instead of once per request. 1 means one transaction per
    /// request; 0 counts as 1. Default: 1024.
    pub fn max_batch(&mut self, max_batch: usize) -> &mut Self {
        self.max_batch = max_batch.max(1);
        self
    }

    /// How many threads read, each with its own connection; reads run
    /// beside the writer and beside each other. 0 counts as 1. Default: 4.
    pub fn readers(&mut self, readers: usize) -> &mut Self {
        self.readers = readers.max(1);
        self
    }
}

/// The embedded session store: one SQLite file in WAL mode.
///
/// One writer thread owns the only connection that writes. Appends, forks
/// and new sessions queue for it; it commits those waiting together in one
/// transaction, each in its own savepoint so that a refused request leaves
/// nothing behind and does not fail the others, and answers them once the
/// commit returns. Reads run on their own threads and connections, so
/// neither they nor the writer's syncs block an async executor's threads.
/// The writer's queue has no bound: callers that await their appends are
/// the back-pressure. Between groups, once the log reaches 8,192 pages
/// (32 MiB), the writer copies it back into the database file.
///
/// A handle is cheap to clone; the threads stop, and the file is closed,
/// when the last handle is dropped (after the requests already queued are
/// answered).
///
/// # Examples
///
/// ```
/// use hane_core::SessionEvent;
/// use hane_store::{SessionStore, SqliteConfig, SqliteStore};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let store = SqliteStore::open(dir.path().join("sessions.db"), &SqliteConfig::new())?;
/// let rt = tokio::runtime::Builder::new_current_thread().build()?;
/// rt.block_on(async {
///     let session = store.create_session().await?;
///     let running = SessionEvent::RunStateChanged {
///         run: "run-1".into(),
///         state: "running".into(),
///     };
///     store.append(&session.id, vec![running.clone()]).await?;
///     // The fork shares the first event and adds its own `forked`.
///     let fork = store.fork(&session.id, 1).await?;
///     let events = store.read(&fork.id, 0..u64::MAX).await?;
///     assert_eq!(events[0].event, running);
///     assert_eq!(events[1].event.name(), "forked");
///     Ok::<_, hane_store::StoreError>(())
/// })?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

/// A read run on a reader thread, inside one read transaction (or told why
/// that could not start).
type ReadJob = Box<dyn FnOnce(rusqlite::Result<&Connection>) + Send>;

struct Inner {
    path: PathBuf,
    created: bool,
    // Options only so that `drop` can close them in order.
    writer: Option<Sender<Request>>,
    readers: Option<Sender<ReadJob>>,
    writer_thread: Option<JoinHandle<()>>,
    reader_threads: Vec<JoinHandle<()>>,
}

impl SqliteStore {
    /// Opens the store in the file at `path`, migrating an older schema.
    /// Where nothing is at `path`, it makes a new store (its directory must
    /// exist); [`SqliteStore::created`] says so.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotAStore`] if something other than a hane store is
    /// at `path`: an empty file, a file that is not a SQLite database or
    /// is cut short, a database without hane's tables; never replaced by
    /// a new store. [`StoreError::NewerSchema`] if a newer hane wrote the
    /// file; [`StoreError::Database`] if it cannot be opened or a thread
    /// cannot be started.
    pub fn open(path: impl AsRef<Path>, config: &SqliteConfig) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_owned();
        let (conn, created) = schema::open_writer(&path, config.synchronous)?;
        let writer = Writer::new(conn, Mark::of(&path), config.synchronous, config.max_batch);
        // Opened after the writer's connection, which created the schema.
        let readers = (0..config.readers)
            .map(|_| schema::open_reader(&path))
            .collect::<Result<Vec<_>, _>>()?;

        let mut inner = Inner {
            path,
            created,
            writer: None,
            readers: None,
            writer_thread: None,
            reader_threads: Vec::new(),
        };
        // From here on a failure drops `inner`, which stops the threads
        // already started.
        let (jobs, queue) = mpsc::channel::<ReadJob>();
        inner.readers = Some(jobs);
        let queue = Arc::new(Mutex::new(queue));
        for (i, conn) in readers.into_iter().enumerate() {
            let queue = queue.clone();
            inner
                .reader_threads
                .push(spawn(&format!("hane-store-reader-{i}"), move || {
                    serve_reads(conn, &queue)
                })?);
        }
        let (requests, incoming) = mpsc::channel();
        inner.writer = Some(requests);
        inner.writer_thread = Some(spawn("hane-store-writer", move || writer.run(incoming))?);
        Ok(SqliteStore {
            inner: Arc::new(inner),
        })
    }

    /// The file the store is in.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether opening it made a new store, nothing having been at its
    /// path.
    pub fn created(&self) -> bool {
        self.inner.created
    }

    /// Sends a request to the writer and waits for its answer.
    /// An append whose commit is synced to disk before it is answered
    /// when `synced`, else only written (see
    /// [`SessionStore::append_deferred`]).
    async fn append_synced(
        &self,
        session: &SessionId,
        events: Vec<SessionEvent>,
        synced: bool,
    ) -> Result<Appended, StoreError> {
        let events = Prepared::batch(session, &events)?;
        self.write(|reply| Request::Append {
            session: session.clone(),
            events,
            synced,
            reply,
        })
        .await
    }

    async fn write<T>(&self, request: impl FnOnce(Reply<T>) -> Request) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let writer = self.inner.writer.as_ref().ok_or(StoreError::Closed)?;
        writer
            .send(request(reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Runs `read` on a reader thread; `doing` says what it was doing if
    /// the database fails.
    async fn read_with<T: Send + 'static>(
        &self,
        doing: impl FnOnce() -> String + Send + 'static,
        read: impl FnOnce(&mut dyn Sql) -> Result<T, Fail> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let job: ReadJob = Box::new(move |conn| {
            // A caller that stopped waiting no longer wants the answer.
            let result = conn
                .map_err(Fail::from)
                .and_then(|conn| read(&mut Lite(conn)));
            drop(reply.send(result.map_err(|f| f.doing(doing))));
        });
        let readers = self.inner.readers.as_ref().ok_or(StoreError::Closed)?;
        readers.send(job).map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

fn spawn(name: &str, run: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, StoreError> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(run)
        .map_err(|e| StoreError::Database(format!("starting the thread {name}: {e}")))
}

/// A reader thread: runs reads from the shared queue until the store is
/// dropped.
fn serve_reads(mut conn: Connection, queue: &Mutex<Receiver<ReadJob>>) {
    loop {
        // The lock is held only while waiting, not while reading.
        let job = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(job) = job else { return };
        // One read transaction per job, so that a read made of several
        // queries sees one snapshot. Only reads run in it; it rolls back.
        match conn.transaction() {
            Ok(tx) => job(Ok(&tx)),
            Err(e) => job(Err(e)),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Readers first, so that the writer's connection closes last and
        // checkpoints the log into the database file.
        self.readers.take();
        for thread in self.reader_threads.drain(..) {
            // A thread that panicked has nothing left to clean up.
            drop(thread.join());
        }
        self.writer.take();
        if let Some(thread) = self.writer_thread.take() {
            drop(thread.join());
        }
    }
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl SessionStore for SqliteStore {
    crate::query::session_reads!();

    fn create_session(&self) -> StoreFuture<'_, SessionInfo> {
        Box::pin(self.write(|reply| Request::Create { reply }))
    }

    fn append<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<SessionEvent>,
    ) -> StoreFuture<'a, Appended> {
        Box::pin(self.append_synced(session, events, true))
    }

    fn append_deferred<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<SessionEvent>,
    ) -> StoreFuture<'a, Appended> {
        Box::pin(self.append_synced(session, events, false))
    }

    fn fork<'a>(&'a self, session: &'a SessionId, at: u64) -> StoreFuture<'a, SessionInfo> {
        Box::pin(self.write(move |reply| Request::Fork {
            session: session.clone(),
            at,
            reply,
        }))
    }
}
