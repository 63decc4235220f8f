//! What the registry keeps of evaluations: one row per evaluation of an
//! `EvalSuite`, its body sealed by its owner; and releases stored without
//! being made active, for an evaluation to decide on.

use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::{NewRelease, Registry, ReleaseInfo, db, insert_release, now_ms, set_active};
use crate::StoreError;

/// The most evaluations one listing returns.
pub const MAX_EVALUATIONS_LISTED: u32 = 1000;

/// An evaluation of a suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvaluationRow {
    /// `eval_…`.
    pub id: String,
    /// The `EvalSuite`'s name.
    pub suite: String,
    /// The release whose definitions ran.
    pub release: u64,
    /// When it started, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// The sealed evaluation.
    pub body: Vec<u8>,
}

impl Registry {
    /// Stores an evaluation.
    ///
    /// # Errors
    ///
    /// The database failed, or an evaluation with this id is stored; then
    /// nothing was stored.
    pub async fn add_evaluation(&self, evaluation: EvaluationRow) -> Result<(), StoreError> {
        self.with("storing an evaluation", move |conn| {
            conn.prepare_cached(
                "INSERT INTO evaluations (id, suite, release, created_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    evaluation.id,
                    evaluation.suite,
                    evaluation.release as i64,
                    evaluation.created_at_ms as i64,
                    evaluation.body
                ])
            })
            .map(drop)
            .map_err(db("storing an evaluation"))
        })
        .await
    }

    /// The evaluation with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn evaluation(&self, id: &str) -> Result<Option<EvaluationRow>, StoreError> {
        let id = id.to_owned();
        self.with("reading an evaluation", move |conn| {
            conn.prepare_cached(
                "SELECT id, suite, release, created_at, body FROM evaluations WHERE id = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([id], evaluation_row).optional())
            .map_err(db("reading an evaluation"))
        })
        .await
    }

    /// Evaluations, newest first, of `suite` or of every suite; at most
    /// `limit` (capped at [`MAX_EVALUATIONS_LISTED`]; 0 means the cap).
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn evaluations(
        &self,
        suite: Option<String>,
        limit: u32,
    ) -> Result<Vec<EvaluationRow>, StoreError> {
        self.with("listing evaluations", move |conn| {
            let limit = match limit {
                0 => MAX_EVALUATIONS_LISTED,
                n => n.min(MAX_EVALUATIONS_LISTED),
            };
            let failed = db("listing evaluations");
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, suite, release, created_at, body FROM evaluations
                     WHERE ?1 IS NULL OR suite = ?1
                     ORDER BY created_at DESC, id DESC LIMIT ?2",
                )
                .map_err(&failed)?;
            let rows = stmt
                .query_map(params![suite, limit], evaluation_row)
                .map_err(&failed)?;
            rows.collect::<Result<_, _>>().map_err(&failed)
        })
        .await
    }

    /// Stores `release` and its components without making it active: a
    /// candidate, which [`Registry::activate_stored`] makes active once
    /// its evaluations pass.
    ///
    /// # Errors
    ///
    /// The database failed; then nothing was stored.
    pub async fn store_release(&self, release: NewRelease) -> Result<ReleaseInfo, StoreError> {
        self.with("storing a release", move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db("storing a release"))?;
            let now = now_ms();
            let number = insert_release(&tx, &release, now)?;
            tx.commit().map_err(db("storing a release"))?;
            Ok(ReleaseInfo {
                number,
                created_at_ms: now,
                source: release.source,
                summary: release.summary,
                active: false,
            })
        })
        .await
    }

    /// Release `number` and its body, active or not.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn release(&self, number: u64) -> Result<Option<(ReleaseInfo, Vec<u8>)>, StoreError> {
        self.with("reading a release", move |conn| {
            conn.query_row(
                "SELECT r.number, r.created_at, r.source, r.summary, a.number IS NOT NULL, r.body
                 FROM releases r LEFT JOIN active_release a ON a.number = r.number
                 WHERE r.number = ?1",
                [number as i64],
                |row| {
                    Ok((
                        ReleaseInfo {
                            number: row.get::<_, i64>(0)? as u64,
                            created_at_ms: row.get::<_, i64>(1)? as u64,
                            source: row.get(2)?,
                            summary: row.get(3)?,
                            active: row.get(4)?,
                        },
                        row.get(5)?,
                    ))
                },
            )
            .optional()
            .map_err(db("reading a release"))
        })
        .await
    }

    /// Makes stored release `number` active.
    ///
    /// # Errors
    ///
    /// [`StoreError::ReleaseNotFound`] when there is no such release; the
    /// database failed.
    pub async fn activate_stored(&self, number: u64) -> Result<ReleaseInfo, StoreError> {
        self.with("activating a release", move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db("activating a release"))?;
            let info = tx
                .query_row(
                    "SELECT number, created_at, source, summary FROM releases WHERE number = ?1",
                    [number as i64],
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
                .optional()
                .map_err(db("activating a release"))?
                .ok_or_else(|| {
                    StoreError::ReleaseNotFound(format!("release {number} does not exist"))
                })?;
            set_active(&tx, number, now_ms())?;
            tx.commit().map_err(db("activating a release"))?;
            Ok(info)
        })
        .await
    }
}

fn evaluation_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<EvaluationRow> {
    Ok(EvaluationRow {
        id: row.get(0)?,
        suite: row.get(1)?,
        release: row.get::<_, i64>(2)? as u64,
        created_at_ms: row.get::<_, i64>(3)? as u64,
        body: row.get(4)?,
    })
}
