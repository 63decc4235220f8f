//! What hane adds to a read of a customer API. Rows, side by side in one
//! run, against the fleet-maintenance service (FastAPI on loopback, one
//! worker, `examples/services/fleet-maintenance`):
//!
//! - `raw`: the same `GET /vehicles/{registration}/services` with the
//!   token, on a pooled connection of hane's HTTP client, the body read
//!   whole: the floor any client pays;
//! - `exposed`: a call of the exposed read tool `fleet.service_history`
//!   through `AgentRuntime::call_tool` with a run's token: the Tool
//!   Gateway, the call journaled, the input checked against the document's
//!   schema, the request built, the read through hane-delivery (capped,
//!   no redirects), the answer parsed and checked against the documented
//!   output schema;
//! - `generic`: the same read as `integration.read`;
//! - `delivery`: `hane_delivery::read_api` alone, the request as hane
//!   sends it (the credential looked up, capped, redirects refused),
//!   without the tool call around it.
//!
//! The rows alternate in blocks, so the service's own drift falls on all
//! of them alike. Target: hane adds at most 200 µs at p50 (`exposed` −
//! `raw`). The command and the results: `BENCHMARKS.md`.

mod examples;

use std::time::{Duration, Instant};

use hane_coordinator::{AgentRuntime, RuntimeConfig, Services, StartRun};
use hane_delivery::DeliveryConfig;
use hane_manager::Components;
use hane_test_support::fleet::{FleetService, path_segment};
use serde_json::json;

const TOKEN: &str = "bench-token-0c41";
const VEHICLE: &str = "架空 300 あ 10-02";
/// Calls per row, in [`BLOCKS`] alternating blocks, after [`WARMUP`] each.
const CALLS: usize = 2000;
const BLOCKS: usize = 10;
const WARMUP: usize = 200;
const TARGET: Duration = Duration::from_micros(200);

const AGENT: &str = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: api-reader
spec:
  purpose: Reads a vehicle's service history, for the benchmark
  input: { type: object }
  driver: scripted
  script:
    - tool: submit_result
      input: { status: done }
  tools: [fleet.service_history, integration.read]
  connections: [fleet-maintenance]
  toolExposures: [service-history]
  limits: { maxToolCalls: 100000, maxSeconds: 3600 }
  output: { type: object, required: [status], properties: { status: { type: string } } }
