//! `hane worker` as a real process, driven through the proxy operation
//! manager and through the raw protocol.

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use bytes::Bytes;
use hane_builtins::test_programs;
use hane_core::{
    Impact, JsonText, Limits, Operation, OperationId, Outcome, Policy, SessionId, ToolCallId,
    WasmCall,
};
use hane_manager::protocol::{
    ClientMessage, FrameReader, FrameWriter, PROTOCOL_VERSION, ProtocolError, WorkerMessage,
    client_handshake,
};
use hane_manager::{
    Components, ConnectError, LocalConfig, LocalOperationManager, ProxyOperationManager,
    WorkerAddr, WorkerSecret, component_digest,
};
use hane_manager::{Ending, OperationManager, Update};
use hane_sandbox::{Sandbox, SandboxConfig};
use tokio::net::{TcpStream, UnixListener};

const SECRET: &str = "a secret only the tests know";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A running `hane worker`, killed when dropped.
struct WorkerProcess {
    child: Child,
    addr: WorkerAddr,
}

impl WorkerProcess {
    /// Starts `hane worker --listen listen` with the secret in the
    /// environment, and waits for the address it prints.
    fn start(listen: &str) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hane"));
        command
            .args(["worker", "--listen", listen, "--concurrency", "2"])
            .env("HANE_WORKER_SECRET", SECRET);
        Self::spawn(command)
    }

    fn spawn(mut command: Command) -> Self {
        let mut child = command
            .env("HANE_CACHE_DIR", hane_test_support::component_cache())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run hane worker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Some(addr) = line.trim().strip_prefix("listening on ") else {
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            panic!("hane worker did not start: {line}{stderr}");
        };
        let addr = addr.parse().unwrap();
        Self { child, addr }
    }

    /// Kills the worker with SIGKILL: no chance to say goodbye.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn secret() -> WorkerSecret {
    WorkerSecret::new(SECRET.as_bytes()).unwrap()
}

/// The client's components: the built-ins, which the worker holds too, and
/// test programs, which it does not and asks for.
struct Programs {
    components: Components,
    echo: String,
    looping: String,
}

fn programs() -> Programs {
    let components = Components::with_builtins(hane_builtins::all());
    let echo = components.insert(std::fs::read(test_programs::GUEST_ECHO).unwrap());
    let looping = components.insert(std::fs::read(test_programs::HOSTILE_LOOP).unwrap());
    Programs {
        components,
        echo,
        looping,
    }
}

fn operation(digest: &str, name: &str, input: &str, limits: Limits, policy: Policy) -> Operation {
    Operation::wasm(
        SessionId::new(),
        ToolCallId::new(),
        Impact::Read,
        WasmCall {
            name: name.to_owned(),
            component: digest.to_owned(),
            policy,
            limits,
            input: JsonText::parse(input).unwrap(),
        },
    )
}

fn echo(programs: &Programs, message: &str) -> Operation {
    let input = serde_json::json!({ "message": message }).to_string();
    operation(
        &programs.echo,
        "test.echo",
        &input,
        Limits::default(),
        Policy::default(),
    )
}

fn looping(programs: &Programs, limits: Limits) -> Operation {
    operation(
        &programs.looping,
        "hostile.loop",
        "{}",
        limits,
        Policy::default(),
    )
}

fn local_manager(components: Components) -> LocalOperationManager {
    LocalOperationManager::new(
        Sandbox::new(
            &SandboxConfig::new()
                .cache_dir(Some(hane_test_support::component_cache()))
                .max_instances(8)
                .clone(),
        )
        .unwrap(),
        components,
        LocalConfig::new().concurrency(2),
    )
}

/// What must be the same wherever an operation ran: everything but the
/// time it took.
fn comparable(ending: Ending) -> Ending {
    match ending {
        Ending::Succeeded(mut done) => {
            done.receipt.wall_time_us = 0;
            Ending::Succeeded(done)
        }
        Ending::Failed(mut failure) => {
            if let Some(receipt) = &mut failure.receipt {
                receipt.wall_time_us = 0;
            }
            Ending::Failed(failure)
        }
        lost => lost,
    }
}

