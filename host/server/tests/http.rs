//! The API over real HTTP: a runtime on a temporary store with the release
//! in `examples/` (or one a test writes) active, served on a loopback port,
//! spoken to with HTTP/1.1 written by hand.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use hane_coordinator::AgentRuntime;
use hane_coordinator::RuntimeConfig;
use hane_delivery::{DeliveryConfig, HttpProvider, SmtpConfig, SmtpTls};
use hane_manager::Components;
use hane_sandbox::SandboxConfig;
use hane_server::{KeyError, KeyRole};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

#[path = "http/hardening.rs"]
mod hardening;
#[path = "http/openapi.rs"]
mod openapi;

const FOUND: &str = "架空 300 あ 10-02";
const MISSING: &str = "架空 999 ん 99-99";

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples"))
}

/// A server on a loopback port, with a key of every role.
struct Server {
    addr: SocketAddr,
    runtime: AgentRuntime,
    operator: String,
    viewer: String,
    approver: String,
    stop: Option<oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    dir: tempfile::TempDir,
}

/// Activations one at a time, so the first compiles the release's
/// components into the cache and the others load them from it.
static ACTIVATING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Server {
    async fn start() -> anyhow::Result<Self> {
        Self::start_with(examples(), DeliveryConfig::new()).await
    }

    /// A server with the release in `release` active, delivering with
    /// `delivery`.
    async fn start_with(release: &Path, delivery: DeliveryConfig) -> anyhow::Result<Self> {
        Self::start_serving(release, delivery, hane_server::ServeConfig::default()).await
    }

    /// A server as [`Server::start_with`] makes, with `config`'s timeouts
    /// and connection cap.
    async fn start_serving(
        release: &Path,
        delivery: DeliveryConfig,
        serving: hane_server::ServeConfig,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut sandbox = SandboxConfig::new();
        sandbox.cache_dir(Some(hane_test_support::component_cache()));
        let mut config = RuntimeConfig::new();
        config
            .sandbox(sandbox)
            .delivery(delivery)
            .components(Components::with_builtins(hane_builtins::all()));
        let runtime = AgentRuntime::open(&dir.path().join("hane.db"), &config)?;
        {
            let _one = ACTIVATING.lock().await;
            runtime
                .activate(release)
                .await
                .with_context(|| format!("activating {}", release.display()))?;
        }
        let registry = runtime.registry();
        let operator = hane_server::create_key(registry, "ops", KeyRole::Operator, None).await?;
        let viewer = hane_server::create_key(registry, "dashboard", KeyRole::Viewer, None).await?;
        let approver = hane_server::create_key(registry, "desk", KeyRole::Approver, None).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(hane_server::serve_with(
            listener,
            hane_coordinator::Services::new(runtime.clone()),
            serving,
            async {
                let _ = stopped.await;
            },
        ));
        Ok(Self {
            addr,
            runtime,
            operator,
            viewer,
            approver,
            stop: Some(stop),
            served: Some(served),
            dir,
        })
    }

    /// Stops the server and checks it stopped cleanly.
    async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.stop.take().expect("running").send(());
        self.served.take().expect("running").await??;
        Ok(())
    }

    async fn get(&self, path: &str, key: Option<&str>) -> anyhow::Result<Reply> {
        request(self.addr, "GET", path, key, None).await
    }

    async fn post(&self, path: &str, key: Option<&str>, body: &str) -> anyhow::Result<Reply> {
        request(self.addr, "POST", path, key, Some(body)).await
    }

    async fn delete(&self, path: &str, key: Option<&str>) -> anyhow::Result<Reply> {
        request(self.addr, "DELETE", path, key, None).await
    }

    /// Damages the stored body of run `id`, as a disk or another program
    /// could.
    fn damage_run(&self, id: &str) -> anyhow::Result<()> {
        let db = rusqlite::Connection::open(self.dir.path().join("hane.db"))?;
        let changed = db.execute("UPDATE runs SET body = x'48414e45ff' WHERE id = ?1", [id])?;
        anyhow::ensure!(changed == 1, "no run {id} in the store");
        Ok(())
    }

    /// Starts a run as the operator and waits for its end.
    async fn run(&self, agent: &str, input: Value) -> anyhow::Result<Value> {
        let body = json!({"agent": agent, "input": input, "wait": true}).to_string();
        let reply = self
            .post("/v1/agents/runs", Some(&self.operator), &body)
            .await?;
        assert_eq!(reply.status, 201, "{}", reply.body);
        Ok(reply.body)
    }
}

/// An answer: its status, headers (names lowercase) and body as JSON.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Asserts this is an error answer with `status` and `code`, and
    /// returns its message.
    fn error(&self, status: u16, code: &str) -> &str {
        assert_eq!(self.status, status, "{}", self.body);
        assert_eq!(self.body["error"]["code"], code, "{}", self.body);
        self.body["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no message in {}", self.body))
    }
}

/// Sends `method path` with a bearer `key` and a JSON `body`.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<&str>,
) -> anyhow::Result<Reply> {
    let headers: Vec<String> = key
        .map(|key| format!("Authorization: Bearer {key}"))
        .into_iter()
        .collect();
    send(addr, method, path, &headers, body).await
}

/// Sends a request with `headers` as given on a connection of its own
/// (`Connection: close`), and reads the whole answer.
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[String],
    body: Option<&str>,
) -> anyhow::Result<Reply> {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for header in headers {
        text.push_str(header);
        text.push_str("\r\n");
    }
    if let Some(body) = body {
        text.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    text.push_str("\r\n");
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(text.as_bytes()).await?;
    if let Some(body) = body {
        stream.write_all(body.as_bytes()).await?;
    }
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    let reply = parse(&answer)?;
    openapi::check_answer(method, path, &reply);
    Ok(reply)
}

fn parse(answer: &[u8]) -> anyhow::Result<Reply> {
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of the head")?;
    let head = std::str::from_utf8(&answer[..split])?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().context("no status line")?;
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .context("no status")?
        .parse()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = answer[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body)?;
    }
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).with_context(|| {
            format!(
                "the body of a {status} answer is not JSON: {}",
                String::from_utf8_lossy(&body)
            )
        })?
    };
    Ok(Reply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("no chunk size")?;
        let size = std::str::from_utf8(&data[..end])?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)?;
        data = &data[end + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// A document of `schema` in the served OpenAPI document is valid.
fn assert_matches(doc: &Value, schema: &str, value: &Value) {
    let wrapper = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/components/schemas/{schema}"),
        "components": doc["components"],
    });
    let validator = jsonschema::validator_for(&wrapper).expect("the document's schemas compile");
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not a valid {schema}: {errors:?}\n{value:#}"
    );
}

