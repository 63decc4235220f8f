//! The MCP server: hane's tools for any MCP client, over Streamable HTTP
//! (the `rmcp` crate's transport, stateless: every POST stands alone).
//!
//! - `/mcp`, **run-scoped**: authenticated by a run's [`RunToken`]
//!   (`Authorization: Bearer TOKEN`). `tools/list` offers exactly the
//!   run's tools (its agent's `tools` and `submit_result`), named as the
//!   `llm` driver names them for a model ([`model_tool_name`]: `.` becomes
//!   `-`), with their input and output schemas; every `tools/call` is
//!   [`AgentRuntime::call_tool`] with the token — the Tool Gateway's
//!   checks, the run's journal, limits and approvals, as for any driver.
//!   A call the gateway refuses, or that fails, is a result with `isError`
//!   and the reason, never a protocol error, so the model learns why.
//! - `/mcp/release`, **release-scoped**: authenticated by an operator's API
//!   key; the active release's operations, each call run in the sandbox as
//!   `hane op run` runs it, its receipt in the result's `_meta`.
//!
//! An outbound tool (`communication.send_email`, …, or an outbound
//! operation) proposes an action that its decider approves — a person
//! may take hours, longer than any client waits for a tool call. Its call
//! runs in a task of its own, exactly as a driver's call; the MCP answer
//! waits at most [`McpConfig::approval_wait`] for it, and otherwise says
//! which action waits (`act_…`), in which state, for whom, with its
//! digest. The action stays in the execution ledger: decided and
//! delivered exactly once as any other, or withdrawn when the run ends.
//! The same tool called again with the same input reports that call's
//! state (or, once it ended, its result) instead of proposing again.
//!
//! A `tools/call` as the SDKs and CLIs send it (JSON, a protocol version
//! with the `initialize` handshake) is answered on `/mcp` without rmcp's
//! per-request service, with the answer that service gives
//! ([`plain_tool_call`]); everything else goes through rmcp.
//!
//! Robustness: a missing, forged or expired token (or key) is a 401 before
//! any JSON-RPC is read; a body that is not JSON, not one JSON-RPC message
//! or over [`MAX_MCP_MESSAGE_BYTES`] is a JSON-RPC error with a 4xx;
//! unknown methods are JSON-RPC errors; `GET` is 405 (there is no stream
//! to resume) and `DELETE` is 204 (there are no sessions to end); a
//! `notifications/cancelled` is accepted and ignored (the call it names
//! has its own task and ends as it would have).

mod release;
mod run;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use hane_coordinator::{AgentRuntime, RunToken, gateway::TokenError};
use hane_core::RunId;
use rmcp::RoleServer;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientJsonRpcMessage, ClientRequest, ErrorData,
    GetMeta, JsonObject, ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerResult,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

use crate::keys::{KeyRole, hash_key};

/// The path of the run-scoped MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// The path of the release-scoped MCP endpoint.
pub const MCP_RELEASE_PATH: &str = "/mcp/release";

/// The largest JSON-RPC message accepted, in bytes; a larger one is
/// answered `413` with a JSON-RPC error. A tool call's arguments are a
/// run's data, not its files.
pub const MAX_MCP_MESSAGE_BYTES: usize = 4 << 20;

/// How long an outbound tool's call is waited for before the answer says
/// its action is still waiting for a decision: well under the tens of
/// seconds after which coding CLIs give up on a tool call, and long
/// enough for a policy's approval and its delivery.
pub const DEFAULT_APPROVAL_WAIT: Duration = Duration::from_secs(10);

/// The MCP server's settings.
///
/// | setting | default |
/// |---|---|
/// | `approval_wait` | [`DEFAULT_APPROVAL_WAIT`] |
#[derive(Debug, Clone)]
pub struct McpConfig {
    approval_wait: Duration,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            approval_wait: DEFAULT_APPROVAL_WAIT,
        }
    }
}

impl McpConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a call of an outbound tool (or outbound operation) is
    /// waited for before it is answered with its actions' state; the call
    /// goes on, and the same call made again reports on it.
    pub fn approval_wait(&mut self, wait: Duration) -> &mut Self {
        self.approval_wait = wait;
        self
    }
}

/// The MCP endpoints over `runtime` with the default [`McpConfig`]: `/mcp`
/// (a run's tools, for its token) and `/mcp/release` (the active release's
/// operations, for an operator's API key). Merge it into the API's router;
/// it has no fallback of its own.
pub fn mcp_router<S>(runtime: AgentRuntime) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    mcp_router_with(runtime, &McpConfig::new())
}

