//! The handlers of outbound actions (`/v1/agents/action-requests`), decider
//! overrides (`/v1/agents/decider-overrides`) and the day's budget
//! (`/v1/agents/budget`).
//!
//! A person approves or rejects the content they were shown: every
//! decision carries the action's digest, and the ledger refuses it when
//! the digest is not the action's. An approval delivers the action before
//! the answer, which is the action as it ended.

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hane_coordinator::BudgetReport;
use hane_coordinator::{Approvals, Budgets};
use hane_core::{ActionId, JsonText, RunId, TaskId, tool::OUTBOUND_TOOLS};
use hane_core::{
    ActionRequest, ActionState,
    approval::{ActionOutcome, ConnectionTarget},
};
use hane_core::{DeciderKind, Decision};
use hane_store::OverrideRow;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, Checked, ErrorCode};
use crate::route::{Access, Route, of};
use crate::routes::{Caller, SKIPPED, body_fields, parameter, parse_id};

/// The routes of outbound actions, decider overrides and the budget.
pub(crate) fn routes() -> Vec<Route> {
    let mut routes = read_routes();
    routes.extend(decision_routes());
    routes.extend(override_routes());
    routes
}

/// Reading outbound actions.
fn read_routes() -> Vec<Route> {
    let states: Vec<&str> = ActionState::ALL.iter().map(|s| s.as_str()).collect();
    vec![
        Route::get(
            "/v1/agents/action-requests",
            Access::Read,
            list,
            (
                "listActionRequests",
                "List the outbound actions agents proposed, oldest first",
            ),
        )
        .describe(
            "Each action holds exactly what would go out (`recipient`, `content`), the `digest` of \
             that, its `state`, who decides it and the trail of decisions. `state=pending` lists \
             the ones waiting for a decision. At most 1000 are listed, the oldest first: filter by \
             `state` or `run` to see others.",
        )
        .param(json!({
            "name": "state",
            "in": "query",
            "required": false,
            "description": "Only actions in this state; `pending` for those waiting for a decision",
            "schema": { "type": "string", "enum": states }
        }))
        .param(json!({
            "name": "run",
            "in": "query",
            "required": false,
            "description": "Only actions the run with this id proposed",
            "schema": { "type": "string" }
        }))
        .answer(200, "The actions, oldest first", of::<ActionRequestList>())
        .errors(&[(400, "BadRequest")]),
        Route::get(
            "/v1/agents/action-requests/{id}",
            Access::Read,
            get,
            ("getActionRequest", "Get an outbound action"),
        )
        .describe(
            "`humanApproved` is true only when a person approved it, never for a review agent's or \
             a policy's approval.",
        )
        .param(parameter("ActionId"))
        .answer(200, "The action", of::<ActionView>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")]),
    ]
}

/// A person's decisions on outbound actions, and their reconciliation.
fn decision_routes() -> Vec<Route> {
    let refused = "Nothing was done: the digest is not the action's (`path` is `/digest`; show the \
                   action again), it was decided already, or a review agent decides it";
    let body_errors = [
        (413, "PayloadTooLarge"),
        (415, "UnsupportedMediaType"),
        (422, "InvalidBody"),
    ];
    vec![
        Route::post(
            "/v1/agents/action-requests/{id}/approve",
            Access::Approve,
            approve,
            (
                "approveActionRequest",
                "Approve an outbound action, and deliver it",
            ),
        )
        .describe(
            "`digest` must be the digest of the content the approver was shown; when it is not the \
             action's, nothing is done (409). The action is then delivered, at most once, before \
             the answer, which is the action as it ended: `delivered`; `failed`, when nothing went \
             out (`outcome.detail` says why, such as a delivery adapter that is not configured); or \
             `unknown`, when it may have gone out (it is never resent: reconcile it). Only an action \
             a person decides can be approved here; one waiting for a review agent cannot (409), \
             and a key with groups approves only an action assigned to one of them (403). \
             The decision is recorded as by `key:NAME`, the API key's name.",
        )
        .param(parameter("ActionId"))
        .body(of::<DecideRequest>())
        .answer(
            200,
            "The action as it ended: `delivered`, `failed` or `unknown`",
            of::<ActionView>(),
        )
        .errors(&[(400, "BadRequest"), (404, "NotFound")])
        .error(409, refused)
        .errors(&body_errors),
        Route::post(
            "/v1/agents/action-requests/{id}/reject",
            Access::Approve,
            reject,
            ("rejectActionRequest", "Reject an outbound action"),
        )
        .describe(
            "Nothing is sent; the run that proposed it goes on with the action `rejected`. \
             `digest` and the key's groups are checked as for approving. The decision is recorded \
             as by `key:NAME`.",
        )
        .param(parameter("ActionId"))
        .body(of::<DecideRequest>())
        .answer(200, "The action, `rejected`", of::<ActionView>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")])
        .error(409, refused)
        .errors(&body_errors),
        Route::post(
            "/v1/agents/action-requests/{id}/reconcile",
            Access::Approve,
            reconcile,
            (
                "reconcileActionRequest",
                "Record what became of an `unknown` action",
            ),
        )
        .describe(
            "An `unknown` action may or may not have gone out, and is never resent. A person who \
             found out records `delivered` or `failed` with a note; nothing is sent. Only an \
             `unknown` action can be reconciled (409); a key with groups reconciles only an action \
             assigned to one of them (403).",
        )
        .param(parameter("ActionId"))
        .body(of::<ReconcileRequest>())
        .answer(
            200,
            "The action, `delivered` or `failed`",
            of::<ActionView>(),
        )
        .errors(&[(400, "BadRequest"), (404, "NotFound")])
        .error(
            409,
            "The action is not `unknown`; the message says what is known of it",
        )
        .errors(&body_errors),
    ]
}

/// Decider overrides, and the day's budget.
fn override_routes() -> Vec<Route> {
    vec![
        Route::get(
            "/v1/agents/decider-overrides",
            Access::Read,
            list_overrides,
            ("listDeciderOverrides", "List the decider overrides"),
        )
        .describe(
            "An override sends every new action of its tool to people, whatever the agents' \
             decider policies say.",
        )
        .answer(
            200,
            "The overrides, by tool",
            of::<DeciderOverrideList>(),
        ),
        Route::post(
            "/v1/agents/decider-overrides",
            Access::Operate,
            add_override,
            (
                "addDeciderOverride",
                "Send every new action of an outbound tool to people",
            ),
        )
        .describe(
            "From the next action on, people decide every action of `tool`, whatever the agents' \
             decider policies say; actions proposed earlier keep their decider. Setting an override \
             for a tool that has one replaces it.",
        )
        .body(of::<DeciderOverrideRequest>())
        .answer(201, "The override", of::<DeciderOverride>())
        .errors(&[
            (400, "BadRequest"),
            (413, "PayloadTooLarge"),
            (415, "UnsupportedMediaType"),
        ])
        .error(
            422,
            "The body is not valid, or `tool` is not an outbound tool (`path` is `/tool`)",
        ),
        Route::new(
            axum::http::Method::DELETE,
            "/v1/agents/decider-overrides/{tool}",
            Access::Operate,
            remove_override,
            ("removeDeciderOverride", "Remove a decider override"),
        )
        .describe("From the next action on, the agents' decider policies choose again.")
        .param(parameter("Tool"))
        .raw(204, json!({ "description": "The override is removed" }))
        .error(404, "The tool has no override"),
        Route::get(
            "/v1/agents/budget",
            Access::Read,
            budget,
            ("getBudget", "Today's usage, with the budget that limits it"),
        )
        .describe(
            "Runs started, external actions executed and model tokens of today (UTC) for this \
             server's project and environment (`HANE_PROJECT`, `HANE_ENVIRONMENT`), the active \
             release's Budget for them if it has one, and the alerts recorded today. Usage is \
             counted whether or not there is a Budget.",
        )
        .answer(200, "Today's usage and budget", of::<BudgetReport>()),
    ]
}

/// The fields of an approve or reject request's body.
const DECIDE_FIELDS: [&str; 2] = ["digest", "reason"];

/// The fields of a reconcile request's body.
const RECONCILE_FIELDS: [&str; 2] = ["state", "note"];

/// The fields of an override request's body.
const OVERRIDE_FIELDS: [&str; 2] = ["tool", "reason"];

fn invalid(message: impl Into<String>, field: &str) -> ApiError {
    ApiError::new(ErrorCode::InvalidInput, message).at(format!("/{field}"))
}

/// Field `name`, a non-empty string; `what` says what it holds.
fn required_text(
    fields: &mut Map<String, Value>,
    name: &str,
    what: &str,
) -> Result<String, ApiError> {
    match fields.remove(name) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text),
        Some(_) => Err(invalid(
            format!("`{name}` must be a non-empty string: {what}"),
            name,
        )),
        None => Err(invalid(format!("`{name}` is required: {what}"), name)),
    }
}

