//! What the exactly-once execution ledger costs per outbound action.
//! Rows, side by side in one run:
//!
//! - `deliver`: one text message handed straight to the delivery adapter
//!   (an HTTP POST to a provider on loopback) — sending without a ledger;
//! - `run-0/…`: a scripted run that only submits its result;
//! - `run-1/…`: the same run after one `communication.send_sms` that a
//!   DeciderPolicy rule approves: the ActionRequest stored, the policy's
//!   decision recorded, the claim (attempt, owner and the day's count in
//!   one transaction), the delivery and its outcome recorded.
//!
//! The ledger's cost per action is `run-1 − run-0 − deliver`. Each run row
//! runs on a store that syncs every commit (`full`, the default) and on one
//! that syncs at checkpoints (`normal`). Results and the command:
//! `BENCHMARKS.md`.

mod examples;
mod latency;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use criterion::Criterion;
use hane_coordinator::{AgentRuntime, RuntimeConfig, StartRun};
use hane_core::RunStatus;
use hane_delivery::{Delivery, DeliveryConfig, HttpProvider, Outbound, deliver};
use hane_manager::Components;
use hane_store::Synchronous;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::runtime::Runtime;

use examples::copy_examples;
use latency::{LatencyTable, time_each};

/// Runs timed per row (after a tenth as many untimed ones).
const SAMPLES: usize = 300;

static ROWS: LatencyTable = LatencyTable::new();

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    actions(&mut c);
    c.final_summary();

    let p50 = ROWS.print("Runs with and without one outbound action", "deliver");
    let p50_of = |name: &str| p50.iter().find(|(row, _)| row == name).map(|(_, d)| *d);
    let Some(deliver) = p50_of("deliver") else {
        return;
    };
    for sync in ["full", "normal"] {
        if let (Some(without), Some(with)) = (
            p50_of(&format!("run-0/{sync}")),
            p50_of(&format!("run-1/{sync}")),
        ) {
            let action = with.saturating_sub(without);
            println!(
                "{sync}: one action adds {:.3} ms to a run, of which delivery {:.3} ms: the ledger's cost {:.3} ms per action",
                action.as_secs_f64() * 1e3,
                deliver.as_secs_f64() * 1e3,
                action.saturating_sub(deliver).as_secs_f64() * 1e3,
            );
        }
    }
}

/// An SMS provider on loopback that answers every request `200`.
fn provider(rt: &Runtime) -> SocketAddr {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let service = service_fn(|_request| async {
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                        br#"{"id":"msg-1"}"#,
                    ))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

const RUN_0: &str = r#"apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: run-0
spec:
  purpose: Submits its result
  input: { type: object }
  output: { type: object, required: [status], properties: { status: { type: string } } }
  driver: scripted
  tools: []
  script:
    - tool: submit_result
      input: { status: done }
"#;

const RUN_1: &str = r#"apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: run-1
spec:
  purpose: Texts a driver once, then submits the outcome
  input: { type: object }
  output: { type: object, required: [status], properties: { status: { type: string } } }
  driver: scripted
  tools: [communication.send_sms]
  approval: { decider: bench-outbound }
  script:
    - id: sms
      tool: communication.send_sms
      input: { to: "+815012340001", text: "Your inspection is booked for Monday 9:00." }
    - tool: submit_result
      input: { status: "${steps.sms.state}" }
"#;

const POLICY: &str = r#"apiVersion: agents/v1alpha1
kind: DeciderPolicy
metadata:
  name: bench-outbound
spec:
  rules:
    - tools: [communication.send_sms]
      decider: { policy: approve }
"#;

/// The examples' operations and ledger, the two agents and their policy
/// (no Budget: nothing limits the benchmark's actions).
fn release(dir: &Path) -> PathBuf {
    let release = dir.join("release");
    copy_examples(
        &release,
        &["tools", "ledger/records", "ledger/documents/leases"],
    );
    std::fs::create_dir_all(release.join("documents")).unwrap();
    std::fs::write(release.join("run-0.yaml"), RUN_0).unwrap();
    std::fs::write(release.join("run-1.yaml"), RUN_1).unwrap();
    std::fs::write(release.join("policy.yaml"), POLICY).unwrap();
    release
}

fn actions(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = provider(&rt);
    let mut delivery = DeliveryConfig::new();
    delivery.sms(HttpProvider::new(format!("http://{addr}/sms")));
    let dir = tempfile::tempdir().unwrap();
    let release = release(dir.path());
    let mut group = c.benchmark_group("actions");

    let send = || {
        rt.block_on(deliver(
            &delivery,
            Outbound::Sms {
                to: "+815012340001",
                text: "Your inspection is booked for Monday 9:00.",
                action: "act_bench",
            },
        ))
    };
    assert!(matches!(send(), Delivery::Delivered { .. }));
    group.bench_function("deliver", |b| {
        ROWS.record("deliver", || {
            time_each(SAMPLES / 10, SAMPLES, || {
                assert!(matches!(send(), Delivery::Delivered { .. }));
            })
        });
        b.iter(send);
    });

    for (sync, synchronous) in [("full", Synchronous::Full), ("normal", Synchronous::Normal)] {
        let store = dir.path().join(sync);
        std::fs::create_dir_all(&store).unwrap();
        let mut config = RuntimeConfig::new();
        config
            .synchronous(synchronous)
            .delivery(delivery.clone())
            .components(Components::with_builtins(hane_builtins::all()));
        let runtime = {
            let _entered = rt.enter();
            AgentRuntime::open(&store.join("hane.db"), &config).unwrap()
        };
        rt.block_on(runtime.activate(&release)).unwrap();
        for (agent, status) in [("run-0", "done"), ("run-1", "delivered")] {
            let run = || {
                rt.block_on(runtime.run_to_end(StartRun {
                    agent: agent.to_owned(),
                    input: json!({}),
                    shadow: false,
                }))
                .unwrap()
            };
            let check = |run: &hane_core::AgentRun| {
                assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
                let result = run.result.as_ref().unwrap().to_value().unwrap();
                assert_eq!(result["status"], status, "{run:#?}");
            };
            check(&run());
            let name = format!("{agent}/{sync}");
            group.bench_function(&name, |b| {
                ROWS.record(&name, || time_each(SAMPLES / 10, SAMPLES, || check(&run())));
                b.iter(run);
            });
        }
    }
    group.finish();
}
