//! The OpenAPI 3.1 document of the API, built from [`ROUTES`] so that the
//! router and the document list the same routes.

use std::sync::LazyLock;

use hane_core::ActionState;
use hane_core::RunStatus;
use serde_json::{Map, Value, json};

use crate::mcp::{MAX_MCP_MESSAGE_BYTES, MCP_PATH, MCP_RELEASE_PATH};
use crate::routes::{Access, DEFAULT_LIST_LIMIT, Endpoint, MAX_BODY_BYTES, ROUTES, Route};

mod schemas;

use schemas::components;

/// The OpenAPI 3.1 document describing every route, served at
/// `GET /v1/openapi.json`: the request and response schemas, the bearer
/// scheme, and (in each operation's description) the role it needs.
pub fn openapi() -> &'static Value {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(document);
    &DOCUMENT
}

fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// The `skipped` of a listing: how many stored items it left out.
fn skipped() -> Value {
    json!({
        "type": "integer",
        "minimum": 0,
        "description": "How many stored items were left out because they do not read (damaged, or written by a newer hane); the server logs each with its id, and `hane store check` lists them"
    })
}

fn response(name: &str) -> Value {
    json!({ "$ref": format!("#/components/responses/{name}") })
}

fn ok(description: &str, schema_name: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": schema(schema_name) } }
    })
}

fn document() -> Value {
    let mut paths = Map::new();
    for route in &ROUTES {
        let item = paths
            .entry(route.path)
            .or_insert_with(|| Value::Object(Map::new()));
        item[route.method.as_str().to_ascii_lowercase()] = operation(route);
    }
    mcp_paths(&mut paths);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "hane API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": format!(
                "Start agent runs from the active release, follow them, list the tools they may call, \
                 and decide the outbound actions (emails, text messages, calls, customer API calls) \
                 they propose. Every route under /v1/agents needs an API key, sent as \
                 `Authorization: Bearer KEY`; create one with `hane keys create NAME --role ROLE`. \
                 A `viewer` key reads; an `approver` key also approves, rejects and reconciles \
                 outbound actions; an `operator` key does all that, starts and cancels runs and sets \
                 decider overrides. An approver or operator key made with `--group` decides only the \
                 actions assigned to its groups (403 for others). Request bodies are at most {MAX_BODY_BYTES} bytes. Every error is \
                 answered with an `Error` body."
            ),
        },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": components(),
    })
}

