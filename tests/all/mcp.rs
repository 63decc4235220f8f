//! The MCP server, called by the MCP Python SDK's client
//! (`tests/clients/mcp_client.py`) over Streamable HTTP with an attached
//! run's token: the run's tools with their schemas, calls through the Tool
//! Gateway (structured results, the run's tool calls, `submit_result`
//! ending the run), refused tokens, an outbound tool whose action waits
//! for a person while nothing is sent, the release-scoped endpoint for an
//! operator's key; and what real and broken clients send, as raw HTTP.
//! The MCP Inspector's CLI (npm) lists and calls a run's tools over
//! Streamable HTTP and over stdio through the `hane mcp` binary. The Python
//! client over stdio is tested with the `hane` binary, in
//! `host/cli/tests/cli/mcp.rs`.

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};
use hane_coordinator::{AgentRuntime, AttachedRun, RunTokenKey, StartRun};
use hane_core::{ActionState, Person, RunStatus};
use hane_delivery::{DeliveryConfig, SmtpConfig, SmtpTls};
use hane_server::{KeyRole, McpConfig};
use hane_test_support::SmtpServer;
use serde_json::{Value, json};

use crate::agents::release_with;
use crate::model::recorded_provider;

const FOUND: &str = "架空 300 あ 10-02";
const DEPOT: &str = "depot@elsewhere.example";

/// An agent driven from outside (as a coding CLI drives one) with a read
/// tool, an outbound one and a handover; the examples' fleet-outbound
/// policy approves its reminders to the fleet's own addresses, and the
/// fleet desk decides its other actions.
const AGENT: &str = "apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: fleet-mcp
spec:
  purpose: Look vehicles up and remind depots, from an MCP client
  input:
    type: object
    required: [vehicle]
    properties:
      vehicle: { type: string }
  driver: opencode
  instructions: Find the vehicle with data.find_record and answer with submit_result.
  tools: [data.find_record, communication.send_email, request_human_help]
  handover:
    assignment: fleet-desk
  approval:
    decider: fleet-outbound
    assignment: fleet-desk
  limits:
    maxToolCalls: 20
    maxSeconds: 300
  output:
    type: object
    required: [status, vehicle]
    properties:
      status: { type: string, enum: [found, handed_over, reminded] }
      vehicle: { type: string }
      model: { type: string }
";

/// The examples' rule for reminders, and a person of the fleet desk for
/// the rest.
const POLICY: &str = r#"apiVersion: agents/v1alpha1
kind: DeciderPolicy
metadata:
  name: fleet-outbound
spec:
  rules:
    - name: inspection-reminders
      tools: [communication.send_email]
      recipient: "*@fleet.example"
      content:
        subject: "Inspection reminder*"
      decider:
        policy: approve
  default:
    person: fleet-desk
"#;

/// A runtime on the release with [`AGENT`], delivering email to `smtp`.
async fn runtime(dir: &Path, smtp: Option<&SmtpServer>) -> AgentRuntime {
    let release = release_with(dir, &[("agent.yaml", AGENT), ("policy.yaml", POLICY)]);
    // The agent's model is never called: its client calls tools only.
    recorded_provider(&release, "replay", Vec::new());
    let mut config = crate::agents::config();
    if let Some(server) = smtp {
        let mut smtp = SmtpConfig::new("127.0.0.1", SmtpTls::None, "hane@fleet.example");
        smtp.port = server.port;
        let mut delivery = DeliveryConfig::new();
        delivery.smtp(smtp).timeout(Duration::from_secs(10));
        config.delivery(delivery);
    }
    let runtime = AgentRuntime::open(&dir.join("hane.db"), &config).unwrap();
    runtime.activate(&release).await.unwrap();
    runtime
}

/// `runtime`'s MCP endpoints on a loopback port, until the test ends.
async fn serve(runtime: &AgentRuntime, config: &McpConfig) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app: axum::Router = hane_server::mcp_router_with(runtime.clone(), config);
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn attach(runtime: &AgentRuntime) -> AttachedRun {
    runtime
        .start_attached(StartRun {
            agent: "fleet-mcp".to_owned(),
            input: json!({"vehicle": FOUND}),
            shadow: false,
        })
        .await
        .unwrap()
}

fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}{path}")
}

