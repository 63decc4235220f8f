//! Appending, reading and listing; atomic batches; inputs accepted once.

use std::time::{SystemTime, UNIX_EPOCH};

use hane_core::SessionId;
use hane_store::{Appended, StoreError};

use crate::{Store, accepted, forked, history, on_both, run};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn appends_read_back_in_ranges(place: Store) {
    let store = place.sessions();
    let before = now_ms();
    let session = store.create_session().await.unwrap();
    assert_eq!(session.len, 0);
    assert_eq!(session.parent, None);
    assert!(history(&*store, &session.id).await.is_empty());

    let first = store
        .append(&session.id, vec![run("a"), run("b")])
        .await
        .unwrap();
    assert_eq!(
        first,
        Appended {
            first_seq: 0,
            len: 2
        }
    );
    let second = store
        .append(&session.id, vec![run("c"), run("d"), run("e")])
        .await
        .unwrap();
    assert_eq!(
        second,
        Appended {
            first_seq: 2,
            len: 5
        }
    );
    let after = now_ms();

    let all = store.read(&session.id, 0..u64::MAX).await.unwrap();
    assert_eq!(
        all.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    assert_eq!(
        all.iter().map(|r| r.event.clone()).collect::<Vec<_>>(),
        ["a", "b", "c", "d", "e"].map(run)
    );
    assert!(all.iter().all(|r| (before..=after).contains(&r.at_ms)));

    let middle = store.read(&session.id, 1..3).await.unwrap();
    assert_eq!(
        middle
            .iter()
            .map(|r| (r.seq, r.event.clone()))
            .collect::<Vec<_>>(),
        [(1, run("b")), (2, run("c"))]
    );
    // Ranges are clamped to the session's length.
    let tail = store.read(&session.id, 3..100).await.unwrap();
    assert_eq!(tail.iter().map(|r| r.seq).collect::<Vec<_>>(), [3, 4]);
    assert!(store.read(&session.id, 5..9).await.unwrap().is_empty());
    #[expect(
        clippy::reversed_empty_ranges,
        reason = "an empty range is a valid request"
    )]
    let backwards = store.read(&session.id, 3..1).await.unwrap();
    assert!(backwards.is_empty());

    let info = store.session(&session.id).await.unwrap();
    assert_eq!(info.len, 5);
    assert_eq!(info.created_at_ms, session.created_at_ms);
    assert!((before..=after).contains(&info.created_at_ms));

    // An empty batch changes nothing and says where the session is.
    let nothing = store.append(&session.id, vec![]).await.unwrap();
    assert_eq!(
        nothing,
        Appended {
            first_seq: 5,
            len: 5
        }
    );
}

async fn sessions_are_listed_oldest_first_with_their_lengths(place: Store) {
    let store = place.sessions();
    assert!(store.list_sessions().await.unwrap().is_empty());
    let a = store.create_session().await.unwrap();
    let b = store.create_session().await.unwrap();
    store.append(&b.id, vec![run("1"), run("2")]).await.unwrap();
    let c = store.fork(&b.id, 1).await.unwrap();
    store.append(&a.id, vec![run("1")]).await.unwrap();

    let listed = store.list_sessions().await.unwrap();
    let summary: Vec<_> = listed
        .iter()
        .map(|s| {
            (
                s.id.clone(),
                s.len,
                s.parent.clone().map(|p| (p.session, p.at)),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (a.id.clone(), 1, None),
            (b.id.clone(), 2, None),
            (c.id.clone(), 2, Some((b.id.clone(), 1))),
        ]
    );
    for info in &listed {
        assert_eq!(&store.session(&info.id).await.unwrap(), info);
    }
}

async fn an_unknown_session_is_named(place: Store) {
    let store = place.sessions();
    let missing = SessionId::new();
    let is_missing = |e: StoreError| matches!(e, StoreError::SessionNotFound(id) if id == missing);
    assert!(is_missing(
        store.append(&missing, vec![run("a")]).await.unwrap_err()
    ));
    assert!(is_missing(store.read(&missing, 0..1).await.unwrap_err()));
    assert!(is_missing(store.session(&missing).await.unwrap_err()));
    assert!(is_missing(store.fork(&missing, 0).await.unwrap_err()));
    let input = "x".parse().unwrap();
    assert!(is_missing(
        store.input_accepted(&missing, &input).await.unwrap_err()
    ));
    let err = store.session(&missing).await.unwrap_err();
    assert_eq!(err.to_string(), format!("session `{missing}` not found"));
}

async fn a_batch_with_a_duplicate_input_leaves_nothing_behind(place: Store) {
    let store = place.sessions();
    let session = store.create_session().await.unwrap().id;
    store
        .append(&session, vec![accepted("order-1"), run("a")])
        .await
        .unwrap();

    let batch = vec![run("b"), accepted("order-2"), accepted("order-1"), run("c")];
    let err = store.append(&session, batch).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::DuplicateInput { session: s, input } if *s == session && input.as_str() == "order-1"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("input `order-1` was already accepted by session `{session}`")
    );
    assert_eq!(store.session(&session).await.unwrap().len, 2);
    assert_eq!(
        history(&*store, &session).await,
        [accepted("order-1"), run("a")]
    );
    // The refused batch's other input was not recorded either.
    let order_2 = "order-2".parse().unwrap();
    assert!(!store.input_accepted(&session, &order_2).await.unwrap());
    let next = store
        .append(&session, vec![accepted("order-2")])
        .await
        .unwrap();
    assert_eq!(
        next,
        Appended {
            first_seq: 2,
            len: 3
        }
    );
    assert!(store.input_accepted(&session, &order_2).await.unwrap());
}

