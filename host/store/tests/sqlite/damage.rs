//! A damaged write-ahead log: commits the store acknowledged and its log
//! no longer replays are reported on open and by the check, never
//! silently dropped; a torn write of an unacknowledged commit is not
//! damage.

use std::path::{Path, PathBuf};

use hane_store::{Damage, Registry, SessionStore as _, SqliteStore, StoreError, check, recover};

use super::*;

const FRAME_HEADER: usize = 24;
const LOG_HEADER: usize = 32;

/// The store's files as a crash would leave them: copied while the store
/// is open, its last commits in the log only.
fn crashed(scratch: &Scratch) -> TempDir {
    let copy = tempfile::tempdir().expect("a temporary directory");
    for suffix in ["", "-wal", "-mark"] {
        let from = beside(&scratch.path(), suffix);
        std::fs::copy(&from, beside(&copy.path().join("sessions.db"), suffix))
            .unwrap_or_else(|e| panic!("copying {}: {e}", from.display()));
    }
    copy
}

fn beside(db: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", db.display()))
}

/// Bytes that look like nothing: a fixed xorshift stream.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A store with five runs' worth of events, each append synced, left as a
/// crash would leave it.
async fn five_appends() -> (TempDir, hane_core::SessionId) {
    let scratch = Scratch::new();
    let store = scratch.open();
    let session = store.create_session().await.unwrap().id;
    for state in ["queued", "running", "waiting", "running", "done"] {
        store.append(&session, vec![run(state)]).await.unwrap();
    }
    let copy = crashed(&scratch);
    drop(store);
    (copy, session)
}

fn open(dir: &TempDir) -> Result<SqliteStore, StoreError> {
    SqliteStore::open(dir.path().join("sessions.db"), &SqliteConfig::new())
}

/// Opening refuses the store, names the loss and keeps the log; so does
/// every later open, the check reports it, and recovery opens it as it is.
async fn assert_reported(dir: &TempDir, damaged_log: &[u8]) {
    let db = dir.path().join("sessions.db");
    let refused = open(dir).expect_err("a damaged store is refused");
    let StoreError::Damaged {
        path,
        damage:
            Damage::LostCommits {
                holds,
                acknowledged,
                kept,
            },
    } = &refused
    else {
        panic!("not reported as lost commits: {refused}");
    };
    assert_eq!(path, &db);
    assert!(holds < acknowledged, "{refused}");
    let kept = kept.clone().expect("the log is kept");
    assert_eq!(kept, beside(&db, "-wal.damaged"));
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        damaged_log,
        "the log is kept as it was"
    );
    let message = refused.to_string();
    assert!(
        message.contains("acknowledged") && message.contains("-wal.damaged"),
        "{message}"
    );

    // Refused again, whatever the first open's close did to the log.
    assert!(matches!(open(dir), Err(StoreError::Damaged { .. })));
    let report = check(&db, |_| Ok(())).unwrap();
    assert!(!report.is_sound());
    assert!(
        matches!(&report.damage, Some(Damage::LostCommits { kept: Some(k), .. }) if *k == kept),
        "{:?}",
        report.damage
    );
    // Not copied twice.
    assert!(!beside(&db, "-wal.damaged.2").exists());

    let recovered = recover(&db).unwrap();
    assert!(recovered.damage.is_some());
    assert_eq!(recovered.holds, *holds);
    let store = open(dir).expect("a recovered store opens");
    let session = store.create_session().await.expect("and takes writes");
    store
        .append(&session.id, vec![run("queued")])
        .await
        .unwrap();
    drop(store);
    assert!(check(&db, |_| Ok(())).unwrap().is_sound());
    assert!(recover(&db).unwrap().damage.is_none());
    assert!(
        kept.exists(),
        "recovery leaves the damaged log where it was kept"
    );
}

#[tokio::test]
async fn a_log_left_by_a_crash_replays_everything() {
    let (dir, session) = five_appends().await;
    let store = open(&dir).expect("an undamaged store opens");
    assert_eq!(history(&store, &session).await.len(), 5);
    drop(store);
    assert!(
        check(dir.path().join("sessions.db"), |_| Ok(()))
            .unwrap()
            .is_sound()
    );
}

#[tokio::test]
async fn a_first_frame_with_flipped_bytes_is_reported() {
    let (dir, _) = five_appends().await;
    let log = beside(&dir.path().join("sessions.db"), "-wal");
    let mut bytes = std::fs::read(&log).unwrap();
    let at = LOG_HEADER + FRAME_HEADER + 200;
    for byte in &mut bytes[at..at + 64] {
        *byte = !*byte;
    }
    std::fs::write(&log, &bytes).unwrap();
    assert_reported(&dir, &bytes).await;
}

