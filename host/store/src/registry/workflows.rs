//! What the registry keeps of workflows: one row per case, its body sealed
//! by its owner, its status beside it for finding the cases to resume.

use hane_core::{Lifecycle, workflow::CaseStatus};

use super::{CaseTable, state, state_changed};
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
    /// Where it is, stored as its name (`running`).
    pub status: CaseStatus,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
    /// The sealed case.
    pub body: Vec<u8>,
}

impl CaseTable<'_> {
    /// Stores a new case, in an initial status (`running`), committed
    /// before it returns (and synced as the registry's commits are).
    ///
    /// # Errors
    ///
    /// [`StoreError::IllegalTransition`] for a status a case does not
    /// start in, [`StoreError::AlreadyExists`] when a case has this id, or
    /// the database failed; then nothing changed.
    pub async fn insert(&self, case: CaseRow) -> Result<(), StoreError> {
        case.status.check_initial()?;
        self.registry
            .on("storing a new workflow case", move |db| {
                let inserted = db
                .execute(
                    "INSERT INTO workflow_cases (id, workflow, status, created_at, updated_at, body)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (id) DO NOTHING",
                    args![
                        &case.id,
                        &case.workflow,
                        case.status.as_str(),
                        case.created_at_ms as i64,
                        case.updated_at_ms as i64,
                        &case.body
                    ],
                )
                .map_err(failed("storing a new workflow case"))?;
                if inserted == 0 {
                    return Err(StoreError::AlreadyExists {
                        kind: CaseStatus::KIND,
                        id: case.id,
                    });
                }
                Ok(())
            })
            .await
    }

    /// Stores a case's new state, moving it from status `from` to its
    /// own, committed before it returns (and synced as the registry's
    /// commits are): what a case records before it starts a step's run
    /// must survive a crash. Applied only while the case is `from`.
    ///
    /// # Errors
    ///
    /// [`StoreError::IllegalTransition`] when a case does not go from
    /// `from` to `case.status`, [`StoreError::StateChanged`] when it is
    /// not `from` (or not stored), or the database failed; then nothing
    /// changed.
    pub async fn update(&self, from: CaseStatus, case: CaseRow) -> Result<(), StoreError> {
        from.check_transition(case.status)?;
        self.registry
            .on("storing a workflow case", move |db| {
                let what = "storing a workflow case";
                let changed = db
                    .execute(
                        "UPDATE workflow_cases SET status = ?3, updated_at = ?4, body = ?5
                     WHERE id = ?1 AND status = ?2",
                        args![
                            &case.id,
                            from.as_str(),
                            case.status.as_str(),
                            case.updated_at_ms as i64,
                            &case.body
                        ],
                    )
                    .map_err(failed(what))?;
                if changed == 1 {
                    return Ok(());
                }
                Err(state_changed(
                    db,
                    "SELECT status FROM workflow_cases WHERE id = ?1",
                    &case.id,
                    from,
                    what,
                ))
            })
            .await
    }

    /// The case with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn get(&self, id: &str) -> Result<Option<CaseRow>, StoreError> {
        let id = id.to_owned();
        self.registry
            .on("reading a workflow case", move |db| {
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
    pub async fn list(
        &self,
        workflow: Option<String>,
        status: Option<CaseStatus>,
        limit: u32,
    ) -> Result<Vec<CaseRow>, StoreError> {
        self.registry
            .on("listing workflow cases", move |db| {
                let limit = match limit {
                    0 => MAX_CASES_LISTED,
                    n => n.min(MAX_CASES_LISTED),
                };
                db.rows(
                    "SELECT id, workflow, status, created_at, updated_at, body FROM workflow_cases
                 WHERE (CAST(?1 AS TEXT) IS NULL OR workflow = ?1)
                   AND (CAST(?2 AS TEXT) IS NULL OR status = ?2)
                 ORDER BY created_at DESC, id DESC LIMIT ?3",
                    args![workflow.as_ref(), status.map(CaseStatus::as_str), limit],
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
        status: state(row, 2)?,
        created_at_ms: row.int(3)? as u64,
        updated_at_ms: row.int(4)? as u64,
        body: row.blob(5)?,
    })
}
