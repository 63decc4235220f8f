//! Serving the three wire formats: a client's request in OpenAI Chat
//! Completions, OpenAI Responses or Anthropic Messages form as the
//! normalized [`ModelRequest`], and a normalized [`ModelResponse`] (or a
//! failure) in the form that client expects — a JSON body, or the event
//! stream its provider would have sent.
//!
//! These are the reverse of [`crate::chat`], [`crate::responses`] and
//! [`crate::anthropic`], and pure: no I/O. What a client's request asks
//! for that the normalized request cannot carry is refused with an
//! [`InboundError`] naming the place in the body; fields that change
//! nothing hane can honour and lose nothing the client relies on (such as
//! `metadata`, `user`, `store`) are accepted and ignored.
//!
//! Each format's `StreamWriter` writes its event stream while the response
//! streams in: [`StreamEvent`]s as the upstream produces them, then the
//! completed response, which supplies whatever did not stream (all of it,
//! from an upstream that does not stream) and wins over what it
//! contradicts where the format has closing objects. `stream_events` is a
//! writer given a whole response in pieces.

pub mod anthropic;
pub mod chat;
pub mod responses;

use std::collections::HashSet;
use std::fmt::Display;

use serde_json::{Map, Value};

use crate::{Content, Message, ModelError, ModelRequest, ModelResponse, Role, StreamEvent};

/// A client's request, normalized.
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    /// The request.
    pub request: ModelRequest,
    /// Whether the client asked for an event stream.
    pub stream: bool,
    /// Whether the event stream is to end with the usage. Chat Completions
    /// sends it only when the client asks (`stream_options.include_usage`,
    /// a chunk with no choices that a careless client may trip on); the
    /// Responses and Messages streams always carry it, so `true` for them.
    pub include_usage: bool,
}

/// Why a client's request cannot be served: what, and where in its body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.pointer, .message))]
pub struct InboundError {
    /// A JSON Pointer to the part of the body at fault, such as
    /// `/messages/2/content/0/type`; empty for the body as a whole.
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

fn describe(pointer: &str, message: &str) -> String {
    if pointer.is_empty() {
        message.to_owned()
    } else {
        format!("{pointer}: {message}")
    }
}

impl InboundError {
    /// An error at `pointer`.
    pub fn new(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

/// One server-sent event to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseOut {
    /// The `event:` name, when the format names its events.
    pub event: Option<String>,
    /// The `data:` text.
    pub data: String,
}

impl SseOut {
    /// An unnamed event of `data` as JSON.
    pub fn data(data: &Value) -> Self {
        Self {
            event: None,
            data: data.to_string(),
        }
    }