#[tokio::test]
async fn health_and_openapi_need_no_key() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let health = server.get("/healthz", None).await?;
    assert_eq!(health.status, 200);
    assert_eq!(health.body, json!({"status": "ok"}));

    let doc = server.get("/v1/openapi.json", None).await?;
    assert_eq!(doc.status, 200);
    assert_eq!(doc.header("content-type"), Some("application/json"));
    assert_eq!(doc.body["openapi"], "3.1.0");
    assert_eq!(
        doc.body["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let start = &doc.body["paths"]["/v1/agents/runs"]["post"];
    assert_eq!(start["operationId"], "startRun");
    assert!(
        start["description"]
            .as_str()
            .is_some_and(|d| d.contains("operator role"))
    );
    for schema in ["AgentRun", "ToolDefinition", "Task", "Error"] {
        assert!(
            doc.body["components"]["schemas"][schema].is_object(),
            "{schema}"
        );
    }
    server.stop().await
}

/// Every documented operation is served, and asks for a key exactly when
/// the document says it does.
#[tokio::test]
async fn every_documented_route_is_served() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let paths = doc["paths"].as_object().context("paths")?;
    let mut operations = 0;
    let mut mcp = Vec::new();
    for (path, item) in paths {
        if [hane_server::MCP_PATH, hane_server::MCP_RELEASE_PATH].contains(&path.as_str()) {
            // The MCP endpoints, with their own credentials, answer in
            // JSON-RPC's shape.
            for method in item.as_object().context("a path item")?.keys() {
                let method = method.to_ascii_uppercase();
                let body = (method == "POST").then_some("{}");
                let reply = request(server.addr, &method, path, None, body).await?;
                assert_eq!(reply.status, 401, "{method} {path}: {}", reply.body);
                assert_eq!(
                    reply.body["error"]["code"], -32001,
                    "{method} {path}: {}",
                    reply.body
                );
                mcp.push(format!("{method} {path}"));
            }
            continue;
        }
        let path = path
            .replace("{id}", "run_00000000000000000000000000")
            .replace("{tool}", "communication.send_email")
            .replace("{name}", "lease-inquiry")
            .replace("{step}", "desk");
        for (method, op) in item.as_object().context("a path item")? {
            operations += 1;
            let method = method.to_ascii_uppercase();
            let body = (method == "POST").then_some("{}");
            let reply = request(server.addr, &method, &path, None, body).await?;
            if op.get("security") == Some(&json!([])) {
                assert_eq!(reply.status, 200, "{method} {path}: {}", reply.body);
            } else if op["security"][0].get("runToken").is_some() {
                // The Model Gateway's routes want a run's token, and
                // answer in their provider's error shape.
                assert_eq!(reply.status, 401, "{method} {path}: {}", reply.body);
                assert!(
                    reply.body.to_string().contains("no run token"),
                    "{method} {path}: {}",
                    reply.body
                );
            } else {
                reply.error(401, "unauthorized");
                assert!(
                    reply.body["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("needs an API key")),
                    "{method} {path}: {}",
                    reply.body
                );
            }
        }
    }
    assert_eq!(operations, 40);
    mcp.sort();
    assert_eq!(
        mcp,
        [
            "DELETE /mcp",
            "DELETE /mcp/release",
            "POST /mcp",
            "POST /mcp/release"
        ]
    );
    let reply = server.get("/v1/agents/nothing", None).await?;
    assert!(reply.error(404, "not_found").contains("/v1/agents/nothing"));
    let reply = request(server.addr, "DELETE", "/v1/agents/runs", None, None).await?;
    reply.error(405, "method_not_allowed");
    server.stop().await
}

#[tokio::test]
async fn keys_are_checked() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let reply = server.get("/v1/agents/tools", None).await?;
    let message = reply.error(401, "unauthorized");
    assert!(message.contains("Authorization: Bearer"), "{message}");
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Bearer realm=\"hane\"")
    );

    let basic = ["Authorization: Basic dXNlcjpwYXNz".to_owned()];
    let reply = send(server.addr, "GET", "/v1/agents/tools", &basic, None).await?;
    assert!(
        reply
            .error(401, "unauthorized")
            .contains("must be `Bearer KEY`")
    );
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Bearer realm=\"hane\"")
    );

    let wrong = "hane_0000000000000000000000000000000000000000";
    let reply = server.get("/v1/agents/tools", Some(wrong)).await?;
    assert!(reply.error(401, "unauthorized").contains("not known"));
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Bearer realm=\"hane\"")
    );

    // A viewer and an approver read, but neither starts or cancels runs.
    for key in [&server.viewer, &server.approver] {
        let reply = server.get("/v1/agents/tools", Some(key)).await?;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let body = json!({"agent": "vehicle-check-scripted", "input": {"vehicle": FOUND}});
        let reply = server
            .post("/v1/agents/runs", Some(key), &body.to_string())
            .await?;
        let message = reply.error(403, "forbidden");
        assert!(message.contains("operator role"), "{message}");
        let cancel = "/v1/agents/runs/run_00000000000000000000000000/cancel";
        let reply = server.post(cancel, Some(key), "").await?;
        assert!(reply.error(403, "forbidden").contains("operator role"));
    }
    let listed = server.get("/v1/agents/runs", Some(&server.viewer)).await?;
    assert_eq!(
        listed.body,
        json!({"runs": [], "skipped": 0}),
        "a forbidden start started nothing"
    );
    server.stop().await
}

#[tokio::test]
async fn a_removed_key_stops_working() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let key = hane_server::create_key(
        server.runtime.registry(),
        "temporary",
        KeyRole::Viewer,
        None,
    )
    .await?;
    assert!(key.starts_with(hane_server::KEY_PREFIX));
    assert_eq!(key.len(), hane_server::KEY_PREFIX.len() + 40);
    let reply = server.get("/v1/agents/runs", Some(&key)).await?;
    assert_eq!(reply.status, 200, "{}", reply.body);

    assert!(
        server
            .runtime
            .registry()
            .api_keys()
            .remove("temporary")
            .await?
    );
    let reply = server.get("/v1/agents/runs", Some(&key)).await?;
    assert!(reply.error(401, "unauthorized").contains("not known"));
    // The other keys still work.
    let reply = server.get("/v1/agents/runs", Some(&server.viewer)).await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    server.stop().await
}

#[tokio::test]
async fn a_run_finds_the_vehicle() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let body =
        json!({"agent": "vehicle-check-scripted", "input": {"vehicle": FOUND}, "wait": true});
    let reply = server
        .post("/v1/agents/runs", Some(&server.operator), &body.to_string())
        .await?;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let run = &reply.body;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["agent"], "vehicle-check-scripted");
    assert_eq!(run["input"], json!({"vehicle": FOUND}));
    assert_eq!(run["result"]["status"], "found");
    assert_eq!(run["result"]["vehicle"], FOUND);
    assert_eq!(run["result"]["model"], "Toyota Hiace Van");
    assert_eq!(run["toolCalls"][0]["tool"], "data.find_record");
    assert_eq!(run["toolCalls"][0]["status"], "succeeded");
    assert_eq!(run["tasks"], json!([]));
    assert_matches(&doc, "AgentRun", run);
    let id = run["id"].as_str().context("an id")?;
    assert_eq!(
        reply.header("location"),
        Some(format!("/v1/agents/runs/{id}").as_str())
    );

    // Read back, the same run.
    let got = server
        .get(&format!("/v1/agents/runs/{id}"), Some(&server.viewer))
        .await?;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(&got.body, run);

    // It has ended: it cannot be cancelled.
    let cancel = server
        .post(
            &format!("/v1/agents/runs/{id}/cancel"),
            Some(&server.operator),
            "",
        )
        .await?;
    let message = cancel.error(409, "conflict");
    assert!(message.contains("already ended as succeeded"), "{message}");
    assert_matches(&doc, "Error", &cancel.body);

    let tasks = server
        .get(&format!("/v1/agents/runs/{id}/tasks"), Some(&server.viewer))
        .await?;
    assert_eq!(tasks.status, 200);
    assert_eq!(tasks.body, json!({"tasks": [], "skipped": 0}));
    server.stop().await
}

#[tokio::test]
async fn a_missing_vehicle_is_handed_over() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    // `wait` in the query this time.
    let body = json!({"agent": "vehicle-check-scripted", "input": {"vehicle": MISSING}});
    let reply = server
        .post(
            "/v1/agents/runs?wait=true",
            Some(&server.operator),
            &body.to_string(),
        )
        .await?;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let run = &reply.body;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(
        run["result"],
        json!({"status": "handed_over", "vehicle": MISSING})
    );
    assert_eq!(run["tasks"].as_array().map(Vec::len), Some(1), "{run}");

    let id = run["id"].as_str().context("an id")?;
    let tasks = server
        .get(&format!("/v1/agents/runs/{id}/tasks"), Some(&server.viewer))
        .await?;
    assert_eq!(tasks.status, 200, "{}", tasks.body);
    let list = tasks.body["tasks"].as_array().context("tasks")?;
    assert_eq!(list.len(), 1, "{}", tasks.body);
    assert_eq!(list[0]["assignment"], "fleet-desk");
    assert_eq!(list[0]["kind"], "handover");
    assert_eq!(list[0]["run"], id);
    assert_eq!(list[0]["id"], run["tasks"][0]);
    assert!(
        list[0]["title"]
            .as_str()
            .is_some_and(|t| t.contains(MISSING))
    );
    assert_matches(&doc, "TaskList", &tasks.body);
    server.stop().await
}

#[tokio::test]
async fn a_run_without_wait_answers_at_once() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let body =
        json!({"agent": "vehicle-check-scripted", "input": {"vehicle": FOUND}, "shadow": true});
    let reply = server
        .post("/v1/agents/runs", Some(&server.operator), &body.to_string())
        .await?;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["status"], "queued", "{}", reply.body);
    assert_eq!(reply.body["shadow"], true);
    assert_eq!(reply.body["result"], Value::Null);
    let id: hane_core::RunId = reply.body["id"].as_str().context("an id")?.parse()?;
    let ended = server.runtime.wait(&id).await?;
    assert_eq!(ended.status.as_str(), "succeeded");
    let got = server
        .get(&format!("/v1/agents/runs/{id}"), Some(&server.viewer))
        .await?;
    assert_eq!(got.body["status"], "succeeded", "{}", got.body);
    assert_eq!(got.body["result"]["status"], "found");
    server.stop().await
}

