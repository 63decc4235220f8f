//! Items and schemas this build cannot read are refused by name, never
//! misread.

use std::error::Error as _;

use hane_store::{
    ConversationRow, NotAStore, ReceptionRow, Registry, SessionStore, SqliteStore, StoreError,
};
use hane_stored::EnvelopeError;

use crate::{Scratch, older_than_the_mark, run};

/// An event as a later hane that writes `session-event` version 8 stores it.
fn future_event_blob() -> Vec<u8> {
    let payload = [7u8, 1, 2, 3];
    let mut blob = b"HANE".to_vec();
    blob.extend(postcard::to_allocvec(&("session-event", 8u16, &payload[..])).unwrap());
    blob
}

#[tokio::test]
async fn an_event_of_a_newer_version_is_unreadable() {
    let scratch = Scratch::new();
    let (session, fork) = {
        let store = scratch.open();
        let session = store.create_session().await.unwrap().id;
        store
            .append(&session, vec![run("a"), run("b"), run("c")])
            .await
            .unwrap();
        let fork = store.fork(&session, 3).await.unwrap().id;
        (session, fork)
    };
    {
        let db = rusqlite::Connection::open(scratch.path()).unwrap();
        let changed = db
            .execute(
                "UPDATE events SET body = ?1
                 WHERE seq = 1 AND session = (SELECT sid FROM sessions WHERE id = ?2)",
                rusqlite::params![future_event_blob(), session.as_str()],
            )
            .unwrap();
        assert_eq!(changed, 1);
    }

    let store = scratch.open();
    let err = store.read(&session, 0..u64::MAX).await.unwrap_err();
    let StoreError::Unreadable { what, source } = &err else {
        panic!("expected Unreadable, got {err:?}");
    };
    assert_eq!(what, &format!("event 1 of session {session}"));
    assert_eq!(
        source,
        &EnvelopeError::UnsupportedVersion {
            kind: "session-event",
            found: 8,
            supported: &[1, 2, 3, 4, 5, 6, 7],
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "event 1 of session {session}: `session-event` version 8 is not supported: \
             this build reads versions 1, 2, 3, 4, 5, 6, 7"
        )
    );
    assert!(err.source().is_some());

    // The fork shares the event, and names where it is stored.
    let err = store.read(&fork, 0..u64::MAX).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Unreadable { what, .. } if *what == format!("event 1 of session {session}")),
        "{err:?}"
    );
    // The events around it still read.
    assert_eq!(store.read(&session, 0..1).await.unwrap().len(), 1);
    assert_eq!(store.read(&fork, 2..4).await.unwrap().len(), 2);
    // And the session still takes appends.
    store.append(&session, vec![run("d")]).await.unwrap();
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let scratch = Scratch::new();
    drop(scratch.open());
    {
        let db = rusqlite::Connection::open(scratch.path()).unwrap();
        db.pragma_update(None, "user_version", 99).unwrap();
    }
    let err = SqliteStore::open(scratch.path(), &scratch.config).unwrap_err();
    let StoreError::NewerSchema {
        path,
        found,
        supported,
    } = &err
    else {
        panic!("expected NewerSchema, got {err:?}");
    };
    assert_eq!((path, *found, *supported), (&scratch.path(), 99, 10));
    let message = err.to_string();
    assert!(message.contains("schema version 99"), "{message}");
    assert!(message.contains("up to 10"), "{message}");
}

#[tokio::test]
async fn a_file_that_is_not_a_store_is_refused() {
    let scratch = Scratch::new();
    std::fs::write(
        scratch.path(),
        b"not a database, only some words in a file.".repeat(100),
    )
    .unwrap();
    let err = SqliteStore::open(scratch.path(), &scratch.config).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotAStore {
                problem: NotAStore::NotSqlite,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "`{}` is not a SQLite database: it is not a hane store; give the right path, \
             or move it away to start a new store there",
            scratch.path().display()
        )
    );
}

#[tokio::test]
async fn the_schema_is_created_once_and_kept() {
    let scratch = Scratch::new();
    let session = {
        let store = scratch.open();
        store.create_session().await.unwrap().id
    };
    let version: u32 = rusqlite::Connection::open(scratch.path())
        .unwrap()
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, 10);
    let mode: String = rusqlite::Connection::open(scratch.path())
        .unwrap()
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let store = scratch.open();
    assert_eq!(store.list_sessions().await.unwrap()[0].id, session);
}

