//! What a gateway hop adds to one model request over HTTP. A fixed-latency
//! upstream speaking OpenAI Chat Completions runs on loopback, and one
//! client sends the same small request (a system message, a user message,
//! `max_tokens`) three ways, side by side in one run:
//!
//! - `direct`: straight to the upstream;
//! - `direct-new-conn`: the same with a new connection for each request,
//!   as hane's adapter makes them;
//! - `forward`: through a bare HTTP forwarder written with hyper (a
//!   kept-alive upstream connection, nothing parsed) on a runtime like
//!   hane's: the least any hop costs on this machine;
//! - `hane-adapter`: hane's provider call alone, `hane_model`'s HTTP
//!   adapter sending the same request to the upstream in process, with no
//!   server or gateway around it: the part of hane's hop that talks to the
//!   upstream;
//! - `hane`: through hane's Model Gateway over HTTP (`hane_server`'s
//!   `POST /v1/chat/completions`, authenticated with an attached run's
//!   RunToken), whose provider is the upstream;
//! - `litellm`: through LiteLLM's proxy (`litellm[proxy]`, one worker) in
//!   front of the same upstream, installed by the benchmark itself into
//!   `target/bench-env/litellm` on its first run.
//!
//! Rows `chat/…` time a whole non-streamed request; rows `stream/…` time a
//! streamed request until its first content chunk. A hop's cost is its
//! row's p50 minus `direct`'s. Beside the percentiles, each row's CPU time
//! per request, in this process (client, upstream, hane) and in LiteLLM's. Targets: hane adds ≤ 250 µs at p50 and at
//! most a twentieth of what LiteLLM adds; streamed, the time to the first
//! token grows by ≤ 1 ms.
//!
//! What it measures, the command and the results: `BENCHMARKS.md`.

mod latency;

use std::convert::Infallible;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, SamplingMode};
use hane_coordinator::{AgentRuntime, RuntimeConfig, StartRun};
use hane_model::{
    AdapterConfig, Api, Content, HttpAdapter, Message, ModelAdapter, ModelRequest, Role,
    StreamEvent,
};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

use latency::{LatencyTable, Samples, time_each};

/// How long the upstream takes before it answers, or before its first
/// chunk: the model's time to first token, the same on every path.
const UPSTREAM_DELAY: Duration = Duration::from_millis(2);
/// The upstream's time between two content chunks of a stream.
const CHUNK_GAP: Duration = Duration::from_millis(1);
/// The answer, as the stream's content chunks.
const ANSWER: [&str; 4] = [
    "The inspection",
    " of 架空 300 あ 10-02",
    " expires on",
    " 31 March 2027.",
];
/// The model, as the client names it and as the upstream serves it.
const MODEL: &str = "bench-model";

/// Requests timed per row, after a tenth as many untimed ones.
const SAMPLES: usize = 2_000;
/// Requests of each kind sent to LiteLLM before anything is measured: its
/// first requests take over a second while Python warms up.
const LITELLM_WARM_UP: usize = 200;
/// How long LiteLLM may take to answer its liveliness check after start.
const LITELLM_START: Duration = Duration::from_secs(180);

/// Targets: what hane's hop adds at p50, as a share of LiteLLM's, and to
/// the time to first token of a stream.
const HOP_TARGET: Duration = Duration::from_micros(250);
const SHARE_OF_LITELLM: f64 = 1.0 / 20.0;
const TTFT_TARGET: Duration = Duration::from_millis(1);

static CHAT: LatencyTable = LatencyTable::new();
static STREAM: LatencyTable = LatencyTable::new();
/// Each row's CPU time per request: this process's, LiteLLM's.
static CPU: Mutex<Vec<(String, Duration, Duration)>> = Mutex::new(Vec::new());