/// Runs the MCP Python SDK's client with `spec` (see the script's
/// docstring) and returns the JSON object it printed.
async fn mcp_client(spec: &Value) -> anyhow::Result<Value> {
    let python = match std::env::var_os("HANE_TEST_PYTHON").filter(|p| !p.is_empty()) {
        Some(python) => PathBuf::from(python),
        None => hane_test_support::repository().join("target/test-env/venv/bin/python3"),
    };
    let script = hane_test_support::repository().join("tests/clients/mcp_client.py");
    let mut command = tokio::process::Command::new(&python);
    command
        .arg(&script)
        .arg(spec.to_string())
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null());
    let output = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .context("the MCP client did not end within 300 s")?
        .with_context(|| {
            format!(
                "cannot run {} (cargo xtask provision makes it)",
                python.display()
            )
        })?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!(
            "{} failed ({}) for {spec}:\n{stderr}",
            script.display(),
            output.status
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .with_context(|| format!("the client printed no JSON:\n{stdout}\n{stderr}"))
}

fn http_spec(addr: SocketAddr, token: &str, steps: Value) -> Value {
    json!({"transport": "http", "url": url(addr, "/mcp"), "token": token, "steps": steps})
}

/// The result of step `n` of a client's output.
fn result(out: &Value, n: usize) -> &Value {
    let step = &out["steps"][n];
    assert!(
        step.get("result").is_some(),
        "step {n} has no result: {out:#}"
    );
    &step["result"]
}

fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_python_client_lists_a_runs_tools_and_calls_them_through_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path(), None).await;
    let addr = serve(&runtime, &McpConfig::new()).await;
    let attached = attach(&runtime).await;
    let find = json!({"collection": "vehicles", "match": {"registration": FOUND}});
    let out = mcp_client(&http_spec(
        addr,
        attached.token.as_str(),
        json!([
            {"list": true},
            {"call": "data-find_record", "arguments": find},
            {"call": "submit_result", "arguments": {"status": "found", "vehicle": FOUND, "model": "Toyota Hiace Van"}},
            {"call": "data-find_record", "arguments": find},
        ]),
    ))
    .await
    .unwrap();
    assert_eq!(out["protocolVersion"], "2025-11-25", "{out:#}");
    assert_eq!(out["serverInfo"]["name"], "hane");

    // Exactly the run's tools, with the schemas hane has for them.
    let release = runtime.release().await.unwrap();
    let agent = &release.agents["fleet-mcp"];
    let tools = out["steps"][0]["tools"].as_array().unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "communication-send_email",
            "data-find_record",
            "request_human_help",
            "submit_result"
        ]
    );
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        let hane = name.replace('-', ".");
        let definition = &agent.tools[&hane].definition;
        let input = if hane == "submit_result" {
            &agent.manifest.spec.output
        } else {
            &definition.input_schema
        };
        assert_eq!(&tool["inputSchema"], input, "{name}");
        let description = tool["description"].as_str().unwrap();
        assert!(
            description.starts_with(&definition.description),
            "{name}: {description}"
        );
        assert_eq!(
            description.contains("the answer may come before the decision"),
            definition.impact == "outbound",
            "{name}"
        );
        assert!(tool["outputSchema"].is_object(), "{name}: {tool:#}");
    }
    let find_tool = tools
        .iter()
        .find(|t| t["name"] == "data-find_record")
        .unwrap();
    assert_eq!(
        find_tool["outputSchema"],
        agent.tools["data.find_record"].definition.output_schema
    );
    assert_eq!(find_tool["annotations"]["readOnlyHint"], true);

    // A read tool's output, structured, validated by the client.
    let found = result(&out, 1);
    assert_eq!(found["isError"], false, "{found:#}");
    assert_eq!(
        found["structuredContent"]["records"][0]["model"],
        "Toyota Hiace Van"
    );
    assert!(text(found).contains("Toyota Hiace Van"), "{found:#}");

    // submit_result ends the run with the result.
    assert_eq!(
        result(&out, 2)["structuredContent"],
        json!({"accepted": true})
    );
    let run = runtime.wait(&attached.run.id).await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    assert_eq!(
        run.result.unwrap().to_value().unwrap(),
        json!({"status": "found", "vehicle": FOUND, "model": "Toyota Hiace Van"})
    );
    // Each call is one of the run's tool calls, as any driver's.
    let calls: Vec<(&str, &str)> = run
        .tool_calls
        .iter()
        .map(|c| (c.tool.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(
        calls[..2],
        [
            ("data.find_record", "succeeded"),
            ("submit_result", "succeeded")
        ]
    );
    // The call after the end may be recorded too, as refused.
    assert!(
        calls[2..].iter().all(|(_, status)| *status == "rejected"),
        "{calls:?}"
    );

    // After the end, the gateway refuses; the model is told why.
    let after = result(&out, 3);
    assert_eq!(after["isError"], true, "{after:#}");
    assert!(
        text(after).contains("is not running: it ended succeeded"),
        "{after:#}"
    );
}

#[tokio::test]
async fn wrong_expired_and_cancelled_tokens_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path(), None).await;
    let addr = serve(&runtime, &McpConfig::new()).await;
    let attached = attach(&runtime).await;
    let run = &attached.run.id;
    let expired = runtime
        .gateway()
        .key()
        .issue_until(run, SystemTime::now() - Duration::from_secs(1));
    let forged = RunTokenKey::generate().issue(run, Duration::from_secs(60));
    let initialize = initialize_body("2025-06-18");
    for (token, why) in [
        ("not-a-token", "malformed"),
        (forged.as_str(), "signature"),
        (expired.as_str(), "expired"),
    ] {
        let reply = post(addr, "/mcp", Some(token), &initialize).await;
        assert_eq!(reply.status, 401, "{why}: {reply:?}");
        assert_eq!(reply.json()["error"]["code"], -32001, "{why}");
        assert!(
            reply.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains(why),
            "{why}: {reply:?}"
        );
        assert!(reply.header("www-authenticate").is_some(), "{why}");
    }
    let missing = post(addr, "/mcp", None, &initialize).await;
    assert_eq!(missing.status, 401, "{missing:?}");

    // The client library reads the 401's JSON-RPC error and connects to
    // nothing.
    let refused = mcp_client(&http_spec(addr, expired.as_str(), json!([{"list": true}])))
        .await
        .unwrap();
    let message = refused["failed"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("run token expired"), "{refused:#}");

    // A cancelled run's token still names it; every call is refused with
    // the reason.
    runtime.cancel(run).await.unwrap();
    let out = mcp_client(&http_spec(
        addr,
        attached.token.as_str(),
        json!([{"call": "data-find_record", "arguments": {"collection": "vehicles", "match": {}}}]),
    ))
    .await
    .unwrap();
    let call = result(&out, 0);
    assert_eq!(call["isError"], true, "{out:#}");
    assert!(text(call).contains("cancelled"), "{call:#}");
    assert_eq!(
        runtime.wait(run).await.unwrap().status,
        RunStatus::Cancelled
    );
}

