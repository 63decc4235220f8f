//! One way to write a statement for both engines a store can live on:
//! SQLite (the embedded default) and PostgreSQL (several processes on one
//! store).
//!
//! A statement is written once, in the SQL both engines read, with
//! numbered placeholders `?1`, `?2`, …; [`postgres`] turns them into `$1`,
//! `$2`, …. Its arguments are [`Arg`]s and its rows are read through
//! [`Row`], so the code that stores and reads an item is the same on both.
//! What the two read alike, and so what statements keep to:
//!
//! - integers are `BIGINT` (i64), text `TEXT`, bytes `BLOB`/`BYTEA`;
//!   flags are integers 0 and 1;
//! - `INSERT … ON CONFLICT … DO NOTHING | DO UPDATE`, `RETURNING`;
//! - `IS NOT DISTINCT FROM ?N` to compare with what may be `NULL`;
//! - a placeholder whose type nothing else in the statement fixes is
//!   written `CAST(?N AS BIGINT)` or `CAST(?N AS TEXT)`.
//!
//! A write transaction ([`Engine::write`]) is never interleaved with
//! another write transaction on the same store, from this process or any
//! other: SQLite takes its one write lock at the start (`BEGIN
//! IMMEDIATE`), PostgreSQL a transaction-scoped advisory lock. So a read,
//! a check and a write in one transaction see no one else's write between
//! them on either engine.

use std::fmt;
use std::sync::{Arc, Mutex};

mod pg_common;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(not(feature = "postgres"))]
#[path = "sql/without_postgres.rs"]
pub(crate) mod postgres;

use crate::StoreError;
use crate::mark::Mark;

/// One argument of a statement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Arg<'a> {
    Int(i64),
    Text(&'a str),
    Blob(&'a [u8]),
    Null,
}

impl From<i64> for Arg<'_> {
    fn from(value: i64) -> Self {
        Arg::Int(value)
    }
}

impl From<u32> for Arg<'_> {
    fn from(value: u32) -> Self {
        Arg::Int(i64::from(value))
    }
}

impl From<bool> for Arg<'_> {
    fn from(value: bool) -> Self {
        Arg::Int(i64::from(value))
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(value: &'a str) -> Self {
        Arg::Text(value)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(value: &'a String) -> Self {
        Arg::Text(value)
    }
}

impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(value: &'a [u8]) -> Self {
        Arg::Blob(value)
    }
}

impl<'a> From<&'a Vec<u8>> for Arg<'a> {
    fn from(value: &'a Vec<u8>) -> Self {
        Arg::Blob(value)
    }
}

impl<'a, T> From<Option<T>> for Arg<'a>
where
    T: Into<Arg<'a>>,
{
    fn from(value: Option<T>) -> Self {
        value.map_or(Arg::Null, Into::into)
    }
}

/// The arguments of a statement, each converted to an [`Arg`]:
/// `args![id, holder, now]`.
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        &[$($crate::sql::Arg::from($arg)),*][..]
    };
}
pub(crate) use args;

/// What went wrong with a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SqlError {
    pub kind: SqlErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SqlErrorKind {
    /// A unique or primary key constraint refused a row.
    Unique,
    /// A column held what the reader did not expect.
    Column,
    /// Anything else: the engine or the connection failed.
    Other,
}

impl SqlError {
    pub(crate) fn column(index: usize, message: impl fmt::Display) -> Self {
        Self {
            kind: SqlErrorKind::Column,
            message: format!("column {index}: {message}"),
        }
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// `what` failed: a [`StoreError::Database`] saying so.
pub(crate) fn failed(what: &'static str) -> impl Fn(SqlError) -> StoreError {
    move |e| StoreError::Database(format!("{what}: {e}"))
}

/// A row of a query's answer, read by column index from 0.
pub(crate) trait Row {
    fn int(&self, index: usize) -> Result<i64, SqlError>;
    fn opt_int(&self, index: usize) -> Result<Option<i64>, SqlError>;
    fn text(&self, index: usize) -> Result<String, SqlError>;
    fn opt_text(&self, index: usize) -> Result<Option<String>, SqlError>;
    fn blob(&self, index: usize) -> Result<Vec<u8>, SqlError>;
}

/// A connection, or a transaction on one.
pub(crate) trait Sql {
    /// Runs `sql`; the number of rows it changed.
    fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, SqlError>;

    /// Runs `sql`, one or more statements without arguments, such as a
    /// schema's migration.
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "only PostgreSQL's migrations run batches")
    )]
    fn batch(&mut self, sql: &str) -> Result<(), SqlError>;

    /// Runs `sql` and gives `each` its rows in order.
    fn each(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        each: &mut dyn FnMut(&dyn Row) -> Result<(), SqlError>,
    ) -> Result<(), SqlError>;
}