const PATHS: [&str; 6] = [
    "direct",
    "direct-new-conn",
    "forward",
    "hane-adapter",
    "hane",
    "litellm",
];

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    gateway(&mut c);
    c.final_summary();
    let chat = CHAT.print(
        "One non-streamed request, whole, against a 2 ms upstream",
        "chat/direct",
    );
    print_cpu("chat/");
    report(
        &chat,
        "chat",
        "what a hop adds to a request",
        HOP_TARGET,
        true,
    );
    let stream = STREAM.print(
        "One streamed request until its first content chunk, against a 2 ms upstream",
        "stream/direct",
    );
    print_cpu("stream/");
    report(
        &stream,
        "stream",
        "what a hop adds to the time to first token",
        TTFT_TARGET,
        false,
    );
}

/// Prints the CPU time per request of the rows of `group`.
fn print_cpu(group: &str) {
    let rows = CPU.lock().unwrap_or_else(|e| e.into_inner());
    let rows: Vec<_> = rows
        .iter()
        .filter(|(row, ..)| row.starts_with(group))
        .collect();
    if rows.is_empty() {
        return;
    }
    let width = rows.iter().map(|(row, ..)| row.len()).max().unwrap_or(0);
    println!("CPU time per request (user and system, every thread)");
    println!("{:width$}  {:>12}  {:>12}", "", "this process", "LiteLLM");
    let us = |d: &Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
    for (row, own, litellm) in rows {
        println!("{row:width$}  {:>12}  {:>12}", us(own), us(litellm));
    }
}

/// Prints what each gateway adds to `direct` at p50, the ratio of hane's to
/// LiteLLM's, and whether the targets hold.
fn report(p50: &[(String, Duration)], group: &str, what: &str, target: Duration, share: bool) {
    let p50_of = |path: &str| {
        let name = format!("{group}/{path}");
        p50.iter().find(|(row, _)| *row == name).map(|(_, d)| *d)
    };
    let Some(direct) = p50_of("direct") else {
        return;
    };
    let added = |path| p50_of(path).map(|d| d.as_secs_f64() - direct.as_secs_f64());
    let us = |s: f64| format!("{:.1} µs", s * 1e6);
    println!("{what} at p50 (the row's p50 minus `direct`'s):");
    for path in ["direct-new-conn", "forward", "hane-adapter", "litellm"] {
        if let Some(cost) = added(path) {
            println!("  {path} {}", us(cost));
        }
    }
    let Some(hane) = added("hane") else {
        return;
    };
    let verdict = |met: bool| if met { "met" } else { "missed" };
    println!(
        "  hane {} (target ≤ {target:?}: {})",
        us(hane),
        verdict(hane <= target.as_secs_f64())
    );
    if let Some(litellm) = added("litellm") {
        let ratio = hane / litellm;
        print!("  hane / LiteLLM = {ratio:.4}");
        if share {
            print!(
                " (target ≤ {SHARE_OF_LITELLM}: {})",
                verdict(ratio <= SHARE_OF_LITELLM)
            );
        }
        println!();
    }
}