#[tokio::test]
async fn start_requests_are_checked() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let key = Some(server.operator.as_str());
    let start = async |body: String| server.post("/v1/agents/runs", key, &body).await;

    let reply = start(json!({"agent": "no-such-agent", "input": {}}).to_string()).await?;
    let message = reply.error(404, "not_found");
    assert!(message.contains("no-such-agent"), "{message}");
    assert!(
        message.contains("vehicle-check-scripted"),
        "lists the agents: {message}"
    );
    assert_eq!(reply.body["error"]["path"], "/agent");
    assert_matches(&doc, "Error", &reply.body);

    let reply = start(json!({"agent": "vehicle-check-scripted", "input": {}}).to_string()).await?;
    let message = reply.error(422, "invalid_input");
    assert!(message.contains("vehicle"), "{message}");
    assert!(
        reply.body["error"]["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("/input")),
        "{}",
        reply.body
    );

    let reply =
        start(json!({"agent": "vehicle-check-scripted", "input": {"vehicle": 7}}).to_string())
            .await?;
    reply.error(422, "invalid_input");
    assert_eq!(reply.body["error"]["path"], "/input/vehicle");

    let reply = start(
        json!({"agent": "vehicle-check-scripted", "input": {"vehicle": FOUND}, "priority": 1})
            .to_string(),
    )
    .await?;
    let message = reply.error(422, "invalid_input");
    assert!(message.contains("unknown field `priority`"), "{message}");
    assert_eq!(reply.body["error"]["path"], "/priority");

    let reply = start(json!({"input": {"vehicle": FOUND}}).to_string()).await?;
    assert!(
        reply
            .error(422, "invalid_input")
            .contains("`agent` is required")
    );
    assert_eq!(reply.body["error"]["path"], "/agent");

    let reply = start(r#"{"agent": "vehicle-check-scripted", "input": {"#.to_owned()).await?;
    let message = reply.error(400, "bad_request");
    assert!(message.contains("not valid JSON"), "{message}");
    assert_matches(&doc, "Error", &reply.body);

    let reply =
        start(json!({"agent": "vehicle-check", "input": {"vehicle": FOUND}}).to_string()).await?;
    let message = reply.error(422, "invalid_input");
    assert!(message.contains("driver `opencode`"), "{message}");
    assert!(message.contains("runs no coding CLIs"), "{message}");
    assert_eq!(reply.body["error"]["path"], "/agent");

    let reply = server.post("/v1/agents/runs?wait=maybe", key, "{}").await?;
    reply.error(400, "bad_request");

    // No body at all is not JSON.
    let headers = [format!("Authorization: Bearer {}", server.operator)];
    let reply = send(server.addr, "POST", "/v1/agents/runs", &headers, None).await?;
    reply.error(415, "unsupported_media_type");

    let big = format!(
        r#"{{"agent": "vehicle-check-scripted", "input": {{"vehicle": "{}"}}}}"#,
        "x".repeat(hane_server::MAX_BODY_BYTES)
    );
    let reply = start(big).await?;
    let message = reply.error(413, "payload_too_large");
    assert!(
        message.contains(&hane_server::MAX_BODY_BYTES.to_string()),
        "{message}"
    );

    let listed = server.get("/v1/agents/runs", key).await?;
    assert_eq!(
        listed.body,
        json!({"runs": [], "skipped": 0}),
        "no refused request started a run"
    );
    server.stop().await
}

#[tokio::test]
async fn runs_are_read_and_listed() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let key = Some(server.viewer.as_str());
    let found = server
        .run("vehicle-check-scripted", json!({"vehicle": FOUND}))
        .await?;
    let missing = server
        .run("vehicle-check-scripted", json!({"vehicle": MISSING}))
        .await?;

    let all = server.get("/v1/agents/runs", key).await?;
    assert_eq!(all.status, 200, "{}", all.body);
    assert_eq!(all.body["runs"], json!([missing, found]), "newest first");
    assert_matches(&doc, "RunList", &all.body);

    let by_agent = server
        .get(
            "/v1/agents/runs?agent=vehicle-check-scripted&status=succeeded",
            key,
        )
        .await?;
    assert_eq!(by_agent.body["runs"].as_array().map(Vec::len), Some(2));
    let other = server.get("/v1/agents/runs?agent=lease-qa", key).await?;
    assert_eq!(other.body, json!({"runs": [], "skipped": 0}));
    let failed = server.get("/v1/agents/runs?status=failed", key).await?;
    assert_eq!(failed.body, json!({"runs": [], "skipped": 0}));
    let limited = server
        .get("/v1/agents/runs?limit=1&agent=&status=", key)
        .await?;
    assert_eq!(limited.body, json!({"runs": [missing], "skipped": 0}));

    let reply = server.get("/v1/agents/runs?status=done", key).await?;
    let message = reply.error(400, "bad_request");
    assert!(message.contains("`done`"), "{message}");
    assert!(
        message.contains("queued, running, succeeded, failed, cancelled, limit_exceeded"),
        "{message}"
    );
    for limit in ["0", "1001", "many"] {
        let reply = server
            .get(&format!("/v1/agents/runs?limit={limit}"), key)
            .await?;
        assert!(reply.error(400, "bad_request").contains("from 1 to 1000"));
    }
    let reply = server.get("/v1/agents/runs?colour=red", key).await?;
    assert!(reply.error(400, "bad_request").contains("colour"));

    let reply = server.get("/v1/agents/runs/not-a-run", key).await?;
    let message = reply.error(400, "bad_request");
    assert!(message.contains("`not-a-run`"), "{message}");
    let unknown = "run_00000000000000000000000000";
    let reply = server
        .get(&format!("/v1/agents/runs/{unknown}"), key)
        .await?;
    assert!(reply.error(404, "not_found").contains(unknown));
    let reply = server
        .get(&format!("/v1/agents/runs/{unknown}/tasks"), key)
        .await?;
    reply.error(404, "not_found");
    let reply = server
        .post(
            &format!("/v1/agents/runs/{unknown}/cancel"),
            Some(&server.operator),
            "",
        )
        .await?;
    reply.error(404, "not_found");
    server.stop().await
}

#[tokio::test]
async fn a_run_that_does_not_read_is_left_out_of_listings_and_named_when_asked_for()
-> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let key = Some(server.viewer.as_str());
    let found = server
        .run("vehicle-check-scripted", json!({"vehicle": FOUND}))
        .await?;
    let damaged = server
        .run("vehicle-check-scripted", json!({"vehicle": MISSING}))
        .await?;
    let id = damaged["id"].as_str().context("a run id")?;
    server.damage_run(id)?;

    let newest = server.get("/v1/agents/runs?limit=1", key).await?;
    assert_eq!(newest.status, 200, "{}", newest.body);
    assert_eq!(newest.body, json!({"runs": [], "skipped": 1}));
    assert_matches(&doc, "RunList", &newest.body);
    let all = server.get("/v1/agents/runs", key).await?;
    assert_eq!(all.status, 200, "{}", all.body);
    assert_eq!(all.body, json!({"runs": [found], "skipped": 1}));
    assert_matches(&doc, "RunList", &all.body);

    let one = server.get(&format!("/v1/agents/runs/{id}"), key).await?;
    let message = one.error(500, "internal");
    assert!(message.contains(id), "{message}");
    assert!(message.contains("does not read"), "{message}");
    server.stop().await
}

#[tokio::test]
async fn tools_are_listed() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let reply = server
        .get("/v1/agents/tools", Some(&server.approver))
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_matches(&doc, "ToolList", &reply.body);
    let tools = reply.body["tools"].as_array().context("tools")?;
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {tools:?}"))
    };
    let find = tool("data.find_record");
    assert_eq!(find["impact"], "read");
    assert_eq!(find["inputSchema"]["type"], "object");
    assert!(
        find["inputSchema"]["properties"]["collection"].is_object(),
        "{find}"
    );
    assert!(find["operation"].is_string(), "{find}");
    let submit = tool("submit_result");
    assert_eq!(submit["impact"], "control");
    assert_eq!(submit["operation"], Value::Null);
    assert_eq!(submit["inputSchema"]["required"], json!(["status"]));
    server.stop().await
}

/// Agents that propose an email and a text message, and a daily budget
/// of three runs.
const OUTBOUND_RELEASE: &str = concat!(
    include_str!("../../../tests/fixtures/notify.yaml"),
    r#"---
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: notify-by-text
spec:
  purpose: Text a driver that their vehicle is ready
  input:
    type: object
    required: [phone, text]
    properties:
      phone: { type: string }
      text: { type: string }
  driver: scripted
  script:
    - id: send
      tool: communication.send_sms
      input: { to: "${input.phone}", text: "${input.text}" }
    - tool: submit_result
      input: { status: "${steps.send.state}" }
  tools: [communication.send_sms]
  approval: { assignment: desk }
  handover: { assignment: desk }
  limits: { maxToolCalls: 4, maxSeconds: 120 }
  output:
    type: object
    required: [status]
    properties:
      status: { type: string }
---
apiVersion: platform/v1alpha1
kind: Budget
metadata:
  name: test-budget
spec:
  project: default
  environment: default
  agentRunsPerDay: 3
  externalActionsPerDay: 10
  alertAtPercent: 80
"#
);

/// A release directory holding [`OUTBOUND_RELEASE`].
fn outbound_release() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("release.yaml"), OUTBOUND_RELEASE)?;
    Ok(dir)
}

const EMAIL: &str = "driver@example.com";

fn email_input() -> Value {
    json!({"email": EMAIL, "subject": "Your van is ready", "body": "Pick it up at gate 3."})
}