fn operation(route: &Route) -> Value {
    let (id, summary, description) = match route.endpoint {
        Endpoint::Health => ("health", "Whether the server is up", ""),
        Endpoint::OpenApi => ("openapi", "This document", ""),
        Endpoint::StartRun => (
            "startRun",
            "Start a run of an agent",
            "Starts a run of `agent` from the active release with `input`, which must be valid \
             against the agent's input schema. The run is `queued` when this answers, unless \
             `wait` is true (in the body or the query), when it answers once the run has ended. \
             With `attach: true` the run is driven by the caller instead of the agent's driver: \
             the answer's `Hane-Run-Token` header carries the run's token, for the Model \
             Gateway's routes and the run's tool calls; the run ends when `submit_result` \
             accepts its result, when it is cancelled, or at `maxSeconds`.",
        ),
        Endpoint::ListRuns => ("listRuns", "List runs, newest first", ""),
        Endpoint::GetRun => ("getRun", "Get a run", ""),
        Endpoint::CancelRun => (
            "cancelRun",
            "Cancel a run",
            "Its next tool call is refused and its running operations are cancelled; it ends \
             `cancelled`. The answer is the run once it has ended (within 10 seconds; a run \
             that takes longer is answered as it is then, and still ends `cancelled`). A run \
             that already ended cannot be cancelled (409).",
        ),
        Endpoint::RunTasks => (
            "listRunTasks",
            "List the tasks for people a run created, such as handovers",
            "",
        ),
        Endpoint::ListTools => (
            "listTools",
            "List the tools the active release offers",
            "Every tool an agent of the active release may be allowed, with its input and output \
             schemas. Which of them an agent may call is in its definition's `tools`.",
        ),
        Endpoint::ListActions => (
            "listActionRequests",
            "List the outbound actions agents proposed, oldest first",
            "Each action holds exactly what would go out (`recipient`, `content`), the `digest` of \
             that, its `state`, who decides it and the trail of decisions. `state=pending` lists \
             the ones waiting for a decision. At most 1000 are listed, the oldest first: filter by \
             `state` or `run` to see others.",
        ),
        Endpoint::GetAction => (
            "getActionRequest",
            "Get an outbound action",
            "`humanApproved` is true only when a person approved it, never for a review agent's or \
             a policy's approval.",
        ),
        Endpoint::ApproveAction => (
            "approveActionRequest",
            "Approve an outbound action, and deliver it",
            "`digest` must be the digest of the content the approver was shown; when it is not the \
             action's, nothing is done (409). The action is then delivered, at most once, before \
             the answer, which is the action as it ended: `delivered`; `failed`, when nothing went \
             out (`outcome.detail` says why, such as a delivery adapter that is not configured); or \
             `unknown`, when it may have gone out (it is never resent: reconcile it). Only an action \
             a person decides can be approved here; one waiting for a review agent cannot (409), \
             and a key with groups approves only an action assigned to one of them (403). \
             The decision is recorded as by `key:NAME`, the API key's name.",
        ),
        Endpoint::RejectAction => (
            "rejectActionRequest",
            "Reject an outbound action",
            "Nothing is sent; the run that proposed it goes on with the action `rejected`. \
             `digest` and the key's groups are checked as for approving. The decision is recorded \
             as by `key:NAME`.",
        ),
        Endpoint::ReconcileAction => (
            "reconcileActionRequest",
            "Record what became of an `unknown` action",
            "An `unknown` action may or may not have gone out, and is never resent. A person who \
             found out records `delivered` or `failed` with a note; nothing is sent. Only an \
             `unknown` action can be reconciled (409); a key with groups reconciles only an action \
             assigned to one of them (403).",
        ),
        Endpoint::ListOverrides => (
            "listDeciderOverrides",
            "List the decider overrides",
            "An override sends every new action of its tool to people, whatever the agents' \
             decider policies say.",
        ),
        Endpoint::AddOverride => (
            "addDeciderOverride",
            "Send every new action of an outbound tool to people",
            "From the next action on, people decide every action of `tool`, whatever the agents' \
             decider policies say; actions proposed earlier keep their decider. Setting an override \
             for a tool that has one replaces it.",
        ),
        Endpoint::RemoveOverride => (
            "removeDeciderOverride",
            "Remove a decider override",
            "From the next action on, the agents' decider policies choose again.",
        ),
        Endpoint::CreateConversation => (
            "createConversation",
            "Start a conversation with an agent",
            "Each message of the conversation starts an ordinary run of the agent whose context \
             is built from the conversation so far. With `memory`, the conversation starts from \
             a saved history (any memory version this server reads; see \
             `GET /v1/agents/conversations/memory-schema`): it is checked, redacted, and its \
             actions are replaced by the execution ledger's; `notes` says what changed.",
        ),
        Endpoint::ListConversations => (
            "listConversations",
            "List conversations, the most recently changed first",
            "",
        ),
        Endpoint::GetConversation => (
            "getConversation",
            "Get a conversation: its messages, each with its run as it is now",
            "",
        ),
        Endpoint::SendMessage => (
            "sendMessage",
            "Send a message: start the agent's run for it",
            "The run's input is `input` when given, else `{\"message\": TEXT}` when the agent's \
             input schema takes it, else what the release's default model derives from the text \
             for that agent (422 at `/input` with what is missing when it cannot). One message at a time: while the previous message's run has \
             not ended, a new one is refused with 409. With `Accept: text/event-stream` the reply \
             is followed as Server-Sent Events: `message` (the entry and its run), then `text` \
             (the model's text as it streams), `tool_call` (each call as it ends), \
             `action_pending` (an outbound action waiting for a person, with its digest and how \
             to approve it) and `end` (the run as it ended).",
        ),
        Endpoint::GetMemory => (
            "getMemory",
            "The conversation's current context, as versioned JSON",
            "Messages, run summaries and action states (the execution ledger's). Never holds a \
             run's token, an API key or a credential: they are replaced by `***`.",
        ),
        Endpoint::PutMemory => (
            "putMemory",
            "Save a memory as the conversation's context from now on",
            "Checked like a new conversation's `memory`. It grants nothing: permissions, limits \
             and budgets come from the active release, action states from the ledger. A newer \
             `schemaVersion` than this server reads is refused with 422.",
        ),
        Endpoint::MemorySchema => (
            "memorySchema",
            "The JSON Schema of the memory format this server writes",
            "",
        ),
        Endpoint::CreateRequest => (
            "createRequest",
            "Reception: start the right agent for a request in free text",
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
        ),
        Endpoint::ListRequests => (
            "listRequests",
            "List the requests reception answered, newest first",
            "",
        ),
        Endpoint::GetRequest => ("getRequest", "Get a request reception answered", ""),
        Endpoint::CreateEvaluation => (
            "createEvaluation",
            "Evaluate an agent on an EvalSuite of the active release",
            "Each case of the suite runs as a shadow run of the suite's agent (nothing is sent, \
             no person is asked; at most 8 cases at once), and its result is compared with the \
             case's `expect`: every expected field must be present and equal (maps compare the \
             same way inside, arrays by length then element, numbers by value); fields the case \
             does not name are not compared. A case whose run fails or cannot start fails. The \
             evaluation is stored and answered when the last case ends, at its `Location`. The \
             runs count against the day's budget like any run.",
        ),
        Endpoint::ListEvaluations => ("listEvaluations", "List evaluations, newest first", ""),
        Endpoint::CompareEvaluations => (
            "compareEvaluations",
            "Compare two evaluations of one suite, case by case",
            "Each case of `a` (the earlier) matched by name with `b`'s: `regressed`, `fixed`, \
             `still_failing` or `unchanged`; `added` and `removed` for a case only one has. \
             Evaluations of different suites are refused with 422.",
        ),
        Endpoint::GetEvaluation => ("getEvaluation", "Get an evaluation", ""),
        Endpoint::StartCase => (
            "startCase",
            "Start a case of a workflow of the active release",
            "The input is checked against the workflow's input schema; the case is stored \
             `running` and goes on by itself: each step in turn, an agent step as a run of \
             its agent (its input templated from the case's input and earlier steps' \
             outputs), a task step waiting (`waiting`) until a person completes it, a step \
             whose `when` does not hold skipped. The answer is the case as stored at the \
             start; read it again at its `Location`. A case survives a restart of the server \
             and goes on at its step; an agent step's run is never started twice.",
        ),
        Endpoint::GetCase => ("getCase", "Get a case of a workflow", ""),
        Endpoint::CompleteTask => (
            "completeTask",
            "Complete a person's task of a case",
            "The step must be a task waiting for a person. `result` becomes the step's \
             output, which later steps read as `steps.STEP`; the case then goes on by \
             itself. A key made with `--group` completes only the tasks of its groups.",
        ),
        Endpoint::ChatCompletions => (
            "createChatCompletion",
            "A model call of a run, in the OpenAI Chat Completions format",
            "Served by the run's provider whatever its own format, through the Model Gateway: \
             admitted against the run's state and `maxModelTokens`, counted, and recorded as \
             an LLM turn of the run.",
        ),
        Endpoint::Responses => (
            "createResponse",
            "A model call of a run, in the OpenAI Responses format",
            "As `POST /v1/chat/completions`; stateless: `previous_response_id` and stored \
             responses are refused.",
        ),
        Endpoint::Messages => (
            "createMessage",
            "A model call of a run, in the Anthropic Messages format",
            "As `POST /v1/chat/completions`.",
        ),
        Endpoint::CountTokens => (
            "countMessageTokens",
            "The input tokens of a Messages request, as the Model Gateway counts them",
            "",
        ),
        Endpoint::Models => (
            "listModels",
            "The run's model",
            "In the OpenAI list shape, or Anthropic's when the request has an \
             `anthropic-version` header.",
        ),
        Endpoint::Root => (
            "root",
            "Answers 200, for the clients that probe the server before a model call",
            "",
        ),
        Endpoint::Budget => (
            "getBudget",
            "Today's usage, with the budget that limits it",
            "Runs started, external actions executed and model tokens of today (UTC) for this \
             server's project and environment (`HANE_PROJECT`, `HANE_ENVIRONMENT`), the active \
             release's Budget for them if it has one, and the alerts recorded today. Usage is \
             counted whether or not there is a Budget.",
        ),
    };
    let role = match route.access {
        Access::Public => "Needs no API key.".to_owned(),
        Access::RunToken => format!(
            "Needs {}. Requests and answers (JSON, or Server-Sent Events with `stream: true`) are in the provider's own format; so are errors. Bodies are at most {} bytes.",
            route.access.needs(),
            crate::MAX_MODEL_BODY_BYTES
        ),
        access => format!("Needs {}.", access.needs()),
    };
    let description = if description.is_empty() {
        role
    } else {
        format!("{description}\n\n{role}")
    };
    let mut op = json!({
        "operationId": id,
        "summary": summary,
        "description": description,
    });
    if route.access == Access::Public {
        op["security"] = json!([]);
    }
    if route.access == Access::RunToken {
        op["security"] = json!([{ "runToken": [] }, { "runTokenKey": [] }]);
    }
    let run_id = json!([{ "$ref": "#/components/parameters/RunId" }]);
    let conversation_id = json!([{ "$ref": "#/components/parameters/ConversationId" }]);
    let action_id = json!([{ "$ref": "#/components/parameters/ActionId" }]);
    let workflow_name = json!({
        "name": "name", "in": "path", "required": true,
        "schema": { "type": "string" }, "description": "The workflow's name"
    });
    let case_id = json!({
        "name": "id", "in": "path", "required": true,
        "schema": { "type": "string", "pattern": "^case_[0-9a-hjkmnp-tv-z]{26}$" },
        "description": "The case's id"
    });
    let conflict = |description: &str| {
        json!({
            "description": description,
            "content": { "application/json": { "schema": schema("Error") } }
        })
    };
    let mut responses = json!({});
    match route.endpoint {
        Endpoint::Health => {
            responses["200"] = ok("The server is up", "Health");
        }
        Endpoint::OpenApi => {
            responses["200"] = json!({
                "description": "This document",
                "content": { "application/json": { "schema": { "type": "object" } } }
            });
        }
        Endpoint::StartRun => {
            responses["201"] = ok(
                "The run: `queued`, or ended when `wait` was true",
                "AgentRun",
            );
            responses["201"]["headers"] = json!({
                "Location": {
                    "description": "The run's URL",
                    "schema": { "type": "string" }
                },
                "Hane-Run-Token": {
                    "description": "With `attach: true`: the run's token",
                    "schema": { "type": "string" }
                }
            });
            responses["400"] = response("BadRequest");
            responses["404"] = json!({
                "description": "No agent of this name in the active release (`path` is `/agent`)",
                "content": { "application/json": { "schema": schema("Error") } }
            });
            responses["409"] = json!({
                "description": "No release is active",
                "content": { "application/json": { "schema": schema("Error") } }
            });
            responses["413"] = response("PayloadTooLarge");
            responses["415"] = response("UnsupportedMediaType");
            responses["422"] = json!({
                "description": "The body or the input is not valid, or the agent's driver is not \
                                available in this build; `path` points at the field, such as \
                                `/input/vehicle`",
                "content": { "application/json": { "schema": schema("Error") } }
            });
            responses["429"] = response("BudgetExceeded");
            op["parameters"] = json!([{
                "name": "wait",
                "in": "query",
                "required": false,
                "description": "Answer once the run has ended, as `wait` in the body does",
                "schema": { "type": "boolean", "default": false }
            }]);
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("StartRunRequest") } }
            });
        }
        Endpoint::ListRuns => {
            responses["200"] = ok("The runs", "RunList");
            responses["400"] = response("BadRequest");
            let statuses: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            op["parameters"] = json!([
                {
                    "name": "agent",
                    "in": "query",
                    "required": false,
                    "description": "Only runs of this agent",
                    "schema": { "type": "string" }
                },
                {
                    "name": "status",
                    "in": "query",
                    "required": false,
                    "description": "Only runs with this status",
                    "schema": { "type": "string", "enum": statuses }
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": false,
                    "description": "At most this many runs",
                    "schema": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": hane_store::MAX_RUNS_LISTED,
                        "default": DEFAULT_LIST_LIMIT
                    }
                }
            ]);
        }
        Endpoint::GetRun | Endpoint::CancelRun => {
            responses["200"] = ok("The run", "AgentRun");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            if route.endpoint == Endpoint::CancelRun {
                responses["409"] = json!({
                    "description": "The run already ended",
                    "content": { "application/json": { "schema": schema("Error") } }
                });
            }
            op["parameters"] = run_id;
        }
        Endpoint::RunTasks => {
            responses["200"] = ok("The run's tasks, oldest first", "TaskList");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            op["parameters"] = run_id;
        }
        Endpoint::ListTools => {
            responses["200"] = ok("The tools", "ToolList");
            responses["409"] = json!({
                "description": "No release is active",
                "content": { "application/json": { "schema": schema("Error") } }
            });
        }
        Endpoint::ListActions => {
            responses["200"] = ok("The actions, oldest first", "ActionRequestList");
            responses["400"] = response("BadRequest");
            let states: Vec<&str> = ActionState::ALL.iter().map(|s| s.as_str()).collect();
            op["parameters"] = json!([
                {
                    "name": "state",
                    "in": "query",
                    "required": false,
                    "description": "Only actions in this state; `pending` for those waiting for a decision",
                    "schema": { "type": "string", "enum": states }
                },
                {
                    "name": "run",
                    "in": "query",
                    "required": false,
                    "description": "Only actions the run with this id proposed",
                    "schema": { "type": "string" }
                }
            ]);
        }
        Endpoint::GetAction => {
            responses["200"] = ok("The action", "ActionRequest");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            op["parameters"] = action_id;
        }
        Endpoint::ApproveAction | Endpoint::RejectAction => {
            responses["200"] = if route.endpoint == Endpoint::ApproveAction {
                ok(
                    "The action as it ended: `delivered`, `failed` or `unknown`",
                    "ActionRequest",
                )
            } else {
                ok("The action, `rejected`", "ActionRequest")
            };
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            responses["409"] = conflict(
                "Nothing was done: the digest is not the action's (`path` is `/digest`; show the \
                 action again), it was decided already, or a review agent decides it",
            );
            responses["413"] = response("PayloadTooLarge");
            responses["415"] = response("UnsupportedMediaType");
            responses["422"] = response("InvalidBody");
            op["parameters"] = action_id;
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("DecideRequest") } }
            });
        }
        Endpoint::ReconcileAction => {
            responses["200"] = ok("The action, `delivered` or `failed`", "ActionRequest");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            responses["409"] =
                conflict("The action is not `unknown`; the message says what is known of it");
            responses["413"] = response("PayloadTooLarge");
            responses["415"] = response("UnsupportedMediaType");
            responses["422"] = response("InvalidBody");
            op["parameters"] = action_id;
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("ReconcileRequest") } }
            });
        }
        Endpoint::ListOverrides => {
            responses["200"] = ok("The overrides, by tool", "DeciderOverrideList");
        }
        Endpoint::AddOverride => {
            responses["201"] = ok("The override", "DeciderOverride");
            responses["400"] = response("BadRequest");
            responses["413"] = response("PayloadTooLarge");
            responses["415"] = response("UnsupportedMediaType");
            responses["422"] = json!({
                "description": "The body is not valid, or `tool` is not an outbound tool (`path` is `/tool`)",
                "content": { "application/json": { "schema": schema("Error") } }
            });
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("DeciderOverrideRequest") } }
            });
        }
        Endpoint::RemoveOverride => {
            responses["204"] = json!({ "description": "The override is removed" });
            responses["404"] = json!({
                "description": "The tool has no override",
                "content": { "application/json": { "schema": schema("Error") } }
            });
            op["parameters"] = json!([{ "$ref": "#/components/parameters/Tool" }]);
        }
        Endpoint::Budget => {
            responses["200"] = ok("Today's usage and budget", "BudgetReport");
        }
        Endpoint::CreateConversation => {
            responses["201"] = ok(
                "The conversation, with `notes` on its memory",
                "Conversation",
            );
            responses["400"] = response("BadRequest");
            responses["404"] =
                conflict("No agent of this name in the active release (`path` is `/agent`)");
            responses["409"] = conflict("No release is active");
            responses["413"] = response("PayloadTooLarge");
            responses["422"] = conflict(
                "The body or its memory is not valid; `path` points at the place, such as `/memory/runs/0/status`",
            );
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("CreateConversationRequest") } }
            });
        }
        Endpoint::ListConversations => {
            responses["200"] = ok("The conversations", "ConversationList");
            responses["400"] = response("BadRequest");
            op["parameters"] = json!([
                { "name": "agent", "in": "query", "required": false, "schema": { "type": "string" } },
                { "name": "limit", "in": "query", "required": false,
                  "schema": { "type": "integer", "minimum": 1, "maximum": hane_store::MAX_CONVERSATIONS_LISTED } }
            ]);
        }
        Endpoint::GetConversation => {
            responses["200"] = ok("The conversation", "Conversation");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            op["parameters"] = conversation_id;
        }
        Endpoint::SendMessage => {
            responses["201"] = ok(
                "The message's entry and its run (`queued`, or ended with `wait`)",
                "SentMessage",
            );
            responses["200"] = json!({
                "description": "With `Accept: text/event-stream`: the message was accepted, and the reply follows as events",
                "content": { "text/event-stream": { "schema": { "type": "string" } } }
            });
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            responses["409"] =
                conflict("The previous message's run has not ended, or no release is active");
            responses["413"] = response("PayloadTooLarge");
            responses["422"] = conflict(
                "The text or input is not valid, or the agent does not take a message as its input; `path` points at the field",
            );
            responses["429"] = response("BudgetExceeded");
            responses["502"] = response("BadGateway");
            op["parameters"] = conversation_id;
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("SendMessageRequest") } }
            });
        }
        Endpoint::GetMemory => {
            responses["200"] = ok("The memory", "Memory");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            op["parameters"] = conversation_id;
        }
        Endpoint::PutMemory => {
            responses["200"] = ok("The memory as saved, and what changed", "SavedMemory");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            responses["409"] = conflict("A message is being sent now");
            responses["413"] = response("PayloadTooLarge");
            responses["422"] =
                conflict("Not a memory this server reads; `path` points at the place");
            op["parameters"] = conversation_id;
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": { "type": "object" } } }
            });
        }
        Endpoint::CreateRequest => {
            responses["201"] = ok("A run was started", "Reception");
            responses["200"] = ok(
                "Nothing started: a dry run's choice, a decline with what is missing, or a run refused at start",
                "Reception",
            );
            responses["400"] = response("BadRequest");
            responses["409"] = conflict(
                "No release is active, or it has no default ModelProvider for reception's choice",
            );
            responses["413"] = response("PayloadTooLarge");
            responses["422"] =
                conflict("The body is not a request (`path` is `/text` or `/dryRun`)");
            responses["429"] = response("BudgetExceeded");
            responses["502"] = response("BadGateway");
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("ReceptionRequest") } }
            });
        }
        Endpoint::ListRequests => {
            responses["200"] = ok("The requests", "ReceptionList");
            responses["400"] = response("BadRequest");
            op["parameters"] = json!([
                { "name": "limit", "in": "query", "required": false,
                  "schema": { "type": "integer", "minimum": 1, "maximum": hane_store::MAX_RECEPTIONS_LISTED } }
            ]);
        }
        Endpoint::GetRequest => {
            responses["200"] = ok("The request", "Reception");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            op["parameters"] = json!([{
                "name": "id", "in": "path", "required": true,
                "schema": { "type": "string", "pattern": "^req_[0-9a-hjkmnp-tv-z]{26}$" },
                "description": "The request's id"
            }]);
        }
        Endpoint::CreateEvaluation => {
            responses["201"] = ok("The evaluation, once every case ended", "Evaluation");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            responses["409"] = conflict("No release is active");
            responses["413"] = response("PayloadTooLarge");
            responses["422"] =
                conflict("The body is not an evaluation request (`path` is `/suite`)");
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("EvaluationRequest") } }
            });
        }
        Endpoint::ListEvaluations => {
            responses["200"] = ok("The evaluations", "EvaluationList");
            responses["400"] = response("BadRequest");
            op["parameters"] = json!([
                { "name": "suite", "in": "query", "required": false,
                  "schema": { "type": "string" }, "description": "Only evaluations of this suite" },
                { "name": "limit", "in": "query", "required": false,
                  "schema": { "type": "integer", "minimum": 1, "maximum": hane_store::MAX_EVALUATIONS_LISTED } }
            ]);
        }
        Endpoint::CompareEvaluations => {
            responses["200"] = ok("The comparison", "EvaluationComparison");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            responses["422"] = conflict("The two evaluations are of different suites");
            let eval_id = json!({ "type": "string", "pattern": "^eval_[0-9a-hjkmnp-tv-z]{26}$" });
            op["parameters"] = json!([
                { "name": "a", "in": "query", "required": true, "schema": eval_id, "description": "The earlier evaluation" },
                { "name": "b", "in": "query", "required": true, "schema": eval_id, "description": "The later evaluation" }
            ]);
        }
        Endpoint::GetEvaluation => {
            responses["200"] = ok("The evaluation", "Evaluation");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            op["parameters"] = json!([{
                "name": "id", "in": "path", "required": true,
                "schema": { "type": "string", "pattern": "^eval_[0-9a-hjkmnp-tv-z]{26}$" },
                "description": "The evaluation's id"
            }]);
        }
        Endpoint::StartCase => {
            responses["201"] = ok("The case, as stored at its start", "WorkflowCase");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            responses["409"] = conflict("No release is active");
            responses["413"] = response("PayloadTooLarge");
            responses["422"] = conflict(
                "The body is not a case request, or the input does not match the workflow's input schema (`path` points at the place)",
            );
            op["parameters"] = json!([workflow_name]);
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("CaseRequest") } }
            });
        }
        Endpoint::GetCase => {
            responses["200"] = ok("The case", "WorkflowCase");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            op["parameters"] = json!([workflow_name, case_id]);
        }
        Endpoint::CompleteTask => {
            responses["200"] = ok("The case, the task done", "WorkflowCase");
            responses["400"] = response("BadRequest");
            responses["403"] = response("Forbidden");
            responses["404"] = response("NotFound");
            responses["409"] = conflict("The step is not a task waiting for a person");
            responses["413"] = response("PayloadTooLarge");
            responses["422"] = conflict("The body is not a completion (`path` is `/result`)");
            op["parameters"] = json!([workflow_name, case_id, {
                "name": "step", "in": "path", "required": true,
                "schema": { "type": "string" }, "description": "The task step's id"
            }]);
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("TaskCompletion") } }
            });
        }
        Endpoint::MemorySchema => {
            responses["200"] = json!({
                "description": "The JSON Schema (draft 2020-12) of memory version 2",
                "content": { "application/json": { "schema": { "type": "object" } } }
            });
        }
        Endpoint::ChatCompletions
        | Endpoint::Responses
        | Endpoint::Messages
        | Endpoint::CountTokens
        | Endpoint::Models => {
            let provider = json!({
                "description": "In the provider's own format",
                "content": {
                    "application/json": { "schema": { "type": "object" } },
                    "text/event-stream": { "schema": { "type": "string" } }
                }
            });
            if route.method == axum::http::Method::POST {
                op["requestBody"] = json!({
                    "required": true,
                    "content": { "application/json": { "schema": { "type": "object" } } }
                });
            }
            responses["200"] = provider.clone();
            for status in ["400", "403", "413", "429", "502", "503", "504"] {
                responses[status] = provider.clone();
            }
            responses["401"] = provider;
        }
        Endpoint::Root => {
            responses["200"] = json!({ "description": "The server is up" });
        }
    }
    let responses_have_401 = responses.get("401").is_some();
    if route.access != Access::Public && !responses_have_401 {
        responses["401"] = response("Unauthorized");
    }
    if matches!(route.access, Access::Approve | Access::Operate) {
        responses["403"] = response("Forbidden");
    }
    if route.path.starts_with("/v1/agents") {
        responses["500"] = response("Internal");
    }
    if responses.get("413").is_some() {
        responses["408"] = response("RequestTimeout");
    }
    connection_refusals(&mut responses);
    op["responses"] = responses;
    op
}