fn gateway(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::start();
    let litellm_exe = litellm_installed();
    // hane as `hane serve` runs it: a runtime of two workers.
    let hane_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let forward = forwarder(&hane_rt, upstream.addr);
    let hane = Hane::start(&hane_rt, dir.path(), upstream.addr);
    let litellm = LiteLlm::start(&litellm_exe, dir.path(), upstream.addr);
    let litellm_pid = litellm.child.id();
    // The HTTP clients: one connection per path, kept alive, on this
    // thread.
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let routes = |stream: bool| {
        let token = if stream {
            &hane.stream_token
        } else {
            &hane.plain_token
        };
        [
            Route::Http(Client::new(upstream.addr, None)),
            Route::Http(Client::new(upstream.addr, None).new_connection_each()),
            Route::Http(Client::new(forward, None)),
            Route::Adapter(Box::new(Adapter::new(&hane_rt, upstream.addr, stream))),
            Route::Http(Client::new(hane.addr, Some(token.clone()))),
            Route::Http(Client::new(litellm.addr, Some(litellm.key.clone()))),
        ]
    };
    let mut plain = routes(false);
    let mut streamed = routes(true);
    for _ in 0..LITELLM_WARM_UP {
        plain[5].chat(&client_rt);
        streamed[5].first_token(&client_rt);
    }
    // Every path answers, and right, before anything is timed.
    for route in &mut plain {
        route.chat(&client_rt);
    }
    for route in &mut streamed {
        route.first_token(&client_rt);
    }

    let mut group = c.benchmark_group("chat");
    group.sampling_mode(SamplingMode::Flat);
    for (path, route) in PATHS.iter().zip(&mut plain) {
        let name = format!("chat/{path}");
        group.bench_function(*path, |b| {
            CHAT.record(&name, || {
                with_cpu(&name, litellm_pid, || {
                    time_each(SAMPLES / 10, SAMPLES, || route.chat(&client_rt))
                })
            });
            b.iter(|| route.chat(&client_rt));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("stream");
    group.sampling_mode(SamplingMode::Flat);
    for (path, route) in PATHS.iter().zip(&mut streamed) {
        let name = format!("stream/{path}");
        group.bench_function(*path, |b| {
            STREAM.record(&name, || {
                with_cpu(&name, litellm_pid, || {
                    time_requests(|| route.first_token(&client_rt))
                })
            });
            b.iter_custom(|iters| (0..iters).map(|_| route.first_token(&client_rt)).sum());
        });
    }
    group.finish();

    let sent: u64 = plain.iter().chain(&streamed).map(Route::sent).sum();
    let served = upstream.served.load(Ordering::Relaxed);
    assert_eq!(
        served, sent,
        "the upstream served {served} requests, the clients sent {sent} (a gateway answered by itself or retried)"
    );
    drop(litellm);
    hane.stop(&hane_rt);
}

/// Times `n` requests one by one after a tenth as many untimed ones; each
/// call returns its own time.
fn time_requests(mut request: impl FnMut() -> Duration) -> Samples {
    for _ in 0..SAMPLES / 10 {
        request();
    }
    Samples::measure(|| (0..SAMPLES).map(|_| request()).collect())
}

/// Runs `measure` (a row's requests, warm-up included) and keeps the CPU
/// time per request that this process and LiteLLM's took meanwhile.
fn with_cpu(name: &str, litellm: u32, measure: impl FnOnce() -> Samples) -> Samples {
    let requests = (SAMPLES + SAMPLES / 10) as u32;
    let before = (cpu_time("self"), cpu_time(&litellm.to_string()));
    let samples = measure();
    let after = (cpu_time("self"), cpu_time(&litellm.to_string()));
    CPU.lock().unwrap_or_else(|e| e.into_inner()).push((
        name.to_owned(),
        after.0.saturating_sub(before.0) / requests,
        after.1.saturating_sub(before.1) / requests,
    ));
    samples
}

/// The user and system CPU time of process `pid` so far, every thread
/// (`/proc/PID/stat` fields 14 and 15, in ticks of 10 ms: over a row's
/// 2,200 requests, about 5 µs a request); zero where it cannot be read.
fn cpu_time(pid: &str) -> Duration {
    let ticks = || -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields after the command name, which is in parentheses and
        // may contain spaces; field 3 comes first.
        let mut fields = stat.get(stat.rfind(')')? + 2..)?.split_whitespace();
        let user: u64 = fields.nth(11)?.parse().ok()?;
        let system: u64 = fields.next()?.parse().ok()?;
        Some(user + system)
    };
    Duration::from_millis(ticks().unwrap_or(0) * 10)
}

/// One way to the upstream.
enum Route {
    /// An HTTP client of a server: the upstream itself, hane or LiteLLM.
    Http(Client),
    /// hane's provider adapter, called in process.
    Adapter(Box<Adapter>),
}

impl Route {
    /// A non-streamed completion, read whole and checked.
    fn chat(&mut self, client_rt: &Runtime) {
        match self {
            Route::Http(client) => client_rt.block_on(client.chat()),
            Route::Adapter(adapter) => adapter.chat(),
        }
    }

    /// A streamed completion: the time to its first content chunk.
    fn first_token(&mut self, client_rt: &Runtime) -> Duration {
        match self {
            Route::Http(client) => client_rt.block_on(client.first_token()),
            Route::Adapter(adapter) => adapter.first_token(),
        }
    }

    /// Completions requested.
    fn sent(&self) -> u64 {
        match self {
            Route::Http(client) => client.sent,
            Route::Adapter(adapter) => adapter.sent,
        }
    }
}

/// `hane_model`'s HTTP adapter for the upstream, as hane's provider
/// builds it, called on hane's runtime.
struct Adapter {
    rt: tokio::runtime::Handle,
    adapter: HttpAdapter,
    request: ModelRequest,
    sent: u64,
}

impl Adapter {
    fn new(rt: &Runtime, upstream: SocketAddr, stream: bool) -> Self {
        let mut config = AdapterConfig::new(Api::ChatCompletions, format!("http://{upstream}/v1"));
        config.stream = stream;
        let mut request = ModelRequest::new(MODEL);
        request.system = Some(SYSTEM.to_owned());
        request.messages = vec![Message {
            role: Role::User,
            content: vec![Content::text(QUESTION)],
        }];
        request.max_output_tokens = Some(MAX_TOKENS);
        Self {
            rt: rt.handle().clone(),
            adapter: HttpAdapter::new(config).unwrap(),
            request,
            sent: 0,
        }
    }

    fn chat(&mut self) {
        self.sent += 1;
        let response = self
            .rt
            .block_on(self.adapter.send(&self.request, None))
            .unwrap();
        assert_eq!(response.content, vec![Content::text(ANSWER.concat())]);
    }

    fn first_token(&mut self) -> Duration {
        self.sent += 1;
        let first = OnceLock::new();
        let sink = |event: StreamEvent| {
            if let StreamEvent::TextDelta { text, .. } = event
                && !text.is_empty()
            {
                let _ = first.set(Instant::now());
            }
        };
        let start = Instant::now();
        let response = self
            .rt
            .block_on(self.adapter.send(&self.request, Some(&sink)))
            .unwrap();
        assert_eq!(response.content, vec![Content::text(ANSWER.concat())]);
        *first.get().unwrap() - start
    }
}

const SYSTEM: &str = "You look up vehicles in the fleet ledger. Answer in one sentence.";
const QUESTION: &str = "When does the inspection of 架空 300 あ 10-02 expire?";
const MAX_TOKENS: u64 = 64;

/// The request every path gets.
fn request_body(stream: bool) -> Bytes {
    let mut body = json!({
        "model": MODEL,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION}
        ],
        "max_tokens": MAX_TOKENS
    });
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    Bytes::from(serde_json::to_vec(&body).unwrap())
}