impl Server {
    /// Creates a key named `name` with `role` that decides for `groups`
    /// only; its secret.
    async fn group_key(
        &self,
        name: &str,
        role: KeyRole,
        groups: &[&str],
    ) -> Result<String, KeyError> {
        let groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        hane_server::create_key(self.runtime.registry(), name, role, Some(&groups)).await
    }

    /// Starts a run as the operator without waiting; its id.
    async fn start_run(&self, agent: &str, input: Value) -> anyhow::Result<String> {
        let body = json!({"agent": agent, "input": input}).to_string();
        let reply = self
            .post("/v1/agents/runs", Some(&self.operator), &body)
            .await?;
        assert_eq!(reply.status, 201, "{}", reply.body);
        assert_eq!(reply.body["status"], "queued", "{}", reply.body);
        Ok(reply.body["id"].as_str().context("a run id")?.to_owned())
    }

    /// The pending action of `run`, once it has proposed one.
    async fn pending_action(&self, run: &str) -> anyhow::Result<Value> {
        let path = format!("/v1/agents/action-requests?state=pending&run={run}");
        for _ in 0..600 {
            let reply = self.get(&path, Some(&self.viewer)).await?;
            assert_eq!(reply.status, 200, "{}", reply.body);
            if let Some(action) = reply.body["actionRequests"]
                .as_array()
                .and_then(|list| list.first())
            {
                return Ok(action.clone());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("run {run} proposed no action within 30 s")
    }

    /// The run `id` once it has ended.
    async fn ended(&self, id: &str) -> anyhow::Result<Value> {
        self.runtime.wait(&id.parse()?).await?;
        let reply = self
            .get(&format!("/v1/agents/runs/{id}"), Some(&self.viewer))
            .await?;
        assert_eq!(reply.status, 200, "{}", reply.body);
        Ok(reply.body)
    }
}

fn decision(digest: &str, reason: Option<&str>) -> String {
    json!({"digest": digest, "reason": reason}).to_string()
}

#[tokio::test]
async fn approving_what_this_host_cannot_send_is_refused_and_kept_pending() -> anyhow::Result<()> {
    let release = outbound_release()?;
    let server = Server::start_with(release.path(), DeliveryConfig::new()).await?;
    let approver = Some(server.approver.as_str());
    let run = server.start_run("notify", email_input()).await?;
    let action = server.pending_action(&run).await?;
    let id = action["id"].as_str().context("an id")?.to_owned();
    let digest = action["digest"].as_str().context("a digest")?.to_owned();
    let url = format!("/v1/agents/action-requests/{id}");
    let reply = server
        .post(
            &format!("{url}/approve"),
            approver,
            &decision(&digest, None),
        )
        .await?;
    let message = reply.error(409, "conflict");
    assert!(
        message.contains("HANE_SMTP_URL") && message.contains("still pending"),
        "{message}"
    );
    let still = server.get(&url, approver).await?;
    assert_eq!(still.body["state"], "pending", "{}", still.body);
    assert_eq!(still.body["trail"], json!([]));
    assert_eq!(still.body["attempts"], json!([]));
    // It can still be decided: rejected, and the run goes on.
    let reply = server
        .post(&format!("{url}/reject"), approver, &decision(&digest, None))
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let ended = server.ended(&run).await?;
    assert_eq!(ended["result"]["status"], "rejected", "{ended}");
    server.stop().await
}

#[tokio::test]
async fn people_approve_and_reject_outbound_actions() -> anyhow::Result<()> {
    let release = outbound_release()?;
    let (delivery, closed) = unreachable_smtp()?;
    let server = Server::start_with(release.path(), delivery).await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let viewer = Some(server.viewer.as_str());
    let approver = Some(server.approver.as_str());

    let run = server.start_run("notify", email_input()).await?;
    let action = server.pending_action(&run).await?;
    assert_matches(&doc, "ActionRequest", &action);
    assert_eq!(action["run"], run.as_str());
    assert_eq!(action["agent"], "notify");
    assert_eq!(action["tool"], "communication.send_email");
    assert_eq!(action["recipient"], EMAIL);
    assert_eq!(
        action["content"],
        json!({"subject": "Your van is ready", "body": "Pick it up at gate 3."})
    );
    assert_eq!(action["decider"], "person");
    assert_eq!(action["assignment"], "desk");
    assert_eq!(action["trail"], json!([]));
    assert_eq!(action["humanApproved"], false);
    assert_eq!(action["approvedBy"], Value::Null);
    let id = action["id"].as_str().context("an id")?.to_owned();
    let digest = action["digest"].as_str().context("a digest")?.to_owned();
    let url = format!("/v1/agents/action-requests/{id}");

    let got = server.get(&url, viewer).await?;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.body, action);

    // A viewer cannot decide.
    let reply = server
        .post(&format!("{url}/approve"), viewer, &decision(&digest, None))
        .await?;
    let message = reply.error(403, "forbidden");
    assert!(message.contains("approver or operator role"), "{message}");

    // Content other than the action's is not approved.
    let stale = format!("sha256:{}", "0".repeat(64));
    let reply = server
        .post(&format!("{url}/approve"), approver, &decision(&stale, None))
        .await?;
    let message = reply.error(409, "conflict");
    assert!(message.contains(&digest), "{message}");
    assert_eq!(reply.body["error"]["path"], "/digest");
    assert_matches(&doc, "Error", &reply.body);
    let reply = server
        .post(&format!("{url}/approve"), approver, "{}")
        .await?;
    assert!(
        reply
            .error(422, "invalid_input")
            .contains("`digest` is required")
    );
    assert_eq!(reply.body["error"]["path"], "/digest");
    let still = server.get(&url, viewer).await?;
    assert_eq!(still.body["state"], "pending", "{}", still.body);
    assert_eq!(still.body["trail"], json!([]));
    // A pending action is not reconciled, and is not said to have an
    // outcome.
    let body = json!({"state": "delivered", "note": "seen in the outbox"}).to_string();
    let reply = server
        .post(&format!("{url}/reconcile"), approver, &body)
        .await?;
    let message = reply.error(409, "conflict");
    assert!(message.contains("awaits a decision"), "{message}");
    assert!(!message.contains("recorded"), "{message}");

    // Approved, and delivered at once: the SMTP server is not there, so
    // it fails, saying where it tried.
    let reply = server
        .post(
            &format!("{url}/approve"),
            approver,
            &decision(&digest, Some("the driver asked for it")),
        )
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let approved = &reply.body;
    assert_matches(&doc, "ActionRequest", approved);
    assert_eq!(approved["state"], "failed", "{approved}");
    assert_eq!(approved["humanApproved"], true);
    assert_eq!(approved["approvedBy"], "person");
    assert_eq!(approved["trail"][0]["kind"], "person");
    assert_eq!(approved["trail"][0]["by"], "key:desk");
    assert_eq!(approved["trail"][0]["verdict"], "approve");
    assert_eq!(approved["trail"][0]["digest"], digest.as_str());
    assert_eq!(approved["trail"][0]["reason"], "the driver asked for it");
    assert_eq!(approved["attempts"].as_array().map(Vec::len), Some(1));
    // The attempt's owning process is the host's, not the reader's.
    let attempt = approved["attempts"][0].as_object().context("an attempt")?;
    assert_eq!(attempt.keys().collect::<Vec<_>>(), ["startedAtMs"]);
    let detail = approved["outcome"]["detail"].as_str().context("a detail")?;
    assert!(detail.contains(&closed.to_string()), "{detail}");

    // Decided once only.
    for verb in ["approve", "reject"] {
        let reply = server
            .post(&format!("{url}/{verb}"), approver, &decision(&digest, None))
            .await?;
        let message = reply.error(409, "conflict");
        assert!(message.contains("already failed"), "{message}");
    }
    // Only an `unknown` action is reconciled.
    let body = json!({"state": "delivered", "note": "seen in the outbox"}).to_string();
    let reply = server
        .post(&format!("{url}/reconcile"), approver, &body)
        .await?;
    assert!(reply.error(409, "conflict").contains("only an `unknown`"));
    let body = json!({"state": "sent", "note": "seen"}).to_string();
    let reply = server
        .post(&format!("{url}/reconcile"), approver, &body)
        .await?;
    reply.error(422, "invalid_input");
    assert_eq!(reply.body["error"]["path"], "/state");

    // The run went on with the outcome.
    let ended = server.ended(&run).await?;
    assert_matches(&doc, "AgentRun", &ended);
    assert_eq!(ended["status"], "succeeded", "{ended}");
    assert_eq!(
        ended["result"],
        json!({"status": "failed", "action": id.as_str()})
    );
    let tasks = server
        .get(&format!("/v1/agents/runs/{run}/tasks"), viewer)
        .await?;
    assert_matches(&doc, "TaskList", &tasks.body);
    assert_eq!(tasks.body["tasks"][0]["kind"], "approval", "{}", tasks.body);
    assert_eq!(tasks.body["tasks"][0]["assignment"], "desk");

    // A second run's action, rejected by an operator.
    let second = server.start_run("notify", email_input()).await?;
    let action = server.pending_action(&second).await?;
    let other = action["id"].as_str().context("an id")?.to_owned();
    let reply = server
        .post(
            &format!("/v1/agents/action-requests/{other}/reject"),
            Some(&server.operator),
            &decision(
                action["digest"].as_str().context("a digest")?,
                Some("sent already"),
            ),
        )
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_matches(&doc, "ActionRequest", &reply.body);
    assert_eq!(reply.body["state"], "rejected");
    assert_eq!(reply.body["humanApproved"], false);
    assert_eq!(reply.body["approvedBy"], Value::Null);
    assert_eq!(reply.body["attempts"], json!([]));
    assert_eq!(reply.body["trail"][0]["by"], "key:ops");
    let ended = server.ended(&second).await?;
    assert_eq!(ended["result"]["status"], "rejected", "{ended}");

    // Listing, by state and by run.
    let all = server.get("/v1/agents/action-requests", viewer).await?;
    assert_matches(&doc, "ActionRequestList", &all.body);
    let ids: Vec<&str> = all.body["actionRequests"]
        .as_array()
        .context("a list")?
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str(), other.as_str()], "oldest first");
    let rejected = server
        .get("/v1/agents/action-requests?state=rejected", viewer)
        .await?;
    assert_eq!(rejected.body["actionRequests"][0]["id"], other.as_str());
    assert_eq!(
        rejected.body["actionRequests"].as_array().map(Vec::len),
        Some(1)
    );
    let of_run = server
        .get(
            &format!("/v1/agents/action-requests?run={run}&state="),
            viewer,
        )
        .await?;
    assert_eq!(
        of_run.body["actionRequests"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(of_run.body["actionRequests"][0]["id"], id.as_str());
    let pending = server
        .get("/v1/agents/action-requests?state=pending", viewer)
        .await?;
    assert_eq!(pending.body, json!({"actionRequests": [], "skipped": 0}));

    let reply = server
        .get("/v1/agents/action-requests?state=sent", viewer)
        .await?;
    let message = reply.error(400, "bad_request");
    assert!(message.contains("`state`"), "{message}");
    assert!(
        message.contains(
            "pending, approved, rejected, executing, delivered, failed, unknown, shadowed"
        ),
        "{message}"
    );
    let reply = server
        .get("/v1/agents/action-requests?run=nope", viewer)
        .await?;
    assert!(reply.error(400, "bad_request").contains("`run`"));
    let reply = server
        .get("/v1/agents/action-requests?colour=red", viewer)
        .await?;
    assert!(reply.error(400, "bad_request").contains("colour"));

    // Actions that do not exist.
    let unknown = "act_00000000000000000000000000";
    let reply = server
        .get(&format!("/v1/agents/action-requests/{unknown}"), viewer)
        .await?;
    assert!(reply.error(404, "not_found").contains(unknown));
    let reply = server
        .post(
            &format!("/v1/agents/action-requests/{unknown}/approve"),
            approver,
            &decision(&digest, None),
        )
        .await?;
    reply.error(404, "not_found");
    let reply = server
        .get("/v1/agents/action-requests/not-an-action", viewer)
        .await?;
    assert!(reply.error(400, "bad_request").contains("`not-an-action`"));
    server.stop().await
}

#[tokio::test]
async fn a_key_with_groups_decides_only_the_actions_of_its_groups() -> anyhow::Result<()> {
    let release = outbound_release()?;
    let server = Server::start_with(release.path(), unreachable_smtp()?.0).await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let lease = server
        .group_key("lease", KeyRole::Approver, &["lease-desk", "billing"])
        .await?;
    let night = server
        .group_key("night-ops", KeyRole::Operator, &["lease-desk"])
        .await?;
    let desk = server
        .group_key("desk-only", KeyRole::Approver, &["desk"])
        .await?;
    let refused = server
        .group_key("v", KeyRole::Viewer, &["desk"])
        .await
        .unwrap_err();
    assert!(matches!(refused, KeyError::GroupsForViewer), "{refused}");
    let refused = server
        .group_key("w", KeyRole::Approver, &["desk", "two\nlines"])
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .starts_with(r#"invalid group "two\nlines""#),
        "{refused}"
    );

    let run = server.start_run("notify", email_input()).await?;
    let action = server.pending_action(&run).await?;
    assert_eq!(action["assignment"], "desk");
    let url = format!(
        "/v1/agents/action-requests/{}",
        action["id"].as_str().context("an id")?
    );
    let digest = action["digest"].as_str().context("a digest")?;
    for (key, verb) in [(&lease, "approve"), (&lease, "reject"), (&night, "approve")] {
        let reply = server
            .post(&format!("{url}/{verb}"), Some(key), &decision(digest, None))
            .await?;
        let message = reply.error(403, "forbidden");
        assert!(
            message.contains("only; action") && message.contains("is assigned to `desk`"),
            "{message}"
        );
        assert_matches(&doc, "Error", &reply.body);
    }
    let reply = server
        .post(
            &format!("{url}/approve"),
            Some(&lease),
            &decision(digest, None),
        )
        .await?;
    assert!(
        reply
            .error(403, "forbidden")
            .starts_with("key:lease decides the actions of `lease-desk`, `billing` only"),
        "{}",
        reply.body
    );
    let still = server.get(&url, Some(&server.viewer)).await?;
    assert_eq!(still.body["state"], "pending", "{}", still.body);
    assert_eq!(still.body["trail"], json!([]));

    let reply = server
        .post(
            &format!("{url}/approve"),
            Some(&desk),
            &decision(digest, Some("the driver asked")),
        )
        .await?;
    // Approved by the desk's key, then delivered: the SMTP server is not
    // there, so it fails.
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["state"], "failed", "{}", reply.body);
    assert_eq!(reply.body["humanApproved"], true);
    assert_eq!(reply.body["trail"][0]["by"], "key:desk-only");
    assert_eq!(reply.body["trail"][0]["verdict"], "approve");
    // Decided now: the other group's key is still told it is not theirs.
    let reply = server
        .post(
            &format!("{url}/reject"),
            Some(&lease),
            &decision(digest, None),
        )
        .await?;
    reply.error(403, "forbidden");
    let ended = server.ended(&run).await?;
    assert_eq!(ended["result"]["status"], "failed", "{ended}");
    server.stop().await
}

