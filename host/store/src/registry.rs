//! [`Registry`]: what hane keeps beside sessions, in the same file.
//!
//! Releases (numbered, one active), the components they run, agent runs,
//! tasks for people, API keys and the ticks of schedules handled. The
//! registry stores bodies its callers `seal`ed and indexes the few columns
//! it is asked to filter by; it knows nothing of agents or manifests.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hane_core::{Lifecycle, RunStatus, TaskState};

use crate::StoreError;
use crate::query::now_ms;
use crate::schema;
use crate::sql::{Engine, Query, Row, Sql, SqlError, args, failed};
use crate::sqlite::Synchronous;

mod actions;
mod conversations;
mod evaluations;
mod leases;
mod receptions;
mod schedules;
mod workflows;

pub use actions::{
    ActionQuery, ActionRow, AlertRow, MAX_ACTIONS_LISTED, OverrideRow, RegistryTx, Usage,
    UsageDelta,
};
pub use conversations::{ConversationRow, EntryRow, MAX_CONVERSATIONS_LISTED};
pub use evaluations::{EvaluationRow, MAX_EVALUATIONS_LISTED};
pub use leases::{LeaseRow, TakenRun};
pub use receptions::{MAX_RECEPTIONS_LISTED, ReceptionRow};
pub use schedules::{MAX_TICKS_LISTED, TickEnd, TickRow};
pub use workflows::{CaseRow, MAX_CASES_LISTED};

/// Runs listed at most by one [`Registry::runs`] query.
pub const MAX_RUNS_LISTED: u32 = 1000;

/// A release as listed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReleaseInfo {
    /// Its number, from 1, in order of activation.
    pub number: u64,
    /// When it was first activated, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Where it was activated from, such as a directory.
    pub source: String,
    /// One line about what it holds.
    pub summary: String,
    /// Whether it is the active release.
    pub active: bool,
}

/// A release to activate.
#[derive(Debug, Clone)]
pub struct NewRelease {
    /// Where it comes from.
    pub source: String,
    /// One line about what it holds.
    pub summary: String,
    /// Its body, sealed by the caller.
    pub body: Vec<u8>,
    /// The components it runs, by digest; stored once per digest.
    pub components: Vec<(String, Vec<u8>)>,
}

/// A stored agent run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    /// The run's id.
    pub id: String,
    /// The agent's name.
    pub agent: String,
    /// Its status, stored as its name (`running`).
    pub status: RunStatus,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
    /// The whole run, sealed by the caller.
    pub body: Vec<u8>,
    /// The lease it is held under: the process that runs it. A run held
    /// under one lease is never overwritten under another
    /// ([`StoreError::NotHolder`]); `None` for a run no process holds.
    pub holder: Option<String>,
}

/// Which runs to list, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunQuery {
    /// Only runs of this agent.
    pub agent: Option<String>,
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// At most this many (capped at [`MAX_RUNS_LISTED`]; 0 means the cap).
    pub limit: u32,
}

/// A task for people, such as a handover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    /// The task's id.
    pub id: String,
    /// The run that created it.
    pub run: String,
    /// What kind of task, such as `handover`.
    pub kind: String,
    /// The group it is assigned to.
    pub assignment: String,
    /// Its state, stored as its name (`open`).
    pub state: TaskState,
    /// When it was created.
    pub created_at_ms: u64,
    /// The whole task, sealed by the caller.
    pub body: Vec<u8>,
}

/// An API key as listed: never the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyInfo {
    /// The key's name.
    pub name: String,
    /// Its role, such as `operator`.
    pub role: String,
    /// The assignment groups whose outbound actions it decides; `None`
    /// for every group.
    pub groups: Option<Vec<String>>,
    /// When it was created.
    pub created_at_ms: u64,
}

