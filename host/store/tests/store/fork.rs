//! Forks share their parent's prefix without copying it.

use hane_core::SessionEvent;
use hane_store::{Appended, ForkPoint, StoreError};

use crate::{Sessions, Store, accepted, forked, history, on_both, run};

fn runs(states: &[&str]) -> Vec<SessionEvent> {
    states.iter().map(|s| run(s)).collect()
}

async fn a_fork_shares_the_prefix_and_then_goes_its_own_way(place: Store) {
    let store = place.sessions();
    let parent = store.create_session().await.unwrap().id;
    store
        .append(&parent, runs(&["0", "1", "2", "3", "4"]))
        .await
        .unwrap();

    let fork = store.fork(&parent, 3).await.unwrap();
    assert_eq!(
        fork.parent,
        Some(ForkPoint {
            session: parent.clone(),
            at: 3
        })
    );
    assert_eq!(fork.len, 4);
    let mut expected = runs(&["0", "1", "2"]);
    expected.push(forked(&parent, 3));
    assert_eq!(history(&*store, &fork.id).await, expected);
    let recorded = store.read(&fork.id, 0..u64::MAX).await.unwrap();
    assert_eq!(
        recorded.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );

    // Neither side sees the other's later events.
    store.append(&parent, runs(&["5"])).await.unwrap();
    let own = store.append(&fork.id, runs(&["x"])).await.unwrap();
    assert_eq!(
        own,
        Appended {
            first_seq: 4,
            len: 5
        }
    );
    expected.push(run("x"));
    assert_eq!(history(&*store, &fork.id).await, expected);
    assert_eq!(
        history(&*store, &parent).await,
        runs(&["0", "1", "2", "3", "4", "5"])
    );
    assert_eq!(store.session(&parent).await.unwrap().len, 6);
    assert_eq!(store.session(&fork.id).await.unwrap().len, 5);

    // Ranges across the fork point.
    let across = store.read(&fork.id, 2..4).await.unwrap();
    assert_eq!(
        across.into_iter().map(|r| r.event).collect::<Vec<_>>(),
        [run("2"), forked(&parent, 3)]
    );
}

async fn forks_at_the_start_and_at_the_end(place: Store) {
    let store = place.sessions();
    let parent = store.create_session().await.unwrap().id;
    let empty = store.fork(&parent, 0).await.unwrap();
    assert_eq!(history(&*store, &empty.id).await, [forked(&parent, 0)]);

    store.append(&parent, runs(&["0", "1"])).await.unwrap();
    let at_zero = store.fork(&parent, 0).await.unwrap();
    assert_eq!(at_zero.len, 1);
    assert_eq!(history(&*store, &at_zero.id).await, [forked(&parent, 0)]);
    let at_end = store.fork(&parent, 2).await.unwrap();
    assert_eq!(at_end.len, 3);
    assert_eq!(
        history(&*store, &at_end.id).await,
        [run("0"), run("1"), forked(&parent, 2)]
    );
}

async fn a_fork_past_the_end_is_refused(place: Store) {
    let store = place.sessions();
    let parent = store.create_session().await.unwrap().id;
    store.append(&parent, runs(&["0", "1"])).await.unwrap();
    let err = store.fork(&parent, 3).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::ForkOutOfRange { session, at: 3, len: 2 } if *session == parent),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("cannot fork session `{parent}` at event 3: it has 2 events")
    );
    assert_eq!(store.list_sessions().await.unwrap().len(), 1);
}

