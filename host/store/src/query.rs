//! Reads shared by the writer and the readers: a session's lineage through
//! its forks, its length, its events, its inputs, and operations.

use std::ops::Range;

use crate::sql::{Query, Row, Sql, SqlError, args};
use crate::{ForkPoint, OperationRecord, SessionInfo, StoreError};
use hane_core::{InputId, OperationId, OperationState, Recorded, SessionEvent, SessionId};
use hane_stored::{Versioned, open};

/// Why a request failed, before it is known what the request was doing.
#[derive(Debug)]
pub(crate) enum Fail {
    /// The store refused it, or found an item it cannot read.
    Store(StoreError),
    /// The database failed.
    Sql(SqlError),
}

impl Fail {
    /// The error, with a database failure saying what was being `done`.
    pub(crate) fn doing(self, done: impl FnOnce() -> String) -> StoreError {
        match self {
            Fail::Store(e) => e,
            Fail::Sql(e) => StoreError::Database(format!("{}: {e}", done())),
        }
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

impl From<SqlError> for Fail {
    fn from(e: SqlError) -> Self {
        Fail::Sql(e)
    }
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(crate::sql::lite_error(e))
    }
}

/// One stretch of a session's history, stored under one session: the
/// events `from..to` of session `sid`.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    /// The session that stores the events.
    pub sid: i64,
    /// Its id, to name it in errors.
    pub id: SessionId,
    /// The first sequence number.
    pub from: u64,
    /// One past the last; `u64::MAX` for the session's own events.
    pub to: u64,
}

pub(crate) use hane_core::now_ms;

/// A sequence number or time as the database stores it; none of those reach
/// `i64::MAX`, and open range ends become it.
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn uint(row: &dyn Row, index: usize) -> Result<u64, SqlError> {
    row.int(index).map(|v| v.max(0) as u64)
}

/// An id the store wrote.
pub(crate) fn parse_stored<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, Fail>
where
    T::Err: std::fmt::Display,
{
    text.parse().map_err(|e| {
        Fail::Store(StoreError::Database(format!(
            "the stored {what} is invalid: {e}"
        )))
    })
}

/// Where `session`'s events are stored, oldest first: the stretches it
/// shares with its ancestors, then its own events. Empty stretches (a fork
/// at its parent's own fork point) are left out.
pub(crate) fn lineage(db: &mut dyn Sql, session: &SessionId) -> Result<Vec<Segment>, Fail> {
    let (sid, mut parent, fork_at) = db
        .row(
            "SELECT sid, parent, fork_at FROM sessions WHERE id = ?1",
            args![session.as_str()],
            |row| Ok((row.int(0)?, row.opt_int(1)?, uint(row, 2)?)),
        )?
        .ok_or_else(|| StoreError::SessionNotFound(session.clone()))?;
    let mut segments = vec![Segment {
        sid,
        id: session.clone(),
        from: fork_at,
        to: u64::MAX,
    }];
    // Events below `limit` come from further up.
    let mut limit = fork_at;
    while let Some(sid) = parent {
        let (id, grandparent, fork_at) = db
            .row(
                "SELECT id, parent, fork_at FROM sessions WHERE sid = ?1",
                args![sid],
                |row| Ok((row.text(0)?, row.opt_int(1)?, uint(row, 2)?)),
            )?
            .ok_or_else(|| {
                StoreError::Database(format!("session {session}: an ancestor is missing"))
            })?;
        if fork_at < limit {
            segments.push(Segment {
                sid,
                id: parse_stored(&id, "session id")?,
                from: fork_at,
                to: limit,
            });
            limit = fork_at;
        }
        parent = grandparent;
    }
    segments.reverse();
    Ok(segments)
}

/// How many events session `sid` holds, its shared prefix included. A
/// fork's own events start with `forked`, so only a root can be empty.
pub(crate) fn len(db: &mut dyn Sql, sid: i64) -> Result<u64, Fail> {
    let last = db.row(
        "SELECT seq FROM events WHERE session = ?1 ORDER BY seq DESC LIMIT 1",
        args![sid],
        |row| uint(row, 0),
    )?;
    Ok(last.map_or(0, |seq| seq + 1))
}

/// A session's columns as read: `fork_at`, `created_at`, the parent's id.
struct Described {
    fork_at: u64,
    created_at_ms: u64,
    parent: Option<String>,
}

