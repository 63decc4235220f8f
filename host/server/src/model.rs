//! The Model Gateway over HTTP: `POST /v1/chat/completions`,
//! `POST /v1/responses` and `POST /v1/messages` (with
//! `/v1/messages/count_tokens`), the model list, and `HEAD /`.
//!
//! A client — a coding CLI, or any program the host hands a run's token
//! to — sends its run's [`RunToken`] as `Authorization: Bearer TOKEN` or
//! `x-api-key: TOKEN`, in whichever of the three formats it speaks. The
//! request is translated to the normalized request (what cannot be is
//! refused with a 400 that names where), goes through
//! [`AgentRuntime::call_model`] — admitted against the run's gate and its
//! `maxModelTokens`, sent to the run's provider whatever its format,
//! counted, and recorded as an LLM turn of the run — and the answer is
//! translated back: a JSON body, or the event stream the format's provider
//! would have sent, forwarded piece by piece as the upstream produces it.
//!
//! Every error is in the format's own shape with a status its clients
//! treat right: what the client sent wrong is a 4xx (never a 5xx, which
//! the CLIs retry for minutes); an upstream that is overloaded or failed
//! is the 5xx they retry. A client that drops a stream cancels the
//! upstream request; the tokens used so far still count, and no turn is
//! recorded.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hane_coordinator::{
    AgentRuntime, GatewayError, RunToken,
    drivers::{ModelCall, ModelInfo},
    gateway::model::ModelCallError,
};
use hane_model::dialect::{self, Failure, Inbound, InboundError, SseOut, StreamWriter};
use hane_model::{ModelResponse, StreamEvent};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::route::{Access, Route, Shape};
use crate::routes::Api;

/// The Model Gateway's routes, each in its provider's format, and the
/// probe of `/`.
pub(crate) fn routes() -> Vec<Route> {
    let routes = vec![
        provider_post(
            "/v1/chat/completions",
            chat,
            (
                "createChatCompletion",
                "A model call of a run, in the OpenAI Chat Completions format",
            ),
        )
        .describe(
            "Served by the run's provider whatever its own format, through the Model Gateway: \
             admitted against the run's state and `maxModelTokens`, counted, and recorded as \
             an LLM turn of the run.",
        ),
        provider_post(
            "/v1/responses",
            responses,
            (
                "createResponse",
                "A model call of a run, in the OpenAI Responses format",
            ),
        )
        .describe(
            "As `POST /v1/chat/completions`; stateless: `previous_response_id` and stored \
             responses are refused.",
        ),
        provider_post(
            "/v1/messages",
            messages,
            (
                "createMessage",
                "A model call of a run, in the Anthropic Messages format",
            ),
        )
        .describe("As `POST /v1/chat/completions`."),
        provider_post(
            "/v1/messages/count_tokens",
            count_tokens,
            (
                "countMessageTokens",
                "The input tokens of a Messages request, as the Model Gateway counts them",
            ),
        ),
        Route::get(
            "/v1/models",
            Access::RunToken,
            models,
            ("listModels", "The run's model"),
        )
        .describe(
            "In the OpenAI list shape, or Anthropic's when the request has an \
             `anthropic-version` header.",
        ),
    ];
    let provider = json!({
        "description": "In the provider's own format",
        "content": {
            "application/json": { "schema": { "type": "object" } },
            "text/event-stream": { "schema": { "type": "string" } }
        }
    });
    let mut routes: Vec<Route> = routes
        .into_iter()
        .map(|route| {
            [200, 400, 401, 403, 413, 429, 502, 503, 504]
                .into_iter()
                .fold(route, |route, status| route.raw(status, provider.clone()))
        })
        .collect();
    routes.push(
        Route::get(
            "/",
            Access::Public,
            root,
            (
                "root",
                "Answers 200, for the clients that probe the server before a model call",
            ),
        )
        .raw(200, json!({ "description": "The server is up" })),
    );
    routes
}

/// A Model Gateway route that takes a body in its provider's format.
fn provider_post<H: Handler<T, Api>, T: 'static>(
    path: &'static str,
    handler: H,
    operation: (&'static str, &'static str),
) -> Route {
    Route::post(path, Access::RunToken, handler, operation)
        .body(Shape::Inline(json!({ "type": "object" })))
}

/// The largest model request body accepted, in bytes (Anthropic's own
/// limit): a coding CLI's context with images is far larger than a run's
/// input.
pub const MAX_MODEL_BODY_BYTES: usize = 32 << 20;

/// The wire format a route speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// OpenAI Chat Completions.
    Chat,
    /// OpenAI Responses.
    Responses,
    /// Anthropic Messages.
    Anthropic,
}

