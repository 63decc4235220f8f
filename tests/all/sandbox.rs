//! The sandbox's own behaviour: loading, caching, schemas and receipts.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use hane_core::{Limits, Outcome, Policy};
use hane_sandbox::{
    Artifact, ArtifactFit, CallError, EngineKind, Grant, Precompiler, Sandbox, SandboxConfig,
};

use hane_test_support::file_names;

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

/// A sandbox of `engine` with a few instances on the cache `dir`.
fn sandbox_with_cache(engine: EngineKind, dir: &Path) -> Sandbox {
    Sandbox::new(
        SandboxConfig::new()
            .cache_dir(Some(dir.to_owned()))
            .max_instances(2)
            .engine(engine),
    )
    .unwrap()
}

fn echo_bytes() -> Vec<u8> {
    std::fs::read(hane_builtins::test_programs::GUEST_ECHO).unwrap()
}

/// `guest_echo` loaded by `sandbox` and called once.
async fn echo_on(sandbox: &Sandbox) {
    let op = sandbox
        .load("guest_echo", &echo_bytes(), &Policy::default())
        .await
        .unwrap();
    let call = op.call(r#"{"message":"hi"}"#, &Limits::default()).await;
    assert_eq!(call.result.unwrap(), r#"{"message":"hi","length":2}"#);
}

/// The artifacts of `guest_echo` the tests use, each compiled once per
/// process: for this host on cranelift (`None`), for Pulley (`pulley64`),
/// for this host's triple with no CPU features assumed (`host`), and for
/// another architecture (`other`).
fn echo_artifact(target: Option<&str>) -> &'static Artifact {
    static ARTIFACTS: Mutex<BTreeMap<Option<String>, &'static Artifact>> =
        Mutex::new(BTreeMap::new());
    let key = target.map(|t| match t {
        "host" => Precompiler::new(&SandboxConfig::new(), None)
            .unwrap()
            .target()
            .to_owned(),
        "other" if cfg!(target_arch = "aarch64") => "x86_64-unknown-linux-gnu".to_owned(),
        "other" => "aarch64-unknown-linux-gnu".to_owned(),
        t => t.to_owned(),
    });
    let mut artifacts = ARTIFACTS.lock().unwrap();
    artifacts.entry(key.clone()).or_insert_with(|| {
        let compiler = Precompiler::new(&SandboxConfig::new(), key.as_deref()).unwrap();
        Box::leak(Box::new(
            compiler.precompile("guest_echo", &echo_bytes()).unwrap(),
        ))
    })
}

/// Writes `artifact` into `dir` under its name; the name.
fn plant(artifact: &Artifact, dir: &Path) -> String {
    std::fs::write(dir.join(&artifact.file_name), &artifact.bytes).unwrap();
    artifact.file_name.clone()
}

#[tokio::test]
async fn precompiled_artifacts_load_without_compiling_on_both_engines() {
    for (engine, target) in [
        (EngineKind::Cranelift, None),
        (EngineKind::Pulley, Some("pulley64")),
        // Compiled for this triple with no CPU features assumed, as
        // `hane op compile --target` does for another host.
        (EngineKind::Cranelift, Some("host")),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let name = plant(echo_artifact(target), dir.path());
        let sandbox = sandbox_with_cache(engine, dir.path());
        echo_on(&sandbox).await;
        assert_eq!(sandbox.compilations(), 0, "{engine} {target:?} compiled");
        assert_eq!(file_names(dir.path()), [name], "{engine} {target:?} wrote");
    }
}

#[tokio::test]
async fn artifacts_for_another_target_or_engine_are_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = plant(echo_artifact(Some("other")), dir.path());
    plant(echo_artifact(Some("pulley64")), dir.path());
    let sandbox = sandbox_with_cache(EngineKind::Cranelift, dir.path());
    assert_eq!(
        sandbox.artifact_fits(&dir.path().join(&foreign)),
        ArtifactFit::Other
    );
    echo_on(&sandbox).await;
    assert_eq!(sandbox.compilations(), 1);
    // Compiled for this host and engine, and cached beside the others.
    assert_eq!(file_names(dir.path()).len(), 3);
}

#[test]
fn the_cache_key_differs_per_engine() {
    let dir = tempfile::tempdir().unwrap();
    let digest = &echo_artifact(None).digest;
    let path = |engine| {
        let sandbox = sandbox_with_cache(engine, dir.path());
        let path = sandbox.cached_path(digest).unwrap();
        assert_eq!(sandbox.artifact_fits(&path), ArtifactFit::ThisEngine);
        path.file_name().unwrap().to_string_lossy().into_owned()
    };
    assert_eq!(path(EngineKind::Cranelift), echo_artifact(None).file_name);
    assert_eq!(
        path(EngineKind::Pulley),
        echo_artifact(Some("pulley64")).file_name
    );
    assert_ne!(
        echo_artifact(None).file_name,
        echo_artifact(Some("pulley64")).file_name
    );
}

#[tokio::test]
async fn an_unwritable_cache_compiles_in_memory() {
    // Under a file, so the cache cannot be made even by root.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), b"").unwrap();
    let sandbox = sandbox_with_cache(EngineKind::Cranelift, &dir.path().join("file/cache"));
    echo_on(&sandbox).await;
    assert_eq!(sandbox.compilations(), 1);
    assert_eq!(file_names(dir.path()), ["file"]);
}

#[tokio::test]
async fn an_artifact_of_another_engine_under_this_engines_name_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let pulley = echo_artifact(Some("pulley64"));
    std::fs::write(
        dir.path().join(&echo_artifact(None).file_name),
        &pulley.bytes,
    )
    .unwrap();
    let sandbox = sandbox_with_cache(EngineKind::Cranelift, dir.path());
    echo_on(&sandbox).await;
    assert_eq!(sandbox.compilations(), 1);
}

#[tokio::test]
async fn a_compiled_artifact_is_refused_as_a_component() {
    let artifact = echo_artifact(None);
    let err = sandbox()
        .load("echo.cwasm", &artifact.bytes, &Policy::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "`echo.cwasm` is not a valid WebAssembly component: it is a compiled artifact (.cwasm)"
        ),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
}
