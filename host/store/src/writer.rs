//! The writer thread: the only connection that writes, committing the
//! requests that wait for it together (group commit).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use hane_core::{Impact, InputId, Lifecycle, OperationId, OperationState, SessionEvent, SessionId};
use hane_stored::seal;
use rusqlite::Connection;
use rusqlite::wal::CheckpointMode;
use tokio::sync::oneshot;

use crate::mark::Mark;
use crate::query::{self, Fail, Segment, int, now_ms};
use crate::schema::CHECKPOINT_PAGES;
use crate::sql::{Lite, Query, Sql, args};
use crate::{Appended, ForkPoint, SessionInfo, StoreError, Synchronous};

/// Where the writer sends a request's answer.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// What the writer is asked to do.
pub(crate) enum Request {
    Create {
        reply: Reply<SessionInfo>,
    },
    Append {
        session: SessionId,
        events: Vec<Prepared>,
        /// Whether the commit must reach the disk before it is
        /// acknowledged (see [`crate::SessionStore::append_deferred`]).
        synced: bool,
        reply: Reply<Appended>,
    },
    Fork {
        session: SessionId,
        at: u64,
        reply: Reply<SessionInfo>,
    },
}

impl Request {
    /// Whether its commit must be synced to disk before it is answered:
    /// all but a deferred append.
    fn needs_sync(&self) -> bool {
        match self {
            Request::Append { synced, .. } => *synced,
            Request::Create { .. } | Request::Fork { .. } => true,
        }
    }
}

/// An event ready for the writer: sealed and checked on the caller's
/// thread, so the one writer thread only runs SQL.
pub(crate) struct Prepared {
    body: Vec<u8>,
    effect: Effect,
}

/// What an event changes besides the history.
enum Effect {
    None,
    Input(InputId),
    Operations(Vec<NewOperation>),
    Move {
        operation: OperationId,
        step: Step,
        event: &'static str,
    },
}

struct NewOperation {
    id: OperationId,
    impact: Impact,
    body: Vec<u8>,
}

/// The operation events, as state changes.
#[derive(Clone, Copy)]
enum Step {
    Start,
    Complete,
    Fail,
    Unknown,
}

impl Prepared {
    /// Seals `events` for an append to `session`, refusing those the
    /// store writes itself and operations of other sessions.
    pub(crate) fn batch(
        session: &SessionId,
        events: &[SessionEvent],
    ) -> Result<Vec<Prepared>, StoreError> {
        let mut out = Vec::with_capacity(events.len());
        for (index, event) in events.iter().enumerate() {
            let moved = |operation: &OperationId, step| Effect::Move {
                operation: operation.clone(),
                step,
                event: event.name(),
            };
            let effect = match event {
                SessionEvent::Forked { .. } => {
                    return Err(StoreError::InvalidEvent {
                        session: session.clone(),
                        index,
                        message: "`forked` is written by the store when it forks a session".into(),
                    });
                }
                SessionEvent::InputAccepted { input } => Effect::Input(input.id.clone()),
                SessionEvent::ToolCallRecorded { operations, .. } => {
                    let mut new = Vec::with_capacity(operations.len());
                    for op in operations {
                        if op.session != *session {
                            return Err(StoreError::ForeignOperation {
                                operation: op.id.clone(),
                                owner: op.session.clone(),
                                session: session.clone(),
                            });
                        }
                        new.push(NewOperation {
                            id: op.id.clone(),
                            impact: op.impact,
                            body: seal(op),
                        });
                    }
                    Effect::Operations(new)
                }
                SessionEvent::OperationStarted { operation, .. } => moved(operation, Step::Start),
                SessionEvent::OperationCompleted { operation, .. } => {
                    moved(operation, Step::Complete)
                }
                SessionEvent::OperationFailed { operation, .. } => moved(operation, Step::Fail),
                SessionEvent::OperationUnknown { operation, .. } => moved(operation, Step::Unknown),
                _ => Effect::None,
            };
            out.push(Prepared {
                body: seal(event),
                effect,
            });
        }
        Ok(out)
    }
}

