//! Workflows' routes: `POST /v1/agents/workflows/{name}/cases` starts a
//! case of a workflow of the active release, `GET …/cases/{id}` reads it,
//! and `POST …/cases/{id}/tasks/{step}` completes a person's task of it.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hane_coordinator::Workflows;
use hane_coordinator::workflow::WorkflowError;
use hane_core::{WorkflowCase, WorkflowCaseId};
use schemars::JsonSchema;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, Checked, ErrorCode};
use crate::route::{Access, Route, of};
use crate::routes::{Caller, body_fields, parse_id};

/// The routes of workflow cases.
pub(crate) fn routes() -> Vec<Route> {
    let workflow_name = json!({
        "name": "name", "in": "path", "required": true,
        "schema": { "type": "string" }, "description": "The workflow's name"
    });
    let case_id = json!({
        "name": "id", "in": "path", "required": true,
        "schema": { "type": "string", "pattern": "^case_[0-9a-hjkmnp-tv-z]{26}$" },
        "description": "The case's id"
    });
    vec![
        Route::post(
            "/v1/agents/workflows/{name}/cases",
            Access::Operate,
            start,
            (
                "startCase",
                "Start a case of a workflow of the active release",
            ),
        )
        .describe(
            "The input is checked against the workflow's input schema; the case is stored \
             `running` and goes on by itself: each step in turn, an agent step as a run of \
             its agent (its input templated from the case's input and earlier steps' \
             outputs), a task step waiting (`waiting`) until a person completes it, a step \
             whose `when` does not hold skipped. The answer is the case as stored at the \
             start; read it again at its `Location`. A case survives a restart of the server \
             and goes on at its step; an agent step's run is never started twice.",
        )
        .param(workflow_name.clone())
        .body(of::<CaseRequest>())
        .answer(
            201,
            "The case, as stored at its start",
            of::<WorkflowCase>(),
        )
        .header("Location", "The case's URL")
        .errors(&[(400, "BadRequest"), (404, "NotFound")])
        .error(409, "No release is active")
        .errors(&[(413, "PayloadTooLarge")])
        .error(
            422,
            "The body is not a case request, or the input does not match the workflow's input schema (`path` points at the place)",
        ),
        Route::get(
            "/v1/agents/workflows/{name}/cases/{id}",
            Access::Read,
            get,
            ("getCase", "Get a case of a workflow"),
        )
        .param(workflow_name.clone())
        .param(case_id.clone())
        .answer(200, "The case", of::<WorkflowCase>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")]),
        Route::post(
            "/v1/agents/workflows/{name}/cases/{id}/tasks/{step}",
            Access::Approve,
            complete,
            ("completeTask", "Complete a person's task of a case"),
        )
        .describe(
            "The step must be a task waiting for a person. `result` becomes the step's \
             output, which later steps read as `steps.STEP`; the case then goes on by \
             itself. A key made with `--group` completes only the tasks of its groups.",
        )
        .param(workflow_name)
        .param(case_id)
        .param(json!({
            "name": "step", "in": "path", "required": true,
            "schema": { "type": "string" }, "description": "The task step's id"
        }))
        .body(of::<TaskCompletion>())
        .answer(200, "The case, the task done", of::<WorkflowCase>())
        .errors(&[(400, "BadRequest"), (403, "Forbidden"), (404, "NotFound")])
        .error(409, "The step is not a task waiting for a person")
        .errors(&[(413, "PayloadTooLarge")])
        .error(
            422,
            "The body is not a completion (`path` is `/result`)",
        ),
    ]
}

impl From<WorkflowError> for ApiError {
    fn from(e: WorkflowError) -> Self {
        match e {
            WorkflowError::Run(e) => e.into(),
            WorkflowError::InvalidInput { ref path, .. } => {
                let path = format!("/input{path}");
                ApiError::of_kind(e.kind(), "workflow", &e).at(path)
            }
            e @ WorkflowError::InvalidResult => {
                ApiError::of_kind(e.kind(), "workflow", &e).at("/result")
            }
            e => ApiError::of_kind(e.kind(), "workflow", &e),
        }
    }
}

/// A request to start a case.
// `start` reads it field by field, so that every error names its field;
// the document's schema of the body is this type's.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
struct CaseRequest {
    /// The case's input, checked against the workflow's input schema
    #[schemars(default)]
    input: Map<String, Value>,
}

/// A person's task of a case, done.
// `complete` reads it field by field, as `start` does.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
struct TaskCompletion {
    /// What the person found or did; later steps read it as `steps.STEP`
    result: Map<String, Value>,
}

/// The object at `field` of a body, `{}` when absent.
fn object_field(
    fields: &mut Map<String, Value>,
    field: &str,
    required: bool,
    what: &str,
) -> Result<Map<String, Value>, ApiError> {
    match fields.remove(field) {
        Some(Value::Object(object)) => Ok(object),
        None if !required => Ok(Map::new()),
        _ => Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!("`{field}` must be a JSON object: {what}"),
        )
        .at(format!("/{field}"))),
    }
}