/// As [`mcp_router`], with `config`.
pub fn mcp_router_with<S>(runtime: AgentRuntime, config: &McpConfig) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let runs = run::RunTools::new(runtime.clone(), config);
    let releases = release::ReleaseTools::new(runtime.clone());
    let state = Endpoints {
        runtime,
        tools: runs.clone(),
        runs: service(runs),
        releases: service(releases),
    };
    Router::new()
        .route(MCP_PATH, any(run_endpoint))
        .route(MCP_RELEASE_PATH, any(release_endpoint))
        .with_state(state)
}

/// rmcp's Streamable HTTP transport, stateless, answering with JSON
/// unless the handler sends something before its answer.
fn service<H: ServerHandler + Clone>(handler: H) -> McpService<H> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(MAX_MCP_MESSAGE_BYTES)
        // Every request carries a token or key, checked before this:
        // hane may listen on any address it is told to.
        .disable_allowed_hosts();
    StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

type McpService<H> = StreamableHttpService<H, NeverSessionManager>;

#[derive(Clone)]
struct Endpoints {
    runtime: AgentRuntime,
    /// The run-scoped handler, for the calls answered without rmcp's
    /// per-request service ([`plain_tool_call`]).
    tools: run::RunTools,
    runs: McpService<run::RunTools>,
    releases: McpService<release::ReleaseTools>,
}

/// Who a run-scoped request is from: put in the request's extensions once
/// its token is checked.
#[derive(Debug, Clone)]
struct RunCaller {
    token: RunToken,
    run: RunId,
}

/// Who a release-scoped request is from: the API key's name.
#[derive(Debug, Clone)]
struct KeyCaller {
    key: String,
}

async fn run_endpoint(State(endpoints): State<Endpoints>, request: Request) -> Response {
    let caller = match run_caller(&endpoints.runtime, request.headers()) {
        Ok(caller) => caller,
        Err(refusal) => return refusal.into_response(),
    };
    let (parts, bytes, message) = match read(request).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    if let Some((id, params)) = plain_tool_call(&parts.headers, message) {
        return call_directly(endpoints.tools, caller, id, params).await;
    }
    hand_over(&endpoints.runs, parts, bytes, caller).await
}

async fn release_endpoint(State(endpoints): State<Endpoints>, request: Request) -> Response {
    let caller = match key_caller(&endpoints.runtime, request.headers()).await {
        Ok(caller) => caller,
        Err(refusal) => return refusal.into_response(),
    };
    let (parts, bytes, _) = match read(request).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    hand_over(&endpoints.releases, parts, bytes, caller).await
}

/// One authenticated request to an MCP endpoint: a `POST` of one JSON-RPC
/// message, read and checked (its parts, its body and the message); `GET`
/// and `DELETE` are answered here.
async fn read(
    request: Request,
) -> Result<(axum::http::request::Parts, Bytes, ClientJsonRpcMessage), Response> {
    match *request.method() {
        Method::POST => {}
        // There are no sessions: nothing to end.
        Method::DELETE => return Err(StatusCode::NO_CONTENT.into_response()),
        // There is no stream of server messages to open.
        _ => {
            let mut refusal = Refusal::jsonrpc(
                StatusCode::METHOD_NOT_ALLOWED,
                Value::Null,
                ErrorData::invalid_request(
                    "this MCP endpoint takes POST (one JSON-RPC message) and DELETE",
                    None,
                ),
            )
            .into_response();
            refusal
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
            return Err(refusal);
        }
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_MCP_MESSAGE_BYTES)
        .await
        .map_err(|_| {
            Refusal::jsonrpc(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                ErrorData::invalid_request(
                    format!(
                        "the message is over {MAX_MCP_MESSAGE_BYTES} bytes, or its body was cut off"
                    ),
                    None,
                ),
            )
            .into_response()
        })?;
    let message = check_message(&bytes).map_err(IntoResponse::into_response)?;
    Ok((parts, bytes, message))
}

/// A request handed to rmcp's transport with `caller` in its extensions.
async fn hand_over<H, C>(
    service: &McpService<H>,
    mut parts: axum::http::request::Parts,
    bytes: Bytes,
    caller: C,
) -> Response
where
    H: ServerHandler + Clone,
    C: Clone + Send + Sync + 'static,
{
    parts.extensions.insert(caller);
    let request = Request::from_parts(parts, Body::from(bytes));
    let response = service.handle(request).await.map(Body::new);
    in_jsonrpc(response).await
}