"#;

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let service = FleetService::start(TOKEN);
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join("release");
    examples::copy_examples(&release, examples::UNBUDGETED);
    let connection = release.join("integrations/fleet-maintenance.yaml");
    let text = std::fs::read_to_string(&connection).unwrap();
    std::fs::write(
        &connection,
        text.replace("http://127.0.0.1:8765", &service.url()),
    )
    .unwrap();
    std::fs::write(release.join("agents/api-reader.yaml"), AGENT).unwrap();
    let mut config = RuntimeConfig::new();
    let mut delivery = DeliveryConfig::new();
    delivery.credential("fleet-maintenance", TOKEN);
    config
        .delivery(delivery)
        .components(Components::with_builtins(hane_builtins::all()));
    let hane = AgentRuntime::open(&dir.path().join("hane.db"), &config).unwrap();
    let _services = Services::new(hane.clone());
    runtime.block_on(hane.activate(&release)).unwrap();
    let attached = runtime
        .block_on(hane.start_attached(StartRun {
            agent: "api-reader".to_owned(),
            input: json!({}),
            shadow: false,
        }))
        .unwrap();
    let token = attached.token;

    let client = hane_http::Client::new();
    let url: http::Uri = format!(
        "{}/vehicles/{}/services",
        service.url(),
        path_segment(VEHICLE)
    )
    .parse()
    .unwrap();
    let bearer = http::HeaderValue::from_str(&format!("Bearer {TOKEN}")).unwrap();
    let raw = || async {
        let request = hane_http::Request::new(http::Method::GET, url.clone())
            .header(http::header::AUTHORIZATION, bearer.clone())
            .timeout(Duration::from_secs(5));
        let mut reply = client.send(request).await.unwrap();
        assert_eq!(reply.status, 200);
        reply.body(1 << 20, false).await.unwrap()
    };
    let exposed = || async {
        let result = hane
            .call_tool(
                &token,
                "fleet.service_history",
                json!({"registration": VEHICLE}),
            )
            .await
            .unwrap();
        assert!(
            matches!(&result, hane_coordinator::ToolResult::Output(v) if v["status"] == 200),
            "{result:?}"
        );
    };
    let generic = || async {
        let result = hane
            .call_tool(
                &token,
                "integration.read",
                json!({
                    "connection": "fleet-maintenance",
                    "operation": "getServiceHistory",
                    "input": {"registration": VEHICLE}
                }),
            )
            .await
            .unwrap();
        assert!(
            matches!(&result, hane_coordinator::ToolResult::Output(v) if v["status"] == 200),
            "{result:?}"
        );
    };

    let delivery_config = {
        let mut delivery = DeliveryConfig::new();
        delivery.credential("fleet-maintenance", TOKEN);
        delivery
    };
    let path = format!("/vehicles/{}/services", path_segment(VEHICLE));
    let base = service.url();
    let delivery = || async {
        let answer = hane_delivery::read_api(
            &delivery_config,
            hane_delivery::ApiRead {
                connection: "fleet-maintenance",
                base_url: &base,
                credential: Some("fleet-maintenance"),
                ca_certificates: None,
                method: "GET",
                path: &path,
                headers: &[],
                timeout: Duration::from_secs(5),
                cap: 256 << 10,
            },
        )
        .await
        .unwrap();
        assert_eq!(answer.status, 200);
    };

    let measuring = std::env::args().any(|a| a == "--bench");
    let (calls, warmup, blocks) = if measuring {
        (CALLS, WARMUP, BLOCKS)
    } else {
        (BLOCKS, 1, BLOCKS)
    };
    let mut times: [Vec<Duration>; 4] = Default::default();
    runtime.block_on(async {
        for _ in 0..warmup {
            raw().await;
            exposed().await;
            generic().await;
            delivery().await;
        }
        for _ in 0..blocks {
            for _ in 0..calls / blocks {
                let at = Instant::now();
                raw().await;
                times[0].push(at.elapsed());
            }
            for _ in 0..calls / blocks {
                let at = Instant::now();
                exposed().await;
                times[1].push(at.elapsed());
            }
            for _ in 0..calls / blocks {
                let at = Instant::now();
                generic().await;
                times[2].push(at.elapsed());
            }
            for _ in 0..calls / blocks {
                let at = Instant::now();
                delivery().await;
                times[3].push(at.elapsed());
            }
        }
    });
    let percentile = |times: &mut Vec<Duration>, p: f64| {
        times.sort();
        times[((times.len() - 1) as f64 * p).round() as usize]
    };
    println!("integrations: {calls} calls per row in {blocks} alternating blocks");
    println!("{:10} {:>12} {:>12}", "row", "p50", "p99");
    let mut p50 = [Duration::ZERO; 4];
    for (i, name) in ["raw", "exposed", "generic", "delivery"].iter().enumerate() {
        p50[i] = percentile(&mut times[i], 0.50);
        let p99 = percentile(&mut times[i], 0.99);
        println!(
            "{name:10} {:>9.1} µs {:>9.1} µs",
            p50[i].as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
    }
    let added = p50[1].saturating_sub(p50[0]);
    println!(
        "hane adds {:.1} µs at p50 to the raw read (exposed - raw; target <= {} µs): {}",
        added.as_secs_f64() * 1e6,
        TARGET.as_micros(),
        if added <= TARGET { "met" } else { "not met" }
    );
    println!(
        "integration.read adds {:.1} µs at p50; read_api alone {:.1} µs",
        p50[2].saturating_sub(p50[0]).as_secs_f64() * 1e6,
        p50[3].saturating_sub(p50[0]).as_secs_f64() * 1e6
    );
}