impl Format {
    /// The name recorded with each served turn.
    fn name(self) -> &'static str {
        match self {
            Format::Chat => "chat-completions",
            Format::Responses => "responses",
            Format::Anthropic => "anthropic-messages",
        }
    }

    fn parse(self, body: &Value) -> Result<Inbound, InboundError> {
        match self {
            Format::Chat => dialect::chat::parse_request(body),
            Format::Responses => dialect::responses::parse_request(body),
            Format::Anthropic => dialect::anthropic::parse_request(body),
        }
    }

    fn response_body(self, response: &ModelResponse, id: &str) -> Value {
        match self {
            Format::Chat => dialect::chat::response_body(response, id),
            Format::Responses => dialect::responses::response_body(response, id),
            Format::Anthropic => dialect::anthropic::response_body(response, id),
        }
    }

    fn error_body(self, failure: &Failure) -> (u16, Value) {
        match self {
            Format::Chat => dialect::chat::error_body(failure),
            Format::Responses => dialect::responses::error_body(failure),
            Format::Anthropic => dialect::anthropic::error_body(failure),
        }
    }

    /// A new id for a response, in the format's style.
    fn new_id(self) -> String {
        let mut bytes = [0u8; 12];
        getrandom::fill(&mut bytes).expect("the system's random source works");
        let prefix = match self {
            Format::Chat => "chatcmpl-",
            Format::Responses => "resp_",
            Format::Anthropic => "msg_",
        };
        format!("{prefix}{}", hex::encode(bytes))
    }

    fn writer(self, id: &str, model: &str, input_tokens: u64, inbound: &Inbound) -> Writer {
        match self {
            Format::Chat => {
                let mut writer = dialect::chat::ChatWriter::new(id, model, input_tokens);
                writer.include_usage(inbound.include_usage);
                Box::new(writer)
            }
            Format::Responses => Box::new(dialect::responses::ResponsesWriter::new(
                id,
                model,
                input_tokens,
            )),
            Format::Anthropic => Box::new(dialect::anthropic::AnthropicWriter::new(
                id,
                model,
                input_tokens,
            )),
        }
    }
}

/// One response's event stream in its format, written as it arrives.
type Writer = Box<dyn StreamWriter + Send>;

/// A failure answered in `format`'s shape, before any of a stream went
/// out.
struct Refusal {
    format: Format,
    failure: Failure,
    /// Seconds a client should wait before trying again, when it may.
    retry_after: Option<u64>,
}

impl Refusal {
    fn status(format: Format, status: u16, message: impl Into<String>) -> Self {
        Self {
            format,
            failure: Failure::Status {
                status,
                message: message.into(),
            },
            retry_after: None,
        }
    }

    /// A refusal of the Model Gateway or a failure of the provider.
    fn of_call(format: Format, error: ModelCallError) -> Self {
        let (failure, retry_after) = match error {
            ModelCallError::Gateway(GatewayError::Token(e)) => (
                Failure::Status {
                    status: 401,
                    message: format!("the run token was refused: {e}"),
                },
                None,
            ),
            ModelCallError::Gateway(e) => (
                Failure::Status {
                    status: 403,
                    message: e.to_string(),
                },
                None,
            ),
            ModelCallError::TokensHeld(message) => (
                Failure::Status {
                    status: 429,
                    message,
                },
                Some(1),
            ),
            ModelCallError::Model { error, .. } => {
                let after = error.retry_after().map(|d| d.as_secs().max(1));
                (Failure::Model(*error), after)
            }
            // A credential missing from the host, a recording that does
            // not read: trying again changes nothing, so not a 5xx.
            ModelCallError::Unavailable(message) => (
                Failure::Status {
                    status: 400,
                    message: format!("the run's model cannot be called: {message}"),
                },
                None,
            ),
            other => (
                Failure::Status {
                    status: 400,
                    message: other.to_string(),
                },
                None,
            ),
        };
        Self {
            format,
            failure,
            retry_after,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, body) = self.format.error_body(&self.failure);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), "model request failed: {body}");
        } else {
            tracing::info!(status = status.as_u16(), "model request refused: {body}");
        }
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// The run token a request carries: `Authorization: Bearer TOKEN` or
/// `x-api-key: TOKEN` (both, when they agree). Two of either header, or
/// two that disagree, are refused: which one counts would be a guess.
fn run_token(format: Format, headers: &HeaderMap) -> Result<RunToken, Refusal> {
    let one = |name: &str| -> Result<Option<&str>, Refusal> {
        let mut values = headers.get_all(name).iter();
        let Some(first) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(Refusal::status(
                format,
                400,
                format!("the request has more than one `{name}` header"),
            ));
        }
        first.to_str().map(Some).map_err(|_| {
            Refusal::status(
                format,
                401,
                format!("the `{name}` header is not a run token"),
            )
        })
    };
    let bearer = match one(header::AUTHORIZATION.as_str())? {
        Some(value) => Some(value.strip_prefix("Bearer ").ok_or_else(|| {
            Refusal::status(
                format,
                401,
                "the Authorization header must be `Bearer TOKEN`, with the run's token",
            )
        })?),
        None => None,
    };
    let key = one("x-api-key")?;
    let token = match (bearer, key) {
        (Some(a), Some(b)) if a.trim() != b.trim() => {
            return Err(Refusal::status(
                format,
                400,
                "the Authorization and x-api-key headers carry different tokens",
            ));
        }
        (Some(token), _) | (None, Some(token)) => token.trim(),
        (None, None) => {
            return Err(Refusal::status(
                format,
                401,
                "no run token: send the run's token as `Authorization: Bearer TOKEN` or `x-api-key: TOKEN`",
            ));
        }
    };
    Ok(RunToken::from_text(token))
}

