//! The coordinator in process: inputs accepted once, operations run with
//! their state written through the store, cancel inputs that stop them.

use std::path::Path;
use std::sync::Arc;

use hane_coordinator::{Coordinator, CoordinatorConfig, coordinator::Received};
use hane_core::{
    Control, Impact, Input, InputKind, JsonText, Limits, Operation, OperationId, OperationState,
    Outcome, Policy, SessionEvent, SessionId, ToolCall, ToolCallId, ToolCallStatus, WasmCall,
};
use hane_manager::Ending;
use hane_manager::{Components, LocalConfig, LocalOperationManager};
use hane_store::{SessionStore, SqliteConfig, SqliteStore, StoreError};

use crate::harness;

struct Host {
    store: SqliteStore,
    coordinator: Coordinator,
    echo: String,
    spin: String,
}

fn host(path: &Path, config: &CoordinatorConfig) -> Host {
    let store = SqliteStore::open(path, &SqliteConfig::new()).unwrap();
    let components = Components::new();
    let echo = components.insert(std::fs::read(hane_builtins::test_programs::GUEST_ECHO).unwrap());
    let spin = components.insert(std::fs::read(hane_builtins::test_programs::GUEST_SPIN).unwrap());
    let manager =
        LocalOperationManager::new(harness::sandbox().clone(), components, &LocalConfig::new());
    let coordinator = Coordinator::new(Arc::new(store.clone()), Arc::new(manager), config);
    Host {
        store,
        coordinator,
        echo,
        spin,
    }
}

impl Host {
    /// Delivers the external input `id` to `session`.
    async fn deliver(&self, session: &SessionId, id: &str) -> Received {
        self.coordinator
            .deliver(session, external(id))
            .await
            .unwrap()
    }
}

fn external(id: &str) -> Input {
    Input {
        id: id.parse().unwrap(),
        kind: InputKind::External {
            payload: JsonText::parse(r#"{"ask":"anything"}"#).unwrap(),
        },
    }
}

/// A tool call with one wasm operation of `component` on `input`.
fn tool_call(
    session: &SessionId,
    component: &str,
    input: serde_json::Value,
    limits: Limits,
) -> (SessionEvent, OperationId) {
    let call = ToolCall {
        id: ToolCallId::new(),
        tool: "test.tool".into(),
        input: JsonText::from_value(&input),
    };
    let op = Operation::wasm(
        session.clone(),
        call.id.clone(),
        Impact::Read,
        WasmCall {
            name: "test.tool".into(),
            component: component.to_owned(),
            policy: Policy::default(),
            limits,
            input: JsonText::from_value(&input),
        },
    );
    let id = op.id.clone();
    let event = SessionEvent::ToolCallRecorded {
        status: ToolCallStatus::Submitted {
            operations: vec![op.id.clone()],
        },
        call,
        operations: vec![op],
    };
    (event, id)
}

async fn accepted_count(store: &SqliteStore, session: &SessionId) -> usize {
    store
        .read(session, 0..u64::MAX)
        .await
        .unwrap()
        .iter()
        .filter(|r| matches!(r.event, SessionEvent::InputAccepted { .. }))
        .count()
}

#[tokio::test]
async fn redelivered_inputs_are_accepted_once_also_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hane.db");
    let session = {
        let host = host(&path, &CoordinatorConfig::new());
        let session = host.store.create_session().await.unwrap().id;
        let mut deliveries = Vec::new();
        for _ in 0..3 {
            deliveries.push(host.deliver(&session, "order-1").await);
        }
        assert_eq!(
            deliveries,
            [
                Received::Accepted { seq: 0 },
                Received::Duplicate,
                Received::Duplicate
            ]
        );
        session
    };
    // A new process: an empty inbox, the same store.
    let host = host(&path, &CoordinatorConfig::new());
    for _ in 0..3 {
        let delivery = host.deliver(&session, "order-1").await;
        assert_eq!(delivery, Received::Duplicate);
    }
    assert_eq!(accepted_count(&host.store, &session).await, 1);
}

#[tokio::test]
async fn the_store_refuses_what_a_full_inbox_forgot() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = CoordinatorConfig::new();
    config.inbox_capacity(1);
    let host = host(&dir.path().join("hane.db"), &config);
    let session = host.store.create_session().await.unwrap().id;
    for id in ["a", "b"] {
        let delivery = host.deliver(&session, id).await;
        assert!(matches!(delivery, Received::Accepted { .. }));
    }
    let again = host.deliver(&session, "a").await;
    assert_eq!(again, Received::Duplicate);
    assert_eq!(accepted_count(&host.store, &session).await, 2);
}

#[tokio::test]
async fn concurrent_deliveries_of_one_input_accept_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(&dir.path().join("hane.db"), &CoordinatorConfig::new());
    let session = host.store.create_session().await.unwrap().id;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let coordinator = host.coordinator.clone();
            let session = session.clone();
            tokio::spawn(async move { coordinator.deliver(&session, external("once")).await })
        })
        .collect();
    let mut accepted = 0;
    for task in tasks {
        if matches!(task.await.unwrap().unwrap(), Received::Accepted { .. }) {
            accepted += 1;
        }
    }
    assert_eq!(accepted, 1);
    assert_eq!(accepted_count(&host.store, &session).await, 1);
}

