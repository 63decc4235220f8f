//! Version envelopes: every stored item read from bytes that may be
//! damaged. The seeds are the bodies a real store holds after runs, an
//! outbound action and a release; any bytes end in an item or in an
//! `EnvelopeError`, and an item read is sealed again into bytes that read
//! back the same.

use hane_coordinator::{ReleaseBody, StartRun};
use hane_core::{
    ActionRequest, AgentRun, Conversation, Evaluation, Operation, Reception, SessionEvent, Task,
    WorkflowCase, conversation::ConversationEntry,
};
use hane_stored::{EnvelopeError, Versioned, open, seal};
use serde_json::json;

use crate::engine::{Shape, Target, fuzz};

/// The sealed bodies of a store after a few runs.
fn stored_bodies() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hane.db");
    let tokio = tokio::runtime::Runtime::new().unwrap();
    tokio.block_on(async {
        let runtime = crate::activated(&path).await;
        for (agent, input) in [
            (
                "vehicle-check-scripted",
                json!({"vehicle": "架空 300 あ 10-02"}),
            ),
            ("vehicle-check-scripted", json!({"vehicle": "no such van"})),
            (
                "inspection-reminder",
                json!({"vehicle": "架空 300 あ 10-02", "to": "depot@fleet.example"}),
            ),
        ] {
            let request = StartRun {
                agent: agent.into(),
                input,
                shadow: false,
            };
            runtime.run_to_end(request).await.unwrap();
        }
    });
    let db = rusqlite::Connection::open(&path).unwrap();
    let mut bodies = Vec::new();
    for table in [
        "events",
        "operations",
        "releases",
        "runs",
        "tasks",
        "actions",
        "conversations",
        "conversation_entries",
        "receptions",
        "evaluations",
        "workflow_cases",
    ] {
        let mut query = db.prepare(&format!("SELECT body FROM {table}")).unwrap();
        let rows = query.query_map([], |row| row.get::<_, Vec<u8>>(0)).unwrap();
        bodies.extend(rows.map(Result::unwrap));
    }
    assert!(bodies.len() > 20, "only {} stored bodies", bodies.len());
    bodies
}

/// Reads `bytes` as a `T`; an item read, sealed again, reads back to the
/// same bytes.
fn read<T: Versioned>(bytes: &[u8]) -> Option<String> {
    match open::<T>(bytes) {
        Ok(item) => {
            let sealed = seal(&item);
            let again = open::<T>(&sealed).expect("a sealed item reads");
            assert!(
                seal(&again) == sealed,
                "{} changed when sealed again",
                T::KIND
            );
            Some(format!("{} ok", T::KIND))
        }
        Err(EnvelopeError::WrongKind { .. }) => None,
        Err(e) => Some(e.to_string()),
    }
}

#[test]
fn envelopes() {
    let target = Target {
        name: "envelopes",
        seeds: stored_bodies(),
        dictionary: vec![vec![0xff; 9], vec![0x80; 5], vec![0; 8]],
        shape: Shape::Bytes,
    };
    fuzz(target, |bytes| {
        let outcomes = [
            read::<SessionEvent>(bytes),
            read::<Operation>(bytes),
            read::<AgentRun>(bytes),
            read::<Task>(bytes),
            read::<ActionRequest>(bytes),
            read::<Conversation>(bytes),
            read::<ConversationEntry>(bytes),
            read::<Reception>(bytes),
            read::<Evaluation>(bytes),
            read::<WorkflowCase>(bytes),
            match open::<ReleaseBody>(bytes) {
                Ok(_) => Some("release ok".into()),
                Err(EnvelopeError::WrongKind { .. }) => None,
                Err(e) => Some(e.to_string()),
            },
        ];
        outcomes
            .into_iter()
            .flatten()
            .next()
            .unwrap_or_else(|| "another kind".into())
    });
}