/// Field `name`, a string or null when given.
fn optional_text(fields: &mut Map<String, Value>, name: &str) -> Result<Option<String>, ApiError> {
    match fields.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(invalid(format!("`{name}` must be a string"), name)),
    }
}

/// A person's approval or rejection of the content they were shown.
// `decide_body` reads it field by field, so that every error names its
// field; the document's schema of the body is this type's.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
struct DecideRequest {
    /// The digest of the content the decider was shown
    #[schemars(length(min = 1))]
    digest: String,
    /// Why, kept in the trail
    reason: Option<String>,
}

fn decide_body(body: Value) -> Result<DecideRequest, ApiError> {
    let mut fields = body_fields(
        body,
        &DECIDE_FIELDS,
        "`digest` (and optionally `reason`)",
        "a decision",
    )?;
    Ok(DecideRequest {
        digest: required_text(
            &mut fields,
            "digest",
            "the action's digest (`sha256:…`) as shown, so the decision is about exactly that content",
        )?,
        reason: optional_text(&mut fields, "reason")?,
    })
}

/// What a person found out about an `unknown` action. The state is kept
/// as given: the ledger checks it.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
struct ReconcileRequest {
    #[schemars(extend("enum" = ["delivered", "failed"]))]
    state: String,
    /// What was found out
    #[schemars(length(min = 1))]
    note: String,
}

