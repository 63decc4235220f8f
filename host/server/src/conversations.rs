//! The conversation routes: `/v1/agents/conversations`, their messages (a
//! reply followed as Server-Sent Events when the client asks for
//! `text/event-stream`) and their memory.

use std::borrow::Cow;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hane_coordinator::conversation::{
    ConversationError, ConversationView, EntryView, MemoryError, SentMessage, memory_schema,
};
use hane_coordinator::{AgentRuntime, Conversations, RunEvent};
use hane_core::{AgentRun, Conversation, ConversationId};
use hane_store::registry::MAX_CONVERSATIONS_LISTED;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::error::{ApiError, Checked, ErrorCode};
use crate::route::{Access, Route, Shape, of};
use crate::routes::{SKIPPED, body_fields, list_limit, parameter, parse_id};

/// The routes of conversations, their messages and their memory.
///
/// `memory-schema` comes before `{id}`, which would otherwise take it.
pub(crate) fn routes() -> Vec<Route> {
    let mut routes = vec![
        Route::post(
            "/v1/agents/conversations",
            Access::Operate,
            create,
            ("createConversation", "Start a conversation with an agent"),
        )
        .describe(
            "Each message of the conversation starts an ordinary run of the agent whose context \
             is built from the conversation so far. With `memory`, the conversation starts from \
             a saved history (any memory version this server reads; see \
             `GET /v1/agents/conversations/memory-schema`): it is checked, redacted, and its \
             actions are replaced by the execution ledger's; `notes` says what changed.",
        )
        .body(of::<CreateConversationRequest>())
        .answer(
            201,
            "The conversation, with `notes` on its memory",
            of::<ConversationAnswer>(),
        )
        .errors(&[(400, "BadRequest")])
        .error(
            404,
            "No agent of this name in the active release (`path` is `/agent`)",
        )
        .error(409, "No release is active")
        .errors(&[(413, "PayloadTooLarge")])
        .error(
            422,
            "The body or its memory is not valid; `path` points at the place, such as `/memory/runs/0/status`",
        ),
        Route::get(
            "/v1/agents/conversations",
            Access::Read,
            list,
            (
                "listConversations",
                "List conversations, the most recently changed first",
            ),
        )
        .param(json!({ "name": "agent", "in": "query", "required": false, "schema": { "type": "string" } }))
        .param(json!({
            "name": "limit", "in": "query", "required": false,
            "schema": { "type": "integer", "minimum": 1, "maximum": MAX_CONVERSATIONS_LISTED }
        }))
        .answer(200, "The conversations", of::<ConversationList>())
        .errors(&[(400, "BadRequest")]),
        Route::get(
            "/v1/agents/conversations/memory-schema",
            Access::Public,
            schema,
            (
                "memorySchema",
                "The JSON Schema of the memory format this server writes",
            ),
        )
        .answer(
            200,
            "The JSON Schema (draft 2020-12) of memory version 2",
            Shape::Inline(json!({ "type": "object" })),
        ),
        Route::get(
            "/v1/agents/conversations/{id}",
            Access::Read,
            get,
            (
                "getConversation",
                "Get a conversation: its messages, each with its run as it is now",
            ),
        )
        .param(parameter("ConversationId"))
        .answer(200, "The conversation", of::<ConversationAnswer>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")]),
    ];
    routes.push(send_route());
    routes.extend(memory_routes());
    routes
}

fn send_route() -> Route {
    Route::post(
        "/v1/agents/conversations/{id}/messages",
        Access::Operate,
        send,
        ("sendMessage", "Send a message: start the agent's run for it"),
    )
    .describe(
        "The run's input is `input` when given, else `{\"message\": TEXT}` when the agent's \
         input schema takes it, else what the release's default model derives from the text \
         for that agent (422 at `/input` with what is missing when it cannot). One message at a time: while the previous message's run has \
         not ended, a new one is refused with 409. With `Accept: text/event-stream` the reply \
         is followed as Server-Sent Events: `message` (the entry and its run), then `text` \
         (the model's text as it streams), `tool_call` (each call as it ends), \
         `action_pending` (an outbound action waiting for a person, with its digest and how \
         to approve it) and `end` (the run as it ended).",
    )
    .param(parameter("ConversationId"))
    .body(of::<SendMessageRequest>())
    .answer(
        201,
        "The message's entry and its run (`queued`, or ended with `wait`)",
        of::<SentMessageAnswer>(),
    )
    .raw(200, json!({
        "description": "With `Accept: text/event-stream`: the message was accepted, and the reply follows as events",
        "content": { "text/event-stream": { "schema": { "type": "string" } } }
    }))
    .errors(&[(400, "BadRequest"), (404, "NotFound")])
    .error(
        409,
        "The previous message's run has not ended, or no release is active",
    )
    .errors(&[(413, "PayloadTooLarge")])
    .error(
        422,
        "The text or input is not valid, or the agent does not take a message as its input; `path` points at the field",
    )
    .errors(&[(429, "BudgetExceeded"), (502, "BadGateway")])
}

fn memory_routes() -> Vec<Route> {
    vec![
        Route::get(
            "/v1/agents/conversations/{id}/memory",
            Access::Read,
            get_memory,
            (
                "getMemory",
                "The conversation's current context, as versioned JSON",
            ),
        )
        .describe(
            "Messages, run summaries and action states (the execution ledger's). Never holds a \
             run's token, an API key or a credential: they are replaced by `***`.",
        )
        .param(parameter("ConversationId"))
        .answer(200, "The memory", of::<MemoryDocument>())
        .errors(&[(400, "BadRequest"), (404, "NotFound")]),
        Route::new(
            axum::http::Method::PUT,
            "/v1/agents/conversations/{id}/memory",
            Access::Operate,
            put_memory,
            (
                "putMemory",
                "Save a memory as the conversation's context from now on",
            ),
        )
        .describe(
            "Checked like a new conversation's `memory`. It grants nothing: permissions, limits \
             and budgets come from the active release, action states from the ledger. A newer \
             `schemaVersion` than this server reads is refused with 422.",
        )
        .param(parameter("ConversationId"))
        .body(Shape::Inline(json!({ "type": "object" })))
        .answer(
            200,
            "The memory as saved, and what changed",
            of::<SavedMemoryAnswer>(),
        )
        .errors(&[(400, "BadRequest"), (404, "NotFound")])
        .error(409, "A message is being sent now")
        .errors(&[(413, "PayloadTooLarge")])
        .error(
            422,
            "Not a memory this server reads; `path` points at the place",
        ),
    ]
}

impl From<ConversationError> for ApiError {
    fn from(e: ConversationError) -> Self {
        match e {
            ConversationError::Run(e) => e.into(),
            ConversationError::Invalid { path, message } => {
                ApiError::new(ErrorCode::InvalidInput, message).at(path)
            }
            ConversationError::Memory(e) => memory_error(e),
            e => ApiError::of_kind(e.kind(), "conversations", &e),
        }
    }
}

/// A memory's error, its path under `/memory` of a start request or at the
/// root of a `PUT`'s body.
fn memory_error(e: MemoryError) -> ApiError {
    let path = e.path().to_owned();
    ApiError::new(ErrorCode::InvalidInput, e.to_string()).at(path)
}

/// A conversation as listed: whom it is with, and when it changed.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub(crate) struct ConversationSummary {
    id: ConversationId,
    agent: String,
    /// In milliseconds since the Unix epoch
    created_at_ms: u64,
    /// When its last entry was added, in milliseconds since the Unix epoch
    updated_at_ms: u64,
}

