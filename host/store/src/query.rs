//! Reads shared by the writer and the readers: a session's lineage through
//! its forks, its length, its events, its inputs, and operations.

use std::ops::Range;

use hane_core::{
    InputId, OperationId, OperationState, Recorded, SessionEvent, SessionId, Versioned, open,
};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::{ForkPoint, OperationRecord, SessionInfo, StoreError};

/// Why a request failed, before it is known what the request was doing.
#[derive(Debug)]
pub(crate) enum Fail {
    /// The store refused it, or found an item it cannot read.
    Store(StoreError),
    /// SQLite failed.
    Sql(rusqlite::Error),
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

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(e)
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

/// A sequence number or time as SQLite stores it; none of those reach
/// `i64::MAX`, and open range ends become it.
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn uint(row: &Row<'_>, index: usize) -> rusqlite::Result<u64> {
    row.get::<_, i64>(index).map(|v| v.max(0) as u64)
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
pub(crate) fn lineage(conn: &Connection, session: &SessionId) -> Result<Vec<Segment>, Fail> {
    let (sid, mut parent, fork_at) = conn
        .prepare_cached("SELECT sid, parent, fork_at FROM sessions WHERE id = ?1")?
        .query_row([session.as_str()], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, Option<i64>>(1)?,
                uint(row, 2)?,
            ))
        })
        .optional()?
        .ok_or_else(|| StoreError::SessionNotFound(session.clone()))?;
    let mut segments = vec![Segment {
        sid,
        id: session.clone(),
        from: fork_at,
        to: u64::MAX,
    }];
    // Events below `limit` come from further up.
    let mut limit = fork_at;
    let mut ancestor =
        conn.prepare_cached("SELECT id, parent, fork_at FROM sessions WHERE sid = ?1")?;
    while let Some(sid) = parent {
        let (id, grandparent, fork_at) = ancestor.query_row([sid], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, Option<i64>>(1)?,
                uint(row, 2)?,
            ))
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
pub(crate) fn len(conn: &Connection, sid: i64) -> Result<u64, Fail> {
    let last = conn
        .prepare_cached("SELECT seq FROM events WHERE session = ?1 ORDER BY seq DESC LIMIT 1")?
        .query_row([sid], |row| uint(row, 0))
        .optional()?;
    Ok(last.map_or(0, |seq| seq + 1))
}

/// A session's description from a row whose columns 1 to 3 are `fork_at`,
/// `created_at` and the parent's id.
fn info(row: &Row<'_>, id: SessionId, len: u64) -> Result<SessionInfo, Fail> {
    let parent = match row.get::<_, Option<String>>(3)? {
        Some(parent) => Some(ForkPoint {
            session: parse_stored(&parent, "session id")?,
            at: uint(row, 1)?,
        }),
        None => None,
    };
    Ok(SessionInfo {
        id,
        parent,
        created_at_ms: uint(row, 2)?,
        len,
    })
}

/// Describes one session.
pub(crate) fn session(conn: &Connection, session: &SessionId) -> Result<SessionInfo, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT s.sid, s.fork_at, s.created_at, p.id
         FROM sessions s LEFT JOIN sessions p ON p.sid = s.parent
         WHERE s.id = ?1",
    )?;
    let mut rows = stmt.query([session.as_str()])?;
    let row = rows
        .next()?
        .ok_or_else(|| StoreError::SessionNotFound(session.clone()))?;
    let len = len(conn, row.get(0)?)?;
    info(row, session.clone(), len)
}

/// Every session, oldest first.
pub(crate) fn sessions(conn: &Connection) -> Result<Vec<SessionInfo>, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT s.id, s.fork_at, s.created_at, p.id,
             coalesce((SELECT e.seq + 1 FROM events e WHERE e.session = s.sid
                       ORDER BY e.seq DESC LIMIT 1), 0)
         FROM sessions s LEFT JOIN sessions p ON p.sid = s.parent
         ORDER BY s.sid",
    )?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let id = parse_stored(&row.get::<_, String>(0)?, "session id")?;
        out.push(info(row, id, uint(row, 4)?)?);
    }
    Ok(out)
}

