//! Evaluations' routes: `POST /v1/agents/evals` (an EvalSuite of the
//! active release run as shadow runs, each result compared with what its
//! case expects), the evaluations read back by id or listed, and two
//! evaluations of one suite compared case by case.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hane_coordinator::Evaluations;
use hane_coordinator::evaluation::EvalError;
use hane_core::{Evaluation, EvaluationComparison, EvaluationId, JsonText};
use hane_store::MAX_EVALUATIONS_LISTED;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, Checked, ErrorCode};
use crate::route::{Access, Route, Shape};
use crate::routes::{body_fields, list_limit, parse_id};

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
        .body(Shape::Named("EvaluationRequest"))
        .answer(
            201,
            "The evaluation, once every case ended",
            Shape::Named("Evaluation"),
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
        .answer(200, "The evaluations", Shape::Named("EvaluationList"))
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
        .answer(200, "The comparison", Shape::Named("EvaluationComparison"))
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
        .answer(200, "The evaluation", Shape::Named("Evaluation"))
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

fn value(text: &JsonText) -> Value {
    text.to_value().unwrap_or(Value::Null)
}

/// Differences with their values as JSON.
fn differences(list: &[hane_core::Difference]) -> Value {
    list.iter()
        .map(|d| {
            json!({
                "path": d.path,
                "expected": value(&d.expected),
                "found": d.found.as_ref().map(value),
            })
        })
        .collect()
}

/// An evaluation as the API shows it: inputs, expectations, results and
/// differences as JSON.
pub(crate) fn evaluation_json(evaluation: &Evaluation) -> Value {
    let mut out = serde_json::to_value(evaluation).expect("an evaluation is always JSON");
    for (case, shown) in evaluation.cases.iter().zip(
        out["cases"]
            .as_array_mut()
            .expect("an evaluation's cases are an array"),
    ) {
        shown["input"] = value(&case.input);
        shown["expect"] = value(&case.expect);
        shown["result"] = case.result.as_ref().map_or(Value::Null, value);
        shown["differences"] = differences(&case.differences);
    }
    out["passesRate"] = Value::Bool(evaluation.meets_pass_rate());
    out
}

fn comparison_json(comparison: &EvaluationComparison) -> Value {
    let mut out = serde_json::to_value(comparison).expect("a comparison is always JSON");
    for (case, shown) in comparison.cases.iter().zip(
        out["cases"]
            .as_array_mut()
            .expect("a comparison's cases are an array"),
    ) {
        shown["differences"] = differences(&case.differences);
    }
    out
}

pub(crate) async fn create(
    State(evaluations): State<Evaluations>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<Response, ApiError> {
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
    let evaluation = evaluations.evaluate(&suite, |_| {}).await?;
    let location = HeaderValue::try_from(format!("/v1/agents/evals/{}", evaluation.id))
        .expect("an evaluation id is a valid header value");
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(evaluation_json(&evaluation)),
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
) -> Result<axum::Json<Value>, ApiError> {
    let limit = list_limit(query.limit, MAX_EVALUATIONS_LISTED)?;
    let suite = query.suite.filter(|s| !s.is_empty());
    let listed = evaluations.list(suite, limit).await?;
    let evaluations: Vec<Value> = listed.items.iter().map(evaluation_json).collect();
    Ok(axum::Json(
        json!({ "evaluations": evaluations, "skipped": listed.skipped.len() }),
    ))
}

pub(crate) async fn get(
    State(evaluations): State<Evaluations>,
    Checked(Path(id)): Checked<Path<String>>,
) -> Result<axum::Json<Value>, ApiError> {
    let id: EvaluationId = parse_id(&id)?;
    let evaluation = evaluations.get(id.as_str()).await?;
    Ok(axum::Json(evaluation_json(&evaluation)))
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
) -> Result<axum::Json<Value>, ApiError> {
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
    Ok(axum::Json(comparison_json(&comparison)))
}
