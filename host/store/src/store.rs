//! The [`SessionStore`] trait and the types it speaks.

use std::future::Future;
use std::ops::Range;
use std::path::PathBuf;
use std::pin::Pin;

use hane_core::{
    IllegalTransition, InputId, Operation, OperationId, OperationState, Recorded, SessionEvent,
    SessionId,
};
use hane_stored::EnvelopeError;

/// What the store's methods return: a boxed future, so that the trait can
/// be used as `dyn SessionStore`.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Where a fork branches off its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkPoint {
    /// The parent session.
    pub session: SessionId,
    /// How many of the parent's events the fork shares (events `0..at`).
    pub at: u64,
}

/// A session as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session's id.
    pub id: SessionId,
    /// The session it was forked from, if it is a fork.
    pub parent: Option<ForkPoint>,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// How many events it holds, its parent's shared prefix included.
    pub len: u64,
}

/// Where an appended batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The sequence number of the batch's first event.
    pub first_seq: u64,
    /// The session's length after the batch.
    pub len: u64,
}

/// An operation and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationRecord {
    /// The operation as recorded with its tool call.
    pub operation: Operation,
    /// Its state.
    pub state: OperationState,
    /// How many times it was started.
    pub attempts: u32,
    /// When its state last changed, in milliseconds since the Unix epoch.
    pub updated_at_ms: u64,
}

/// Why the store refused or failed a request. A refused append changes
/// nothing: a batch is atomic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No session has this id.
    #[error("session `{0}` not found")]
    SessionNotFound(SessionId),
    /// The session (or the prefix it shares with its parent) already
    /// accepted an input with this id.
    #[error("input `{input}` was already accepted by session `{session}`")]
    DuplicateInput {
        /// The session.
        session: SessionId,
        /// The input's id.
        input: InputId,
    },
    /// A fork point past the end of the session.
    #[error("cannot fork session `{session}` at event {at}: it has {len} events")]
    ForkOutOfRange {
        /// The session.
        session: SessionId,
        /// The fork point asked for.
        at: u64,
        /// The session's length.
        len: u64,
    },
    /// No operation has this id.
    #[error("operation `{0}` not found")]
    OperationNotFound(OperationId),
    /// An operation with this id was already recorded.
    #[error("operation `{0}` was already recorded")]
    DuplicateOperation(OperationId),
    /// An event about an operation of another session.
    #[error("operation `{operation}` belongs to session `{owner}`, not `{session}`")]
    ForeignOperation {
        /// The operation.
        operation: OperationId,
        /// The session it belongs to.
        owner: SessionId,
        /// The session the event was appended to.
        session: SessionId,
    },
    /// An operation event that cannot follow the operation's state, such as
    /// a completion after the operation was marked `unknown`: the move is
    /// not in [`OperationState`]'s transition table (and only a `read`
    /// operation starts again while `running`). Appended events name only
    /// where an operation goes, so the store reads where it is.
    #[error("operation `{operation}` is {state}: `{event}` cannot follow")]
    InvalidTransition {
        /// The operation.
        operation: OperationId,
        /// Its state.
        state: OperationState,
        /// The event refused.
        event: &'static str,
    },
    /// An event that callers may not append, such as `forked`.
    #[error("event {index} of the batch for session `{session}`: {message}")]
    InvalidEvent {
        /// The session.
        session: SessionId,
        /// The event's index in the batch.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A stored item could not be read, for example one written by a newer
    /// hane.
    #[error("{what}: {source}")]
    Unreadable {
        /// Which item, such as `event 12 of session ses_...`.
        what: String,
        /// Why.
        #[source]
        source: EnvelopeError,
    },
    /// The store's schema is newer than this build.
    #[error(
        "the store at {} has schema version {found}; this build of hane reads versions up to {supported}: open it with a newer hane",
        .path.display()
    )]
    NewerSchema {
        /// The store's file.
        path: PathBuf,
        /// Its schema version.
        found: u32,
        /// The newest this build reads.
        supported: u32,
    },
    /// The file at the store's path is not a hane store. Only a path where
    /// nothing is makes a new store, so that a mistyped path or a damaged
    /// file is never taken for an empty store.
    #[error("`{}` {problem}", .path.display())]
    NotAStore {
        /// The path given.
        path: PathBuf,
        /// What is there instead.
        problem: NotAStore,
    },
    /// The store has lost commits it acknowledged, or its mark does not
    /// read ([`Damage`](crate::Damage)): it is not opened for writing, so
    /// nothing more is lost and what was found stays as it is.
    #[error(
        "the store at {} is damaged: {damage}. Nothing was written to it; `hane store check` \
         reports it, and `hane store recover` opens it again as it is, accepting the loss",
        .path.display()
    )]
    Damaged {
        /// The store's file.
        path: PathBuf,
        /// What is wrong.
        damage: crate::Damage,
    },
    /// Nothing is at the path of a store that must exist, such as one
    /// being checked.
    #[error("there is no store at `{}`: nothing is at that path", .0.display())]
    NoStore(PathBuf),
    /// No such release, or nothing to roll back to.
    #[error("{0}")]
    ReleaseNotFound(String),
    /// A run held under another lease than the writer's: another process
    /// took it over (the writer's lease had lapsed), and only its holder
    /// writes it now.
    #[error("run `{run}` is held by {}; this process no longer holds it", holder_name(.holder.as_deref()))]
    NotHolder {
        /// The run.
        run: String,
        /// Its holder now.
        holder: Option<String>,
    },
    /// An API key with this name exists.
    #[error("an API key named `{0}` already exists")]
    DuplicateKey(String),
    /// A state change, or a new item's state, that its lifecycle's
    /// transition table does not have; refused before anything was
    /// written.
    #[error(transparent)]
    IllegalTransition(#[from] IllegalTransition),
    /// The item was not in the state the change was asked from: someone
    /// changed it meanwhile (or it is gone); nothing was written.
    #[error("{kind} `{id}` is {}, not {expected}: it changed meanwhile; nothing was written", found.as_deref().unwrap_or("gone"))]
    StateChanged {
        /// Its lifecycle's kind, such as `action`.
        kind: &'static str,
        /// Its id.
        id: String,
        /// The state the change was asked from.
        expected: &'static str,
        /// The state it is in, as stored; `None` when there is no such
        /// item.
        found: Option<String>,
    },
    /// A new item whose id is taken.
    #[error("{kind} `{id}` already exists")]
    AlreadyExists {
        /// Its kind, such as `run`.
        kind: &'static str,
        /// Its id.
        id: String,
    },
    /// The database failed.
    #[error("store: {0}")]
    Database(String),
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
}

