//! `hane mcp`: the MCP Python SDK's client spawns it as a stdio server and
//! drives a run of the seed's `vehicle-check` agent through it; what is not
//! JSON, and what hane refuses, are answered as JSON-RPC errors.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use hane_coordinator::{AgentRuntime, AttachedRun, RuntimeConfig, StartRun};
use hane_core::RunStatus;
use hane_manager::Components;
use hane_sandbox::SandboxConfig;
use serde_json::{Value, json};

const FOUND: &str = "架空 300 あ 10-02";

/// A runtime on the examples, its MCP endpoints served on a loopback port
/// until the test ends, and a run of `vehicle-check` attached to it.
async fn served(dir: &std::path::Path) -> (AgentRuntime, SocketAddr, AttachedRun) {
    let mut config = RuntimeConfig::new();
    config
        .sandbox(
            SandboxConfig::new()
                .cache_dir(Some(hane_test_support::component_cache()))
                .max_instances(8)
                .clone(),
        )
        .components(Components::with_builtins(hane_builtins::all()));
    let runtime = AgentRuntime::open(&dir.join("hane.db"), &config).unwrap();
    runtime
        .activate(&hane_test_support::examples())
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app: axum::Router = hane_server::mcp_router(runtime.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let attached = runtime
        .start_attached(StartRun {
            agent: "vehicle-check".to_owned(),
            input: json!({"vehicle": FOUND}),
            shadow: false,
        })
        .await
        .unwrap();
    (runtime, addr, attached)
}

fn mcp_url(addr: SocketAddr) -> String {
    format!("http://{addr}/mcp")
}

/// Runs `tests/clients/mcp_client.py` with `spec` in the interpreter
/// `cargo xtask provision` makes, and returns what it printed.
fn mcp_client(spec: &Value) -> Value {
    let python = std::env::var_os("HANE_TEST_PYTHON")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            hane_test_support::repository().join("target/test-env/venv/bin/python3")
        });
    let script = hane_test_support::repository().join("tests/clients/mcp_client.py");
    let output = Command::new(&python)
        .arg(&script)
        .arg(spec.to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} (cargo xtask provision makes it): {e}",
                python.display()
            )
        });
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no JSON ({e}): {stdout}\n{stderr}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_client_drives_a_run_over_stdio_through_hane_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, addr, attached) = served(dir.path()).await;
    let spec = json!({
        "transport": "stdio",
        "command": env!("CARGO_BIN_EXE_hane"),
        "args": ["mcp", "--url", mcp_url(addr)],
        "env": {"HANE_RUN_TOKEN": attached.token.as_str()},
        "steps": [
            {"list": true},
            {"call": "data-find_record", "arguments": {"collection": "vehicles", "match": {"registration": FOUND}}},
            {"call": "submit_result", "arguments": {"status": "found", "vehicle": FOUND}},
        ],
    });
    let out = tokio::task::spawn_blocking(move || mcp_client(&spec))
        .await
        .unwrap();
    assert_eq!(out["serverInfo"]["name"], "hane", "{out:#}");
    let mut names: Vec<&str> = out["steps"][0]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{out:#}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["data-find_record", "request_human_help", "submit_result"]
    );
    let found = &out["steps"][1]["result"];
    assert_eq!(found["isError"], false, "{out:#}");
    assert_eq!(
        found["structuredContent"]["records"][0]["model"],
        "Toyota Hiace Van"
    );
    assert_eq!(out["steps"][2]["result"]["isError"], false, "{out:#}");
    let run = runtime.wait(&attached.run.id).await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    assert_eq!(run.tool_calls.len(), 2, "{run:#?}");
}

/// The lines `hane mcp` wrote for `input`, with `token` as the run's.
fn relay(addr: SocketAddr, token: Option<&str>, input: &str) -> (Option<i32>, Vec<Value>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hane"));
    command
        .args(["mcp", "--url", &mcp_url(addr)])
        .env_remove("HANE_RUN_TOKEN")
        .env_remove("HANE_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(token) = token {
        command.env("HANE_RUN_TOKEN", token);
    }
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written whole, then closed: the relay answers what it read and ends.
    let _ = stdin.write_all(input.as_bytes());
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (
        output.status.code(),
        lines,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn answer_to(lines: &[Value], id: Value) -> &Value {
    lines
        .iter()
        .find(|l| l["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id} in {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn hane_mcp_answers_what_is_not_json_and_what_hane_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let (_runtime, addr, attached) = served(dir.path()).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let input = format!(
        "this is not JSON\n\n{initialize}\n{}\n{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": "two", "method": "tools/list"}),
    );
    let token = attached.token.as_str().to_owned();
    let (code, lines, stderr) =
        tokio::task::spawn_blocking(move || relay(addr, Some(&token), &input))
            .await
            .unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let parse = answer_to(&lines, Value::Null);
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert_eq!(
        answer_to(&lines, json!(1))["result"]["protocolVersion"],
        "2025-06-18"
    );
    assert_eq!(
        answer_to(&lines, json!("two"))["result"]["tools"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );

    // A token hane refuses: each request gets a JSON-RPC error for its id.
    let input = format!("{initialize}\n");
    let (code, lines, _) =
        tokio::task::spawn_blocking(move || relay(addr, Some("hrt1.bogus"), &input))
            .await
            .unwrap();
    assert_eq!(code, Some(0));
    let refused = answer_to(&lines, json!(1));
    assert_eq!(refused["error"]["code"], -32001, "{refused}");

    // No token at all: nothing to relay with.
    let (code, lines, stderr) = tokio::task::spawn_blocking(move || relay(addr, None, ""))
        .await
        .unwrap();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(lines.is_empty());
    assert!(stderr.contains("HANE_RUN_TOKEN"), "{stderr}");
}