/// The answers any request may get before its route reads it, all in the
/// error envelope: a head hyper cannot parse (`400`), a target or a head
/// over the caps (`414`, `431`), and a connection over the cap (`503`).
fn connection_refusals(responses: &mut Value) {
    for (status, name) in [
        ("400", "BadRequest"),
        ("414", "UriTooLong"),
        ("431", "HeadersTooLarge"),
        ("503", "Unavailable"),
    ] {
        if responses.get(status).is_none() {
            responses[status] = response(name);
        }
    }
}

/// The MCP endpoints, which `crate::mcp` routes apart from [`ROUTES`]:
/// JSON-RPC over MCP's Streamable HTTP, stateless.
fn mcp_paths(paths: &mut Map<String, Value>) {
    let jsonrpc_error = |description: &str| {
        json!({
            "description": description,
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/JsonRpcMessage" } } }
        })
    };
    let endpoints = [
        (
            MCP_PATH,
            "mcpRun",
            "A run's tools over MCP",
            "`tools/list` offers exactly the run's tools (its agent's `tools` and \
             `submit_result`, `.` in a name written `-`) with their input and output schemas; \
             every `tools/call` goes through the Tool Gateway as any driver's call, recorded in \
             the run. A call the gateway refuses, or that fails, is a result with `isError`. An \
             outbound tool's call is answered after a bounded wait with its action's state when \
             no decision came.",
            "Needs a run's token (`Authorization: Bearer TOKEN`), not an API key.".to_owned(),
            json!([{ "runToken": [] }]),
            None,
        ),
        (
            MCP_RELEASE_PATH,
            "mcpRelease",
            "The active release's operations over MCP",
            "`tools/list` offers the active release's operations; each `tools/call` runs one in \
             the sandbox under its policy, its receipt in the result's `_meta` as \
             `hane/receipt`.",
            format!("Needs {}.", Access::Operate.needs()),
            json!([{ "bearer": [] }]),
            Some("The API key does not have the operator role"),
        ),
    ];
    for (path, id, summary, description, needs, security, forbidden) in endpoints {
        let mut responses = json!({
            "200": {
                "description": "The JSON-RPC response, as JSON or as a stream of Server-Sent \
                                Events ending with it",
                "content": {
                    "application/json": { "schema": { "$ref": "#/components/schemas/JsonRpcMessage" } },
                    "text/event-stream": { "schema": { "type": "string" } }
                }
            },
            "202": { "description": "A notification or a response, accepted" },
            "400": jsonrpc_error("Not JSON, a batch, not JSON-RPC 2.0, or params that cannot be read"),
            "401": jsonrpc_error("No credential, or one that is malformed, forged, expired or unknown (JSON-RPC code -32001)"),
            "406": { "description": "`Accept` does not take both `application/json` and `text/event-stream`" },
            "413": jsonrpc_error(&format!("The message is over {MAX_MCP_MESSAGE_BYTES} bytes")),
            "415": { "description": "The body is not `application/json`" }
        });
        if let Some(forbidden) = forbidden {
            responses["403"] = jsonrpc_error(forbidden);
        }
        responses["408"] = response("RequestTimeout");
        connection_refusals(&mut responses);
        let post = json!({
            "operationId": id,
            "summary": summary,
            "description": format!(
                "One JSON-RPC 2.0 message of the Model Context Protocol (Streamable HTTP, \
                 stateless: no `initialize` is needed before a call, and no session id is given \
                 or read). {description}\n\n{needs}"
            ),
            "security": security,
            "parameters": [{
                "name": "mcp-protocol-version",
                "in": "header",
                "required": false,
                "description": "The MCP version the client speaks, such as `2025-11-25`",
                "schema": { "type": "string" }
            }],
            "requestBody": {
                "required": true,
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/JsonRpcMessage" } } }
            },
            "responses": responses,
        });
        let delete = json!({
            "operationId": format!("{id}End"),
            "summary": "End an MCP session: there are none, so there is nothing to end",
            "description": &needs,
            "security": security,
            "responses": {
                "204": { "description": "Nothing to end" },
                "401": jsonrpc_error("No credential, or one that is refused")
            }
        });
        paths.insert(path.to_owned(), json!({ "post": post, "delete": delete }));
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_lists_exactly_the_routes() {
        let doc = openapi();
        let mut documented: Vec<String> = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("a path item").keys() {
                documented.push(format!("{} {path}", method.to_ascii_uppercase()));
            }
        }
        let mut routed: Vec<String> = ROUTES
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        // The MCP endpoints' methods besides GET, which is refused (405).
        for path in [MCP_PATH, MCP_RELEASE_PATH] {
            routed.extend(["POST", "DELETE"].map(|m| format!("{m} {path}")));
        }
        documented.sort();
        routed.sort();
        assert_eq!(documented, routed);
    }

    #[test]
    fn every_reference_resolves() {
        fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(r)) = map.get("$ref") {
                        out.push(r);
                    }
                    map.values().for_each(|v| refs(v, out));
                }
                Value::Array(list) => list.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let doc = openapi();
        let mut found = Vec::new();
        refs(doc, &mut found);
        assert!(!found.is_empty());
        for r in found {
            let pointer = r.strip_prefix('#').expect("a local reference");
            assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
        }
    }

    #[test]
    fn the_action_list_cap_is_documented() {
        let op = &openapi()["paths"]["/v1/agents/action-requests"]["get"];
        let description = op["description"].as_str().expect("a description");
        assert!(
            description.contains(&format!("At most {}", hane_store::MAX_ACTIONS_LISTED)),
            "{description}"
        );
    }

    #[test]
    fn the_mcp_endpoints_are_documented_with_their_credentials() {
        let doc = openapi();
        let run = &doc["paths"][MCP_PATH]["post"];
        assert_eq!(run["security"], json!([{ "runToken": [] }]));
        assert!(
            run["description"]
                .as_str()
                .unwrap()
                .contains("a run's token")
        );
        assert!(run["responses"]["403"].is_null());
        let release = &doc["paths"][MCP_RELEASE_PATH]["post"];
        assert_eq!(release["security"], json!([{ "bearer": [] }]));
        assert!(
            release["description"]
                .as_str()
                .unwrap()
                .contains(Access::Operate.needs())
        );
        for op in [run, release] {
            let body = &op["requestBody"]["content"]["application/json"]["schema"]["$ref"];
            assert_eq!(body, "#/components/schemas/JsonRpcMessage");
            for status in ["200", "400", "401", "406", "413", "415"] {
                assert!(op["responses"][status].is_object(), "{status}: {op:#}");
            }
            assert!(
                op["responses"]["413"]["description"]
                    .as_str()
                    .unwrap()
                    .contains(&MAX_MCP_MESSAGE_BYTES.to_string())
            );
        }
        for path in [MCP_PATH, MCP_RELEASE_PATH] {
            assert!(doc["paths"][path]["delete"]["responses"]["204"].is_object());
            assert!(doc["paths"][path]["get"].is_null());
        }
    }

    #[test]
    fn roles_are_documented() {
        let doc = openapi();
        for route in &ROUTES {
            let op = &doc["paths"][route.path][route.method.as_str().to_ascii_lowercase()];
            let description = op["description"].as_str().expect("a description");
            assert!(
                description.contains(route.access.needs()),
                "{} {}: {description}",
                route.method,
                route.path
            );
            assert_eq!(
                op.get("security") == Some(&json!([])),
                route.access == Access::Public,
                "{} {}",
                route.method,
                route.path
            );
        }
    }
}