    /// An event named `event` of `data` as JSON.
    pub fn named(event: &str, data: &Value) -> Self {
        Self {
            event: Some(event.to_owned()),
            data: data.to_string(),
        }
    }
}

/// `events` as an event stream body: `event: x\ndata: y\n\n` each (a
/// multi-line `data` as several `data:` lines).
pub fn encode(events: &[SseOut]) -> String {
    let mut out = String::new();
    for event in events {
        if let Some(name) = &event.event {
            out.push_str("event: ");
            out.push_str(name);
            out.push('\n');
        }
        for line in event.data.split('\n') {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// What went wrong serving a request, for a format's `error_body`.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The client's request cannot be translated.
    Inbound(InboundError),
    /// The model call failed.
    Model(ModelError),
    /// Any other failure: the HTTP status to answer and a message.
    Status {
        /// The HTTP status.
        status: u16,
        /// The message.
        message: String,
    },
}

impl From<InboundError> for Failure {
    fn from(error: InboundError) -> Self {
        Failure::Inbound(error)
    }
}

impl From<ModelError> for Failure {
    fn from(error: ModelError) -> Self {
        Failure::Model(error)
    }
}

/// A failure's class, which picks the status and the error's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Invalid,
    ContextTooLong,
    Authentication,
    Permission,
    NotFound,
    RateLimited,
    Overloaded,
    Timeout,
    Upstream,
    Internal,
}

/// The class, message, and the status when the failure fixed one.
pub(crate) fn classify(failure: &Failure) -> (Class, String, Option<u16>) {
    match failure {
        Failure::Inbound(error) => (Class::Invalid, error.to_string(), None),
        Failure::Model(error) => {
            let class = match error {
                ModelError::Authentication { .. } => Class::Authentication,
                ModelError::RateLimited { .. } => Class::RateLimited,
                ModelError::Overloaded { .. } => Class::Overloaded,
                ModelError::ContextTooLong { .. } => Class::ContextTooLong,
                ModelError::InvalidRequest { .. } => Class::Invalid,
                ModelError::Timeout(_) => Class::Timeout,
                ModelError::Transport(_) => Class::Upstream,
                // A recording answers the same way every time: a client
                // that tries again (CLIs do on a 5xx, for minutes) only
                // waits longer for the same refusal.
                ModelError::Recording(_) | ModelError::RecordingMismatch { .. } => Class::Invalid,
                _ => Class::Internal,
            };
            (class, error.to_string(), None)
        }
        Failure::Status { status, message } => {
            let class = match status {
                401 => Class::Authentication,
                403 => Class::Permission,
                404 => Class::NotFound,
                429 => Class::RateLimited,
                503 | 529 => Class::Overloaded,
                504 => Class::Timeout,
                502 => Class::Upstream,
                400..=499 => Class::Invalid,
                _ => Class::Internal,
            };
            (class, message.clone(), Some(*status))
        }
    }
}

/// The status for `class` (`overloaded`: 529 for Anthropic, 503 for
/// OpenAI).
pub(crate) fn status_of(class: Class, overloaded: u16) -> u16 {
    match class {
        Class::Invalid | Class::ContextTooLong => 400,
        Class::Authentication => 401,
        Class::Permission => 403,
        Class::NotFound => 404,
        Class::RateLimited => 429,
        Class::Overloaded => overloaded,
        Class::Timeout => 504,
        Class::Upstream => 502,
        Class::Internal => 500,
    }
}

/// The OpenAI error body (Chat Completions and Responses share it):
/// `{"error": {"message", "type", "param", "code"}}`.
pub(crate) fn openai_error_body(failure: &Failure) -> (u16, Value) {
    let (class, message, status) = classify(failure);
    let (kind, code) = match class {
        Class::Invalid => ("invalid_request_error", Value::Null),
        Class::ContextTooLong => ("invalid_request_error", "context_length_exceeded".into()),
        Class::Authentication => ("authentication_error", "invalid_api_key".into()),
        Class::Permission => ("permission_error", Value::Null),
        Class::NotFound => ("not_found_error", Value::Null),
        Class::RateLimited => ("rate_limit_error", "rate_limit_exceeded".into()),
        Class::Overloaded => ("server_error", "overloaded".into()),
        Class::Timeout => ("server_error", "timeout".into()),
        Class::Upstream => ("server_error", "upstream_error".into()),
        Class::Internal => ("server_error", Value::Null),
    };
    let param = match failure {
        Failure::Inbound(error) if !error.pointer.is_empty() => {
            Value::String(error.pointer.clone())
        }
        _ => Value::Null,
    };
    let body = serde_json::json!({"error": {
        "message": message, "type": kind, "param": param, "code": code}});
    (status.unwrap_or_else(|| status_of(class, 503)), body)
}

/// The Anthropic error body: `{"type": "error", "error": {"type",
/// "message"}}`.
pub(crate) fn anthropic_error_body(failure: &Failure) -> (u16, Value) {
    let (class, message, status) = classify(failure);
    let kind = match class {
        Class::Invalid | Class::ContextTooLong => "invalid_request_error",
        Class::Authentication => "authentication_error",
        Class::Permission => "permission_error",
        Class::NotFound => "not_found_error",
        Class::RateLimited => "rate_limit_error",
        Class::Overloaded => "overloaded_error",
        Class::Timeout => "timeout_error",
        Class::Upstream | Class::Internal => "api_error",
    };
    let body = serde_json::json!({"type": "error", "error": {"type": kind, "message": message}});
    (status.unwrap_or_else(|| status_of(class, 529)), body)
}

/// `base` with one more reference token (`~` and `/` escaped).
pub(crate) fn at(base: &str, token: impl Display) -> String {
    let token = token.to_string().replace('~', "~0").replace('/', "~1");
    format!("{base}/{token}")
}

/// The body as an object.
pub(crate) fn object(body: &Value) -> Result<&Map<String, Value>, InboundError> {
    body.as_object()
        .ok_or_else(|| InboundError::new("", "the request body is not a JSON object"))
}

/// The field `key` of `map`, `None` when absent or null.
pub(crate) fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    map.get(key).filter(|v| !v.is_null())
}

/// The string at `map[key]`, required.
pub(crate) fn required_str<'v>(
    map: &'v Map<String, Value>,
    base: &str,
    key: &str,
) -> Result<&'v str, InboundError> {
    match field(map, key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(InboundError::new(at(base, key), "must be a string")),
        None => Err(InboundError::new(at(base, key), "is required")),
    }
}

