//! The `records` and `documents` capabilities end to end: the ledger
//! built-ins run in the real sandbox against `examples/ledger`.

use std::sync::{Arc, OnceLock};

use hane_core::{Ledger, Limits, Outcome, Policy};
use hane_sandbox::{CallError, GuestError, LoadError, LoadedOperation, Sandbox, SandboxConfig};
use serde_json::{Value, json};

use crate::harness::{cache_dir, examples};

fn example_ledger() -> Arc<Ledger> {
    static LEDGER: OnceLock<Arc<Ledger>> = OnceLock::new();
    LEDGER
        .get_or_init(|| Arc::new(Ledger::load_dir(&examples().join("ledger")).expect("ledger")))
        .clone()
}

/// A sandbox of this module's own, holding the example ledger, so other
/// tests that set a ledger on the shared sandbox cannot change what these
/// read.
fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        let mut config = SandboxConfig::new();
        config.cache_dir(Some(cache_dir())).max_instances(8);
        let sandbox = Sandbox::new(&config).expect("sandbox");
        sandbox.set_ledger(example_ledger());
        sandbox
    })
}

fn grants(records: &[&str], documents: &[&str]) -> Policy {
    Policy {
        records: records.iter().map(|s| (*s).to_owned()).collect(),
        documents: documents.iter().map(|s| (*s).to_owned()).collect(),
        ..Policy::default()
    }
}

async fn load(
    sandbox: &Sandbox,
    name: &str,
    policy: &Policy,
) -> Result<LoadedOperation, LoadError> {
    let bytes = hane_builtins::get(name).unwrap_or_else(|| panic!("no builtin {name}"));
    sandbox.load(name, bytes, policy).await
}