impl ConversationSummary {
    fn new(conversation: Conversation, updated_at_ms: u64) -> Self {
        ConversationSummary {
            id: conversation.id,
            agent: conversation.agent,
            created_at_ms: conversation.created_at_ms,
            updated_at_ms,
        }
    }
}

/// A listing of conversations.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct ConversationList {
    conversations: Vec<ConversationSummary>,
    #[schemars(description = SKIPPED)]
    skipped: usize,
}

/// A conversation and its entries, each message with its run as it is
/// now.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Conversation", deny_unknown_fields)]
pub(crate) struct ConversationAnswer {
    #[serde(flatten)]
    summary: ConversationSummary,
    /// On creation from a memory: what was changed or left out
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<String>")]
    notes: Option<Vec<String>>,
    entries: Vec<EntryView>,
}

impl ConversationAnswer {
    fn new(view: ConversationView, notes: Option<Vec<String>>) -> Self {
        ConversationAnswer {
            summary: ConversationSummary::new(view.conversation, view.updated_at_ms),
            notes,
            entries: view.entries,
        }
    }
}

/// A message accepted: its place in the conversation and its run.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "SentMessage", deny_unknown_fields)]
pub(crate) struct SentMessageAnswer {
    conversation: ConversationId,
    seq: u64,
    run: AgentRun,
}

/// A memory document, whose schema is the memory format's own (served at
/// `GET /v1/agents/conversations/memory-schema`), written by hand among
/// the document's schemas as `Memory`.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct MemoryDocument(Value);

impl JsonSchema for MemoryDocument {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Memory".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let reference = format!("#{}/Memory", generator.settings().definitions_path);
        schemars::json_schema!({ "$ref": reference })
    }
}

/// A memory saved as a conversation's context, and what of it changed.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "SavedMemory", deny_unknown_fields)]
pub(crate) struct SavedMemoryAnswer {
    seq: u64,
    memory: MemoryDocument,
    /// What was changed or left out, and why
    notes: Vec<String>,
}