#[tokio::test]
async fn an_outbound_call_answers_pending_and_nothing_is_sent_before_a_person_approves() {
    let smtp = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path(), Some(&smtp)).await;
    let mut config = McpConfig::new();
    config.approval_wait(Duration::from_millis(500));
    let addr = serve(&runtime, &config).await;
    let attached = attach(&runtime).await;
    let run = &attached.run.id;
    let email = json!({
        "to": DEPOT,
        "subject": "Inspection reminder: 架空 300 あ 10-02",
        "body": "The inspection expires on 2027-03-31. Please book it.",
    });
    let token = attached.token.as_str().to_owned();
    let call = |steps: Value| {
        let spec = http_spec(addr, &token, steps);
        async move { mcp_client(&spec).await }
    };
    let twice = json!([
        {"call": "communication-send_email", "arguments": email},
        {"call": "communication-send_email", "arguments": email},
    ]);

    // The client's call answers before a person decides: the action
    // waits, with its id, digest and who decides it.
    let out = call(twice.clone()).await.unwrap();
    let first = result(&out, 0);
    assert_eq!(first["isError"], false, "{first:#}");
    let pending = &first["structuredContent"];
    assert_eq!(pending["state"], "pending", "{pending:#}");
    assert_eq!(pending["waitingFor"], "a person of `fleet-desk`");
    let action_id = pending["action"].as_str().unwrap().to_owned();
    assert!(action_id.starts_with("act_"), "{pending:#}");
    assert!(text(first).contains("nothing has been sent"), "{first:#}");
    // The same call again reports on the same action; none is proposed.
    assert_eq!(
        result(&out, 1)["structuredContent"]["action"],
        action_id.as_str()
    );
    let actions = runtime.actions().list(None, Some(run)).await.unwrap().items;
    assert_eq!(actions.len(), 1, "{actions:#?}");
    let action = &actions[0];
    assert_eq!(action.state, ActionState::Pending);
    assert_eq!(pending["digest"], action.digest.as_str());
    assert!(smtp.messages().is_empty(), "sent before approval");

    // A person approves exactly that content; it goes out once, and the
    // same call now answers with what became of it.
    let approved = hane_coordinator::Approvals::new(&runtime)
        .approve(
            &action_id,
            &action.digest,
            Person::anyone("person:desk"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(approved.state, ActionState::Delivered, "{approved:#?}");
    assert_eq!(smtp.messages_of(&action_id), 1);
    let out = call(json!([{"call": "communication-send_email", "arguments": email}]))
        .await
        .unwrap();
    let settled = &result(&out, 0)["structuredContent"];
    assert_eq!(settled["state"], "delivered", "{out:#}");
    assert_eq!(settled["action"], action_id.as_str());
    assert_eq!(settled["humanApproved"], true);

    // An action the policy approves goes out within the (default) wait:
    // the call answers with its outcome.
    let reminder = json!({
        "to": "shinagawa@fleet.example",
        "subject": "Inspection reminder: 架空 300 あ 10-02",
        "body": "The inspection expires on 2027-03-31.",
    });
    let waiting = serve(&runtime, &McpConfig::new()).await;
    let spec = http_spec(
        waiting,
        &token,
        json!([{"call": "communication-send_email", "arguments": reminder}]),
    );
    let out = mcp_client(&spec).await.unwrap();
    let sent = &result(&out, 0)["structuredContent"];
    assert_eq!(sent["state"], "delivered", "{out:#}");
    assert_eq!(sent["decidedBy"], "policy");
    assert_eq!(smtp.messages_of(sent["action"].as_str().unwrap()), 1);

    // Answered, the same call is a new proposal; the run's end withdraws
    // it, and nothing more is sent.
    let out = call(json!([{"call": "communication-send_email", "arguments": email}]))
        .await
        .unwrap();
    let again = &result(&out, 0)["structuredContent"];
    assert_eq!(again["state"], "pending", "{out:#}");
    assert_ne!(again["action"], action_id.as_str());
    let out = call(
        json!([{"call": "submit_result", "arguments": {"status": "reminded", "vehicle": FOUND}}]),
    )
    .await
    .unwrap();
    assert_eq!(result(&out, 0)["isError"], false, "{out:#}");
    assert_eq!(
        runtime.wait(run).await.unwrap().status,
        RunStatus::Succeeded
    );
    let withdrawn = runtime
        .actions()
        .get(again["action"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(withdrawn.state, ActionState::Rejected, "{withdrawn:#?}");
    assert_eq!(smtp.messages().len(), 2);
}

#[tokio::test]
async fn the_release_endpoint_runs_operations_for_an_operator_key() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path(), None).await;
    let addr = serve(&runtime, &McpConfig::new()).await;
    let registry = runtime.registry();
    let operator = hane_server::create_key(registry, "ops", KeyRole::Operator, None)
        .await
        .unwrap();
    let viewer = hane_server::create_key(registry, "look", KeyRole::Viewer, None)
        .await
        .unwrap();
    let spec = |key: &str, steps: Value| json!({"transport": "http", "url": url(addr, "/mcp/release"), "token": key, "steps": steps});
    let out = mcp_client(&spec(
        &operator,
        json!([
            {"list": true},
            {"call": "data-find_record", "arguments": {"collection": "vehicles", "match": {"registration": FOUND}}},
            {"call": "data-find_record", "arguments": {"collection": "secrets", "match": {}}},
        ]),
    ))
    .await
    .unwrap();
    assert_eq!(out["serverInfo"]["name"], "hane-release", "{out:#}");
    let mut names: Vec<&str> = out["steps"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "data-find_record",
            "data-get_record",
            "documents-read_pages",
            "documents-read_summary",
            "documents-search",
            "ontology-knowledge",
            "ontology-query"
        ]
    );
    let found = result(&out, 1);
    assert_eq!(found["isError"], false, "{found:#}");
    assert_eq!(
        found["structuredContent"]["records"][0]["model"],
        "Toyota Hiace Van"
    );
    let receipt = &found["_meta"]["hane/receipt"];
    assert_eq!(receipt["operation"], "data.find_record", "{found:#}");
    assert_eq!(receipt["outcome"], "succeeded");
    assert!(
        receipt["fuelConsumed"].as_u64().unwrap() > 0
            || receipt["fuelConsumed"].as_u64().unwrap() > 0
    );
    // A collection the operation's policy does not grant.
    let denied = result(&out, 2);
    assert_eq!(denied["isError"], true, "{denied:#}");
    assert!(denied["_meta"]["hane/receipt"].is_object());

    let reply = post(
        addr,
        "/mcp/release",
        Some(&viewer),
        &initialize_body("2025-06-18"),
    )
    .await;
    assert_eq!(reply.status, 403, "{reply:?}");
    assert!(reply.body.contains("operator"), "{reply:?}");
    let reply = post(
        addr,
        "/mcp/release",
        Some("hane_unknown"),
        &initialize_body("2025-06-18"),
    )
    .await;
    assert_eq!(reply.status, 401, "{reply:?}");
}

