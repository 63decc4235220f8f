//! The database file: how connections are opened, and the schema with its
//! migrations, versioned by `PRAGMA user_version`.

use std::io::{ErrorKind, Read as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::sqlite::Synchronous;
use crate::{NotAStore, StoreError};

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
/// Without PostgreSQL: its databases are refused when opened.
#[cfg(not(feature = "postgres"))]
pub(crate) mod postgres {
    use std::sync::Arc;

    use crate::StoreError;
    use crate::sql::postgres::{Pool, connect};

    /// Refuses `url` (see [`connect`]).
    pub(crate) fn open(url: &str, _connections: usize) -> Result<(Arc<Pool>, bool), StoreError> {
        match connect(url)? {}
    }
}

/// How long a connection waits for a lock another process holds before it
/// reports the database busy.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Pages the log grows to before the writer copies them into the database
/// file (SQLite's default is 1000). Sessions appended to at once each
/// dirty their own page, so a group commit writes one page per session;
/// a longer interval lets a page take many appends before it is copied
/// back once, at the cost of a log of up to 32 MiB.
pub(crate) const CHECKPOINT_PAGES: i32 = 8192;

/// The writer's page cache, in KiB (SQLite's default is 2000): enough for
/// the pages that many sessions appended to at once keep dirty.
const WRITER_CACHE_KIB: i64 = 32 * 1024;

/// Prepared statements each connection keeps; more than the store uses, so
/// none is ever prepared twice.
const STATEMENT_CACHE: usize = 64;

/// The schema, one migration per version: migration `i` takes a file from
/// version `i` to `i + 1`. Only ever append to this list.
const MIGRATIONS: &[&str] = &[
    // Version 1. Sessions have an integer key (`sid`) so that events and
    // inputs are keyed by integers, not by 30-byte ids. A fork stores its
    // parent and how many of the parent's events it shares; the prefix is
    // never copied. Events are `seal`ed blobs clustered by (session, seq).
    "CREATE TABLE sessions (
        sid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        parent INTEGER REFERENCES sessions (sid),
        fork_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE events (
        session INTEGER NOT NULL REFERENCES sessions (sid),
        seq INTEGER NOT NULL,
        at_ms INTEGER NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (session, seq)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE inputs (
        session INTEGER NOT NULL REFERENCES sessions (sid),
        input TEXT NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (session, input)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE operations (
        oid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        session INTEGER NOT NULL REFERENCES sessions (sid),
        impact TEXT NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        body BLOB NOT NULL
    ) STRICT;
    -- Recovery asks for the few pending and running operations among many
    -- finished ones.
    CREATE INDEX operations_by_state ON operations (state);",
    // Version 2: what the registry keeps beside sessions. Components by
    // digest, so a release stays runnable after its files change; numbered
    // releases with one active; agent runs, tasks for people, API keys
    // (only their SHA-256). Bodies are `seal`ed by their owners.
    "CREATE TABLE components (
        digest TEXT PRIMARY KEY,
        bytes BLOB NOT NULL
    ) STRICT;
    CREATE TABLE releases (
        number INTEGER PRIMARY KEY,
        created_at INTEGER NOT NULL,
        source TEXT NOT NULL,
        summary TEXT NOT NULL,
        body BLOB NOT NULL
    ) STRICT;
    CREATE TABLE active_release (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        number INTEGER NOT NULL REFERENCES releases (number),
        activated_at INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        body BLOB NOT NULL
    ) STRICT;
    CREATE INDEX runs_by_created ON runs (created_at);
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        run TEXT NOT NULL,
        kind TEXT NOT NULL,
        assignment TEXT NOT NULL,
        state TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        body BLOB NOT NULL
    ) STRICT;
    CREATE TABLE api_keys (
        hash TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        role TEXT NOT NULL,
        created_at INTEGER NOT NULL
    ) STRICT;",
    // Version 3: outbound actions and what limits them. An action's row is
    // its ledger entry: `state` and `owner` (the process executing it) are
    // columns so a claim is one guarded update; the rest is its `seal`ed
    // body. Decider overrides by tool; per-day usage and alerts of the
    // budget of a project and environment (`scope`).
    "CREATE TABLE actions (
        id TEXT PRIMARY KEY,
        run TEXT NOT NULL,
        tool TEXT NOT NULL,
        state TEXT NOT NULL,
        owner TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        body BLOB NOT NULL
    ) STRICT;
    CREATE INDEX actions_by_state ON actions (state, created_at);
    CREATE TABLE decider_overrides (
        tool TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE budget_usage (
        day TEXT NOT NULL,
        scope TEXT NOT NULL,
        runs INTEGER NOT NULL,
        actions INTEGER NOT NULL,
        tokens_used INTEGER NOT NULL,
        tokens_reserved INTEGER NOT NULL,
        PRIMARY KEY (day, scope)
    ) STRICT;
    CREATE TABLE budget_alerts (
        day TEXT NOT NULL,
        scope TEXT NOT NULL,
        name TEXT NOT NULL,
        used INTEGER NOT NULL,
        limit_value INTEGER NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (day, scope, name)
    ) STRICT;",
    // Version 4: the assignment groups an API key decides outbound actions
    // for, one per line; NULL for every group (keys made before).
    "ALTER TABLE api_keys ADD COLUMN groups TEXT;",
    // Version 5: conversations of the built-in chat and their entries in
    // order (a person's message and the run it started, or a saved
    // memory). Bodies are `seal`ed by their owners; what a run did stays
    // in the run, its session and the ledger.
    "CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        body BLOB NOT NULL
    ) STRICT;
    CREATE INDEX conversations_by_updated ON conversations (updated_at);
    CREATE TABLE conversation_entries (
        conversation TEXT NOT NULL REFERENCES conversations (id),
        seq INTEGER NOT NULL,
        at INTEGER NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (conversation, seq)
    ) STRICT, WITHOUT ROWID;",
    // Version 6: requests reception answered (free text, the shortlist,
    // the model's choice and what came of it), the body `seal`ed by its
    // owner; `run` is the run it started, if any.
    "CREATE TABLE receptions (
        id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        run TEXT,
        body BLOB NOT NULL
    ) STRICT;
    CREATE INDEX receptions_by_created ON receptions (created_at);",
    // Version 7: evaluations of EvalSuites, the body `seal`ed by its
    // owner; `release` is the release whose definitions ran.
    "CREATE TABLE evaluations (
        id TEXT PRIMARY KEY,
        suite TEXT NOT NULL,
        release INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        body BLOB NOT NULL
    ) STRICT;
    CREATE INDEX evaluations_by_suite ON evaluations (suite, created_at);",
    // Version 8: workflow cases (the body `seal`ed by its owner; `status`
    // and `updated_at` for finding the cases to resume) and schedule
    // ticks, one row per tick of a schedule that some process handled:
    // the primary key is what makes a tick start once across processes.
    "CREATE TABLE workflow_cases (
        id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        body BLOB NOT NULL
    ) STRICT;
    CREATE INDEX workflow_cases_by_status ON workflow_cases (status, updated_at);
    CREATE TABLE schedule_ticks (
        schedule TEXT NOT NULL,
        tick INTEGER NOT NULL,
        claimed_at INTEGER NOT NULL,
        claimed_by TEXT NOT NULL,
        outcome TEXT NOT NULL,
        run TEXT,
        workflow_case TEXT,
        error TEXT,
        PRIMARY KEY (schedule, tick)
    ) STRICT, WITHOUT ROWID;",
    // Version 9: leases. Each process that runs anything holds one,
    // renewed while it lives; a run names the lease it is held under, and
    // an action being delivered names its deliverer's. A lease past its
    // expiry (or gone) is a dead holder: its runs are taken over and its
    // deliveries become `unknown`. Runs stored before this version hold
    // none, which counts as a dead holder too: no older process writes to
    // a store of this version.
    "CREATE TABLE leases (
        holder TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        acquired_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    ) STRICT;
    ALTER TABLE runs ADD COLUMN holder TEXT;
    CREATE INDEX runs_live ON runs (status) WHERE status IN ('queued', 'running');",
    // Version 10: the count of write transactions committed, one more per
    // transaction, which the mark beside the file is checked against (see
    // `mark`).
    "CREATE TABLE commit_mark (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        n INTEGER NOT NULL
    ) STRICT;
    INSERT INTO commit_mark (one, n) VALUES (1, 0);",
];

