//! What the registry keeps of evaluations: one row per evaluation of an
//! `EvalSuite`, its body sealed by its owner.

use super::EvaluationTable;
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

impl EvaluationTable<'_> {
    /// Stores an evaluation.
    ///
    /// # Errors
    ///
    /// The database failed, or an evaluation with this id is stored; then
    /// nothing was stored.
    pub async fn add(&self, evaluation: EvaluationRow) -> Result<(), StoreError> {
        self.registry
            .on("storing an evaluation", move |db| {
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
    pub async fn get(&self, id: &str) -> Result<Option<EvaluationRow>, StoreError> {
        let id = id.to_owned();
        self.registry
            .on("reading an evaluation", move |db| {
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
    pub async fn list(
        &self,
        suite: Option<String>,
        limit: u32,
    ) -> Result<Vec<EvaluationRow>, StoreError> {
        self.registry
            .on("listing evaluations", move |db| {
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