/// A request to start a conversation: with an agent, or from a saved
/// memory that names one.
// `create_body` reads it field by field, so that every error names its
// field; the document's schema of the body is this type's. A field left
// out is `None`; `null` is refused.
#[derive(JsonSchema)]
#[schemars(
    deny_unknown_fields,
    extend("anyOf" = [{ "required": ["agent"] }, { "required": ["memory"] }])
)]
struct CreateConversationRequest {
    /// The agent; may be left out when `memory` names it
    #[schemars(default, skip_serializing_if = "Option::is_none", with = "String")]
    agent: Option<String>,
    /// A saved history to start from, of a memory version this server
    /// reads; it names its agent
    #[schemars(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Map<String, Value>"
    )]
    memory: Option<Value>,
}

fn create_body(body: Value) -> Result<CreateConversationRequest, ApiError> {
    let mut fields = body_fields(
        body,
        &["agent", "memory"],
        "`agent` and, to start from a saved history, `memory`",
        "a conversation request",
    )?;
    let agent = match fields.remove("agent") {
        Some(Value::String(agent)) if !agent.is_empty() => Some(agent),
        Some(_) => {
            return Err(ApiError::new(
                ErrorCode::InvalidInput,
                "`agent` must be a string: the agent's name",
            )
            .at("/agent"));
        }
        None => None,
    };
    Ok(CreateConversationRequest {
        agent,
        memory: fields.remove("memory"),
    })
}

/// A message to send: it starts the agent's run.
// `send_body` reads it field by field, as `create_body` reads a
// conversation request; a field left out takes its default, and `null` is
// refused.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
struct SendMessageRequest {
    #[schemars(length(min = 1))]
    text: String,
    /// The run's input; without it, `{"message": TEXT}`
    #[schemars(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Map<String, Value>"
    )]
    input: Option<Value>,
    /// Answer once the run has ended
    #[schemars(default)]
    wait: bool,
}

fn send_body(body: Value) -> Result<SendMessageRequest, ApiError> {
    let invalid = |message: &str, path: &str| {
        ApiError::new(ErrorCode::InvalidInput, message.to_owned()).at(path)
    };
    let mut fields = body_fields(body, &["text", "input", "wait"], "`text`", "a message")?;
    let text = match fields.remove("text") {
        Some(Value::String(text)) => text,
        Some(_) => return Err(invalid("`text` must be a string: the message", "/text")),
        None => return Err(invalid("`text` is required: the message", "/text")),
    };
    let input = match fields.remove("input") {
        None => None,
        Some(input @ Value::Object(_)) => Some(input),
        Some(_) => return Err(invalid("`input` must be a JSON object", "/input")),
    };
    let wait = match fields.remove("wait") {
        None => false,
        Some(Value::Bool(wait)) => wait,
        Some(_) => return Err(invalid("`wait` must be true or false", "/wait")),
    };
    Ok(SendMessageRequest { text, input, wait })
}

pub(crate) async fn create(
    State(conversations): State<Conversations>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<Response, ApiError> {
    let body = create_body(body)?;
    // A saved memory names its agent; `agent`, when given too, must be it
    // (the memory check says so when it is not).
    let remembered = body
        .memory
        .as_ref()
        .and_then(|m| m.get("agent"))
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .map(str::to_owned);
    let Some(agent) = body.agent.or(remembered) else {
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            "`agent` is required: the agent's name (or a `memory` that names it)",
        )
        .at("/agent"));
    };
    let (view, notes) = conversations
        .create(&agent, body.memory.as_ref())
        .await
        .map_err(|e| match e {
            ConversationError::Memory(e) => {
                let path = format!("/memory{}", e.path());
                ApiError::new(ErrorCode::InvalidInput, e.to_string()).at(path)
            }
            e => e.into(),
        })?;
    let location =
        HeaderValue::try_from(format!("/v1/agents/conversations/{}", view.conversation.id))
            .expect("a conversation id is a valid header value");
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(ConversationAnswer::new(view, Some(notes))),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    agent: Option<String>,
    limit: Option<String>,
}

pub(crate) async fn list(
    State(conversations): State<Conversations>,
    Checked(Query(query)): Checked<Query<ListQuery>>,
) -> Result<axum::Json<ConversationList>, ApiError> {
    let limit = list_limit(query.limit, MAX_CONVERSATIONS_LISTED)?;
    let listed = conversations
        .list(query.agent.filter(|a| !a.is_empty()), limit)
        .await?;
    Ok(axum::Json(ConversationList {
        skipped: listed.skipped.len(),
        conversations: listed
            .items
            .into_iter()
            .map(|(c, updated)| ConversationSummary::new(c, updated))
            .collect(),
    }))
}

