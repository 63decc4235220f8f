//! The routes: one table ([`ROUTES`]) that both the router and the OpenAPI
//! document are built from, the run and tool handlers, and the bearer-key
//! check. The handlers of outbound actions, overrides and the budget are in
//! `actions`.

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use hane_coordinator::{
    AgentRuntime, Approvals, Budgets, Conversations, Evaluations, ReceptionDesk, Services,
    StartRun, Workflows,
};
use hane_core::Person;
use hane_core::RunId;
use hane_core::{AgentRun, RunStatus};
use hane_store::{MAX_RUNS_LISTED, RunQuery};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::actions;
use crate::conversations;
use crate::error::{ApiError, Checked, ErrorCode};
use crate::evals;
use crate::keys::{Role, hash_key};
use crate::model;
use crate::reception;
use crate::workflows;

/// The largest request body accepted, in bytes; a larger one is answered
/// `413`. A run's input is a few fields, so 1 MiB is far more than enough.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Runs listed when a request gives no `limit`.
pub const DEFAULT_LIST_LIMIT: u32 = 100;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Anyone, without a key.
    Public,
    /// A key with any role.
    Read,
    /// A key with the `approver` or `operator` role.
    Approve,
    /// A key with the `operator` role.
    Operate,
    /// A run's token, not an API key: the Model Gateway's routes, which
    /// check it themselves.
    RunToken,
}

impl Access {
    fn allows(self, role: Role) -> bool {
        match self {
            Access::Public | Access::Read => true,
            Access::Approve => matches!(role, Role::Approver | Role::Operator),
            Access::Operate => role == Role::Operator,
            Access::RunToken => false,
        }
    }

    /// Who may call it, in words, for errors and the OpenAPI document.
    pub(crate) fn needs(self) -> &'static str {
        match self {
            Access::Public => "no API key",
            Access::Read => "an API key with any role (viewer, approver or operator)",
            Access::Approve => "an API key with the approver or operator role",
            Access::Operate => "an API key with the operator role",
            Access::RunToken => {
                "a run's token (`Authorization: Bearer TOKEN` or `x-api-key: TOKEN`), not an API key"
            }
        }
    }
}

/// What a route does; the router and the OpenAPI document each match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Health,
    OpenApi,
    StartRun,
    ListRuns,
    GetRun,
    CancelRun,
    RunTasks,
    ListTools,
    ListActions,
    GetAction,
    ApproveAction,
    RejectAction,
    ReconcileAction,
    ListOverrides,
    AddOverride,
    RemoveOverride,
    Budget,
    CreateConversation,
    ListConversations,
    GetConversation,
    SendMessage,
    GetMemory,
    PutMemory,
    MemorySchema,
    CreateRequest,
    ListRequests,
    GetRequest,
    CreateEvaluation,
    ListEvaluations,
    CompareEvaluations,
    GetEvaluation,
    StartCase,
    GetCase,
    CompleteTask,
    ChatCompletions,
    Responses,
    Messages,
    CountTokens,
    Models,
    Root,
}

/// One route of the API.
#[derive(Debug)]
pub(crate) struct Route {
    pub(crate) endpoint: Endpoint,
    pub(crate) method: Method,
    /// In axum's and OpenAPI's syntax alike: `{id}` is a parameter.
    pub(crate) path: &'static str,
    pub(crate) access: Access,
}

