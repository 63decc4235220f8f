//! Opening a store: only a path where nothing is makes a new one; an
//! empty, cut short or foreign file is refused, named, and left as it is.

use std::path::Path;

use hane_store::{NotAStore, Registry, SessionStore, SqliteStore, StoreError, Synchronous};

use crate::{Scratch, run};

/// What opening `path` as a store says, by both openers; the file is
/// left as it was.
fn refused(scratch: &Scratch, path: &Path) -> (NotAStore, String) {
    let before = std::fs::read(path).ok();
    let err = SqliteStore::open(path, &scratch.config).unwrap_err();
    let StoreError::NotAStore {
        path: named,
        problem,
    } = &err
    else {
        panic!("expected NotAStore, got {err:?}");
    };
    assert_eq!(named, path);
    let again = Registry::open(path).unwrap_err();
    assert_eq!(again.to_string(), err.to_string());
    assert_eq!(
        std::fs::read(path).ok(),
        before,
        "the file is left as it was"
    );
    (*problem, err.to_string())
}

/// A store in `scratch` with a session of a few events, closed.
async fn stored(scratch: &Scratch) {
    let store = scratch.open();
    let session = store.create_session().await.unwrap().id;
    store
        .append(&session, vec![run("a"), run("b")])
        .await
        .unwrap();
}

#[tokio::test]
async fn an_empty_file_is_refused_never_taken_for_a_new_store() {
    let scratch = Scratch::new();
    std::fs::write(scratch.path(), b"").unwrap();
    let (problem, message) = refused(&scratch, &scratch.path());
    assert_eq!(problem, NotAStore::Empty);
    assert_eq!(
        message,
        format!(
            "`{}` is empty: it is not a hane store; remove it to start a new store, \
             or give the right path",
            scratch.path().display()
        )
    );
}

#[tokio::test]
async fn a_store_cut_short_is_refused() {
    let scratch = Scratch::new();
    stored(&scratch).await;
    let whole = std::fs::read(scratch.path()).unwrap();
    assert!(whole.len() > 4096, "{}", whole.len());
    // Within the header, and then past it but not at a page's end.
    for len in [60, 4096 + 1000] {
        std::fs::write(scratch.path(), &whole[..len]).unwrap();
        let (problem, message) = refused(&scratch, &scratch.path());
        assert_eq!(problem, NotAStore::Truncated { len: len as u64 });
        assert!(message.contains("cut short"), "{message}");
        assert!(message.contains("the store is damaged"), "{message}");
    }
}

#[tokio::test]
async fn a_database_without_hane_s_tables_is_refused() {
    let scratch = Scratch::new();
    {
        let db = rusqlite::Connection::open(scratch.path()).unwrap();
        db.execute_batch("CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine');")
            .unwrap();
    }
    let (problem, message) = refused(&scratch, &scratch.path());
    assert_eq!(problem, NotAStore::ForeignDatabase);
    assert!(
        message.ends_with(
            "is a SQLite database without hane's tables: it is not a hane store; \
             give the right path, or move it away to start a new store there"
        ),
        "{message}"
    );
    // Another program's schema version does not make it a store either.
    {
        let db = rusqlite::Connection::open(scratch.path()).unwrap();
        db.pragma_update(None, "user_version", 3).unwrap();
    }
    assert_eq!(
        refused(&scratch, &scratch.path()).0,
        NotAStore::ForeignDatabase
    );
    let notes: String = rusqlite::Connection::open(scratch.path())
        .unwrap()
        .query_row("SELECT text FROM notes", [], |row| row.get(0))
        .unwrap();
    assert_eq!(notes, "mine");
}

#[tokio::test]
async fn a_directory_is_refused() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.path()).unwrap();
    let err = SqliteStore::open(scratch.path(), &scratch.config).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotAStore {
                problem: NotAStore::Directory,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_log_of_a_removed_store_is_not_taken_into_a_new_one() {
    let scratch = Scratch::new();
    let mut log = scratch.path().into_os_string();
    log.push("-wal");
    std::fs::write(&log, b"the log of a store removed without it").unwrap();
    let err = SqliteStore::open(scratch.path(), &scratch.config).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotAStore {
                problem: NotAStore::StrayLog,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!scratch.path().exists());
}

#[tokio::test]
async fn only_a_path_where_nothing_is_makes_a_store_and_says_so() {
    let scratch = Scratch::new();
    let store = scratch.open();
    assert!(store.created());
    let session = store.create_session().await.unwrap().id;
    drop(store);
    let store = scratch.open();
    assert!(!store.created());
    assert_eq!(store.list_sessions().await.unwrap()[0].id, session);
    assert!(!Registry::open(scratch.path()).unwrap().created());
    drop(store);
    // Nothing but the store and its commit mark is left beside it.
    let mut names: Vec<_> = std::fs::read_dir(scratch.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["sessions.db", "sessions.db-mark"]);
}

#[test]
fn openers_racing_for_a_new_store_make_one() {
    let scratch = Scratch::new();
    let path = scratch.path();
    let opened: Vec<Registry> = std::thread::scope(|scope| {
        let openers: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| Registry::open_with(&path, Synchronous::Off)))
            .collect();
        openers
            .into_iter()
            .map(|o| o.join().unwrap().expect("every opener opens the store"))
            .collect()
    });
    let made = opened.iter().filter(|r| r.created()).count();
    assert_eq!(made, 1);
}
