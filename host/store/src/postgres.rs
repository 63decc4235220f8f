//! [`PostgresStore`]: the session store in a PostgreSQL database, which
//! several processes on one machine or many share.
//!
//! The same statements as [`crate::SqliteStore`]'s, in the same tables.
//! Where SQLite has one writer thread committing groups of requests,
//! here each request is a transaction of its own, run on a blocking
//! thread; a request that writes a session first locks that session's
//! row, so writes to one session (an append, a fork of it) take turns
//! across processes while writes to others go on at once, and the
//! server's log flush commits them together.

use hane_core::{SessionEvent, SessionId};

use crate::query::Fail;
use crate::sql::{Engine, Query, Sql, args};
use crate::writer::{self, Prepared};
use crate::{Appended, SessionInfo, SessionStore, StoreError, StoreFuture};

/// The session store on PostgreSQL. Cheap to clone; clones share one pool
/// of connections.
#[derive(Clone)]
pub struct PostgresStore {
    engine: Engine,
    target: String,
    created: bool,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .finish()
    }
}

impl PostgresStore {
    /// Opens (making or migrating) the store in the PostgreSQL database
    /// `url` names, as [`crate::Registry::open_postgres`] does: the two
    /// share the database's schema.
    ///
    /// # Errors
    ///
    /// As [`crate::Registry::open_postgres`].
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let (pool, created) = crate::sql::postgres::off_runtime(|| {
            crate::schema::postgres::open(url, crate::sql::postgres::DEFAULT_CONNECTIONS)
        })?;
        Ok(Self {
            target: pool.target().to_owned(),
            engine: Engine::Postgres(pool),
            created,
        })
    }

    /// `host:port/database`: where the store is, without a password.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Whether opening it made the store, the database having none.
    pub fn created(&self) -> bool {
        self.created
    }

    async fn read_with<T: Send + 'static>(
        &self,
        doing: impl FnOnce() -> String + Send + 'static,
        read: impl FnOnce(&mut dyn Sql) -> Result<T, Fail> + Send + 'static,
    ) -> Result<T, StoreError> {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || engine.read(|db| read(db).map_err(|f| f.doing(doing))))
            .await
            .map_err(|e| StoreError::Database(format!("a read of the store: {e}")))?
    }

    async fn write_with<T: Send + 'static>(
        &self,
        doing: impl FnOnce() -> String + Send + 'static,
        write: impl FnOnce(&mut dyn Sql) -> Result<T, Fail> + Send + 'static,
    ) -> Result<T, StoreError> {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || {
            engine
                .write_rows(|db| write(db))
                .map_err(|f: Fail| f.doing(doing))
        })
        .await
        .map_err(|e| StoreError::Database(format!("a write to the store: {e}")))?
    }

    async fn append_with(
        &self,
        session: &SessionId,
        events: Vec<SessionEvent>,
        synced: bool,
    ) -> Result<Appended, StoreError> {
        let prepared = Prepared::batch(session, &events)?;
        let session = session.clone();
        let id = session.clone();
        self.write_with(
            move || format!("appending to session {id}"),
            move |db| {
                if !synced {
                    // Committed without waiting for the log to reach the
                    // disk; the next synced commit takes it there, since
                    // the log is written in order.
                    db.execute("SET LOCAL synchronous_commit TO OFF", &[])?;
                }
                lock(db, &session)?;
                let cursor = writer::load_cursor(db, &session)?;
                writer::append(db, cursor, &session, &prepared).map(|(appended, ..)| appended)
            },
        )
        .await
    }
}

/// Locks `session`'s row until the transaction ends: the writes to one
/// session take turns.
fn lock(db: &mut dyn Sql, session: &SessionId) -> Result<(), Fail> {
    db.row(
        "SELECT sid FROM sessions WHERE id = ?1 FOR UPDATE",
        args![session.as_str()],
        |row| row.int(0),
    )?
    .map(drop)
    .ok_or_else(|| StoreError::SessionNotFound(session.clone()).into())
}

impl SessionStore for PostgresStore {
    crate::query::session_reads!();

    fn create_session(&self) -> StoreFuture<'_, SessionInfo> {
        Box::pin(self.write_with(
            || "creating a session".into(),
            |db| writer::create(db).map(|(info, ..)| info),
        ))
    }

    fn append<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<SessionEvent>,
    ) -> StoreFuture<'a, Appended> {
        Box::pin(self.append_with(session, events, true))
    }

    fn append_deferred<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<SessionEvent>,
    ) -> StoreFuture<'a, Appended> {
        Box::pin(self.append_with(session, events, false))
    }

    fn fork<'a>(&'a self, session: &'a SessionId, at: u64) -> StoreFuture<'a, SessionInfo> {
        let session = session.clone();
        let id = session.clone();
        Box::pin(self.write_with(
            move || format!("forking session {id} at {at}"),
            move |db| {
                lock(db, &session)?;
                let cursor = writer::load_cursor(db, &session)?;
                writer::fork(db, cursor, &session, at).map(|(info, ..)| info)
            },
        ))
    }
}
