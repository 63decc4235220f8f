//! What the registry keeps of reception: one row per request answered,
//! its body sealed by its owner.

use super::ReceptionTable;
use crate::StoreError;
use crate::sql::{Query, Row, SqlError, args, failed};

/// The most requests one listing returns.
pub const MAX_RECEPTIONS_LISTED: u32 = 1000;

/// A request reception answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceptionRow {
    /// `req_…`.
    pub id: String,
    /// When it was answered, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// The run it started, if any.
    pub run: Option<String>,
    /// The sealed reception.
    pub body: Vec<u8>,
}

impl ReceptionTable<'_> {
    /// Stores a request reception answered.
    ///
    /// # Errors
    ///
    /// The database failed, or a request with this id is stored; then
    /// nothing was stored.
    pub async fn add(&self, reception: ReceptionRow) -> Result<(), StoreError> {
        self.registry
            .on("storing a request", move |db| {
                db.execute(
                    "INSERT INTO receptions (id, created_at, run, body) VALUES (?1, ?2, ?3, ?4)",
                    args![
                        &reception.id,
                        reception.created_at_ms as i64,
                        reception.run.as_ref(),
                        &reception.body
                    ],
                )
                .map(drop)
                .map_err(failed("storing a request"))
            })
            .await
    }

    /// The request with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn get(&self, id: &str) -> Result<Option<ReceptionRow>, StoreError> {
        let id = id.to_owned();
        self.registry
            .on("reading a request", move |db| {
                db.row(
                    "SELECT id, created_at, run, body FROM receptions WHERE id = ?1",
                    args![&id],
                    reception_row,
                )
                .map_err(failed("reading a request"))
            })
            .await
    }

    /// Requests, newest first; at most `limit` (capped at
    /// [`MAX_RECEPTIONS_LISTED`]; 0 means the cap).
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn list(&self, limit: u32) -> Result<Vec<ReceptionRow>, StoreError> {
        self.registry
            .on("listing requests", move |db| {
                let limit = match limit {
                    0 => MAX_RECEPTIONS_LISTED,
                    n => n.min(MAX_RECEPTIONS_LISTED),
                };
                db.rows(
                    "SELECT id, created_at, run, body FROM receptions
                 ORDER BY created_at DESC, id DESC LIMIT ?1",
                    args![limit],
                    reception_row,
                )
                .map_err(failed("listing requests"))
            })
            .await
    }
}

fn reception_row(row: &dyn Row) -> Result<ReceptionRow, SqlError> {
    Ok(ReceptionRow {
        id: row.text(0)?,
        created_at_ms: row.int(1)? as u64,
        run: row.opt_text(2)?,
        body: row.blob(3)?,
    })
}