#[tokio::test]
async fn a_committed_tool_call_runs_and_every_step_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(&dir.path().join("hane.db"), &CoordinatorConfig::new());
    let session = host.store.create_session().await.unwrap().id;
    host.deliver(&session, "order-1").await;
    let (call, op) = tool_call(
        &session,
        &host.echo,
        serde_json::json!({"message": "hi"}),
        Limits::default(),
    );
    let handled = SessionEvent::InputHandled {
        input: "order-1".parse().unwrap(),
    };
    let dispatched = host
        .coordinator
        .commit(&session, vec![handled, call])
        .await
        .unwrap();
    assert_eq!(dispatched.len(), 1);
    let settled = dispatched
        .into_iter()
        .next()
        .unwrap()
        .settled()
        .await
        .unwrap();
    assert_eq!(settled.state, OperationState::Succeeded);
    let Ending::Succeeded(result) = &settled.ending else {
        panic!("{:?}", settled.ending)
    };
    assert_eq!(
        result.output.to_value().unwrap(),
        serde_json::json!({"message": "hi", "length": 2})
    );

    let names: Vec<_> = host
        .store
        .read(&session, 0..u64::MAX)
        .await
        .unwrap()
        .iter()
        .map(|r| r.event.name())
        .collect();
    assert_eq!(
        names,
        [
            "inputAccepted",
            "inputHandled",
            "toolCallRecorded",
            "operationStarted",
            "operationCompleted"
        ]
    );
    let record = host.store.operation(&op).await.unwrap();
    assert_eq!(
        (record.state, record.attempts),
        (OperationState::Succeeded, 1)
    );
    assert!(
        host.coordinator
            .unhandled_inputs(&session)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn inputs_without_a_handled_mark_are_reported_unhandled() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(&dir.path().join("hane.db"), &CoordinatorConfig::new());
    let session = host.store.create_session().await.unwrap().id;
    for id in ["first", "second"] {
        host.deliver(&session, id).await;
    }
    host.coordinator
        .commit(
            &session,
            vec![SessionEvent::InputHandled {
                input: "first".parse().unwrap(),
            }],
        )
        .await
        .unwrap();
    let unhandled = host.coordinator.unhandled_inputs(&session).await.unwrap();
    assert_eq!(unhandled, vec![external("second")]);
}

#[tokio::test]
async fn a_cancel_input_stops_the_sessions_running_operation() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(&dir.path().join("hane.db"), &CoordinatorConfig::new());
    let session = host.store.create_session().await.unwrap().id;
    let limits = Limits {
        fuel: u64::MAX / 2,
        timeout: hane_core::Duration::seconds(600),
        ..Limits::default()
    };
    let (call, op) = tool_call(
        &session,
        &host.spin,
        serde_json::json!({"iterations": u64::MAX / 4}),
        limits,
    );
    let dispatched = host.coordinator.commit(&session, vec![call]).await.unwrap();
    while host.store.operation(&op).await.unwrap().state != OperationState::Running {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let cancel = Input {
        id: "stop".parse().unwrap(),
        kind: InputKind::Control {
            command: Control::Cancel {
                reason: "operator asked".into(),
            },
        },
    };
    host.coordinator.deliver(&session, cancel).await.unwrap();
    let settled = dispatched
        .into_iter()
        .next()
        .unwrap()
        .settled()
        .await
        .unwrap();
    assert_eq!(settled.state, OperationState::Failed);
    let Ending::Failed(failure) = &settled.ending else {
        panic!("{:?}", settled.ending)
    };
    assert_eq!(failure.outcome, Outcome::Cancelled);
}

#[tokio::test]
async fn a_batch_the_store_refuses_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(&dir.path().join("hane.db"), &CoordinatorConfig::new());
    let session = host.store.create_session().await.unwrap().id;
    let other = host.store.create_session().await.unwrap().id;
    // An operation that claims to belong to another session.
    let (call, op) = tool_call(
        &other,
        &host.echo,
        serde_json::json!({"message": "x"}),
        Limits::default(),
    );
    let err = host
        .coordinator
        .commit(&session, vec![call])
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            hane_coordinator::CoordinatorError::Store(StoreError::ForeignOperation { .. })
        ),
        "{err}"
    );
    assert_eq!(host.store.session(&session).await.unwrap().len, 0);
    assert!(matches!(
        host.store.operation(&op).await,
        Err(StoreError::OperationNotFound(_))
    ));
}

#[tokio::test]
async fn execute_read_runs_a_read_without_writing_and_refuses_other_impacts() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(&dir.path().join("hane.db"), &CoordinatorConfig::new());
    let session = host.store.create_session().await.unwrap().id;
    let (call, _) = tool_call(
        &session,
        &host.echo,
        serde_json::json!({"message": "hi"}),
        Limits::default(),
    );
    let SessionEvent::ToolCallRecorded { mut operations, .. } = call else {
        unreachable!()
    };
    let mut op = operations.remove(0);
    let (ending, attempts) = host.coordinator.execute_read(&op).await.unwrap();
    assert!(matches!(ending, Ending::Succeeded(_)), "{ending:?}");
    assert_eq!(attempts, 1);
    // The caller owns the recording: nothing was written.
    assert!(
        host.store
            .read(&session, 0..u64::MAX)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(host.store.operation(&op.id).await.is_err());

    op.impact = Impact::Write;
    let err = host.coordinator.execute_read(&op).await.unwrap_err();
    assert!(err.to_string().contains("only read operations"), "{err}");
}