/// `response` with a refusal rmcp wrote as plain text (a `Host` header
/// it cannot read, media types it does not take) turned into a JSON-RPC
/// error carrying the same words; any other answer as it is.
async fn in_jsonrpc(response: Response) -> Response {
    let status = response.status();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let message = String::from_utf8_lossy(&text).into_owned();
    let mut answer = Refusal::jsonrpc(
        status,
        Value::Null,
        ErrorData::invalid_request(message, None),
    )
    .into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().insert(name, value.clone());
        }
    }
    answer
}

/// A `tools/call` that rmcp's stateless transport would hand to the
/// handler as it is, and answer with the handler's result as JSON: the
/// client accepts JSON and event streams (no media-type parameters),
/// sends JSON, and speaks a protocol version that has the `initialize`
/// handshake (or names none), with no version of its own in `_meta`.
/// rmcp's service for one request costs two tasks and a channel (its
/// serve loop, the handler's task, the answer sent back); such a call is
/// answered by [`call_directly`] with the same answer. Anything else
/// (another method, a newer version with its standard headers, a header
/// rmcp refuses) goes to rmcp, which checks and answers it.
fn plain_tool_call(
    headers: &HeaderMap,
    message: ClientJsonRpcMessage,
) -> Option<(RequestId, CallToolRequestParams)> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    if request.request.get_meta().protocol_version().is_some() {
        return None;
    }
    let ClientRequest::CallToolRequest(call) = request.request else {
        return None;
    };
    let version = match headers.get_all(HEADER_MCP_PROTOCOL_VERSION).iter().count() {
        0 => None,
        1 => Some(headers.get(HEADER_MCP_PROTOCOL_VERSION)?.to_str().ok()?),
        _ => return None,
    };
    if let Some(version) = version {
        let known = ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .any(|v| v.as_str() == version);
        if !known
            || version >= ProtocolVersion::NO_INITIALIZE.as_str()
            || version >= ProtocolVersion::STANDARD_HEADERS.as_str()
        {
            return None;
        }
    }
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        for media in value.to_str().ok()?.split(',') {
            let media = media.trim();
            if media.contains(';') {
                return None;
            }
            json |= media.eq_ignore_ascii_case("application/json");
            sse |= media.eq_ignore_ascii_case("text/event-stream");
        }
    }
    let content_type = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    (json && sse && essence.eq_ignore_ascii_case("application/json"))
        .then_some((request.id, call.params))
}

/// The answer to a [`plain_tool_call`], as rmcp gives it: the handler's
/// result in the shape of the peer's protocol version, as a JSON-RPC
/// response. The call runs in a task of its own (see
/// [`run::RunTools::call`]), so a client that goes away does not cut it
/// off.
async fn call_directly(
    tools: run::RunTools,
    caller: RunCaller,
    id: RequestId,
    params: CallToolRequestParams,
) -> Response {
    let input = Value::Object(params.arguments.unwrap_or_default());
    let result = tools.call(caller, &params.name, input).await;
    let mut result = ServerResult::from(CallToolResponse::from(result));
    // The shape of a protocol version with the handshake, as rmcp's
    // handler gives it to such a peer.
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    let message = ServerJsonRpcMessage::response(result, id);
    match serde_json::to_vec(&message) {
        Ok(body) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!("serializing an MCP answer: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// Reads `bytes` as one JSON-RPC message rmcp can read, so what is not
/// gets a JSON-RPC error naming why (rmcp answers a plain-text `415`).
fn check_message(bytes: &Bytes) -> Result<ClientJsonRpcMessage, Refusal> {
    // A message that gives a key twice means whatever its reader takes
    // it to mean: refused before anything reads it.
    if let Err(e @ crate::json::BodyError::DuplicateKey { .. }) = crate::json::unique_value(bytes) {
        return Err(Refusal::jsonrpc(
            StatusCode::BAD_REQUEST,
            Value::Null,
            ErrorData::invalid_request(e.to_string(), None),
        ));
    }
    // What real clients send reads at once; the rest is read again to say
    // what is wrong with it.
    let unreadable = match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(message) => return Ok(message),
        Err(unreadable) => unreadable,
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        Refusal::jsonrpc(
            StatusCode::BAD_REQUEST,
            Value::Null,
            ErrorData::new(
                rmcp::model::ErrorCode::PARSE_ERROR,
                format!("the body is not JSON: {e}"),
                None,
            ),
        )
    })?;
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let invalid = |message: String| {
        Refusal::jsonrpc(
            StatusCode::BAD_REQUEST,
            id.clone(),
            ErrorData::invalid_request(message, None),
        )
    };
    if value.is_array() {
        return Err(invalid(
            "batches are not accepted: send one JSON-RPC message per request".to_owned(),
        ));
    }
    if value.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(
            "not a JSON-RPC 2.0 message: it needs `\"jsonrpc\": \"2.0\"`".to_owned(),
        ));
    }
    let method = value.get("method").and_then(Value::as_str).unwrap_or("?");
    Err(Refusal::jsonrpc(
        StatusCode::BAD_REQUEST,
        id.clone(),
        ErrorData::invalid_params(format!("`{method}` cannot be read: {unreadable}"), None),
    ))
}

