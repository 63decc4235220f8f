//! The routes: every feature's list ([`all`]) that both the router and
//! the OpenAPI document are built from, the run and tool routes and their
//! handlers, and the bearer-key check. The other features' routes and
//! handlers are in their modules (`actions`, `conversations`, …).

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use hane_coordinator::{
    AgentRuntime, Approvals, Budgets, Conversations, Evaluations, ReceptionDesk, Services,
    StartRun, Workflows,
};
use hane_core::Person;
use hane_core::RunId;
use hane_core::{AgentRun, RunStatus, Task, ToolDefinition};
use hane_store::{RunQuery, registry::MAX_RUNS_LISTED};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::actions;
use crate::conversations;
use crate::error::{ApiError, Checked, ErrorCode};
use crate::evals;
use crate::keys::{KeyRole, hash_key};
use crate::model;
use crate::reception;
use crate::route::{Access, Route, Shape, of};
use crate::workflows;

/// The largest request body accepted, in bytes; a larger one is answered
/// `413`. A run's input is a few fields, so 1 MiB is far more than enough.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Runs listed when a request gives no `limit`.
pub const DEFAULT_LIST_LIMIT: u32 = 100;

/// Every route the API serves, feature by feature, in the order the
/// router takes them: the router and the OpenAPI document are both built
/// from this list.
pub(crate) fn all() -> Vec<Route> {
    let mut routes = runs();
    routes.extend(actions::routes());
    routes.extend(conversations::routes());
    routes.extend(reception::routes());
    routes.extend(evals::routes());
    routes.extend(workflows::routes());
    routes.extend(model::routes());
    routes
}

/// Every method and path [`router`] serves besides the MCP endpoints, in
/// the order it takes them; [`crate::openapi`] documents each.
pub fn served_routes() -> Vec<(Method, &'static str)> {
    all()
        .into_iter()
        .map(|route| (route.method, route.path))
        .collect()
}

/// The reference to a parameter of `components/parameters`.
pub(crate) fn parameter(name: &str) -> Value {
    json!({ "$ref": format!("#/components/parameters/{name}") })
}

