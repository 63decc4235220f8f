//! `hane session` end to end, on a store written through hane-store.

use std::path::Path;
use std::process::{Command, Output};

use hane_core::{
    Impact, Input, InputKind, JsonText, Limits, Operation, OperationOutput, Outcome, Policy,
    Receipt, SessionEvent, SessionId, ToolCall, ToolCallId, ToolCallStatus, WasmCall,
};
use hane_store::{SessionStore, SqliteConfig, SqliteStore};

use crate::common::text;

fn hane(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hane"))
        .arg("session")
        .args(args)
        .arg("--store")
        .arg(store)
        .output()
        .expect("run hane")
}

/// A session with one handled input and one operation that succeeded.
fn recorded_session(path: &Path) -> SessionId {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(path, &SqliteConfig::new()).unwrap();
        let session = store.create_session().await.unwrap().id;
        let call = ToolCall {
            id: ToolCallId::new(),
            tool: "documents.search".into(),
            input: JsonText::parse(r#"{"query":"tyre tread depth"}"#).unwrap(),
        };
        let op = Operation::wasm(
            session.clone(),
            call.id.clone(),
            Impact::Read,
            WasmCall {
                name: "documents.search".into(),
                component: "sha256:0123".into(),
                policy: Policy::default(),
                limits: Limits::default(),
                input: call.input.clone(),
            },
        );
        let receipt = Receipt {
            operation: "documents.search".into(),
            version: "0.1.0".into(),
            digest: "sha256:0123".into(),
            outcome: Outcome::Succeeded,
            fuel_consumed: 123_456,
            wall_time_us: 789,
            peak_memory_bytes: 2 << 20,
            host_calls: Default::default(),
            output_bytes: 40,
            log_bytes: 0,
        };
        let events = vec![
            SessionEvent::InputAccepted {
                input: Input {
                    id: "order-17".parse().unwrap(),
                    kind: InputKind::External {
                        payload: JsonText::parse(r#"{"vehicle":"KX-101"}"#).unwrap(),
                    },
                },
            },
            SessionEvent::InputHandled {
                input: "order-17".parse().unwrap(),
            },
            SessionEvent::ToolCallRecorded {
                status: ToolCallStatus::Submitted {
                    operations: vec![op.id.clone()],
                },
                call,
                operations: vec![op.clone()],
            },
            SessionEvent::OperationStarted {
                operation: op.id.clone(),
                attempt: 1,
            },
            SessionEvent::OperationCompleted {
                operation: op.id.clone(),
                result: OperationOutput {
                    output: JsonText::parse(r#"{"results":[{"path":"/documents/a.md"}]}"#).unwrap(),
                    receipt,
                    logs: vec![],
                    proposals: Vec::new(),
                },
            },
        ];
        store.append(&session, events).await.unwrap();
        session
    })
}

#[test]
fn list_show_fork_and_export_a_recorded_session() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let session = recorded_session(&store);

    let out = hane(&store, &["list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    assert!(listed.contains(session.as_str()), "{listed}");

    let out = hane(&store, &["show", session.as_str()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for expected in [
        "5 events",
        "input accepted    order-17 (external) {\"vehicle\":\"KX-101\"}",
        "input handled     order-17",
        "tool call         documents.search",
        "(read)",
        "started",
        "attempt 1",
        "succeeded",
        "receipt: documents.search 0.1.0 succeeded in 789 µs, fuel 123,456, peak memory 2.0 MiB",
    ] {
        assert!(
            shown.contains(expected),
            "missing `{expected}` in:\n{shown}"
        );
    }

    let out = hane(&store, &["fork", session.as_str(), "--at", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let fork: SessionId = text(&out.stdout).trim().parse().unwrap();
    let out = hane(&store, &["export", fork.as_str()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["session"]["parent"]["session"], session.as_str());
    assert_eq!(doc["session"]["parent"]["at"], 2);
    let events = doc["events"].as_array().unwrap();
    assert_eq!(events.len(), 3, "{doc:#}");
    assert_eq!(
        events[0]["event"]["inputAccepted"]["input"]["kind"]["external"]["payload"]["vehicle"],
        "KX-101",
        "exports show the payload as JSON, not as a string"
    );
    assert_eq!(events[2]["seq"], 2);
    assert_eq!(events[2]["event"]["forked"]["at"], 2);

    let file = dir.path().join("export.json");
    let out = hane(
        &store,
        &[
            "export",
            session.as_str(),
            "--output",
            file.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(doc["events"].as_array().unwrap().len(), 5);
    assert_eq!(
        doc["events"][4]["event"]["operationCompleted"]["result"]["receipt"]["fuelConsumed"],
        123_456
    );
}

#[test]
fn wrong_ids_fork_points_and_stores_are_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let session = recorded_session(&store);

    let unknown = SessionId::new();
    let out = hane(&store, &["show", unknown.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!("session `{unknown}` not found")),
        "{}",
        text(&out.stderr)
    );

    let out = hane(&store, &["fork", session.as_str(), "--at", "9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("at event 9: it has 5 events"),
        "{}",
        text(&out.stderr)
    );

    let out = hane(&store, &["show", "not-an-id"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("must start with `ses_`"),
        "{}",
        text(&out.stderr)
    );

    let missing = dir.path().join("nothing-here.db");
    let out = hane(&missing, &["list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no store at"),
        "{}",
        text(&out.stderr)
    );
    assert!(!missing.exists(), "reading must not create a store");
}
