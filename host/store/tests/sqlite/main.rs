//! What only the SQLite store has: its file (opening, versions, the
//! integrity check), concurrency on one file, and a model of the whole.
//! History, forks, inputs and operations are tested on both engines by
//! the `store` target.

#[path = "../common/events.rs"]
mod events;

mod check;
mod concurrency;
mod damage;
mod model;
mod opening;
mod versions;

use std::path::PathBuf;

use events::*;
use hane_store::{SqliteConfig, SqliteStore, Synchronous};
use tempfile::TempDir;

/// A store in a temporary directory, reopened as often as a test likes.
struct Scratch {
    dir: TempDir,
    config: SqliteConfig,
}

impl Scratch {
    /// Durable by default, as the store is.
    fn new() -> Self {
        Self::with(SqliteConfig::new())
    }

    fn with(config: SqliteConfig) -> Self {
        Self {
            dir: tempfile::tempdir().expect("a temporary directory"),
            config,
        }
    }

    /// Unsynced, for tests that open many stores.
    fn fast() -> Self {
        let mut config = SqliteConfig::new();
        config.synchronous(Synchronous::Off);
        Self::with(config)
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("sessions.db")
    }

    fn open(&self) -> SqliteStore {
        SqliteStore::open(self.path(), &self.config).expect("the store opens")
    }
}

/// Makes the store in `scratch` look as an older hane left it: those kept
/// no commit mark beside the file.
fn older_than_the_mark(scratch: &Scratch) {
    let mark = format!("{}-mark", scratch.path().display());
    std::fs::remove_file(&mark).unwrap_or_else(|e| panic!("removing {mark}: {e}"));
}