fn reconcile_body(body: Value) -> Result<ReconcileRequest, ApiError> {
    let mut fields = body_fields(
        body,
        &RECONCILE_FIELDS,
        "`state` and `note`",
        "a reconciliation",
    )?;
    Ok(ReconcileRequest {
        state: required_text(&mut fields, "state", "`delivered` or `failed`")?,
        note: required_text(
            &mut fields,
            "note",
            "what was found out, such as where the message was seen",
        )?,
    })
}

/// A decider override to set: people decide every new action of `tool`.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
struct DeciderOverrideRequest {
    #[schemars(extend("enum" = OUTBOUND_TOOLS))]
    tool: String,
    #[schemars(length(min = 1))]
    reason: String,
}

fn override_body(body: Value) -> Result<DeciderOverrideRequest, ApiError> {
    let mut fields = body_fields(body, &OVERRIDE_FIELDS, "`tool` and `reason`", "an override")?;
    Ok(DeciderOverrideRequest {
        tool: required_text(
            &mut fields,
            "tool",
            "the outbound tool whose actions people decide, such as `communication.send_email`",
        )?,
        reason: required_text(&mut fields, "reason", "why people decide them for now")?,
    })
}

/// `sha256:` and the hex SHA-256 of the canonical JSON of the action's
/// tool, recipient and content: exactly what would go out.
#[derive(Serialize, JsonSchema)]
#[serde(transparent)]
struct Digest(#[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))] String);

/// An outbound action as the API shows it: the stored [`ActionRequest`]
/// but the process that owns an attempt (the host's process ids are not
/// for readers), with who approved it.
// `ActionRequest::to_json` (which the CLI prints) writes the same; a test
// below holds them together.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    rename = "ActionRequest",
    deny_unknown_fields,
    description = "An outbound action an agent proposed: exactly what would go out, and everything decided about it"
)]
pub(crate) struct ActionView {
    id: ActionId,
    /// The run that proposed it
    run: RunId,
    /// That run's agent
    agent: String,
    #[schemars(extend("enum" = OUTBOUND_TOOLS))]
    tool: String,
    /// An address, a phone number, or for `integration.execute` the
    /// connection's name
    recipient: String,
    /// What goes out, fixed when proposed: `subject` and `body` of an
    /// email, `text` of an SMS, `message` of a call, `method`, `path` and
    /// `body` of a customer API call
    #[schemars(with = "Map<String, Value>")]
    content: JsonText,
    digest: Digest,
    state: ActionState,
    /// Who decides it now
    decider: DeciderKind,
    /// The group whose people decide it
    assignment: Option<String>,
    /// The review agent that decides it
    reviewer: Option<String>,
    /// The DeciderPolicy rule that chose the decider, such as
    /// `fleet-outbound rule 2`
    rule: Option<String>,
    /// A decider override sent it to people
    overridden: bool,
    /// The approval task, when a person decides
    task: Option<TaskId>,
    /// For `integration.execute`: the customer API it calls
    connection: Option<ConnectionTarget>,
    /// Every decision, oldest first
    trail: Vec<Decision>,
    /// Delivery attempts, recorded before delivery starts; at most one
    /// ever
    #[schemars(length(max = 1))]
    attempts: Vec<AttemptView>,
    /// How it ended
    outcome: Option<ActionOutcome>,
    /// When it was proposed, in milliseconds since the Unix epoch
    created_at_ms: u64,
    /// When it last changed, in milliseconds since the Unix epoch
    updated_at_ms: u64,
    /// True only when a person approved it
    human_approved: bool,
    /// The kind of decider that approved it, if one did
    approved_by: Option<DeciderKind>,
}