// --- The upstream -------------------------------------------------------

/// The fixed-latency upstream: an OpenAI Chat Completions server on
/// loopback, on a thread and runtime of its own, so that its work is not
/// on the runtime of hane's server.
struct Upstream {
    addr: SocketAddr,
    /// Completions served.
    served: Arc<AtomicU64>,
}

impl Upstream {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let served = Arc::new(AtomicU64::new(0));
        let counter = served.clone();
        std::thread::Builder::new()
            .name("upstream".to_owned())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            return;
                        };
                        stream.set_nodelay(true).unwrap();
                        let counter = counter.clone();
                        tokio::spawn(async move {
                            let service =
                                service_fn(move |request| complete(request, counter.clone()));
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                });
            })
            .unwrap();
        Self { addr, served }
    }
}

type UpstreamBody = Either<Full<Bytes>, Chunks>;

/// One completion: after [`UPSTREAM_DELAY`] the whole answer, or a stream
/// as OpenAI sends one — a chunk with the role and the first content, one
/// more chunk per [`CHUNK_GAP`], the finish, the usage when asked for, and
/// `[DONE]`.
async fn complete(
    request: Request<Incoming>,
    served: Arc<AtomicU64>,
) -> Result<Response<UpstreamBody>, Infallible> {
    let refuse = |status: StatusCode, message: &str| {
        let body = json!({"error": {"message": message, "type": "invalid_request_error"}});
        Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Either::Left(Full::new(Bytes::from(body.to_string()))))
            .unwrap()
    };
    if request.method() != hyper::Method::POST || request.uri().path() != "/v1/chat/completions" {
        return Ok(refuse(StatusCode::NOT_FOUND, "no such route"));
    }
    let Ok(body) = request.into_body().collect().await else {
        return Ok(refuse(StatusCode::BAD_REQUEST, "unreadable body"));
    };
    let Ok(body) = serde_json::from_slice::<Value>(&body.to_bytes()) else {
        return Ok(refuse(StatusCode::BAD_REQUEST, "the body is not JSON"));
    };
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    if model.is_empty() || body["messages"].as_array().is_none_or(Vec::is_empty) {
        return Ok(refuse(
            StatusCode::BAD_REQUEST,
            "`model` and `messages` are required",
        ));
    }
    let n = served.fetch_add(1, Ordering::Relaxed);
    let id = format!("chatcmpl-bench{n:08}");
    let created = 1_764_547_200;
    let usage = json!({
        "prompt_tokens": 38,
        "completion_tokens": 17,
        "total_tokens": 55,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    });
    if body["stream"] != json!(true) {
        sleep(UPSTREAM_DELAY).await;
        let completion = json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER.concat(), "refusal": null, "annotations": []},
                "logprobs": null,
                "finish_reason": "stop"
            }],
            "usage": usage,
            "service_tier": "default",
            "system_fingerprint": "fp_bench"
        });
        return Ok(Response::builder()
            .header("content-type", "application/json")
            .body(Either::Left(Full::new(Bytes::from(completion.to_string()))))
            .unwrap());
    }
    let include_usage = body["stream_options"]["include_usage"] == json!(true);
    let chunk = |delta: Value, finish: Value| {
        let mut chunk = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "service_tier": "default",
            "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
        });
        if include_usage {
            chunk["usage"] = Value::Null;
        }
        format!("data: {chunk}\n\n")
    };
    let mut events = vec![
        chunk(
            json!({"role": "assistant", "content": "", "refusal": null}),
            Value::Null,
        ) + &chunk(json!({"content": ANSWER[0]}), Value::Null),
    ];
    for piece in &ANSWER[1..] {
        events.push(chunk(json!({"content": piece}), Value::Null));
    }
    let mut end = chunk(json!({}), json!("stop"));
    if include_usage {
        let last = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "service_tier": "default",
            "system_fingerprint": "fp_bench",
            "choices": [],
            "usage": usage
        });
        end += &format!("data: {last}\n\n");
    }
    end += "data: [DONE]\n\n";
    // Sent with the last content chunk, as OpenAI does.
    *events.last_mut().unwrap() += &end;
    let (tx, rx) = mpsc::channel(events.len());
    tokio::task::spawn_blocking(move || {
        std::thread::sleep(UPSTREAM_DELAY);
        for (i, event) in events.into_iter().enumerate() {
            if i > 0 {
                std::thread::sleep(CHUNK_GAP);
            }
            if tx.blocking_send(Bytes::from(event)).is_err() {
                return;
            }
        }
    });
    Ok(Response::builder()
        .header("content-type", "text/event-stream; charset=utf-8")
        .header("cache-control", "no-cache")
        .body(Either::Right(Chunks(rx)))
        .unwrap())
}