/// A release from a row whose first four columns are its number,
/// `created_at`, source and summary.
pub(crate) fn release_info(row: &dyn Row, active: bool) -> Result<ReleaseInfo, SqlError> {
    Ok(ReleaseInfo {
        number: row.int(0)? as u64,
        created_at_ms: row.int(1)? as u64,
        source: row.text(2)?,
        summary: row.text(3)?,
        active,
    })
}

/// How `api_keys.groups` holds a key's groups: one per line.
fn groups_column(groups: Option<&[String]>) -> Option<String> {
    groups.map(|groups| groups.join("\n"))
}

fn api_key_info(row: &dyn Row) -> Result<ApiKeyInfo, SqlError> {
    let groups = row.opt_text(2)?;
    Ok(ApiKeyInfo {
        name: row.text(0)?,
        role: row.text(1)?,
        groups: groups.map(|g| g.lines().map(str::to_owned).collect()),
        created_at_ms: row.int(3)? as u64,
    })
}

/// Releases, components, runs, tasks and API keys, in the session store's
/// database file. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct Registry {
    engine: Engine,
    path: PathBuf,
    synchronous: Synchronous,
    created: bool,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("path", &self.path)
            .finish()
    }
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
            engine: Engine::Sqlite(Arc::new(Mutex::new(conn))),
            path,
            synchronous,
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
            synchronous: Synchronous::Full,
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

    /// Stores `release` and its components and makes it the active release,
    /// in one transaction.
    ///
    /// # Errors
    ///
    /// The database failed; then nothing changed.
    pub async fn activate(&self, release: NewRelease) -> Result<ReleaseInfo, StoreError> {
        self.tx("activating a release", move |db| {
            let now = now_ms();
            let number = insert_release(db, &release, now)?;
            set_active(db, number, now)?;
            Ok(ReleaseInfo {
                number,
                created_at_ms: now,
                source: release.source,
                summary: release.summary,
                active: true,
            })
        })
        .await
    }

    /// Every release, oldest first.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn releases(&self) -> Result<Vec<ReleaseInfo>, StoreError> {
        self.on("listing releases", |db| {
            db.rows(
                "SELECT r.number, r.created_at, r.source, r.summary,
                        CASE WHEN a.number IS NULL THEN 0 ELSE 1 END
                 FROM releases r LEFT JOIN active_release a ON a.number = r.number
                 ORDER BY r.number",
                &[],
                |row| release_info(row, row.int(4)? != 0),
            )
            .map_err(failed("listing releases"))
        })
        .await
    }

    /// The active release and its body, if any release was activated.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn active(&self) -> Result<Option<(ReleaseInfo, Vec<u8>)>, StoreError> {
        self.on("reading the active release", |db| {
            db.row(
                "SELECT r.number, r.created_at, r.source, r.summary, r.body
                 FROM active_release a JOIN releases r ON r.number = a.number",
                &[],
                |row| Ok((release_info(row, true)?, row.blob(4)?)),
            )
            .map_err(failed("reading the active release"))
        })
        .await
    }

    /// The number of the active release.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn active_number(&self) -> Result<Option<u64>, StoreError> {
        self.on("reading the active release", |db| {
            db.row("SELECT number FROM active_release", &[], |row| row.int(0))
                .map(|n| n.map(|n| n as u64))
                .map_err(failed("reading the active release"))
        })
        .await
    }

    /// Makes release `to` active again; without `to`, the release before
    /// the active one.
    ///
    /// # Errors
    ///
    /// [`StoreError::ReleaseNotFound`] when there is no such release (or
    /// nothing before the active one); the database failed.
    pub async fn rollback(&self, to: Option<u64>) -> Result<ReleaseInfo, StoreError> {
        self.tx("rolling back", move |db| {
            let what = failed("rolling back");
            let active = db
                .row("SELECT number FROM active_release", &[], |row| row.int(0))
                .map_err(&what)?;
            let target = match to {
                Some(n) => db
                    .row(
                        "SELECT number FROM releases WHERE number = ?1",
                        args![n as i64],
                        |row| row.int(0),
                    )
                    .map_err(&what)?,
                None => match active {
                    Some(a) => db
                        .row(
                            "SELECT max(number) FROM releases WHERE number < ?1",
                            args![a],
                            |row| row.opt_int(0),
                        )
                        .map_err(&what)?
                        .flatten(),
                    None => None,
                },
            };
            let Some(target) = target else {
                return Err(StoreError::ReleaseNotFound(match to {
                    Some(n) => format!("release {n} does not exist"),
                    None if active.is_some() => {
                        "there is no release before the active one".to_owned()
                    }
                    None => "no release was ever activated".to_owned(),
                }));
            };
            set_active(db, target as u64, now_ms())?;
            db.row(
                "SELECT number, created_at, source, summary FROM releases WHERE number = ?1",
                args![target],
                |row| release_info(row, true),
            )
            .map_err(&what)?
            .ok_or_else(|| StoreError::Database("rolling back: the release went away".into()))
        })
        .await
    }

    /// The bytes of the component with this digest.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn component(&self, digest: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let digest = digest.to_owned();
        self.on("reading a component", move |db| {
            db.row(
                "SELECT bytes FROM components WHERE digest = ?1",
                args![&digest],
                |row| row.blob(0),
            )
            .map_err(failed("reading a component"))
        })
        .await
    }

    /// Stores a new run, in an initial status (`queued`).
    ///
    /// # Errors
    ///
    /// [`StoreError::IllegalTransition`] for a status a run does not
    /// start in, [`StoreError::AlreadyExists`] when a run has this id, or
    /// the database failed; then nothing changed.
    pub async fn insert_run(&self, run: RunRow) -> Result<(), StoreError> {
        run.status.check_initial()?;
        self.on("storing a new run", move |db| insert_run(db, &run))
            .await
    }

    /// Stores `run` as it is now, moving it from status `from` to its
    /// own: applied only while it is `from` and held by `run.holder`.
    ///
    /// # Errors
    ///
    /// [`StoreError::IllegalTransition`] when a run does not go from
    /// `from` to `run.status`, [`StoreError::NotHolder`] when another
    /// process holds it, [`StoreError::StateChanged`] when it is not
    /// `from` (or not stored), or the database failed; then nothing
    /// changed.
    pub async fn update_run(&self, from: RunStatus, run: RunRow) -> Result<(), StoreError> {
        from.check_transition(run.status)?;
        self.on("storing a run", move |db| update_run(db, from, &run))
            .await
    }

    /// The run with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn run(&self, id: &str) -> Result<Option<RunRow>, StoreError> {
        let id = id.to_owned();
        self.on("reading a run", move |db| {
            db.row(
                "SELECT id, agent, status, created_at, updated_at, body, holder FROM runs WHERE id = ?1",
                args![&id],
                run_row,
            )
            .map_err(failed("reading a run"))
        })
        .await
    }

    /// Runs matching `query`, newest first.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn runs(&self, query: RunQuery) -> Result<Vec<RunRow>, StoreError> {
        self.on("listing runs", move |db| {
            let limit = match query.limit {
                0 => MAX_RUNS_LISTED,
                n => n.min(MAX_RUNS_LISTED),
            };
            db.rows(
                "SELECT id, agent, status, created_at, updated_at, body, holder FROM runs
                 WHERE (CAST(?1 AS TEXT) IS NULL OR agent = ?1)
                   AND (CAST(?2 AS TEXT) IS NULL OR status = ?2)
                 ORDER BY created_at DESC, id DESC LIMIT ?3",
                args![
                    query.agent.as_ref(),
                    query.status.map(RunStatus::as_str),
                    limit
                ],
                run_row,
            )
            .map_err(failed("listing runs"))
        })
        .await
    }

    /// Stores a new task, in an initial state (`open`).
    ///
    /// # Errors
    ///
    /// [`StoreError::IllegalTransition`] for a state a task does not
    /// start in, [`StoreError::AlreadyExists`] when a task has this id, or
    /// the database failed.
    pub async fn create_task(&self, task: TaskRow) -> Result<(), StoreError> {
        task.state.check_initial()?;
        self.on("creating a task", move |db| insert_task(db, &task))
            .await
    }

    /// The tasks a run created, oldest first.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn tasks_of_run(&self, run: &str) -> Result<Vec<TaskRow>, StoreError> {
        let run = run.to_owned();
        self.on("listing tasks", move |db| {
            db.rows(
                "SELECT id, run, kind, assignment, state, created_at, body FROM tasks
                 WHERE run = ?1 ORDER BY created_at, id",
                args![&run],
                |row| {
                    Ok(TaskRow {
                        id: row.text(0)?,
                        run: row.text(1)?,
                        kind: row.text(2)?,
                        assignment: row.text(3)?,
                        state: state(row, 4)?,
                        created_at_ms: row.int(5)? as u64,
                        body: row.blob(6)?,
                    })
                },
            )
            .map_err(failed("listing tasks"))
        })
        .await
    }

    /// Stores an API key by the hash of its secret, with the assignment
    /// groups it decides for (`None`: every group). Group names hold no
    /// line breaks; the caller checks them.
    ///
    /// # Errors
    ///
    /// [`StoreError::DuplicateKey`] when a key with this name exists; the
    /// database failed.
    pub async fn add_api_key(
        &self,
        name: &str,
        role: &str,
        groups: Option<&[String]>,
        hash: &str,
    ) -> Result<(), StoreError> {
        let (name, role, hash) = (name.to_owned(), role.to_owned(), hash.to_owned());
        let groups = groups_column(groups);
        self.tx("adding an API key", move |db| {
            let what = failed("adding an API key");
            let taken = db
                .row("SELECT 1 FROM api_keys WHERE name = ?1", args![&name], |row| {
                    row.int(0)
                })
                .map_err(&what)?
                .is_some();
            if taken {
                return Err(StoreError::DuplicateKey(name));
            }
            db.execute(
                "INSERT INTO api_keys (hash, name, role, groups, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                args![&hash, &name, &role, groups.as_ref(), now_ms() as i64],
            )
            .map_err(&what)?;
            Ok(())
        })
        .await
    }

    /// The key whose secret has this hash.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn api_key(&self, hash: &str) -> Result<Option<ApiKeyInfo>, StoreError> {
        let hash = hash.to_owned();
        self.on("checking an API key", move |db| {
            db.row(
                "SELECT name, role, groups, created_at FROM api_keys WHERE hash = ?1",
                args![&hash],
                api_key_info,
            )
            .map_err(failed("checking an API key"))
        })
        .await
    }

    /// Every API key, by name.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn api_keys(&self) -> Result<Vec<ApiKeyInfo>, StoreError> {
        self.on("listing API keys", |db| {
            db.rows(
                "SELECT name, role, groups, created_at FROM api_keys ORDER BY name",
                &[],
                api_key_info,
            )
            .map_err(failed("listing API keys"))
        })
        .await
    }

    /// Removes the key with this name; false when there was none.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn remove_api_key(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.on("removing an API key", move |db| {
            let n = db
                .execute("DELETE FROM api_keys WHERE name = ?1", args![&name])
                .map_err(failed("removing an API key"))?;
            Ok(n > 0)
        })
        .await
    }
}

