//! [`Registry`]: what hane keeps beside sessions, in the same file.
//!
//! Releases (numbered, one active), the components they run, agent runs,
//! tasks for people, API keys and the ticks of schedules handled. The
//! registry stores bodies its callers `seal`ed and indexes the few columns
//! it is asked to filter by; it knows nothing of agents or manifests.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hane_core::RunStatus;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::StoreError;
use crate::query::now_ms;
use crate::schema;
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
    /// Its state, such as `open`.
    pub state: String,
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

/// How `api_keys.groups` holds a key's groups: one per line.
fn groups_column(groups: Option<&[String]>) -> Option<String> {
    groups.map(|groups| groups.join("\n"))
}

fn api_key_info(row: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKeyInfo> {
    let groups: Option<String> = row.get(2)?;
    Ok(ApiKeyInfo {
        name: row.get(0)?,
        role: row.get(1)?,
        groups: groups.map(|g| g.lines().map(str::to_owned).collect()),
        created_at_ms: row.get::<_, i64>(3)? as u64,
    })
}

/// Releases, components, runs, tasks and API keys, in the session store's
/// database file. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct Registry {
    conn: Arc<Mutex<Connection>>,
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
    /// the same file a [`crate::SqliteStore`] uses. As there, only a path
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
        let path = path.as_ref().to_owned();
        let (conn, created) = schema::open_writer(&path, synchronous)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path,
            synchronous,
            created,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether opening it made a new store, nothing having been at its
    /// path.
    pub fn created(&self) -> bool {
        self.created
    }

    async fn with<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut conn)
        })
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
        self.with("activating a release", move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db("activating a release"))?;
            let now = now_ms();
            let number = insert_release(&tx, &release, now)?;
            set_active(&tx, number, now)?;
            tx.commit().map_err(db("activating a release"))?;
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
        self.with("listing releases", |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT r.number, r.created_at, r.source, r.summary, a.number IS NOT NULL
                     FROM releases r LEFT JOIN active_release a ON a.number = r.number
                     ORDER BY r.number",
                )
                .map_err(db("listing releases"))?;
            let rows = stmt
                .query_map([], |row| {
                    Ok(ReleaseInfo {
                        number: row.get::<_, i64>(0)? as u64,
                        created_at_ms: row.get::<_, i64>(1)? as u64,
                        source: row.get(2)?,
                        summary: row.get(3)?,
                        active: row.get(4)?,
                    })
                })
                .map_err(db("listing releases"))?;
            rows.collect::<Result<_, _>>()
                .map_err(db("listing releases"))
        })
        .await
    }

    /// The active release and its body, if any release was activated.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn active(&self) -> Result<Option<(ReleaseInfo, Vec<u8>)>, StoreError> {
        self.with("reading the active release", |conn| {
            conn.query_row(
                "SELECT r.number, r.created_at, r.source, r.summary, r.body
                 FROM active_release a JOIN releases r ON r.number = a.number",
                [],
                |row| {
                    Ok((
                        ReleaseInfo {
                            number: row.get::<_, i64>(0)? as u64,
                            created_at_ms: row.get::<_, i64>(1)? as u64,
                            source: row.get(2)?,
                            summary: row.get(3)?,
                            active: true,
                        },
                        row.get(4)?,
                    ))
                },
            )
            .optional()
            .map_err(db("reading the active release"))
        })
        .await
    }

    /// The number of the active release.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn active_number(&self) -> Result<Option<u64>, StoreError> {
        self.with("reading the active release", |conn| {
            conn.prepare_cached("SELECT number FROM active_release")
                .and_then(|mut stmt| stmt.query_row([], |row| row.get::<_, i64>(0)).optional())
                .map(|n| n.map(|n| n as u64))
                .map_err(db("reading the active release"))
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
        self.with("rolling back", move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db("rolling back"))?;
            let active: Option<i64> = tx
                .query_row("SELECT number FROM active_release", [], |row| row.get(0))
                .optional()
                .map_err(db("rolling back"))?;
            let target: Option<i64> = match to {
                Some(n) => tx
                    .query_row(
                        "SELECT number FROM releases WHERE number = ?1",
                        [n as i64],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(db("rolling back"))?,
                None => match active {
                    Some(a) => tx
                        .query_row(
                            "SELECT max(number) FROM releases WHERE number < ?1",
                            [a],
                            |row| row.get(0),
                        )
                        .map_err(db("rolling back"))?,
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
            set_active(&tx, target as u64, now_ms())?;
            let info = tx
                .query_row(
                    "SELECT number, created_at, source, summary FROM releases WHERE number = ?1",
                    [target],
                    |row| {
                        Ok(ReleaseInfo {
                            number: row.get::<_, i64>(0)? as u64,
                            created_at_ms: row.get::<_, i64>(1)? as u64,
                            source: row.get(2)?,
                            summary: row.get(3)?,
                            active: true,
                        })
                    },
                )
                .map_err(db("rolling back"))?;
            tx.commit().map_err(db("rolling back"))?;
            Ok(info)
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
        self.with("reading a component", move |conn| {
            conn.query_row(
                "SELECT bytes FROM components WHERE digest = ?1",
                [digest],
                |row| row.get(0),
            )
            .optional()
            .map_err(db("reading a component"))
        })
        .await
    }

    /// Inserts or replaces a run.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn put_run(&self, run: RunRow) -> Result<(), StoreError> {
        self.with("storing a run", move |conn| upsert_run(conn, &run))
            .await
    }

    /// The run with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn run(&self, id: &str) -> Result<Option<RunRow>, StoreError> {
        let id = id.to_owned();
        self.with("reading a run", move |conn| {
            conn.prepare_cached(
                "SELECT id, agent, status, created_at, updated_at, body, holder FROM runs WHERE id = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([id], run_row).optional())
            .map_err(db("reading a run"))
        })
        .await
    }

    /// Runs matching `query`, newest first.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn runs(&self, query: RunQuery) -> Result<Vec<RunRow>, StoreError> {
        self.with("listing runs", move |conn| {
            let limit = match query.limit {
                0 => MAX_RUNS_LISTED,
                n => n.min(MAX_RUNS_LISTED),
            };
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, agent, status, created_at, updated_at, body, holder FROM runs
                     WHERE (?1 IS NULL OR agent = ?1) AND (?2 IS NULL OR status = ?2)
                     ORDER BY created_at DESC, id DESC LIMIT ?3",
                )
                .map_err(db("listing runs"))?;
            let rows = stmt
                .query_map(
                    params![query.agent, query.status.map(RunStatus::as_str), limit],
                    run_row,
                )
                .map_err(db("listing runs"))?;
            rows.collect::<Result<_, _>>().map_err(db("listing runs"))
        })
        .await
    }

    /// Stores a new task.
    ///
    /// # Errors
    ///
    /// The database failed, or a task with this id exists.
    pub async fn create_task(&self, task: TaskRow) -> Result<(), StoreError> {
        self.with("creating a task", move |conn| insert_task(conn, &task))
            .await
    }

    /// The tasks a run created, oldest first.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn tasks_of_run(&self, run: &str) -> Result<Vec<TaskRow>, StoreError> {
        let run = run.to_owned();
        self.with("listing tasks", move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, run, kind, assignment, state, created_at, body FROM tasks
                     WHERE run = ?1 ORDER BY created_at, id",
                )
                .map_err(db("listing tasks"))?;
            let rows = stmt
                .query_map([run], |row| {
                    Ok(TaskRow {
                        id: row.get(0)?,
                        run: row.get(1)?,
                        kind: row.get(2)?,
                        assignment: row.get(3)?,
                        state: row.get(4)?,
                        created_at_ms: row.get::<_, i64>(5)? as u64,
                        body: row.get(6)?,
                    })
                })
                .map_err(db("listing tasks"))?;
            rows.collect::<Result<_, _>>().map_err(db("listing tasks"))
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
        self.with("adding an API key", move |conn| {
            let taken: bool = conn
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM api_keys WHERE name = ?1)",
                    [&name],
                    |row| row.get(0),
                )
                .map_err(db("adding an API key"))?;
            if taken {
                return Err(StoreError::DuplicateKey(name));
            }
            conn.execute(
                "INSERT INTO api_keys (hash, name, role, groups, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![hash, name, role, groups, now_ms() as i64],
            )
            .map_err(db("adding an API key"))?;
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
        self.with("checking an API key", move |conn| {
            conn.prepare_cached(
                "SELECT name, role, groups, created_at FROM api_keys WHERE hash = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([hash], api_key_info).optional())
            .map_err(db("checking an API key"))
        })
        .await
    }

    /// Every API key, by name.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn api_keys(&self) -> Result<Vec<ApiKeyInfo>, StoreError> {
        self.with("listing API keys", |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT name, role, groups, created_at FROM api_keys ORDER BY name")
                .map_err(db("listing API keys"))?;
            let rows = stmt
                .query_map([], api_key_info)
                .map_err(db("listing API keys"))?;
            rows.collect::<Result<_, _>>()
                .map_err(db("listing API keys"))
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
        self.with("removing an API key", move |conn| {
            let n = conn
                .execute("DELETE FROM api_keys WHERE name = ?1", [name])
                .map_err(db("removing an API key"))?;
            Ok(n > 0)
        })
        .await
    }
}