#[tokio::test]
async fn operations_end_the_same_through_a_worker_as_locally() {
    let worker = WorkerProcess::start("127.0.0.1:0");
    assert!(matches!(worker.addr, WorkerAddr::Tcp { port, .. } if port != 0));
    let programs = programs();
    let local = local_manager(programs.components.clone());
    let proxy =
        ProxyOperationManager::connect(worker.addr.clone(), secret(), programs.components.clone())
            .await
            .unwrap();

    let documents = Policy {
        files: vec![
            format!("{}:/documents", repo().join("examples/documents").display())
                .parse()
                .unwrap(),
        ],
        ..Policy::default()
    };
    let search = component_digest(hane_builtins::get("documents.search").unwrap());
    let operations = [
        // Built into the worker.
        operation(
            &search,
            "documents.search",
            r#"{"query":"tyre tread depth","limit":2}"#,
            Limits::default(),
            documents,
        ),
        // Shipped to the worker on demand.
        echo(&programs, "over the wire"),
        looping(
            &programs,
            Limits {
                fuel: 5_000_000,
                ..Limits::default()
            },
        ),
        operation(
            &programs.echo,
            "test.echo",
            r#"{"wrong":"field"}"#,
            Limits::default(),
            Policy::default(),
        ),
        // Neither side has it.
        operation(
            &component_digest(b"nowhere"),
            "gone",
            "{}",
            Limits::default(),
            Policy::default(),
        ),
    ];
    let mut outcomes = Vec::new();
    for operation in operations {
        let here = comparable(local.submit(operation.clone()).ending().await);
        let there = comparable(proxy.submit(operation).ending().await);
        let outcome = match &there {
            Ending::Succeeded(done) => done.receipt.outcome,
            Ending::Failed(failure) => failure.outcome,
            Ending::Lost { reason } => panic!("lost: {reason}"),
        };
        outcomes.push(outcome);
        if outcome == Outcome::HostError {
            // The messages say where the component was missing.
            assert!(matches!(here, Ending::Failed(f) if f.outcome == Outcome::HostError));
        } else {
            assert_eq!(here, there);
        }
    }
    assert_eq!(
        outcomes,
        [
            Outcome::Succeeded,
            Outcome::Succeeded,
            Outcome::FuelExhausted,
            Outcome::InvalidInput,
            Outcome::HostError
        ]
    );
}

#[tokio::test]
async fn operations_run_concurrently_on_one_connection_and_cancel() {
    let worker = WorkerProcess::start("127.0.0.1:0");
    let programs = programs();
    let proxy =
        ProxyOperationManager::connect(worker.addr.clone(), secret(), programs.components.clone())
            .await
            .unwrap();
    let until_cancelled = Limits {
        fuel: u64::MAX / 2,
        timeout: hane_core::Duration::seconds(60),
        ..Limits::default()
    };
    let spinning = looping(&programs, until_cancelled);
    let spinning_id = spinning.id.clone();
    let mut spinning = proxy.submit(spinning);
    assert_eq!(spinning.next().await, Some(Update::Started));
    // The worker runs two at once: echoes finish while the loop spins.
    let echoes: Vec<_> = (0..5)
        .map(|i| proxy.submit(echo(&programs, &format!("echo {i}"))))
        .collect();
    for (i, ticket) in echoes.into_iter().enumerate() {
        let Ending::Succeeded(done) = ticket.ending().await else {
            panic!("echo {i} failed");
        };
        assert_eq!(
            done.output.to_value().unwrap()["message"],
            format!("echo {i}")
        );
    }
    proxy.cancel(&spinning_id);
    let Some(Update::Finished(Ending::Failed(failure))) = spinning.next().await else {
        panic!("the cancelled loop must fail");
    };
    assert_eq!(failure.outcome, Outcome::Cancelled);
}

