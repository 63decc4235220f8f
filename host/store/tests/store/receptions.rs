//! Requests reception answered, in the registry: read back, listed newest
//! first, an id stored once, and a store of the schema before them
//! migrated without losing its conversations.

use hane_store::ReceptionRow;

use crate::{Store, on_both};

fn reception(id: &str, at: u64, run: Option<&str>) -> ReceptionRow {
    ReceptionRow {
        id: id.to_owned(),
        created_at_ms: at,
        run: run.map(str::to_owned),
        body: format!("body of {id}").into_bytes(),
    }
}

async fn requests_are_read_back_and_listed_newest_first(place: Store) {
    let registry = place.open();
    registry
        .receptions()
        .add(reception("req_a", 10, Some("run_a")))
        .await
        .unwrap();
    registry
        .receptions()
        .add(reception("req_b", 30, None))
        .await
        .unwrap();
    registry
        .receptions()
        .add(reception("req_c", 20, None))
        .await
        .unwrap();
    assert_eq!(
        registry.receptions().get("req_a").await.unwrap(),
        Some(reception("req_a", 10, Some("run_a")))
    );
    assert_eq!(registry.receptions().get("req_x").await.unwrap(), None);
    let listed: Vec<String> = registry
        .receptions()
        .list(0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, ["req_b", "req_c", "req_a"]);
    assert_eq!(registry.receptions().list(1).await.unwrap()[0].id, "req_b");
}

async fn a_request_id_is_stored_once_and_the_first_is_kept(place: Store) {
    let registry = place.open();
    registry
        .receptions()
        .add(reception("req_a", 10, None))
        .await
        .unwrap();
    let mut again = reception("req_a", 11, Some("run_b"));
    again.body = b"another".to_vec();
    assert!(registry.receptions().add(again).await.is_err());
    assert_eq!(
        registry.receptions().get("req_a").await.unwrap(),
        Some(reception("req_a", 10, None))
    );
}

on_both!(
    requests_are_read_back_and_listed_newest_first,
    a_request_id_is_stored_once_and_the_first_is_kept,
);