/// How impacts are stored.
fn impact_name(impact: Impact) -> &'static str {
    match impact {
        Impact::Read => "read",
        Impact::Write => "write",
        Impact::Outbound => "outbound",
    }
}

impl Step {
    /// The state an operation event moves its operation to.
    fn target(self) -> OperationState {
        match self {
            Step::Start => OperationState::Running,
            Step::Complete => OperationState::Succeeded,
            Step::Fail => OperationState::Failed,
            Step::Unknown => OperationState::Unknown,
        }
    }
}

/// The state an operation in `state` moves to on `step`, if its
/// lifecycle allows it: only a `read` operation runs again while
/// `running` (after a crash), as a `write` or `outbound` one may have
/// done what it does.
fn next_state(step: Step, state: OperationState, read: bool) -> Option<OperationState> {
    let next = step.target();
    let again = state == OperationState::Running && next == OperationState::Running;
    (state.can_become(next) && (read || !again)).then_some(next)
}

/// What the writer knows about a session it wrote to: its key, its
/// lineage and the next sequence number.
#[derive(Clone)]
pub(crate) struct Cursor {
    sid: i64,
    lineage: Arc<[Segment]>,
    next: u64,
}

/// Sessions whose cursors the writer keeps; past this it forgets them all
/// and reloads each from the file when it is next written to.
const CURSORS: usize = 65_536;

/// A request answered, its answer held until the group commits.
enum Done {
    Info(Reply<SessionInfo>, Result<SessionInfo, StoreError>),
    Appended(Reply<Appended>, Result<Appended, StoreError>),
}

impl Done {
    fn is_ok(&self) -> bool {
        match self {
            Done::Info(_, r) => r.is_ok(),
            Done::Appended(_, r) => r.is_ok(),
        }
    }

    /// Turns a success into `error`: its group did not commit.
    fn undo(&mut self, error: &str) {
        let failed = || StoreError::Database(error.to_owned());
        match self {
            Done::Info(_, r) if r.is_ok() => *r = Err(failed()),
            Done::Appended(_, r) if r.is_ok() => *r = Err(failed()),
            _ => {}
        }
    }

    fn send(self) {
        // A caller that stopped waiting no longer wants the answer.
        match self {
            Done::Info(reply, r) => drop(reply.send(r)),
            Done::Appended(reply, r) => drop(reply.send(r)),
        }
    }
}

/// The writer: one connection, and the cursors of sessions it wrote to.
pub(crate) struct Writer {
    conn: Connection,
    cursors: HashMap<SessionId, Cursor>,
    max_batch: usize,
    checkpoint_pages: i32,
    /// The store's configured mode, for the groups that need a sync.
    synchronous: Synchronous,
    /// The connection's mode now.
    mode: Synchronous,
    /// Advanced after each group committed with a sync.
    mark: Mark,
}

impl Writer {
    /// A writer on `conn`, opened with `synchronous` as its mode.
    pub(crate) fn new(
        conn: Connection,
        mark: Mark,
        synchronous: Synchronous,
        max_batch: usize,
    ) -> Self {
        Self {
            conn,
            cursors: HashMap::new(),
            max_batch: max_batch.max(1),
            checkpoint_pages: CHECKPOINT_PAGES,
            synchronous,
            mode: synchronous,
            mark,
        }
    }

    /// Serves requests until every sender is gone: takes one, then those
    /// already waiting, up to `max_batch`, and commits them together.
    pub(crate) fn run(mut self, requests: Receiver<Request>) {
        let mut group = Vec::with_capacity(self.max_batch.min(1024));
        while let Ok(first) = requests.recv() {
            group.push(first);
            while group.len() < self.max_batch {
                match requests.try_recv() {
                    Ok(request) => group.push(request),
                    Err(_) => break,
                }
            }
            self.commit_group(&mut group);
            self.checkpoint();
        }
    }