async fn forks_of_forks_read_through_every_ancestor(place: Store) {
    let store = place.sessions();
    let root = store.create_session().await.unwrap().id;
    store
        .append(&root, runs(&["r0", "r1", "r2", "r3", "r4"]))
        .await
        .unwrap();
    let child = store.fork(&root, 3).await.unwrap().id;
    store.append(&child, runs(&["c4", "c5"])).await.unwrap();
    let grandchild = store.fork(&child, 5).await.unwrap().id;
    store.append(&grandchild, runs(&["g6"])).await.unwrap();
    // At the child's own fork point: nothing of the child but `forked`.
    let cousin = store.fork(&child, 3).await.unwrap().id;
    // Within the part the child shares with the root.
    let deep = store.fork(&grandchild, 2).await.unwrap().id;

    let check = |store: Sessions| {
        let (root, child, grandchild, cousin, deep) = (
            root.clone(),
            child.clone(),
            grandchild.clone(),
            cousin.clone(),
            deep.clone(),
        );
        async move {
            assert_eq!(
                history(&*store, &grandchild).await,
                [
                    run("r0"),
                    run("r1"),
                    run("r2"),
                    forked(&root, 3),
                    run("c4"),
                    forked(&child, 5),
                    run("g6"),
                ]
            );
            assert_eq!(
                history(&*store, &cousin).await,
                [run("r0"), run("r1"), run("r2"), forked(&child, 3)]
            );
            assert_eq!(
                history(&*store, &deep).await,
                [run("r0"), run("r1"), forked(&grandchild, 2)]
            );
            let middle = store.read(&grandchild, 2..6).await.unwrap();
            assert_eq!(
                middle.iter().map(|r| r.seq).collect::<Vec<_>>(),
                [2, 3, 4, 5]
            );
            assert_eq!(store.session(&grandchild).await.unwrap().len, 7);
        }
    };
    check(store.clone()).await;
    // Appends after reopening start from lineages loaded from the file.
    drop(store);
    let store = place.sessions();
    check(store.clone()).await;
    let more = store.append(&deep, runs(&["d3"])).await.unwrap();
    assert_eq!(
        more,
        Appended {
            first_seq: 3,
            len: 4
        }
    );
    let more = store.append(&grandchild, runs(&["g7"])).await.unwrap();
    assert_eq!(
        more,
        Appended {
            first_seq: 7,
            len: 8
        }
    );
}

async fn inputs_of_the_shared_prefix_are_deduplicated(place: Store) {
    let store = place.sessions();
    let parent = store.create_session().await.unwrap().id;
    store
        .append(&parent, vec![accepted("before"), run("a")])
        .await
        .unwrap();
    let fork = store.fork(&parent, 2).await.unwrap().id;
    // The parent accepts an input after the fork point.
    store
        .append(&parent, vec![accepted("after")])
        .await
        .unwrap();
    // A fork at 0 shares none of the parent's inputs.
    let bare = store.fork(&parent, 0).await.unwrap().id;

    let (before, after) = ("before".parse().unwrap(), "after".parse().unwrap());
    assert!(store.input_accepted(&fork, &before).await.unwrap());
    assert!(!store.input_accepted(&fork, &after).await.unwrap());
    assert!(!store.input_accepted(&bare, &before).await.unwrap());

    let err = store
        .append(&fork, vec![accepted("before")])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::DuplicateInput { session, .. } if *session == fork),
        "{err:?}"
    );
    store.append(&fork, vec![accepted("after")]).await.unwrap();
    store.append(&bare, vec![accepted("before")]).await.unwrap();

    // Through a fork of the fork, and after reopening.
    let grandchild = store.fork(&fork, 4).await.unwrap().id;
    drop(store);
    let store = place.sessions();
    for input in ["before", "after"] {
        let err = store
            .append(&grandchild, vec![run("x"), accepted(input)])
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::DuplicateInput { .. }),
            "{input}: {err:?}"
        );
    }
    assert_eq!(store.session(&grandchild).await.unwrap().len, 5);
    store
        .append(&grandchild, vec![accepted("new")])
        .await
        .unwrap();
    // The fork's inputs are not the parent's.
    store.append(&parent, vec![accepted("new")]).await.unwrap();
}

on_both!(
    a_fork_shares_the_prefix_and_then_goes_its_own_way,
    forks_at_the_start_and_at_the_end,
    a_fork_past_the_end_is_refused,
    forks_of_forks_read_through_every_ancestor,
    inputs_of_the_shared_prefix_are_deduplicated,
);