/// The MCP Inspector's CLI (`@modelcontextprotocol/inspector`, pinned in
/// `tests/clis/package.json`) from `HANE_TEST_CLIS` (else
/// `target/test-env/clis/node_modules`), as the CLI drivers' tests find
/// the coding CLIs; missing, the test fails saying to run `cargo xtask
/// provision`.
fn inspector_bin() -> PathBuf {
    let modules = std::env::var_os("HANE_TEST_CLIS")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || hane_test_support::repository().join("target/test-env/clis/node_modules"),
            PathBuf::from,
        );
    let bin = modules.join(".bin/mcp-inspector");
    assert!(
        bin.is_file(),
        "the MCP Inspector is not installed at {}: run `cargo xtask provision` and export what it prints",
        bin.display()
    );
    bin
}

/// The `hane` binary of this build: cargo puts it beside this test
/// binary's `deps/` when it builds hane-cli (`cargo test --workspace`
/// does; alone, `cargo build -p hane-cli`).
fn hane_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("hane"))
        .unwrap_or_default();
    assert!(
        bin.is_file(),
        "no hane binary beside {}: build it with `cargo build -p hane-cli`",
        exe.display()
    );
    bin
}

/// Runs the Inspector's CLI with `args` (after `--cli --format json`)
/// and returns the JSON object it printed, or its exit status and what
/// it wrote.
async fn inspector(args: &[impl AsRef<OsStr> + std::fmt::Debug]) -> anyhow::Result<Value> {
    let bin = inspector_bin();
    // Its catalog, client configuration and OAuth state live under HOME.
    let home = tempfile::tempdir()?;
    let mut command = tokio::process::Command::new(&bin);
    command
        .args(["--cli", "--format", "json"])
        .args(args)
        .env("HOME", home.path())
        .env("NO_COLOR", "1")
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null());
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .context("the MCP Inspector did not end within 120 s")?
        .with_context(|| format!("cannot run {}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!(
            "the MCP Inspector failed ({}) for {args:?}:\n{stdout}\n{stderr}",
            output.status
        );
    }
    serde_json::from_str(stdout.trim())
        .with_context(|| format!("the MCP Inspector printed no JSON:\n{stdout}\n{stderr}"))
}

