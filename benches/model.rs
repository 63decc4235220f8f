//! What the Model Gateway and the `llm` driver add to a model call. Rows,
//! side by side in one run:
//!
//! - `adapter`: the recorded adapter answering the example agent's second
//!   request (a tool call's result back, 3 messages) — the model, as far as
//!   the gateway is concerned;
//! - `gateway`: the same request through the in-process Model Gateway in
//!   front of that adapter: the run's token checked, the gate's limits and
//!   its `maxModelTokens`, the output cap, the request's digest, the retry
//!   wrapper, the usage counted and the LLM turn assembled. Its own cost is
//!   `gateway` minus `adapter`; the target is ≤ 50 µs at p50;
//! - `driver-11-turns`: the `llm` driver running a conversation of ten
//!   `data.find_record` calls and `submit_result`, against a model and
//!   tools that answer at once from memory: the context built each turn,
//!   the request assembled, the calls read, the results formatted as
//!   untrusted data. Per turn it is that over 11; the target is ≤ 100 µs.
//!
//! What it measures, the command and the results: `BENCHMARKS.md`.

mod examples;
mod latency;

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::Criterion;
use hane_coordinator::{
    AgentRuntime, GatewayError, Llm, ModelCaller, RunDriver, RuntimeConfig, ToolCaller, ToolResult,
    drivers::{ModelCall, ModelInfo, model_tool_name, task_message},
    gateway::model::ModelCallError,
};
use hane_core::BoxFuture;
use hane_core::RunId;
use hane_manager::Components;
use hane_model::{
    Content, Message, ModelAdapter, ModelRequest, ModelResponse, ReplayAdapter, RetryPolicy, Role,
    StopReason, Usage,
};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use examples::copy_examples;
use latency::{LatencyTable, time_each};

/// Calls timed per row (after a tenth as many untimed ones).
const SAMPLES: usize = 20_000;

/// Targets at p50: the gateway's own cost per call, the driver's per turn.
const GATEWAY_TARGET: Duration = Duration::from_micros(50);
const TURN_TARGET: Duration = Duration::from_micros(100);

/// Turns of the `driver` row.
const TURNS: usize = 11;

static ROWS: LatencyTable = LatencyTable::new();

const FOUND: &str = "架空 300 あ 10-02";

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    model(&mut c);
    c.final_summary();
    let p50 = ROWS.print("The Model Gateway and the llm driver", "adapter");
    let p50_of = |name: &str| p50.iter().find(|(row, _)| row == name).map(|(_, d)| *d);
    if let (Some(adapter), Some(gateway)) = (p50_of("adapter"), p50_of("gateway")) {
        let own = gateway.saturating_sub(adapter);
        println!(
            "the gateway's own cost per model call at p50: {own:.1?} (target ≤ {GATEWAY_TARGET:?}: {})",
            if own <= GATEWAY_TARGET {
                "met"
            } else {
                "missed"
            }
        );
    }
    if let Some(driver) = p50_of("driver-11-turns") {
        let per_turn = driver / TURNS as u32;
        println!(
            "the llm driver per turn at p50: {per_turn:.1?} (target ≤ {TURN_TARGET:?}: {})",
            if per_turn <= TURN_TARGET {
                "met"
            } else {
                "missed"
            }
        );
    }
}

