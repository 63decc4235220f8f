//! What the registry keeps of workflows: one row per case, its body sealed
//! by its owner, its status beside it for finding the cases to resume.

use super::Registry;
use crate::StoreError;
use crate::sql::{Query, Row, SqlError, args, failed};

/// The most cases one listing returns.
pub const MAX_CASES_LISTED: u32 = 1000;

/// A workflow case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseRow {
    /// `case_…`.
    pub id: String,
    /// The workflow's name.
    pub workflow: String,
    /// `running`, `waiting`, `succeeded` or `failed`.
    pub status: String,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
    /// The sealed case.
    pub body: Vec<u8>,
}

impl Registry {
    /// Stores a case, or its new state, committed before it returns (and
    /// synced as the registry's commits are): what a case records before
    /// it starts a step's run must survive a crash.
    ///
    /// # Errors
    ///
    /// The database failed; then nothing changed.
    pub async fn put_case(&self, case: CaseRow) -> Result<(), StoreError> {
        self.on("storing a workflow case", move |db| {
            db.execute(
                "INSERT INTO workflow_cases (id, workflow, status, created_at, updated_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET status = ?3, updated_at = ?5, body = ?6",
                args![
                    &case.id,
                    &case.workflow,
                    &case.status,
                    case.created_at_ms as i64,
                    case.updated_at_ms as i64,
                    &case.body
                ],
            )
            .map(drop)
            .map_err(failed("storing a workflow case"))
        })
        .await
    }

    /// The case with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn case(&self, id: &str) -> Result<Option<CaseRow>, StoreError> {
        let id = id.to_owned();
        self.on("reading a workflow case", move |db| {
            db.row(
                "SELECT id, workflow, status, created_at, updated_at, body
                 FROM workflow_cases WHERE id = ?1",
                args![&id],
                case_row,
            )
            .map_err(failed("reading a workflow case"))
        })
        .await
    }

    /// Cases, newest first, of `workflow` (or every workflow) in `status`
    /// (or any); at most `limit` (capped at [`MAX_CASES_LISTED`]; 0 means
    /// the cap).
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn cases(
        &self,
        workflow: Option<String>,
        status: Option<String>,
        limit: u32,
    ) -> Result<Vec<CaseRow>, StoreError> {
        self.on("listing workflow cases", move |db| {
            let limit = match limit {
                0 => MAX_CASES_LISTED,
                n => n.min(MAX_CASES_LISTED),
            };
            db.rows(
                "SELECT id, workflow, status, created_at, updated_at, body FROM workflow_cases
                 WHERE (CAST(?1 AS TEXT) IS NULL OR workflow = ?1)
                   AND (CAST(?2 AS TEXT) IS NULL OR status = ?2)
                 ORDER BY created_at DESC, id DESC LIMIT ?3",
                args![workflow.as_ref(), status.as_ref(), limit],
                case_row,
            )
            .map_err(failed("listing workflow cases"))
        })
        .await
    }
}

fn case_row(row: &dyn Row) -> Result<CaseRow, SqlError> {
    Ok(CaseRow {
        id: row.text(0)?,
        workflow: row.text(1)?,
        status: row.text(2)?,
        created_at_ms: row.int(3)? as u64,
        updated_at_ms: row.int(4)? as u64,
        body: row.blob(5)?,
    })
}