#[tokio::test]
async fn a_killed_worker_loses_its_running_operation_and_a_restarted_one_takes_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let socket = format!("unix:{}", dir.path().join("worker.sock").display());
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let start = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hane"));
        command
            .args(["worker", "--listen", &socket, "--secret-file"])
            .arg(&secret_file)
            .env_remove("HANE_WORKER_SECRET");
        WorkerProcess::spawn(command)
    };
    let worker = start();
    assert_eq!(worker.addr.to_string(), socket);
    let programs = programs();
    let proxy =
        ProxyOperationManager::connect(worker.addr.clone(), secret(), programs.components.clone())
            .await
            .unwrap();
    assert!(matches!(
        proxy.submit(echo(&programs, "first")).ending().await,
        Ending::Succeeded(_)
    ));

    let until_cancelled = Limits {
        fuel: u64::MAX / 2,
        timeout: hane_core::Duration::seconds(60),
        ..Limits::default()
    };
    let mut running = proxy.submit(looping(&programs, until_cancelled));
    assert_eq!(running.next().await, Some(Update::Started));
    worker.kill();
    let Some(Update::Finished(Ending::Lost { reason })) = running.next().await else {
        panic!("an operation running on a killed worker must be lost");
    };
    assert!(reason.contains(&socket), "{reason}");

    let _restarted = start();
    let Ending::Succeeded(done) = proxy
        .submit(echo(&programs, "after restart"))
        .ending()
        .await
    else {
        panic!("the proxy did not reconnect to the restarted worker");
    };
    assert_eq!(done.output.to_value().unwrap()["message"], "after restart");
}

#[tokio::test]
async fn a_client_with_the_wrong_secret_is_refused() {
    let worker = WorkerProcess::start("127.0.0.1:0");
    let err = ProxyOperationManager::connect(
        worker.addr.clone(),
        WorkerSecret::new(b"a guess").unwrap(),
        Components::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err.source, ProtocolError::Refused(_)), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "cannot connect to worker {}: the worker refused the connection: authentication failed: the client's secret does not match the worker's",
            worker.addr
        )
    );
}

async fn raw_connection(
    addr: &WorkerAddr,
) -> (
    FrameReader<tokio::net::tcp::OwnedReadHalf>,
    FrameWriter<tokio::net::tcp::OwnedWriteHalf>,
) {
    let WorkerAddr::Tcp { host, port } = addr else {
        panic!("a TCP worker");
    };
    let (read, write) = TcpStream::connect(format!("{host}:{port}"))
        .await
        .unwrap()
        .into_split();
    (FrameReader::new(read), FrameWriter::new(write))
}

#[tokio::test]
async fn a_client_speaking_another_protocol_version_is_told_so() {
    let worker = WorkerProcess::start("127.0.0.1:0");
    let (mut reader, mut writer) = raw_connection(&worker.addr).await;
    let WorkerMessage::Hello {
        protocol, nonce, ..
    } = reader.next().await.unwrap()
    else {
        panic!("the worker speaks first");
    };
    assert_eq!(protocol, PROTOCOL_VERSION);
    let future = PROTOCOL_VERSION + 1;
    writer
        .send_now(&ClientMessage::Auth {
            protocol: future,
            mac: secret().mac(future, &nonce),
        })
        .await
        .unwrap();
    let WorkerMessage::Refused { reason } = reader.next().await.unwrap() else {
        panic!("a client of another version must be refused");
    };
    assert_eq!(
        reason,
        format!(
            "the client speaks worker protocol version {future}, but this worker speaks version {PROTOCOL_VERSION} (hane {})",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert!(matches!(
        reader.next::<WorkerMessage>().await,
        Err(ProtocolError::Closed)
    ));
}

#[tokio::test]
async fn a_worker_speaking_another_protocol_version_is_refused_by_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let future = PROTOCOL_VERSION + 1;
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, write) = stream.into_split();
        let mut writer = FrameWriter::new(write);
        writer
            .send_now(&WorkerMessage::Hello {
                protocol: future,
                hane: "9.9.9".into(),
                nonce: [0; 32],
            })
            .await
            .unwrap();
        // Keep the connection open until the client hangs up.
        let _ = FrameReader::new(read).next::<ClientMessage>().await;
    });
    let addr = WorkerAddr::Unix(path);
    let err: ConnectError =
        ProxyOperationManager::connect(addr.clone(), secret(), Components::new())
            .await
            .unwrap_err();
    assert!(
        matches!(err.source, ProtocolError::VersionMismatch { theirs, ours, .. } if theirs == future && ours == PROTOCOL_VERSION),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!(
            "the worker speaks worker protocol version {future}"
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!("this client speaks version {PROTOCOL_VERSION}")),
        "{message}"
    );
}

