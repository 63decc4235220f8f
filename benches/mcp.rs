//! What the MCP server adds to one tool call. An attached run of an agent
//! with the examples' `data.find_record` (a cheap read: one vehicle of the
//! ledger) makes the same call, side by side in one run:
//!
//! - `in-process`: [`AgentRuntime::call_tool`] with the run's token, the
//!   tool and its input, on hane's runtime: the Tool Gateway, the
//!   translator, the sandboxed operation and the journal, which any call
//!   pays;
//! - `mcp`: the same call as an MCP `tools/call` to `POST /mcp` of
//!   `hane_server::serve` (Streamable HTTP), over one kept-alive HTTP/1.1
//!   connection, with the headers real clients send (`Accept:
//!   application/json, text/event-stream`, `mcp-protocol-version`, the
//!   token as `Authorization: Bearer`);
//! - `mcp-ping`: a `ping` to the same endpoint: HTTP, the token check and
//!   rmcp's per-request service, without any tool (a plain `tools/call` is
//!   answered without that service);
//! - `http-head`: a `HEAD /` on the same connection: hane's HTTP server
//!   and router alone, the floor of any request over HTTP.
//!
//! Beside them, `in-process-one-run`: the in-process call with all of the
//! row's calls (thousands) for one run, against `in-process`'s runs of
//! 100: a call's cost must not grow with its run's calls.
//!
//! MCP's cost is `mcp`'s p50 minus `in-process`'s. Beside the
//! percentiles, each row's CPU time per call in this process (client and
//! hane). Target: MCP adds ≤ 200 µs at p50.
//!
//! What it measures, the command and the results: `BENCHMARKS.md`.

mod examples;
mod latency;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, SamplingMode};
use hane_coordinator::{AgentRuntime, AttachedRun, RunToken, RuntimeConfig, StartRun, ToolResult};
use hane_manager::Components;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use examples::copy_examples;
use latency::{LatencyTable, Samples, time_each};

/// Calls timed per row, after a tenth as many untimed ones.
const SAMPLES: usize = 2_000;

/// Tool calls made for one run before the next run starts (untimed), as
/// a client's session of up to a hundred calls; every row's calls are
/// made by runs of the same sizes.
const CALLS_PER_RUN: usize = 100;

/// Target: what MCP adds to a call at p50.
const TARGET: Duration = Duration::from_micros(200);

/// The protocol version the client speaks, as the MCP SDKs send it on
/// every request after `initialize`.
const PROTOCOL_VERSION: &str = "2025-11-25";

const FOUND: &str = "架空 300 あ 10-02";

static CALLS: LatencyTable = LatencyTable::new();
/// Each row's CPU time per call in this process.
static CPU: Mutex<Vec<(String, Duration)>> = Mutex::new(Vec::new());

/// An agent driven from outside with one read tool, and limits no run of
/// the benchmark reaches.
const AGENT: &str = "apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: mcp-bench
spec:
  purpose: Looks vehicles up from an MCP client
  input: { type: object }
  output: { type: object, required: [status], properties: { status: { type: string } } }
  driver: scripted
  tools: [data.find_record]
  limits: { maxToolCalls: 100000000, maxSeconds: 86400 }
  script:
    - tool: submit_result
      input: { status: done }
";

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    tools_call(&mut c);
    c.final_summary();
    let p50 = CALLS.print(
        "One tools/call of data.find_record, by runs of up to 100 calls",
        "tools_call/in-process",
    );
    print_cpu();
    let p50_of = |row: &str| {
        p50.iter()
            .find(|(name, _)| name == &format!("tools_call/{row}"))
            .map(|(_, d)| d.as_secs_f64())
    };
    let (Some(in_process), Some(mcp)) = (p50_of("in-process"), p50_of("mcp")) else {
        return;
    };
    let added = mcp - in_process;
    println!(
        "what MCP adds to a call at p50 (mcp's p50 minus in-process's): {:.1} µs (target ≤ {TARGET:?}: {})",
        added * 1e6,
        if added <= TARGET.as_secs_f64() {
            "met"
        } else {
            "missed"
        }
    );
    if let Some(ping) = p50_of("mcp-ping") {
        println!("  a ping's p50: {:.1} µs", ping * 1e6);
    }
    if let Some(head) = p50_of("http-head") {
        println!(
            "  a HEAD / on the same connection, p50: {:.1} µs",
            head * 1e6
        );
    }
}