    /// Copies the log into the database file once it holds
    /// [`CHECKPOINT_PAGES`] pages (fewer in tests). This runs after the
    /// group's answers are sent, so no caller waits for it unless its
    /// request comes next. A passive checkpoint never waits for readers;
    /// the log restarts from its beginning once a checkpoint has copied
    /// all of it.
    fn checkpoint(&mut self) {
        // NOOP only reports the log's size.
        let Ok((log, _)) = self
            .conn
            .wal_checkpoint_v2(None::<&str>, CheckpointMode::NOOP)
        else {
            return;
        };
        if log >= self.checkpoint_pages {
            // A failed checkpoint leaves the log as it was; the next group
            // tries again.
            drop(
                self.conn
                    .wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE),
            );
        }
    }

    /// Commits `group`, synced to disk as the store is configured when any
    /// of its requests needs it, else at most as [`Synchronous::Normal`]
    /// syncs: the commit survives the process crashing, and the next synced
    /// commit makes it durable with everything before it, since the log is
    /// written in order.
    fn commit_group(&mut self, group: &mut Vec<Request>) {
        let mode = if group.iter().any(Request::needs_sync) {
            self.synchronous
        } else {
            match self.synchronous {
                Synchronous::Full => Synchronous::Normal,
                other => other,
            }
        };
        if mode != self.mode {
            if let Err(e) = self.conn.pragma_update(None, "synchronous", mode.pragma()) {
                // Left as it was. A group that needs a sync is not
                // committed without one.
                if mode == self.synchronous {
                    let error = format!("setting the synchronous mode to {}: {e}", mode.pragma());
                    for request in group.drain(..) {
                        Self::refuse(request, &error).send();
                    }
                    return;
                }
            } else {
                self.mode = mode;
            }
        }
        self.commit(group.drain(..));
    }

    fn exec(&self, sql: &str) -> rusqlite::Result<()> {
        self.conn.prepare_cached(sql)?.execute([]).map(drop)
    }

    /// Runs each request in its own savepoint within one transaction,
    /// commits, and only then answers them all.
    fn commit(&mut self, group: impl Iterator<Item = Request>) {
        let mut done: Vec<Done> = Vec::new();
        let mut lost: Option<String> = None;
        if let Err(e) = self.exec("BEGIN IMMEDIATE") {
            lost = Some(format!("starting a transaction: {e}"));
        }
        for request in group {
            match &lost {
                None => done.push(self.apply(request)),
                Some(error) => done.push(Self::refuse(request, error)),
            }
            // Some failures (a full disk, an I/O error) make SQLite roll
            // back the whole transaction; what it held is gone.
            if lost.is_none() && self.conn.is_autocommit() {
                lost = Some("the transaction was rolled back after an error".to_owned());
                self.forget(&mut done, lost.as_deref().unwrap_or_default());
            }
        }
        if lost.is_none() && done.iter().any(Done::is_ok) {
            let committed =
                crate::mark::count(&self.conn).and_then(|n| self.exec("COMMIT").map(|()| n));
            match committed {
                // Once the log holding it is on disk.
                Ok(n) if self.mode == Synchronous::Full => self.mark.advance(n),
                Ok(_) => {}
                Err(e) => {
                    if !self.conn.is_autocommit() {
                        // Nothing more can be done if this fails too: the
                        // transaction stays uncommitted either way.
                        drop(self.exec("ROLLBACK"));
                    }
                    self.forget(&mut done, &format!("committing: {e}"));
                }
            }
        } else if !self.conn.is_autocommit() {
            // Every request failed: nothing to make durable.
            drop(self.exec("ROLLBACK"));
        }
        for d in done {
            d.send();
        }
    }

    /// After the group's transaction was lost: answers its successes with
    /// `error` and drops the cursors, which may count what was lost.
    fn forget(&mut self, done: &mut [Done], error: &str) {
        for d in done {
            d.undo(error);
        }
        self.cursors.clear();
    }

    fn refuse(request: Request, error: &str) -> Done {
        let failed = || StoreError::Database(error.to_owned());
        match request {
            Request::Create { reply } | Request::Fork { reply, .. } => {
                Done::Info(reply, Err(failed()))
            }
            Request::Append { reply, .. } => Done::Appended(reply, Err(failed())),
        }
    }

    fn apply(&mut self, request: Request) -> Done {
        match request {
            Request::Create { reply } => {
                let r = self.savepoint(|w| create(&mut Lite(&w.conn)));
                Done::Info(
                    reply,
                    r.map_err(|f| f.doing(|| "creating a session".into())),
                )
            }
            Request::Append {
                session,
                events,
                reply,
                ..
            } => {
                let r = self.savepoint(|w| {
                    let cursor = w.cursor(&session)?;
                    append(&mut Lite(&w.conn), cursor, &session, &events)
                });
                let r = r.map_err(|f| f.doing(|| format!("appending to session {session}")));
                Done::Appended(reply, r)
            }
            Request::Fork { session, at, reply } => {
                let r = self.savepoint(|w| {
                    let cursor = w.cursor(&session)?;
                    fork(&mut Lite(&w.conn), cursor, &session, at)
                });
                let r = r.map_err(|f| f.doing(|| format!("forking session {session} at {at}")));
                Done::Info(reply, r)
            }
        }
    }

    /// Runs `f` in a savepoint: released if it succeeds, rolled back if it
    /// fails, so a failed request leaves nothing behind and the others in
    /// the group still commit. The cursor it returns is kept only once the
    /// savepoint is released.
    fn savepoint<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<(T, SessionId, Cursor), Fail>,
    ) -> Result<T, Fail> {
        self.exec("SAVEPOINT request")?;
        let released = f(self).and_then(|done| {
            self.exec("RELEASE request")?;
            Ok(done)
        });
        match released {
            Ok((value, session, cursor)) => {
                if self.cursors.len() >= CURSORS {
                    self.cursors.clear();
                }
                self.cursors.insert(session, cursor);
                Ok(value)
            }
            Err(e) => {
                self.undo_request();
                Err(e)
            }
        }
    }

    /// Rolls back the failed request's savepoint, or if even that fails,
    /// the whole transaction (which `commit` then notices): nothing of a
    /// failed request may be committed.
    fn undo_request(&self) {
        // Already rolled back by SQLite, as after a full disk.
        if self.conn.is_autocommit() {
            return;
        }
        let undone = self
            .exec("ROLLBACK TO request")
            .and_then(|()| self.exec("RELEASE request"));
        if undone.is_err() {
            drop(self.exec("ROLLBACK"));
        }
    }

    fn cursor(&self, session: &SessionId) -> Result<Cursor, Fail> {
        if let Some(cursor) = self.cursors.get(session) {
            return Ok(cursor.clone());
        }
        load_cursor(&mut Lite(&self.conn), session)
    }
}

