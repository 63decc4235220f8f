//! [`Registry`]: what hane keeps beside sessions, in the same file.
//!
//! Releases (numbered, one active), the components they run, agent runs,
//! tasks for people, API keys and the ticks of schedules handled. The
//! registry stores bodies its callers `seal`ed and indexes the few columns
//! it is asked to filter by; it knows nothing of agents or manifests.
//!
//! [`Registry`] opens the database and hands out one table per aggregate
//! ([`Registry::runs`], [`Registry::actions`], …); each table is a small
//! borrowed view with the reads and writes of its rows. Changes that must
//! hold together across tables go through [`Registry::transact`].

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hane_core::Lifecycle;

use crate::StoreError;
use crate::mark::Mark;
use crate::query::now_ms;
use crate::schema;
use crate::sql::{Engine, LiteDb, Query, Row, Sql, SqlError, args, failed};
use crate::sqlite::Synchronous;

mod actions;
mod api_keys;
mod conversations;
mod evaluations;
mod leases;
mod receptions;
mod releases;
mod runs;
mod schedules;
mod tasks;
mod workflows;

pub use actions::{
    ActionQuery, ActionRow, AlertRow, BudgetUsage, MAX_ACTIONS_LISTED, OverrideRow, RegistryTx,
    UsageDelta,
};
pub use api_keys::ApiKeyInfo;
pub use conversations::{ConversationRow, EntryRow, MAX_CONVERSATIONS_LISTED};
pub use evaluations::{EvaluationRow, MAX_EVALUATIONS_LISTED};
pub use leases::{LeaseRow, TakenRun};
pub use receptions::{MAX_RECEPTIONS_LISTED, ReceptionRow};
pub use releases::{NewRelease, ReleaseInfo};
pub use runs::{MAX_RUNS_LISTED, RunQuery, RunRow};
pub use schedules::{MAX_TICKS_LISTED, TickEnd, TickRow};
pub use tasks::TaskRow;
pub use workflows::{CaseRow, MAX_CASES_LISTED};

pub(crate) use runs::{insert_run, run_row};
pub(crate) use tasks::insert_task;

/// Releases, components, runs, tasks and API keys, in the session store's
/// database file. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct Registry {
    engine: Engine,
    path: PathBuf,
    created: bool,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("path", &self.path)
            .finish()
    }
}

/// Declares each table: a borrowed view of the registry, and the
/// registry's method that hands it out.
macro_rules! tables {
    ($($(#[$doc:meta])* $accessor:ident -> $table:ident;)*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $table<'a> {
                registry: &'a Registry,
            }
        )*

        impl Registry {
            $(
                $(#[$doc])*
                pub fn $accessor(&self) -> $table<'_> {
                    $table { registry: self }
                }
            )*
        }
    };
}

tables! {
    /// Releases: numbered, at most one active, and the components they run by digest.
    releases -> ReleaseTable;
    /// Agent runs: each stored with its status, its holder and its sealed body.
    runs -> RunTable;
    /// Tasks for people, such as handovers.
    tasks -> TaskTable;
    /// API keys, by the hash of their secret.
    api_keys -> ApiKeyTable;
    /// Outbound actions as the execution ledger keeps them; they change
    /// only inside [`Registry::transact`].
    actions -> ActionTable;
    /// Decider overrides: tools whose approvals go to people only.
    overrides -> OverrideTable;
    /// The per-day usage of budget scopes.
    usage -> UsageTable;
    /// Conversations and their entries.
    conversations -> ConversationTable;
    /// Evaluations of suites.
    evaluations -> EvaluationTable;
    /// Requests reception took.
    receptions -> ReceptionTable;
    /// The ticks of schedules, each claimed by one process.
    ticks -> TickTable;
    /// Leases: which processes sharing the store are alive, and the runs of dead ones.
    leases -> LeaseTable;
    /// Workflow cases.
    cases -> CaseTable;
}