fn print_cpu() {
    let rows = CPU.lock().unwrap_or_else(|e| e.into_inner());
    if rows.is_empty() {
        return;
    }
    let width = rows.iter().map(|(row, _)| row.len()).max().unwrap_or(0);
    println!("CPU time per call in this process (user and system, every thread)");
    for (row, cpu) in rows.iter() {
        println!("{row:width$}  {:>8.0} µs", cpu.as_secs_f64() * 1e6);
    }
}

fn tools_call(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    // hane as `hane serve` runs it: a runtime of two workers.
    let hane_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runtime = runtime(&hane_rt, dir.path());
    let listener = hane_rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    hane_rt.spawn(hane_server::serve(
        listener,
        hane_coordinator::Services::new(runtime.clone()),
        async {
            let _ = stopped.await;
        },
    ));
    // The client: one kept-alive connection, on this thread.
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let input = json!({"collection": "vehicles", "match": {"registration": FOUND}});
    // Both rows' calls are made for the same runs, in turn.
    let runs = RefCell::new(Runs::start(&hane_rt, &runtime));
    let mut client = Client::new(addr, input.clone());

    // Each row's call returns its own time: a new run, when one is due,
    // starts untimed.
    let mut in_process = || {
        let token = runs.borrow_mut().next().clone();
        call_in_process(&hane_rt, &runtime, &token, &input)
    };
    // A ping makes no tool call: it goes with the token of the run there is.
    let mut mcp = |ping: bool| {
        if !ping || client.bearer.is_empty() {
            client.bearer = format!("Bearer {}", runs.borrow_mut().next().as_str());
        }
        let start = Instant::now();
        if ping {
            client_rt.block_on(client.ping());
        } else {
            client_rt.block_on(client.call());
        }
        start.elapsed()
    };
    // Every row answers, and right, before anything is timed.
    in_process();
    mcp(false);
    mcp(true);

    let mut group = c.benchmark_group("tools_call");
    group.sampling_mode(SamplingMode::Flat);
    group.bench_function("in-process", |b| {
        let name = "tools_call/in-process";
        CALLS.record(name, || with_cpu(name, || time_calls(&mut in_process)));
        b.iter_custom(|iters| (0..iters).map(|_| in_process()).sum());
    });
    // All of a row's calls for one run: a call's cost must not grow with
    // the run's calls so far.
    let long = Runs::attach(&hane_rt, &runtime);
    let mut one_run = || call_in_process(&hane_rt, &runtime, &long.token, &input);
    group.bench_function("in-process-one-run", |b| {
        let name = "tools_call/in-process-one-run";
        CALLS.record(name, || with_cpu(name, || time_calls(&mut one_run)));
        b.iter_custom(|iters| (0..iters).map(|_| one_run()).sum());
    });
    group.bench_function("mcp", |b| {
        let name = "tools_call/mcp";
        CALLS.record(name, || with_cpu(name, || time_calls(|| mcp(false))));
        b.iter_custom(|iters| (0..iters).map(|_| mcp(false)).sum());
    });
    group.bench_function("mcp-ping", |b| {
        let name = "tools_call/mcp-ping";
        CALLS.record(name, || {
            with_cpu(name, || {
                time_each(SAMPLES / 10, SAMPLES, || {
                    mcp(true);
                })
            })
        });
        b.iter(|| mcp(true));
    });
    group.bench_function("http-head", |b| {
        let name = "tools_call/http-head";
        CALLS.record(name, || {
            with_cpu(name, || {
                time_each(SAMPLES / 10, SAMPLES, || {
                    client_rt.block_on(client.head());
                })
            })
        });
        b.iter(|| client_rt.block_on(client.head()));
    });
    group.finish();
    runs.borrow().end();
    hane_rt.block_on(runtime.cancel(&long.run.id)).unwrap();
    let _ = stop.send(());
}