/// Where `session` is: its key, its lineage and its next sequence number,
/// read from the database.
pub(crate) fn load_cursor(db: &mut dyn Sql, session: &SessionId) -> Result<Cursor, Fail> {
    let lineage = query::lineage(db, session)?;
    let own = lineage.last().map_or(0, |s| s.sid);
    Ok(Cursor {
        sid: own,
        next: query::len(db, own)?,
        lineage: lineage.into(),
    })
}

fn insert_session(
    db: &mut dyn Sql,
    id: &SessionId,
    parent: Option<(i64, u64)>,
    created_at: u64,
) -> Result<i64, Fail> {
    db.row(
        "INSERT INTO sessions (id, parent, fork_at, created_at) VALUES (?1, ?2, ?3, ?4)
         RETURNING sid",
        args![
            id.as_str(),
            parent.map(|(sid, _)| sid),
            int(parent.map_or(0, |(_, at)| at)),
            int(created_at)
        ],
        |row| row.int(0),
    )?
    .ok_or_else(|| Fail::Store(StoreError::Database("a new session has no key".into())))
}

fn insert_event(db: &mut dyn Sql, sid: i64, seq: u64, at_ms: u64, body: &[u8]) -> Result<(), Fail> {
    db.execute(
        "INSERT INTO events (session, seq, at_ms, body) VALUES (?1, ?2, ?3, ?4)",
        args![sid, int(seq), int(at_ms), body],
    )?;
    Ok(())
}

