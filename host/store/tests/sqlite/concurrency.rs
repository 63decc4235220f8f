//! Many writers at once: every acknowledged append is kept, in order, and
//! a refused request does not take the others in its group down.

use std::collections::BTreeMap;

use hane_core::SessionEvent;
use hane_store::{Appended, SessionStore, StoreError};

use crate::{Scratch, accepted, history, run};

const SESSIONS: usize = 8;
const TASKS: usize = 64;
const APPENDS: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_are_all_kept() {
    let scratch = Scratch::new();
    let store = scratch.open();
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(store.create_session().await.unwrap().id);
    }

    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let store = store.clone();
        let session = sessions[task % SESSIONS].clone();
        tasks.spawn(async move {
            let mut seqs = Vec::new();
            for i in 0..APPENDS {
                let event = SessionEvent::RunStateChanged {
                    run: format!("task-{task}"),
                    state: i.to_string(),
                };
                let appended = store.append(&session, vec![event]).await.unwrap();
                assert_eq!(appended.len, appended.first_seq + 1);
                seqs.push(appended.first_seq);
            }
            (session, seqs)
        });
    }
    let mut acknowledged: BTreeMap<_, Vec<u64>> = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (session, seqs) = joined.unwrap();
        acknowledged.entry(session).or_default().extend(seqs);
    }
    drop(store);

    let store = scratch.open();
    let per_session = (TASKS / SESSIONS * APPENDS) as u64;
    for session in &sessions {
        // Each acknowledged append has its own sequence number, and they
        // leave no gap.
        let mut seqs = acknowledged[session].clone();
        seqs.sort_unstable();
        assert_eq!(seqs, (0..per_session).collect::<Vec<_>>());

        let recorded = store.read(session, 0..u64::MAX).await.unwrap();
        assert_eq!(
            recorded.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (0..per_session).collect::<Vec<_>>()
        );
        // Each task's appends are in the order it made them.
        let mut next: BTreeMap<String, usize> = BTreeMap::new();
        for r in recorded {
            let SessionEvent::RunStateChanged { run, state } = r.event else {
                panic!("unexpected event {:?}", r.event);
            };
            let expected = next.entry(run.clone()).or_default();
            assert_eq!(state, expected.to_string(), "{run} at {}", r.seq);
            *expected += 1;
        }
        assert_eq!(next.len(), TASKS / SESSIONS);
        assert!(next.values().all(|&n| n == APPENDS));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_appends_do_not_fail_the_others() {
    let scratch = Scratch::new();
    let store = scratch.open();
    let session = store.create_session().await.unwrap().id;
    store
        .append(&session, vec![accepted("taken")])
        .await
        .unwrap();

    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        let store = store.clone();
        let session = session.clone();
        tasks.spawn(async move {
            let batch = if i % 2 == 0 {
                vec![accepted(&format!("input-{i}")), run(&i.to_string())]
            } else {
                vec![run(&i.to_string()), accepted("taken")]
            };
            (i, store.append(&session, batch).await)
        });
    }
    let mut firsts = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (i, result) = joined.unwrap();
        if i % 2 == 0 {
            let appended = result.unwrap_or_else(|e| panic!("append {i}: {e}"));
            assert_eq!(appended.len, appended.first_seq + 2);
            firsts.push(appended.first_seq);
        } else {
            assert!(
                matches!(result, Err(StoreError::DuplicateInput { .. })),
                "append {i}: {result:?}"
            );
        }
    }
    firsts.sort_unstable();
    assert_eq!(firsts, (0..100).map(|k| 1 + 2 * k).collect::<Vec<_>>());
    let events = history(&store, &session).await;
    assert_eq!(events.len(), 201);
    assert_eq!(
        events.iter().filter(|e| **e == accepted("taken")).count(),
        1
    );
}

#[tokio::test]
async fn dropping_the_last_handle_closes_the_file() {
    let scratch = Scratch::new();
    let store = scratch.open();
    let copy = store.clone();
    let session = store.create_session().await.unwrap().id;
    copy.append(&session, vec![run("a")]).await.unwrap();
    let wal = scratch.path().with_extension("db-wal");
    drop(store);
    // One handle still works.
    assert_eq!(history(&copy, &session).await, [run("a")]);
    assert!(wal.exists(), "the log is open while a handle is");
    drop(copy);
    // The last connection to close checkpoints the log and removes it.
    assert!(!wal.exists(), "{} is left behind", wal.display());
}

#[tokio::test]
async fn the_store_is_used_through_the_trait() {
    fn shareable<T: Send + Sync + Clone + 'static>(_: &T) {}
    let scratch = Scratch::new();
    let store = scratch.open();
    shareable(&store);
    let shared: std::sync::Arc<dyn SessionStore> = std::sync::Arc::new(store);
    let session = shared.create_session().await.unwrap().id;
    let task = {
        let shared = shared.clone();
        let session = session.clone();
        tokio::spawn(async move { shared.append(&session, vec![run("a")]).await })
    };
    assert_eq!(
        task.await.unwrap().unwrap(),
        Appended {
            first_seq: 0,
            len: 1
        }
    );
    assert_eq!(shared.session(&session).await.unwrap().len, 1);
}