/// The string at `map[key]`, when present.
pub(crate) fn optional_str<'v>(
    map: &'v Map<String, Value>,
    base: &str,
    key: &str,
) -> Result<Option<&'v str>, InboundError> {
    match field(map, key) {
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(InboundError::new(at(base, key), "must be a string")),
        None => Ok(None),
    }
}

/// The object at `value`.
pub(crate) fn as_object<'v>(
    value: &'v Value,
    pointer: &str,
) -> Result<&'v Map<String, Value>, InboundError> {
    value
        .as_object()
        .ok_or_else(|| InboundError::new(pointer, "must be an object"))
}

/// The array at `map[key]` (empty when absent).
pub(crate) fn array<'v>(
    map: &'v Map<String, Value>,
    base: &str,
    key: &str,
) -> Result<&'v [Value], InboundError> {
    match field(map, key) {
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(InboundError::new(at(base, key), "must be an array")),
        None => Ok(&[]),
    }
}

/// The non-negative integer at `map[key]`, when present.
pub(crate) fn optional_u64(
    map: &Map<String, Value>,
    key: &str,
) -> Result<Option<u64>, InboundError> {
    match field(map, key) {
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| InboundError::new(at("", key), "must be a non-negative integer")),
        None => Ok(None),
    }
}

/// The number at `map[key]`, when present.
pub(crate) fn optional_f64(
    map: &Map<String, Value>,
    key: &str,
) -> Result<Option<f64>, InboundError> {
    match field(map, key) {
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| InboundError::new(at("", key), "must be a number")),
        None => Ok(None),
    }
}

/// The boolean at `map[key]`, `false` when absent.
pub(crate) fn flag(map: &Map<String, Value>, base: &str, key: &str) -> Result<bool, InboundError> {
    match field(map, key) {
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(InboundError::new(at(base, key), "must be a boolean")),
        None => Ok(false),
    }
}

/// An image data URL (`data:image/png;base64,...`) as media type and
/// base64 data; other URLs are refused (hane sends images inline).
pub(crate) fn data_url(url: &str, pointer: &str) -> Result<(String, String), InboundError> {
    url.strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
        .and_then(|(head, data)| {
            head.strip_suffix(";base64")
                .map(|media| (media.to_owned(), data.to_owned()))
        })
        .filter(|(media, _)| !media.is_empty())
        .ok_or_else(|| {
            InboundError::new(
                pointer,
                "only base64 data URLs are supported for images (hane does not fetch URLs)",
            )
        })
}

/// The tool call ids seen so far in a conversation, so that a result of
/// an unknown call is refused.
#[derive(Debug, Default)]
pub(crate) struct Calls(HashSet<String>);

impl Calls {
    pub fn add(&mut self, id: &str) {
        self.0.insert(id.to_owned());
    }

    pub fn check(&self, id: &str, pointer: &str) -> Result<(), InboundError> {
        if self.0.contains(id) {
            Ok(())
        } else {
            Err(InboundError::new(
                pointer,
                format!("no tool call with id {id:?} precedes this tool result"),
            ))
        }
    }
}