/// Reading rows with `read`, on any [`Sql`].
pub(crate) trait Query: Sql {
    /// Every row.
    fn rows<T>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        read: impl Fn(&dyn Row) -> Result<T, SqlError>,
    ) -> Result<Vec<T>, SqlError> {
        let mut rows = Vec::new();
        self.each(sql, args, &mut |row| {
            rows.push(read(row)?);
            Ok(())
        })?;
        Ok(rows)
    }

    /// The first row, if there is one.
    fn row<T>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        read: impl Fn(&dyn Row) -> Result<T, SqlError>,
    ) -> Result<Option<T>, SqlError> {
        let mut first = None;
        self.each(sql, args, &mut |row| {
            if first.is_none() {
                first = Some(read(row)?);
            }
            Ok(())
        })?;
        Ok(first)
    }
}

impl<S: Sql + ?Sized> Query for S {}

/// A store's database: the engine and its connections.
#[derive(Clone)]
pub(crate) enum Engine {
    /// One SQLite connection, shared by the clones.
    Sqlite(Arc<Mutex<LiteDb>>),
    /// A pool of connections to one PostgreSQL database.
    Postgres(Arc<postgres::Pool>),
}

/// A SQLite connection that writes, with the store's commit mark and the
/// synchronous mode it was opened in.
pub(crate) struct LiteDb {
    pub(crate) conn: rusqlite::Connection,
    /// `None` for a database without the commit count (tests only).
    pub(crate) mark: Option<Mark>,
    pub(crate) synchronous: crate::Synchronous,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Engine::Sqlite(_) => f.write_str("Engine::Sqlite"),
            Engine::Postgres(pool) => write!(f, "Engine::Postgres({})", pool.target()),
        }
    }
}

impl Engine {
    /// Runs `f` on a connection, outside any transaction: each statement
    /// commits by itself. Blocking.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&mut dyn Sql) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match self {
            Engine::Sqlite(db) => {
                let db = db.lock().unwrap_or_else(|e| e.into_inner());
                f(&mut Lite(&db.conn))
            }
            Engine::Postgres(pool) => pool.with(|conn| f(conn)),
        }
    }

    /// Runs `f` in one write transaction, committed when it returns `Ok`
    /// and rolled back otherwise; no other write transaction on the store
    /// interleaves with it. Blocking.
    pub(crate) fn write<T, E>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self {
            Engine::Sqlite(db) => {
                let mut db = db.lock().unwrap_or_else(|e| e.into_inner());
                let synced = db.synchronous == crate::Synchronous::Full;
                sqlite_write(&mut db, synced, f)
            }
            Engine::Postgres(pool) => pool.write(f),
        }
    }
}

impl Engine {
    /// As [`Engine::write`], for a transaction that locks the rows it
    /// changes itself (`SELECT … FOR UPDATE`): on PostgreSQL it does not
    /// wait for other write transactions, only for those on its rows; on
    /// SQLite, which locks the whole file, it is [`Engine::write`].
    pub(crate) fn write_rows<T, E>(
        &self,
        f: impl FnOnce(&mut dyn Sql) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        match self {
            Engine::Sqlite(_) => self.write(f),
            Engine::Postgres(pool) => pool.write_rows(f),
        }
    }

    /// As [`Engine::write`], with the commit synced to disk when `synced`
    /// whatever the connection's own mode (SQLite); on PostgreSQL every
    /// commit is durable and this is [`Engine::write`].
    pub(crate) fn write_synced<T, E>(
        &self,
        synced: bool,
        f: impl FnOnce(&mut dyn Sql) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let Engine::Sqlite(db) = self else {
            return self.write(f);
        };
        let mut db = db.lock().unwrap_or_else(|e| e.into_inner());
        let base = db.synchronous;
        if !synced || base == crate::Synchronous::Full {
            return sqlite_write(&mut db, base == crate::Synchronous::Full, f);
        }
        // Set and restored under the same hold of the connection, so no
        // other transaction commits in the raised mode, nor this one in
        // the base mode.
        let set = |conn: &rusqlite::Connection, to: crate::Synchronous| {
            conn.pragma_update(None, "synchronous", to.pragma())
                .map_err(|e| StoreError::Database(format!("setting the synchronous mode: {e}")))
        };
        set(&db.conn, crate::Synchronous::Full)?;
        let done = sqlite_write(&mut db, true, f);
        set(&db.conn, base)?;
        done
    }
}

/// One `IMMEDIATE` transaction on `db` running `f`. A transaction that
/// changed something is counted in the database; once it is committed,
/// and `synced` to disk, the store's mark is advanced to it.
fn sqlite_write<T, E>(
    db: &mut LiteDb,
    synced: bool,
    f: impl FnOnce(&mut dyn Sql) -> Result<T, E>,
) -> Result<T, E>
where
    E: From<StoreError>,
{
    let tx = db
        .conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| StoreError::Database(format!("starting a transaction: {e}")))?;
    let before = tx.total_changes();
    let value = f(&mut Lite(&tx))?;
    let count = if db.mark.is_some() && tx.total_changes() != before {
        let n = crate::mark::count(&tx)
            .map_err(|e| StoreError::Database(format!("counting the commit: {e}")))?;
        Some(n)
    } else {
        None
    };
    tx.commit()
        .map_err(|e| StoreError::Database(format!("committing: {e}")))?;
    if let (true, Some(n), Some(mark)) = (synced, count, db.mark.as_mut()) {
        mark.advance(n);
    }
    Ok(value)
}