async fn builtin(name: &str, policy: &Policy) -> LoadedOperation {
    load(sandbox(), name, policy)
        .await
        .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

async fn run(op: &LoadedOperation, input: Value) -> hane_sandbox::Call {
    op.call(&input.to_string(), &Limits::default()).await
}

fn output(call: &hane_sandbox::Call) -> Value {
    let text = call
        .result
        .as_ref()
        .unwrap_or_else(|e| panic!("call failed: {e}"));
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn find_record_finds_a_vehicle_by_registration() {
    let op = builtin("data.find_record", &grants(&["vehicles", "leases"], &[])).await;
    let call = run(
        &op,
        json!({"collection": "vehicles", "match": {"registration": "架空 300 あ 10-02"}}),
    )
    .await;
    let out = output(&call);
    let records = out["records"].as_array().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["id"], "V-001");
    assert_eq!(records[0]["model"], "Toyota Hiace Van");
    assert_eq!(out["truncated"], false);
    assert_eq!(call.receipt.host_calls.records, 1);
    assert_eq!(call.receipt.host_calls.denied, 0);

    // JSONL records, matched on two fields, one of them a number.
    let call = run(
        &op,
        json!({"collection": "leases", "match": {"vehicle": "V-002", "months": 24}}),
    )
    .await;
    assert_eq!(output(&call)["records"][0]["contract_no"], "C-1002");

    let call = run(
        &op,
        json!({"collection": "vehicles", "match": {"depot": "Shinagawa"}, "limit": 1}),
    )
    .await;
    let out = output(&call);
    assert_eq!(out["records"].as_array().unwrap().len(), 1);
    assert_eq!(out["truncated"], true);
}

#[tokio::test]
async fn a_missing_vehicle_is_an_empty_list() {
    let op = builtin("data.find_record", &grants(&["vehicles"], &[])).await;
    let call = run(
        &op,
        json!({"collection": "vehicles", "match": {"registration": "架空 999 ん 99-99"}}),
    )
    .await;
    assert_eq!(output(&call), json!({"records": [], "truncated": false}));

    // The input schema refuses an empty match before the guest runs.
    let call = run(&op, json!({"collection": "vehicles", "match": {}})).await;
    assert!(
        matches!(call.result, Err(CallError::InvalidInput(_))),
        "{:?}",
        call.result
    );
}

#[tokio::test]
async fn get_record_returns_the_record_or_not_found() {
    let op = builtin("data.get_record", &grants(&["vehicles", "leases"], &[])).await;
    let call = run(&op, json!({"collection": "leases", "id": "L-03"})).await;
    assert_eq!(output(&call)["record"]["lessee"], "Aoba Florists");

    let call = run(&op, json!({"collection": "vehicles", "id": "V-404"})).await;
    match &call.result {
        Err(CallError::Operation(GuestError::NotFound(message))) => {
            assert_eq!(
                message,
                "collection `vehicles` has no record with id `V-404`"
            );
        }
        other => panic!("expected not-found, got {other:?}"),
    }
    assert_eq!(call.receipt.outcome, Outcome::OperationError);
    assert_eq!(call.receipt.host_calls.denied, 0);
}

#[tokio::test]
async fn read_summary_of_a_lease_contract() {
    let op = builtin("documents.read_summary", &grants(&[], &["leases"])).await;
    let call = run(&op, json!({"set": "leases", "document": "c-1001.txt"})).await;
    let out = output(&call);
    assert_eq!(out["document"], "c-1001.txt");
    assert_eq!(out["pages"], 2);
    assert!(
        out["title"]
            .as_str()
            .unwrap()
            .starts_with("Lease contract C-1001")
    );
    let summary = out["summary"].as_str().unwrap();
    assert!(summary.contains("Kita Logistics"), "{summary}");
    assert!(summary.contains("68,000 yen a month"), "{summary}");
    assert_eq!(call.receipt.host_calls.documents, 1);

    // By stem, too; an unknown document is not-found.
    let call = run(&op, json!({"set": "leases", "document": "c-1003"})).await;
    assert_eq!(output(&call)["document"], "c-1003.txt");
    let call = run(&op, json!({"set": "leases", "document": "c-9999.txt"})).await;
    assert!(
        matches!(
            &call.result,
            Err(CallError::Operation(GuestError::NotFound(m))) if m.contains("c-9999.txt")
        ),
        "{:?}",
        call.result
    );
}

#[tokio::test]
async fn a_collection_that_is_not_granted_is_denied_in_the_receipt() {
    let op = builtin("data.find_record", &grants(&["vehicles"], &[])).await;
    let call = run(
        &op,
        json!({"collection": "leases", "match": {"vehicle": "V-001"}}),
    )
    .await;
    match &call.result {
        Err(CallError::Denied { denial, guest }) => {
            assert_eq!(denial, "collection `leases` is not granted");
            let guest = guest.as_deref().unwrap();
            assert!(guest.contains("(granted: vehicles)"), "{guest}");
        }
        other => panic!("expected denied, got {other:?}"),
    }
    assert_eq!(call.receipt.outcome, Outcome::Denied);
    assert_eq!(call.receipt.host_calls.denied, 1);
    assert_eq!(call.receipt.host_calls.records, 1);

    let op = builtin("documents.read_summary", &grants(&[], &["manuals"])).await;
    let call = run(&op, json!({"set": "leases", "document": "c-1001.txt"})).await;
    assert_eq!(call.receipt.outcome, Outcome::Denied);
    assert_eq!(call.receipt.host_calls.denied, 1);
}

#[tokio::test]
async fn a_granted_collection_the_ledger_lacks_is_not_found() {
    let op = builtin("data.get_record", &grants(&["trucks"], &[])).await;
    let call = run(&op, json!({"collection": "trucks", "id": "T-1"})).await;
    assert!(
        matches!(
            &call.result,
            Err(CallError::Operation(GuestError::NotFound(m))) if m == "the ledger has no collection `trucks`"
        ),
        "{:?}",
        call.result
    );
    assert_eq!(call.receipt.host_calls.denied, 0);
}

#[tokio::test]
async fn importing_records_without_a_grant_is_refused_at_load() {
    // Documents granted, records not: the records import is what is named.
    let err = load(sandbox(), "data.find_record", &grants(&[], &["leases"]))
        .await
        .unwrap_err();
    match &err {
        LoadError::NotGranted { import, grant, .. } => {
            assert!(
                import.starts_with("hane:operation/records@0.1."),
                "{import}"
            );
            assert_eq!(*grant, "collections");
        }
        other => panic!("expected NotGranted, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("but its policy grants no collections; add `capabilities.records`"),
        "{err}"
    );

    let err = load(sandbox(), "documents.read_summary", &Policy::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "imports `hane:operation/documents@0.1.0`, but its policy grants no document sets"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn components_that_do_not_use_the_ledger_do_not_import_it() {
    for name in [
        "documents.search",
        "documents.read_pages",
        "http.get",
        "image.view",
    ] {
        let bytes = hane_builtins::get(name).unwrap();
        let found = sandbox().inspect(name, bytes).await.unwrap();
        assert!(
            !found
                .imports
                .iter()
                .any(|i| i.name.starts_with("hane:operation/records")
                    || i.name.starts_with("hane:operation/documents")),
            "{name}: {:?}",
            found.imports
        );
    }
    let found = sandbox()
        .inspect(
            "data.get_record",
            hane_builtins::get("data.get_record").unwrap(),
        )
        .await
        .unwrap();
    assert!(
        !found
            .imports
            .iter()
            .any(|i| i.name.starts_with("hane:operation/documents")),
        "{:?}",
        found.imports
    );
}

#[tokio::test]
async fn each_call_reads_the_ledger_current_when_it_starts() {
    let mut config = SandboxConfig::new();
    config.cache_dir(Some(cache_dir())).max_instances(2);
    let sandbox = Sandbox::new(&config).unwrap();
    let op = load(&sandbox, "data.get_record", &grants(&["vehicles"], &[]))
        .await
        .unwrap();
    let input = json!({"collection": "vehicles", "id": "V-001"}).to_string();

    // The default ledger is empty.
    let call = op.call(&input, &Limits::default()).await;
    assert!(
        matches!(
            &call.result,
            Err(CallError::Operation(GuestError::NotFound(_)))
        ),
        "{:?}",
        call.result
    );

    sandbox.set_ledger(example_ledger());
    let call = op.call(&input, &Limits::default()).await;
    let out: Value = serde_json::from_str(call.result.as_ref().unwrap()).unwrap();
    assert_eq!(out["record"]["depot"], "Shinagawa");
    assert!(Arc::ptr_eq(&sandbox.ledger(), &example_ledger()));
}