/// A request answered before rmcp sees it: a status and a JSON-RPC error.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    body: Value,
}

impl Refusal {
    fn jsonrpc(status: StatusCode, id: Value, error: ErrorData) -> Self {
        Self {
            status,
            body: json!({"jsonrpc": "2.0", "id": id, "error": error}),
        }
    }

    fn unauthorized(message: impl Into<String>) -> Self {
        Self::jsonrpc(
            StatusCode::UNAUTHORIZED,
            Value::Null,
            ErrorData::new(UNAUTHORIZED, message.into(), None),
        )
    }
}

/// The JSON-RPC code of an answer with no valid credential (in the range
/// JSON-RPC leaves to servers).
const UNAUTHORIZED: rmcp::model::ErrorCode = rmcp::model::ErrorCode(-32001);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        tracing::info!(
            status = self.status.as_u16(),
            "MCP request refused: {}",
            self.body
        );
        let mut response = (self.status, axum::Json(self.body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer error=\"invalid_token\""),
            );
        }
        response
    }
}

/// The one credential of `Authorization: Bearer CREDENTIAL`.
fn bearer<'h>(headers: &'h HeaderMap, what: &str) -> Result<&'h str, Refusal> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(Refusal::unauthorized(format!(
            "send {what} as `Authorization: Bearer …`, in one header"
        )));
    };
    let malformed = || {
        Refusal::unauthorized(format!(
            "the Authorization header must be `Bearer …` with {what}"
        ))
    };
    let (scheme, credential) = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .ok_or_else(malformed)?;
    let credential = credential.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || credential.is_empty() || credential.contains(' ') {
        return Err(malformed());
    }
    Ok(credential)
}

/// The run a request's token is for, when its signature holds and it has
/// not expired. Whether the run may still call anything is the gateway's
/// to say, call by call.
fn run_caller(runtime: &AgentRuntime, headers: &HeaderMap) -> Result<RunCaller, Refusal> {
    let token = RunToken::from_text(bearer(headers, "the run's token")?);
    let run = runtime.gateway().key().verify(&token).map_err(|e| {
        Refusal::unauthorized(match e {
            TokenError::Expired => "the run token expired: its run is over".to_owned(),
            e => format!("the run token was refused: {e}"),
        })
    })?;
    Ok(RunCaller { token, run })
}

/// The key of a release-scoped request: known to the registry, with the
/// operator role (calling an operation runs it).
async fn key_caller(runtime: &AgentRuntime, headers: &HeaderMap) -> Result<KeyCaller, Refusal> {
    let secret = bearer(headers, "an API key")?;
    let key = runtime
        .registry()
        .api_keys()
        .by_hash(&hash_key(secret))
        .await
        .map_err(|e| {
            tracing::error!("checking an API key: {e}");
            Refusal::jsonrpc(
                StatusCode::SERVICE_UNAVAILABLE,
                Value::Null,
                ErrorData::internal_error("the API key could not be checked", None),
            )
        })?
        .ok_or_else(|| {
            Refusal::unauthorized("the API key is not known: it may have been removed")
        })?;
    if key.role.parse::<KeyRole>() != Ok(KeyRole::Operator) {
        return Err(Refusal::jsonrpc(
            StatusCode::FORBIDDEN,
            Value::Null,
            ErrorData::new(
                UNAUTHORIZED,
                format!(
                    "{MCP_RELEASE_PATH} runs operations, which needs an API key with the operator role; key `{}` has the {} role",
                    key.name, key.role
                ),
                None,
            ),
        ));
    }
    Ok(KeyCaller { key: key.name })
}

/// What the endpoint put in the request's extensions.
fn caller<C: Clone + Send + Sync + 'static>(
    context: &RequestContext<RoleServer>,
) -> Result<C, ErrorData> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<C>())
        .cloned()
        .ok_or_else(|| {
            ErrorData::internal_error("the request reached no authenticated endpoint", None)
        })
}

/// `schema` as the object an MCP tool's schema must be; a schema that is
/// not an object (`true`) accepts anything, as `{}` does.
fn schema_object(schema: &Value) -> JsonObject {
    match schema {
        Value::Object(map) => map.clone(),
        _ => JsonObject::new(),
    }
}

