//! The store against its contract, written once and run on both engines
//! it lives on: sessions (history, forks, inputs, operations) and the
//! registry. Each test is an `async fn` taking a [`Store`], and
//! [`on_both!`] makes of it one test on a SQLite file and one on a
//! PostgreSQL database of a real server.

#[path = "../common/events.rs"]
mod events;

mod conversations;
mod evaluations;
mod fork;
mod history;
mod leases;
mod lifecycles;
mod operations;
mod postgres;
mod receptions;
mod schedules;

use std::sync::Arc;

use events::*;
use hane_store::{PostgresStore, Registry, SessionStore, SqliteConfig, SqliteStore};
use hane_test_support::postgres::Database;
use tempfile::TempDir;

/// A store's sessions, on either engine.
type Sessions = Arc<dyn SessionStore>;

/// An empty store on one engine.
enum Store {
    Sqlite(TempDir),
    Postgres(Database),
}

impl Store {
    fn sqlite() -> Self {
        Store::Sqlite(tempfile::tempdir().expect("a temporary directory"))
    }

    fn postgres() -> Self {
        Store::Postgres(hane_test_support::postgres::database())
    }

    /// Its sessions, opened anew: what one more process opening the store
    /// would have.
    fn sessions(&self) -> Sessions {
        match self {
            Store::Sqlite(dir) => Arc::new(
                SqliteStore::open(dir.path().join("hane.db"), &SqliteConfig::new())
                    .expect("the store opens"),
            ) as Sessions,
            Store::Postgres(db) => {
                Arc::new(PostgresStore::open(&db.url).expect("the store opens")) as Sessions
            }
        }
    }

    /// A registry on it, with a connection of its own: what one more
    /// process opening the store would have.
    fn open(&self) -> Registry {
        match self {
            Store::Sqlite(dir) => Registry::open(dir.path().join("hane.db")),
            Store::Postgres(db) => Registry::open_postgres(&db.url),
        }
        .expect("the registry opens")
    }
}

/// For each `async fn NAME(store: Store)` named, a module `NAME` with the
/// tests `sqlite` and `postgres`.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn sqlite() {
                    super::$name($crate::Store::sqlite()).await;
                }

                #[tokio::test]
                async fn postgres() {
                    super::$name($crate::Store::postgres()).await;
                }
            }
        )*
    };
}
pub(crate) use on_both;