/// The example `vehicle-check-llm`'s second request: the task, the model's
/// call of `data.find_record`, and its result.
fn second_request(agent_tools: &[String]) -> ModelRequest {
    let mut request = ModelRequest::new("fleet-assistant");
    request.system = Some("You look up vehicles in the fleet ledger.".to_owned());
    request.tools = agent_tools
        .iter()
        .map(|name| hane_model::ToolSpec {
            name: name.clone(),
            description: "A tool.".to_owned(),
            input_schema: json!({"type": "object"}),
        })
        .collect();
    request.messages = vec![
        task_message(&json!({"vehicle": FOUND})),
        Message {
            role: Role::Assistant,
            content: vec![
                Content::text("I'll look the vehicle up in the fleet ledger."),
                Content::ToolCall {
                    id: "call_1".to_owned(),
                    name: model_tool_name("data.find_record"),
                    input: json!({"collection": "vehicles", "match": {"registration": FOUND}}),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![Content::ToolResult {
                call_id: "call_1".to_owned(),
                content: r#"{"records":[{"id":"V-001","model":"Toyota Hiace Van"}]}"#.to_owned(),
                is_error: false,
            }],
        },
    ];
    request
}

fn runtime(rt: &Runtime, dir: &Path) -> AgentRuntime {
    let release = dir.join("release");
    // Not `budgets/`: the benchmark makes more model calls than a day allows.
    copy_examples(&release, examples::UNBUDGETED);
    // A gate that neither runs out of tokens nor of time while measured.
    let agent = std::fs::read_to_string(release.join("agents/vehicle-check-llm.yaml"))
        .unwrap()
        .replace("maxModelTokens: 8000", "maxModelTokens: 100000000000")
        .replace("maxSeconds: 120", "maxSeconds: 86400")
        .replace("maxToolCalls: 4", "maxToolCalls: 1000");
    std::fs::write(release.join("agents/vehicle-check-llm.yaml"), agent).unwrap();
    let mut config = RuntimeConfig::new();
    config.components(Components::with_builtins(hane_builtins::all()));
    let _entered = rt.enter();
    let runtime = AgentRuntime::open(&dir.join("hane.db"), &config).unwrap();
    rt.block_on(runtime.activate(&release)).unwrap();
    runtime
}

fn model(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&rt, dir.path());
    let agent = rt.block_on(runtime.release()).unwrap().agents["vehicle-check-llm"].clone();
    let tools: Vec<String> = agent.tools.keys().map(|t| model_tool_name(t)).collect();
    let recording = hane_model::Recording::read(
        &examples::examples().join("recordings/vehicle-check-llm.json"),
    )
    .unwrap();
    let recorded = ReplayAdapter::new(recording, "vehicle-check-llm.json");
    let request = second_request(&tools);
    let answered = rt.block_on(recorded.send(&request, None)).unwrap();
    assert_eq!(answered.stop_reason, StopReason::ToolUse);
    let mut group = c.benchmark_group("model");

    group.bench_function("adapter", |b| {
        let call = || rt.block_on(recorded.send(&request, None)).unwrap();
        ROWS.record("adapter", || {
            time_each(SAMPLES / 10, SAMPLES, || drop(call()))
        });
        b.iter(call);
    });

    let gateway = runtime.gateway();
    let run = RunId::new();
    let token = gateway.open(&run, agent.clone());
    let info = ModelInfo {
        provider: "fleet-assistant".to_owned(),
        name: "fleet-assistant".to_owned(),
        context_window: 8192,
        max_output_tokens: 1024,
        temperature: None,
    };
    let retry = RetryPolicy::default();
    let context = json!({"tokenizer": "estimate", "window": 8192, "reserveOutput": 1024, "inputTokens": 700, "messages": 3, "kept": 3});
    let through_gateway = || {
        let call = ModelCall {
            request: request.clone(),
            input_tokens: 700,
            context: context.clone(),
        };
        rt.block_on(gateway.call_model(&token, &info, &recorded, &retry, call, None))
            .unwrap()
    };
    group.bench_function("gateway", |b| {
        ROWS.record("gateway", || {
            time_each(SAMPLES / 10, SAMPLES, || drop(through_gateway()))
        });
        b.iter(through_gateway);
    });
    gateway.close(&run);

    let driver = Llm::new(&agent);
    let answers = conversation();
    let drive = || {
        let model = Canned {
            info: info.clone(),
            answers: &answers,
            next: AtomicUsize::new(0),
        };
        let tools = Ledger {
            calls: Mutex::new(0),
        };
        rt.block_on(driver.drive(&tools, Some(&model), json!({"vehicle": FOUND})))
            .unwrap();
        assert_eq!(model.next.load(Ordering::Relaxed), TURNS);
    };
    group.bench_function("driver-11-turns", |b| {
        ROWS.record("driver-11-turns", || {
            time_each(SAMPLES / 100, SAMPLES / 10, drive)
        });
        b.iter(drive);
    });
    group.finish();
}

/// Ten lookups, then the result.
fn conversation() -> Vec<ModelResponse> {
    let usage = Usage {
        input_tokens: 700,
        output_tokens: 40,
        cached_tokens: 0,
    };
    let answer = |id: usize, tool: &str, input: Value| ModelResponse {
        content: vec![
            Content::text("Looking it up."),
            Content::ToolCall {
                id: format!("call_{id}"),
                name: model_tool_name(tool),
                input,
            },
        ],
        stop_reason: StopReason::ToolUse,
        usage,
        model: "fleet-assistant".to_owned(),
        request_id: None,
    };
    let mut answers: Vec<ModelResponse> = (1..TURNS)
        .map(|i| {
            answer(
                i,
                "data.find_record",
                json!({"collection": "vehicles", "match": {"registration": FOUND}}),
            )
        })
        .collect();
    answers.push(answer(
        TURNS,
        "submit_result",
        json!({"status": "found", "vehicle": FOUND}),
    ));
    answers
}

/// A model that answers each turn at once from memory.
struct Canned<'a> {
    info: ModelInfo,
    answers: &'a [ModelResponse],
    next: AtomicUsize,
}

impl ModelCaller for Canned<'_> {
    fn model(&self) -> &ModelInfo {
        &self.info
    }

    fn call<'a>(&'a self, call: ModelCall) -> BoxFuture<'a, Result<ModelResponse, ModelCallError>> {
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        // What the gateway would send is built; its cost is the driver's.
        let request = call.request;
        assert!(!request.messages.is_empty());
        let answer = self.answers[turn].clone();
        Box::pin(async move { Ok(answer) })
    }
}

/// Tools that answer at once: the record the example ledger holds.
struct Ledger {
    calls: Mutex<usize>,
}

impl ToolCaller for Ledger {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        _input: Value,
    ) -> BoxFuture<'a, Result<ToolResult, GatewayError>> {
        *self.calls.lock().unwrap() += 1;
        let output = if tool == "submit_result" {
            json!({"accepted": true})
        } else {
            json!({"records": [{"id": "V-001", "registration": FOUND, "model": "Toyota Hiace Van", "inspection_expiry": "2027-03-31", "mileage_km": "48210", "depot": "Shinagawa"}]})
        };
        Box::pin(async move { Ok(ToolResult::Output(output)) })
    }
}