pub(crate) async fn start(
    State(workflows): State<Workflows>,
    Checked(Path(name)): Checked<Path<String>>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<Response, ApiError> {
    let mut fields = body_fields(
        body,
        &["input"],
        "`input`: the case's input",
        "a case request",
    )?;
    let body = CaseRequest {
        input: object_field(&mut fields, "input", false, "the case's input")?,
    };
    let case = workflows
        .start_case(&name, Value::Object(body.input))
        .await?;
    let location = HeaderValue::try_from(format!(
        "/v1/agents/workflows/{}/cases/{}",
        case.workflow, case.id
    ))
    .expect("a workflow's name and a case id make a valid header value");
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(case),
    )
        .into_response())
}

/// The case `id` of workflow `name`; a case of another workflow is not
/// found here.
async fn case_of(workflows: &Workflows, name: &str, id: &str) -> Result<WorkflowCase, ApiError> {
    let id: WorkflowCaseId = parse_id(id)?;
    let case = workflows.case(&id).await?;
    if case.workflow != name {
        return Err(WorkflowError::NotFound(id.to_string()).into());
    }
    Ok(case)
}

pub(crate) async fn get(
    State(workflows): State<Workflows>,
    Checked(Path((name, id))): Checked<Path<(String, String)>>,
) -> Result<axum::Json<WorkflowCase>, ApiError> {
    let case = case_of(&workflows, &name, &id).await?;
    Ok(axum::Json(case))
}

pub(crate) async fn complete(
    State(workflows): State<Workflows>,
    Extension(caller): Extension<Caller>,
    Checked(Path((name, id, step))): Checked<Path<(String, String, String)>>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<axum::Json<WorkflowCase>, ApiError> {
    let mut fields = body_fields(
        body,
        &["result"],
        "`result`: what the person found or did, a JSON object",
        "a task's completion",
    )?;
    let body = TaskCompletion {
        result: object_field(
            &mut fields,
            "result",
            true,
            "what the person found or did, which later steps read",
        )?,
    };
    let case = case_of(&workflows, &name, &id).await?;
    // A key made for some groups completes only their tasks.
    let assignment = case
        .steps
        .iter()
        .find(|s| s.id == step)
        .and_then(|s| s.task.as_ref())
        .map(|t| t.assignment.clone());
    if let (Some(groups), Some(assignment)) = (&caller.groups, &assignment)
        && !groups.contains(assignment)
    {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "the task of step `{step}` is for {assignment}; this key completes only the tasks of {}",
                groups.join(", ")
            ),
        ));
    }
    let case = workflows
        .complete_task(&case.id, &step, Value::Object(body.result), &caller.by())
        .await?;
    Ok(axum::Json(case))
}