/// The server's own routes, runs and tools.
fn runs() -> Vec<Route> {
    vec![
        Route::get(
            "/healthz",
            Access::Public,
            health,
            ("health", "Whether the server is up"),
        )
        .answer(200, "The server is up", of::<Health>()),
        Route::get(
            "/v1/openapi.json",
            Access::Public,
            openapi,
            ("openapi", "This document"),
        )
        .answer(
            200,
            "This document",
            Shape::Inline(json!({ "type": "object" })),
        ),
        start_route(),
        list_route(),
        Route::get(
            "/v1/agents/runs/{id}",
            Access::Read,
            get_run,
            ("getRun", "Get a run"),
        )
        .param(parameter("RunId"))
        .answer(200, "The run", of::<AgentRun>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")]),
        Route::post(
            "/v1/agents/runs/{id}/cancel",
            Access::Operate,
            cancel_run,
            ("cancelRun", "Cancel a run"),
        )
        .describe(
            "Its next tool call is refused and its running operations are cancelled; it ends \
             `cancelled`. The answer is the run once it has ended (within 10 seconds; a run \
             that takes longer is answered as it is then, and still ends `cancelled`). A run \
             that already ended cannot be cancelled (409).",
        )
        .param(parameter("RunId"))
        .answer(200, "The run", of::<AgentRun>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")])
        .error(409, "The run already ended"),
        Route::get(
            "/v1/agents/runs/{id}/tasks",
            Access::Read,
            run_tasks,
            (
                "listRunTasks",
                "List the tasks for people a run created, such as handovers",
            ),
        )
        .param(parameter("RunId"))
        .answer(200, "The run's tasks, oldest first", of::<TaskList>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")]),
        Route::get(
            "/v1/agents/tools",
            Access::Read,
            list_tools,
            ("listTools", "List the tools the active release offers"),
        )
        .describe(
            "Every tool an agent of the active release may be allowed, with its input and output \
             schemas: its operations, the control and outbound tools, and the tools its \
             `ToolExposure`s make of its operations and of its connections' API operations \
             (`operation` is then `CONNECTION: OPERATION`, the schemas the API document's, \
             `impact` the exposure's). Which of them an agent may call is in its definition's \
             `tools`.",
        )
        .answer(200, "The tools", of::<ToolList>())
        .error(409, "No release is active"),
    ]
}

fn start_route() -> Route {
    Route::post(
        "/v1/agents/runs",
        Access::Operate,
        start_run,
        ("startRun", "Start a run of an agent"),
    )
    .describe(
        "Starts a run of `agent` from the active release with `input`, which must be valid \
         against the agent's input schema. The run is `queued` when this answers, unless \
         `wait` is true (in the body or the query), when it answers once the run has ended. \
         With `attach: true` the run is driven by the caller instead of the agent's driver: \
         the answer's `Hane-Run-Token` header carries the run's token, for the Model \
         Gateway's routes and the run's tool calls; the run ends when `submit_result` \
         accepts its result, when it is cancelled, or at `maxSeconds`.",
    )
    .param(json!({
        "name": "wait",
        "in": "query",
        "required": false,
        "description": "Answer once the run has ended, as `wait` in the body does",
        "schema": { "type": "boolean", "default": false }
    }))
    .body(of::<StartRunRequest>())
    .answer(
        201,
        "The run: `queued`, or ended when `wait` was true",
        of::<AgentRun>(),
    )
    .header("Location", "The run's URL")
    .header("Hane-Run-Token", "With `attach: true`: the run's token")
    .errors(&[(400, "BadRequest")])
    .error(
        404,
        "No agent of this name in the active release (`path` is `/agent`)",
    )
    .error(409, "No release is active")
    .errors(&[(413, "PayloadTooLarge"), (415, "UnsupportedMediaType")])
    .error(
        422,
        "The body or the input is not valid, or the agent's driver is not available in this \
         build; `path` points at the field, such as `/input/vehicle`",
    )
    .errors(&[(429, "BudgetExceeded")])
}

fn list_route() -> Route {
    let statuses: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
    Route::get(
        "/v1/agents/runs",
        Access::Read,
        list_runs,
        ("listRuns", "List runs, newest first"),
    )
    .param(json!({
        "name": "agent",
        "in": "query",
        "required": false,
        "description": "Only runs of this agent",
        "schema": { "type": "string" }
    }))
    .param(json!({
        "name": "status",
        "in": "query",
        "required": false,
        "description": "Only runs with this status",
        "schema": { "type": "string", "enum": statuses }
    }))
    .param(json!({
        "name": "limit",
        "in": "query",
        "required": false,
        "description": "At most this many runs",
        "schema": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_RUNS_LISTED,
            "default": DEFAULT_LIST_LIMIT
        }
    }))
    .answer(200, "The runs", of::<RunList>())
    .errors(&[(400, "BadRequest")])
}

/// What the API's handlers reach: the composed [`Services`]; each handler
/// extracts the one it needs (`State<Conversations>`, `State<AgentRuntime>`).
#[derive(Clone)]
pub(crate) struct Api(Services);

impl FromRef<Api> for AgentRuntime {
    fn from_ref(api: &Api) -> Self {
        api.0.runs.clone()
    }
}

impl FromRef<Api> for Approvals {
    fn from_ref(api: &Api) -> Self {
        api.0.approvals.clone()
    }
}

impl FromRef<Api> for Budgets {
    fn from_ref(api: &Api) -> Self {
        api.0.budgets.clone()
    }
}

impl FromRef<Api> for Conversations {
    fn from_ref(api: &Api) -> Self {
        api.0.conversations.clone()
    }
}

impl FromRef<Api> for ReceptionDesk {
    fn from_ref(api: &Api) -> Self {
        api.0.reception.clone()
    }
}

impl FromRef<Api> for Workflows {
    fn from_ref(api: &Api) -> Self {
        api.0.workflows.clone()
    }
}

impl FromRef<Api> for Evaluations {
    fn from_ref(api: &Api) -> Self {
        api.0.evaluations.clone()
    }
}

/// The API over `services`: every route in the OpenAPI document (served at
/// `GET /v1/openapi.json`), each checking the caller's API key and role
/// against the registry on every request, so a removed key stops working
/// at once.
pub fn router(services: Services) -> Router {
    let runtime = services.runs.clone();
    let mut router = Router::new();
    for route in all() {
        let handler = match route.access {
            Access::Public | Access::RunToken => route.handler,
            _ => route.handler.route_layer(middleware::from_fn_with_state(
                Guard {
                    runtime: runtime.clone(),
                    method: route.method,
                    path: route.path,
                    access: route.access,
                },
                authorize,
            )),
        };
        router = router.route(route.path, handler);
    }
    // The MCP endpoints take their own limits and credentials.
    let mcp = crate::mcp::mcp_router(runtime.clone());
    router
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Api(services))
        .merge(mcp)
}

/// The state of the key check on one route.
#[derive(Clone)]
struct Guard {
    runtime: AgentRuntime,
    method: Method,
    path: &'static str,
    access: Access,
}

/// Who called: put in the request's extensions by the key check, for the
/// handlers that record who decided.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The key's name.
    pub(crate) key: String,
    /// The assignment groups it decides for; `None` for every group.
    pub(crate) groups: Option<Vec<String>>,
}