/// A provider that takes requests and never answers: the connections it
/// accepted, each with what it read.
async fn silent_provider()
-> anyhow::Result<(SocketAddr, tokio::sync::mpsc::UnboundedReceiver<String>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (seen, received) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buffer = vec![0u8; 8192];
            let n = stream.read(&mut buffer).await.unwrap_or(0);
            let _ = seen.send(String::from_utf8_lossy(&buffer[..n]).into_owned());
            held.push(stream);
        }
    });
    Ok((addr, received))
}

#[tokio::test]
async fn an_unknown_outcome_is_reconciled_not_resent() -> anyhow::Result<()> {
    let (provider, mut received) = silent_provider().await?;
    let mut delivery = DeliveryConfig::new();
    delivery
        .sms(HttpProvider::new(format!("http://{provider}/sms")))
        .timeout(Duration::from_millis(500));
    let release = outbound_release()?;
    let server = Server::start_with(release.path(), delivery).await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let approver = Some(server.approver.as_str());

    let input = json!({"phone": "+15550100", "text": "Your van is ready"});
    let run = server.start_run("notify-by-text", input).await?;
    let action = server.pending_action(&run).await?;
    let id = action["id"].as_str().context("an id")?.to_owned();
    let url = format!("/v1/agents/action-requests/{id}");
    let digest = action["digest"].as_str().context("a digest")?;
    let reply = server
        .post(&format!("{url}/approve"), approver, &decision(digest, None))
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["state"], "unknown", "{}", reply.body);
    let detail = reply.body["outcome"]["detail"]
        .as_str()
        .context("a detail")?;
    assert!(detail.contains("may have been acted on"), "{detail}");
    let request = received
        .recv()
        .await
        .context("the provider got the request")?;
    assert!(
        request.contains(&id),
        "the action id is its idempotency key: {request}"
    );
    let ended = server.ended(&run).await?;
    assert_eq!(ended["result"]["status"], "unknown", "{ended}");

    let body = json!({"state": "delivered", "note": "the driver confirmed by phone"}).to_string();
    let reply = server
        .post(&format!("{url}/reconcile"), Some(&server.viewer), &body)
        .await?;
    reply.error(403, "forbidden");
    // A key of other groups does not reconcile the desk's action.
    let lease = server
        .group_key("lease", KeyRole::Approver, &["lease-desk"])
        .await?;
    let reply = server
        .post(&format!("{url}/reconcile"), Some(&lease), &body)
        .await?;
    assert!(
        reply
            .error(403, "forbidden")
            .contains("is assigned to `desk`"),
        "{}",
        reply.body
    );
    let reply = server
        .post(
            &format!("{url}/reconcile"),
            approver,
            r#"{"state": "delivered"}"#,
        )
        .await?;
    reply.error(422, "invalid_input");
    assert_eq!(reply.body["error"]["path"], "/note");
    // A key of the desk's group does.
    let desk = server
        .group_key("desk-group", KeyRole::Approver, &["desk"])
        .await?;
    let reply = server
        .post(&format!("{url}/reconcile"), Some(&desk), &body)
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_matches(&doc, "ActionRequest", &reply.body);
    assert_eq!(reply.body["state"], "delivered");
    assert_eq!(reply.body["outcome"]["reconciledBy"], "key:desk-group");
    let detail = reply.body["outcome"]["detail"]
        .as_str()
        .context("a detail")?;
    assert!(detail.contains("the driver confirmed by phone"), "{detail}");
    let reply = server
        .post(&format!("{url}/reconcile"), approver, &body)
        .await?;
    reply.error(409, "conflict");
    // Sent once, never again.
    assert!(
        received.try_recv().is_err(),
        "the provider was called again"
    );
    server.stop().await
}

