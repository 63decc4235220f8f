//! Session events and operations survive the stored format, and a stored
//! item of a newer version is refused by name.

use hane_core::{
    Control, Impact, Input, InputKind, JsonText, Limits, Operation, OperationFailure,
    OperationOutput, Outcome, Policy, Receipt, SessionEvent, SessionId, ToolCall, ToolCallId,
    ToolCallStatus, WasmCall,
    operation::GuestErrorKind,
    policy::{DirGrant, HostPattern},
    receipt::HostCalls,
};
use hane_stored::{EnvelopeError, Versioned, open, seal};

fn receipt() -> Receipt {
    Receipt {
        operation: "documents.search".into(),
        version: "0.1.0".into(),
        digest: "sha256:00".into(),
        outcome: Outcome::Succeeded,
        fuel_consumed: 1234,
        wall_time_us: 56,
        peak_memory_bytes: 1 << 20,
        host_calls: HostCalls {
            log: 1,
            http_requests: 2,
            denied: 3,
            records: 4,
            documents: 5,
        },
        output_bytes: 10,
        log_bytes: 0,
    }
}

fn operation(session: &SessionId, call: &ToolCallId) -> Operation {
    Operation::wasm(
        session.clone(),
        call.clone(),
        Impact::Write,
        WasmCall {
            name: "documents.search".into(),
            component: "sha256:ab".into(),
            policy: Policy {
                files: vec![
                    "examples/documents:/documents:rw"
                        .parse::<DirGrant>()
                        .unwrap(),
                ],
                env: vec!["LANG=C".parse().unwrap()],
                http: vec!["https://*.example.com:8443".parse::<HostPattern>().unwrap()],
                records: vec!["vehicles".into()],
                documents: vec!["leases".into()],
                actions: vec!["communication.send_email".into()],
            },
            limits: Limits::default(),
            input: JsonText::parse(r#"{"query":"tyre"}"#).unwrap(),
        },
    )
}

fn every_event() -> Vec<SessionEvent> {
    let session = SessionId::new();
    let call = ToolCallId::new();
    let op = operation(&session, &call);
    vec![
        SessionEvent::InputAccepted {
            input: Input {
                id: "order-1".parse().unwrap(),
                kind: InputKind::External {
                    payload: JsonText::parse(r#"{"vehicle":"KX-101"}"#).unwrap(),
                },
            },
        },
        SessionEvent::InputAccepted {
            input: Input {
                id: "cancel-1".parse().unwrap(),
                kind: InputKind::Control {
                    command: Control::Cancel {
                        reason: "operator".into(),
                    },
                },
            },
        },
        SessionEvent::InputAccepted {
            input: Input {
                id: "crash-1".parse().unwrap(),
                kind: InputKind::Crash {
                    operation: Some(op.id.clone()),
                    reason: "host restarted".into(),
                },
            },
        },
        SessionEvent::InputHandled {
            input: "order-1".parse().unwrap(),
        },
        SessionEvent::ModelTurn {
            model: "recorded".into(),
            input_tokens: 10,
            output_tokens: 20,
            response: JsonText::parse("[1,2]").unwrap(),
        },
        SessionEvent::ToolCallRecorded {
            call: ToolCall {
                id: call.clone(),
                tool: "documents.search".into(),
                input: JsonText::parse(r#"{"query":"tyre"}"#).unwrap(),
            },
            status: ToolCallStatus::Submitted {
                operations: vec![op.id.clone()],
            },
            operations: vec![op.clone()],
        },
        SessionEvent::ToolCallRecorded {
            call: ToolCall {
                id: ToolCallId::new(),
                tool: "documents.search".into(),
                input: JsonText::parse("{}").unwrap(),
            },
            status: ToolCallStatus::Rejected {
                message: "missing `query`".into(),
            },
            operations: vec![],
        },
        SessionEvent::OperationStarted {
            operation: op.id.clone(),
            attempt: 1,
        },
        SessionEvent::OperationCompleted {
            operation: op.id.clone(),
            result: OperationOutput {
                output: JsonText::parse(r#"{"hits":[]}"#).unwrap(),
                receipt: receipt(),
                logs: vec![],
                proposals: Vec::new(),
            },
        },
        SessionEvent::OperationFailed {
            operation: op.id.clone(),
            failure: OperationFailure {
                outcome: Outcome::FuelExhausted,
                guest_error: None,
                message: "fuel exhausted".into(),
                receipt: Some(receipt()),
                logs: vec![],
            },
        },
        SessionEvent::OperationFailed {
            operation: op.id.clone(),
            failure: OperationFailure {
                outcome: Outcome::OperationError,
                guest_error: Some(GuestErrorKind::NotFound),
                message: "operation error: not found: no record".into(),
                receipt: Some(receipt()),
                logs: vec![],
            },
        },
        SessionEvent::OperationUnknown {
            operation: op.id.clone(),
            reason: "host restarted while it ran".into(),
        },
        SessionEvent::RunStateChanged {
            run: "run-1".into(),
            state: "running".into(),
        },
        SessionEvent::Forked {
            parent: session,
            at: 7,
        },
    ]
}

#[test]
fn every_event_round_trips_through_its_envelope_and_through_json() {
    for event in every_event() {
        let sealed = seal(&event);
        assert_eq!(
            open::<SessionEvent>(&sealed).unwrap(),
            event,
            "{}",
            event.name()
        );
        let json = serde_json::to_string(&event).unwrap();
        let back: SessionEvent = serde_json::from_str(&json).unwrap();
        assert_eq!(back, event, "{json}");
    }
}

#[test]
fn operations_round_trip_with_their_policy_and_limits() {
    let op = operation(&SessionId::new(), &ToolCallId::new());
    assert_eq!(open::<Operation>(&seal(&op)).unwrap(), op);
}

#[test]
fn exports_show_json_documents_not_escaped_strings() {
    let event = &every_event()[0];
    let json = serde_json::to_value(event).unwrap();
    assert_eq!(
        json["inputAccepted"]["input"]["kind"]["external"]["payload"]["vehicle"],
        "KX-101"
    );
}

/// An event sealed by a future hane: the same envelope with version 8.
fn future_event_blob() -> Vec<u8> {
    let payload = postcard::to_allocvec(&("a field this build has never heard of", 42u32)).unwrap();
    let mut blob = b"HANE".to_vec();
    blob.extend(postcard::to_allocvec(&(SessionEvent::KIND, 8u16, payload.as_slice())).unwrap());
    blob
}

#[test]
fn a_future_version_is_refused_with_the_versions_found_and_read() {
    let err = open::<SessionEvent>(&future_event_blob()).unwrap_err();
    assert_eq!(
        err,
        EnvelopeError::UnsupportedVersion {
            kind: "session-event",
            found: 8,
            supported: &[1, 2, 3, 4, 5, 6, 7],
        }
    );
    assert_eq!(
        err.to_string(),
        "`session-event` version 8 is not supported: this build reads versions 1, 2, 3, 4, 5, 6, 7"
    );
}

/// Items sealed by the last build that wrote version 1, kept as bytes in
/// `tests/fixtures/`, read by this one.
mod version_1 {
    use hane_core::{Operation, SessionEvent, operation::OperationKind};
    use hane_stored::open;

    fn policy_of(op: &Operation) -> &hane_core::Policy {
        let OperationKind::Wasm(call) = &op.kind else {
            panic!("a wasm operation");
        };
        &call.policy
    }

    #[test]
    fn an_operation_reads_with_its_grants_and_no_ledger_grants() {
        let op: Operation = open(include_bytes!("fixtures/operation-v1.bin")).unwrap();
        assert_eq!(op.id.as_str(), "op_01hzzzzzzzzzzzzzzzzzzzzzz2");
        assert_eq!(op.session.as_str(), "ses_01hzzzzzzzzzzzzzzzzzzzzzz0");
        assert_eq!(op.summary(), "documents.search");
        let policy = policy_of(&op);
        assert_eq!(policy.files[0].guest_path(), "/documents");
        assert_eq!(policy.env[0].to_string(), "LANG=C");
        assert_eq!(policy.http[0].to_string(), "https://*.example.com:8443");
        assert!(policy.records.is_empty());
        assert!(policy.documents.is_empty());
        assert!(policy.actions.is_empty());
    }

    #[test]
    fn events_read_with_no_ledger_grants_or_counts() {
        let recorded: SessionEvent =
            open(include_bytes!("fixtures/event-tool-call-recorded-v1.bin")).unwrap();
        let SessionEvent::ToolCallRecorded { operations, .. } = &recorded else {
            panic!("{recorded:?}");
        };
        let policy = policy_of(&operations[0]);
        assert_eq!(policy.http.len(), 1);
        assert!(policy.records.is_empty() && policy.documents.is_empty());

        let completed: SessionEvent =
            open(include_bytes!("fixtures/event-operation-completed-v1.bin")).unwrap();
        let SessionEvent::OperationCompleted { result, .. } = &completed else {
            panic!("{completed:?}");
        };
        let calls = result.receipt.host_calls;
        assert_eq!((calls.log, calls.http_requests, calls.denied), (3, 2, 1));
        assert_eq!((calls.records, calls.documents), (0, 0));
        assert_eq!(result.logs[0].message, "searched");
        assert_eq!(result.output.as_str(), r#"{"hits":[]}"#);

        let failed: SessionEvent =
            open(include_bytes!("fixtures/event-operation-failed-v1.bin")).unwrap();
        let SessionEvent::OperationFailed { failure, .. } = &failed else {
            panic!("{failed:?}");
        };
        let receipt = failure.receipt.as_ref().unwrap();
        assert_eq!(receipt.fuel_consumed, 1234);
        assert_eq!(receipt.log_bytes, 7);
        assert_eq!(receipt.host_calls.records, 0);
    }
}

/// Items sealed by the last build that wrote version 2 (before the
/// `actions` grant), kept as bytes in `tests/fixtures/`, read by this one.
mod version_2 {
    use hane_core::{Operation, SessionEvent, operation::OperationKind};
    use hane_stored::open;

    fn policy_of(op: &Operation) -> &hane_core::Policy {
        let OperationKind::Wasm(call) = &op.kind else {
            panic!("a wasm operation");
        };
        &call.policy
    }

    #[test]
    fn an_operation_reads_with_its_grants_and_no_action_grants() {
        let op: Operation = open(include_bytes!("fixtures/operation-v2.bin")).unwrap();
        assert_eq!(op.id.as_str(), "op_01hzzzzzzzzzzzzzzzzzzzzzz2");
        assert_eq!(op.summary(), "data.find_record");
        let policy = policy_of(&op);
        assert_eq!(policy.files[0].guest_path(), "/documents");
        assert_eq!(policy.env[0].to_string(), "LANG=C");
        assert_eq!(policy.http[0].to_string(), "https://*.example.com:8443");
        assert_eq!(policy.records, ["vehicles"]);
        assert_eq!(policy.documents, ["leases"]);
        assert!(policy.actions.is_empty());
    }

    #[test]
    fn a_recorded_tool_call_reads_with_no_action_grants() {
        let recorded: SessionEvent =
            open(include_bytes!("fixtures/event-tool-call-recorded-v2.bin")).unwrap();
        let SessionEvent::ToolCallRecorded {
            call, operations, ..
        } = &recorded
        else {
            panic!("{recorded:?}");
        };
        assert_eq!(call.tool, "data.find_record");
        let policy = policy_of(&operations[0]);
        assert_eq!(policy.records, ["vehicles"]);
        assert!(policy.actions.is_empty());
    }
}

/// An item sealed by the last build that wrote version 3 (before failures
/// carried the guest's error kind), read by this one.
mod version_3 {
    use hane_core::{Outcome, SessionEvent, operation::GuestErrorKind};
    use hane_stored::open;

    #[test]
    fn a_failure_reads_with_the_guest_error_kind_its_message_named() {
        let failed: SessionEvent =
            open(include_bytes!("fixtures/event-operation-failed-v3.bin")).unwrap();
        let SessionEvent::OperationFailed { operation, failure } = &failed else {
            panic!("{failed:?}");
        };
        assert_eq!(operation.as_str(), "op_01hzzzzzzzzzzzzzzzzzzzzzz3");
        assert_eq!(failure.outcome, Outcome::OperationError);
        assert_eq!(failure.guest_error, Some(GuestErrorKind::NotFound));
        assert_eq!(
            failure.message,
            "operation error: not found: no record `V-9` in `vehicles`"
        );
        assert_eq!(failure.logs[0].message, "looked");
    }
}