/// The names of the tools a `tools/list` result lists, sorted.
fn tool_names(listed: &Value) -> Vec<&str> {
    let mut names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {listed:#}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    names
}

#[tokio::test]
async fn the_inspector_cli_lists_a_runs_tools_and_calls_them_over_streamable_http() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path(), None).await;
    let addr = serve(&runtime, &McpConfig::new()).await;
    let attached = attach(&runtime).await;
    let run = &attached.run.id;
    let endpoint = url(addr, "/mcp");
    let bearer = format!("Authorization: Bearer {}", attached.token.as_str());
    let http = |rest: &[&str]| {
        let mut args = vec![
            endpoint.as_str(),
            "--transport",
            "http",
            "--header",
            &bearer,
        ];
        args.extend_from_slice(rest);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };

    // Exactly the run's tools, with the schemas hane has for them.
    let listed = inspector(&http(&["--method", "tools/list"])).await.unwrap();
    let listed = &listed["result"];
    assert_eq!(
        tool_names(listed),
        [
            "communication-send_email",
            "data-find_record",
            "request_human_help",
            "submit_result"
        ]
    );
    let release = runtime.release().await.unwrap();
    let find = &release.agents["fleet-mcp"].tools["data.find_record"].definition;
    let find_tool = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "data-find_record")
        .unwrap();
    assert_eq!(find_tool["inputSchema"], find.input_schema);
    assert_eq!(find_tool["outputSchema"], find.output_schema);

    // A read tool called with the Inspector's key=value arguments (a JSON
    // value is passed as JSON) goes through the Tool Gateway: it is the
    // run's one tool call so far.
    let matching = format!("match={{\"registration\": \"{FOUND}\"}}");
    let found = inspector(&http(&[
        "--method",
        "tools/call",
        "--tool-name",
        "data-find_record",
        "--tool-arg",
        "collection=vehicles",
        &matching,
    ]))
    .await
    .unwrap();
    let found = &found["result"];
    assert_eq!(found["isError"], false, "{found:#}");
    assert_eq!(
        found["structuredContent"]["records"][0]["model"], "Toyota Hiace Van",
        "{found:#}"
    );
    assert!(text(found).contains("Toyota Hiace Van"), "{found:#}");
    let calls = runtime.get(run).await.unwrap().tool_calls;
    let calls: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| (c.tool.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(calls, [("data.find_record", "succeeded")]);

    // submit_result ends the run with the result.
    let answer = json!({"status": "found", "vehicle": FOUND, "model": "Toyota Hiace Van"});
    let submitted = inspector(&http(&[
        "--method",
        "tools/call",
        "--tool-name",
        "submit_result",
        "--tool-args-json",
        &answer.to_string(),
    ]))
    .await
    .unwrap();
    assert_eq!(
        submitted["result"]["structuredContent"],
        json!({"accepted": true}),
        "{submitted:#}"
    );
    let ended = runtime.wait(run).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    assert_eq!(ended.result.unwrap().to_value().unwrap(), answer);
    assert_eq!(ended.tool_calls.len(), 2, "{:#?}", ended.tool_calls);

    // A token hane refuses: the Inspector reads the 401 as a server that
    // wants OAuth, which it does not start without a terminal, and lists
    // nothing.
    let expired = runtime
        .gateway()
        .key()
        .issue_until(run, SystemTime::now() - Duration::from_secs(1));
    let refused = inspector(&[
        endpoint.as_str(),
        "--transport",
        "http",
        "--header",
        &format!("Authorization: Bearer {}", expired.as_str()),
        "--stored-auth-only",
        "--method",
        "tools/list",
    ])
    .await
    .unwrap_err();
    let refused = format!("{refused:#}");
    assert!(refused.contains("auth_required"), "{refused}");
    assert!(!refused.contains("submit_result"), "{refused}");
}