#[tokio::test]
async fn decider_overrides_are_added_listed_and_removed() -> anyhow::Result<()> {
    let release = outbound_release()?;
    let server = Server::start_with(release.path(), DeliveryConfig::new()).await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let path = "/v1/agents/decider-overrides";
    let operator = Some(server.operator.as_str());
    let listed = server.get(path, Some(&server.viewer)).await?;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.body, json!({"overrides": []}));

    let body = json!({"tool": "communication.send_email", "reason": "new template"}).to_string();
    for key in [&server.viewer, &server.approver] {
        let reply = server.post(path, Some(key), &body).await?;
        assert!(reply.error(403, "forbidden").contains("operator role"));
    }
    let reply = server
        .post(
            path,
            operator,
            r#"{"tool": "data.find_record", "reason": "x"}"#,
        )
        .await?;
    let message = reply.error(422, "invalid_input");
    assert!(message.contains("not an outbound tool"), "{message}");
    assert_eq!(reply.body["error"]["path"], "/tool");
    let reply = server
        .post(path, operator, r#"{"tool": "communication.send_email"}"#)
        .await?;
    reply.error(422, "invalid_input");
    assert_eq!(reply.body["error"]["path"], "/reason");

    let reply = server.post(path, operator, &body).await?;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_matches(&doc, "DeciderOverride", &reply.body);
    assert_eq!(reply.body["tool"], "communication.send_email");
    assert_eq!(reply.body["reason"], "new template");
    assert_eq!(reply.body["createdBy"], "key:ops");
    let listed = server.get(path, Some(&server.viewer)).await?;
    assert_matches(&doc, "DeciderOverrideList", &listed.body);
    assert_eq!(listed.body["overrides"], json!([reply.body]));

    // The next action of the tool is marked as sent to people by it.
    let run = server.start_run("notify", email_input()).await?;
    let action = server.pending_action(&run).await?;
    assert_eq!(action["overridden"], true, "{action}");
    let reply = server
        .post(
            &format!(
                "/v1/agents/action-requests/{}/reject",
                action["id"].as_str().context("an id")?
            ),
            operator,
            &decision(action["digest"].as_str().context("a digest")?, None),
        )
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    server.ended(&run).await?;

    let one = format!("{path}/communication.send_email");
    let reply = server.delete(&one, Some(&server.viewer)).await?;
    reply.error(403, "forbidden");
    let reply = server.delete(&one, operator).await?;
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(reply.body, Value::Null);
    let reply = server.delete(&one, operator).await?;
    assert!(
        reply
            .error(404, "not_found")
            .contains("communication.send_email")
    );
    let listed = server.get(path, Some(&server.viewer)).await?;
    assert_eq!(listed.body, json!({"overrides": []}));
    server.stop().await
}

/// Email delivery to a port nothing listens on, and the port: every
/// attempt fails before anything is sent.
fn unreachable_smtp() -> anyhow::Result<(DeliveryConfig, u16)> {
    let closed = hane_test_support::closed_port();
    let mut delivery = DeliveryConfig::new();
    delivery.smtp(SmtpConfig {
        port: closed,
        ..SmtpConfig::new("127.0.0.1", SmtpTls::None, "hane@fleet.example")
    });
    Ok((delivery, closed))
}

#[tokio::test]
async fn the_budget_counts_and_limits_runs_and_actions() -> anyhow::Result<()> {
    let release = outbound_release()?;
    let server = Server::start_with(release.path(), unreachable_smtp()?.0).await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let budget = server
        .get("/v1/agents/budget", Some(&server.viewer))
        .await?;
    assert_eq!(budget.status, 200, "{}", budget.body);
    assert_matches(&doc, "BudgetReport", &budget.body);
    assert_eq!(budget.body["budget"], "test-budget");
    assert_eq!(budget.body["project"], "default");
    assert_eq!(budget.body["environment"], "default");
    assert_eq!(budget.body["limits"]["agentRunsPerDay"], 3);
    assert_eq!(budget.body["usage"]["agentRuns"], 0);

    // One action approved and attempted; two shadow runs, whose actions
    // are only recorded.
    let run = server.start_run("notify", email_input()).await?;
    let action = server.pending_action(&run).await?;
    let reply = server
        .post(
            &format!(
                "/v1/agents/action-requests/{}/approve",
                action["id"].as_str().context("an id")?
            ),
            Some(&server.approver),
            &decision(action["digest"].as_str().context("a digest")?, None),
        )
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    server.ended(&run).await?;
    for _ in 0..2 {
        let body = json!({"agent": "notify", "input": email_input(), "shadow": true, "wait": true});
        let reply = server
            .post("/v1/agents/runs", Some(&server.operator), &body.to_string())
            .await?;
        assert_eq!(reply.status, 201, "{}", reply.body);
        assert_eq!(reply.body["result"]["status"], "shadowed", "{}", reply.body);
    }

    // The fourth run of the day is over the budget.
    let body = json!({"agent": "notify", "input": email_input()});
    let reply = server
        .post("/v1/agents/runs", Some(&server.operator), &body.to_string())
        .await?;
    let message = reply.error(429, "budget_exceeded");
    assert!(message.contains("agentRunsPerDay"), "{message}");
    assert!(message.contains("test-budget"), "{message}");
    assert_matches(&doc, "Error", &reply.body);

    let budget = server
        .get("/v1/agents/budget", Some(&server.viewer))
        .await?;
    assert_matches(&doc, "BudgetReport", &budget.body);
    assert_eq!(budget.body["usage"]["agentRuns"], 3, "{}", budget.body);
    assert_eq!(
        budget.body["usage"]["externalActions"], 1,
        "{}",
        budget.body
    );
    let alerts = budget.body["alerts"].as_array().context("alerts")?;
    assert!(
        alerts.iter().any(|a| a["limit"] == "agentRunsPerDay"),
        "{}",
        budget.body
    );
    server.stop().await
}

/// Sends `POST path` asking for `text/event-stream` and reads the events
/// to the end of the stream, each as its name and JSON data.
async fn post_events(
    addr: SocketAddr,
    path: &str,
    key: &str,
    body: &str,
) -> anyhow::Result<(u16, Vec<(String, Value)>)> {
    let text = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {key}\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(text.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of the head")?;
    let head = std::str::from_utf8(&answer[..split])?;
    let status: u16 = head.split(' ').nth(1).context("no status")?.parse()?;
    anyhow::ensure!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    let body = dechunk(&answer[split + 4..])?;
    let mut events = Vec::new();
    for block in std::str::from_utf8(&body)?
        .split("\n\n")
        .filter(|b| !b.is_empty())
    {
        let mut name = String::new();
        let mut data = String::new();
        for line in block.lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = n.to_owned();
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            }
        }
        events.push((name, serde_json::from_str(&data)?));
    }
    Ok((status, events))
}