/// Makes a new, empty session.
pub(crate) fn create(db: &mut dyn Sql) -> Result<(SessionInfo, SessionId, Cursor), Fail> {
    let id = SessionId::new();
    let created_at_ms = now_ms();
    let sid = insert_session(db, &id, None, created_at_ms)?;
    let cursor = Cursor {
        sid,
        lineage: Arc::new([Segment {
            sid,
            id: id.clone(),
            from: 0,
            to: u64::MAX,
        }]),
        next: 0,
    };
    let info = SessionInfo {
        id: id.clone(),
        parent: None,
        created_at_ms,
        len: 0,
    };
    Ok((info, id, cursor))
}

/// Forks `parent`, which is at `cursor`, after its first `at` events.
pub(crate) fn fork(
    db: &mut dyn Sql,
    cursor: Cursor,
    parent: &SessionId,
    at: u64,
) -> Result<(SessionInfo, SessionId, Cursor), Fail> {
    if at > cursor.next {
        return Err(StoreError::ForkOutOfRange {
            session: parent.clone(),
            at,
            len: cursor.next,
        }
        .into());
    }
    let id = SessionId::new();
    let created_at_ms = now_ms();
    let sid = insert_session(db, &id, Some((cursor.sid, at)), created_at_ms)?;
    let forked = SessionEvent::Forked {
        parent: parent.clone(),
        at,
    };
    insert_event(db, sid, at, created_at_ms, &seal(&forked))?;
    // The parent's lineage cut at `at`, then the fork's own events.
    let mut lineage: Vec<Segment> = cursor
        .lineage
        .iter()
        .filter(|s| s.from < at)
        .map(|s| Segment {
            to: s.to.min(at),
            ..s.clone()
        })
        .collect();
    lineage.push(Segment {
        sid,
        id: id.clone(),
        from: at,
        to: u64::MAX,
    });
    let info = SessionInfo {
        id: id.clone(),
        parent: Some(ForkPoint {
            session: parent.clone(),
            at,
        }),
        created_at_ms,
        len: at + 1,
    };
    let cursor = Cursor {
        sid,
        lineage: lineage.into(),
        next: at + 1,
    };
    Ok((info, id, cursor))
}

/// Appends `events` to `session`, which is at `cursor`.
pub(crate) fn append(
    db: &mut dyn Sql,
    mut cursor: Cursor,
    session: &SessionId,
    events: &[Prepared],
) -> Result<(Appended, SessionId, Cursor), Fail> {
    let first_seq = cursor.next;
    let at_ms = now_ms();
    for (seq, event) in (first_seq..).zip(events) {
        match &event.effect {
            Effect::None => {}
            Effect::Input(input) => accept_input(db, session, &cursor, input, seq)?,
            Effect::Operations(operations) => {
                for op in operations {
                    record_operation(db, cursor.sid, op, at_ms)?;
                }
            }
            Effect::Move {
                operation,
                step,
                event,
            } => move_operation(db, session, cursor.sid, operation, *step, event, at_ms)?,
        }
        insert_event(db, cursor.sid, seq, at_ms, &event.body)?;
    }
    cursor.next = first_seq + events.len() as u64;
    let appended = Appended {
        first_seq,
        len: cursor.next,
    };
    Ok((appended, session.clone(), cursor))
}

/// Records `input` as accepted at `seq`, unless the session or the
/// prefix it shares with its ancestors accepted it already.
fn accept_input(
    db: &mut dyn Sql,
    session: &SessionId,
    cursor: &Cursor,
    input: &InputId,
    seq: u64,
) -> Result<(), Fail> {
    let duplicate = || StoreError::DuplicateInput {
        session: session.clone(),
        input: input.clone(),
    };
    let (own, shared) = cursor.lineage.split_last().ok_or_else(duplicate)?;
    for segment in shared {
        if query::input_in(db, segment, input)? {
            return Err(duplicate().into());
        }
    }
    let inserted = db.execute(
        "INSERT INTO inputs (session, input, seq) VALUES (?1, ?2, ?3)
         ON CONFLICT DO NOTHING",
        args![own.sid, input.as_str(), int(seq)],
    )?;
    if inserted == 0 {
        return Err(duplicate().into());
    }
    Ok(())
}

