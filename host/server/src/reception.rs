//! Reception's routes: `POST /v1/agents/requests` (free text in; the
//! agent and input chosen, the run started, or what is missing) and the
//! requests answered, read back by id or listed.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hane_coordinator::ReceptionDesk;
use hane_coordinator::reception::{ReceptionError, ReceptionRequest};
use hane_core::{Reception, ReceptionId, ReceptionStatus};
use hane_store::MAX_RECEPTIONS_LISTED;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, Checked, ErrorCode};
use crate::routes::{body_fields, list_limit, parse_id};

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

/// A request as the API shows it: the stored reception, its input as
/// JSON.
pub(crate) fn reception_json(reception: &Reception) -> Value {
    let mut out = serde_json::to_value(reception).expect("a reception is always JSON");
    out["input"] = reception
        .input
        .as_ref()
        .and_then(|input| input.to_value().ok())
        .unwrap_or(Value::Null);
    out
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
        axum::Json(reception_json(&reception)),
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
) -> Result<axum::Json<Value>, ApiError> {
    let limit = list_limit(query.limit, MAX_RECEPTIONS_LISTED)?;
    let listed = desk.list(limit).await?;
    let requests: Vec<Value> = listed.items.iter().map(reception_json).collect();
    Ok(axum::Json(
        json!({ "requests": requests, "skipped": listed.skipped.len() }),
    ))
}

pub(crate) async fn get(
    State(desk): State<ReceptionDesk>,
    Checked(Path(id)): Checked<Path<String>>,
) -> Result<axum::Json<Value>, ApiError> {
    let id: ReceptionId = parse_id(&id)?;
    let reception = desk.get(id.as_str()).await?;
    Ok(axum::Json(reception_json(&reception)))
}
