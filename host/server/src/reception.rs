//! Reception's routes: `POST /v1/agents/requests` (free text in; the
//! agent and input chosen, the run started, or what is missing) and the
//! requests answered, read back by id or listed.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hane_coordinator::ReceptionDesk;
use hane_coordinator::reception::{ReceptionError, ReceptionRequest};
use hane_core::{Reception, ReceptionId, ReceptionStatus};
use hane_store::registry::MAX_RECEPTIONS_LISTED;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{ApiError, Checked, ErrorCode};
use crate::route::{Access, Route, of};
use crate::routes::{SKIPPED, body_fields, list_limit, parse_id};

/// Reception's routes: a request answered, and those answered read back.
pub(crate) fn routes() -> Vec<Route> {
    vec![
        Route::post(
            "/v1/agents/requests",
            Access::Operate,
            create,
            (
                "createRequest",
                "Reception: start the right agent for a request in free text",
            ),
        )
        .describe(
            "The agents of the active release are shortlisted by the words they share with \
             `text` (BM25 over each agent's purpose, examples and input fields); the release's \
             default model then chooses one of them and derives its input, which is checked \
             against the agent's input schema. The run then starts as any run does (201), or, \
             with `dryRun`, only what would start is answered (200, `would_start`). When \
             nothing fits or the input cannot be made valid, the answer (200) is `declined` \
             with `reasons` and `missing`; a run the budget or the build refuses is `refused` \
             with `error`. Every answer is stored with the shortlist, the model call and the \
             alternatives, and read back at its `Location`. The model's tokens count against \
             the day's budget.",
        )
        .body(of::<ReceptionRequest>())
        .answer(201, "A run was started", of::<Reception>())
        .header("Location", "The request's URL")
        .answer(
            200,
            "Nothing started: a dry run's choice, a decline with what is missing, or a run refused at start",
            of::<Reception>(),
        )
        .header("Location", "The request's URL")
        .errors(&[(400, "BadRequest")])
        .error(
            409,
            "No release is active, or it has no default ModelProvider for reception's choice",
        )
        .errors(&[(413, "PayloadTooLarge")])
        .error(
            422,
            "The body is not a request (`path` is `/text` or `/dryRun`)",
        )
        .errors(&[(429, "BudgetExceeded"), (502, "BadGateway")]),
        Route::get(
            "/v1/agents/requests",
            Access::Read,
            list,
            (
                "listRequests",
                "List the requests reception answered, newest first",
            ),
        )
        .param(json!({
            "name": "limit", "in": "query", "required": false,
            "schema": { "type": "integer", "minimum": 1, "maximum": MAX_RECEPTIONS_LISTED }
        }))
        .answer(200, "The requests", of::<ReceptionList>())
        .errors(&[(400, "BadRequest")]),
        Route::get(
            "/v1/agents/requests/{id}",
            Access::Read,
            get,
            ("getRequest", "Get a request reception answered"),
        )
        .param(json!({
            "name": "id", "in": "path", "required": true,
            "schema": { "type": "string", "pattern": "^req_[0-9a-hjkmnp-tv-z]{26}$" },
            "description": "The request's id"
        }))
        .answer(200, "The request", of::<Reception>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")]),
    ]
}

impl From<ReceptionError> for ApiError {
    fn from(e: ReceptionError) -> Self {
        match e {
            ReceptionError::Run(e) => e.into(),
            ReceptionError::Invalid { path, message } => {
                ApiError::new(ErrorCode::InvalidInput, message).at(path)
            }
            e => ApiError::of_kind(e.kind(), "reception", &e),
        }
    }
}

/// A listing of the requests reception answered.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct ReceptionList {
    requests: Vec<Reception>,
    #[schemars(description = SKIPPED)]
    skipped: usize,
}

pub(crate) async fn create(
    State(desk): State<ReceptionDesk>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<Response, ApiError> {
    let invalid = |message: &str, path: &str| {
        ApiError::new(ErrorCode::InvalidInput, message.to_owned()).at(path)
    };
    let mut fields = body_fields(
        body,
        &["text", "dryRun", "agent"],
        "`text` and, optionally, `dryRun` (only answer what would start) and `agent` (the agent the request is for)",
        "a request",
    )?;
    let text = match fields.remove("text") {
        Some(Value::String(text)) => text,
        Some(_) => return Err(invalid("`text` must be a string: the request", "/text")),
        None => return Err(invalid("`text` is required: the request", "/text")),
    };
    let dry_run = match fields.remove("dryRun") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err(invalid("`dryRun` must be true or false", "/dryRun")),
    };
    let agent = match fields.remove("agent") {
        None | Some(Value::Null) => None,
        Some(Value::String(agent)) if !agent.is_empty() => Some(agent),
        Some(_) => {
            return Err(invalid(
                "`agent` must be the name of an agent of the active release",
                "/agent",
            ));
        }
    };
    let reception = desk
        .receive(ReceptionRequest {
            text,
            dry_run,
            agent,
        })
        .await?;
    let status = if reception.status == ReceptionStatus::Started {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let location = HeaderValue::try_from(format!("/v1/agents/requests/{}", reception.id))
        .expect("a request id is a valid header value");
    Ok((
        status,
        [(header::LOCATION, location)],
        axum::Json(reception),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    limit: Option<String>,
}

pub(crate) async fn list(
    State(desk): State<ReceptionDesk>,
    Checked(Query(query)): Checked<Query<ListQuery>>,
) -> Result<axum::Json<ReceptionList>, ApiError> {
    let limit = list_limit(query.limit, MAX_RECEPTIONS_LISTED)?;
    let listed = desk.list(limit).await?;
    Ok(axum::Json(ReceptionList {
        requests: listed.items,
        skipped: listed.skipped.len(),
    }))
}

pub(crate) async fn get(
    State(desk): State<ReceptionDesk>,
    Checked(Path(id)): Checked<Path<String>>,
) -> Result<axum::Json<Reception>, ApiError> {
    let id: ReceptionId = parse_id(&id)?;
    Ok(axum::Json(desk.get(id.as_str()).await?))
}
