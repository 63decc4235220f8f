//! Evaluations' routes: `POST /v1/agents/evals` (an EvalSuite of the
//! active release run as shadow runs, each result compared with what its
//! case expects), the evaluations read back by id or listed, and two
//! evaluations of one suite compared case by case.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hane_coordinator::Evaluations;
use hane_coordinator::evaluation::EvalError;
use hane_core::{Evaluation, EvaluationId, evaluation::EvaluationComparison};
use hane_store::registry::MAX_EVALUATIONS_LISTED;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{ApiError, Checked, ErrorCode};
use crate::route::{Access, Route, of};
use crate::routes::{SKIPPED, body_fields, list_limit, parse_id};

/// The routes of evaluations. `compare` comes before `{id}`, which would
/// otherwise take it.
pub(crate) fn routes() -> Vec<Route> {
    let eval_id = json!({ "type": "string", "pattern": "^eval_[0-9a-hjkmnp-tv-z]{26}$" });
    vec![
        Route::post(
            "/v1/agents/evals",
            Access::Operate,
            create,
            (
                "createEvaluation",
                "Evaluate an agent on an EvalSuite of the active release",
            ),
        )
        .describe(
            "Each case of the suite runs as a shadow run of the suite's agent (nothing is sent, \
             no person is asked; at most 8 cases at once), and its result is compared with the \
             case's `expect`: every expected field must be present and equal (maps compare the \
             same way inside, arrays by length then element, numbers by value); fields the case \
             does not name are not compared. A case whose run fails or cannot start fails. The \
             evaluation is stored and answered when the last case ends, at its `Location`. The \
             runs count against the day's budget like any run.",
        )
        .body(of::<EvaluationRequest>())
        .answer(
            201,
            "The evaluation, once every case ended",
            of::<EvaluationView>(),
        )
        .header("Location", "The evaluation's URL")
        .errors(&[(400, "BadRequest"), (404, "NotFound")])
        .error(409, "No release is active")
        .errors(&[(413, "PayloadTooLarge")])
        .error(
            422,
            "The body is not an evaluation request (`path` is `/suite`)",
        ),
        Route::get(
            "/v1/agents/evals",
            Access::Read,
            list,
            ("listEvaluations", "List evaluations, newest first"),
        )
        .param(json!({
            "name": "suite", "in": "query", "required": false,
            "schema": { "type": "string" }, "description": "Only evaluations of this suite"
        }))
        .param(json!({
            "name": "limit", "in": "query", "required": false,
            "schema": { "type": "integer", "minimum": 1, "maximum": MAX_EVALUATIONS_LISTED }
        }))
        .answer(200, "The evaluations", of::<EvaluationList>())
        .errors(&[(400, "BadRequest")]),
        Route::get(
            "/v1/agents/evals/compare",
            Access::Read,
            compare,
            (
                "compareEvaluations",
                "Compare two evaluations of one suite, case by case",
            ),
        )
        .describe(
            "Each case of `a` (the earlier) matched by name with `b`'s: `regressed`, `fixed`, \
             `still_failing` or `unchanged`; `added` and `removed` for a case only one has. \
             Evaluations of different suites are refused with 422.",
        )
        .param(json!({
            "name": "a", "in": "query", "required": true, "schema": eval_id,
            "description": "The earlier evaluation"
        }))
        .param(json!({
            "name": "b", "in": "query", "required": true, "schema": eval_id,
            "description": "The later evaluation"
        }))
        .answer(200, "The comparison", of::<EvaluationComparison>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")])
        .error(422, "The two evaluations are of different suites"),
        Route::get(
            "/v1/agents/evals/{id}",
            Access::Read,
            get,
            ("getEvaluation", "Get an evaluation"),
        )
        .param(json!({
            "name": "id", "in": "path", "required": true, "schema": eval_id,
            "description": "The evaluation's id"
        }))
        .answer(200, "The evaluation", of::<EvaluationView>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")]),
    ]
}

impl From<EvalError> for ApiError {
    fn from(e: EvalError) -> Self {
        match e {
            EvalError::Run(e) => e.into(),
            e @ EvalError::UnknownSuite { .. } => {
                ApiError::of_kind(e.kind(), "evaluation", &e).at("/suite")
            }
            e => ApiError::of_kind(e.kind(), "evaluation", &e),
        }
    }
}

/// An evaluation as the API shows it: as stored, and whether enough of
/// its cases passed.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    rename = "Evaluation",
    deny_unknown_fields,
    description = "One evaluation of an EvalSuite against one release"
)]
pub(crate) struct EvaluationView {
    #[serde(flatten)]
    evaluation: Evaluation,
    /// Whether enough cases passed for `passRate`
    passes_rate: bool,
}

