//! [`Sql`] on PostgreSQL: a small pool of connections to one database,
//! each keeping its prepared statements.
//!
//! The client is `postgres`, the synchronous one: it blocks, like
//! rusqlite, so a store calls it from blocking threads, never from a task
//! of the async runtime (its client drives its own runtime inside).

use std::collections::HashMap;
use std::error::Error as _;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use postgres::error::SqlState;
use postgres::types::{IsNull, ToSql, Type};
use postgres::{Client, GenericClient, NoTls, Statement};

use super::{Arg, Row, Sql, SqlError, SqlErrorKind, numbered_dollars};
use crate::StoreError;

pub use super::pg_common::redact;
pub(crate) use super::pg_common::{DEFAULT_CONNECTIONS, off_runtime};

/// The advisory lock every write transaction takes first, so write
/// transactions on one database never interleave, as with SQLite's one
/// writer. Its value is "hane" in ASCII.
const WRITE_LOCK: i64 = 0x6861_6e65;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection and the statements prepared on it, by their SQL.
struct Conn {
    client: Client,
    statements: HashMap<String, Statement>,
}

/// Connections to one database, opened as needed up to a cap and kept
/// for reuse; one found closed is dropped and replaced.
pub(crate) struct Pool {
    config: postgres::Config,
    target: String,
    max: usize,
    state: Mutex<PoolState>,
    freed: Condvar,
}

struct PoolState {
    idle: Vec<Conn>,
    open: usize,
}

impl Pool {
    /// A pool for the database `url` names (`postgres://user@host:port/db`,
    /// or PostgreSQL's `key=value` form), keeping up to `max` connections.
    /// Opens one, so a wrong address or refused login is known now.
    /// Blocking.
    pub(crate) fn connect(url: &str, max: usize) -> Result<Self, StoreError> {
        let mut config: postgres::Config = url.parse().map_err(|e| {
            StoreError::Database(format!(
                "`{}` is not a PostgreSQL address: {e}",
                redact(url)
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("hane");
        let pool = Self {
            target: target(&config),
            config,
            max: max.max(1),
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
        };
        let conn = pool.take()?;
        pool.put(conn);
        Ok(pool)
    }

    /// `host:port/database`, never a password: for messages.
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    fn take(&self) -> Result<Conn, StoreError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            while let Some(conn) = state.idle.pop() {
                if !conn.client.is_closed() {
                    return Ok(conn);
                }
                state.open -= 1;
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return match self.config.connect(NoTls) {
                    Ok(client) => Ok(Conn {
                        client,
                        statements: HashMap::new(),
                    }),
                    Err(e) => {
                        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                        state.open -= 1;
                        self.freed.notify_one();
                        Err(StoreError::Database(format!(
                            "connecting to PostgreSQL at {}: {}",
                            self.target,
                            describe(&e)
                        )))
                    }
                };
            }
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn put(&self, conn: Conn) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if conn.client.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        self.freed.notify_one();
    }

    /// Runs `f` on a connection, each statement committing by itself.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut dyn Sql) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.take()?;
        let Conn { client, statements } = &mut conn;
        let value = f(&mut Pg { client, statements });
        self.put(conn);
        value
    }

    /// Runs `f` in a transaction holding the write lock; commits when it
    /// returns `Ok`, rolls back otherwise.
    pub(crate) fn write<T, E>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        self.transact(true, f)
    }

    /// As [`Pool::write`] without the write lock: for a transaction that
    /// locks the rows it changes itself, so that transactions on other
    /// rows go on at once.
    pub(crate) fn write_rows<T, E>(
        &self,
        f: impl FnOnce(&mut dyn Sql) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        self.transact(false, f)
    }

    fn transact<T, E>(
        &self,
        lock: bool,
        f: impl FnOnce(&mut dyn Sql) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let mut conn = self.take()?;
        let done = (|| {
            let Conn { client, statements } = &mut conn;
            let what = |e: postgres::Error| {
                StoreError::Database(format!("a transaction on PostgreSQL: {}", describe(&e)))
            };
            let mut tx = client.transaction().map_err(what)?;
            if lock {
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK])
                    .map_err(what)?;
            }
            let value = f(&mut Pg {
                client: &mut tx,
                statements,
            })?;
            tx.commit().map_err(what)?;
            Ok(value)
        })();
        // A transaction that failed was rolled back when dropped.
        self.put(conn);
        done
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // A client blocks on its own runtime as it closes, which panics on
        // a thread driving a runtime: the last handle to a store may well
        // be dropped in an async task. So they close on a thread of their
        // own.
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let idle = std::mem::take(&mut state.idle);
        if !idle.is_empty() {
            let closing = std::thread::spawn(move || drop(idle));
            let _ = closing.join();
        }
    }
}

