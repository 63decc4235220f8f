//! Conversations in the registry: entries in order, listings, and a store
//! of the schema before them migrated without losing anything.

use hane_store::ConversationRow;

use crate::{Store, on_both};

fn conversation(id: &str, agent: &str, at: u64) -> ConversationRow {
    ConversationRow {
        id: id.to_owned(),
        agent: agent.to_owned(),
        created_at_ms: at,
        updated_at_ms: at,
        body: format!("body of {id}").into_bytes(),
    }
}

async fn entries_keep_their_order_and_a_listing_puts_the_latest_change_first(place: Store) {
    let registry = place.open();
    registry
        .conversations()
        .create(conversation("conv_a", "fleet-assistant", 10), None)
        .await
        .unwrap();
    registry
        .conversations()
        .create(
            conversation("conv_b", "lease-qa", 20),
            Some(b"memory".to_vec()),
        )
        .await
        .unwrap();
    for (i, text) in ["one", "two", "three"].iter().enumerate() {
        let seq = registry
            .conversations()
            .add_entry("conv_a", 30 + i as u64, text.as_bytes().to_vec())
            .await
            .unwrap();
        assert_eq!(seq, i as u64);
    }
    let seq = registry
        .conversations()
        .add_entry("conv_b", 25, b"after".to_vec())
        .await
        .unwrap();
    assert_eq!(seq, 1, "the memory it started from is entry 0");
    let entries = registry.conversations().entries("conv_a").await.unwrap();
    let bodies: Vec<_> = entries.iter().map(|e| e.body.clone()).collect();
    assert_eq!(
        bodies,
        [b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]
    );
    assert_eq!(entries[2].at_ms, 32);
    let listed = registry.conversations().list(None, 0).await.unwrap();
    let ids: Vec<_> = listed.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["conv_a", "conv_b"]);
    assert_eq!(listed[0].updated_at_ms, 32);
    let leases = registry
        .conversations()
        .list(Some("lease-qa".to_owned()), 0)
        .await
        .unwrap();
    assert_eq!(leases.len(), 1);
    assert_eq!(
        registry
            .conversations()
            .get("conv_b")
            .await
            .unwrap()
            .unwrap()
            .body,
        b"body of conv_b"
    );
    assert_eq!(registry.conversations().get("conv_z").await.unwrap(), None);
    assert!(
        registry
            .conversations()
            .entries("conv_z")
            .await
            .unwrap()
            .is_empty()
    );
}

async fn an_entry_of_no_conversation_is_refused_and_nothing_is_added(place: Store) {
    let registry = place.open();
    let err = registry
        .conversations()
        .add_entry("conv_missing", 1, b"x".to_vec())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("no conversation `conv_missing`"),
        "{err}"
    );
    let again = registry
        .conversations()
        .create(conversation("conv_a", "a", 1), None)
        .await;
    assert!(again.is_ok());
    let twice = registry
        .conversations()
        .create(conversation("conv_a", "a", 2), Some(b"m".to_vec()))
        .await;
    assert!(twice.is_err(), "a second conversation with the same id");
    assert!(
        registry
            .conversations()
            .entries("conv_a")
            .await
            .unwrap()
            .is_empty()
    );
}

on_both!(
    entries_keep_their_order_and_a_listing_puts_the_latest_change_first,
    an_entry_of_no_conversation_is_refused_and_nothing_is_added,
);
