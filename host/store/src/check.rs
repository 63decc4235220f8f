//! [`check`]: reads a whole store, for `hane store check`.
//!
//! A listing leaves out an item that does not read; the check is where
//! every one of them is found, with SQLite's own account of the file.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use hane_core::{
    ActionRequest, AgentRun, Conversation, Evaluation, Operation, Reception, RunStatus,
    SessionEvent, Task, WorkflowCase, conversation::ConversationEntry,
};
use hane_stored::{EnvelopeError, Versioned};
use rusqlite::Connection;

use crate::StoreError;
use crate::mark::{self, Damage};
use crate::schema::{self, Found};

/// Reads the body of a stored release, whose type the store does not know
/// (its owner seals it).
pub type ReadRelease = fn(&[u8]) -> Result<(), EnvelopeError>;

/// What [`check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The store's file.
    pub path: PathBuf,
    /// How many stored items were read, every row that holds a sealed
    /// body.
    pub checked: u64,
    /// What SQLite's `PRAGMA integrity_check` reported; empty when it
    /// found the file sound.
    pub integrity: Vec<String>,
    /// Every item that does not read, table by table.
    pub problems: Vec<Problem>,
    /// Commits the store acknowledged and no longer holds, or a mark that
    /// does not read; a damaged store is not opened for writing until
    /// [`crate::recover`] accepts it as it is.
    pub damage: Option<Damage>,
}

impl CheckReport {
    /// Whether nothing is wrong.
    pub fn is_sound(&self) -> bool {
        self.integrity.is_empty() && self.problems.is_empty() && self.damage.is_none()
    }
}

/// A stored item that does not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Its table, such as `runs`.
    pub table: &'static str,
    /// The item, such as a run's id or `event 3 of session ses_...`;
    /// `None` when the table itself could not be read.
    pub id: Option<String>,
    /// What is wrong.
    pub error: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.id {
            Some(id) => write!(f, "{} {id}: {}", self.table, self.error),
            None => write!(f, "{}: {}", self.table, self.error),
        }
    }
}

/// A table of sealed bodies: a query giving each row's id and body, and
/// how a body is read.
struct Sealed {
    table: &'static str,
    query: &'static str,
    read: ReadRelease,
}

fn reads<T: Versioned>(body: &[u8]) -> Result<(), EnvelopeError> {
    hane_stored::open::<T>(body).map(drop)
}

/// Every table whose rows hold a sealed body, with the type sealed in it.
/// Releases are read by the caller's `release`.
fn sealed(release: ReadRelease) -> [Sealed; 11] {
    [
        Sealed {
            table: "events",
            query: "SELECT 'event ' || e.seq || ' of session ' || coalesce(s.id, 'number ' || e.session), e.body
                    FROM events e LEFT JOIN sessions s ON s.sid = e.session ORDER BY e.session, e.seq",
            read: reads::<SessionEvent>,
        },
        Sealed {
            table: "operations",
            query: "SELECT id, body FROM operations ORDER BY oid",
            read: reads::<Operation>,
        },
        Sealed {
            table: "releases",
            query: "SELECT 'release ' || number, body FROM releases ORDER BY number",
            read: release,
        },
        Sealed {
            table: "runs",
            query: "SELECT id, body FROM runs ORDER BY created_at, id",
            read: reads::<AgentRun>,
        },
        Sealed {
            table: "tasks",
            query: "SELECT id, body FROM tasks ORDER BY created_at, id",
            read: reads::<Task>,
        },
        Sealed {
            table: "actions",
            query: "SELECT id, body FROM actions ORDER BY created_at, id",
            read: reads::<ActionRequest>,
        },
        Sealed {
            table: "conversations",
            query: "SELECT id, body FROM conversations ORDER BY created_at, id",
            read: reads::<Conversation>,
        },
        Sealed {
            table: "conversation_entries",
            query: "SELECT 'entry ' || seq || ' of conversation ' || conversation, body
                    FROM conversation_entries ORDER BY conversation, seq",
            read: reads::<ConversationEntry>,
        },
        Sealed {
            table: "receptions",
            query: "SELECT id, body FROM receptions ORDER BY created_at, id",
            read: reads::<Reception>,
        },
        Sealed {
            table: "evaluations",
            query: "SELECT id, body FROM evaluations ORDER BY created_at, id",
            read: reads::<Evaluation>,
        },
        Sealed {
            table: "workflow_cases",
            query: "SELECT id, body FROM workflow_cases ORDER BY created_at, id",
            read: reads::<WorkflowCase>,
        },
    ]
}