#[tokio::test]
async fn a_conversation_is_started_followed_and_remembered_over_http() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let reply = server
        .post(
            "/v1/agents/conversations",
            Some(&server.operator),
            &json!({"agent": "vehicle-check-llm"}).to_string(),
        )
        .await?;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_matches(&doc, "Conversation", &reply.body);
    let id = reply.body["id"].as_str().context("an id")?.to_owned();
    let messages = format!("/v1/agents/conversations/{id}/messages");

    // The example agent takes a vehicle, not a message: the message is
    // refused at `/input`, and nothing is added.
    let reply = server
        .post(
            &messages,
            Some(&server.operator),
            &json!({"text": "Check it"}).to_string(),
        )
        .await?;
    assert!(
        reply
            .error(422, "invalid_input")
            .contains("vehicle-check-llm")
    );
    assert_eq!(reply.body["error"]["path"], "/input");
    let reply = server
        .post(
            &messages,
            Some(&server.viewer),
            &json!({"text": "x"}).to_string(),
        )
        .await?;
    reply.error(403, "forbidden");

    // With its input, the reply is followed as it happens.
    let body = json!({"text": format!("Check {FOUND}"), "input": {"vehicle": FOUND}});
    let (status, events) =
        post_events(server.addr, &messages, &server.operator, &body.to_string()).await?;
    assert_eq!(status, 200);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    let tools: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "tool_call")
        .map(|(_, d)| &d["tool"])
        .collect();
    assert_eq!(
        tools,
        [&json!("data.find_record"), &json!("submit_result")],
        "{events:?}"
    );
    let (_, end) = events.last().context("an end")?;
    assert_eq!(end["run"]["status"], "succeeded", "{end}");
    assert_eq!(end["run"]["result"]["model"], "Toyota Hiace Van");
    assert_matches(&doc, "AgentRun", &end["run"]);

    let reply = server
        .get(
            &format!("/v1/agents/conversations/{id}"),
            Some(&server.viewer),
        )
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_matches(&doc, "Conversation", &reply.body);
    assert_eq!(reply.body["entries"][0]["text"], format!("Check {FOUND}"));
    let memory = server
        .get(
            &format!("/v1/agents/conversations/{id}/memory"),
            Some(&server.viewer),
        )
        .await?
        .body;
    assert_matches(&doc, "Memory", &memory);
    assert_eq!(memory["runs"][0]["result"]["status"], "found", "{memory}");
    let schema = server
        .get("/v1/agents/conversations/memory-schema", None)
        .await?
        .body;
    assert_eq!(schema["properties"]["schemaVersion"]["const"], 2);
    let listed = server
        .get(
            "/v1/agents/conversations?agent=vehicle-check-llm",
            Some(&server.viewer),
        )
        .await?;
    assert_matches(&doc, "ConversationList", &listed.body);
    assert_eq!(listed.body["conversations"][0]["id"], id.as_str());

    // A memory saved back, and one of a newer version refused by name.
    let put = request(
        server.addr,
        "PUT",
        &format!("/v1/agents/conversations/{id}/memory"),
        Some(&server.operator),
        Some(&memory.to_string()),
    )
    .await?;
    assert_eq!(put.status, 200, "{}", put.body);
    assert_matches(&doc, "SavedMemory", &put.body);
    assert_eq!(put.body["memory"], memory);
    let newer = request(
        server.addr,
        "PUT",
        &format!("/v1/agents/conversations/{id}/memory"),
        Some(&server.operator),
        Some(&json!({"schemaVersion": 9, "agent": "vehicle-check-llm"}).to_string()),
    )
    .await?;
    assert!(
        newer
            .error(422, "invalid_input")
            .contains("schemaVersion 9 is newer")
    );
    assert_eq!(newer.body["error"]["path"], "/schemaVersion");
    let reply = server
        .post(
            "/v1/agents/conversations",
            Some(&server.operator),
            &json!({"agent": "vehicle-check-llm", "memory": {"schemaVersion": 2, "agent": "vehicle-check-llm", "messages": [], "runs": [], "actions": [], "tools": ["x"]}}).to_string(),
        )
        .await?;
    assert!(reply.error(422, "invalid_input").contains("tools"));
    assert_eq!(reply.body["error"]["path"], "/memory");
    // A saved memory alone is enough: it names its agent.
    let resumed = server
        .post(
            "/v1/agents/conversations",
            Some(&server.operator),
            &json!({"memory": memory}).to_string(),
        )
        .await?;
    assert_eq!(resumed.status, 201, "{}", resumed.body);
    assert_eq!(
        resumed.body["agent"], "vehicle-check-llm",
        "{}",
        resumed.body
    );
    assert_eq!(
        resumed.body["entries"][0]["kind"], "memory",
        "{}",
        resumed.body
    );
    let reply = server
        .post(
            "/v1/agents/conversations",
            Some(&server.operator),
            &json!({"memory": {"schemaVersion": 2}}).to_string(),
        )
        .await?;
    assert!(
        reply
            .error(422, "invalid_input")
            .contains("`agent` is required")
    );
    assert_eq!(reply.body["error"]["path"], "/agent");
    let reply = server
        .get(
            "/v1/agents/conversations/conv_00000000000000000000000000",
            Some(&server.viewer),
        )
        .await?;
    reply.error(404, "not_found");
    server.stop().await
}

#[tokio::test]
async fn reception_answers_requests_and_keeps_them_over_http() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    // Nothing in the example agents is about cakes: declined at once, with
    // what the agents do, and kept.
    let reply = server
        .post(
            "/v1/agents/requests",
            Some(&server.operator),
            &json!({"text": "Bake me a chocolate cake"}).to_string(),
        )
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_matches(&doc, "Reception", &reply.body);
    assert_eq!(reply.body["status"], "declined");
    assert_eq!(reply.body["shortlist"], json!([]));
    assert_eq!(reply.body["modelCall"], Value::Null);
    assert!(
        reply.body["missing"][0]
            .as_str()
            .is_some_and(|m| m.contains("lease-qa (Summarize a vehicle lease contract")),
        "{}",
        reply.body
    );
    let location = reply.header("location").context("a Location")?.to_owned();
    let id = reply.body["id"].as_str().context("an id")?;
    assert_eq!(location, format!("/v1/agents/requests/{id}"));
    let read = server.get(&location, Some(&server.viewer)).await?;
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.body, reply.body);
    let listed = server
        .get("/v1/agents/requests?limit=5", Some(&server.viewer))
        .await?;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_matches(&doc, "ReceptionList", &listed.body);
    assert_eq!(listed.body["requests"], json!([reply.body]));

    // Bad requests name the place, and nothing is kept of them.
    for (body, path) in [
        (json!({}), "/text"),
        (json!({"text": "  "}), "/text"),
        (json!({"text": 7}), "/text"),
        (json!({"text": "Text a driver", "dryRun": "yes"}), "/dryRun"),
        (json!({"text": "Text a driver", "agent": 7}), "/agent"),
        (
            json!({"text": "Text a driver", "agent": "nobody"}),
            "/agent",
        ),
        // A review agent decides actions; no request starts it.
        (
            json!({"text": "Review this", "agent": "sms-review"}),
            "/agent",
        ),
    ] {
        let reply = server
            .post(
                "/v1/agents/requests",
                Some(&server.operator),
                &body.to_string(),
            )
            .await?;
        reply.error(422, "invalid_input");
        assert_eq!(reply.body["error"]["path"], path, "{}", reply.body);
    }
    let reply = server
        .post(
            "/v1/agents/requests",
            Some(&server.operator),
            &json!({"text": "Text a driver", "to": "driver-text"}).to_string(),
        )
        .await?;
    assert!(reply.error(422, "invalid_input").contains("`to`"));
    let reply = server
        .post(
            "/v1/agents/requests",
            Some(&server.viewer),
            &json!({"text": "Text a driver"}).to_string(),
        )
        .await?;
    reply.error(403, "forbidden");
    let reply = server
        .get(
            "/v1/agents/requests/req_00000000000000000000000000",
            Some(&server.viewer),
        )
        .await?;
    reply.error(404, "not_found");
    let reply = server
        .get(
            "/v1/agents/requests/run_00000000000000000000000000",
            Some(&server.viewer),
        )
        .await?;
    reply.error(400, "bad_request");
    let listed = server
        .get("/v1/agents/requests", Some(&server.viewer))
        .await?;
    assert_eq!(listed.body["requests"].as_array().map(Vec::len), Some(1));
    server.stop().await
}