/// Every route the API serves.
pub(crate) const ROUTES: [Route; 40] = [
    Route {
        endpoint: Endpoint::Health,
        method: Method::GET,
        path: "/healthz",
        access: Access::Public,
    },
    Route {
        endpoint: Endpoint::OpenApi,
        method: Method::GET,
        path: "/v1/openapi.json",
        access: Access::Public,
    },
    Route {
        endpoint: Endpoint::StartRun,
        method: Method::POST,
        path: "/v1/agents/runs",
        access: Access::Operate,
    },
    Route {
        endpoint: Endpoint::ListRuns,
        method: Method::GET,
        path: "/v1/agents/runs",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::GetRun,
        method: Method::GET,
        path: "/v1/agents/runs/{id}",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::CancelRun,
        method: Method::POST,
        path: "/v1/agents/runs/{id}/cancel",
        access: Access::Operate,
    },
    Route {
        endpoint: Endpoint::RunTasks,
        method: Method::GET,
        path: "/v1/agents/runs/{id}/tasks",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::ListTools,
        method: Method::GET,
        path: "/v1/agents/tools",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::ListActions,
        method: Method::GET,
        path: "/v1/agents/action-requests",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::GetAction,
        method: Method::GET,
        path: "/v1/agents/action-requests/{id}",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::ApproveAction,
        method: Method::POST,
        path: "/v1/agents/action-requests/{id}/approve",
        access: Access::Approve,
    },
    Route {
        endpoint: Endpoint::RejectAction,
        method: Method::POST,
        path: "/v1/agents/action-requests/{id}/reject",
        access: Access::Approve,
    },
    Route {
        endpoint: Endpoint::ReconcileAction,
        method: Method::POST,
        path: "/v1/agents/action-requests/{id}/reconcile",
        access: Access::Approve,
    },
    Route {
        endpoint: Endpoint::ListOverrides,
        method: Method::GET,
        path: "/v1/agents/decider-overrides",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::AddOverride,
        method: Method::POST,
        path: "/v1/agents/decider-overrides",
        access: Access::Operate,
    },
    Route {
        endpoint: Endpoint::RemoveOverride,
        method: Method::DELETE,
        path: "/v1/agents/decider-overrides/{tool}",
        access: Access::Operate,
    },
    Route {
        endpoint: Endpoint::Budget,
        method: Method::GET,
        path: "/v1/agents/budget",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::CreateConversation,
        method: Method::POST,
        path: "/v1/agents/conversations",
        access: Access::Operate,
    },
    Route {
        endpoint: Endpoint::ListConversations,
        method: Method::GET,
        path: "/v1/agents/conversations",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::MemorySchema,
        method: Method::GET,
        path: "/v1/agents/conversations/memory-schema",
        access: Access::Public,
    },
    Route {
        endpoint: Endpoint::GetConversation,
        method: Method::GET,
        path: "/v1/agents/conversations/{id}",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::SendMessage,
        method: Method::POST,
        path: "/v1/agents/conversations/{id}/messages",
        access: Access::Operate,
    },
    Route {
        endpoint: Endpoint::GetMemory,
        method: Method::GET,
        path: "/v1/agents/conversations/{id}/memory",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::PutMemory,
        method: Method::PUT,
        path: "/v1/agents/conversations/{id}/memory",
        access: Access::Operate,
    },
    Route {
        endpoint: Endpoint::CreateRequest,
        method: Method::POST,
        path: "/v1/agents/requests",
        access: Access::Operate,
    },
    Route {
        endpoint: Endpoint::ListRequests,
        method: Method::GET,
        path: "/v1/agents/requests",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::GetRequest,
        method: Method::GET,
        path: "/v1/agents/requests/{id}",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::CreateEvaluation,
        method: Method::POST,
        path: "/v1/agents/evals",
        access: Access::Operate,
    },
    Route {
        endpoint: Endpoint::ListEvaluations,
        method: Method::GET,
        path: "/v1/agents/evals",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::CompareEvaluations,
        method: Method::GET,
        path: "/v1/agents/evals/compare",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::GetEvaluation,
        method: Method::GET,
        path: "/v1/agents/evals/{id}",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::StartCase,
        method: Method::POST,
        path: "/v1/agents/workflows/{name}/cases",
        access: Access::Operate,
    },
    Route {
        endpoint: Endpoint::GetCase,
        method: Method::GET,
        path: "/v1/agents/workflows/{name}/cases/{id}",
        access: Access::Read,
    },
    Route {
        endpoint: Endpoint::CompleteTask,
        method: Method::POST,
        path: "/v1/agents/workflows/{name}/cases/{id}/tasks/{step}",
        access: Access::Approve,
    },
    Route {
        endpoint: Endpoint::ChatCompletions,
        method: Method::POST,
        path: "/v1/chat/completions",
        access: Access::RunToken,
    },
    Route {
        endpoint: Endpoint::Responses,
        method: Method::POST,
        path: "/v1/responses",
        access: Access::RunToken,
    },
    Route {
        endpoint: Endpoint::Messages,
        method: Method::POST,
        path: "/v1/messages",
        access: Access::RunToken,
    },
    Route {
        endpoint: Endpoint::CountTokens,
        method: Method::POST,
        path: "/v1/messages/count_tokens",
        access: Access::RunToken,
    },
    Route {
        endpoint: Endpoint::Models,
        method: Method::GET,
        path: "/v1/models",
        access: Access::RunToken,
    },
    Route {
        endpoint: Endpoint::Root,
        method: Method::GET,
        path: "/",
        access: Access::Public,
    },
];

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
    for route in &ROUTES {
        let filter = MethodFilter::try_from(route.method.clone())
            .expect("every method in ROUTES has a filter");
        let handler: MethodRouter<Api> = match route.endpoint {
            Endpoint::Health => on(filter, health),
            Endpoint::OpenApi => on(filter, openapi),
            Endpoint::StartRun => on(filter, start_run),
            Endpoint::ListRuns => on(filter, list_runs),
            Endpoint::GetRun => on(filter, get_run),
            Endpoint::CancelRun => on(filter, cancel_run),
            Endpoint::RunTasks => on(filter, run_tasks),
            Endpoint::ListTools => on(filter, list_tools),
            Endpoint::ListActions => on(filter, actions::list),
            Endpoint::GetAction => on(filter, actions::get),
            Endpoint::ApproveAction => on(filter, actions::approve),
            Endpoint::RejectAction => on(filter, actions::reject),
            Endpoint::ReconcileAction => on(filter, actions::reconcile),
            Endpoint::ListOverrides => on(filter, actions::list_overrides),
            Endpoint::AddOverride => on(filter, actions::add_override),
            Endpoint::RemoveOverride => on(filter, actions::remove_override),
            Endpoint::Budget => on(filter, actions::budget),
            Endpoint::CreateConversation => on(filter, conversations::create),
            Endpoint::ListConversations => on(filter, conversations::list),
            Endpoint::GetConversation => on(filter, conversations::get),
            Endpoint::SendMessage => on(filter, conversations::send),
            Endpoint::GetMemory => on(filter, conversations::get_memory),
            Endpoint::PutMemory => on(filter, conversations::put_memory),
            Endpoint::MemorySchema => on(filter, conversations::schema),
            Endpoint::CreateRequest => on(filter, reception::create),
            Endpoint::ListRequests => on(filter, reception::list),
            Endpoint::GetRequest => on(filter, reception::get),
            Endpoint::CreateEvaluation => on(filter, evals::create),
            Endpoint::ListEvaluations => on(filter, evals::list),
            Endpoint::CompareEvaluations => on(filter, evals::compare),
            Endpoint::GetEvaluation => on(filter, evals::get),
            Endpoint::StartCase => on(filter, workflows::start),
            Endpoint::GetCase => on(filter, workflows::get),
            Endpoint::CompleteTask => on(filter, workflows::complete),
            Endpoint::ChatCompletions => on(filter, model::chat),
            Endpoint::Responses => on(filter, model::responses),
            Endpoint::Messages => on(filter, model::messages),
            Endpoint::CountTokens => on(filter, model::count_tokens),
            Endpoint::Models => on(filter, model::models),
            Endpoint::Root => on(filter, model::root),
        };
        let handler = match route.access {
            Access::Public | Access::RunToken => handler,
            _ => handler.route_layer(middleware::from_fn_with_state(
                Guard {
                    runtime: runtime.clone(),
                    route,
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
    route: &'static Route,
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
    let route = guard.route;
    let role: Role = key.role.parse().map_err(|_| {
        ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "key `{}` has role `{}`, which this server does not know",
                key.name, key.role
            ),
        )
    })?;
    if !route.access.allows(role) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "`{} {}` needs {}; key `{}` has the {role} role",
                route.method,
                route.path,
                route.access.needs(),
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

async fn health() -> axum::Json<Value> {
    axum::Json(json!({"status": "ok"}))
}

async fn openapi() -> axum::Json<&'static Value> {
    axum::Json(crate::openapi())
}

/// The fields of a start request's body.
const START_FIELDS: [&str; 5] = ["agent", "input", "shadow", "wait", "attach"];

/// The response header that carries an attached run's token.
pub const RUN_TOKEN_HEADER: &str = "hane-run-token";

/// A checked start request.
struct StartBody {
    run: StartRun,
    wait: bool,
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
fn start_body(body: Value) -> Result<StartBody, ApiError> {
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
        Some(input @ Value::Object(_)) => input,
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
    Ok(StartBody {
        wait,
        attach,
        run: StartRun {
            agent,
            input,
            shadow: flag(&fields, "shadow")?,
        },
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
    let (mut run, token) = if body.attach {
        let attached = runtime.start_attached(body.run).await?;
        (attached.run, Some(attached.token))
    } else {
        (runtime.start(body.run).await?, None)
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

async fn list_runs(
    State(runtime): State<AgentRuntime>,
    Checked(Query(query)): Checked<Query<ListQuery>>,
) -> Result<axum::Json<Value>, ApiError> {
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
    Ok(axum::Json(
        json!({ "runs": runs.items, "skipped": runs.skipped.len() }),
    ))
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
pub(crate) fn parse_id<T: std::str::FromStr<Err = hane_core::IdError>>(
    text: &str,
) -> Result<T, ApiError> {
    text.parse()
        .map_err(|e: hane_core::IdError| ApiError::new(ErrorCode::BadRequest, e.to_string()))
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
) -> Result<axum::Json<Value>, ApiError> {
    let id: RunId = parse_id(&id)?;
    // A run without tasks and no run at all are told apart.
    runtime.get(&id).await?;
    let tasks = runtime.tasks(&id).await?;
    Ok(axum::Json(
        json!({ "tasks": tasks.items, "skipped": tasks.skipped.len() }),
    ))
}

async fn list_tools(State(runtime): State<AgentRuntime>) -> Result<axum::Json<Value>, ApiError> {
    let tools = runtime.tools().await?;
    Ok(axum::Json(json!({ "tools": tools })))
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
        assert!(ok.wait && ok.run.shadow);
        assert_eq!(ok.run.agent, "a");
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
        assert!(Access::Read.allows(Role::Viewer));
        assert!(Access::Read.allows(Role::Approver));
        assert!(Access::Operate.allows(Role::Operator));
        assert!(!Access::Operate.allows(Role::Viewer));
        assert!(!Access::Operate.allows(Role::Approver));
        assert!(Access::Approve.allows(Role::Approver));
        assert!(Access::Approve.allows(Role::Operator));
        assert!(!Access::Approve.allows(Role::Viewer));
    }
}
