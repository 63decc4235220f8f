//! The worker's protocol: frames read from a peer that may send anything,
//! the handshake as the worker runs it, and a live worker fed whatever an
//! authenticated client might send. No input may panic, hang or
//! authenticate without the secret, and the worker serves a well-behaved
//! client after each one.

use std::time::Duration;

use hane_core::{
    Impact, JsonText, Limits, Operation, OperationId, Policy, SessionId, ToolCallId, WasmCall,
};
use hane_manager::protocol::{
    ClientMessage, FrameReader, FrameWriter, NONCE_BYTES, PROTOCOL_VERSION, WorkerMessage,
    client_handshake, worker_handshake,
};
use hane_manager::{
    Components, LocalConfig, LocalOperationManager, Worker, WorkerAddr, WorkerListener,
    WorkerSecret, component_digest,
};
use hane_sandbox::{Sandbox, SandboxConfig};
use hane_stored::seal;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::engine::{Shape, Target, fuzz};

/// `messages` framed as they are sent.
async fn framed<T: serde::Serialize>(messages: &[T]) -> Vec<u8> {
    let mut writer = FrameWriter::new(Vec::new());
    for message in messages {
        writer.send(message).await.unwrap();
    }
    writer.flush().await.unwrap();
    writer.into_inner()
}

fn operation(component: &str, input: &str) -> Operation {
    Operation::wasm(
        SessionId::new(),
        ToolCallId::new(),
        Impact::Read,
        WasmCall {
            name: "documents.search".into(),
            component: component.to_owned(),
            policy: Policy::default(),
            limits: Limits::default(),
            input: JsonText::parse(input).unwrap(),
        },
    )
}