#[tokio::test]
async fn an_operation_of_an_unknown_version_is_refused_by_name() {
    let worker = WorkerProcess::start("127.0.0.1:0");
    let (mut reader, mut writer) = raw_connection(&worker.addr).await;
    client_handshake(&mut reader, &mut writer, &secret())
        .await
        .unwrap();
    // An operation as a later hane would seal it: version 9 of `operation`.
    let mut sealed = b"HANE".to_vec();
    let payload = [1u8, 2, 3];
    sealed.extend(postcard::to_allocvec(&("operation", 9u16, &payload[..])).unwrap());
    let id = OperationId::new();
    writer
        .send_now(&ClientMessage::Run {
            id: id.clone(),
            operation: Bytes::from(sealed),
            ledger: None,
        })
        .await
        .unwrap();
    let WorkerMessage::Finished {
        id: finished,
        ending: Ending::Failed(failure),
    } = reader.next().await.unwrap()
    else {
        panic!("an unreadable operation must fail");
    };
    assert_eq!(finished, id);
    assert_eq!(failure.outcome, Outcome::HostError);
    assert_eq!(
        failure.message,
        "the worker cannot read the operation: `operation` version 9 is not supported: this build reads versions 1, 2, 3"
    );
}

#[test]
fn the_worker_does_not_start_without_a_secret() {
    let out = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["worker", "--listen", "127.0.0.1:0"])
        .env_remove("HANE_WORKER_SECRET")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "it must not listen");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--secret-file PATH or set $HANE_WORKER_SECRET"),
        "{stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["worker", "--listen", "127.0.0.1:0", "--secret-file"])
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the worker secret is empty"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_listen_addresses_are_usage_errors() {
    let out = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["worker", "--listen", "http://example.com"])
        .env("HANE_WORKER_SECRET", SECRET)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown scheme `http`; expected tcp://HOST:PORT, HOST:PORT or unix:/PATH"),
        "{stderr}"
    );
}

#[test]
fn sigterm_stops_the_worker_and_removes_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.sock");
    let mut worker = WorkerProcess::start(&format!("unix:{}", path.display()));
    assert!(path.exists());
    let status = Command::new("kill")
        .args(["-TERM", &worker.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = worker.child.wait().unwrap();
    assert_eq!(exit.code(), Some(0), "{exit}");
    assert!(!path.exists(), "the socket file is removed on the way out");
}

#[tokio::test]
async fn a_worker_restarted_with_another_secret_fails_the_next_operation_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let socket = format!("unix:{}", dir.path().join("worker.sock").display());
    let worker = WorkerProcess::start(&socket);
    let programs = programs();
    let proxy =
        ProxyOperationManager::connect(worker.addr.clone(), secret(), programs.components.clone())
            .await
            .unwrap();
    assert!(matches!(
        proxy.submit(echo(&programs, "before")).ending().await,
        Ending::Succeeded(_)
    ));
    worker.kill();

    let mut command = Command::new(env!("CARGO_BIN_EXE_hane"));
    command
        .args(["worker", "--listen", &socket])
        .env("HANE_WORKER_SECRET", "another secret");
    let _restarted = WorkerProcess::spawn(command);
    let Ending::Failed(failure) = proxy.submit(echo(&programs, "after")).ending().await else {
        panic!("a worker that refuses the client cannot run its operations");
    };
    assert_eq!(failure.outcome, Outcome::HostError);
    assert_eq!(
        failure.message,
        format!(
            "cannot run on worker {socket}: the worker refused the connection: authentication failed: the client's secret does not match the worker's"
        )
    );
}