#[tokio::test]
async fn keys_of_a_version_3_store_decide_for_every_group_after_the_migration() {
    let scratch = Scratch::new();
    {
        let registry = Registry::open(scratch.path()).unwrap();
        let desk = ["fleet-desk".to_owned(), "lease desk".to_owned()];
        registry
            .api_keys()
            .add("desk", "approver", Some(&desk), "hash-desk")
            .await
            .unwrap();
    }
    // As version 3 left it: no `groups` column or conversations, one key
    // in the table.
    {
        let db = rusqlite::Connection::open(scratch.path()).unwrap();
        db.execute_batch(
            "DELETE FROM api_keys;
             ALTER TABLE api_keys DROP COLUMN groups;
             DROP TABLE receptions;
             DROP TABLE evaluations;
             DROP TABLE workflow_cases;
             DROP TABLE schedule_ticks;
             DROP INDEX runs_live;
             DROP TABLE leases;
             ALTER TABLE runs DROP COLUMN holder;
             DROP TABLE conversation_entries;
             DROP TABLE conversations;
             INSERT INTO api_keys (hash, name, role, created_at) VALUES ('hash-old', 'old', 'approver', 1);
             DROP TABLE commit_mark;
             PRAGMA user_version = 3;",
        )
        .unwrap();
    }
    older_than_the_mark(&scratch);
    let registry = Registry::open(scratch.path()).unwrap();
    let old = registry
        .api_keys()
        .by_hash("hash-old")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((old.name.as_str(), old.groups), ("old", None));
    let desk = ["fleet-desk".to_owned(), "lease desk".to_owned()];
    registry
        .api_keys()
        .add("desk", "approver", Some(&desk), "hash-desk")
        .await
        .unwrap();
    let listed = registry.api_keys().list().await.unwrap();
    let groups: Vec<_> = listed
        .iter()
        .map(|k| (k.name.as_str(), k.groups.clone()))
        .collect();
    assert_eq!(
        groups,
        [("desk", Some(desk.to_vec())), ("old", None)],
        "{listed:?}"
    );
    let version: u32 = rusqlite::Connection::open(scratch.path())
        .unwrap()
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, 10);
}

#[tokio::test]
async fn a_version_4_store_gains_conversations_and_keeps_its_keys() {
    let scratch = Scratch::new();
    {
        let registry = Registry::open(scratch.path()).unwrap();
        registry
            .api_keys()
            .add("ops", "operator", None, "hash-ops")
            .await
            .unwrap();
    }
    // As version 4 left it: no conversation tables.
    {
        let db = rusqlite::Connection::open(scratch.path()).unwrap();
        db.execute_batch(
            "DROP TABLE receptions;
             DROP TABLE evaluations;
             DROP TABLE workflow_cases;
             DROP TABLE schedule_ticks;
             DROP INDEX runs_live;
             DROP TABLE leases;
             ALTER TABLE runs DROP COLUMN holder;
             DROP TABLE conversation_entries;
             DROP TABLE conversations;
             DROP TABLE commit_mark;
             PRAGMA user_version = 4;",
        )
        .unwrap();
    }
    older_than_the_mark(&scratch);
    let registry = Registry::open(scratch.path()).unwrap();
    assert_eq!(
        registry
            .api_keys()
            .by_hash("hash-ops")
            .await
            .unwrap()
            .unwrap()
            .name,
        "ops"
    );
    registry
        .conversations()
        .create(
            ConversationRow {
                id: "conv_a".to_owned(),
                agent: "a".to_owned(),
                created_at_ms: 1,
                updated_at_ms: 1,
                body: b"body of conv_a".to_vec(),
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        registry.conversations().list(None, 0).await.unwrap().len(),
        1
    );
    let version: u32 = rusqlite::Connection::open(scratch.path())
        .unwrap()
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, 10);
}

#[tokio::test]
async fn a_version_5_store_gains_requests_and_keeps_its_conversations() {
    let scratch = Scratch::new();
    {
        let registry = Registry::open(scratch.path()).unwrap();
        registry
            .conversations()
            .create(
                ConversationRow {
                    id: "conv_a".to_owned(),
                    agent: "fleet-assistant".to_owned(),
                    created_at_ms: 1,
                    updated_at_ms: 1,
                    body: b"conversation".to_vec(),
                },
                None,
            )
            .await
            .unwrap();
    }
    // As version 5 left it: no requests table.
    {
        let db = rusqlite::Connection::open(scratch.path()).unwrap();
        db.execute_batch("DROP TABLE receptions; DROP TABLE evaluations; DROP TABLE workflow_cases; DROP TABLE schedule_ticks; DROP INDEX runs_live; DROP TABLE leases; ALTER TABLE runs DROP COLUMN holder; DROP TABLE commit_mark; PRAGMA user_version = 5;")
            .unwrap();
    }
    older_than_the_mark(&scratch);
    let registry = Registry::open(scratch.path()).unwrap();
    assert_eq!(
        registry
            .conversations()
            .get("conv_a")
            .await
            .unwrap()
            .unwrap()
            .body,
        b"conversation"
    );
    registry
        .receptions()
        .add(ReceptionRow {
            id: "req_a".to_owned(),
            created_at_ms: 10,
            run: None,
            body: b"request".to_vec(),
        })
        .await
        .unwrap();
    assert_eq!(registry.receptions().list(0).await.unwrap().len(), 1);
    let version: u32 = rusqlite::Connection::open(scratch.path())
        .unwrap()
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, 10);
}