#[tokio::test]
async fn the_inspector_cli_lists_a_runs_tools_and_calls_them_over_stdio_through_hane_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path(), None).await;
    let addr = serve(&runtime, &McpConfig::new()).await;
    let attached = attach(&runtime).await;
    let run = &attached.run.id;
    let hane = hane_bin();
    let token = format!("HANE_RUN_TOKEN={}", attached.token.as_str());
    let endpoint = format!("HANE_MCP_URL={}", url(addr, "/mcp"));
    let stdio = |rest: &[&str]| {
        let mut args = vec!["--transport", "stdio", "-e", &token, "-e", &endpoint];
        args.extend_from_slice(rest);
        args.extend(["--", hane.to_str().unwrap(), "mcp"]);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };

    let listed = inspector(&stdio(&["--method", "tools/list"]))
        .await
        .unwrap();
    assert_eq!(
        tool_names(&listed["result"]),
        [
            "communication-send_email",
            "data-find_record",
            "request_human_help",
            "submit_result"
        ]
    );
    let matching = format!("match={{\"registration\": \"{FOUND}\"}}");
    let found = inspector(&stdio(&[
        "--method",
        "tools/call",
        "--tool-name",
        "data-find_record",
        "--tool-arg",
        "collection=vehicles",
        &matching,
    ]))
    .await
    .unwrap();
    let found = &found["result"];
    assert_eq!(found["isError"], false, "{found:#}");
    assert_eq!(
        found["structuredContent"]["records"][0]["model"], "Toyota Hiace Van",
        "{found:#}"
    );
    let calls = runtime.get(run).await.unwrap().tool_calls;
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(
        (calls[0].tool.as_str(), calls[0].status.as_str()),
        ("data.find_record", "succeeded")
    );

    let submitted = inspector(&stdio(&[
        "--method",
        "tools/call",
        "--tool-name",
        "submit_result",
        "--tool-arg",
        "status=found",
        &format!("vehicle={FOUND}"),
    ]))
    .await
    .unwrap();
    assert_eq!(
        submitted["result"]["structuredContent"],
        json!({"accepted": true}),
        "{submitted:#}"
    );
    let ended = runtime.wait(run).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    assert_eq!(
        ended.result.unwrap().to_value().unwrap(),
        json!({"status": "found", "vehicle": FOUND})
    );
    assert_eq!(ended.tool_calls.len(), 2, "{:#?}", ended.tool_calls);
}