/// Stores `release` and its components; returns its number.
fn insert_release(db: &mut dyn Sql, release: &NewRelease, now: u64) -> Result<u64, StoreError> {
    for (digest, bytes) in &release.components {
        db.execute(
            "INSERT INTO components (digest, bytes) VALUES (?1, ?2)
             ON CONFLICT (digest) DO NOTHING",
            args![digest, bytes],
        )
        .map_err(failed("storing a component"))?;
    }
    let number = db
        .row(
            "INSERT INTO releases (created_at, source, summary, body) VALUES (?1, ?2, ?3, ?4)
             RETURNING number",
            args![now as i64, &release.source, &release.summary, &release.body],
            |row| row.int(0),
        )
        .map_err(failed("storing a release"))?
        .ok_or_else(|| StoreError::Database("storing a release: no number came back".into()))?;
    Ok(number as u64)
}

fn set_active(db: &mut dyn Sql, number: u64, now: u64) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO active_release (one, number, activated_at) VALUES (1, ?1, ?2)
         ON CONFLICT (one) DO UPDATE SET number = ?1, activated_at = ?2",
        args![number as i64, now as i64],
    )
    .map_err(failed("activating a release"))?;
    Ok(())
}

/// Stores a new run.
pub(crate) fn insert_run(db: &mut dyn Sql, run: &RunRow) -> Result<(), StoreError> {
    run.status.check_initial()?;
    let inserted = db
        .execute(
            "INSERT INTO runs (id, agent, status, created_at, updated_at, body, holder)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (id) DO NOTHING",
            args![
                &run.id,
                &run.agent,
                run.status.as_str(),
                run.created_at_ms as i64,
                run.updated_at_ms as i64,
                &run.body,
                run.holder.as_ref(),
            ],
        )
        .map_err(failed("storing a new run"))?;
    if inserted == 0 {
        return Err(StoreError::AlreadyExists {
            kind: RunStatus::KIND,
            id: run.id.clone(),
        });
    }
    Ok(())
}