impl Caller {
    /// The caller as a decision's or an override's author: `key:NAME`.
    pub(crate) fn by(&self) -> String {
        format!("key:{}", self.key)
    }

    /// The caller as the person deciding or reconciling an action.
    pub(crate) fn person(&self) -> Person {
        Person {
            by: self.by(),
            groups: self.groups.clone(),
        }
    }
}

async fn authorize(State(guard): State<Guard>, mut request: Request, next: Next) -> Response {
    match check_key(&guard, request.headers()).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

async fn check_key(guard: &Guard, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let secret = bearer(headers)?;
    let key = guard
        .runtime
        .registry()
        .api_keys()
        .by_hash(&hash_key(secret))
        .await
        .map_err(|e| ApiError::internal("checking an API key", &e))?
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unauthorized,
                "the API key is not known: it may have been removed",
            )
        })?;
    let role: KeyRole = key.role.parse().map_err(|_| {
        ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "key `{}` has role `{}`, which this server does not know",
                key.name, key.role
            ),
        )
    })?;
    if !guard.access.allows(role) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "`{} {}` needs {}; key `{}` has the {role} role",
                guard.method,
                guard.path,
                guard.access.needs(),
                key.name
            ),
        ));
    }
    Ok(Caller {
        key: key.name,
        groups: key.groups,
    })
}

/// The key in an `Authorization: Bearer KEY` header.
fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        if headers.contains_key(header::AUTHORIZATION) {
            // Which one counts would be up to whoever reads them.
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                "the request has more than one Authorization header: send the key in one",
            ));
        }
        return Err(ApiError::new(
            ErrorCode::Unauthorized,
            "this route needs an API key: send `Authorization: Bearer KEY` (create a key with `hane keys create NAME --role ROLE`)",
        ));
    };
    let malformed = || {
        ApiError::new(
            ErrorCode::Unauthorized,
            "the Authorization header must be `Bearer KEY`",
        )
    };
    let (scheme, key) = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .ok_or_else(malformed)?;
    let key = key.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || key.is_empty() || key.contains(' ') {
        return Err(malformed());
    }
    Ok(key)
}