#[tokio::test]
async fn a_log_header_of_other_bytes_is_reported() {
    let (dir, _) = five_appends().await;
    let log = beside(&dir.path().join("sessions.db"), "-wal");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[..LOG_HEADER].copy_from_slice(&noise(LOG_HEADER));
    std::fs::write(&log, &bytes).unwrap();
    assert_reported(&dir, &bytes).await;
}

#[tokio::test]
async fn a_log_of_random_bytes_is_reported() {
    let (dir, _) = five_appends().await;
    let log = beside(&dir.path().join("sessions.db"), "-wal");
    let len = std::fs::metadata(&log).unwrap().len() as usize;
    let bytes = noise(len);
    std::fs::write(&log, &bytes).unwrap();
    assert_reported(&dir, &bytes).await;
}

#[tokio::test]
async fn an_older_copy_of_the_file_is_reported() {
    let scratch = Scratch::new();
    let store = scratch.open();
    let session = store.create_session().await.unwrap().id;
    drop(store);
    let older = std::fs::read(scratch.path()).unwrap();
    let store = scratch.open();
    store.append(&session, vec![run("queued")]).await.unwrap();
    drop(store);
    std::fs::write(scratch.path(), older).unwrap();
    let refused = scratch_open(&scratch).expect_err("refused");
    assert!(
        matches!(
            &refused,
            StoreError::Damaged {
                damage: Damage::LostCommits { kept: None, .. },
                ..
            }
        ),
        "{refused}"
    );
}

fn scratch_open(scratch: &Scratch) -> Result<SqliteStore, StoreError> {
    SqliteStore::open(scratch.path(), &SqliteConfig::new())
}

#[tokio::test]
async fn a_torn_unsynced_commit_is_not_damage() {
    let scratch = Scratch::new();
    let store = scratch.open();
    let session = store.create_session().await.unwrap().id;
    store.append(&session, vec![run("queued")]).await.unwrap();
    // Not synced: a machine crash may lose it, as documented.
    store
        .append_deferred(&session, vec![run("running")])
        .await
        .unwrap();
    let dir = crashed(&scratch);
    drop(store);
    let log = beside(&dir.path().join("sessions.db"), "-wal");
    let len = std::fs::metadata(&log).unwrap().len();
    // The last frame written half.
    let file = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    file.set_len(len - 2048).unwrap();
    drop(file);
    let store = open(&dir).expect("a torn unsynced commit is not damage");
    assert_eq!(history(&store, &session).await, [run("queued")]);
}

#[tokio::test]
async fn the_registrys_commits_are_counted_too() {
    let scratch = Scratch::new();
    let registry = Registry::open(scratch.path()).unwrap();
    for name in ["one", "two", "three"] {
        registry
            .api_keys()
            .add(name, "admin", None, &format!("hash-{name}"))
            .await
            .unwrap();
    }
    let dir = crashed(&scratch);
    drop(registry);
    let db = dir.path().join("sessions.db");
    let log = beside(&db, "-wal");
    let bytes = noise(std::fs::metadata(&log).unwrap().len() as usize);
    std::fs::write(&log, &bytes).unwrap();
    let refused = Registry::open(&db).expect_err("refused");
    assert!(
        matches!(
            &refused,
            StoreError::Damaged {
                damage: Damage::LostCommits {
                    holds: 0,
                    acknowledged: 3,
                    ..
                },
                ..
            }
        ),
        "{refused}"
    );
}

#[tokio::test]
async fn a_mark_that_does_not_read_is_reported_and_recovered() {
    let scratch = Scratch::new();
    let store = scratch.open();
    store.create_session().await.unwrap();
    drop(store);
    let mark = beside(&scratch.path(), "-mark");
    std::fs::write(&mark, b"not a mark").unwrap();
    let refused = scratch_open(&scratch).expect_err("refused");
    assert!(
        matches!(
            &refused,
            StoreError::Damaged {
                damage: Damage::UnreadableMark { len: 10, .. },
                ..
            }
        ),
        "{refused}"
    );
    recover(scratch.path()).unwrap();
    scratch_open(&scratch).expect("opens after recovery");
}

#[tokio::test]
async fn a_new_store_does_not_inherit_a_removed_stores_mark() {
    let scratch = Scratch::new();
    let store = scratch.open();
    store.create_session().await.unwrap();
    drop(store);
    assert!(beside(&scratch.path(), "-mark").exists());
    std::fs::remove_file(scratch.path()).unwrap();
    let store = scratch_open(&scratch).expect("a new store opens");
    assert!(store.created());
}