/// A thread's sleep: tokio's timer counts whole milliseconds and would add
/// up to one to every delay; a thread sleeps to within tens of
/// microseconds.
async fn sleep(delay: Duration) {
    tokio::task::spawn_blocking(move || std::thread::sleep(delay))
        .await
        .unwrap();
}

/// A streamed body: each piece as it is sent.
struct Chunks(mpsc::Receiver<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|piece| piece.map(|p| Ok(Frame::data(p))))
    }
}

// --- The client ---------------------------------------------------------

/// A client of one path: one HTTP/1.1 connection kept alive, opened again
/// only when the server closed it (or a new one per request).
struct Client {
    addr: SocketAddr,
    bearer: Option<String>,
    keep_alive: bool,
    sender: Option<SendRequest<Full<Bytes>>>,
    plain: Bytes,
    streamed: Bytes,
    /// Completions requested.
    sent: u64,
}

impl Client {
    fn new(addr: SocketAddr, bearer: Option<String>) -> Self {
        Self {
            addr,
            bearer,
            keep_alive: true,
            sender: None,
            plain: request_body(false),
            streamed: request_body(true),
            sent: 0,
        }
    }

    /// The same client, opening a new connection for each request.
    fn new_connection_each(self) -> Self {
        Self {
            keep_alive: false,
            ..self
        }
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

    async fn post(&mut self, streamed: bool) -> Response<Incoming> {
        let body = if streamed {
            self.streamed.clone()
        } else {
            self.plain.clone()
        };
        let mut request = Request::post("/v1/chat/completions")
            .header("host", self.addr.to_string())
            .header("content-type", "application/json");
        if let Some(bearer) = &self.bearer {
            request = request.header("authorization", format!("Bearer {bearer}"));
        }
        let request = request.body(Full::new(body)).unwrap();
        self.sent += 1;
        let sender = self.connect().await;
        sender
            .ready()
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", self.addr));
        let sender = self.sender.as_mut().unwrap();
        let response = sender
            .send_request(request)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", self.addr));
        if !self.keep_alive {
            // The connection closes once the answer is read.
            self.sender = None;
        }
        let status = response.status();
        if status != StatusCode::OK {
            let body = response.into_body().collect().await.unwrap().to_bytes();
            panic!(
                "{} answered {status}: {}",
                self.addr,
                String::from_utf8_lossy(&body)
            );
        }
        response
    }

    /// A non-streamed completion, read whole and checked.
    async fn chat(&mut self) {
        let response = self.post(false).await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let completion: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            completion["choices"][0]["message"]["content"],
            ANSWER.concat(),
            "{completion}"
        );
    }