async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!(
            "no route `{method} {}`: GET /v1/openapi.json lists them",
            uri.path()
        ),
    )
}

async fn no_method(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!(
            "`{}` does not take {method}: GET /v1/openapi.json lists its methods",
            uri.path()
        ),
    )
}

/// `GET /healthz`'s answer.
#[derive(Serialize, JsonSchema)]
struct Health {
    #[schemars(extend("const" = "ok"))]
    status: &'static str,
}

async fn health() -> axum::Json<Health> {
    axum::Json(Health { status: "ok" })
}

async fn openapi() -> axum::Json<&'static Value> {
    axum::Json(crate::openapi())
}

/// The fields of a start request's body.
const START_FIELDS: [&str; 5] = ["agent", "input", "shadow", "wait", "attach"];

/// The response header that carries an attached run's token.
pub const RUN_TOKEN_HEADER: &str = "hane-run-token";

/// A request to start a run of an agent.
// `start_body` reads it field by field, so that every error names its
// field; the document's schema of the body is this type's.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
struct StartRunRequest {
    /// The agent's name in the active release
    #[schemars(length(min = 1))]
    agent: String,
    /// The run's input, valid against the agent's input schema
    input: Map<String, Value>,
    /// Skip outbound actions and handovers; only keep a record
    #[serde(default)]
    shadow: bool,
    /// Answer once the run has ended
    #[serde(default)]
    wait: bool,
    /// Drive the run from outside: the answer's Hane-Run-Token header
    /// carries its token
    #[serde(default)]
    attach: bool,
}

/// The fields of a request body that must be a JSON object of `known`
/// fields: `shape` says what it holds (such as "`agent` and `input`"),
/// `kind` what it is (such as "a run request").
pub(crate) fn body_fields(
    body: Value,
    known: &[&str],
    shape: &str,
    kind: &str,
) -> Result<Map<String, Value>, ApiError> {
    let invalid = |message: String| ApiError::new(ErrorCode::InvalidInput, message);
    let Value::Object(fields) = body else {
        return Err(invalid(format!(
            "the request body must be a JSON object with {shape}"
        ))
        .at(""));
    };
    if let Some(unknown) = fields.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(invalid(format!(
            "unknown field `{unknown}`: {kind} has the fields {}",
            known.join(", ")
        ))
        .at(format!("/{}", pointer_token(unknown))));
    }
    Ok(fields)
}

/// Checks a start request's body field by field, so every error names
/// the field (as a JSON Pointer) it is about.
fn start_body(body: Value) -> Result<StartRunRequest, ApiError> {
    let invalid = |message: String| ApiError::new(ErrorCode::InvalidInput, message);
    let mut fields = body_fields(body, &START_FIELDS, "`agent` and `input`", "a run request")?;
    let agent = match fields.remove("agent") {
        Some(Value::String(agent)) if !agent.is_empty() => agent,
        Some(_) => {
            return Err(
                invalid("`agent` must be a string: the agent's name".to_owned()).at("/agent"),
            );
        }
        None => {
            return Err(invalid("`agent` is required: the agent's name".to_owned()).at("/agent"));
        }
    };
    let input = match fields.remove("input") {
        Some(Value::Object(input)) => input,
        Some(_) => {
            return Err(invalid("`input` must be a JSON object".to_owned()).at("/input"));
        }
        None => {
            return Err(invalid(
                "`input` is required: the agent's input, a JSON object".to_owned(),
            )
            .at("/input"));
        }
    };
    let flag = |fields: &Map<String, Value>, name: &str| match fields.get(name) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(format!("`{name}` must be true or false")).at(format!("/{name}"))),
    };
    let wait = flag(&fields, "wait")?;
    let attach = flag(&fields, "attach")?;
    if wait && attach {
        return Err(invalid(
            "`wait` and `attach` cannot both be true: an attached run ends only when the client driving it submits a result".to_owned(),
        )
        .at("/attach"));
    }
    Ok(StartRunRequest {
        agent,
        input,
        shadow: flag(&fields, "shadow")?,
        wait,
        attach,
    })
}