/// A delivery attempt as the API shows it: when it started.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, deny_unknown_fields)]
struct AttemptView {
    /// In milliseconds since the Unix epoch
    started_at_ms: u64,
}

impl From<ActionRequest> for ActionView {
    fn from(action: ActionRequest) -> Self {
        let human_approved = action.human_approved();
        let approved_by = action.approval().map(|d| d.kind);
        ActionView {
            id: action.id,
            run: action.run,
            agent: action.agent,
            tool: action.tool,
            recipient: action.recipient,
            content: action.content,
            digest: Digest(action.digest),
            state: action.state,
            decider: action.decider,
            assignment: action.assignment,
            reviewer: action.reviewer,
            rule: action.rule,
            overridden: action.overridden,
            task: action.task,
            connection: action.connection,
            trail: action.trail,
            attempts: action
                .attempts
                .into_iter()
                .map(|a| AttemptView {
                    started_at_ms: a.started_at_ms,
                })
                .collect(),
            outcome: action.outcome,
            created_at_ms: action.created_at_ms,
            updated_at_ms: action.updated_at_ms,
            human_approved,
            approved_by,
        }
    }
}

/// A listing of actions.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub(crate) struct ActionRequestList {
    action_requests: Vec<ActionView>,
    #[schemars(description = SKIPPED)]
    skipped: usize,
}

/// A decider override: people decide every new action of its tool.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub(crate) struct DeciderOverride {
    #[schemars(extend("enum" = OUTBOUND_TOOLS))]
    tool: String,
    reason: String,
    /// `key:NAME` or `cli:USER`
    created_by: String,
    /// In milliseconds since the Unix epoch
    created_at_ms: u64,
}

impl From<OverrideRow> for DeciderOverride {
    fn from(row: OverrideRow) -> Self {
        DeciderOverride {
            tool: row.tool,
            reason: row.reason,
            created_by: row.created_by,
            created_at_ms: row.created_at_ms,
        }
    }
}

/// The decider overrides, by tool.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct DeciderOverrideList {
    overrides: Vec<DeciderOverride>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    state: Option<String>,
    run: Option<String>,
}

