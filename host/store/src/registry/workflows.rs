//! What the registry keeps of workflows: one row per case, its body sealed
//! by its owner, its status beside it for finding the cases to resume.

use rusqlite::{OptionalExtension, params};

use super::{Registry, db};
use crate::StoreError;

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
        self.with("storing a workflow case", move |conn| {
            conn.prepare_cached(
                "INSERT INTO workflow_cases (id, workflow, status, created_at, updated_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET status = ?3, updated_at = ?5, body = ?6",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    case.id,
                    case.workflow,
                    case.status,
                    case.created_at_ms as i64,
                    case.updated_at_ms as i64,
                    case.body
                ])
            })
            .map(drop)
            .map_err(db("storing a workflow case"))
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
        self.with("reading a workflow case", move |conn| {
            conn.prepare_cached(
                "SELECT id, workflow, status, created_at, updated_at, body
                 FROM workflow_cases WHERE id = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([id], case_row).optional())
            .map_err(db("reading a workflow case"))
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
        self.with("listing workflow cases", move |conn| {
            let limit = match limit {
                0 => MAX_CASES_LISTED,
                n => n.min(MAX_CASES_LISTED),
            };
            let failed = db("listing workflow cases");
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, workflow, status, created_at, updated_at, body FROM workflow_cases
                     WHERE (?1 IS NULL OR workflow = ?1) AND (?2 IS NULL OR status = ?2)
                     ORDER BY created_at DESC, id DESC LIMIT ?3",
                )
                .map_err(&failed)?;
            let rows = stmt
                .query_map(params![workflow, status, limit], case_row)
                .map_err(&failed)?;
            rows.collect::<Result<_, _>>().map_err(&failed)
        })
        .await
    }
}

fn case_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<CaseRow> {
    Ok(CaseRow {
        id: row.get(0)?,
        workflow: row.get(1)?,
        status: row.get(2)?,
        created_at_ms: row.get::<_, i64>(3)? as u64,
        updated_at_ms: row.get::<_, i64>(4)? as u64,
        body: row.get(5)?,
    })
}