/// Stores `release` and its components; returns its number.
fn insert_release(conn: &Connection, release: &NewRelease, now: u64) -> Result<u64, StoreError> {
    for (digest, bytes) in &release.components {
        conn.execute(
            "INSERT OR IGNORE INTO components (digest, bytes) VALUES (?1, ?2)",
            params![digest, bytes],
        )
        .map_err(db("storing a component"))?;
    }
    conn.execute(
        "INSERT INTO releases (created_at, source, summary, body) VALUES (?1, ?2, ?3, ?4)",
        params![now as i64, release.source, release.summary, release.body],
    )
    .map_err(db("storing a release"))?;
    Ok(conn.last_insert_rowid() as u64)
}

fn set_active(conn: &Connection, number: u64, now: u64) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO active_release (one, number, activated_at) VALUES (1, ?1, ?2)
         ON CONFLICT (one) DO UPDATE SET number = ?1, activated_at = ?2",
        params![number as i64, now as i64],
    )
    .map_err(db("activating a release"))?;
    Ok(())
}

fn upsert_run(conn: &Connection, run: &RunRow) -> Result<(), StoreError> {
    // A run taken over by another holder is not written by its old one:
    // the conflict's update applies only while the holder is the same.
    let changed = conn
        .prepare_cached(
            "INSERT INTO runs (id, agent, status, created_at, updated_at, body, holder)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (id) DO UPDATE SET status = ?3, updated_at = ?5, body = ?6
             WHERE runs.holder IS ?7",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                run.id,
                run.agent,
                run.status.as_str(),
                run.created_at_ms as i64,
                run.updated_at_ms as i64,
                run.body,
                run.holder,
            ])
        })
        .map_err(db("storing a run"))?;
    if changed == 0 {
        let holder: Option<String> = conn
            .query_row("SELECT holder FROM runs WHERE id = ?1", [&run.id], |row| {
                row.get(0)
            })
            .map_err(db("storing a run"))?;
        return Err(StoreError::NotHolder {
            run: run.id.clone(),
            holder,
        });
    }
    Ok(())
}

fn insert_task(conn: &Connection, task: &TaskRow) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO tasks (id, run, kind, assignment, state, created_at, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            task.id,
            task.run,
            task.kind,
            task.assignment,
            task.state,
            task.created_at_ms as i64,
            task.body
        ],
    )
    .map_err(db("creating a task"))?;
    Ok(())
}

fn run_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: row.get(0)?,
        agent: row.get(1)?,
        status: row.get::<_, String>(2)?.parse().map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e))
        })?,
        created_at_ms: row.get::<_, i64>(3)? as u64,
        updated_at_ms: row.get::<_, i64>(4)? as u64,
        body: row.get(5)?,
        holder: row.get(6)?,
    })
}

fn db(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Database(format!("{what}: {e}"))
}