pub(crate) async fn list(
    State(approvals): State<Approvals>,
    Checked(Query(query)): Checked<Query<ListQuery>>,
) -> Result<axum::Json<ActionRequestList>, ApiError> {
    let bad = |name: &str, message: String| {
        ApiError::new(
            ErrorCode::BadRequest,
            format!("query parameter `{name}`: {message}"),
        )
    };
    // `?state=` is the same as no filter.
    let given = |v: Option<String>| v.filter(|v| !v.is_empty());
    let state = given(query.state)
        .map(|s| {
            s.parse::<ActionState>()
                .map_err(|e| bad("state", e.to_string()))
        })
        .transpose()?;
    let run = given(query.run)
        .map(|r| r.parse::<RunId>().map_err(|e| bad("run", e.to_string())))
        .transpose()?;
    let actions = approvals.ledger().list(state, run.as_ref()).await?;
    Ok(axum::Json(ActionRequestList {
        skipped: actions.skipped.len(),
        action_requests: actions.items.into_iter().map(ActionView::from).collect(),
    }))
}

pub(crate) async fn get(
    State(approvals): State<Approvals>,
    Checked(Path(id)): Checked<Path<String>>,
) -> Result<axum::Json<ActionView>, ApiError> {
    let id: ActionId = parse_id(&id)?;
    Ok(axum::Json(
        approvals.ledger().get(id.as_str()).await?.into(),
    ))
}