/// Through a coordinator, a worker's death is handled like a host crash:
/// the `read` operation it was running runs again once a worker is back,
/// the `write` one becomes `unknown` and never runs again.
#[tokio::test]
async fn a_coordinator_reruns_reads_lost_with_a_worker_and_marks_writes_unknown() {
    use std::sync::Arc;

    use hane_coordinator::{Coordinator, CoordinatorConfig};
    use hane_core::{OperationState, SessionEvent, ToolCall, ToolCallStatus};
    use hane_store::{SessionStore, SqliteConfig, SqliteStore};

    let dir = tempfile::tempdir().unwrap();
    let socket = format!("unix:{}", dir.path().join("worker.sock").display());
    let worker = WorkerProcess::start(&socket);
    let components = Components::new();
    let spin = components.insert(std::fs::read(test_programs::GUEST_SPIN).unwrap());
    let proxy = ProxyOperationManager::connect(worker.addr.clone(), secret(), components)
        .await
        .unwrap();
    let store = SqliteStore::open(dir.path().join("hane.db"), &SqliteConfig::new()).unwrap();
    let coordinator = Coordinator::new(
        Arc::new(store.clone()),
        Arc::new(proxy),
        &CoordinatorConfig::new(),
    );
    let session = store.create_session().await.unwrap().id;

    let slow = Limits {
        fuel: u64::MAX / 2,
        timeout: hane_core::Duration::seconds(120),
        ..Limits::default()
    };
    let mut events = Vec::new();
    let mut ids = Vec::new();
    for impact in [Impact::Read, Impact::Write] {
        let mut op = operation(
            &spin,
            "test.spin",
            r#"{"iterations": 400000000}"#,
            slow,
            Policy::default(),
        );
        op.session = session.clone();
        op.impact = impact;
        ids.push(op.id.clone());
        events.push(SessionEvent::ToolCallRecorded {
            call: ToolCall {
                id: op.tool_call.clone(),
                tool: "test.spin".into(),
                input: JsonText::parse(r#"{"iterations": 400000000}"#).unwrap(),
            },
            status: ToolCallStatus::Submitted {
                operations: vec![op.id.clone()],
            },
            operations: vec![op],
        });
    }
    let dispatched = coordinator.commit(&session, events).await.unwrap();
    // Both are sent to the worker as soon as they are recorded `running`.
    for id in &ids {
        while store.operation(id).await.unwrap().state != OperationState::Running {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    worker.kill();
    let _back = WorkerProcess::start(&socket);

    let mut settled = Vec::new();
    for d in dispatched {
        settled.push(d.settled().await.unwrap());
    }
    assert_eq!(
        settled[0].state,
        OperationState::Succeeded,
        "{:?}",
        settled[0]
    );
    assert_eq!(store.operation(&ids[0]).await.unwrap().attempts, 2);
    assert_eq!(
        settled[1].state,
        OperationState::Unknown,
        "{:?}",
        settled[1]
    );
    assert_eq!(store.operation(&ids[1]).await.unwrap().attempts, 1);
    let history = store.read(&session, 0..u64::MAX).await.unwrap();
    let unknown = history
        .iter()
        .filter(|r| matches!(&r.event, SessionEvent::OperationUnknown { operation, .. } if *operation == ids[1]))
        .count();
    assert_eq!(unknown, 1);
}

/// The resident memory of process `pid`, in KiB.
fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

#[tokio::test]
async fn half_open_connections_are_capped_and_hold_little_memory() {
    const HALF_OPEN: usize = 3000;
    const CAP: usize = 32;
    let mut command = Command::new(env!("CARGO_BIN_EXE_hane"));
    command
        .args(["worker", "--listen", "127.0.0.1:0", "--concurrency", "1"])
        .args(["--max-unauthenticated", &CAP.to_string()])
        .env("HANE_WORKER_SECRET", SECRET)
        .env("RUST_LOG", "hane_manager=warn");
    let mut worker = WorkerProcess::spawn(command);
    let WorkerAddr::Tcp { host, port } = worker.addr.clone() else {
        panic!("a TCP worker");
    };
    let target = format!("{host}:{port}");
    let pid = worker.child.id();
    let before = resident_kib(pid);
    // Connections that never say a word: a handshake never finished.
    let mut half_open = Vec::with_capacity(HALF_OPEN);
    for _ in 0..HALF_OPEN {
        half_open.push(TcpStream::connect(&target).await.unwrap());
    }
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let during = resident_kib(pid);
    // Those over the cap were closed at once: they read the end of the
    // stream, where the others read the worker's hello and wait.
    let mut closed = 0;
    for stream in &mut half_open {
        let mut buf = [0u8; 256];
        let read = tokio::time::timeout(std::time::Duration::from_millis(20), async {
            loop {
                use tokio::io::AsyncReadExt as _;
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => {}
                }
            }
        })
        .await;
        if read == Ok(true) {
            closed += 1;
        }
    }
    assert!(closed >= HALF_OPEN - CAP, "{closed} of {HALF_OPEN} closed");
    assert!(
        during.saturating_sub(before) < 16 * 1024,
        "{HALF_OPEN} half-open connections took the worker from {before} KiB to {during} KiB"
    );
    drop(half_open);
    // A real client is served once the flood is gone.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let programs = programs();
    let proxy =
        ProxyOperationManager::connect(worker.addr.clone(), secret(), programs.components.clone())
            .await
            .unwrap();
    let ending = proxy.submit(echo(&programs, "still here")).ending().await;
    assert!(matches!(ending, Ending::Succeeded(_)), "{ending:?}");
    // The refusals were logged with the peer and the reason.
    worker.child.kill().unwrap();
    worker.child.wait().unwrap();
    let mut log = String::new();
    worker
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("peer=127.0.0.1:"), "{log}");
    assert!(
        log.contains(&format!(
            "{CAP} connections have not finished their handshake"
        )),
        "{log}"
    );
}

/// `data.find_record` of a van of the examples' fleet, granted the
/// `vehicles` collection.
fn find_vehicle() -> Operation {
    let digest = component_digest(hane_builtins::get("data.find_record").unwrap());
    operation(
        &digest,
        "data.find_record",
        r#"{"collection": "vehicles", "match": {"registration": "架空 300 あ 10-02"}}"#,
        Limits::default(),
        Policy {
            records: vec!["vehicles".to_owned()],
            ..Policy::default()
        },
    )
}

#[tokio::test]
async fn operations_read_the_ledger_the_client_set_which_travels_on_demand() {
    let worker = WorkerProcess::start("127.0.0.1:0");
    let programs = programs();
    let proxy =
        ProxyOperationManager::connect(worker.addr.clone(), secret(), programs.components.clone())
            .await
            .unwrap();
    // Before the client sets a ledger, an operation reads an empty one.
    let Ending::Failed(failure) = proxy.submit(find_vehicle()).ending().await else {
        panic!("the vehicles collection is not in an empty ledger");
    };
    assert!(failure.message.contains("vehicles"), "{failure:?}");

    let ledger =
        std::sync::Arc::new(hane_core::Ledger::load_dir(&repo().join("examples/ledger")).unwrap());
    proxy.set_ledger(&ledger);
    let operation = find_vehicle();
    let remote = proxy.submit(operation.clone()).ending().await;
    let Ending::Succeeded(found) = &remote else {
        panic!("{remote:?}");
    };
    assert!(
        found.output.as_str().contains("Toyota Hiace Van"),
        "{}",
        found.output.as_str()
    );
    // The same as an operation reading the same ledger here.
    let local = local_manager(programs.components.clone())
        .submit_reading(operation, ledger.clone())
        .ending()
        .await;
    assert_eq!(comparable(remote), comparable(local));

    // A second client of the worker with the same ledger, and a later
    // ledger without the collection: each operation reads the one its
    // client set when it was submitted.
    let other =
        ProxyOperationManager::connect(worker.addr.clone(), secret(), programs.components.clone())
            .await
            .unwrap();
    other.set_ledger(&ledger);
    assert!(matches!(
        other.submit(find_vehicle()).ending().await,
        Ending::Succeeded(_)
    ));
    other.set_ledger(&std::sync::Arc::new(hane_core::Ledger::default()));
    assert!(matches!(
        other.submit(find_vehicle()).ending().await,
        Ending::Failed(_)
    ));
    assert!(matches!(
        proxy.submit(find_vehicle()).ending().await,
        Ending::Succeeded(_)
    ));
}

/// `hane op run` runs on the worker `$HANE_WORKER` names, as every command
/// that runs operations: outcomes and exit codes as here, and with the
/// worker gone nothing runs here instead.
#[test]
fn op_run_runs_on_the_worker_hane_worker_names() {
    let worker = WorkerProcess::start("127.0.0.1:0");
    let addr = worker.addr.to_string();
    let run = |path: &str| {
        let input = format!(r#"{{"path":"/documents/{path}"}}"#);
        Command::new(env!("CARGO_BIN_EXE_hane"))
            .args(["op", "run", "documents.read_pages", "--input", &input])
            .args(["--allow-dir", "examples/documents", "--json"])
            .current_dir(repo())
            .env("HANE_CACHE_DIR", hane_test_support::component_cache())
            .env("HANE_WORKER", &addr)
            .env("HANE_WORKER_SECRET", SECRET)
            .output()
            .unwrap()
    };
    let said = |out: &std::process::Output| {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let out = run("faq.md");
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["receipt"]["outcome"], "succeeded", "{doc}");
    assert!(doc["output"].is_object(), "{doc}");
    // The operation's own error: exit 3, as here.
    let out = run("missing.md");
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["outcome"], "operation_error", "{doc}");
    // The worker gone: refused, naming it; not run here instead.
    worker.kill();
    let out = run("faq.md");
    assert_ne!(out.status.code(), Some(0), "{}", said(&out));
    assert!(out.stdout.is_empty(), "{}", said(&out));
}

/// A flood of silent connections from one address, going on while a
/// coordinator connects from another, does not keep the coordinator out:
/// it is admitted at once and runs its operation.
#[tokio::test]
async fn a_coordinator_gets_in_during_a_flood_of_silent_connections() {
    const CAP: usize = 64;
    let mut command = Command::new(env!("CARGO_BIN_EXE_hane"));
    command
        .args(["worker", "--listen", "127.0.0.1:0", "--concurrency", "1"])
        .args(["--max-unauthenticated", &CAP.to_string()])
        .env("HANE_WORKER_SECRET", SECRET)
        .env("RUST_LOG", "hane_manager=error");
    let worker = WorkerProcess::spawn(command);
    let WorkerAddr::Tcp { port, .. } = worker.addr.clone() else {
        panic!("a TCP worker");
    };
    // The flood comes from 127.0.0.2 (loopback too) and keeps coming.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooding = stop.clone();
    let flood = tokio::spawn(async move {
        let target: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut held = Vec::new();
        while !flooding.load(std::sync::atomic::Ordering::Relaxed) {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            if let Ok(stream) = socket.connect(target).await {
                held.push(stream);
            }
            if held.len() >= 3000 {
                held.drain(..1000);
            }
        }
        held.len()
    });
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let programs = programs();
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let proxy = ProxyOperationManager::connect(
            worker.addr.clone(),
            secret(),
            programs.components.clone(),
        )
        .await
        .expect("the coordinator is admitted during the flood");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "connected after {:?}",
            started.elapsed()
        );
        let ending = proxy
            .submit(echo(&programs, "during the flood"))
            .ending()
            .await;
        assert!(matches!(ending, Ending::Succeeded(_)), "{ending:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let held = flood.await.unwrap();
    assert!(held > CAP, "the flood held {held} connections");
}