/// The body as JSON, at most [`MAX_MODEL_BODY_BYTES`].
async fn json_body(format: Format, request: Request) -> Result<Value, Refusal> {
    let bytes = axum::body::to_bytes(request.into_body(), MAX_MODEL_BODY_BYTES)
        .await
        .map_err(|_| {
            Refusal::status(
                format,
                413,
                format!("the request body is over {MAX_MODEL_BODY_BYTES} bytes, or was cut off"),
            )
        })?;
    crate::json::unique_value(&bytes).map_err(|e| Refusal::status(format, 400, e.to_string()))
}

/// The token, the run's model and the parsed request of a model route.
struct Prepared {
    token: RunToken,
    model: ModelInfo,
    inbound: Inbound,
    input_tokens: u64,
}

async fn prepare(
    runtime: &AgentRuntime,
    format: Format,
    request: Request,
) -> Result<Prepared, Refusal> {
    let token = run_token(format, request.headers())?;
    let model = runtime
        .run_model_info(&token)
        .map_err(|e| Refusal::of_call(format, e))?;
    let body = json_body(format, request).await?;
    let inbound = format.parse(&body).map_err(|e| Refusal {
        format,
        failure: Failure::Inbound(e),
        retry_after: None,
    })?;
    let r = &inbound.request;
    let input_tokens = hane_context::Tokenizer::for_model(&model.name).request_tokens(
        r.system.as_deref().unwrap_or_default(),
        &r.tools,
        &r.messages,
    );
    Ok(Prepared {
        token,
        model,
        inbound,
        input_tokens,
    })
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat(State(runtime): State<AgentRuntime>, request: Request) -> Response {
    complete(runtime, Format::Chat, request).await
}

/// `POST /v1/responses`.
pub(crate) async fn responses(State(runtime): State<AgentRuntime>, request: Request) -> Response {
    complete(runtime, Format::Responses, request).await
}

/// `POST /v1/messages`.
pub(crate) async fn messages(State(runtime): State<AgentRuntime>, request: Request) -> Response {
    complete(runtime, Format::Anthropic, request).await
}

async fn complete(runtime: AgentRuntime, format: Format, request: Request) -> Response {
    let prepared = match prepare(&runtime, format, request).await {
        Ok(prepared) => prepared,
        Err(refusal) => return refusal.into_response(),
    };
    let id = format.new_id();
    let call = ModelCall {
        context: json!({
            "served": format.name(),
            "stream": prepared.inbound.stream,
            "tokenizer": hane_context::Tokenizer::for_model(&prepared.model.name).name(),
            "inputTokens": prepared.input_tokens,
        }),
        input_tokens: prepared.input_tokens,
        request: prepared.inbound.request.clone(),
    };
    if !prepared.inbound.stream {
        return match runtime.call_model(&prepared.token, call, None).await {
            Ok(response) => axum::Json(format.response_body(&response, &id)).into_response(),
            Err(e) => Refusal::of_call(format, e).into_response(),
        };
    }
    stream(runtime, format, prepared, call, id).await
}

/// What the task making a stream sends its response.
enum Piece {
    /// Encoded events.
    Events(Bytes),
    /// The call failed before anything streamed.
    Refused(Refusal),
}

/// A streamed answer. The call runs in a task that sends the encoded
/// events as they come; the HTTP response starts with the first of them
/// (or is an error status when the call fails before anything streamed).
/// When the client goes away the channel closes and the task drops the
/// call, which cancels the upstream request.
async fn stream(
    runtime: AgentRuntime,
    format: Format,
    prepared: Prepared,
    call: ModelCall,
    id: String,
) -> Response {
    let (sender, mut receiver) = mpsc::unbounded_channel::<Piece>();
    let writer = format.writer(
        &id,
        &prepared.model.name,
        prepared.input_tokens,
        &prepared.inbound,
    );
    tokio::spawn(async move {
        let writer = Mutex::new((writer, false));
        // The events of one piece, behind the stream's opening events
        // when it is the first.
        let write = |make: &dyn Fn(&mut Writer) -> Vec<SseOut>| {
            let mut guard = writer.lock().unwrap_or_else(|e| e.into_inner());
            let (writer, started) = &mut *guard;
            let mut events = if *started {
                Vec::new()
            } else {
                *started = true;
                writer.start()
            };
            events.extend(make(writer));
            if !events.is_empty() {
                let _ = sender.send(Piece::Events(Bytes::from(dialect::encode(&events))));
            }
        };
        let sink = |event: StreamEvent| write(&|w: &mut Writer| w.event(&event));
        let called = tokio::select! {
            called = runtime.call_model(&prepared.token, call, Some(&sink)) => called,
            () = sender.closed() => return,
        };
        let started = writer.lock().unwrap_or_else(|e| e.into_inner()).1;
        match called {
            Ok(response) => write(&|w: &mut Writer| w.finish(&response)),
            Err(e) if !started => {
                let _ = sender.send(Piece::Refused(Refusal::of_call(format, e)));
            }
            Err(e) => {
                let failure = Refusal::of_call(format, e).failure;
                write(&|w: &mut Writer| w.fail(&failure));
            }
        }
    });
    match receiver.recv().await {
        Some(Piece::Events(first)) => {
            let body = Body::new(EventBody {
                first: Some(first),
                rest: receiver,
            });
            let mut response = Response::new(body);
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
        Some(Piece::Refused(refusal)) => refusal.into_response(),
        None => {
            Refusal::status(format, 500, "the model call ended without an answer").into_response()
        }
    }
}

/// The body of an event stream: the first piece, then what the task
/// sends until it ends.
struct EventBody {
    first: Option<Bytes>,
    rest: mpsc::UnboundedReceiver<Piece>,
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
        loop {
            return match self.rest.poll_recv(cx) {
                Poll::Ready(Some(Piece::Events(bytes))) => {
                    Poll::Ready(Some(Ok(http_body::Frame::data(bytes))))
                }
                // Only the first piece can be a refusal.
                Poll::Ready(Some(Piece::Refused(_))) => continue,
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

/// `POST /v1/messages/count_tokens`: the input tokens of a Messages
/// request, as the Model Gateway counts them for its limits.
pub(crate) async fn count_tokens(
    State(runtime): State<AgentRuntime>,
    request: Request,
) -> Response {
    let format = Format::Anthropic;
    let token = match run_token(format, request.headers()) {
        Ok(token) => token,
        Err(refusal) => return refusal.into_response(),
    };
    let model = match runtime.run_model_info(&token) {
        Ok(model) => model,
        Err(e) => return Refusal::of_call(format, e).into_response(),
    };
    let mut body = match json_body(format, request).await {
        Ok(body) => body,
        Err(refusal) => return refusal.into_response(),
    };
    // A count needs no output cap; the Messages parser wants one.
    if let Some(map) = body.as_object_mut() {
        map.entry("max_tokens").or_insert(json!(1));
    }
    let inbound = match format.parse(&body) {
        Ok(inbound) => inbound,
        Err(e) => {
            return Refusal {
                format,
                failure: Failure::Inbound(e),
                retry_after: None,
            }
            .into_response();
        }
    };
    let r = &inbound.request;
    let tokens = hane_context::Tokenizer::for_model(&model.name).request_tokens(
        r.system.as_deref().unwrap_or_default(),
        &r.tools,
        &r.messages,
    );
    axum::Json(json!({ "input_tokens": tokens })).into_response()
}

/// `GET /v1/models`: the run's model, in the OpenAI list shape, or in
/// Anthropic's when the request carries `anthropic-version`.
pub(crate) async fn models(State(runtime): State<AgentRuntime>, headers: HeaderMap) -> Response {
    let anthropic = headers.contains_key("anthropic-version");
    let format = if anthropic {
        Format::Anthropic
    } else {
        Format::Chat
    };
    let model = match run_token(format, &headers).and_then(|token| {
        runtime
            .run_model_info(&token)
            .map_err(|e| Refusal::of_call(format, e))
    }) {
        Ok(model) => model,
        Err(refusal) => return refusal.into_response(),
    };
    let name = &model.name;
    let body = if anthropic {
        json!({
            "data": [{
                "type": "model",
                "id": name,
                "display_name": name,
                "created_at": "1970-01-01T00:00:00Z",
            }],
            "has_more": false,
            "first_id": name,
            "last_id": name,
        })
    } else {
        json!({
            "object": "list",
            "data": [{
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": model.provider,
            }],
        })
    };
    axum::Json(body).into_response()
}

/// `HEAD /` and `GET /`: what Claude Code probes before its first
/// request.
pub(crate) async fn root() -> StatusCode {
    StatusCode::OK
}
