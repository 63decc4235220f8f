//! Requests reception answered, in the registry: read back, listed newest
//! first, an id stored once, and a store of the schema before them
//! migrated without losing its conversations.

use hane_store::{ConversationRow, ReceptionRow, Registry};

use crate::Scratch;

fn reception(id: &str, at: u64, run: Option<&str>) -> ReceptionRow {
    ReceptionRow {
        id: id.to_owned(),
        created_at_ms: at,
        run: run.map(str::to_owned),
        body: format!("body of {id}").into_bytes(),
    }
}

#[tokio::test]
async fn requests_are_read_back_and_listed_newest_first() {
    let scratch = Scratch::new();
    let registry = Registry::open(scratch.path()).unwrap();
    registry
        .add_reception(reception("req_a", 10, Some("run_a")))
        .await
        .unwrap();
    registry
        .add_reception(reception("req_b", 30, None))
        .await
        .unwrap();
    registry
        .add_reception(reception("req_c", 20, None))
        .await
        .unwrap();
    assert_eq!(
        registry.reception("req_a").await.unwrap(),
        Some(reception("req_a", 10, Some("run_a")))
    );
    assert_eq!(registry.reception("req_x").await.unwrap(), None);
    let listed: Vec<String> = registry
        .receptions(0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, ["req_b", "req_c", "req_a"]);
    assert_eq!(registry.receptions(1).await.unwrap()[0].id, "req_b");
}

#[tokio::test]
async fn a_request_id_is_stored_once_and_the_first_is_kept() {
    let scratch = Scratch::new();
    let registry = Registry::open(scratch.path()).unwrap();
    registry
        .add_reception(reception("req_a", 10, None))
        .await
        .unwrap();
    let mut again = reception("req_a", 11, Some("run_b"));
    again.body = b"another".to_vec();
    assert!(registry.add_reception(again).await.is_err());
    assert_eq!(
        registry.reception("req_a").await.unwrap(),
        Some(reception("req_a", 10, None))
    );
}

#[tokio::test]
async fn a_version_5_store_gains_requests_and_keeps_its_conversations() {
    let scratch = Scratch::new();
    {
        let registry = Registry::open(scratch.path()).unwrap();
        registry
            .create_conversation(
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
        db.execute_batch("DROP TABLE receptions; DROP TABLE evaluations; DROP TABLE workflow_cases; DROP TABLE schedule_ticks; DROP INDEX runs_live; DROP TABLE leases; ALTER TABLE runs DROP COLUMN holder; PRAGMA user_version = 5;")
            .unwrap();
    }
    let registry = Registry::open(scratch.path()).unwrap();
    assert_eq!(
        registry.conversation("conv_a").await.unwrap().unwrap().body,
        b"conversation"
    );
    registry
        .add_reception(reception("req_a", 10, None))
        .await
        .unwrap();
    assert_eq!(registry.receptions(0).await.unwrap().len(), 1);
    let version: u32 = rusqlite::Connection::open(scratch.path())
        .unwrap()
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, 9);
}