/// Times [`SAMPLES`] calls one by one after a tenth as many untimed ones;
/// each call returns its own time.
fn time_calls(mut call: impl FnMut() -> Duration) -> Samples {
    for _ in 0..SAMPLES / 10 {
        call();
    }
    Samples::measure(|| (0..SAMPLES).map(|_| call()).collect())
}

/// The attached runs the calls are made for: a new one every
/// [`CALLS_PER_RUN`] calls.
struct Runs<'a> {
    rt: &'a Runtime,
    runtime: &'a AgentRuntime,
    current: AttachedRun,
    calls: usize,
}

impl<'a> Runs<'a> {
    fn start(rt: &'a Runtime, runtime: &'a AgentRuntime) -> Self {
        let current = Self::attach(rt, runtime);
        Self {
            rt,
            runtime,
            current,
            calls: 0,
        }
    }

    fn attach(rt: &Runtime, runtime: &AgentRuntime) -> AttachedRun {
        rt.block_on(runtime.start_attached(StartRun {
            agent: "mcp-bench".to_owned(),
            input: json!({}),
            shadow: false,
        }))
        .unwrap()
    }

    /// The token of the run the next call is for.
    fn next(&mut self) -> &RunToken {
        if self.calls == CALLS_PER_RUN {
            self.end();
            self.current = Self::attach(self.rt, self.runtime);
            self.calls = 0;
        }
        self.calls += 1;
        &self.current.token
    }

    /// Cancels the current run, once every call it made succeeded.
    fn end(&self) {
        let id = &self.current.run.id;
        let run = self.rt.block_on(self.runtime.get(id)).unwrap();
        let failed: Vec<_> = run
            .tool_calls
            .iter()
            .filter(|c| c.status != hane_core::run::ToolCallEnd::Succeeded)
            .collect();
        assert!(failed.is_empty(), "calls of {id} failed: {failed:#?}");
        self.rt.block_on(self.runtime.cancel(id)).unwrap();
    }
}

/// A runtime on the examples' tools and ledger with [`AGENT`] as the one
/// agent (the examples' own need a model provider and a budget), with the
/// built-in operations.
fn runtime(rt: &Runtime, dir: &Path) -> AgentRuntime {
    let release = dir.join("release");
    copy_examples(
        &release,
        &[
            "tools",
            "ledger/records",
            "ledger/documents/leases",
            "documents",
        ],
    );
    std::fs::create_dir_all(release.join("agents")).unwrap();
    std::fs::write(release.join("agents/mcp-bench.yaml"), AGENT).unwrap();
    let mut config = RuntimeConfig::new();
    config.components(Components::with_builtins(hane_builtins::all()));
    let _entered = rt.enter();
    let runtime = AgentRuntime::open(&dir.join("hane.db"), &config).unwrap();
    rt.block_on(runtime.activate(&release)).unwrap();
    runtime
}

/// Runs `measure` (a row's calls, warm-up included) and keeps the CPU
/// time per call this process took meanwhile.
fn with_cpu(name: &str, measure: impl FnOnce() -> Samples) -> Samples {
    let calls = (SAMPLES + SAMPLES / 10) as u32;
    let before = cpu_time();
    let samples = measure();
    let spent = cpu_time().saturating_sub(before);
    CPU.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((name.to_owned(), spent / calls));
    samples
}