/// Adds `block` to the conversation: to the last message when it has
/// `role` and `join` says so for it, else as a new message.
pub(crate) fn push(
    messages: &mut Vec<Message>,
    role: Role,
    blocks: Vec<Content>,
    join: impl Fn(&Message) -> bool,
) {
    match messages.last_mut() {
        Some(last) if last.role == role && join(last) => last.content.extend(blocks),
        _ => messages.push(Message {
            role,
            content: blocks,
        }),
    }
}

/// Whether the message ends in a tool call or result: a message part that
/// follows continues it (the formats that put tool calls and results
/// apart from messages split one normalized message there).
pub(crate) fn ends_in_tool(message: &Message) -> bool {
    matches!(
        message.content.last(),
        Some(Content::ToolCall { .. } | Content::ToolResult { .. })
    )
}

/// The system text: its pieces joined by blank lines, `None` when none.
pub(crate) fn system(pieces: Vec<String>) -> Option<String> {
    if pieces.is_empty() {
        None
    } else {
        Some(pieces.join("\n\n"))
    }
}

/// How many characters a streamed delta carries at most.
pub(crate) const PIECE_CHARS: usize = 16;

/// `text` cut into deltas of at most [`PIECE_CHARS`] characters (none for
/// an empty text).
pub(crate) fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (n, (i, _)) in text.char_indices().enumerate() {
        if n > 0 && n % PIECE_CHARS == 0 {
            out.push(&text[start..i]);
            start = i;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// One block of a response as a stream writer has sent it.
#[derive(Debug)]
pub(crate) struct Sent {
    /// The upstream's index of the block.
    pub upstream: usize,
    /// The call's id and name, for a tool call (the final response's once
    /// matched at the finish).
    pub call: Option<(String, String)>,
    /// The text or arguments sent.
    pub text: String,
    /// The final response's text or arguments, once matched at the finish.
    pub last: Option<String>,
    /// Whether the final response turned out to have no such block.
    pub dropped: bool,
}

impl Sent {
    /// What the closing events show: the final response's value when
    /// there is one (it wins over what was streamed).
    pub fn closing(&self) -> &str {
        self.last.as_deref().unwrap_or(&self.text)
    }

    /// The final value beyond what was sent, when it extends what was
    /// sent; counted as sent from then on.
    pub fn take_rest(&mut self) -> Option<String> {
        let rest = self
            .last
            .as_deref()?
            .strip_prefix(self.text.as_str())
            .filter(|rest| !rest.is_empty())?
            .to_owned();
        self.text.push_str(&rest);
        Some(rest)
    }
}

/// The blocks a stream writer has sent, in the order they began (the
/// formats' own block and item positions follow it).
#[derive(Debug, Default)]
pub(crate) struct SentBlocks(pub Vec<Sent>);

impl SentBlocks {
    /// The position of the block with upstream index `upstream`.
    pub fn position(&self, upstream: usize) -> Option<usize> {
        self.0.iter().position(|b| b.upstream == upstream)
    }

    /// Adds a block (a tool call when `call` is given); its position.
    pub fn push(&mut self, upstream: usize, call: Option<(&str, &str)>) -> usize {
        self.0.push(Sent {
            upstream,
            call: call.map(|(id, name)| (id.to_owned(), name.to_owned())),
            text: String::new(),
            last: None,
            dropped: false,
        });
        self.0.len() - 1
    }

    /// Matches the final response's blocks (text that is not empty, and
    /// tool calls) to the blocks sent, in order: a text to the next sent
    /// block when that is text; a call to the next sent call with its id,
    /// else to the next sent block when that is a call. A matched block
    /// learns its final value; a sent block nothing matched is dropped.
    /// Returns the events of the final blocks nothing matched (never
    /// streamed), at upstream indexes no block has.
    pub fn reconcile(&mut self, response: &ModelResponse) -> Vec<StreamEvent> {
        let fresh = self.0.iter().map(|b| b.upstream + 1).max().unwrap_or(0);
        let mut missing = Vec::new();
        let mut next = 0;
        let mut matched = vec![false; self.0.len()];
        for block in final_blocks(response) {
            let found = match block {
                Content::ToolCall { id, .. } => (next..self.0.len())
                    .find(|&j| self.0[j].call.as_ref().is_some_and(|(sent, _)| sent == id))
                    .or_else(|| self.0.get(next).filter(|b| b.call.is_some()).map(|_| next)),
                _ => self.0.get(next).filter(|b| b.call.is_none()).map(|_| next),
            };
            match found {
                Some(j) => {
                    let sent = &mut self.0[j];
                    match block {
                        Content::ToolCall { id, name, input } => {
                            sent.call = Some((id.clone(), name.clone()));
                            sent.last = Some(crate::arguments_text(input));
                        }
                        Content::Text { text } => sent.last = Some(text.clone()),
                        _ => {}
                    }
                    matched[j] = true;
                    next = j + 1;
                }
                None => block_events(fresh + missing.len(), block, &mut missing),
            }
        }
        for (sent, matched) in self.0.iter_mut().zip(matched) {
            sent.dropped = !matched;
        }
        missing
    }
}

/// The blocks of `response` a stream shows: text that is not empty, and
/// tool calls.
fn final_blocks(response: &ModelResponse) -> impl Iterator<Item = &Content> {
    response.content.iter().filter(|c| match c {
        Content::Text { text } => !text.is_empty(),
        Content::ToolCall { .. } => true,
        _ => false,
    })
}

/// The events of `block` as an upstream streams it at `index`: text in
/// pieces, or a call's start and its arguments in pieces.
fn block_events(index: usize, block: &Content, out: &mut Vec<StreamEvent>) {
    match block {
        Content::Text { text } => {
            out.extend(
                pieces(text)
                    .into_iter()
                    .map(|piece| StreamEvent::TextDelta {
                        index,
                        text: piece.to_owned(),
                    }),
            )
        }
        Content::ToolCall { id, name, input } => {
            out.push(StreamEvent::ToolCallStart {
                index,
                id: id.clone(),
                name: name.clone(),
            });
            let arguments = crate::arguments_text(input);
            out.extend(
                pieces(&arguments)
                    .into_iter()
                    .map(|piece| StreamEvent::ToolCallDelta {
                        index,
                        json: piece.to_owned(),
                    }),
            );
        }
        _ => {}
    }
}

/// The events a fully streamed `response` would have given, its blocks
/// at their indexes in its content.
pub(crate) fn streamed(response: &ModelResponse) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    for (index, block) in response.content.iter().enumerate() {
        block_events(index, block, &mut out);
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;
    use crate::sse::{SseEvent, SseParser};
    use crate::{Api, EventSink, StopReason, ToolChoice, ToolSpec, Usage};

    /// A rich request: system, user text and image, assistant text and two
    /// tool calls, their results (one an error) and more user text, tools,
    /// a tool choice, a cap, stop sequences and a temperature.
    pub fn rich_request() -> ModelRequest {
        let mut request = ModelRequest::new("model-x");
        request.system = Some("Be brief.".into());
        request.messages = vec![
            Message {
                role: Role::User,
                content: vec![
                    Content::text("What is in this picture, and what's the weather?"),
                    Content::Image {
                        media_type: "image/png".into(),
                        data: "iVBORw0KGgo=".into(),
                    },
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    Content::text("Let me look."),
                    Content::ToolCall {
                        id: "call_1".into(),
                        name: "weather".into(),
                        input: json!({"city": "Paris", "days": 2}),
                    },
                    Content::ToolCall {
                        id: "call_2".into(),
                        name: "describe".into(),
                        input: json!({}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    Content::ToolResult {
                        call_id: "call_1".into(),
                        content: "sunny, 21 °C".into(),
                        is_error: false,
                    },
                    Content::ToolResult {
                        call_id: "call_2".into(),
                        content: "no such image".into(),
                        is_error: true,
                    },
                    Content::text("Go on."),
                ],
            },
        ];
        request.tools = vec![
            ToolSpec {
                name: "weather".into(),
                description: "The weather in a city.".into(),
                input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]}),
            },
            ToolSpec {
                name: "describe".into(),
                description: "Describes the image.".into(),
                input_schema: json!({"type": "object", "properties": {}}),
            },
        ];
        request.tool_choice = ToolChoice::Tool {
            name: "weather".into(),
        };
        request.max_output_tokens = Some(512);
        request.stop = vec!["END".into(), "\n\nUser:".into()];
        request.temperature = Some(0.25);
        request
    }

    /// A response of text and two tool calls.
    pub fn rich_response(stop_reason: StopReason) -> ModelResponse {
        ModelResponse {
            content: vec![
                Content::text("Checking the weather in two cities — één moment."),
                Content::ToolCall {
                    id: "call_a".into(),
                    name: "weather".into(),
                    input: json!({"city": "Paris", "options": {"unit": "C", "days": [1, 2]}}),
                },
                Content::ToolCall {
                    id: "call_b".into(),
                    name: "weather".into(),
                    input: json!({}),
                },
            ],
            stop_reason,
            usage: Usage {
                input_tokens: 1200,
                output_tokens: 80,
                cached_tokens: 1024,
            },
            model: "model-x".into(),
            request_id: Some("id".into()),
        }
    }

    /// The events of `body`, parsed in small chunks.
    pub fn parse_sse(body: &str) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for chunk in body.as_bytes().chunks(7) {
            events.extend(parser.push(chunk).unwrap());
        }
        events.extend(parser.finish());
        events
    }

    /// The formats, as upstreams and as clients.
    pub const APIS: [Api; 3] = [Api::ChatCompletions, Api::Responses, Api::AnthropicMessages];

    /// hane's `events` read back by the outbound parser of `api`, which
    /// must see the stream end and nothing after it.
    pub fn read_back(api: Api, events: &[SseOut]) -> Result<ModelResponse, ModelError> {
        assemble(api, events, None)
    }

    fn assemble(
        api: Api,
        events: &[SseOut],
        sink: Option<EventSink<'_>>,
    ) -> Result<ModelResponse, ModelError> {
        fn feed(
            events: &[SseEvent],
            mut event: impl FnMut(&SseEvent) -> Result<bool, ModelError>,
        ) -> Result<(), ModelError> {
            let mut done = false;
            for e in events {
                assert!(!done, "an event after the end: {e:?}");
                done = event(e)?;
            }
            assert!(done, "the stream did not end");
            Ok(())
        }
        let parsed = parse_sse(&encode(events));
        match api {
            Api::ChatCompletions => {
                let mut stream = crate::chat::Stream::new(sink);
                feed(&parsed, |e| stream.event(e))?;
                stream.finish()
            }
            Api::Responses => {
                let mut stream = crate::responses::Stream::new(sink);
                feed(&parsed, |e| stream.event(e))?;
                stream.finish()
            }
            Api::AnthropicMessages => {
                let mut stream = crate::anthropic::Stream::new(sink);
                feed(&parsed, |e| stream.event(e))?;
                stream.finish()
            }
        }
    }

    /// What an upstream speaking `api` streams for `response`: the pieces
    /// its parser passes on, cut again into pieces of 5 characters (not
    /// the pieces `stream_events` cuts), and the response it assembles.
    pub fn upstream(api: Api, response: &ModelResponse) -> (Vec<StreamEvent>, ModelResponse) {
        let body = match api {
            Api::ChatCompletions => chat::stream_events(response, "up"),
            Api::Responses => responses::stream_events(response, "up"),
            Api::AnthropicMessages => anthropic::stream_events(response, "up"),
        };
        let events = std::sync::Mutex::new(Vec::new());
        let sink = |event: StreamEvent| events.lock().unwrap().push(event);
        let assembled = assemble(api, &body, Some(&sink)).unwrap();
        let cut = |s: &str| -> Vec<String> {
            let chars: Vec<char> = s.chars().collect();
            chars.chunks(5).map(|c| c.iter().collect()).collect()
        };
        let events = events
            .into_inner()
            .unwrap()
            .into_iter()
            .flat_map(|event| match event {
                StreamEvent::TextDelta { index, text } => cut(&text)
                    .into_iter()
                    .map(|text| StreamEvent::TextDelta { index, text })
                    .collect(),
                StreamEvent::ToolCallDelta { index, json } => cut(&json)
                    .into_iter()
                    .map(|json| StreamEvent::ToolCallDelta { index, json })
                    .collect(),
                other => vec![other],
            })
            .collect();
        (events, assembled)
    }

    /// Responses to stream, each with the upstreams that stream it without
    /// interleaving blocks (Chat Completions has one text, so text after a
    /// tool call goes back to it).
    pub fn streamed_cases() -> Vec<(ModelResponse, Vec<Api>)> {
        let rich = rich_response(StopReason::ToolUse);
        let [text, call_a, call_b] = <[Content; 3]>::try_from(rich.content.clone()).unwrap();
        let with = |content: Vec<Content>, stop_reason| ModelResponse {
            content,
            stop_reason,
            ..rich.clone()
        };
        vec![
            (
                with(vec![text.clone(), call_a.clone()], StopReason::ToolUse),
                APIS.to_vec(),
            ),
            (
                with(vec![call_a.clone(), call_b.clone()], StopReason::ToolUse),
                APIS.to_vec(),
            ),
            (rich.clone(), APIS.to_vec()),
            (
                with(
                    vec![text.clone(), Content::text(" And a second text.")],
                    StopReason::MaxTokens,
                ),
                APIS.to_vec(),
            ),
            (
                with(
                    vec![text, call_a, Content::text("Then more.")],
                    StopReason::ToolUse,
                ),
                vec![Api::Responses, Api::AnthropicMessages],
            ),
        ]
    }

    /// `events` as (name, JSON) with `sequence_number` left out and the
    /// deltas in a row merged: an event whose string at one of `pointers`
    /// differs from the one before only there extends it.
    pub fn merged(events: &[SseOut], pointers: &[&str]) -> Vec<(Option<String>, Value)> {
        let mut out: Vec<(Option<String>, Value)> = Vec::new();
        'events: for event in events {
            let mut data: Value =
                serde_json::from_str(&event.data).unwrap_or_else(|_| json!(event.data));
            if let Some(map) = data.as_object_mut() {
                map.remove("sequence_number");
            }
            for &pointer in pointers {
                let Some(more) = data.pointer(pointer).and_then(Value::as_str) else {
                    continue;
                };
                let blank = |value: &Value| {
                    let mut value = value.clone();
                    if let Some(s) = value.pointer_mut(pointer) {
                        *s = json!("");
                    }
                    value
                };
                if let Some((name, last)) = out.last_mut()
                    && *name == event.event
                    && last.pointer(pointer).is_some_and(Value::is_string)
                    && blank(last) == blank(&data)
                {
                    let joined =
                        format!("{}{more}", last.pointer(pointer).unwrap().as_str().unwrap());
                    *last.pointer_mut(pointer).unwrap() = json!(joined);
                    continue 'events;
                }
            }
            out.push((event.event.clone(), data));
        }
        out
    }

    /// The failure the in-stream error tests send.
    pub fn rate_limited() -> Failure {
        Failure::Model(ModelError::RateLimited {
            retry_after: None,
            message: "slow down".into(),
        })
    }

    #[test]
    fn encoding_names_events_and_splits_data_lines() {
        let events = vec![
            SseOut::named("a", &json!({"x": 1})),
            SseOut {
                event: None,
                data: "one\ntwo".into(),
            },
        ];
        let text = encode(&events);
        assert_eq!(
            text,
            "event: a\ndata: {\"x\":1}\n\ndata: one\ndata: two\n\n"
        );
        let parsed = parse_sse(&text);
        assert_eq!(parsed[0].event, "a");
        assert_eq!(parsed[1].data, "one\ntwo");
    }

    #[test]
    fn pieces_cut_on_characters() {
        assert!(pieces("").is_empty());
        let text = "ééééééééééééééééé-abc";
        let cut = pieces(text);
        assert_eq!(cut.len(), 2);
        assert_eq!(cut.concat(), text);
        assert_eq!(cut[0].chars().count(), PIECE_CHARS);
    }

    #[test]
    fn an_inbound_error_shows_its_pointer() {
        assert_eq!(
            InboundError::new("/messages/0", "bad").to_string(),
            "/messages/0: bad"
        );
        assert_eq!(InboundError::new("", "bad").to_string(), "bad");
        assert_eq!(at("/a", "b/c~d"), "/a/b~1c~0d");
    }

    #[test]
    fn data_urls_are_split_and_other_urls_refused() {
        assert_eq!(
            data_url("data:image/jpeg;base64,AAAA", "/p").unwrap(),
            ("image/jpeg".to_owned(), "AAAA".to_owned())
        );
        assert_eq!(
            data_url("https://example.com/a.png", "/p")
                .unwrap_err()
                .pointer,
            "/p"
        );
    }

    #[test]
    fn failures_map_to_the_status_a_client_acts_on() {
        use std::time::Duration;
        let cases = [
            (
                Failure::Model(ModelError::Authentication {
                    message: "no".into(),
                }),
                401,
                401,
            ),
            (
                Failure::Model(ModelError::RateLimited {
                    retry_after: None,
                    message: "slow".into(),
                }),
                429,
                429,
            ),
            (
                Failure::Model(ModelError::Overloaded {
                    retry_after: None,
                    message: "busy".into(),
                }),
                503,
                529,
            ),
            (
                Failure::Model(ModelError::ContextTooLong {
                    message: "long".into(),
                }),
                400,
                400,
            ),
            (
                Failure::Model(ModelError::InvalidRequest {
                    message: "bad".into(),
                }),
                400,
                400,
            ),
            (
                Failure::Model(ModelError::Timeout(Duration::from_secs(3))),
                504,
                504,
            ),
            (
                Failure::Model(ModelError::Transport("eof".into())),
                502,
                502,
            ),
            (InboundError::new("/n", "no").into(), 400, 400),
            (
                Failure::Model(ModelError::RecordingMismatch {
                    path: "r.json".into(),
                    turn: 1,
                    place: "messages[0]".into(),
                    detail: "recorded text, got a tool call".into(),
                }),
                400,
                400,
            ),
            (
                Failure::Model(ModelError::Recording("no turn left".into())),
                400,
                400,
            ),
            (
                Failure::Status {
                    status: 404,
                    message: "no such model".into(),
                },
                404,
                404,
            ),
        ];
        for (failure, openai, anthropic) in cases {
            let (status, body) = openai_error_body(&failure);
            assert_eq!(status, openai, "{failure:?}");
            assert!(body["error"]["message"].is_string());
            assert!(body["error"]["type"].is_string());
            assert!(body["error"].get("param").is_some() && body["error"].get("code").is_some());
            let (status, body) = anthropic_error_body(&failure);
            assert_eq!(status, anthropic, "{failure:?}");
            assert_eq!(body["type"], "error");
            assert!(body["error"]["type"].is_string() && body["error"]["message"].is_string());
        }
        let (_, body) = openai_error_body(&InboundError::new("/n", "no").into());
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["param"], "/n");
        let (_, body) = anthropic_error_body(&InboundError::new("/n", "no").into());
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["message"], "/n: no");
    }

    #[test]
    fn error_bodies_read_back_as_the_same_kind_of_error() {
        let cases = [
            ModelError::Authentication {
                message: "bad key".into(),
            },
            ModelError::RateLimited {
                retry_after: None,
                message: "slow down".into(),
            },
            ModelError::Overloaded {
                retry_after: None,
                message: "busy".into(),
            },
            ModelError::InvalidRequest {
                message: "bad".into(),
            },
        ];
        for error in cases {
            for (status, body) in [
                openai_error_body(&error.clone().into()),
                anthropic_error_body(&error.clone().into()),
            ] {
                let back = crate::error::from_status(
                    http::StatusCode::from_u16(status).unwrap(),
                    &http::HeaderMap::new(),
                    &body.to_string(),
                );
                assert_eq!(
                    std::mem::discriminant(&back),
                    std::mem::discriminant(&error),
                    "{error:?} -> {back:?}"
                );
            }
        }
    }
}
