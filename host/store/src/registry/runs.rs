//! Agent runs: one row each, with the status the store moves only as
//! [`RunStatus`]'s table allows and the holder (the process running it)
//! it is written under.

use hane_core::{Lifecycle, RunStatus};

use super::{RunTable, state};
use crate::StoreError;
use crate::sql::{Query, Row, Sql, SqlError, args, failed};

/// Runs listed at most by one [`RunTable::list`] query.
pub const MAX_RUNS_LISTED: u32 = 1000;

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

impl RunTable<'_> {
    /// Stores a new run, in an initial status (`queued`).
    ///
    /// # Errors
    ///
    /// [`StoreError::IllegalTransition`] for a status a run does not
    /// start in, [`StoreError::AlreadyExists`] when a run has this id, or
    /// the database failed; then nothing changed.
    pub async fn insert(&self, run: RunRow) -> Result<(), StoreError> {
        run.status.check_initial()?;
        self.registry
            .on("storing a new run", move |db| insert_run(db, &run))
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
    pub async fn update(&self, from: RunStatus, run: RunRow) -> Result<(), StoreError> {
        from.check_transition(run.status)?;
        self.registry
            .on("storing a run", move |db| update_run(db, from, &run))
            .await
    }

    /// The run with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn get(&self, id: &str) -> Result<Option<RunRow>, StoreError> {
        let id = id.to_owned();
        self.registry.on("reading a run", move |db| {
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
    pub async fn list(&self, query: RunQuery) -> Result<Vec<RunRow>, StoreError> {
        self.registry
            .on("listing runs", move |db| {
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

    /// Claims for `holder` at most `limit` runs queued for any process
    /// (`queued`, held by none), oldest first, in one write transaction,
    /// so of any number of processes claiming at once each run goes to
    /// one.
    ///
    /// # Errors
    ///
    /// The database failed; then nothing was claimed.
    pub async fn claim_queued(
        &self,
        holder: &str,
        limit: usize,
    ) -> Result<Vec<RunRow>, StoreError> {
        let holder = holder.to_owned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.registry
            .tx("claiming queued runs", move |db| {
                let what = failed("claiming queued runs");
                let mut found = db
                    .rows(
                        "SELECT id, agent, status, created_at, updated_at, body, holder FROM runs
                     WHERE status = 'queued' AND holder IS NULL
                     ORDER BY created_at, id LIMIT ?1",
                        args![limit],
                        run_row,
                    )
                    .map_err(&what)?;
                for run in &mut found {
                    db.execute(
                        "UPDATE runs SET holder = ?2 WHERE id = ?1",
                        args![&run.id, &holder],
                    )
                    .map_err(&what)?;
                    run.holder = Some(holder.clone());
                }
                Ok(found)
            })
            .await
    }
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