    /// A streamed completion: the time from sending it to its first content
    /// chunk. The rest of the stream is read (and checked) afterwards.
    async fn first_token(&mut self) -> Duration {
        let start = Instant::now();
        let mut body = self.post(true).await.into_body();
        let mut first = None;
        let mut buffer = Vec::new();
        let mut text = String::new();
        let mut done = false;
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame.unwrap().into_data() else {
                continue;
            };
            buffer.extend_from_slice(&data);
            while let Some(end) = find(&buffer, b"\n\n") {
                let event: Vec<u8> = buffer.drain(..end + 2).collect();
                let event = std::str::from_utf8(&event).unwrap();
                for line in event.lines() {
                    let Some(data) = line.strip_prefix("data:") else {
                        continue;
                    };
                    let data = data.trim_start();
                    if data == "[DONE]" {
                        done = true;
                        continue;
                    }
                    let chunk: Value = serde_json::from_str(data).unwrap();
                    if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str()
                        && !piece.is_empty()
                    {
                        first.get_or_insert_with(|| start.elapsed());
                        text.push_str(piece);
                    }
                }
            }
        }
        assert!(done, "the stream from {} ended without [DONE]", self.addr);
        assert_eq!(text, ANSWER.concat());
        first.unwrap()
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// --- The bare forwarder -------------------------------------------------

/// The least an HTTP hop can cost here: a hyper server on `rt` that sends
/// each request as it came, body streamed, over one kept-alive connection
/// to the upstream per client connection, and streams the answer back. It
/// reads nothing of either.
fn forwarder(rt: &Runtime, upstream: SocketAddr) -> SocketAddr {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            stream.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let onward = tokio::net::TcpStream::connect(upstream).await.unwrap();
                onward.set_nodelay(true).unwrap();
                let (sender, connection) =
                    hyper::client::conn::http1::handshake::<_, Incoming>(TokioIo::new(onward))
                        .await
                        .unwrap();
                tokio::spawn(connection);
                // HTTP/1.1 answers one request at a time per connection.
                let sender = Arc::new(tokio::sync::Mutex::new(sender));
                let service = service_fn(move |request: Request<Incoming>| {
                    let sender = sender.clone();
                    async move {
                        let mut sender = sender.lock().await;
                        sender.ready().await?;
                        sender.send_request(request).await
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

// --- hane ---------------------------------------------------------------

/// A provider for the upstream, streamed or not, and an `llm` agent that
/// uses it.
fn provider_and_agent(name: &str, base_url: &str, stream: bool) -> (String, String) {
    let provider = format!(
        r#"apiVersion: platform/v1alpha1
kind: ModelProvider
metadata:
  name: upstream-{name}
spec:
  api: chat-completions
  baseUrl: {base_url}
  stream: {stream}
  models:
    - name: {MODEL}
      contextWindow: 128000
      maxOutputTokens: 4096
"#
    );
    let agent = format!(
        r#"apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: gateway-{name}
spec:
  purpose: Sends its model calls through the Model Gateway over HTTP
  input: {{ type: object }}
  output: {{ type: object, required: [status], properties: {{ status: {{ type: string }} }} }}
  driver: llm
  instructions: Answer in one sentence.
  model: upstream-{name}/{MODEL}
  limits:
    maxToolCalls: 1000
    maxSeconds: 86400
    maxModelTokens: 1000000000
"#
    );
    (provider, agent)
}

/// A day's budget for both runs: a run's start holds its whole
/// `maxModelTokens` against the day's tokens.
const BUDGET: &str = r#"apiVersion: platform/v1alpha1
kind: Budget
metadata:
  name: bench
spec:
  agentRunsPerDay: 1000
  modelTokensPerDay: 100000000000
"#;

/// hane's server on loopback, with a run attached for each mode whose
/// token the client sends.
struct Hane {
    addr: SocketAddr,
    plain_token: String,
    stream_token: String,
    runtime: AgentRuntime,
    runs: Vec<hane_core::RunId>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Hane {
    fn start(rt: &Runtime, dir: &Path, upstream: SocketAddr) -> Self {
        let release = dir.join("release");
        for sub in ["providers", "agents", "budgets"] {
            std::fs::create_dir_all(release.join(sub)).unwrap();
        }
        let base_url = format!("http://{upstream}/v1");
        for (name, stream) in [("plain", false), ("stream", true)] {
            let (provider, agent) = provider_and_agent(name, &base_url, stream);
            std::fs::write(release.join(format!("providers/{name}.yaml")), provider).unwrap();
            std::fs::write(release.join(format!("agents/{name}.yaml")), agent).unwrap();
        }
        std::fs::write(release.join("budgets/bench.yaml"), BUDGET).unwrap();
        let runtime = {
            let _entered = rt.enter();
            AgentRuntime::open(&dir.join("hane.db"), &RuntimeConfig::new()).unwrap()
        };
        rt.block_on(runtime.activate(&release)).unwrap();
        let mut tokens = Vec::new();
        let mut runs = Vec::new();
        for agent in ["gateway-plain", "gateway-stream"] {
            let attached = rt
                .block_on(runtime.start_attached(StartRun {
                    agent: agent.to_owned(),
                    input: json!({}),
                    shadow: false,
                }))
                .unwrap();
            tokens.push(attached.token.as_str().to_owned());
            runs.push(attached.run.id);
        }
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        rt.spawn(hane_server::serve(
            listener,
            hane_coordinator::Services::new(runtime.clone()),
            async {
                let _ = stopped.await;
            },
        ));
        let [plain_token, stream_token] = <[String; 2]>::try_from(tokens).unwrap();
        Self {
            addr,
            plain_token,
            stream_token,
            runtime,
            runs,
            stop,
        }
    }

    /// Cancels the runs and stops the server.
    fn stop(self, rt: &Runtime) {
        for run in &self.runs {
            rt.block_on(self.runtime.cancel(run)).unwrap();
        }
        let _ = self.stop.send(());
    }
}

// --- LiteLLM ------------------------------------------------------------

/// The repository.
fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// LiteLLM's proxy in a virtual environment of its own,
/// `target/bench-env/litellm` (under `CARGO_TARGET_DIR` when set): made
/// on the first run, installed into again only when
/// `benches/litellm/requirements.txt` changed since. Returns its `litellm`
/// command.
///
/// # Panics
///
/// When it cannot be installed: the benchmark's comparison needs it.
fn litellm_installed() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|t| !t.is_empty())
        .map_or_else(|| repository().join("target"), |t| repository().join(t));
    let venv = target.join("bench-env/litellm");
    let python = venv.join("bin/python3");
    let litellm = venv.join("bin/litellm");
    let requirements_file = repository().join("benches/litellm/requirements.txt");
    let requirements = std::fs::read_to_string(&requirements_file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", requirements_file.display()));
    // What was installed, written after a successful install.
    let stamp = venv.join("hane-requirements.txt");
    if litellm.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == requirements) {
        return litellm;
    }
    let fail = |what: &str, error: String| -> ! {
        panic!(
            "the gateway benchmark measures LiteLLM's proxy beside hane and could not install it \
             into {}: {what}: {error}",
            venv.display()
        )
    };
    let run = |command: &mut Command, what: &str| match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) => fail(what, format!("exited with {status}")),
        Err(e) => fail(what, e.to_string()),
    };
    eprintln!(
        "gateway: installing LiteLLM's proxy (benches/litellm/requirements.txt, about 750 MB, \
         a few minutes) into {}",
        venv.display()
    );
    let works = Command::new(&python)
        .args(["-c", ""])
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        run(
            Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(&venv),
            "python3 -m venv (it needs Python 3 with its venv module; on Debian: apt-get install \
             python3-venv)",
        );
    }
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--requirement",
            ])
            .arg(&requirements_file),
        "pip install --requirement benches/litellm/requirements.txt",
    );
    if !litellm.is_file() {
        fail("pip install", format!("{} is missing", litellm.display()));
    }
    std::fs::write(&stamp, &requirements)
        .unwrap_or_else(|e| fail("writing the stamp", e.to_string()));
    litellm
}

