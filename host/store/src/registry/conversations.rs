//! What the registry keeps of conversations: one row per conversation and
//! its entries in order, each body sealed by its owner.

use super::ConversationTable;
use crate::StoreError;
use crate::sql::{Query, Row, SqlError, args, failed};

/// The most conversations one listing returns.
pub const MAX_CONVERSATIONS_LISTED: u32 = 1000;

/// A stored conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationRow {
    /// `conv_…`.
    pub id: String,
    /// The agent its messages' runs are runs of.
    pub agent: String,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// When its last entry was added.
    pub updated_at_ms: u64,
    /// The sealed conversation.
    pub body: Vec<u8>,
}

/// One entry of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryRow {
    /// Its place in the conversation, from 0.
    pub seq: u64,
    /// When it was added.
    pub at_ms: u64,
    /// The sealed entry.
    pub body: Vec<u8>,
}

impl ConversationTable<'_> {
    /// Stores a new conversation, with `first` as its first entry when
    /// given (a saved memory it starts from), in one transaction.
    ///
    /// # Errors
    ///
    /// The database failed, or a conversation with this id exists; then
    /// nothing was stored.
    pub async fn create(
        &self,
        conversation: ConversationRow,
        first: Option<Vec<u8>>,
    ) -> Result<(), StoreError> {
        self.registry
            .tx("creating a conversation", move |db| {
                let what = failed("creating a conversation");
                db.execute(
                    "INSERT INTO conversations (id, agent, created_at, updated_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                    args![
                        &conversation.id,
                        &conversation.agent,
                        conversation.created_at_ms as i64,
                        conversation.updated_at_ms as i64,
                        &conversation.body
                    ],
                )
                .map_err(&what)?;
                if let Some(body) = first {
                    db.execute(
                        "INSERT INTO conversation_entries (conversation, seq, at, body)
                     VALUES (?1, 0, ?2, ?3)",
                        args![&conversation.id, conversation.created_at_ms as i64, &body],
                    )
                    .map_err(&what)?;
                }
                Ok(())
            })
            .await
    }

    /// The conversation with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn get(&self, id: &str) -> Result<Option<ConversationRow>, StoreError> {
        let id = id.to_owned();
        self.registry
            .on("reading a conversation", move |db| {
                db.row(
                "SELECT id, agent, created_at, updated_at, body FROM conversations WHERE id = ?1",
                args![&id],
                conversation_row,
            )
            .map_err(failed("reading a conversation"))
            })
            .await
    }

    /// Conversations, of `agent` when given, most recently changed first;
    /// at most `limit` (capped at [`MAX_CONVERSATIONS_LISTED`]; 0 means
    /// the cap).
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn list(
        &self,
        agent: Option<String>,
        limit: u32,
    ) -> Result<Vec<ConversationRow>, StoreError> {
        self.registry
            .on("listing conversations", move |db| {
                let limit = match limit {
                    0 => MAX_CONVERSATIONS_LISTED,
                    n => n.min(MAX_CONVERSATIONS_LISTED),
                };
                db.rows(
                    "SELECT id, agent, created_at, updated_at, body FROM conversations
                 WHERE (CAST(?1 AS TEXT) IS NULL OR agent = ?1)
                 ORDER BY updated_at DESC, id DESC LIMIT ?2",
                    args![agent.as_ref(), limit],
                    conversation_row,
                )
                .map_err(failed("listing conversations"))
            })
            .await
    }

    /// Adds `body` as the next entry of conversation `id` and returns its
    /// place; the conversation's `updated_at` becomes `at_ms`.
    ///
    /// # Errors
    ///
    /// No conversation has this id ([`StoreError::Database`] naming it), or
    /// the database failed; then nothing was added.
    pub async fn add_entry(&self, id: &str, at_ms: u64, body: Vec<u8>) -> Result<u64, StoreError> {
        let id = id.to_owned();
        self.registry.tx("adding to a conversation", move |db| {
            let what = failed("adding to a conversation");
            let changed = db
                .execute(
                    "UPDATE conversations
                     SET updated_at = CASE WHEN updated_at > ?2 THEN updated_at ELSE ?2 END
                     WHERE id = ?1",
                    args![&id, at_ms as i64],
                )
                .map_err(&what)?;
            if changed == 0 {
                return Err(StoreError::Database(format!(
                    "adding to a conversation: no conversation `{id}`"
                )));
            }
            let seq = db
                .row(
                    "SELECT COALESCE(MAX(seq) + 1, 0) FROM conversation_entries WHERE conversation = ?1",
                    args![&id],
                    |row| row.int(0),
                )
                .map_err(&what)?
                .unwrap_or(0);
            db.execute(
                "INSERT INTO conversation_entries (conversation, seq, at, body) VALUES (?1, ?2, ?3, ?4)",
                args![&id, seq, at_ms as i64, &body],
            )
            .map_err(&what)?;
            Ok(seq as u64)
        })
        .await
    }

    /// The entries of conversation `id`, in order; none for a conversation
    /// that has none or does not exist.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn entries(&self, id: &str) -> Result<Vec<EntryRow>, StoreError> {
        let id = id.to_owned();
        self.registry.on("reading a conversation", move |db| {
            db.rows(
                "SELECT seq, at, body FROM conversation_entries WHERE conversation = ?1 ORDER BY seq",
                args![&id],
                |row| {
                    Ok(EntryRow {
                        seq: row.int(0)? as u64,
                        at_ms: row.int(1)? as u64,
                        body: row.blob(2)?,
                    })
                },
            )
            .map_err(failed("reading a conversation"))
        })
        .await
    }
}

fn conversation_row(row: &dyn Row) -> Result<ConversationRow, SqlError> {
    Ok(ConversationRow {
        id: row.text(0)?,
        agent: row.text(1)?,
        created_at_ms: row.int(2)? as u64,
        updated_at_ms: row.int(3)? as u64,
        body: row.blob(4)?,
    })
}