#[tokio::test]
async fn evaluations_run_read_and_compare_over_http() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let evaluate = || async {
        let reply = server
            .post(
                "/v1/agents/evals",
                Some(&server.operator),
                &json!({"suite": "lease-qa-eval"}).to_string(),
            )
            .await?;
        assert_eq!(reply.status, 201, "{}", reply.body);
        assert_matches(&doc, "Evaluation", &reply.body);
        anyhow::Ok(reply)
    };
    let first = evaluate().await?;
    assert_eq!(first.body["passed"], 2);
    assert_eq!(first.body["passesRate"], true);
    assert_eq!(first.body["release"], 1);
    let case = &first.body["cases"][1];
    assert_eq!(case["name"], "Contract in the ledger");
    assert_eq!(case["input"], json!({"contract_no": "C-1001"}));
    assert_eq!(case["result"]["lessee"], "Kita Logistics");
    assert_eq!(case["outcome"], "passed");
    assert_eq!(case["runStatus"], "succeeded");
    let location = first.header("location").context("a Location")?.to_owned();
    let read = server.get(&location, Some(&server.viewer)).await?;
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.body, first.body);

    // A release whose lease-qa answers the wrong lessee: the evaluation
    // fails that case, and the comparison names it as regressed.
    let broken = hane_test_support::examples_copy();
    hane_test_support::replace_in(
        &broken.path().join("agents/lease-qa.yaml"),
        "lessee: \"${steps.contract.records.0.lessee}\"",
        "lessee: \"${input.contract_no}\"",
    );
    server.runtime.activate(broken.path()).await?;
    let second = evaluate().await?;
    assert_eq!(second.body["passed"], 1);
    assert_eq!(second.body["passesRate"], false);
    assert_eq!(
        second.body["cases"][1]["differences"],
        json!([{"path": "/lessee", "expected": "Kita Logistics", "found": "C-1001"}])
    );
    let (a, b) = (&first.body["id"], &second.body["id"]);
    let compared = server
        .get(
            &format!(
                "/v1/agents/evals/compare?a={}&b={}",
                a.as_str().unwrap(),
                b.as_str().unwrap()
            ),
            Some(&server.viewer),
        )
        .await?;
    assert_eq!(compared.status, 200, "{}", compared.body);
    assert_matches(&doc, "EvaluationComparison", &compared.body);
    assert_eq!(
        (
            compared.body["aRelease"].clone(),
            compared.body["bRelease"].clone()
        ),
        (json!(1), json!(2))
    );
    let changes: Vec<(&str, &str)> = compared.body["cases"]
        .as_array()
        .context("cases")?
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["change"].as_str().unwrap()))
        .collect();
    assert_eq!(
        changes,
        [
            ("Contract not in the ledger", "unchanged"),
            ("Contract in the ledger", "regressed")
        ]
    );
    let listed = server
        .get("/v1/agents/evals?suite=lease-qa-eval", Some(&server.viewer))
        .await?;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_matches(&doc, "EvaluationList", &listed.body);
    assert_eq!(listed.body["evaluations"], json!([second.body, first.body]));
    let none = server
        .get("/v1/agents/evals?suite=other&limit=3", Some(&server.viewer))
        .await?;
    assert_eq!(none.body["evaluations"], json!([]));

    // Bad requests name the place; nothing is stored of them.
    for body in [json!({}), json!({"suite": 7}), json!({"suite": ""})] {
        let reply = server
            .post(
                "/v1/agents/evals",
                Some(&server.operator),
                &body.to_string(),
            )
            .await?;
        reply.error(422, "invalid_input");
        assert_eq!(reply.body["error"]["path"], "/suite", "{}", reply.body);
    }
    let reply = server
        .post(
            "/v1/agents/evals",
            Some(&server.operator),
            &json!({"suite": "nobody-eval"}).to_string(),
        )
        .await?;
    assert!(reply.error(404, "not_found").contains("lease-qa-eval"));
    assert_eq!(reply.body["error"]["path"], "/suite");
    let reply = server
        .post(
            "/v1/agents/evals",
            Some(&server.viewer),
            &json!({"suite": "lease-qa-eval"}).to_string(),
        )
        .await?;
    reply.error(403, "forbidden");
    let reply = server
        .get(
            "/v1/agents/evals/eval_00000000000000000000000000",
            Some(&server.viewer),
        )
        .await?;
    reply.error(404, "not_found");
    let reply = server
        .get(
            "/v1/agents/evals/run_00000000000000000000000000",
            Some(&server.viewer),
        )
        .await?;
    reply.error(400, "bad_request");
    let reply = server
        .get(
            &format!("/v1/agents/evals/compare?a={}", a.as_str().unwrap()),
            Some(&server.viewer),
        )
        .await?;
    assert!(reply.error(400, "bad_request").contains("`b`"));
    let listed = server.get("/v1/agents/evals", Some(&server.viewer)).await?;
    assert_eq!(listed.body["evaluations"].as_array().map(Vec::len), Some(2));
    server.stop().await
}

#[tokio::test]
async fn a_workflow_case_waits_for_a_person_and_goes_on_over_http() -> anyhow::Result<()> {
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let reply = server
        .post(
            "/v1/agents/workflows/lease-inquiry/cases",
            Some(&server.operator),
            &json!({"input": {"contract_no": "C-9999"}}).to_string(),
        )
        .await?;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_matches(&doc, "WorkflowCase", &reply.body);
    let location = reply.header("location").context("a Location")?.to_owned();
    let id = reply.body["id"].as_str().context("an id")?.to_owned();
    assert_eq!(
        location,
        format!("/v1/agents/workflows/lease-inquiry/cases/{id}")
    );
    let settled = |wanted: &'static str| {
        let location = location.clone();
        let server = &server;
        async move {
            for _ in 0..500 {
                let case = server.get(&location, Some(&server.viewer)).await?;
                assert_eq!(case.status, 200, "{}", case.body);
                if case.body["status"] == wanted {
                    return anyhow::Ok(case.body);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            anyhow::bail!("the case never became {wanted}")
        }
    };
    let waiting = settled("waiting").await?;
    assert_matches(&doc, "WorkflowCase", &waiting);
    assert_eq!(waiting["steps"][0]["output"]["status"], "handed_over");
    assert_eq!(waiting["steps"][1]["status"], "waiting");
    assert_eq!(waiting["steps"][1]["task"]["assignment"], "leasing-desk");
    assert_eq!(
        waiting["steps"][1]["task"]["details"],
        json!({"asked": "C-9999"})
    );

    // A key of another group may not do the leasing desk's task; the
    // desk's may, once.
    let other = server
        .group_key("fleet", KeyRole::Approver, &["fleet-desk"])
        .await?;
    let desk = server
        .group_key("leasing", KeyRole::Approver, &["leasing-desk"])
        .await?;
    let task = format!("{location}/tasks/desk");
    let found = json!({"result": {"contract_no": "C-1002"}}).to_string();
    let reply = server.post(&task, Some(&other), &found).await?;
    assert!(reply.error(403, "forbidden").contains("leasing-desk"));
    for (body, path) in [
        (json!({}), "/result"),
        (json!({"result": "C-1002"}), "/result"),
    ] {
        let reply = server.post(&task, Some(&desk), &body.to_string()).await?;
        reply.error(422, "invalid_input");
        assert_eq!(reply.body["error"]["path"], path, "{}", reply.body);
    }
    let reply = server.post(&task, Some(&desk), &found).await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_matches(&doc, "WorkflowCase", &reply.body);
    assert_eq!(reply.body["steps"][1]["task"]["completedBy"], "key:leasing");
    let done = settled("succeeded").await?;
    assert_eq!(done["steps"][2]["output"]["lessee"], "Minato Catering");
    let reply = server.post(&task, Some(&desk), &found).await?;
    assert!(reply.error(409, "conflict").contains("step `desk`"));

    // Bad requests name the place; other workflows' paths do not find it.
    let reply = server
        .post(
            "/v1/agents/workflows/lease-inquiry/cases",
            Some(&server.operator),
            &json!({"input": {"contract_no": "X"}}).to_string(),
        )
        .await?;
    reply.error(422, "invalid_input");
    assert_eq!(reply.body["error"]["path"], "/input/contract_no");
    let reply = server
        .post(
            "/v1/agents/workflows/nothing/cases",
            Some(&server.operator),
            "{}",
        )
        .await?;
    assert!(reply.error(404, "not_found").contains("lease-inquiry"));
    let reply = server
        .get(
            &format!("/v1/agents/workflows/other/cases/{id}"),
            Some(&server.viewer),
        )
        .await?;
    reply.error(404, "not_found");
    let reply = server
        .post(
            "/v1/agents/workflows/lease-inquiry/cases",
            Some(&server.viewer),
            "{}",
        )
        .await?;
    reply.error(403, "forbidden");
    server.stop().await
}

#[tokio::test]
async fn a_failed_model_call_is_a_bad_gateway_not_a_server_failure() -> anyhow::Result<()> {
    // The examples' provider answers from a recording: a request it did
    // not record fails, as a model server that is down would.
    let server = Server::start().await?;
    let doc = server.get("/v1/openapi.json", None).await?.body;
    let key = Some(server.operator.as_str());
    let body = json!({"text": "Is lease C-0001 still running?"}).to_string();
    let reply = server.post("/v1/agents/requests", key, &body).await?;
    let message = reply.error(502, "bad_gateway");
    assert!(message.contains("fleet-assistant"), "{message}");
    assert_matches(&doc, "Error", &reply.body);

    let created = server
        .post(
            "/v1/agents/conversations",
            key,
            &json!({"agent": "vehicle-check-llm"}).to_string(),
        )
        .await?;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().context("an id")?;
    let body = json!({"text": "Find 架空 300 あ 10-02"}).to_string();
    let reply = server
        .post(
            &format!("/v1/agents/conversations/{id}/messages"),
            key,
            &body,
        )
        .await?;
    let message = reply.error(502, "bad_gateway");
    assert!(message.contains("fleet-assistant"), "{message}");
    // Nothing was added: the next message is not refused as busy.
    let reply = server
        .post(
            &format!("/v1/agents/conversations/{id}/messages"),
            key,
            &body,
        )
        .await?;
    reply.error(502, "bad_gateway");
    for path in [
        "/v1/agents/requests",
        "/v1/agents/conversations/{id}/messages",
    ] {
        let responses = &doc["paths"][path]["post"]["responses"];
        assert!(responses.get("502").is_some(), "{path}: {responses}");
    }
    server.stop().await
}