/// The newest schema version this build reads and writes.
pub(crate) const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// The length of a SQLite database file's header.
const HEADER_LEN: usize = 100;

/// What is at a store's path before SQLite opens it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Nothing: a new store may be made there.
    Nothing,
    /// A SQLite database file, whole as far as its length tells.
    Database,
}

/// Looks at what is at `path` before SQLite opens it: SQLite takes an
/// empty file, or a missing one, for a new database, and a mistyped path
/// or a truncated store would silently become an empty store.
///
/// # Errors
///
/// [`StoreError::NotAStore`] for anything but nothing or a SQLite
/// database; [`StoreError::Database`] when the path cannot be read.
pub(crate) fn inspect(path: &Path) -> Result<Found, StoreError> {
    let unreadable =
        |e: std::io::Error| StoreError::Database(format!("reading {}: {e}", path.display()));
    let not_a_store = |problem| {
        Err(StoreError::NotAStore {
            path: path.to_owned(),
            problem,
        })
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return match std::fs::metadata(sibling(path, "-wal")) {
                Ok(_) => not_a_store(NotAStore::StrayLog),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(Found::Nothing),
                Err(e) => Err(unreadable(e)),
            };
        }
        Err(e) => return Err(unreadable(e)),
    };
    if meta.is_dir() {
        return not_a_store(NotAStore::Directory);
    }
    if meta.len() == 0 {
        return not_a_store(NotAStore::Empty);
    }
    let mut header = Vec::with_capacity(HEADER_LEN);
    std::fs::File::open(path)
        .and_then(|file| file.take(HEADER_LEN as u64).read_to_end(&mut header))
        .map_err(unreadable)?;
    if !header.starts_with(SQLITE_HEADER) {
        return not_a_store(NotAStore::NotSqlite);
    }
    let truncated = NotAStore::Truncated { len: meta.len() };
    if header.len() < HEADER_LEN {
        return not_a_store(truncated);
    }
    // A power of two from 512 to 32768, or 1 for 65536.
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65536,
        n if n >= 512 && n.is_power_of_two() => u64::from(n),
        _ => return not_a_store(NotAStore::NotSqlite),
    };
    // SQLite writes whole pages only.
    if meta.len() % page_size != 0 {
        return not_a_store(truncated);
    }
    Ok(Found::Database)
}

