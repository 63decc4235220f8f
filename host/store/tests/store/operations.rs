//! Operations recorded with their tool call and moved by operation events.

use hane_core::{Impact, OperationId, OperationState};
use hane_store::StoreError;

use crate::{
    Sessions, Store, completed, failed, history, on_both, operation, run, started, tool_call,
    unknown,
};

fn is_invalid(err: &StoreError, state: OperationState, event: &str) -> bool {
    matches!(err, StoreError::InvalidTransition { state: s, event: e, .. } if *s == state && *e == event)
}

async fn operations_move_through_their_states(place: Store) {
    use OperationState::{Failed, Pending, Running, Succeeded, Unknown};
    let store = place.sessions();
    let session = store.create_session().await.unwrap().id;
    let write = operation(&session, Impact::Write);
    let read = operation(&session, Impact::Read);
    let outbound = operation(&session, Impact::Outbound);
    let cancelled = operation(&session, Impact::Write);
    let waiting = operation(&session, Impact::Read);
    let all = [&write, &read, &outbound, &cancelled, &waiting].map(|op| op.clone());

    store
        .append(&session, vec![tool_call(&all[..2]), tool_call(&all[2..])])
        .await
        .unwrap();
    for op in &all {
        let record = store.operation(&op.id).await.unwrap();
        assert_eq!(&record.operation, op);
        assert_eq!((record.state, record.attempts), (Pending, 0));
    }

    // A tool call and the start of its operations can share a batch.
    store
        .append(&session, vec![started(&write, 1), completed(&write)])
        .await
        .unwrap();
    // A read operation may start again while running (after a crash).
    store
        .append(&session, vec![started(&read, 1)])
        .await
        .unwrap();
    store
        .append(&session, vec![started(&read, 2)])
        .await
        .unwrap();
    // Others may not.
    store
        .append(&session, vec![started(&outbound, 1)])
        .await
        .unwrap();
    let err = store
        .append(&session, vec![started(&outbound, 2)])
        .await
        .unwrap_err();
    assert!(is_invalid(&err, Running, "operationStarted"), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "operation `{}` is running: `operationStarted` cannot follow",
            outbound.id
        )
    );
    store
        .append(&session, vec![unknown(&outbound)])
        .await
        .unwrap();
    let err = store
        .append(&session, vec![completed(&outbound)])
        .await
        .unwrap_err();
    assert!(is_invalid(&err, Unknown, "operationCompleted"), "{err:?}");
    // Cancelled before it started.
    store
        .append(&session, vec![failed(&cancelled)])
        .await
        .unwrap();
    let err = store
        .append(&session, vec![started(&cancelled, 1)])
        .await
        .unwrap_err();
    assert!(is_invalid(&err, Failed, "operationStarted"), "{err:?}");
    let err = store
        .append(&session, vec![completed(&waiting)])
        .await
        .unwrap_err();
    assert!(is_invalid(&err, Pending, "operationCompleted"), "{err:?}");
    let err = store
        .append(&session, vec![unknown(&waiting)])
        .await
        .unwrap_err();
    assert!(is_invalid(&err, Pending, "operationUnknown"), "{err:?}");
    let err = store
        .append(&session, vec![completed(&write)])
        .await
        .unwrap_err();
    assert!(is_invalid(&err, Succeeded, "operationCompleted"), "{err:?}");

    let expected = [
        (&write, Succeeded, 1),
        (&read, Running, 2),
        (&outbound, Unknown, 1),
        (&cancelled, Failed, 0),
        (&waiting, Pending, 0),
    ];
    let (all, read, waiting, write, outbound, cancelled) =
        (&all, &read, &waiting, &write, &outbound, &cancelled);
    let check = |store: Sessions| async move {
        for (op, state, attempts) in expected {
            let record = store.operation(&op.id).await.unwrap();
            assert_eq!(
                (record.state, record.attempts),
                (state, attempts),
                "{}",
                op.id
            );
        }
        let ids = |records: Vec<hane_store::OperationRecord>| {
            records
                .into_iter()
                .map(|r| r.operation.id)
                .collect::<Vec<_>>()
        };
        // Recovery's question, oldest first.
        let open = store.operations(&[Pending, Running]).await.unwrap();
        assert_eq!(ids(open), [read.id.clone(), waiting.id.clone()]);
        let open = store
            .operations(&[Running, Pending, Running])
            .await
            .unwrap();
        assert_eq!(ids(open), [read.id.clone(), waiting.id.clone()]);
        let finished = store
            .operations(&[Succeeded, Failed, Unknown])
            .await
            .unwrap();
        assert_eq!(
            ids(finished),
            [write.id.clone(), outbound.id.clone(), cancelled.id.clone()]
        );
        assert!(store.operations(&[]).await.unwrap().is_empty());
        let every = store.operations(&OperationState::ALL).await.unwrap();
        assert_eq!(
            ids(every),
            all.iter().map(|op| op.id.clone()).collect::<Vec<_>>()
        );
    };
    check(store.clone()).await;
    drop(store);
    check(place.sessions()).await;
}