/// [`Sql`] on a SQLite connection or transaction.
pub(crate) struct Lite<'a>(pub &'a rusqlite::Connection);

pub(crate) fn lite_error(e: rusqlite::Error) -> SqlError {
    let kind = match &e {
        rusqlite::Error::SqliteFailure(failure, _)
            if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            SqlErrorKind::Unique
        }
        rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnIndex(_) => SqlErrorKind::Column,
        _ => SqlErrorKind::Other,
    };
    SqlError {
        kind,
        message: e.to_string(),
    }
}

fn lite_args<'a>(args: &[Arg<'a>]) -> Vec<rusqlite::types::ToSqlOutput<'a>> {
    use rusqlite::types::{ToSqlOutput, ValueRef};
    args.iter()
        .map(|arg| {
            ToSqlOutput::Borrowed(match *arg {
                Arg::Int(value) => ValueRef::Integer(value),
                Arg::Text(value) => ValueRef::Text(value.as_bytes()),
                Arg::Blob(value) => ValueRef::Blob(value),
                Arg::Null => ValueRef::Null,
            })
        })
        .collect()
}

impl Sql for Lite<'_> {
    fn batch(&mut self, sql: &str) -> Result<(), SqlError> {
        self.0.execute_batch(sql).map_err(lite_error)
    }

    fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, SqlError> {
        let mut stmt = self.0.prepare_cached(sql).map_err(lite_error)?;
        let changed = stmt
            .execute(rusqlite::params_from_iter(lite_args(args)))
            .map_err(lite_error)?;
        Ok(changed as u64)
    }

    fn each(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        each: &mut dyn FnMut(&dyn Row) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        let mut stmt = self.0.prepare_cached(sql).map_err(lite_error)?;
        let mut rows = stmt
            .query(rusqlite::params_from_iter(lite_args(args)))
            .map_err(lite_error)?;
        while let Some(row) = rows.next().map_err(lite_error)? {
            each(&LiteRow(row))?;
        }
        Ok(())
    }
}

struct LiteRow<'a, 'b>(&'a rusqlite::Row<'b>);

impl Row for LiteRow<'_, '_> {
    fn int(&self, index: usize) -> Result<i64, SqlError> {
        self.0.get(index).map_err(lite_error)
    }

    fn opt_int(&self, index: usize) -> Result<Option<i64>, SqlError> {
        self.0.get(index).map_err(lite_error)
    }

    fn text(&self, index: usize) -> Result<String, SqlError> {
        self.0.get(index).map_err(lite_error)
    }

    fn opt_text(&self, index: usize) -> Result<Option<String>, SqlError> {
        self.0.get(index).map_err(lite_error)
    }

    fn blob(&self, index: usize) -> Result<Vec<u8>, SqlError> {
        self.0.get(index).map_err(lite_error)
    }
}

/// `sql` with SQLite's numbered placeholders `?N` written as
/// PostgreSQL's `$N`; quoted text and identifiers are left as they are.
#[cfg_attr(
    not(any(feature = "postgres", test)),
    expect(dead_code, reason = "only PostgreSQL reads `$N`")
)]
pub(crate) fn numbered_dollars(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    out.push(c);
                }
                '?' if chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
                _ => out.push(c),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars_outside_quotes() {
        assert_eq!(
            numbered_dollars("SELECT a FROM t WHERE b = ?1 AND c IS NOT DISTINCT FROM ?12"),
            "SELECT a FROM t WHERE b = $1 AND c IS NOT DISTINCT FROM $12"
        );
        assert_eq!(
            numbered_dollars("SELECT '?1', \"?2\" FROM t WHERE x = ?3 AND y = 'it''s ?4'"),
            "SELECT '?1', \"?2\" FROM t WHERE x = $3 AND y = 'it''s ?4'"
        );
        // A lone question mark is not a numbered placeholder.
        assert_eq!(numbered_dollars("SELECT ? + ?x"), "SELECT ? + ?x");
    }

    #[cfg(feature = "postgres")]
    fn sqlite() -> Engine {
        Engine::Sqlite(Arc::new(Mutex::new(LiteDb {
            conn: rusqlite::Connection::open_in_memory().unwrap(),
            mark: None,
            synchronous: crate::Synchronous::Full,
        })))
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn sqlite_reads_what_it_wrote_and_names_a_unique_refusal() {
        postgres::tests::round_trip(&sqlite());
    }
}
