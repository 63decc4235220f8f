//! The session store: append-only session history that can be forked, with
//! durable input deduplication and queryable operation state.
//!
//! [`SessionStore`] is the interface the coordinator uses;
//! [`SqliteStore`] is the embedded default (one file, WAL mode, one writer
//! with group commit); only a path where nothing is becomes a new store.
//! [`check`] reads a whole store, for `hane store check`.
//!
//! # Examples
//!
//! ```
//! use hane_core::{Input, InputKind, JsonText, SessionEvent};
//! use hane_store::{SessionStore, SqliteConfig, SqliteStore, StoreError};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = SqliteStore::open(dir.path().join("sessions.db"), &SqliteConfig::new())?;
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! rt.block_on(async {
//!     let session = store.create_session().await?;
//!     let accepted = SessionEvent::InputAccepted {
//!         input: Input {
//!             id: "order-17".parse().unwrap(),
//!             kind: InputKind::External {
//!                 payload: JsonText::parse(r#"{"order":17}"#).unwrap(),
//!             },
//!         },
//!     };
//!     store.append(&session.id, vec![accepted.clone()]).await?;
//!     // A redelivered input is refused, even after a restart.
//!     let again = store.append(&session.id, vec![accepted]).await;
//!     assert!(matches!(again, Err(StoreError::DuplicateInput { .. })));
//!     assert_eq!(store.session(&session.id).await?.len, 1);
//!     Ok::<_, StoreError>(())
//! })?;
//! # Ok(())
//! # }
//! ```

mod check;
mod mark;
mod postgres;
mod query;
pub mod registry;
mod schema;
mod sql;
mod sqlite;
mod store;
mod writer;

pub use check::{CheckReport, Problem, ReadRelease, check};
pub use mark::{Damage, Recovered, recover};
pub use postgres::PostgresStore;
pub use registry::{
    ActionQuery, ActionRow, AlertRow, ApiKeyInfo, BudgetUsage, CaseRow, ConversationRow, EntryRow,
    EvaluationRow, LeaseRow, NewRelease, OverrideRow, ReceptionRow, Registry, RegistryTx,
    ReleaseInfo, RunQuery, RunRow, TakenRun, TaskRow, TickEnd, TickRow, UsageDelta,
};
pub use sql::postgres::redact as without_password;
pub use sqlite::{SqliteConfig, SqliteStore, Synchronous};
pub use store::{
    Appended, ForkPoint, NotAStore, OperationRecord, SessionInfo, SessionStore, StoreError,
    StoreFuture,
};

/// The PostgreSQL address `store` is, if it is one (`postgres://…` or
/// `postgresql://…`) rather than a file's path: where a store is named by
/// a path (`--store`, `HANE_STORE`), a database may be named instead.
pub fn postgres_url(store: &std::path::Path) -> Option<&str> {
    let text = store.to_str()?;
    (text.starts_with("postgres://") || text.starts_with("postgresql://")).then_some(text)
}
