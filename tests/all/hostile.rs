//! Every hostile guest is contained with its own typed error, and the host
//! stays healthy afterwards.

use std::time::{Duration, Instant};

use hane_core::{ByteSize, Limits, Outcome, Policy};
use hane_sandbox::{CallError, GuestError, OutputStream};

use crate::harness::{allow_loopback, http_server, program, rss_bytes};

fn limits() -> Limits {
    Limits::default()
}

#[tokio::test]
pub(crate) async fn an_infinite_loop_runs_out_of_fuel() {
    let op = program("hostile_loop", &Policy::default()).await;
    let limits = Limits {
        fuel: 50_000_000,
        ..limits()
    };
    let call = op.call("{}", &limits).await;
    assert!(
        matches!(
            call.result,
            Err(CallError::FuelExhausted { limit: 50_000_000 })
        ),
        "{:?}",
        call.result
    );
    assert_eq!(call.receipt.outcome, Outcome::FuelExhausted);
    assert_eq!(call.receipt.fuel_consumed, 50_000_000);
}

#[tokio::test]
async fn an_infinite_loop_with_plenty_of_fuel_times_out() {
    let op = program("hostile_loop", &Policy::default()).await;
    let limits = Limits {
        fuel: u64::MAX / 2,
        timeout: hane_core::Duration::millis(200),
        ..limits()
    };
    let start = Instant::now();
    let call = op.call("{}", &limits).await;
    assert!(
        matches!(call.result, Err(CallError::Timeout { limit }) if limit == hane_core::Duration::millis(200)),
        "{:?}",
        call.result
    );
    assert_eq!(call.receipt.outcome, Outcome::Timeout);
    // Generous: the point is that it stops, not how fast.
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn a_cancelled_loop_stops() {
    let op = program("hostile_loop", &Policy::default()).await;
    let limits = Limits {
        fuel: u64::MAX / 2,
        timeout: hane_core::Duration::seconds(60),
        ..limits()
    };
    let cancel = hane_sandbox::CancelToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        canceller.cancel();
    });
    let start = Instant::now();
    let call = op.call_with("{}", &limits, &cancel).await;
    assert!(
        matches!(call.result, Err(CallError::Cancelled)),
        "{:?}",
        call.result
    );
    assert_eq!(call.receipt.outcome, Outcome::Cancelled);
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
pub(crate) async fn unbounded_memory_growth_hits_the_memory_limit() {
    let op = program("hostile_memory", &Policy::default()).await;
    let limits = Limits {
        memory: ByteSize::mebibytes(32),
        ..limits()
    };
    let call = op.call("{}", &limits).await;
    match &call.result {
        Err(CallError::MemoryLimit { limit, requested }) => {
            assert_eq!(*limit, ByteSize::mebibytes(32));
            assert!(*requested > ByteSize::mebibytes(32).bytes());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(call.receipt.outcome, Outcome::MemoryLimit);
    assert!(call.receipt.peak_memory_bytes <= ByteSize::mebibytes(32).bytes());
    assert!(call.receipt.peak_memory_bytes > ByteSize::mebibytes(16).bytes());
}

#[tokio::test]
pub(crate) async fn unbounded_recursion_traps_on_stack_exhaustion() {
    let op = program("hostile_recursion", &Policy::default()).await;
    let call = op.call("{}", &limits()).await;
    match &call.result {
        Err(CallError::Trap {
            message,
            panic: None,
        }) => {
            assert!(
                message.contains("call stack exhausted")
                    || message.contains("out of bounds memory access"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(call.receipt.outcome, Outcome::Trap);
}

#[tokio::test]
pub(crate) async fn a_panic_is_a_trap_with_the_guest_message() {
    let op = program("hostile_panic", &Policy::default()).await;
    let call = op.call(r#"{"reason":"the sky fell"}"#, &limits()).await;
    match &call.result {
        Err(CallError::Trap { panic: Some(p), .. }) => assert_eq!(p, "hostile panic: the sky fell"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        call.result.unwrap_err().to_string(),
        "trap: the operation panicked: hostile panic: the sky fell"
    );
}

#[tokio::test]
pub(crate) async fn output_past_the_cap_is_refused() {
    let op = program("hostile_output", &Policy::default()).await;
    let limits = Limits {
        output_bytes: ByteSize::kibibytes(4),
        ..limits()
    };
    let small = op.call(r#"{"bytes": 100}"#, &limits).await;
    assert!(small.result.is_ok(), "{:?}", small.result);
    let call = op.call(r#"{"bytes": 100000}"#, &limits).await;
    assert!(
        matches!(
            call.result,
            Err(CallError::OutputTooLarge { stream: OutputStream::Output, limit }) if limit == ByteSize::kibibytes(4)
        ),
        "{:?}",
        call.result
    );
    assert_eq!(call.receipt.outcome, Outcome::OutputTooLarge);
}

#[tokio::test]
pub(crate) async fn a_log_flood_hits_the_log_limit() {
    let op = program("hostile_log_flood", &Policy::default()).await;
    let limits = Limits {
        log_bytes: ByteSize::kibibytes(16),
        ..limits()
    };
    let call = op
        .call(r#"{"messages": 1000000000, "size": 1024}"#, &limits)
        .await;
    assert!(
        matches!(
            call.result,
            Err(CallError::OutputTooLarge { stream: OutputStream::Log, limit }) if limit == ByteSize::kibibytes(16)
        ),
        "{:?}",
        call.result
    );
    let kept: usize = call.logs.iter().map(|l| l.message.len()).sum();
    assert!(kept <= 16 * 1024, "{kept}");
    assert_eq!(call.receipt.host_calls.log, 17);
}

#[tokio::test]
pub(crate) async fn a_print_flood_hits_the_capture_cap() {
    let op = program("hostile_print_flood", &Policy::default()).await;
    let few = op.call(r#"{"lines": 3}"#, &limits()).await;
    assert_eq!(few.result.unwrap(), r#"{"printed":3}"#);
    assert_eq!(few.logs[0].level, "stdout");
    assert_eq!(few.logs[0].message.len(), 3 * 1024);

    let call = op.call(r#"{"lines": 1000000}"#, &limits()).await;
    assert!(
        matches!(
            call.result,
            Err(CallError::OutputTooLarge { stream: OutputStream::Log, limit }) if limit == ByteSize::kibibytes(16)
        ),
        "{:?}",
        call.result
    );
    let kept: usize = call
        .logs
        .iter()
        .filter(|l| l.level == "stdout")
        .map(|l| l.message.len())
        .sum();
    assert_eq!(kept, 16 * 1024);
}

#[tokio::test]
pub(crate) async fn output_that_violates_its_own_schema_is_invalid() {
    let op = program("hostile_bad_output", &Policy::default()).await;
    let call = op.call("{}", &limits()).await;
    match &call.result {
        Err(CallError::InvalidOutput(v)) => {
            assert_eq!(v[0].instance_path, "/count");
            assert!(
                v[0].schema_path.ends_with("/maximum"),
                "{}",
                v[0].schema_path
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(call.receipt.outcome, Outcome::InvalidOutput);
}

struct Escape {
    _dir: tempfile::TempDir,
    policy: Policy,
}

/// A granted folder with `ok.txt`, a symlink `escape` pointing at a secret
/// beside the folder, and the secret itself outside the grant.
fn escape_fixture() -> Escape {
    let dir = tempfile::tempdir().unwrap();
    let granted = dir.path().join("granted");
    std::fs::create_dir(&granted).unwrap();
    std::fs::write(granted.join("ok.txt"), "inside").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "TOP-SECRET").unwrap();
    std::os::unix::fs::symlink("../secret.txt", granted.join("escape")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), granted.join("escape-abs")).unwrap();
    let policy = Policy {
        files: vec![format!("{}:/granted", granted.display()).parse().unwrap()],
        ..Policy::default()
    };
    Escape { _dir: dir, policy }
}

#[tokio::test]
pub(crate) async fn file_reads_outside_the_grant_fail() {
    let fx = escape_fixture();
    let op = program("hostile_read_file", &fx.policy).await;
    let inside = op.call(r#"{"path":"/granted/ok.txt"}"#, &limits()).await;
    assert_eq!(inside.result.unwrap(), r#"{"content":"inside"}"#);

    // A path that leaves the granted folder reaches the host, which
    // refuses it: a denial, in the receipt too. One under no granted
    // folder never does: the guest's WASI library finds nothing there.
    for (path, reaches_the_host) in [
        ("/granted/../secret.txt", true),
        ("/granted/escape", true),
        ("/granted/escape-abs", true),
        ("/etc/passwd", false),
        ("../secret.txt", false),
    ] {
        let call = op.call(&format!(r#"{{"path":"{path}"}}"#), &limits()).await;
        match &call.result {
            Err(CallError::Denied { denial, guest }) if reaches_the_host => {
                assert!(
                    denial.starts_with("filesystem: opening `"),
                    "{path}: {denial}"
                );
                assert!(
                    !denial.contains("TOP-SECRET") && !format!("{guest:?}").contains("TOP-SECRET")
                );
                assert_eq!(call.receipt.outcome, Outcome::Denied, "{path}");
                assert_eq!(call.receipt.host_calls.denied, 1, "{path}");
            }
            Err(CallError::Operation(GuestError::NotFound(m) | GuestError::Failed(m)))
                if !reaches_the_host =>
            {
                assert!(m.contains(path), "{path}: {m}");
                assert!(!m.contains("TOP-SECRET"));
                assert_eq!(call.receipt.outcome, Outcome::OperationError, "{path}");
                assert_eq!(call.receipt.host_calls.denied, 0, "{path}");
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}

#[tokio::test]
pub(crate) async fn read_only_grants_refuse_writes() {
    let fx = escape_fixture();
    let op = program("guest_files", &fx.policy).await;
    let call = op
        .call(
            r#"{"path":"/granted/ok.txt","write":{"path":"/granted/new.txt","content":"x"}}"#,
            &limits(),
        )
        .await;
    // Refused by the grant: a denial, counted in the receipt.
    match &call.result {
        Err(CallError::Denied { denial, .. }) => {
            assert!(denial.contains("opening `new.txt` was refused"), "{denial}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(call.receipt.outcome, Outcome::Denied);
    assert_eq!(call.receipt.host_calls.denied, 1);
    assert!(!fx.policy.files[0].host.join("new.txt").exists());

    let mut rw = fx.policy.clone();
    rw.files[0].access = hane_core::Access::ReadWrite;
    let op = program("guest_files", &rw).await;
    let call = op
        .call(
            r#"{"path":"/granted/new.txt","write":{"path":"/granted/new.txt","content":"written"}}"#,
            &limits(),
        )
        .await;
    let out: serde_json::Value = serde_json::from_str(&call.result.unwrap()).unwrap();
    assert_eq!(out["content"], "written");
    assert_eq!(out["grants"], serde_json::json!(["/granted"]));
    assert_eq!(
        std::fs::read_to_string(rw.files[0].host.join("new.txt")).unwrap(),
        "written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn http_to_a_host_not_on_the_allow_list_is_denied() {
    let addr = http_server("hello from loopback").await;
    let policy = allow_loopback(addr);
    let op = program("hostile_http", &policy).await;

    let allowed = op
        .call(
            &format!(r#"{{"url":"http://127.0.0.1:{}/x"}}"#, addr.port()),
            &limits(),
        )
        .await;
    assert_eq!(
        allowed.result.unwrap(),
        r#"{"status":200,"body":"hello from loopback"}"#
    );
    assert_eq!(allowed.receipt.host_calls.http_requests, 1);

    let call = op
        .call(
            &format!(r#"{{"url":"http://localhost:{}/x"}}"#, addr.port()),
            &limits(),
        )
        .await;
    match &call.result {
        Err(CallError::Denied { denial, .. }) => assert_eq!(
            denial,
            &format!(
                "http request to http://localhost:{} is not on the allow-list",
                addr.port()
            )
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(call.receipt.outcome, Outcome::Denied);
    assert_eq!(call.receipt.host_calls.http_requests, 0);
    assert_eq!(call.receipt.host_calls.denied, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_request_and_response_limits_apply() {
    let addr = http_server("0123456789012345678901234567890123456789").await;
    let policy = allow_loopback(addr);
    let op = program("hostile_http", &policy).await;
    let input = format!(r#"{{"url":"http://127.0.0.1:{}/"}}"#, addr.port());
    let limits = Limits {
        response_bytes: ByteSize(10),
        ..limits()
    };
    let call = op.call(&input, &limits).await;
    assert!(
        matches!(
            call.result,
            Err(CallError::LimitExceeded(
                hane_sandbox::Limit::ResponseBytes(ByteSize(10))
            ))
        ),
        "{:?}",
        call.result
    );
    let limits = Limits {
        http_requests: 0,
        ..Limits::default()
    };
    let call = op.call(&input, &limits).await;
    assert!(
        matches!(
            call.result,
            Err(CallError::LimitExceeded(hane_sandbox::Limit::HttpRequests(
                0
            )))
        ),
        "{:?}",
        call.result
    );
    assert_eq!(call.receipt.outcome, Outcome::LimitExceeded);
}

#[tokio::test]
async fn a_component_importing_http_without_a_grant_is_refused_at_load() {
    let path = hane_builtins::test_programs::HOSTILE_HTTP;
    let err = crate::harness::sandbox()
        .load_file(path.as_ref(), &Policy::default())
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("component imports `wasi:http/outgoing-handler@0.2."),
        "{msg}"
    );
    assert!(msg.contains("grants no http hosts"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn a_raw_tcp_connect_is_denied_and_never_reaches_the_listener() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let op = program("hostile_tcp", &Policy::default()).await;
    let call = op.call(&format!(r#"{{"addr":"{addr}"}}"#), &limits()).await;
    match &call.result {
        Err(CallError::Denied { denial, guest }) => {
            assert_eq!(
                denial,
                &format!("raw socket tcp connect to {addr} is not granted")
            );
            assert!(
                guest.as_deref().unwrap_or_default().contains("connect"),
                "{guest:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let accepted = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await;
    assert!(accepted.is_err(), "the guest reached the listener");
}

#[tokio::test]
pub(crate) async fn environment_variables_are_invisible_unless_granted() {
    // SAFETY-free: set once for this process; no test reads it concurrently
    // through libc.
    let key = "HANE_TEST_SECRET_TOKEN";
    let op = program("hostile_env", &Policy::default()).await;
    let call = op.call(&format!(r#"{{"key":"{key}"}}"#), &limits()).await;
    assert!(
        matches!(&call.result, Err(CallError::Operation(GuestError::NotFound(m))) if m == &format!("{key} is not set")),
        "{:?}",
        call.result
    );
    let op = program(
        "hostile_env",
        &Policy {
            env: vec!["PATH".parse().unwrap(), "MODE=fast".parse().unwrap()],
            ..Policy::default()
        },
    )
    .await;
    let call = op.call(r#"{"key":"MODE"}"#, &limits()).await;
    let out: serde_json::Value = serde_json::from_str(&call.result.unwrap()).unwrap();
    assert_eq!(out["value"], "fast");
    assert_eq!(out["keys"], serde_json::json!(["PATH", "MODE"]));
}

#[tokio::test]
async fn a_thousand_hostile_calls_leave_the_host_healthy() {
    let policy = Policy::default();
    let looping = program("hostile_loop", &policy).await;
    let memory = program("hostile_memory", &policy).await;
    let panicking = program("hostile_panic", &policy).await;
    let recursing = program("hostile_recursion", &policy).await;
    let flooding = program("hostile_output", &policy).await;
    let echo = program("guest_echo", &policy).await;
    let limits = Limits {
        fuel: 2_000_000,
        memory: ByteSize::mebibytes(8),
        output_bytes: ByteSize::kibibytes(1),
        ..Limits::default()
    };
    // Warm up so the allocator's pools are in use before measuring.
    for _ in 0..20 {
        let _ = memory.call("{}", &limits).await;
    }
    let before = rss_bytes();
    for i in 0..1000 {
        let call = match i % 5 {
            0 => looping.call("{}", &limits).await,
            1 => memory.call("{}", &limits).await,
            2 => panicking.call(r#"{"reason":"again"}"#, &limits).await,
            3 => recursing.call("{}", &limits).await,
            _ => flooding.call(r#"{"bytes": 5000}"#, &limits).await,
        };
        assert!(call.result.is_err(), "call {i} succeeded");
    }
    let grown = rss_bytes().saturating_sub(before);
    assert!(grown < 64 << 20, "resident memory grew by {grown} bytes");
    let call = echo
        .call(r#"{"message":"still here"}"#, &Limits::default())
        .await;
    assert_eq!(
        call.result.unwrap(),
        r#"{"message":"still here","length":10}"#
    );
}

crate::harness::on_pulley_too!(
    an_infinite_loop_runs_out_of_fuel,
    an_infinite_loop_with_plenty_of_fuel_times_out,
    a_cancelled_loop_stops,
    unbounded_memory_growth_hits_the_memory_limit,
    unbounded_recursion_traps_on_stack_exhaustion,
    a_panic_is_a_trap_with_the_guest_message,
    output_past_the_cap_is_refused,
    a_log_flood_hits_the_log_limit,
    a_print_flood_hits_the_capture_cap,
    output_that_violates_its_own_schema_is_invalid,
    file_reads_outside_the_grant_fail,
    read_only_grants_refuse_writes,
    http_to_a_host_not_on_the_allow_list_is_denied,
    http_request_and_response_limits_apply,
    a_component_importing_http_without_a_grant_is_refused_at_load,
    a_raw_tcp_connect_is_denied_and_never_reaches_the_listener,
    environment_variables_are_invisible_unless_granted,
    a_thousand_hostile_calls_leave_the_host_healthy,
);
