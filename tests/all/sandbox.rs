//! The sandbox's own behaviour: loading, caching, schemas and receipts.

use hane_core::{Limits, Outcome, Policy};
use hane_sandbox::{CallError, Grant};

use crate::harness::{cache_dir, program, sandbox};

#[tokio::test]
pub(crate) async fn a_trivial_call_succeeds_with_a_full_receipt() {
    let op = program("guest_echo", &Policy::default()).await;
    assert_eq!(op.descriptor().name, "test.echo");
    assert_eq!(op.descriptor().impact, hane_core::Impact::Read);
    assert!(op.digest().starts_with("sha256:"));
    let call = op.call(r#"{"message":"héllo"}"#, &Limits::default()).await;
    let expected = r#"{"message":"héllo","length":6}"#;
    assert_eq!(call.result.unwrap(), expected);
    let r = &call.receipt;
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!(r.operation, "test.echo");
    assert!(r.fuel_consumed > 0);
    assert!(r.peak_memory_bytes >= 64 * 1024);
    assert!(r.wall_time_us > 0);
    assert_eq!(r.output_bytes, expected.len() as u64);
}

#[tokio::test]
async fn input_is_validated_before_the_guest_runs() {
    let op = program("guest_echo", &Policy::default()).await;
    let call = op.call(r#"{"message": 5}"#, &Limits::default()).await;
    match &call.result {
        Err(CallError::InvalidInput(v)) => {
            assert_eq!(v[0].instance_path, "/message");
            assert!(
                v[0].schema_path.contains("/properties/message"),
                "{}",
                v[0].schema_path
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(call.receipt.outcome, Outcome::InvalidInput);
    assert_eq!(call.receipt.fuel_consumed, 0, "the guest must not run");

    let call = op.call("{not json", &Limits::default()).await;
    assert!(
        matches!(call.result, Err(CallError::InputNotJson(_))),
        "{:?}",
        call.result
    );

    let call = op.call("{}", &Limits::default()).await;
    let err = call.result.unwrap_err().to_string();
    assert!(err.contains("\"message\" is a required property"), "{err}");
}

#[tokio::test]
pub(crate) async fn a_component_written_without_the_sdk_runs() {
    let op = program("raw_reverse", &Policy::default()).await;
    assert_eq!(op.descriptor().name, "raw.reverse");
    let call = op.call(r#"{"text":"stressed"}"#, &Limits::default()).await;
    assert_eq!(call.result.unwrap(), r#"{"reversed":"desserts"}"#);
    assert_eq!(call.receipt.host_calls.log, 1);
    assert_eq!(call.logs[0].level, "info");
}

#[tokio::test]
async fn compiled_components_are_cached_on_disk() {
    let path = hane_builtins::test_programs::GUEST_SPIN;
    let bytes = std::fs::read(path).unwrap();
    let op = sandbox()
        .load("spin", &bytes, &Policy::default())
        .await
        .unwrap();
    let cached = sandbox().cached_path(op.digest()).unwrap();
    assert!(cached.starts_with(cache_dir()));
    assert!(cached.is_file(), "{}", cached.display());
    // A corrupt cache entry is replaced, not trusted. It is swapped in by
    // rename, as the cache itself writes: files in use stay mapped.
    let garbage = cache_dir().join("garbage.tmp");
    std::fs::write(&garbage, b"garbage").unwrap();
    std::fs::rename(&garbage, &cached).unwrap();
    let again = sandbox()
        .load("spin", &bytes, &Policy::default())
        .await
        .unwrap();
    let call = again
        .call(r#"{"iterations": 1000}"#, &Limits::default())
        .await;
    assert!(call.result.is_ok(), "{:?}", call.result);
    assert!(std::fs::metadata(&cached).unwrap().len() > 1000);
}

#[tokio::test]
async fn imports_report_the_grant_each_needs() {
    let policy = Policy {
        http: vec!["https://example.com".parse().unwrap()],
        ..Policy::default()
    };
    let op = program("hostile_http", &policy).await;
    let http = op
        .imports()
        .iter()
        .find(|i| i.name.starts_with("wasi:http/outgoing-handler@"))
        .expect("imports outgoing-handler");
    assert_eq!(http.grant, Grant::Http);
    let tcp = program("hostile_tcp", &Policy::default()).await;
    assert!(tcp.imports().iter().any(|i| i.grant == Grant::Never));
}

#[tokio::test]
async fn bytes_that_are_not_a_component_are_refused() {
    let err = sandbox()
        .load("junk.wasm", b"definitely not wasm", &Policy::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("`junk.wasm` is not a valid WebAssembly component"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_do_not_share_state() {
    let op = program("guest_echo", &Policy::default()).await;
    let mut tasks = Vec::new();
    for i in 0..64 {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let call = op
                .call(&format!(r#"{{"message":"m{i}"}}"#), &Limits::default())
                .await;
            (i, call.result.unwrap())
        }));
    }
    for t in tasks {
        let (i, out) = t.await.unwrap();
        let len = format!("m{i}").len();
        assert_eq!(out, format!(r#"{{"message":"m{i}","length":{len}}}"#));
    }
}