async fn a_refused_operation_event_refuses_its_batch(place: Store) {
    let store = place.sessions();
    let session = store.create_session().await.unwrap().id;
    let first = operation(&session, Impact::Write);
    let second = operation(&session, Impact::Write);
    store
        .append(&session, vec![tool_call([&first, &second])])
        .await
        .unwrap();
    let err = store
        .append(
            &session,
            vec![started(&first, 1), run("x"), completed(&second)],
        )
        .await
        .unwrap_err();
    assert!(
        is_invalid(&err, OperationState::Pending, "operationCompleted"),
        "{err:?}"
    );
    let record = store.operation(&first.id).await.unwrap();
    assert_eq!(record.state, OperationState::Pending);
    assert_eq!(store.session(&session).await.unwrap().len, 1);

    let missing = OperationId::new();
    let err = store
        .append(
            &session,
            vec![hane_core::SessionEvent::OperationStarted {
                operation: missing.clone(),
                attempt: 1,
            }],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::OperationNotFound(id) if *id == missing),
        "{err:?}"
    );
    let err = store.operation(&missing).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::OperationNotFound(id) if *id == missing),
        "{err:?}"
    );
}

async fn operations_belong_to_one_session_and_are_recorded_once(place: Store) {
    let store = place.sessions();
    let mine = store.create_session().await.unwrap().id;
    let theirs = store.create_session().await.unwrap().id;
    let their_op = operation(&theirs, Impact::Read);

    // A tool call cannot record another session's operation.
    let err = store
        .append(&mine, vec![tool_call([&their_op])])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::ForeignOperation { operation, owner, session }
            if *operation == their_op.id && *owner == theirs && *session == mine),
        "{err:?}"
    );

    // Nor move one.
    store
        .append(&theirs, vec![tool_call([&their_op])])
        .await
        .unwrap();
    let err = store
        .append(&mine, vec![started(&their_op, 1)])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::ForeignOperation { owner, session, .. }
            if *owner == theirs && *session == mine),
        "{err:?}"
    );
    assert_eq!(
        store.operation(&their_op.id).await.unwrap().state,
        OperationState::Pending
    );

    // An id is recorded once: again in a later batch, or twice in one.
    let again = store
        .append(&theirs, vec![tool_call([&their_op])])
        .await
        .unwrap_err();
    assert!(
        matches!(&again, StoreError::DuplicateOperation(id) if *id == their_op.id),
        "{again:?}"
    );
    let fresh = operation(&mine, Impact::Write);
    let twice = store
        .append(&mine, vec![tool_call([&fresh]), tool_call([&fresh])])
        .await
        .unwrap_err();
    assert!(
        matches!(twice, StoreError::DuplicateOperation(_)),
        "{twice:?}"
    );
    assert!(matches!(
        store.operation(&fresh.id).await.unwrap_err(),
        StoreError::OperationNotFound(_)
    ));
    assert!(history(&*store, &mine).await.is_empty());
    assert_eq!(store.session(&theirs).await.unwrap().len, 1);
}

on_both!(
    operations_move_through_their_states,
    a_refused_operation_event_refuses_its_batch,
    operations_belong_to_one_session_and_are_recorded_once,
);