/// `host:port/database` of `config`.
fn target(config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(host)) => host.clone(),
        Some(postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// A client error as one line: the server's code and message when the
/// server said something, else the client's own words.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => match e.source() {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

fn pg_error(e: postgres::Error) -> SqlError {
    let kind = if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
        SqlErrorKind::Unique
    } else {
        SqlErrorKind::Other
    };
    SqlError {
        kind,
        message: describe(&e),
    }
}

/// A connection or transaction with its connection's statements.
struct Pg<'a, C: GenericClient> {
    client: &'a mut C,
    statements: &'a mut HashMap<String, Statement>,
}

impl<C: GenericClient> Pg<'_, C> {
    fn statement(&mut self, sql: &str) -> Result<Statement, SqlError> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self
            .client
            .prepare(&numbered_dollars(sql))
            .map_err(pg_error)?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

impl<C: GenericClient> Sql for Pg<'_, C> {
    fn batch(&mut self, sql: &str) -> Result<(), SqlError> {
        self.client.batch_execute(sql).map_err(pg_error)
    }

    fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, SqlError> {
        let statement = self.statement(sql)?;
        let args: Vec<PgArg<'_>> = args.iter().map(|arg| PgArg(*arg)).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as _).collect();
        self.client.execute(&statement, &refs).map_err(pg_error)
    }

    fn each(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        each: &mut dyn FnMut(&dyn Row) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        let statement = self.statement(sql)?;
        let args: Vec<PgArg<'_>> = args.iter().map(|arg| PgArg(*arg)).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as _).collect();
        for row in self.client.query(&statement, &refs).map_err(pg_error)? {
            each(&PgRow(row))?;
        }
        Ok(())
    }
}

/// An [`Arg`] as PostgreSQL takes it: an integer for any integer column
/// that holds it, text for text, bytes for `BYTEA`, and a null of any
/// type.
#[derive(Debug)]
struct PgArg<'a>(Arg<'a>);

impl ToSql for PgArg<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self.0 {
            Arg::Int(value) => match *ty {
                Type::INT2 => i16::try_from(value)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(value)?.to_sql(ty, out),
                Type::BOOL => (value != 0).to_sql(ty, out),
                _ => value.to_sql(ty, out),
            },
            Arg::Text(value) => value.to_sql(ty, out),
            Arg::Blob(value) => value.to_sql(ty, out),
            Arg::Null => Ok(IsNull::Yes),
        }
    }

    fn accepts(_: &Type) -> bool {
        // Checked per value in `to_sql_checked`, below.
        true
    }

    fn to_sql_checked(
        &self,
        ty: &Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let fits = match self.0 {
            Arg::Int(_) => matches!(*ty, Type::INT2 | Type::INT4 | Type::INT8 | Type::BOOL),
            Arg::Text(_) => <&str as ToSql>::accepts(ty),
            Arg::Blob(_) => <&[u8] as ToSql>::accepts(ty),
            Arg::Null => true,
        };
        if !fits {
            return Err(format!("a {:?} argument for a parameter of type {ty}", self.0).into());
        }
        self.to_sql(ty, out)
    }
}

struct PgRow(postgres::Row);

impl PgRow {
    fn get<'a, T: postgres::types::FromSql<'a>>(&'a self, index: usize) -> Result<T, SqlError> {
        self.0
            .try_get(index)
            .map_err(|e| SqlError::column(index, describe(&e)))
    }
}

impl Row for PgRow {
    fn int(&self, index: usize) -> Result<i64, SqlError> {
        self.opt_int(index)?
            .ok_or_else(|| SqlError::column(index, "NULL where an integer was expected"))
    }

    fn opt_int(&self, index: usize) -> Result<Option<i64>, SqlError> {
        let ty = self
            .0
            .columns()
            .get(index)
            .map(|c| c.type_().clone())
            .ok_or_else(|| SqlError::column(index, "no such column"))?;
        Ok(match ty {
            Type::INT2 => self.get::<Option<i16>>(index)?.map(i64::from),
            Type::INT4 => self.get::<Option<i32>>(index)?.map(i64::from),
            Type::BOOL => self.get::<Option<bool>>(index)?.map(i64::from),
            _ => self.get::<Option<i64>>(index)?,
        })
    }

    fn text(&self, index: usize) -> Result<String, SqlError> {
        self.get(index)
    }

    fn opt_text(&self, index: usize) -> Result<Option<String>, SqlError> {
        self.get(index)
    }