pub(crate) async fn approve(
    State(approvals): State<Approvals>,
    Extension(caller): Extension<Caller>,
    Checked(Path(id)): Checked<Path<String>>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<axum::Json<ActionView>, ApiError> {
    let id: ActionId = parse_id(&id)?;
    let body = decide_body(body)?;
    // Through the approvals service, so the active release's budget applies as it
    // is now.
    let action = approvals
        .approve(id.as_str(), &body.digest, caller.person(), body.reason)
        .await?;
    Ok(axum::Json(action.into()))
}

pub(crate) async fn reject(
    State(approvals): State<Approvals>,
    Extension(caller): Extension<Caller>,
    Checked(Path(id)): Checked<Path<String>>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<axum::Json<ActionView>, ApiError> {
    let id: ActionId = parse_id(&id)?;
    let body = decide_body(body)?;
    let action = approvals
        .ledger()
        .reject(id.as_str(), &body.digest, caller.person(), body.reason)
        .await?;
    Ok(axum::Json(action.into()))
}

pub(crate) async fn reconcile(
    State(approvals): State<Approvals>,
    Extension(caller): Extension<Caller>,
    Checked(Path(id)): Checked<Path<String>>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<axum::Json<ActionView>, ApiError> {
    let id: ActionId = parse_id(&id)?;
    let body = reconcile_body(body)?;
    let action = approvals
        .ledger()
        .reconcile(id.as_str(), &body.state, caller.person(), &body.note)
        .await?;
    Ok(axum::Json(action.into()))
}

pub(crate) async fn list_overrides(
    State(approvals): State<Approvals>,
) -> Result<axum::Json<DeciderOverrideList>, ApiError> {
    let overrides = approvals.overrides().await?;
    Ok(axum::Json(DeciderOverrideList {
        overrides: overrides.into_iter().map(DeciderOverride::from).collect(),
    }))
}

pub(crate) async fn add_override(
    State(approvals): State<Approvals>,
    Extension(caller): Extension<Caller>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<Response, ApiError> {
    let body = override_body(body)?;
    let row = approvals
        .add_override(&body.tool, &body.reason, &caller.by())
        .await?;
    Ok((StatusCode::CREATED, axum::Json(DeciderOverride::from(row))).into_response())
}

pub(crate) async fn remove_override(
    State(approvals): State<Approvals>,
    Checked(Path(tool)): Checked<Path<String>>,
) -> Result<StatusCode, ApiError> {
    if approvals.remove_override(&tool).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            ErrorCode::NotFound,
            format!(
                "no decider override for `{tool}`: GET /v1/agents/decider-overrides lists them"
            ),
        ))
    }
}

pub(crate) async fn budget(
    State(budgets): State<Budgets>,
) -> Result<axum::Json<BudgetReport>, ApiError> {
    Ok(axum::Json(budgets.report().await?))
}

#[cfg(test)]
mod tests {
    use hane_core::{Verdict, approval::Attempt};

    use super::*;

    /// What the API sends of an action is what `ActionRequest::to_json`
    /// (which the CLI prints) writes, field for field.
    #[test]
    fn an_action_is_shown_as_to_json_writes_it() {
        let mut action = ActionRequest {
            id: ActionId::new(),
            run: RunId::new(),
            agent: "desk".to_owned(),
            tool: "integration.execute".to_owned(),
            recipient: "crm".to_owned(),
            content: JsonText::from_value(&json!({"method": "POST", "path": "/x", "body": {}})),
            digest: hane_core::digest("integration.execute", "crm", &json!({})),
            state: ActionState::Delivered,
            decider: DeciderKind::Person,
            assignment: Some("desk".to_owned()),
            reviewer: None,
            rule: Some("fleet rule 1".to_owned()),
            overridden: true,
            task: Some(TaskId::new()),
            connection: Some(ConnectionTarget {
                name: "crm".to_owned(),
                base_url: "https://crm.example".to_owned(),
                credential: None,
                timeout_ms: Some(5000),
                ca_certificates: None,
                max_response_bytes: Some(1 << 20),
                response_schema: Some(JsonText::from_value(&json!({"type": "object"}))),
            }),
            trail: vec![Decision {
                kind: DeciderKind::Person,
                by: "key:desk".to_owned(),
                verdict: Verdict::Approve,
                reason: None,
                digest: "sha256:0".to_owned(),
                at_ms: 2,
            }],
            attempts: vec![Attempt {
                owner: "12:34".to_owned(),
                started_at_ms: 3,
            }],
            outcome: Some(ActionOutcome {
                state: ActionState::Delivered,
                detail: "202".to_owned(),
                reconciled_by: None,
                at_ms: 4,
                schema_violations: vec!["\"id\" is a required property".to_owned()],
            }),
            created_at_ms: 1,
            updated_at_ms: 4,
        };
        let shown = |action: &ActionRequest| {
            serde_json::to_value(ActionView::from(action.clone())).expect("JSON")
        };
        assert_eq!(shown(&action), action.to_json());
        assert!(shown(&action)["attempts"][0].get("owner").is_none());
        action.trail.clear();
        action.attempts.clear();
        action.connection = None;
        action.outcome = None;
        assert_eq!(shown(&action), action.to_json());
        assert_eq!(shown(&action)["approvedBy"], Value::Null);
    }

    #[test]
    fn bodies_name_the_field() {
        let err = |e: ApiError| e.body()["error"].clone();
        let e = err(decide_body(json!({})).err().expect("no digest"));
        assert_eq!(e["path"], "/digest");
        assert_eq!(e["code"], "invalid_input");
        assert!(
            e["message"].as_str().unwrap().contains("is required"),
            "{e}"
        );
        let e = err(decide_body(json!({"digest": 1})).err().expect("a number"));
        assert_eq!(e["path"], "/digest");
        let e = err(decide_body(json!({"digest": "sha256:a", "reason": 2}))
            .err()
            .expect("reason"));
        assert_eq!(e["path"], "/reason");
        let e = err(decide_body(json!({"digest": "sha256:a", "by": "me"}))
            .err()
            .expect("by"));
        assert_eq!(e["path"], "/by");
        assert!(
            e["message"].as_str().unwrap().contains("digest, reason"),
            "{e}"
        );
        let e = err(decide_body(json!("sha256:a")).err().expect("not an object"));
        assert_eq!(e["path"], "");
        let ok = decide_body(json!({"digest": "sha256:a", "reason": null})).expect("valid");
        assert_eq!((ok.digest.as_str(), ok.reason), ("sha256:a", None));

        let e = err(reconcile_body(json!({"state": "delivered"}))
            .err()
            .expect("no note"));
        assert_eq!(e["path"], "/note");
        let e = err(reconcile_body(json!({"note": "seen"}))
            .err()
            .expect("no state"));
        assert_eq!(e["path"], "/state");

        let e = err(override_body(json!({"tool": "x"}))
            .err()
            .expect("no reason"));
        assert_eq!(e["path"], "/reason");
        let e = err(override_body(json!({"tool": "", "reason": "r"}))
            .err()
            .expect("empty"));
        assert_eq!(e["path"], "/tool");
    }
}