#[tokio::test]
async fn what_real_and_broken_clients_send_gets_an_answer_never_a_5xx() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path(), None).await;
    let addr = serve(&runtime, &McpConfig::new()).await;
    let attached = attach(&runtime).await;
    let token = Some(attached.token.as_str());

    // The protocol versions the CLIs and SDKs speak, each agreed as asked.
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let reply = post(addr, "/mcp", token, &initialize_body(version)).await;
        assert_eq!(reply.status, 200, "{version}: {reply:?}");
        assert_eq!(
            reply.json()["result"]["protocolVersion"],
            version,
            "{reply:?}"
        );
    }
    // One it does not know: the newest it has with a handshake.
    let reply = post(addr, "/mcp", token, &initialize_body("1999-01-01")).await;
    assert_eq!(
        reply.json()["result"]["protocolVersion"],
        "2025-11-25",
        "{reply:?}"
    );

    // opencode cancels each call after its answer: ignored.
    let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}).to_string();
    let reply = post(addr, "/mcp", token, &list).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "done"}});
    let reply = post(addr, "/mcp", token, &cancel.to_string()).await;
    assert_eq!(reply.status, 202, "{reply:?}");
    let reply = post(addr, "/mcp", token, &list).await;
    assert_eq!(
        reply.json()["result"]["tools"].as_array().unwrap().len(),
        4,
        "{reply:?}"
    );

    // A tool the run does not have: a result the model can read.
    let unknown = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "communication-send_sms", "arguments": {"to": "+819012345678", "text": "hi"}}});
    let reply = post(addr, "/mcp", token, &unknown.to_string()).await;
    assert_eq!(reply.json()["result"]["isError"], true, "{reply:?}");
    assert!(reply.body.contains("not one of agent"), "{reply:?}");

    let oversized = format!(
        r#"{{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {{"pad": "{}"}}}}"#,
        "x".repeat(hane_server::MAX_MCP_MESSAGE_BYTES)
    );
    let cases: [(&str, String, u16, Option<i64>); 6] = [
        ("not JSON", "{\"jsonrpc\": ".to_owned(), 400, Some(-32700)),
        (
            "a batch",
            json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]).to_string(),
            400,
            Some(-32600),
        ),
        (
            "not JSON-RPC 2.0",
            json!({"id": 1, "method": "ping"}).to_string(),
            400,
            Some(-32600),
        ),
        (
            "malformed params",
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": "x"}).to_string(),
            400,
            None,
        ),
        (
            "an unknown method",
            json!({"jsonrpc": "2.0", "id": 3, "method": "no/such/method"}).to_string(),
            200,
            Some(-32601),
        ),
        ("oversized", oversized, 413, None),
    ];
    for (what, body, status, code) in cases {
        let reply = post(addr, "/mcp", token, &body).await;
        assert_eq!(reply.status, status, "{what}: {reply:?}");
        let error = &reply.json()["error"];
        assert!(error.is_object(), "{what}: {reply:?}");
        if let Some(code) = code {
            assert_eq!(error["code"], code, "{what}: {reply:?}");
        }
    }
    let get = send(addr, "GET", "/mcp", token, &[], None).await;
    assert_eq!(get.status, 405, "{get:?}");
    // Every refusal is a JSON-RPC error, rmcp's own plain-text ones too.
    let message = get.json()["error"]["message"].as_str().map(str::to_owned);
    assert!(message.is_some_and(|m| m.contains("takes POST")), "{get:?}");
    let delete = send(addr, "DELETE", "/mcp", token, &[], None).await;
    assert_eq!(delete.status, 204, "{delete:?}");
    let text = send(
        addr,
        "POST",
        "/mcp",
        token,
        &[
            "Content-Type: text/plain",
            "Accept: application/json, text/event-stream",
        ],
        Some(&list),
    )
    .await;
    assert_eq!(text.status, 415, "{text:?}");
    let json_only = send(
        addr,
        "POST",
        "/mcp",
        token,
        &["Content-Type: application/json", "Accept: application/json"],
        Some(&list),
    )
    .await;
    assert_eq!(json_only.status, 406, "{json_only:?}");
    let message = json_only.json()["error"]["message"]
        .as_str()
        .map(str::to_owned);
    assert!(
        message.is_some_and(|m| m.contains("text/event-stream")),
        "{json_only:?}"
    );

    // Still serving.
    let reply = post(addr, "/mcp", token, &list).await;
    assert_eq!(reply.status, 200, "{reply:?}");
}