async fn an_input_twice_in_one_batch_is_refused(place: Store) {
    let store = place.sessions();
    let session = store.create_session().await.unwrap().id;
    let err = store
        .append(
            &session,
            vec![accepted("twice"), run("a"), accepted("twice")],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::DuplicateInput { .. }), "{err:?}");
    assert_eq!(store.session(&session).await.unwrap().len, 0);
    assert!(
        !store
            .input_accepted(&session, &"twice".parse().unwrap())
            .await
            .unwrap()
    );
}

async fn inputs_stay_deduplicated_after_reopening(place: Store) {
    let (session, other) = {
        let store = place.sessions();
        let session = store.create_session().await.unwrap().id;
        let other = store.create_session().await.unwrap().id;
        store
            .append(&session, vec![accepted("order-1")])
            .await
            .unwrap();
        (session, other)
    };
    let store = place.sessions();
    let order_1 = "order-1".parse().unwrap();
    assert!(store.input_accepted(&session, &order_1).await.unwrap());
    let err = store
        .append(&session, vec![run("a"), accepted("order-1")])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::DuplicateInput { .. }), "{err:?}");
    assert_eq!(history(&*store, &session).await, [accepted("order-1")]);
    // Deduplication is per session.
    assert!(!store.input_accepted(&other, &order_1).await.unwrap());
    store
        .append(&other, vec![accepted("order-1")])
        .await
        .unwrap();
}

async fn callers_cannot_append_forked(place: Store) {
    let store = place.sessions();
    let session = store.create_session().await.unwrap().id;
    let err = store
        .append(&session, vec![run("a"), forked(&session, 0)])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidEvent { session: s, index: 1, .. } if *s == session),
        "{err:?}"
    );
    assert!(err.to_string().contains("`forked`"), "{err}");
    assert_eq!(store.session(&session).await.unwrap().len, 0);
}

/// A deferred append is an append in every way but its sync: it numbers
/// its events in line with the others, refuses an input accepted before,
/// is read back at once and is in the file when the store is opened again.
async fn deferred_appends_number_check_and_keep_their_events_as_appends_do(place: Store) {
    let store = place.sessions();
    let session = store.create_session().await.unwrap().id;
    store
        .append(&session, vec![accepted("in-1"), run("a")])
        .await
        .unwrap();
    let deferred = store
        .append_deferred(&session, vec![run("b"), run("c")])
        .await
        .unwrap();
    assert_eq!(
        deferred,
        Appended {
            first_seq: 2,
            len: 4
        }
    );
    let refused = store
        .append_deferred(&session, vec![run("lost"), accepted("in-1")])
        .await;
    assert!(
        matches!(refused, Err(StoreError::DuplicateInput { ref input, .. }) if input.as_str() == "in-1"),
        "{refused:?}"
    );
    store.append(&session, vec![run("d")]).await.unwrap();
    store
        .append_deferred(&session, vec![run("e")])
        .await
        .unwrap();
    let expected = [
        accepted("in-1"),
        run("a"),
        run("b"),
        run("c"),
        run("d"),
        run("e"),
    ];
    assert_eq!(history(&*store, &session).await, expected);
    drop(store);

    let store = place.sessions();
    assert_eq!(history(&*store, &session).await, expected);
}

on_both!(
    appends_read_back_in_ranges,
    sessions_are_listed_oldest_first_with_their_lengths,
    an_unknown_session_is_named,
    a_batch_with_a_duplicate_input_leaves_nothing_behind,
    an_input_twice_in_one_batch_is_refused,
    inputs_stay_deduplicated_after_reopening,
    callers_cannot_append_forked,
    deferred_appends_number_check_and_keep_their_events_as_appends_do,
);