/// `name` escaped as one JSON Pointer reference token.
fn pointer_token(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartQuery {
    #[serde(default)]
    wait: bool,
}

async fn start_run(
    State(runtime): State<AgentRuntime>,
    Checked(Query(query)): Checked<Query<StartQuery>>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<Response, ApiError> {
    let body = start_body(body)?;
    if body.attach && query.wait {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            "`wait` and `attach` cannot both be true: an attached run ends only when the client driving it submits a result",
        ));
    }
    let start = StartRun {
        agent: body.agent,
        input: Value::Object(body.input),
        shadow: body.shadow,
    };
    let (mut run, token) = if body.attach {
        let attached = runtime.start_attached(start).await?;
        (attached.run, Some(attached.token))
    } else {
        (runtime.start(start).await?, None)
    };
    if body.wait || query.wait {
        run = runtime.wait(&run.id).await?;
    }
    let location = HeaderValue::try_from(format!("/v1/agents/runs/{}", run.id))
        .expect("a run id is a valid header value");
    let mut response = (
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(run),
    )
        .into_response();
    if let Some(token) = token {
        let mut value =
            HeaderValue::try_from(token.as_str()).expect("a run token is a valid header value");
        value.set_sensitive(true);
        response.headers_mut().insert(RUN_TOKEN_HEADER, value);
    }
    Ok(response)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    agent: Option<String>,
    status: Option<String>,
    limit: Option<String>,
}

/// How many stored items a listing left out.
pub(crate) const SKIPPED: &str = "How many stored items were left out because they do not read (damaged, or written by a newer hane); the server logs each with its id, and `hane store check` lists them";

/// A listing of runs.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
struct RunList {
    runs: Vec<AgentRun>,
    #[schemars(description = SKIPPED)]
    skipped: usize,
}

/// The tasks of a run.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
struct TaskList {
    tasks: Vec<Task>,
    #[schemars(description = SKIPPED)]
    skipped: usize,
}

/// The tools of the active release.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
struct ToolList {
    tools: Vec<ToolDefinition>,
}

async fn list_runs(
    State(runtime): State<AgentRuntime>,
    Checked(Query(query)): Checked<Query<ListQuery>>,
) -> Result<axum::Json<RunList>, ApiError> {
    let bad = |message: String| ApiError::new(ErrorCode::BadRequest, message);
    // `?agent=` is the same as no filter.
    let given = |v: Option<String>| v.filter(|v| !v.is_empty());
    let status = given(query.status)
        .map(|s| s.parse::<RunStatus>().map_err(|e| bad(e.to_string())))
        .transpose()?;
    let limit = list_limit(query.limit, MAX_RUNS_LISTED)?;
    let runs = runtime
        .list(RunQuery {
            agent: given(query.agent),
            status,
            limit,
        })
        .await?;
    Ok(axum::Json(RunList {
        runs: runs.items,
        skipped: runs.skipped.len(),
    }))
}

/// A listing's `?limit=`: [`DEFAULT_LIST_LIMIT`] when absent or empty,
/// else a whole number from 1 to `max` (400 otherwise).
pub(crate) fn list_limit(limit: Option<String>, max: u32) -> Result<u32, ApiError> {
    match limit.filter(|l| !l.is_empty()) {
        None => Ok(DEFAULT_LIST_LIMIT),
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::BadRequest,
                    format!("`limit` must be a whole number from 1 to {max}, not `{text}`"),
                )
            }),
    }
}

/// An id from a path or query, such as a [`RunId`]; a malformed one is a
/// bad request.
pub(crate) fn parse_id<T: std::str::FromStr<Err = hane_core::ids::IdError>>(
    text: &str,
) -> Result<T, ApiError> {
    text.parse()
        .map_err(|e: hane_core::ids::IdError| ApiError::new(ErrorCode::BadRequest, e.to_string()))
}