fn holder_name(holder: Option<&str>) -> String {
    match holder {
        Some(holder) => format!("`{holder}`"),
        None => "no process".to_owned(),
    }
}

/// What is at a store's path instead of a store; each says what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotAStore {
    /// A file of no bytes, such as one truncated to nothing.
    #[error(
        "is empty: it is not a hane store; remove it to start a new store, or give the right path"
    )]
    Empty,
    /// A file that does not start with SQLite's header.
    #[error(
        "is not a SQLite database: it is not a hane store; give the right path, or move it away to start a new store there"
    )]
    NotSqlite,
    /// A SQLite database cut short: shorter than its header, or not a
    /// whole number of its pages.
    #[error(
        "is a SQLite database cut short ({len} bytes): the store is damaged; restore it from a copy, or move it away to start a new store there"
    )]
    Truncated {
        /// The file's length in bytes.
        len: u64,
    },
    /// A SQLite database whose schema is not hane's.
    #[error(
        "is a SQLite database without hane's tables: it is not a hane store; give the right path, or move it away to start a new store there"
    )]
    ForeignDatabase,
    /// A directory.
    #[error("is a directory: give the path of a store's file, such as DIR/hane.db")]
    Directory,
    /// Nothing, but the log (`-wal`) of a store removed without it: a new
    /// store there would take the old store's last commits from that log.
    #[error(
        "does not exist, but the log of a store removed without it does (`-wal` beside it): remove that log and its `-shm` too to start a new store there, or give the right path"
    )]
    StrayLog,
}

/// Persists sessions: their history, the inputs they accepted and the state
/// of their operations.
///
/// Every method but [`SessionStore::append_deferred`] is durable on
/// return: an append is acknowledged only after its batch is on disk (as
/// far as the store's configured synchronous mode goes).
pub trait SessionStore: Send + Sync {
    /// Creates an empty session.
    fn create_session(&self) -> StoreFuture<'_, SessionInfo>;

    /// Appends `events` atomically: all of them or, on error, none.
    ///
    /// In the same transaction the store records what the events say:
    /// `input_accepted` records the input's id and refuses a second one
    /// ([`StoreError::DuplicateInput`]); `tool_call_recorded` records its
    /// operations as `pending`; operation events move their operation's
    /// state (`pending → running → succeeded | failed | unknown`; a
    /// `read` operation may start again while `running`; `failed` may
    /// also follow `pending`, for an operation cancelled before it
    /// started).
    fn append<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<SessionEvent>,
    ) -> StoreFuture<'a, Appended>;

    /// As [`SessionStore::append`], but acknowledged once written, before
    /// it is synced to disk: it survives the process crashing, and the
    /// next append makes it durable with everything before it (a store
    /// writes its history in order), but a crash of the machine before
    /// then may lose it. For events that are safe to lose, such as an LLM
    /// turn already counted elsewhere or the call of a `read` operation,
    /// which runs again. A store that cannot defer a sync appends as
    /// [`SessionStore::append`] does.
    fn append_deferred<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<SessionEvent>,
    ) -> StoreFuture<'a, Appended> {
        self.append(session, events)
    }

    /// Reads the events with sequence numbers in `range` (clamped to the
    /// session's length), a fork's shared prefix included.
    fn read<'a>(
        &'a self,
        session: &'a SessionId,
        range: Range<u64>,
    ) -> StoreFuture<'a, Vec<Recorded>>;

    /// Describes one session.
    fn session<'a>(&'a self, session: &'a SessionId) -> StoreFuture<'a, SessionInfo>;

    /// Lists every session, oldest first.
    fn list_sessions(&self) -> StoreFuture<'_, Vec<SessionInfo>>;

    /// Creates a session that shares `session`'s first `at` events without
    /// copying them, and whose own first event is `forked`. Constant time
    /// whatever the history's length.
    fn fork<'a>(&'a self, session: &'a SessionId, at: u64) -> StoreFuture<'a, SessionInfo>;

    /// Whether `session` (its shared prefix included) accepted `input`.
    fn input_accepted<'a>(
        &'a self,
        session: &'a SessionId,
        input: &'a InputId,
    ) -> StoreFuture<'a, bool>;

    /// Every operation in one of `states`, oldest first: what recovery
    /// reads.
    fn operations<'a>(
        &'a self,
        states: &'a [OperationState],
    ) -> StoreFuture<'a, Vec<OperationRecord>>;

    /// One operation.
    fn operation<'a>(&'a self, id: &'a OperationId) -> StoreFuture<'a, OperationRecord>;
}
