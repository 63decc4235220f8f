//! What the registry keeps of reception: one row per request answered,
//! its body sealed by its owner.

use rusqlite::{OptionalExtension, params};

use super::{Registry, db};
use crate::StoreError;

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

impl Registry {
    /// Stores a request reception answered.
    ///
    /// # Errors
    ///
    /// The database failed, or a request with this id is stored; then
    /// nothing was stored.
    pub async fn add_reception(&self, reception: ReceptionRow) -> Result<(), StoreError> {
        self.with("storing a request", move |conn| {
            conn.prepare_cached(
                "INSERT INTO receptions (id, created_at, run, body) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    reception.id,
                    reception.created_at_ms as i64,
                    reception.run,
                    reception.body
                ])
            })
            .map(drop)
            .map_err(db("storing a request"))
        })
        .await
    }

    /// The request with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn reception(&self, id: &str) -> Result<Option<ReceptionRow>, StoreError> {
        let id = id.to_owned();
        self.with("reading a request", move |conn| {
            conn.prepare_cached("SELECT id, created_at, run, body FROM receptions WHERE id = ?1")
                .and_then(|mut stmt| stmt.query_row([id], reception_row).optional())
                .map_err(db("reading a request"))
        })
        .await
    }

    /// Requests, newest first; at most `limit` (capped at
    /// [`MAX_RECEPTIONS_LISTED`]; 0 means the cap).
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn receptions(&self, limit: u32) -> Result<Vec<ReceptionRow>, StoreError> {
        self.with("listing requests", move |conn| {
            let limit = match limit {
                0 => MAX_RECEPTIONS_LISTED,
                n => n.min(MAX_RECEPTIONS_LISTED),
            };
            let failed = db("listing requests");
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, created_at, run, body FROM receptions
                     ORDER BY created_at DESC, id DESC LIMIT ?1",
                )
                .map_err(&failed)?;
            let rows = stmt.query_map([limit], reception_row).map_err(&failed)?;
            rows.collect::<Result<_, _>>().map_err(&failed)
        })
        .await
    }
}

fn reception_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ReceptionRow> {
    Ok(ReceptionRow {
        id: row.get(0)?,
        created_at_ms: row.get::<_, i64>(1)? as u64,
        run: row.get(2)?,
        body: row.get(3)?,
    })
}