/// Frames a client sends after the handshake: operations to run (one a
/// builtin the worker holds, one it must ask for, one reading a ledger it
/// must ask for), a cancel, components, a ledger.
async fn client_frames() -> Vec<Vec<u8>> {
    let builtin = component_digest(hane_builtins::get("documents.search").unwrap());
    let known = operation(&builtin, r#"{"query": "lease"}"#);
    let unknown = operation(&format!("sha256:{}", "ab".repeat(32)), "{}");
    let run = |op: &Operation| ClientMessage::Run {
        id: op.id.clone(),
        operation: seal(op).into(),
        ledger: None,
    };
    let (ledger, bytes) = hane_manager::protocol::encode_ledger(&hane_core::Ledger::default());
    vec![
        framed(&[run(&known)]).await,
        framed(&[
            ClientMessage::Run {
                id: known.id.clone(),
                operation: seal(&known).into(),
                ledger: Some(ledger.clone()),
            },
            ClientMessage::Ledger {
                digest: ledger.clone(),
                bytes,
            },
            ClientMessage::NoLedger { digest: ledger },
        ])
        .await,
        framed(&[run(&unknown)]).await,
        framed(&[
            run(&known),
            ClientMessage::Cancel {
                id: known.id.clone(),
            },
        ])
        .await,
        framed(&[ClientMessage::Component {
            digest: format!("sha256:{}", "ab".repeat(32)),
            bytes: b"\0asm\x0d\0\x01\0".to_vec().into(),
        }])
        .await,
        framed(&[ClientMessage::NoComponent {
            digest: format!("sha256:{}", "ab".repeat(32)),
        }])
        .await,
    ]
}

async fn worker_frames() -> Vec<Vec<u8>> {
    vec![
        framed(&[WorkerMessage::Hello {
            protocol: PROTOCOL_VERSION,
            hane: "0.1.0".into(),
            nonce: [7; NONCE_BYTES],
        }])
        .await,
        framed(&[
            WorkerMessage::Welcome,
            WorkerMessage::Started {
                id: OperationId::new(),
            },
            WorkerMessage::NeedComponent {
                digest: "sha256:00".into(),
            },
            WorkerMessage::NeedLedger {
                digest: "sha256:01".into(),
            },
        ])
        .await,
        framed(&[WorkerMessage::Refused {
            reason: "no".into(),
        }])
        .await,
    ]
}

/// Every frame `bytes` holds, read as `T`, until the first error.
async fn read_all<T: serde::de::DeserializeOwned>(bytes: &[u8], authenticated: bool) -> String {
    let mut reader = FrameReader::new(bytes);
    if authenticated {
        reader.authenticated();
    }
    let mut frames = 0;
    loop {
        match reader.next::<T>().await {
            Ok(_) => frames += 1,
            Err(e) => return format!("{frames} then {e}"),
        }
    }
}

#[test]
fn worker_frames_read() {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut seeds = tokio.block_on(client_frames());
    seeds.extend(tokio.block_on(worker_frames()));
    let target = Target {
        name: "worker_frames",
        seeds,
        dictionary: vec![
            vec![0xff, 0xff, 0xff, 0x7f],
            vec![0, 0, 0x10, 0],
            vec![0; 4],
        ],
        shape: Shape::Bytes,
    };
    fuzz(target, |bytes| {
        tokio.block_on(async {
            [
                read_all::<ClientMessage>(bytes, false).await,
                read_all::<ClientMessage>(bytes, true).await,
                read_all::<WorkerMessage>(bytes, false).await,
                read_all::<WorkerMessage>(bytes, true).await,
            ]
            .join("; ")
        })
    });
}

#[test]
fn worker_handshake_refuses() {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let secret = WorkerSecret::new(b"the worker's secret, long enough").unwrap();
    // Answers a client could give: right and wrong versions and MACs.
    let seeds = tokio.block_on(async {
        let mut seeds = Vec::new();
        for protocol in [PROTOCOL_VERSION, PROTOCOL_VERSION + 1] {
            let mac = secret.mac(protocol, &[0; NONCE_BYTES]);
            seeds.push(framed(&[ClientMessage::Auth { protocol, mac }]).await);
        }
        seeds.extend(client_frames().await);
        seeds
    });
    let target = Target {
        name: "worker_handshake",
        seeds,
        dictionary: Vec::new(),
        shape: Shape::Bytes,
    };
    fuzz(target, |bytes| {
        tokio.block_on(async {
            let mut reader = FrameReader::new(bytes);
            let mut writer = FrameWriter::new(Vec::new());
            let result = tokio::time::timeout(
                Duration::from_secs(15),
                worker_handshake(&mut reader, &mut writer, &secret),
            )
            .await
            .expect("the handshake ends within its own timeout");
            // The nonce is new each time: no bytes made in advance can
            // answer it.
            let e = result.expect_err("a client without the secret was let in");
            e.to_string()
        })
    });
}

/// A client that completes the handshake on `path`.
async fn authenticated(
    path: &std::path::Path,
    secret: &WorkerSecret,
) -> (FrameReader<OwnedReadHalf>, OwnedWriteHalf) {
    let stream = UnixStream::connect(path).await.unwrap();
    let (read, write) = stream.into_split();
    let mut reader = FrameReader::new(read);
    let mut writer = FrameWriter::new(write);
    client_handshake(&mut reader, &mut writer, secret)
        .await
        .expect("a client with the secret is let in");
    (reader, writer.into_inner())
}

#[test]
fn a_live_worker_after_the_handshake() {
    let tokio = crate::engine::runtime("worker_live");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.sock");
    let secret = WorkerSecret::new(b"the worker's secret, long enough").unwrap();
    tokio.block_on(async {
        let manager = LocalOperationManager::new(
            Sandbox::new(
                &SandboxConfig::new()
                    .cache_dir(Some(hane_test_support::component_cache()))
                    .max_instances(2)
                    .clone(),
            )
            .expect("a sandbox"),
            Components::with_builtins(hane_builtins::all()),
            LocalConfig::new().concurrency(2),
        );
        let listener = WorkerListener::bind(&WorkerAddr::Unix(path.clone()))
            .await
            .unwrap();
        let worker = Worker::new(manager, secret.clone());
        tokio::spawn(async move { worker.serve(listener).await });
    });
    let seeds = tokio.block_on(client_frames());
    let target = Target {
        name: "worker_live",
        seeds,
        dictionary: Vec::new(),
        shape: Shape::Bytes,
    };
    let mut inputs = 0u64;
    fuzz(target, |bytes| {
        inputs += 1;
        tokio.block_on(async {
            let (mut reader, mut write) = authenticated(&path, &secret).await;
            let _ = write.write_all(bytes).await;
            // What it answers, frame by frame, until it closes or has said
            // nothing for a while. The client stays: a client gone cancels
            // its operations.
            let mut frames = Vec::new();
            let ended = loop {
                match tokio::time::timeout(
                    Duration::from_millis(150),
                    reader.next::<WorkerMessage>(),
                )
                .await
                {
                    Ok(Ok(message)) => frames.push(message),
                    Ok(Err(e)) => break e.to_string(),
                    Err(_) => break "quiet".to_owned(),
                }
                if frames.len() > 64 {
                    break "talkative".to_owned();
                }
            };
            let names: Vec<String> = frames
                .iter()
                .map(|m| {
                    format!("{m:?}")
                        .split([' ', '{', '('])
                        .next()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect();
            let outcome = format!("{}, then {ended}", names.join(" "));
            if inputs.is_multiple_of(64) {
                // The worker still lets a client in.
                drop(authenticated(&path, &secret).await);
            }
            outcome
        })
    });
    tokio.block_on(async { drop(authenticated(&path, &secret).await) });
}