/// A LiteLLM proxy started for the benchmark, killed when dropped.
struct LiteLlm {
    addr: SocketAddr,
    /// The master key, which the proxy requires and clients send.
    key: String,
    child: Child,
}

impl LiteLlm {
    /// Starts `litellm` with `benches/litellm/config.yaml` in front of the
    /// upstream and waits until it says it is alive.
    ///
    /// # Panics
    ///
    /// When it does not start, with the end of its log.
    fn start(litellm: &Path, dir: &Path, upstream: SocketAddr) -> Self {
        // A free port: the proxy takes it right after.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let key = master_key();
        let log_file = dir.join("litellm.log");
        let log = std::fs::File::create(&log_file).unwrap();
        let child = Command::new(litellm)
            .arg("--config")
            .arg(repository().join("benches/litellm/config.yaml"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--num_workers", "1"])
            .env("HANE_BENCH_UPSTREAM", format!("http://{upstream}/v1"))
            .env("LITELLM_MASTER_KEY", &key)
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_TELEMETRY", "False")
            .env("LITELLM_LOG", "ERROR")
            .env("NO_PROXY", "127.0.0.1,localhost")
            // Not the repository: the proxy reads a `.env` where it starts.
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", litellm.display()));
        let mut proxy = Self { addr, key, child };
        let started = Instant::now();
        while !alive(addr) {
            let exited = proxy.child.try_wait().unwrap();
            if exited.is_some() || started.elapsed() > LITELLM_START {
                let log = std::fs::read_to_string(&log_file).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                panic!(
                    "LiteLLM's proxy {} within {LITELLM_START:?}; the end of its log:\n{}",
                    match exited {
                        Some(status) => format!("exited ({status})"),
                        None => "did not answer".to_owned(),
                    },
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        proxy
    }
}

impl Drop for LiteLlm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the proxy answers `GET /health/liveliness` with 200.
fn alive(addr: SocketAddr) -> bool {
    use std::io::Write;
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request =
        format!("GET /health/liveliness HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

/// A new random master key, as LiteLLM's own advice makes one.
fn master_key() -> String {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sk-{hex}")
}