/// The events of `session` in `range`, read through its lineage.
pub(crate) fn read(
    conn: &Connection,
    session: &SessionId,
    range: Range<u64>,
) -> Result<Vec<Recorded>, Fail> {
    let segments = lineage(conn, session)?;
    let mut stmt = conn.prepare_cached(
        "SELECT seq, at_ms, body FROM events
         WHERE session = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq",
    )?;
    let mut out = Vec::new();
    for segment in &segments {
        let from = segment.from.max(range.start);
        let to = segment.to.min(range.end);
        if from >= to {
            continue;
        }
        let mut rows = stmt.query(params![segment.sid, int(from), int(to)])?;
        while let Some(row) = rows.next()? {
            let seq = uint(row, 0)?;
            let event = open_blob::<SessionEvent>(row.get_ref(2)?, || {
                format!("event {seq} of session {}", segment.id)
            })?;
            out.push(Recorded {
                seq,
                at_ms: uint(row, 1)?,
                event,
            });
        }
    }
    Ok(out)
}

/// Opens a stored envelope; `what` names the item if it does not open.
fn open_blob<T: Versioned>(value: ValueRef<'_>, what: impl FnOnce() -> String) -> Result<T, Fail> {
    open(value.as_blob().map_err(rusqlite::Error::from)?).map_err(|source| {
        Fail::Store(StoreError::Unreadable {
            what: what(),
            source,
        })
    })
}

/// Whether the stretch `segment` holds an `input_accepted` of `input`.
pub(crate) fn input_in(
    conn: &Connection,
    segment: &Segment,
    input: &InputId,
) -> Result<bool, Fail> {
    let found = conn
        .prepare_cached(
            "SELECT 1 FROM inputs WHERE session = ?1 AND input = ?2 AND seq >= ?3 AND seq < ?4",
        )?
        .exists(params![
            segment.sid,
            input.as_str(),
            int(segment.from),
            int(segment.to)
        ])?;
    Ok(found)
}

/// Whether `session`, its shared prefix included, accepted `input`.
pub(crate) fn input_accepted(
    conn: &Connection,
    session: &SessionId,
    input: &InputId,
) -> Result<bool, Fail> {
    for segment in lineage(conn, session)? {
        if input_in(conn, &segment, input)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn operation_record(row: &Row<'_>) -> Result<OperationRecord, Fail> {
    let id: String = row.get(0)?;
    let operation = open_blob(row.get_ref(1)?, || format!("operation {id}"))?;
    let state: String = row.get(2)?;
    Ok(OperationRecord {
        operation,
        state: parse_stored(&state, "operation state")?,
        attempts: u32::try_from(uint(row, 3)?).unwrap_or(u32::MAX),
        updated_at_ms: uint(row, 4)?,
    })
}

/// Every operation in one of `states`, oldest first.
pub(crate) fn operations(
    conn: &Connection,
    states: &[OperationState],
) -> Result<Vec<OperationRecord>, Fail> {
    let mut names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    // At most five states, so at most five shapes of this statement.
    let marks = vec!["?"; names.len()].join(", ");
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT id, body, state, attempts, updated_at FROM operations
         WHERE state IN ({marks}) ORDER BY oid"
    ))?;
    let mut rows = stmt.query(rusqlite::params_from_iter(names))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(operation_record(row)?);
    }
    Ok(out)
}

/// One operation.
pub(crate) fn operation(conn: &Connection, id: &OperationId) -> Result<OperationRecord, Fail> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, body, state, attempts, updated_at FROM operations WHERE id = ?1",
    )?;
    let mut rows = stmt.query([id.as_str()])?;
    let row = rows
        .next()?
        .ok_or_else(|| StoreError::OperationNotFound(id.clone()))?;
    operation_record(row)
}