fn described(row: &dyn Row, first: usize) -> Result<Described, SqlError> {
    Ok(Described {
        fork_at: uint(row, first)?,
        created_at_ms: uint(row, first + 1)?,
        parent: row.opt_text(first + 2)?,
    })
}

/// A session's description.
fn info(described: Described, id: SessionId, len: u64) -> Result<SessionInfo, Fail> {
    let parent = match described.parent {
        Some(parent) => Some(ForkPoint {
            session: parse_stored(&parent, "session id")?,
            at: described.fork_at,
        }),
        None => None,
    };
    Ok(SessionInfo {
        id,
        parent,
        created_at_ms: described.created_at_ms,
        len,
    })
}

/// Describes one session.
pub(crate) fn session(db: &mut dyn Sql, session: &SessionId) -> Result<SessionInfo, Fail> {
    let (sid, found) = db
        .row(
            "SELECT s.sid, s.fork_at, s.created_at, p.id
             FROM sessions s LEFT JOIN sessions p ON p.sid = s.parent
             WHERE s.id = ?1",
            args![session.as_str()],
            |row| Ok((row.int(0)?, described(row, 1)?)),
        )?
        .ok_or_else(|| StoreError::SessionNotFound(session.clone()))?;
    let len = len(db, sid)?;
    info(found, session.clone(), len)
}

/// Every session, oldest first.
pub(crate) fn sessions(db: &mut dyn Sql) -> Result<Vec<SessionInfo>, Fail> {
    let rows = db.rows(
        "SELECT s.id, s.fork_at, s.created_at, p.id,
             coalesce((SELECT e.seq + 1 FROM events e WHERE e.session = s.sid
                       ORDER BY e.seq DESC LIMIT 1), 0)
         FROM sessions s LEFT JOIN sessions p ON p.sid = s.parent
         ORDER BY s.sid",
        &[],
        |row| Ok((row.text(0)?, described(row, 1)?, uint(row, 4)?)),
    )?;
    rows.into_iter()
        .map(|(id, found, len)| info(found, parse_stored(&id, "session id")?, len))
        .collect()
}

/// The events of `session` in `range`, read through its lineage.
pub(crate) fn read(
    db: &mut dyn Sql,
    session: &SessionId,
    range: Range<u64>,
) -> Result<Vec<Recorded>, Fail> {
    let segments = lineage(db, session)?;
    let mut out = Vec::new();
    for segment in &segments {
        let from = segment.from.max(range.start);
        let to = segment.to.min(range.end);
        if from >= to {
            continue;
        }
        let mut failed = None;
        let read = db.each(
            "SELECT seq, at_ms, body FROM events
             WHERE session = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq",
            args![segment.sid, int(from), int(to)],
            &mut |row| {
                let seq = uint(row, 0)?;
                let body = row.blob(2)?;
                match open_blob::<SessionEvent>(&body, || {
                    format!("event {seq} of session {}", segment.id)
                }) {
                    Ok(event) => {
                        out.push(Recorded {
                            seq,
                            at_ms: uint(row, 1)?,
                            event,
                        });
                        Ok(())
                    }
                    Err(e) => {
                        // Stops the reading; the error is this one.
                        failed = Some(e);
                        Err(SqlError::column(2, "unreadable"))
                    }
                }
            },
        );
        if let Some(e) = failed {
            return Err(e);
        }
        read?;
    }
    Ok(out)
}

/// Opens a stored envelope; `what` names the item if it does not open.
fn open_blob<T: Versioned>(body: &[u8], what: impl FnOnce() -> String) -> Result<T, Fail> {
    open(body).map_err(|source| {
        Fail::Store(StoreError::Unreadable {
            what: what(),
            source,
        })
    })
}

/// Whether the stretch `segment` holds an `input_accepted` of `input`.
pub(crate) fn input_in(db: &mut dyn Sql, segment: &Segment, input: &InputId) -> Result<bool, Fail> {
    let found = db.row(
        "SELECT 1 FROM inputs WHERE session = ?1 AND input = ?2 AND seq >= ?3 AND seq < ?4",
        args![
            segment.sid,
            input.as_str(),
            int(segment.from),
            int(segment.to)
        ],
        |row| row.int(0),
    )?;
    Ok(found.is_some())
}