/// Checks the store at `path`: its commits against its mark (see
/// [`Damage`]), SQLite's `PRAGMA integrity_check` over the whole file,
/// then every stored item read as its owner reads it (session events,
/// operations, releases with `release`, runs and their statuses, tasks,
/// actions, conversations and their entries, reception's answers,
/// evaluations, workflow cases). It reads one snapshot and writes
/// nothing to the store (a damaged log is copied aside): a store of an
/// older schema is checked as it is, not migrated, and a `hane serve` may
/// go on using the store meanwhile. Reading every item takes time in
/// proportion to the store's size.
///
/// # Errors
///
/// [`StoreError::NoStore`] when nothing is at `path`;
/// [`StoreError::NotAStore`] when something other than a hane store is;
/// [`StoreError::NewerSchema`]; [`StoreError::Database`] when the file
/// cannot be opened at all. What is wrong inside a store is the report,
/// not an error.
pub fn check(path: impl AsRef<Path>, release: ReadRelease) -> Result<CheckReport, StoreError> {
    let path = path.as_ref();
    if schema::inspect(path)? == Found::Nothing {
        return Err(StoreError::NoStore(path.to_owned()));
    }
    let failed =
        |e: rusqlite::Error| StoreError::Database(format!("checking {}: {e}", path.display()));
    let mut conn = schema::connect(path)?;
    conn.pragma_update(None, "query_only", true)
        .map_err(failed)?;
    schema::refuse_foreign(&conn, path)?;
    // One snapshot for the whole check; it only reads and rolls back.
    let tx = conn.transaction().map_err(failed)?;
    let mut report = CheckReport {
        path: path.to_owned(),
        checked: 0,
        damage: mark::inspect(&tx, path)?,
        integrity: integrity(&tx),
        problems: Vec::new(),
    };
    let tables = tables(&tx).map_err(failed)?;
    for sealed in sealed(release) {
        // A store of an older schema lacks the later tables.
        if tables.contains(sealed.table) {
            read_table(&tx, &sealed, &mut report);
        }
    }
    if tables.contains("runs") {
        run_statuses(&tx, &mut report);
    }
    Ok(report)
}

/// What `PRAGMA integrity_check` says, without its `ok`.
fn integrity(conn: &Connection) -> Vec<String> {
    let lines = conn.prepare("PRAGMA integrity_check").and_then(|mut stmt| {
        stmt.query_map([], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()
    });
    match lines {
        Ok(lines) if lines == ["ok"] => Vec::new(),
        Ok(lines) => lines,
        Err(e) => vec![format!("the integrity check could not run: {e}")],
    }
}

fn tables(conn: &Connection) -> rusqlite::Result<HashSet<String>> {
    conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?
        .query_map([], |row| row.get(0))?
        .collect()
}

/// Reads every body of `sealed`'s table into `report`. A table that stops
/// reading part way (a damaged file) is a problem of the table; the rows
/// read before it stay counted.
fn read_table(conn: &Connection, sealed: &Sealed, report: &mut CheckReport) {
    if let Err(e) = read_rows(conn, sealed, report) {
        report.problems.push(Problem {
            table: sealed.table,
            id: None,
            error: e.to_string(),
        });
    }
}

fn read_rows(conn: &Connection, sealed: &Sealed, report: &mut CheckReport) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(sealed.query)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        report.checked += 1;
        let body = row.get_ref(1)?;
        let error = match body.as_blob() {
            Ok(body) => (sealed.read)(body).err().map(|e| e.to_string()),
            Err(_) => Some(format!("the body is {}, not bytes", body.data_type())),
        };
        if let Some(error) = error {
            report.problems.push(Problem {
                table: sealed.table,
                id: Some(id),
                error,
            });
        }
    }
    Ok(())
}

/// A run's status column, which listings filter by, must name a status.
fn run_statuses(conn: &Connection, report: &mut CheckReport) {
    let read = || -> rusqlite::Result<Vec<(String, String)>> {
        conn.prepare("SELECT id, status FROM runs ORDER BY created_at, id")?
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect()
    };
    match read() {
        Ok(rows) => {
            for (id, status) in rows {
                if let Err(e) = status.parse::<RunStatus>() {
                    report.problems.push(Problem {
                        table: "runs",
                        id: Some(id),
                        error: format!("its status column: {e}"),
                    });
                }
            }
        }
        Err(e) => report.problems.push(Problem {
            table: "runs",
            id: None,
            error: e.to_string(),
        }),
    }
}