    fn blob(&self, index: usize) -> Result<Vec<u8>, SqlError> {
        self.get(index)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::sql::{Engine, Query, args};

    /// What both engines must do alike: every kind of argument stored and
    /// read back, nulls compared, a unique refusal named as one, and a
    /// failed write transaction leaving nothing.
    pub(crate) fn round_trip(engine: &Engine) {
        let bytes = match engine {
            Engine::Sqlite(_) => "BLOB",
            Engine::Postgres(_) => "BYTEA",
        };
        engine
            .read(|db| {
                db.execute(
                    &format!(
                        "CREATE TABLE items (id TEXT PRIMARY KEY, n BIGINT NOT NULL,
                                             note TEXT, body {bytes} NOT NULL)"
                    ),
                    &[],
                )
                .map_err(crate::sql::failed("making a table"))
            })
            .unwrap();
        let body = vec![0u8, 1, 255];
        engine
            .write(|db| {
                for (id, n, note) in [("a", -5_i64, Some("x")), ("b", i64::MAX, None)] {
                    db.execute(
                        "INSERT INTO items (id, n, note, body) VALUES (?1, ?2, ?3, ?4)",
                        args![id, n, note, &body],
                    )
                    .map_err(crate::sql::failed("inserting"))?;
                }
                Ok::<_, StoreError>(())
            })
            .unwrap();
        let read = engine
            .read(|db| {
                db.rows(
                    "SELECT id, n, note, body FROM items WHERE note IS NOT DISTINCT FROM ?1
                        OR n > ?2 ORDER BY id",
                    args![None::<&str>, 0_i64],
                    |row| Ok((row.text(0)?, row.int(1)?, row.opt_text(2)?, row.blob(3)?)),
                )
                .map_err(crate::sql::failed("reading"))
            })
            .unwrap();
        assert_eq!(read, vec![("b".to_owned(), i64::MAX, None, body.clone())]);
        let again = engine.read(|db| {
            Ok(db.execute(
                "INSERT INTO items (id, n, body) VALUES (?1, 1, ?2)",
                args!["a", &body],
            ))
        });
        assert_eq!(again.unwrap().unwrap_err().kind, SqlErrorKind::Unique);
        let failed: Result<(), StoreError> = engine.write(|db| {
            db.execute("DELETE FROM items", &[])
                .map_err(crate::sql::failed("deleting"))?;
            Err(StoreError::Database("changed my mind".into()))
        });
        assert!(failed.is_err());
        let count = engine
            .read(|db| {
                db.row("SELECT COUNT(*) FROM items", &[], |row| row.int(0))
                    .map_err(crate::sql::failed("counting"))
            })
            .unwrap();
        assert_eq!(count, Some(2), "a rolled-back delete deleted nothing");
    }

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redact("postgres://hane:s3cret@db.example:5432/hane"),
            "postgres://hane:***@db.example:5432/hane"
        );
        assert_eq!(
            redact("host=db user=hane password=s3cret dbname=hane"),
            "host=db user=hane password=*** dbname=hane"
        );
        assert_eq!(
            redact("postgres://hane@db.example/hane"),
            "postgres://hane@db.example/hane"
        );
    }

    #[test]
    fn postgres_reads_what_it_wrote_and_names_a_unique_refusal() {
        let db = hane_test_support::postgres::database();
        let engine = Engine::Postgres(Arc::new(Pool::connect(&db.url, 4).unwrap()));
        round_trip(&engine);
    }

    #[test]
    fn write_transactions_on_postgres_never_interleave() {
        // Eight threads each add one to a counter a hundred times, each in
        // a write transaction that reads, waits, then writes: interleaved,
        // increments would be lost.
        let db = hane_test_support::postgres::database();
        let engine = Engine::Postgres(Arc::new(Pool::connect(&db.url, 8).unwrap()));
        engine
            .read(|db| {
                let make = crate::sql::failed("making the counter");
                db.execute("CREATE TABLE counter (n BIGINT NOT NULL)", &[])
                    .map_err(&make)?;
                db.execute("INSERT INTO counter VALUES (0)", &[])
                    .map_err(&make)
            })
            .unwrap();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..100 {
                        engine
                            .write(|db| {
                                let n = db
                                    .row("SELECT n FROM counter", &[], |row| row.int(0))
                                    .map_err(crate::sql::failed("reading"))?
                                    .unwrap();
                                std::thread::yield_now();
                                db.execute("UPDATE counter SET n = ?1", args![n + 1])
                                    .map_err(crate::sql::failed("writing"))?;
                                Ok::<_, StoreError>(())
                            })
                            .unwrap();
                    }
                });
            }
        });
        let n = engine
            .read(|db| {
                db.row("SELECT n FROM counter", &[], |row| row.int(0))
                    .map_err(crate::sql::failed("reading"))
            })
            .unwrap();
        assert_eq!(n, Some(800));
    }

    #[test]
    fn a_wrong_address_is_named_without_its_password() {
        let Err(e) = Pool::connect("postgres://hane:s3cret@127.0.0.1:1/hane", 1) else {
            panic!("nothing listens on port 1");
        };
        let message = e.to_string();
        assert!(message.contains("127.0.0.1:1/hane"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
        let Err(e) = Pool::connect("postgres://hane:s3cret@[::1", 1) else {
            panic!("not an address");
        };
        let message = e.to_string();
        assert!(message.contains("is not a PostgreSQL address"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
    }
}
