//! What the registry keeps of evaluations: one row per evaluation of an
//! `EvalSuite`, its body sealed by its owner; and releases stored without
//! being made active, for an evaluation to decide on.

use super::{NewRelease, Registry, ReleaseInfo, insert_release, now_ms, release_info, set_active};
use crate::StoreError;
use crate::sql::{Query, Row, SqlError, args, failed};

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
        self.on("storing an evaluation", move |db| {
            db.execute(
                "INSERT INTO evaluations (id, suite, release, created_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                args![
                    &evaluation.id,
                    &evaluation.suite,
                    evaluation.release as i64,
                    evaluation.created_at_ms as i64,
                    &evaluation.body
                ],
            )
            .map(drop)
            .map_err(failed("storing an evaluation"))
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
        self.on("reading an evaluation", move |db| {
            db.row(
                "SELECT id, suite, release, created_at, body FROM evaluations WHERE id = ?1",
                args![&id],
                evaluation_row,
            )
            .map_err(failed("reading an evaluation"))
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
        self.on("listing evaluations", move |db| {
            let limit = match limit {
                0 => MAX_EVALUATIONS_LISTED,
                n => n.min(MAX_EVALUATIONS_LISTED),
            };
            db.rows(
                "SELECT id, suite, release, created_at, body FROM evaluations
                 WHERE CAST(?1 AS TEXT) IS NULL OR suite = ?1
                 ORDER BY created_at DESC, id DESC LIMIT ?2",
                args![suite.as_ref(), limit],
                evaluation_row,
            )
            .map_err(failed("listing evaluations"))
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
        self.tx("storing a release", move |db| {
            let now = now_ms();
            let number = insert_release(db, &release, now)?;
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
        self.on("reading a release", move |db| {
            db.row(
                "SELECT r.number, r.created_at, r.source, r.summary,
                        CASE WHEN a.number IS NULL THEN 0 ELSE 1 END, r.body
                 FROM releases r LEFT JOIN active_release a ON a.number = r.number
                 WHERE r.number = ?1",
                args![number as i64],
                |row| Ok((release_info(row, row.int(4)? != 0)?, row.blob(5)?)),
            )
            .map_err(failed("reading a release"))
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
        self.tx("activating a release", move |db| {
            let info = db
                .row(
                    "SELECT number, created_at, source, summary FROM releases WHERE number = ?1",
                    args![number as i64],
                    |row| release_info(row, true),
                )
                .map_err(failed("activating a release"))?
                .ok_or_else(|| {
                    StoreError::ReleaseNotFound(format!("release {number} does not exist"))
                })?;
            set_active(db, number, now_ms())?;
            Ok(info)
        })
        .await
    }
}

fn evaluation_row(row: &dyn Row) -> Result<EvaluationRow, SqlError> {
    Ok(EvaluationRow {
        id: row.text(0)?,
        suite: row.text(1)?,
        release: row.int(2)? as u64,
        created_at_ms: row.int(3)? as u64,
        body: row.blob(4)?,
    })
}