#[tokio::test]
async fn a_plain_tools_call_gets_the_answer_rmcp_gives_and_what_rmcp_refuses_stays_refused() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(dir.path(), None).await;
    let addr = serve(&runtime, &McpConfig::new()).await;
    let attached = attach(&runtime).await;
    let token = Some(attached.token.as_str());
    let call = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": {"name": "data-find_record",
            "arguments": {"collection": "vehicles", "match": {"registration": FOUND}}}})
    .to_string();
    let with = |headers: &[&'static str]| {
        let mut all = vec!["Content-Type: application/json"];
        all.extend_from_slice(headers);
        all
    };
    let ask = async |headers: &[&'static str]| {
        send(addr, "POST", "/mcp", token, &with(headers), Some(&call)).await
    };
    // As the SDKs send it (answered without rmcp's per-request service),
    // and with a media-type parameter in `Accept` (handed to rmcp): the
    // same answer.
    let plain = ask(&[
        "Accept: application/json, text/event-stream",
        "MCP-Protocol-Version: 2025-11-25",
    ])
    .await;
    let through_rmcp = ask(&["Accept: application/json;q=1, text/event-stream"]).await;
    for reply in [&plain, &through_rmcp] {
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            reply.header("content-type"),
            Some("application/json"),
            "{reply:?}"
        );
    }
    let (plain, through_rmcp) = (plain.json(), through_rmcp.json());
    assert_eq!(plain, through_rmcp);
    assert_eq!(plain["id"], 11);
    assert_eq!(
        plain["result"]["structuredContent"]["records"][0]["model"], "Toyota Hiace Van",
        "{plain}"
    );
    assert_eq!(plain["result"]["isError"], false, "{plain}");

    // What rmcp refuses, refused as rmcp refuses it.
    let unknown = ask(&[
        "Accept: application/json, text/event-stream",
        "MCP-Protocol-Version: 1999-01-01",
    ])
    .await;
    assert_eq!(unknown.status, 400, "{unknown:?}");
    assert!(unknown.body.contains("1999-01-01"), "{unknown:?}");
    let json_only = ask(&["Accept: application/json"]).await;
    assert_eq!(json_only.status, 406, "{json_only:?}");

    // Both answered calls went through the Tool Gateway, and only they.
    let run = runtime.get(&attached.run.id).await.unwrap();
    let calls: Vec<_> = run
        .tool_calls
        .iter()
        .map(|c| (c.tool.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("data.find_record", "succeeded"),
            ("data.find_record", "succeeded")
        ]
    );
}

fn initialize_body(version: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    })
    .to_string()
}

/// An answer: status, headers (names lowercase) and body.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON: a JSON body, or the first event of a stream.
    fn json(&self) -> Value {
        let body = self.body.trim();
        let data = body
            .lines()
            .find_map(|l| l.strip_prefix("data:"))
            .unwrap_or(body);
        serde_json::from_str(data.trim()).unwrap_or(Value::Null)
    }
}

/// A JSON-RPC message POSTed as MCP clients send it.
async fn post(addr: SocketAddr, path: &str, token: Option<&str>, body: &str) -> Reply {
    send(
        addr,
        "POST",
        path,
        token,
        &[
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
        ],
        Some(body),
    )
    .await
}

/// One HTTP/1.1 request on its own connection, its body read whole (a
/// chunked one decoded).
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    headers: &[&str],
    body: Option<&str>,
) -> Reply {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    for header in headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    let body = body.unwrap_or_default();
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    // A server may answer before it has read a body it refuses.
    let _ = stream.write_all(body.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}