/// `path` with `suffix` added to its file name, as SQLite names the log
/// (`-wal`) and shared memory (`-shm`) beside a database.
pub(crate) fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Makes a new store at `path`, where nothing was: the schema is written
/// to a file beside it, which is then linked to `path`, so no process ever
/// finds a store half made (an empty file at `path` is refused as not a
/// store). False when another process made one there first.
fn create(path: &Path, synchronous: Synchronous) -> Result<bool, StoreError> {
    let failed = |doing: &str, e: &dyn std::fmt::Display| {
        StoreError::Database(format!(
            "making a new store at {}: {doing}: {e}",
            path.display()
        ))
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| failed("the path", &"it names no file"))?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let new = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".new")
        .tempfile_in(dir)
        .map_err(|e| failed(&format!("making a file in {}", dir.display()), &e))?
        .into_temp_path();
    let made = (|| {
        let mut conn = connect(&new)?;
        configure(&mut conn, path, synchronous)?;
        migrate(&mut conn, path)?;
        // Closing the last connection copies the log into the file and
        // removes it, so the file linked into place holds everything.
        conn.close()
            .map_err(|(_, e)| failed("closing the new file", &e))?;
        match std::fs::hard_link(&new, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(failed(&format!("linking {}", new.display()), &e)),
        }
    })();
    for suffix in ["-wal", "-shm"] {
        // Left only when the new file failed to close.
        drop(std::fs::remove_file(sibling(&new, suffix)));
    }
    drop(new);
    let made = made?;
    if made {
        crate::mark::reset(path)?;
    }
    if made && synchronous != Synchronous::Off {
        // The link is durable once its directory is.
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| failed(&format!("syncing {}", dir.display()), &e))?;
    }
    Ok(made)
}