pub(crate) async fn get(
    State(conversations): State<Conversations>,
    Checked(Path(id)): Checked<Path<String>>,
) -> Result<axum::Json<ConversationAnswer>, ApiError> {
    let view = conversations.get(&parse_id::<ConversationId>(&id)?).await?;
    Ok(axum::Json(ConversationAnswer::new(view, None)))
}

/// Whether the client takes a stream of events rather than JSON.
fn wants_events(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            media
                .split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

pub(crate) async fn send(
    State(conversations): State<Conversations>,
    State(runtime): State<AgentRuntime>,
    headers: HeaderMap,
    Checked(Path(id)): Checked<Path<String>>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<Response, ApiError> {
    let id: ConversationId = parse_id(&id)?;
    let body = send_body(body)?;
    let sent = conversations.send(&id, &body.text, body.input).await?;
    if wants_events(&headers) {
        return Ok(events(&runtime, sent).await);
    }
    let run = if body.wait {
        runtime.wait(&sent.run.id).await?
    } else {
        sent.run
    };
    Ok((
        StatusCode::CREATED,
        axum::Json(SentMessageAnswer {
            conversation: sent.conversation,
            seq: sent.seq,
            run,
        }),
    )
        .into_response())
}

/// The reply as Server-Sent Events: `message` (the entry and its run),
/// then `text`, `tool_call` and `action_pending` as they happen, and `end`
/// with the run as it ended.
async fn events(runtime: &AgentRuntime, sent: SentMessage) -> Response {
    let first = sse(
        "message",
        &json!({ "conversation": sent.conversation, "seq": sent.seq, "run": sent.run }),
    );
    let rest = match runtime.follow(&sent.run.id) {
        Some(rest) => Some(rest),
        None => {
            // It ended before it could be followed: its end is all there is.
            let (sender, receiver) = mpsc::unbounded_channel();
            if let Ok(run) = runtime.get(&sent.run.id).await {
                let _ = sender.send(RunEvent::End(Box::new(run)));
            }
            Some(receiver)
        }
    };
    let mut response = Response::new(Body::new(EventBody {
        first: Some(first),
        rest,
    }));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn sse(event: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// One followed event as SSE.
pub(crate) fn event_bytes(event: &RunEvent) -> Bytes {
    match event {
        RunEvent::Text(text) => sse("text", &json!({ "text": text })),
        RunEvent::ToolCall(call) => sse(
            "tool_call",
            &json!({ "tool": call.tool, "status": call.status, "detail": call.detail }),
        ),
        RunEvent::ActionPending {
            action,
            tool,
            recipient,
            digest,
            assignment,
        } => sse(
            "action_pending",
            &json!({
                "action": action, "tool": tool, "recipient": recipient, "digest": digest,
                "assignment": assignment,
                "approve": format!("POST /v1/agents/action-requests/{action}/approve with {{\"digest\": \"{digest}\"}}"),
            }),
        ),
        RunEvent::End(run) => sse("end", &json!({ "run": run })),
    }
}

struct EventBody {
    first: Option<Bytes>,
    rest: Option<mpsc::UnboundedReceiver<RunEvent>>,
}

impl http_body::Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(http_body::Frame::data(first))));
        }
        let Some(rest) = self.rest.as_mut() else {
            return Poll::Ready(None);
        };
        match rest.poll_recv(cx) {
            Poll::Ready(Some(event)) => {
                if matches!(event, RunEvent::End(_)) {
                    self.rest = None;
                }
                Poll::Ready(Some(Ok(http_body::Frame::data(event_bytes(&event)))))
            }
            Poll::Ready(None) => {
                self.rest = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

pub(crate) async fn get_memory(
    State(conversations): State<Conversations>,
    Checked(Path(id)): Checked<Path<String>>,
) -> Result<axum::Json<MemoryDocument>, ApiError> {
    let memory = conversations
        .memory(&parse_id::<ConversationId>(&id)?)
        .await?;
    Ok(axum::Json(MemoryDocument(memory.to_value())))
}

pub(crate) async fn put_memory(
    State(conversations): State<Conversations>,
    Checked(Path(id)): Checked<Path<String>>,
    Checked(axum::Json(body)): Checked<axum::Json<Value>>,
) -> Result<axum::Json<SavedMemoryAnswer>, ApiError> {
    let saved = conversations
        .save_memory(&parse_id::<ConversationId>(&id)?, &body)
        .await?;
    Ok(axum::Json(SavedMemoryAnswer {
        seq: saved.seq,
        memory: MemoryDocument(saved.memory.to_value()),
        notes: saved.notes,
    }))
}

pub(crate) async fn schema() -> axum::Json<&'static Value> {
    axum::Json(memory_schema())
}