/// An output schema MCP can advertise: one whose values are objects, as
/// structured content must be.
fn object_schema(schema: &Value) -> Option<JsonObject> {
    let map = schema.as_object()?;
    (map.get("type").and_then(Value::as_str) == Some("object")).then(|| map.clone())
}

/// What a tool of `impact` does, as hints for the client.
fn annotations(impact: &str) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(impact == "read")
        .destructive(impact == "write")
        .open_world(impact == "outbound")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_checked_before_rmcp() {
        let refused = |body: &str| check_message(&Bytes::from(body.to_owned())).unwrap_err();
        let parse = refused("{not json");
        assert_eq!(parse.status, StatusCode::BAD_REQUEST);
        assert_eq!(parse.body["error"]["code"], -32700);
        assert_eq!(parse.body["id"], Value::Null);
        let batch = refused(r#"[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]"#);
        assert_eq!(batch.body["error"]["code"], -32600);
        let version = refused(r#"{"jsonrpc": "1.0", "id": 7, "method": "ping"}"#);
        assert_eq!(version.body["id"], 7);
        assert_eq!(version.body["error"]["code"], -32600);
        for ok in [
            r#"{"jsonrpc": "2.0", "id": 1, "method": "ping"}"#,
            r#"{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}"#,
            r#"{"jsonrpc": "2.0", "id": "a", "method": "tools/list"}"#,
        ] {
            assert!(check_message(&Bytes::from(ok)).is_ok(), "{ok}");
        }
    }

    #[test]
    fn only_plain_tool_calls_skip_rmcps_service() {
        let message = |body: Value| check_message(&Bytes::from(body.to_string())).unwrap();
        let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "data-find_record", "arguments": {"id": "V-001"}}});
        let headers = |values: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (name, value) in values {
                h.append(*name, HeaderValue::from_static(value));
            }
            h
        };
        let sdk = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        let (id, params) = plain_tool_call(&headers(&sdk), message(call.clone())).unwrap();
        assert_eq!(id, RequestId::Number(4));
        assert_eq!(params.name, "data-find_record");
        assert_eq!(params.arguments.unwrap()["id"], "V-001");
        let versioned = [sdk[0], sdk[1], ("mcp-protocol-version", "2025-06-18")];
        assert!(plain_tool_call(&headers(&versioned), message(call.clone())).is_some());
        // Each of these is rmcp's to check and answer.
        for (what, values) in [
            (
                "a newer version",
                vec![sdk[0], sdk[1], ("mcp-protocol-version", "2026-07-28")],
            ),
            (
                "an unknown version",
                vec![sdk[0], sdk[1], ("mcp-protocol-version", "2099-01-01")],
            ),
            (
                "two versions",
                vec![
                    sdk[0],
                    sdk[1],
                    ("mcp-protocol-version", "2025-06-18"),
                    ("mcp-protocol-version", "2025-11-25"),
                ],
            ),
            (
                "no event streams",
                vec![sdk[0], ("accept", "application/json")],
            ),
            (
                "a quality",
                vec![
                    sdk[0],
                    ("accept", "application/json;q=0, text/event-stream"),
                ],
            ),
            ("no content type", vec![sdk[1]]),
            ("text", vec![("content-type", "text/plain"), sdk[1]]),
        ] {
            assert!(
                plain_tool_call(&headers(&values), message(call.clone())).is_none(),
                "{what}"
            );
        }
        let mut meta = call.clone();
        meta["params"]["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        assert!(plain_tool_call(&headers(&sdk), message(meta)).is_none());
        let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});
        assert!(plain_tool_call(&headers(&sdk), message(list)).is_none());
    }

    #[test]
    fn bearer_credentials() {
        let headers = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            }
            h
        };
        assert_eq!(
            bearer(&headers(&["Bearer hrt1.x"]), "t").ok(),
            Some("hrt1.x")
        );
        assert_eq!(bearer(&headers(&["bearer  k "]), "t").ok(), Some("k"));
        for bad in [
            &[][..],
            &["Basic x"],
            &["Bearer"],
            &["Bearer a b"],
            &["Bearer a", "Bearer a"],
        ] {
            let refusal = bearer(&headers(bad), "t").unwrap_err();
            assert_eq!(refusal.status, StatusCode::UNAUTHORIZED, "{bad:?}");
        }
    }

    #[test]
    fn only_object_output_schemas_are_advertised() {
        assert!(object_schema(&json!({"type": "object"})).is_some());
        assert!(object_schema(&json!({"type": "array"})).is_none());
        assert!(object_schema(&json!(true)).is_none());
        assert!(schema_object(&json!(true)).is_empty());
    }
}