/// Moves a run from `from` to `run.status`, storing it as it is now.
fn update_run(db: &mut dyn Sql, from: RunStatus, run: &RunRow) -> Result<(), StoreError> {
    from.check_transition(run.status)?;
    // A run taken over by another holder is not written by its old one:
    // the update applies only while the holder is the same.
    let what = failed("storing a run");
    let changed = db
        .execute(
            "UPDATE runs SET status = ?3, updated_at = ?4, body = ?5
             WHERE id = ?1 AND status = ?2 AND holder IS NOT DISTINCT FROM ?6",
            args![
                &run.id,
                from.as_str(),
                run.status.as_str(),
                run.updated_at_ms as i64,
                &run.body,
                run.holder.as_ref(),
            ],
        )
        .map_err(&what)?;
    if changed == 1 {
        return Ok(());
    }
    let found = db
        .row(
            "SELECT status, holder FROM runs WHERE id = ?1",
            args![&run.id],
            |row| Ok((row.text(0)?, row.opt_text(1)?)),
        )
        .map_err(&what)?;
    Err(match found {
        Some((_, holder)) if holder != run.holder => StoreError::NotHolder {
            run: run.id.clone(),
            holder,
        },
        found => StoreError::StateChanged {
            kind: RunStatus::KIND,
            id: run.id.clone(),
            expected: from.name(),
            found: found.map(|(status, _)| status),
        },
    })
}

pub(crate) fn insert_task(db: &mut dyn Sql, task: &TaskRow) -> Result<(), StoreError> {
    task.state.check_initial()?;
    let inserted = db
        .execute(
            "INSERT INTO tasks (id, run, kind, assignment, state, created_at, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (id) DO NOTHING",
            args![
                &task.id,
                &task.run,
                &task.kind,
                &task.assignment,
                task.state.as_str(),
                task.created_at_ms as i64,
                &task.body
            ],
        )
        .map_err(failed("creating a task"))?;
    if inserted == 0 {
        return Err(StoreError::AlreadyExists {
            kind: TaskState::KIND,
            id: task.id.clone(),
        });
    }
    Ok(())
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

pub(crate) fn run_row(row: &dyn Row) -> Result<RunRow, SqlError> {
    Ok(RunRow {
        id: row.text(0)?,
        agent: row.text(1)?,
        status: state(row, 2)?,
        created_at_ms: row.int(3)? as u64,
        updated_at_ms: row.int(4)? as u64,
        body: row.blob(5)?,
        holder: row.opt_text(6)?,
    })
}