/// Whether `session`, its shared prefix included, accepted `input`.
pub(crate) fn input_accepted(
    db: &mut dyn Sql,
    session: &SessionId,
    input: &InputId,
) -> Result<bool, Fail> {
    for segment in lineage(db, session)? {
        if input_in(db, &segment, input)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// An operation's columns as read: id, body, state, attempts, updated_at.
type OperationColumns = (String, Vec<u8>, String, u64, u64);

fn operation_columns(row: &dyn Row) -> Result<OperationColumns, SqlError> {
    Ok((
        row.text(0)?,
        row.blob(1)?,
        row.text(2)?,
        uint(row, 3)?,
        uint(row, 4)?,
    ))
}

fn operation_record(
    (id, body, state, attempts, updated_at_ms): OperationColumns,
) -> Result<OperationRecord, Fail> {
    let operation = open_blob(&body, || format!("operation {id}"))?;
    Ok(OperationRecord {
        operation,
        state: parse_stored(&state, "operation state")?,
        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        updated_at_ms,
    })
}

/// Every operation in one of `states`, oldest first.
pub(crate) fn operations(
    db: &mut dyn Sql,
    states: &[OperationState],
) -> Result<Vec<OperationRecord>, Fail> {
    let mut names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    // At most five states, so at most five shapes of this statement.
    let marks: Vec<String> = (1..=names.len()).map(|n| format!("?{n}")).collect();
    let sql = format!(
        "SELECT id, body, state, attempts, updated_at FROM operations
         WHERE state IN ({}) ORDER BY oid",
        marks.join(", ")
    );
    let states: Vec<crate::sql::Arg<'_>> = names.iter().map(|&n| n.into()).collect();
    db.rows(&sql, &states, operation_columns)?
        .into_iter()
        .map(operation_record)
        .collect()
}

/// One operation.
pub(crate) fn operation(db: &mut dyn Sql, id: &OperationId) -> Result<OperationRecord, Fail> {
    let found = db
        .row(
            "SELECT id, body, state, attempts, updated_at FROM operations WHERE id = ?1",
            args![id.as_str()],
            operation_columns,
        )?
        .ok_or_else(|| StoreError::OperationNotFound(id.clone()))?;
    operation_record(found)
}

/// The reads of [`crate::SessionStore`], written once for both stores:
/// each is a function of this module run by the store's own `read_with`
/// (a reader thread of SQLite's, a blocking thread with a pooled
/// connection of PostgreSQL's), which says what it was `doing` if it
/// fails. Expanded inside each `impl SessionStore`.
macro_rules! session_reads {
    () => {
        fn read<'a>(
            &'a self,
            session: &'a ::hane_core::SessionId,
            range: ::std::ops::Range<u64>,
        ) -> $crate::StoreFuture<'a, Vec<::hane_core::Recorded>> {
            let session = session.clone();
            let id = session.clone();
            Box::pin(self.read_with(
                move || format!("reading session {id}"),
                move |db| $crate::query::read(db, &session, range),
            ))
        }

        fn session<'a>(
            &'a self,
            session: &'a ::hane_core::SessionId,
        ) -> $crate::StoreFuture<'a, $crate::SessionInfo> {
            let session = session.clone();
            let id = session.clone();
            Box::pin(self.read_with(
                move || format!("describing session {id}"),
                move |db| $crate::query::session(db, &session),
            ))
        }

        fn list_sessions(&self) -> $crate::StoreFuture<'_, Vec<$crate::SessionInfo>> {
            Box::pin(self.read_with(|| "listing sessions".into(), $crate::query::sessions))
        }

        fn input_accepted<'a>(
            &'a self,
            session: &'a ::hane_core::SessionId,
            input: &'a ::hane_core::InputId,
        ) -> $crate::StoreFuture<'a, bool> {
            let session = session.clone();
            let input = input.clone();
            let id = session.clone();
            Box::pin(self.read_with(
                move || format!("looking up inputs of session {id}"),
                move |db| $crate::query::input_accepted(db, &session, &input),
            ))
        }

        fn operations<'a>(
            &'a self,
            states: &'a [::hane_core::OperationState],
        ) -> $crate::StoreFuture<'a, Vec<$crate::OperationRecord>> {
            let states = states.to_vec();
            Box::pin(self.read_with(
                || "listing operations".into(),
                move |db| $crate::query::operations(db, &states),
            ))
        }

        fn operation<'a>(
            &'a self,
            id: &'a ::hane_core::OperationId,
        ) -> $crate::StoreFuture<'a, $crate::OperationRecord> {
            let id = id.clone();
            let op = id.clone();
            Box::pin(self.read_with(
                move || format!("reading operation {op}"),
                move |db| $crate::query::operation(db, &id),
            ))
        }
    };
}
pub(crate) use session_reads;