impl From<Evaluation> for EvaluationView {
    fn from(evaluation: Evaluation) -> Self {
        EvaluationView {
            passes_rate: evaluation.meets_pass_rate(),
            evaluation,
        }
    }
}

/// A listing of evaluations.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct EvaluationList {
    evaluations: Vec<EvaluationView>,
    #[schemars(description = SKIPPED)]
    skipped: usize,
}

/// A request to evaluate the suite's agent.
// `create` reads it field by field, so that every error names its field;
// the document's schema of the body is this type's.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
struct EvaluationRequest {
    /// An EvalSuite of the active release
    #[schemars(length(min = 1))]
    suite: String,
}

fn evaluation_body(body: Value) -> Result<EvaluationRequest, ApiError> {
    let mut fields = body_fields(
        body,
        &["suite"],
        "`suite`: the name of an EvalSuite of the active release",
        "an evaluation request",
    )?;
    let suite = match fields.remove("suite") {
        Some(Value::String(suite)) if !suite.is_empty() => suite,
        Some(_) => {
            return Err(ApiError::new(
                ErrorCode::InvalidInput,
                "`suite` must be the name of an EvalSuite of the active release".to_owned(),
            )
            .at("/suite"));
        }
        None => {
            return Err(ApiError::new(
                ErrorCode::InvalidInput,
                "`suite` is required: the name of an EvalSuite of the active release".to_owned(),
            )
            .at("/suite"));
        }
    };
    Ok(EvaluationRequest { suite })
}

pub(crate) async fn create(
    State(evaluations): State<Evaluations>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<Response, ApiError> {
    let body = evaluation_body(body)?;
    let evaluation = evaluations.evaluate(&body.suite, |_| {}).await?;
    let location = HeaderValue::try_from(format!("/v1/agents/evals/{}", evaluation.id))
        .expect("an evaluation id is a valid header value");
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(EvaluationView::from(evaluation)),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    suite: Option<String>,
    limit: Option<String>,
}

pub(crate) async fn list(
    State(evaluations): State<Evaluations>,
    Checked(Query(query)): Checked<Query<ListQuery>>,
) -> Result<axum::Json<EvaluationList>, ApiError> {
    let limit = list_limit(query.limit, MAX_EVALUATIONS_LISTED)?;
    let suite = query.suite.filter(|s| !s.is_empty());
    let listed = evaluations.list(suite, limit).await?;
    Ok(axum::Json(EvaluationList {
        skipped: listed.skipped.len(),
        evaluations: listed.items.into_iter().map(EvaluationView::from).collect(),
    }))
}

pub(crate) async fn get(
    State(evaluations): State<Evaluations>,
    Checked(Path(id)): Checked<Path<String>>,
) -> Result<axum::Json<EvaluationView>, ApiError> {
    let id: EvaluationId = parse_id(&id)?;
    let evaluation = evaluations.get(id.as_str()).await?;
    Ok(axum::Json(evaluation.into()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompareQuery {
    a: Option<String>,
    b: Option<String>,
}

pub(crate) async fn compare(
    State(evaluations): State<Evaluations>,
    Checked(Query(query)): Checked<Query<CompareQuery>>,
) -> Result<axum::Json<EvaluationComparison>, ApiError> {
    let id = |given: Option<String>, name: &str| -> Result<EvaluationId, ApiError> {
        match given.filter(|g| !g.is_empty()) {
            Some(text) => parse_id(&text),
            None => Err(ApiError::new(
                ErrorCode::BadRequest,
                format!("`{name}` is required: the id of an evaluation (`eval_…`)"),
            )),
        }
    };
    let a = id(query.a, "a")?;
    let b = id(query.b, "b")?;
    let comparison = evaluations.compare(a.as_str(), b.as_str()).await?;
    Ok(axum::Json(comparison))
}