/// Opens the writer's connection: refuses anything but a hane store of
/// this version or older (making a new one where nothing is), turns on
/// WAL and the configured synchronous mode, and migrates the schema to
/// [`SCHEMA_VERSION`]. True with it when this call made the store.
pub(crate) fn open_writer(
    path: &Path,
    synchronous: Synchronous,
) -> Result<(Connection, bool), StoreError> {
    let created = match inspect(path)? {
        Found::Nothing => create(path, synchronous)?,
        Found::Database => false,
    };
    let mut conn = connect(path)?;
    // Checked before anything is written, WAL mode included.
    refuse_foreign(&conn, path)?;
    crate::mark::refuse_damaged(&conn, path)?;
    configure(&mut conn, path, synchronous)?;
    migrate(&mut conn, path)?;
    Ok((conn, created))
}

/// Sets a writer's connection up: WAL, the synchronous mode, and the rest.
fn configure(
    conn: &mut Connection,
    path: &Path,
    synchronous: Synchronous,
) -> Result<(), StoreError> {
    let failed = |doing: &'static str| {
        move |e: rusqlite::Error| StoreError::Database(format!("{doing} {}: {e}", path.display()))
    };
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(failed("turning on WAL mode for"))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Database(format!(
            "the journal mode of {} stayed `{mode}`: the store needs WAL",
            path.display()
        )));
    }
    conn.pragma_update(None, "synchronous", synchronous.pragma())
        .map_err(failed("setting the synchronous mode of"))?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(failed("turning on foreign keys in"))?;
    // The writer checkpoints after answering a group, not inside its
    // commit: see `Writer::checkpoint`.
    conn.pragma_update(None, "wal_autocheckpoint", 0)
        .map_err(failed("setting the checkpoint interval of"))?;
    conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)
        .map_err(failed("setting the page cache of"))?;
    // Savepoints keep the pages they change in a statement journal; in
    // memory it costs no file writes.
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(failed("setting the temporary storage of"))?;
    Ok(())
}

/// Opens a reader's connection. Readers never write: WAL lets them read a
/// committed snapshot while the writer commits.
pub(crate) fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = connect(path)?;
    conn.pragma_update(None, "query_only", true)
        .map_err(|e| StoreError::Database(format!("opening {}: {e}", path.display())))?;
    Ok(conn)
}

/// Opens the database file at `path`, which must exist: a connection
/// never makes a file (only [`create`] does, whole).
pub(crate) fn connect(path: &Path) -> Result<Connection, StoreError> {
    let failed =
        |e: rusqlite::Error| StoreError::Database(format!("opening {}: {e}", path.display()));
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(failed)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(failed)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

fn user_version(conn: &Connection, path: &Path) -> Result<u32, StoreError> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|e| match e.sqlite_error_code() {
            // A file that starts like a database but is not one.
            Some(rusqlite::ErrorCode::NotADatabase) => StoreError::NotAStore {
                path: path.to_owned(),
                problem: NotAStore::NotSqlite,
            },
            _ => StoreError::Database(format!("opening {}: {e}", path.display())),
        })
}

fn refuse_newer(conn: &Connection, path: &Path) -> Result<u32, StoreError> {
    let found = user_version(conn, path)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(found)
}

/// Refuses a newer schema, and a database that is not a hane store: every
/// store has a schema version, set in the transaction that made its
/// tables, and the sessions of version 1. Returns the version.
pub(crate) fn refuse_foreign(conn: &Connection, path: &Path) -> Result<u32, StoreError> {
    let found = refuse_newer(conn, path)?;
    let sessions: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sessions')",
            [],
            |row| row.get(0),
        )
        .map_err(|e| StoreError::Database(format!("opening {}: {e}", path.display())))?;
    if found == 0 || !sessions {
        return Err(StoreError::NotAStore {
            path: path.to_owned(),
            problem: NotAStore::ForeignDatabase,
        });
    }
    Ok(found)
}

/// Applies the missing migrations in one transaction, so a file is at one
/// version or the next, never between.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let failed = |e: rusqlite::Error| {
        StoreError::Database(format!("migrating the schema of {}: {e}", path.display()))
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(failed)?;
    // Read again under the write lock: another process may have migrated.
    let found = refuse_newer(&tx, path)?;
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    for migration in &MIGRATIONS[found as usize..] {
        tx.execute_batch(migration).map_err(failed)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(failed)?;
    tx.commit().map_err(failed)
}