async fn get_run(
    State(runtime): State<AgentRuntime>,
    Checked(Path(id)): Checked<Path<String>>,
) -> Result<axum::Json<AgentRun>, ApiError> {
    Ok(axum::Json(runtime.get(&parse_id::<RunId>(&id)?).await?))
}

async fn cancel_run(
    State(runtime): State<AgentRuntime>,
    Checked(Path(id)): Checked<Path<String>>,
) -> Result<axum::Json<AgentRun>, ApiError> {
    Ok(axum::Json(runtime.cancel(&parse_id::<RunId>(&id)?).await?))
}

async fn run_tasks(
    State(runtime): State<AgentRuntime>,
    Checked(Path(id)): Checked<Path<String>>,
) -> Result<axum::Json<TaskList>, ApiError> {
    let id: RunId = parse_id(&id)?;
    // A run without tasks and no run at all are told apart.
    runtime.get(&id).await?;
    let tasks = runtime.tasks(&id).await?;
    Ok(axum::Json(TaskList {
        tasks: tasks.items,
        skipped: tasks.skipped.len(),
    }))
}

async fn list_tools(State(runtime): State<AgentRuntime>) -> Result<axum::Json<ToolList>, ApiError> {
    Ok(axum::Json(ToolList {
        tools: runtime.tools().await?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_body_names_the_field() {
        let err = |body: Value| start_body(body).err().expect("an error").body();
        assert_eq!(
            err(json!({"agent": "a", "input": {}, "colour": 1}))["error"]["path"],
            "/colour"
        );
        assert_eq!(
            err(json!({"agent": "a", "input": {}, "a/b": 1}))["error"]["path"],
            "/a~1b"
        );
        assert_eq!(err(json!({"input": {}}))["error"]["path"], "/agent");
        assert_eq!(
            err(json!({"agent": 3, "input": {}}))["error"]["path"],
            "/agent"
        );
        assert_eq!(err(json!({"agent": "a"}))["error"]["path"], "/input");
        assert_eq!(
            err(json!({"agent": "a", "input": []}))["error"]["path"],
            "/input"
        );
        assert_eq!(
            err(json!({"agent": "a", "input": {}, "wait": "yes"}))["error"]["path"],
            "/wait"
        );
        assert_eq!(err(json!([1]))["error"]["code"], "invalid_input");
        let ok = start_body(json!({"agent": "a", "input": {"x": 1}, "shadow": true, "wait": true}))
            .expect("valid");
        assert!(ok.wait && ok.shadow);
        assert_eq!(ok.agent, "a");
    }

    #[test]
    fn bearer_headers() {
        let headers = |value: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            h
        };
        assert_eq!(bearer(&headers("Bearer hane_x")).ok(), Some("hane_x"));
        assert_eq!(bearer(&headers("bearer hane_x")).ok(), Some("hane_x"));
        assert!(bearer(&headers("Basic abc")).is_err());
        assert!(bearer(&headers("Bearer")).is_err());
        assert!(bearer(&headers("Bearer ")).is_err());
        assert!(bearer(&headers("Bearer a b")).is_err());
        assert!(bearer(&HeaderMap::new()).is_err());
    }

    #[test]
    fn roles_per_access() {
        assert!(Access::Read.allows(KeyRole::Viewer));
        assert!(Access::Read.allows(KeyRole::Approver));
        assert!(Access::Operate.allows(KeyRole::Operator));
        assert!(!Access::Operate.allows(KeyRole::Viewer));
        assert!(!Access::Operate.allows(KeyRole::Approver));
        assert!(Access::Approve.allows(KeyRole::Approver));
        assert!(Access::Approve.allows(KeyRole::Operator));
        assert!(!Access::Approve.allows(KeyRole::Viewer));
    }
}