impl Registry {
    /// Opens (making or migrating) the registry in the database at `path`,
    /// the same file a [`crate::SqliteStore`] uses; a `path` that is a
    /// PostgreSQL address ([`crate::postgres_url`]) opens that database
    /// ([`Registry::open_postgres`]). As there, only a path
    /// where nothing is makes a new store ([`Registry::created`]).
    ///
    /// # Errors
    ///
    /// As [`crate::SqliteStore::open`]: [`StoreError::NotAStore`] if
    /// something other than a hane store is at `path`, or the file cannot
    /// be opened, or has a newer schema.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, Synchronous::Full)
    }

    /// Opens the registry with its commits synced as `synchronous` says
    /// (see [`crate::SqliteConfig::synchronous`]); [`Registry::open`] syncs
    /// every commit.
    ///
    /// # Errors
    ///
    /// As [`Registry::open`].
    pub fn open_with(path: impl AsRef<Path>, synchronous: Synchronous) -> Result<Self, StoreError> {
        if let Some(url) = crate::postgres_url(path.as_ref()) {
            return Self::open_postgres(url);
        }
        let path = path.as_ref().to_owned();
        let (conn, created) = schema::open_writer(&path, synchronous)?;
        Ok(Self {
            engine: Engine::Sqlite(Arc::new(Mutex::new(LiteDb {
                conn,
                mark: Some(Mark::of(&path)),
                synchronous,
            }))),
            path,
            created,
        })
    }

    /// Opens (making or migrating) the registry in the PostgreSQL database
    /// `url` names (`postgres://user[:password]@host[:port]/database`),
    /// which several processes, on one machine or many, share. The schema
    /// is made there when the database has none; [`Registry::created`]
    /// says so.
    ///
    /// # Errors
    ///
    /// `url` is not a PostgreSQL address, the server cannot be reached or
    /// refuses the login ([`StoreError::Database`], naming the server but
    /// never a password), or the database has a newer schema
    /// ([`StoreError::NewerSchema`]).
    pub fn open_postgres(url: &str) -> Result<Self, StoreError> {
        let (pool, created) = crate::sql::postgres::off_runtime(|| {
            schema::postgres::open(url, crate::sql::postgres::DEFAULT_CONNECTIONS)
        })?;
        Ok(Self {
            path: PathBuf::from(pool.target()),
            engine: Engine::Postgres(pool),
            created,
        })
    }

    /// The database file; for PostgreSQL, `host:port/database`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether opening it made a new store, nothing having been at its
    /// path.
    pub fn created(&self) -> bool {
        self.created
    }

    /// Runs `f` in one write transaction: committed when `f` returns
    /// `Ok`, rolled back when it returns `Err`. No other write
    /// transaction on the store, of this process or another, interleaves
    /// with it: on SQLite it is `IMMEDIATE` (another process waits up to
    /// the busy timeout), on PostgreSQL it holds the store's write lock.
    ///
    /// # Errors
    ///
    /// What `f` returned, or the database failed.
    pub async fn transact<T, E>(
        &self,
        f: impl FnOnce(&RegistryTx<'_>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.transaction(false, f).await
    }

    /// As [`Registry::transact`], with the commit synced to disk whatever
    /// the registry's synchronous mode: for a record that must survive a
    /// power loss as well as a crash, such as the claim of an action about
    /// to be sent.
    ///
    /// # Errors
    ///
    /// As [`Registry::transact`].
    pub async fn transact_synced<T, E>(
        &self,
        f: impl FnOnce(&RegistryTx<'_>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.transaction(true, f).await
    }

    async fn transaction<T, E>(
        &self,
        synced: bool,
        f: impl FnOnce(&RegistryTx<'_>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || {
            engine.write_synced(synced, |db| {
                f(&RegistryTx {
                    tx: RefCell::new(db),
                })
            })
        })
        .await
        .map_err(|e| StoreError::Database(format!("a registry transaction: {e}")))?
    }

    /// Runs `f` on the database outside any transaction, on a blocking
    /// thread: each of its statements commits by itself.
    async fn on<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut dyn Sql) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || engine.read(f))
            .await
            .map_err(|e| StoreError::Database(format!("{what}: {e}")))?
    }

    /// Runs `f` on the database from a synchronous caller: on this thread
    /// for SQLite; for PostgreSQL, whose client runs its own runtime and
    /// so must not block one, on a thread of its own.
    fn blocking<T: Send>(
        &self,
        f: impl FnOnce(&mut dyn Sql) -> Result<T, StoreError> + Send,
    ) -> Result<T, StoreError> {
        match &self.engine {
            Engine::Sqlite(_) => self.engine.read(f),
            Engine::Postgres(_) => crate::sql::postgres::off_runtime(|| self.engine.read(f)),
        }
    }

    /// Runs `f` in one write transaction, on a blocking thread; see
    /// [`Engine::write`].
    async fn tx<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut dyn Sql) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || engine.write(f))
            .await
            .map_err(|e| StoreError::Database(format!("{what}: {e}")))?
    }
}

/// The state in column `index`, read as its lifecycle's.
pub(crate) fn state<S: Lifecycle>(row: &dyn Row, index: usize) -> Result<S, SqlError> {
    let name = row.text(index)?;
    S::named(&name)
        .ok_or_else(|| SqlError::column(index, format!("not a {} state: `{name}`", S::KIND)))
}

/// Why a change of item `id` from `from` applied to no row: what it is
/// in instead, read with `current` (`SELECT state … WHERE id = ?1`).
pub(crate) fn state_changed<S: Lifecycle>(
    db: &mut dyn Sql,
    current: &str,
    id: &str,
    from: S,
    what: &'static str,
) -> StoreError {
    match db.row(current, args![id], |row| row.text(0)) {
        Ok(found) => StoreError::StateChanged {
            kind: S::KIND,
            id: id.to_owned(),
            expected: from.name(),
            found,
        },
        Err(e) => failed(what)(e),
    }
}