/// The user and system CPU time of this process so far, every thread
/// (`/proc/self/stat` fields 14 and 15, in ticks of 10 ms: over a row's
/// 2,200 calls, about 5 µs a call); zero where it cannot be read.
fn cpu_time() -> Duration {
    let ticks = || -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The fields after the command name, which is in parentheses and
        // may contain spaces; field 3 comes first.
        let mut fields = stat.get(stat.rfind(')')? + 2..)?.split_whitespace();
        let user: u64 = fields.nth(11)?.parse().ok()?;
        let system: u64 = fields.next()?.parse().ok()?;
        Some(user + system)
    };
    Duration::from_millis(ticks().unwrap_or(0) * 10)
}

/// One `AgentRuntime::call_tool` of `data.find_record` for `token`'s run,
/// its result checked; its time.
fn call_in_process(
    rt: &Runtime,
    runtime: &AgentRuntime,
    token: &RunToken,
    input: &Value,
) -> Duration {
    let start = Instant::now();
    let result = rt
        .block_on(runtime.call_tool(token, "data.find_record", input.clone()))
        .unwrap();
    let elapsed = start.elapsed();
    match result {
        ToolResult::Output(output) => check_found(&output),
        ToolResult::Error { kind, message } => panic!("{kind}: {message}"),
    }
    elapsed
}

/// The record a call must find.
fn check_found(output: &Value) {
    assert_eq!(
        output["records"][0]["model"], "Toyota Hiace Van",
        "{output}"
    );
}

/// An MCP client of `/mcp`: one HTTP/1.1 connection kept alive, opened
/// again only when the server closed it.
struct Client {
    addr: SocketAddr,
    /// `Bearer` and the token of the run the next call is for.
    bearer: String,
    input: Value,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// The next JSON-RPC id: clients number their requests.
    id: u64,
}

impl Client {
    fn new(addr: SocketAddr, input: Value) -> Self {
        Self {
            addr,
            bearer: String::new(),
            input,
            sender: None,
            id: 1,
        }
    }

    /// A `tools/call` of `data-find_record`, its result checked.
    async fn call(&mut self) {
        let params = json!({"name": "data-find_record", "arguments": self.input});
        let answer = self.request("tools/call", params).await;
        let result = &answer["result"];
        assert_eq!(result["isError"], false, "{answer}");
        check_found(&result["structuredContent"]);
    }

    /// A `ping`, answered with an empty result.
    async fn ping(&mut self) {
        let answer = self.request("ping", json!({})).await;
        assert_eq!(answer["result"], json!({}), "{answer}");
    }

    /// A `HEAD /` on the same connection: hane's HTTP server and router,
    /// without MCP or a token.
    async fn head(&mut self) {
        let request = Request::head("/")
            .header("host", self.addr.to_string())
            .body(Full::new(Bytes::new()))
            .unwrap();
        let sender = self.connect().await;
        sender.ready().await.unwrap();
        let response = sender.send_request(request).await.unwrap();
        let status = response.status();
        response.into_body().collect().await.unwrap();
        assert_eq!(status, StatusCode::OK);
    }

    /// One JSON-RPC request, POSTed as MCP clients do; the answer, as JSON
    /// or as the one event of a stream.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        self.id += 1;
        let request = Request::post("/mcp")
            .header("host", self.addr.to_string())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .header("authorization", &self.bearer)
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        let sender = self.connect().await;
        sender.ready().await.unwrap();
        let response = sender.send_request(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&body).unwrap();
        assert_eq!(status, StatusCode::OK, "{text}");
        let json = text
            .lines()
            .find_map(|l| l.strip_prefix("data:"))
            .unwrap_or(text);
        serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    async fn connect(&mut self) -> &mut SendRequest<Full<Bytes>> {
        if self.sender.as_ref().is_none_or(SendRequest::is_closed) {
            let stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(connection);
            self.sender = Some(sender);
        }
        self.sender.as_mut().unwrap()
    }
}