fn record_operation(db: &mut dyn Sql, sid: i64, op: &NewOperation, at_ms: u64) -> Result<(), Fail> {
    let inserted = db.execute(
        "INSERT INTO operations (id, session, impact, state, attempts, updated_at, body)
         VALUES (?1, ?2, ?3, 'pending', 0, ?4, ?5)
         ON CONFLICT DO NOTHING",
        args![
            op.id.as_str(),
            sid,
            impact_name(op.impact),
            int(at_ms),
            &op.body
        ],
    )?;
    if inserted == 0 {
        return Err(StoreError::DuplicateOperation(op.id.clone()).into());
    }
    Ok(())
}

fn move_operation(
    db: &mut dyn Sql,
    session: &SessionId,
    sid: i64,
    operation: &OperationId,
    step: Step,
    event: &'static str,
    at_ms: u64,
) -> Result<(), Fail> {
    let found = db.row(
        "SELECT o.session, s.id, o.impact, o.state
         FROM operations o JOIN sessions s ON s.sid = o.session
         WHERE o.id = ?1",
        args![operation.as_str()],
        |row| Ok((row.int(0)?, row.text(1)?, row.text(2)?, row.text(3)?)),
    )?;
    let Some((owner_sid, owner, impact, state)) = found else {
        return Err(StoreError::OperationNotFound(operation.clone()).into());
    };
    if owner_sid != sid {
        return Err(StoreError::ForeignOperation {
            operation: operation.clone(),
            owner: query::parse_stored(&owner, "session id")?,
            session: session.clone(),
        }
        .into());
    }
    let state: OperationState = query::parse_stored(&state, "operation state")?;
    let read = impact == impact_name(Impact::Read);
    let next = next_state(step, state, read).ok_or_else(|| StoreError::InvalidTransition {
        operation: operation.clone(),
        state,
        event,
    })?;
    let started = matches!(step, Step::Start);
    // The state was read in this transaction; the guard holds the write
    // to it all the same.
    let changed = db.execute(
        "UPDATE operations SET state = ?3, attempts = attempts + ?4, updated_at = ?5
         WHERE id = ?1 AND state = ?2",
        args![
            operation.as_str(),
            state.as_str(),
            next.as_str(),
            i64::from(started),
            int(at_ms)
        ],
    )?;
    if changed == 0 {
        let found = db.row(
            "SELECT state FROM operations WHERE id = ?1",
            args![operation.as_str()],
            |row| row.text(0),
        )?;
        return Err(StoreError::StateChanged {
            kind: OperationState::KIND,
            id: operation.to_string(),
            expected: state.name(),
            found,
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use hane_core::{Input, InputKind};

    use super::*;
    use crate::schema::open_writer;

    fn accepted(id: &str) -> SessionEvent {
        SessionEvent::InputAccepted {
            input: Input {
                id: id.parse().unwrap(),
                kind: InputKind::Crash {
                    operation: None,
                    reason: "test".into(),
                },
            },
        }
    }

    fn run(state: &str) -> SessionEvent {
        SessionEvent::RunStateChanged {
            run: "run".into(),
            state: state.into(),
        }
    }

    type Answer = oneshot::Receiver<Result<Appended, StoreError>>;

    fn append(session: &SessionId, events: &[SessionEvent]) -> (Request, Answer) {
        append_synced(session, events, true)
    }

    fn append_synced(
        session: &SessionId,
        events: &[SessionEvent],
        synced: bool,
    ) -> (Request, Answer) {
        let (reply, answer) = oneshot::channel();
        let request = Request::Append {
            session: session.clone(),
            events: Prepared::batch(session, events).unwrap(),
            synced,
            reply,
        };
        (request, answer)
    }

    /// The writer connection's `synchronous` pragma: 0 `OFF`, 1 `NORMAL`,
    /// 2 `FULL`.
    fn mode(writer: &Writer) -> i64 {
        writer
            .conn
            .pragma_query_value(None, "synchronous", |row| row.get(0))
            .unwrap()
    }

    /// A group of deferred appends only commits without a sync
    /// (`NORMAL`); a group with any request that needs one commits as the
    /// store is configured (`FULL`), which syncs what came before too.
    /// A store configured `OFF` stays so.
    #[test]
    fn only_a_group_of_deferred_appends_skips_the_sync() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, _) = open_writer(&dir.path().join("store.db"), Synchronous::Full).unwrap();
        let mut writer = Writer::new(
            conn,
            Mark::of(&dir.path().join("store.db")),
            Synchronous::Full,
            16,
        );
        let mut group = Vec::new();
        let (reply, mut created) = oneshot::channel();
        group.push(Request::Create { reply });
        writer.commit_group(&mut group);
        let session = created.try_recv().unwrap().unwrap().id;
        assert_eq!(mode(&writer), 2);

        let (a, mut a_answer) = append_synced(&session, &[run("1")], false);
        let (b, mut b_answer) = append_synced(&session, &[run("2")], false);
        group.extend([a, b]);
        writer.commit_group(&mut group);
        assert_eq!(mode(&writer), 1, "deferred appends alone are not synced");
        assert_eq!(a_answer.try_recv().unwrap().unwrap().first_seq, 0);
        assert_eq!(b_answer.try_recv().unwrap().unwrap().first_seq, 1);

        let (c, mut c_answer) = append_synced(&session, &[run("3")], false);
        let (d, mut d_answer) = append(&session, &[run("4")]);
        group.extend([c, d]);
        writer.commit_group(&mut group);
        assert_eq!(
            mode(&writer),
            2,
            "one append that needs a sync syncs the group"
        );
        assert_eq!(c_answer.try_recv().unwrap().unwrap().first_seq, 2);
        assert_eq!(d_answer.try_recv().unwrap().unwrap().first_seq, 3);

        let (e, _) = append_synced(&session, &[run("5")], false);
        group.push(e);
        writer.commit_group(&mut group);
        assert_eq!(mode(&writer), 1);
        let (reply, mut forked) = oneshot::channel();
        group.push(Request::Fork {
            session: session.clone(),
            at: 2,
            reply,
        });
        writer.commit_group(&mut group);
        assert_eq!(mode(&writer), 2, "a fork is synced");
        forked.try_recv().unwrap().unwrap();
        let events = query::read(&mut Lite(&writer.conn), &session, 0..u64::MAX).unwrap();
        let states: Vec<_> = events.iter().map(|r| r.event.clone()).collect();
        assert_eq!(states, [run("1"), run("2"), run("3"), run("4"), run("5")]);

        let (conn, _) = open_writer(&dir.path().join("off.db"), Synchronous::Off).unwrap();
        let mut writer = Writer::new(
            conn,
            Mark::of(&dir.path().join("off.db")),
            Synchronous::Off,
            16,
        );
        let (reply, mut created) = oneshot::channel();
        group.push(Request::Create { reply });
        writer.commit_group(&mut group);
        let session = created.try_recv().unwrap().unwrap().id;
        for synced in [false, true] {
            let (request, mut answer) = append_synced(&session, &[run("1")], synced);
            group.push(request);
            writer.commit_group(&mut group);
            answer.try_recv().unwrap().unwrap();
            assert_eq!(mode(&writer), 0);
        }
    }

    /// One group in which some requests are refused: the others commit,
    /// and the sequence numbers the writer hands out afterwards skip
    /// nothing.
    #[test]
    fn a_refused_request_rolls_back_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, _) = open_writer(&dir.path().join("store.db"), Synchronous::Off).unwrap();
        let mut writer = Writer::new(
            conn,
            Mark::of(&dir.path().join("store.db")),
            Synchronous::Off,
            16,
        );

        let (reply, mut created) = oneshot::channel();
        writer.commit([Request::Create { reply }].into_iter());
        let session = created.try_recv().unwrap().unwrap().id;

        let (first, mut first_answer) = append(&session, &[accepted("a"), run("1")]);
        let (dup, mut dup_answer) = append(&session, &[run("2"), accepted("b"), accepted("a")]);
        let (second, mut second_answer) = append(&session, &[accepted("b"), run("3")]);
        let (reply, mut fork_answer) = oneshot::channel();
        let fork = Request::Fork {
            session: session.clone(),
            at: 5,
            reply,
        };
        writer.commit([first, dup, fork, second].into_iter());

        let first = first_answer.try_recv().unwrap().unwrap();
        assert_eq!((first.first_seq, first.len), (0, 2));
        assert!(matches!(
            dup_answer.try_recv().unwrap(),
            Err(StoreError::DuplicateInput { input, .. }) if input.as_str() == "a"
        ));
        assert!(matches!(
            fork_answer.try_recv().unwrap(),
            Err(StoreError::ForkOutOfRange { at: 5, len: 2, .. })
        ));
        let second = second_answer.try_recv().unwrap().unwrap();
        assert_eq!((second.first_seq, second.len), (2, 4));

        // What the file holds agrees with the answers, and with a cursor
        // loaded afresh.
        assert!(writer.conn.is_autocommit(), "the group's transaction ended");
        let events = query::read(&mut Lite(&writer.conn), &session, 0..u64::MAX).unwrap();
        let states: Vec<_> = events.iter().map(|r| r.event.clone()).collect();
        assert_eq!(states, [accepted("a"), run("1"), accepted("b"), run("3")]);
        writer.cursors.clear();
        let (third, mut third_answer) = append(&session, &[run("4")]);
        writer.commit([third].into_iter());
        assert_eq!(third_answer.try_recv().unwrap().unwrap().first_seq, 4);
    }

    /// Log frames written and copied back, as SQLite reports them.
    fn log(writer: &Writer) -> (i32, i32) {
        writer
            .conn
            .wal_checkpoint_v2(None::<&str>, CheckpointMode::NOOP)
            .unwrap()
    }

    #[test]
    fn the_writer_checkpoints_between_groups() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, _) = open_writer(&dir.path().join("store.db"), Synchronous::Off).unwrap();
        let mut writer = Writer::new(
            conn,
            Mark::of(&dir.path().join("store.db")),
            Synchronous::Off,
            16,
        );
        let (reply, mut created) = oneshot::channel();
        writer.commit([Request::Create { reply }].into_iter());
        let session = created.try_recv().unwrap().unwrap().id;
        let group = |writer: &mut Writer| {
            let (request, _) = append(&session, &[run("x")]);
            writer.commit([request].into_iter());
            writer.checkpoint();
        };

        // Below the threshold the log only grows.
        writer.checkpoint_pages = 1000;
        for _ in 0..3 {
            group(&mut writer);
        }
        let (written, copied) = log(&writer);
        assert!(written > 0);
        assert_eq!(copied, 0);
        // Past it, the log is copied back whole.
        writer.checkpoint_pages = written;
        group(&mut writer);
        let (written, copied) = log(&writer);
        assert!(written > 0);
        assert_eq!(copied, written);
    }

    #[test]
    fn operation_steps_follow_the_lifecycle() {
        use OperationState::*;
        let all = [Step::Start, Step::Complete, Step::Fail, Step::Unknown];
        let allowed: Vec<_> = [false, true]
            .into_iter()
            .flat_map(|read| {
                OperationState::ALL.into_iter().flat_map(move |state| {
                    all.into_iter().filter_map(move |step| {
                        next_state(step, state, read).map(|next| (read, state, next))
                    })
                })
            })
            .collect();
        assert_eq!(
            allowed,
            [
                (false, Pending, Running),
                (false, Pending, Failed),
                (false, Running, Succeeded),
                (false, Running, Failed),
                (false, Running, Unknown),
                (true, Pending, Running),
                (true, Pending, Failed),
                (true, Running, Running),
                (true, Running, Succeeded),
                (true, Running, Failed),
                (true, Running, Unknown),
            ]
        );
    }
}
