//! Serving OpenAI Chat Completions: a client's `POST /chat/completions`
//! body as the normalized request, and the normalized response as a
//! `chat.completion` object or its `chat.completion.chunk` stream.
//!
//! `system` and `developer` messages (wherever they are) make the system
//! text; `tool` messages are tool results, joined with the user message
//! they follow or precede into one normalized user message. Refused: `n`
//! other than 1, `logprobs`, audio (`audio`, `modalities`, `input_audio`
//! parts), `file` parts, image URLs that are not data URLs, structured
//! output (`response_format` other than `text`), the legacy `functions`
//! and `function_call`, tools that are not functions, and a tool result
//! whose call is not in the conversation.

use serde_json::{Map, Value, json};

use super::{
    Calls, Failure, Inbound, InboundError, SentBlocks, SseOut, array, as_object, at, data_url,
    ends_in_tool, field, flag, object, optional_f64, optional_str, optional_u64, push,
    required_str,
};
use crate::{
    Content, Message, ModelRequest, ModelResponse, Role, StopReason, StreamEvent, ToolChoice,
    ToolSpec, arguments_text,
};

/// The normalized request for a Chat Completions request body.
///
/// # Errors
///
/// [`InboundError`] for a malformed body or what hane cannot translate.
pub fn parse_request(body: &Value) -> Result<Inbound, InboundError> {
    let map = object(body)?;
    refuse_unsupported(map)?;
    let mut request = ModelRequest::new(required_str(map, "", "model")?);
    let mut system = Vec::new();
    let mut calls = Calls::default();
    for (i, message) in array(map, "", "messages")?.iter().enumerate() {
        let p = at("/messages", i);
        let message_map = as_object(message, &p)?;
        match required_str(message_map, &p, "role")? {
            "system" | "developer" => system.push(text_only(message_map, &p)?),
            "user" => {
                let blocks = user_content(message_map, &p)?;
                push(&mut request.messages, Role::User, blocks, ends_in_tool);
            }
            "assistant" => {
                let blocks = assistant_content(message_map, &p, &mut calls)?;
                request.messages.push(Message {
                    role: Role::Assistant,
                    content: blocks,
                });
            }
            "tool" => {
                let call_id = required_str(message_map, &p, "tool_call_id")?;
                calls.check(call_id, &at(&p, "tool_call_id"))?;
                let content = text_only(message_map, &p)?;
                push(
                    &mut request.messages,
                    Role::User,
                    vec![Content::ToolResult {
                        call_id: call_id.to_owned(),
                        content,
                        is_error: false,
                    }],
                    |_| true,
                );
            }
            other => {
                return Err(InboundError::new(
                    at(&p, "role"),
                    format!("the role {other:?} is not supported"),
                ));
            }
        }
    }
    request.system = super::system(system);
    for (i, tool) in array(map, "", "tools")?.iter().enumerate() {
        request.tools.push(tool_spec(tool, &at("/tools", i))?);
    }
    if let Some(choice) = field(map, "tool_choice") {
        request.tool_choice = tool_choice(choice)?;
    }
    request.max_output_tokens = match optional_u64(map, "max_completion_tokens")? {
        Some(max) => Some(max),
        None => optional_u64(map, "max_tokens")?,
    };
    request.stop = match field(map, "stop") {
        Some(Value::String(stop)) => vec![stop.clone()],
        Some(Value::Array(stops)) => stops
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| InboundError::new(at("/stop", i), "must be a string"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(InboundError::new("/stop", "must be a string or an array")),
        None => Vec::new(),
    };
    request.temperature = optional_f64(map, "temperature")?;
    let stream = flag(map, "", "stream")?;
    let include_usage = match field(map, "stream_options") {
        None => false,
        Some(options) => flag(
            as_object(options, "/stream_options")?,
            "/stream_options",
            "include_usage",
        )?,
    };
    Ok(Inbound {
        request,
        stream,
        include_usage,
    })
}

fn refuse_unsupported(map: &Map<String, Value>) -> Result<(), InboundError> {
    if let Some(n) = field(map, "n")
        && n.as_u64() != Some(1)
    {
        return Err(InboundError::new(
            "/n",
            "only one choice (n = 1) is supported",
        ));
    }
    if field(map, "logprobs").is_some_and(|v| v != &Value::Bool(false)) {
        return Err(InboundError::new("/logprobs", "logprobs are not supported"));
    }
    if field(map, "top_logprobs").is_some_and(|v| v.as_u64() != Some(0)) {
        return Err(InboundError::new(
            "/top_logprobs",
            "logprobs are not supported",
        ));
    }
    if field(map, "audio").is_some() {
        return Err(InboundError::new("/audio", "audio output is not supported"));
    }
    if let Some(modalities) = field(map, "modalities")
        && modalities
            .as_array()
            .is_none_or(|m| m.iter().any(|m| m != "text"))
    {
        return Err(InboundError::new(
            "/modalities",
            "only the text modality is supported",
        ));
    }
    if let Some(format) = field(map, "response_format")
        && format.get("type").and_then(Value::as_str) != Some("text")
    {
        return Err(InboundError::new(
            "/response_format/type",
            "structured output (response_format) is not supported",
        ));
    }
    for legacy in ["functions", "function_call"] {
        if field(map, legacy).is_some() {
            return Err(InboundError::new(
                at("", legacy),
                "the legacy function calling fields are not supported; use tools",
            ));
        }
    }
    Ok(())
}

/// A message's content as text: a string, or text parts joined.
fn text_only(message: &Map<String, Value>, p: &str) -> Result<String, InboundError> {
    match field(message, "content") {
        None => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                let pp = at(&at(p, "content"), j);
                let part = as_object(part, &pp)?;
                match required_str(part, &pp, "type")? {
                    "text" => text.push_str(required_str(part, &pp, "text")?),
                    other => {
                        return Err(InboundError::new(
                            at(&pp, "type"),
                            format!("a {other:?} part is not supported here, only text"),
                        ));
                    }
                }
            }
            Ok(text)
        }
        Some(_) => Err(InboundError::new(
            at(p, "content"),
            "must be a string or an array of parts",
        )),
    }
}

fn user_content(message: &Map<String, Value>, p: &str) -> Result<Vec<Content>, InboundError> {
    let parts = match field(message, "content") {
        None => return Ok(Vec::new()),
        Some(Value::String(text)) => return Ok(vec![Content::text(text.clone())]),
        Some(Value::Array(parts)) => parts,
        Some(_) => {
            return Err(InboundError::new(
                at(p, "content"),
                "must be a string or an array of parts",
            ));
        }
    };
    let mut blocks = Vec::new();
    for (j, part) in parts.iter().enumerate() {
        let pp = at(&at(p, "content"), j);
        let part = as_object(part, &pp)?;
        match required_str(part, &pp, "type")? {
            "text" => blocks.push(Content::text(required_str(part, &pp, "text")?)),
            "image_url" => {
                let image = field(part, "image_url")
                    .ok_or_else(|| InboundError::new(at(&pp, "image_url"), "is required"))?;
                let url = match image {
                    Value::String(url) => url.as_str(),
                    other => required_str(as_object(other, &at(&pp, "image_url"))?, &pp, "url")?,
                };
                let (media_type, data) = data_url(url, &at(&at(&pp, "image_url"), "url"))?;
                blocks.push(Content::Image { media_type, data });
            }
            "input_audio" => {
                return Err(InboundError::new(
                    at(&pp, "type"),
                    "audio content is not supported",
                ));
            }
            other => {
                return Err(InboundError::new(
                    at(&pp, "type"),
                    format!("a {other:?} part is not supported"),
                ));
            }
        }
    }
    Ok(blocks)
}

fn assistant_content(
    message: &Map<String, Value>,
    p: &str,
    calls: &mut Calls,
) -> Result<Vec<Content>, InboundError> {
    let mut blocks = Vec::new();
    match field(message, "content") {
        Some(Value::String(text)) if !text.is_empty() => blocks.push(Content::text(text.clone())),
        None | Some(Value::String(_)) => {}
        Some(Value::Array(parts)) => {
            for (j, part) in parts.iter().enumerate() {
                let pp = at(&at(p, "content"), j);
                let part = as_object(part, &pp)?;
                let key = match required_str(part, &pp, "type")? {
                    "text" => "text",
                    "refusal" => "refusal",
                    other => {
                        return Err(InboundError::new(
                            at(&pp, "type"),
                            format!("a {other:?} part is not supported in an assistant message"),
                        ));
                    }
                };
                blocks.push(Content::text(required_str(part, &pp, key)?));
            }
        }
        Some(_) => {
            return Err(InboundError::new(
                at(p, "content"),
                "must be a string or an array of parts",
            ));
        }
    }
    if field(message, "audio").is_some() {
        return Err(InboundError::new(
            at(p, "audio"),
            "audio content is not supported",
        ));
    }
    for (k, call) in array(message, p, "tool_calls")?.iter().enumerate() {
        let pc = at(&at(p, "tool_calls"), k);
        let call = as_object(call, &pc)?;
        if let Some(kind) = optional_str(call, &pc, "type")?
            && kind != "function"
        {
            return Err(InboundError::new(
                at(&pc, "type"),
                format!("a {kind:?} tool call is not supported"),
            ));
        }
        let id = required_str(call, &pc, "id")?;
        let pf = at(&pc, "function");
        let function = as_object(
            field(call, "function").ok_or_else(|| InboundError::new(&pf, "is required"))?,
            &pf,
        )?;
        let name = required_str(function, &pf, "name")?;
        let input = arguments(field(function, "arguments"), &at(&pf, "arguments"))?;
        calls.add(id);
        blocks.push(Content::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            input,
        });
    }
    Ok(blocks)
}

/// A tool call's `arguments` (a JSON string, or the object itself) as its
/// input object.
fn arguments(raw: Option<&Value>, pointer: &str) -> Result<Value, InboundError> {
    match raw {
        None => Ok(json!({})),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(json!({})),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => Ok(object),
            _ => Err(InboundError::new(
                pointer,
                "must be the JSON text of an object",
            )),
        },
        Some(object @ Value::Object(_)) => Ok(object.clone()),
        Some(_) => Err(InboundError::new(
            pointer,
            "must be the JSON text of an object",
        )),
    }
}

fn tool_spec(tool: &Value, p: &str) -> Result<ToolSpec, InboundError> {
    let tool = as_object(tool, p)?;
    let kind = required_str(tool, p, "type")?;
    if kind != "function" {
        return Err(InboundError::new(
            at(p, "type"),
            format!("a {kind:?} tool is not supported, only functions"),
        ));
    }
    let pf = at(p, "function");
    let function = as_object(
        field(tool, "function").ok_or_else(|| InboundError::new(&pf, "is required"))?,
        &pf,
    )?;
    Ok(ToolSpec {
        name: required_str(function, &pf, "name")?.to_owned(),
        description: optional_str(function, &pf, "description")?
            .unwrap_or_default()
            .to_owned(),
        input_schema: field(function, "parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

fn tool_choice(choice: &Value) -> Result<ToolChoice, InboundError> {
    match choice {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(InboundError::new(
                "/tool_choice",
                format!("the tool choice {other:?} is not supported"),
            )),
        },
        Value::Object(map) => match map.get("type").and_then(Value::as_str) {
            Some("function") => {
                let name = map
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        InboundError::new("/tool_choice/function/name", "is required")
                    })?;
                Ok(ToolChoice::Tool {
                    name: name.to_owned(),
                })
            }
            _ => Err(InboundError::new(
                "/tool_choice/type",
                "only a function tool choice is supported",
            )),
        },
        _ => Err(InboundError::new(
            "/tool_choice",
            "must be a string or an object",
        )),
    }
}

fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Refusal => "content_filter",
    }
}

fn usage(response: &ModelResponse) -> Value {
    let u = response.usage;
    json!({
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total(),
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    })
}

/// The response's tool calls as `tool_calls` entries.
fn tool_calls(response: &ModelResponse) -> Vec<Value> {
    response
        .content
        .iter()
        .filter_map(|c| match c {
            Content::ToolCall { id, name, input } => Some(json!({
                "id": id, "type": "function",
                "function": {"name": name, "arguments": arguments_text(input)}})),
            _ => None,
        })
        .collect()
}

/// The `chat.completion` object for `response` (its text blocks joined,
/// then its tool calls). `created` is 0: these functions read no clock.
pub fn response_body(response: &ModelResponse, id: &str) -> Value {
    let text = response.text();
    let calls = tool_calls(response);
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
        "refusal": null,
    });
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": response.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(response.stop_reason),
        }],
        "usage": usage(response),
    })
}

/// The `chat.completion.chunk` events for `response`, as OpenAI streams
/// them with `stream_options.include_usage`: what a [`StreamWriter`]
/// writes when each block streams in pieces.
pub fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
    let mut writer = StreamWriter::new(id, &response.model, response.usage.input_tokens);
    writer.include_usage(true);
    let mut out = writer.start();
    for event in super::streamed(response) {
        out.extend(writer.event(&event));
    }
    out.extend(writer.finish(response));
    out
}

/// Writes the `chat.completion.chunk` stream of a response while it
/// streams in, each piece as it comes, as unnamed `data:` events.
///
/// [`start`](Self::start) writes the first chunk, the role (`delta:
/// {"role": "assistant", "content": ""}`). Text then goes as `content`
/// deltas; a tool call as a `tool_calls` delta with its index (tool calls
/// numbered from 0 in the order they began), id, name and empty
/// arguments, then its arguments in `tool_calls` deltas of that index.
/// [`finish`](Self::finish) writes what the final response has that was
/// not streamed, then the chunk with the `finish_reason`, the usage chunk
/// (`choices: []`) when [`include_usage`](Self::include_usage) says so,
/// and `[DONE]`. [`fail`](Self::fail) ends the stream with an error chunk
/// instead. Every chunk has the id given; the model is the one given
/// until the finish, the response's from then on.
///
/// Nothing here closes a block, so a piece of any block can be sent when
/// it comes; final text that does not extend what was streamed cannot be
/// corrected (the format has no closing object) and is left out.
#[derive(Debug)]
pub struct StreamWriter {
    id: String,
    model: String,
    include_usage: bool,
    started: bool,
    ended: bool,
    blocks: SentBlocks,
}

impl StreamWriter {
    /// A writer for the completion `id`, showing `model` until the
    /// response is known. `input_tokens` is not shown: this format reports
    /// usage only at the end, from the response.
    pub fn new(id: &str, model: &str, input_tokens: u64) -> Self {
        let _ = input_tokens;
        Self {
            id: id.to_owned(),
            model: model.to_owned(),
            include_usage: false,
            started: false,
            ended: false,
            blocks: SentBlocks::default(),
        }
    }

    /// Whether the stream ends with a usage chunk, as the client asked
    /// with `stream_options.include_usage` ([`Inbound::include_usage`]);
    /// `false` by default, as OpenAI does.
    pub fn include_usage(&mut self, include: bool) -> &mut Self {
        self.include_usage = include;
        self
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({"id": self.id, "object": "chat.completion.chunk", "created": 0,
            "model": self.model, "choices": choices})
    }

    fn delta(&self, delta: Value) -> SseOut {
        SseOut::data(&self.chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}])))
    }

    /// The first chunk: the role. Once; [`event`](Self::event) and
    /// [`finish`](Self::finish) start the stream themselves when it has
    /// not been.
    pub fn start(&mut self) -> Vec<SseOut> {
        if self.started {
            return Vec::new();
        }
        self.started = true;
        vec![self.delta(json!({"role": "assistant", "content": "", "refusal": null}))]
    }

    /// The chunks for one piece of the response. Nothing after the end.
    pub fn event(&mut self, event: &StreamEvent) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        let mut out = self.start();
        self.piece(event, &mut out);
        out
    }

    /// The index of the tool call at position `at` among the tool calls.
    fn call_index(&self, at: usize) -> usize {
        self.blocks.0[..at]
            .iter()
            .filter(|b| b.call.is_some())
            .count()
    }

    fn piece(&mut self, event: &StreamEvent, out: &mut Vec<SseOut>) {
        let (index, call, more) = match event {
            StreamEvent::TextDelta { index, text } => (*index, None, text.as_str()),
            StreamEvent::ToolCallStart { index, id, name } => {
                (*index, Some((id.as_str(), name.as_str())), "")
            }
            StreamEvent::ToolCallDelta { index, json } => (*index, Some(("", "")), json.as_str()),
        };
        if call.is_none() && more.is_empty() {
            return;
        }
        let at = match self.blocks.position(index) {
            Some(at) => at,
            None => {
                let at = self.blocks.push(index, call);
                if let Some((id, name)) = call {
                    out.push(self.delta(json!({"tool_calls": [{
                        "index": self.call_index(at), "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""}}]})));
                }
                at
            }
        };
        if more.is_empty() || self.blocks.0[at].call.is_some() != call.is_some() {
            return;
        }
        self.blocks.0[at].text.push_str(more);
        out.push(self.more(at, more));
    }

    /// More text or arguments of the block at `at`.
    fn more(&self, at: usize, more: &str) -> SseOut {
        if self.blocks.0[at].call.is_some() {
            self.delta(json!({"tool_calls": [{"index": self.call_index(at),
                "function": {"arguments": more}}]}))
        } else {
            self.delta(json!({"content": more}))
        }
    }

    /// The end of the stream for the final `response`: the rest of each
    /// block, the blocks never streamed (a non-streaming upstream's whole
    /// response), the `finish_reason` chunk, the usage chunk when asked
    /// for, `[DONE]`. Nothing after the end.
    pub fn finish(&mut self, response: &ModelResponse) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        let mut out = self.start();
        if !response.model.is_empty() {
            response.model.clone_into(&mut self.model);
        }
        let missing = self.blocks.reconcile(response);
        for at in 0..self.blocks.0.len() {
            if let Some(rest) = self.blocks.0[at].take_rest() {
                out.push(self.more(at, &rest));
            }
        }
        for event in &missing {
            self.piece(event, &mut out);
        }
        out.push(SseOut::data(&self.chunk(json!([{"index": 0, "delta": {},
            "finish_reason": finish_reason(response.stop_reason)}]))));
        if self.include_usage {
            let mut last = self.chunk(json!([]));
            last["usage"] = usage(response);
            out.push(SseOut::data(&last));
        }
        out.push(done());
        self.ended = true;
        out
    }

    /// The end of the stream for a failure after it began: a chunk that is
    /// the body [`error_body`] gives (`{"error": {...}}`, which the OpenAI
    /// SDKs raise), then `[DONE]`. Nothing after the end.
    pub fn fail(&mut self, failure: &Failure) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        self.ended = true;
        vec![SseOut::data(&error_body(failure).1), done()]
    }
}

fn done() -> SseOut {
    SseOut {
        event: None,
        data: "[DONE]".into(),
    }
}

/// The status and OpenAI error body for `failure`.
pub fn error_body(failure: &Failure) -> (u16, Value) {
    super::openai_error_body(failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::encode;
    use crate::serve::tests::{
        merged, parse_sse, rate_limited, read_back, rich_request, rich_response, streamed_cases,
        upstream,
    };
    use crate::{Api, ModelError, Usage, WireOptions, chat};

    #[test]
    fn a_request_round_trips_through_the_outbound_format_except_is_error() {
        let request = rich_request();
        for stream in [false, true] {
            let options = WireOptions {
                stream,
                parallel_tool_calls: Some(true),
            };
            let body = chat::request_body(&request, &options).unwrap();
            let inbound = parse_request(&body).unwrap();
            assert_eq!(inbound.stream, stream);
            // Chat Completions has no place for a tool result's is_error.
            let mut expected = request.clone();
            let Content::ToolResult { is_error, .. } = &mut expected.messages[2].content[1] else {
                panic!("the fixture changed");
            };
            assert!(*is_error);
            *is_error = false;
            assert_eq!(inbound.request, expected);
        }
    }

    #[test]
    fn what_clients_send_is_accepted() {
        let body = json!({
            "model": "m",
            "messages": [
                {"role": "developer", "content": [{"type": "text", "text": "A"}]},
                {"role": "system", "content": "B"},
                {"role": "user", "content": [{"type": "text", "text": "hi"},
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AA==", "detail": "low"}}],
                 "name": "pat"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}]},
                {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]},
            ],
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "tool_choice": "required",
            "max_tokens": 10,
            "stop": "X",
            "n": 1,
            "logprobs": false,
            "stream": true,
            "stream_options": {"include_usage": true},
            "parallel_tool_calls": false,
            "user": "u",
            "seed": 3,
            "response_format": {"type": "text"},
        });
        let inbound = parse_request(&body).unwrap();
        assert!(inbound.stream);
        let r = inbound.request;
        assert_eq!(r.system.as_deref(), Some("A\n\nB"));
        assert_eq!(r.messages.len(), 3);
        assert_eq!(
            r.messages[0].content[1],
            Content::Image {
                media_type: "image/jpeg".into(),
                data: "AA==".into()
            }
        );
        assert_eq!(
            r.messages[1].content,
            vec![Content::ToolCall {
                id: "c1".into(),
                name: "f".into(),
                input: json!({})
            }]
        );
        assert_eq!(r.messages[2].role, Role::User);
        assert_eq!(r.tools[0].input_schema["type"], "object");
        assert_eq!(r.tool_choice, ToolChoice::Required);
        assert_eq!(r.max_output_tokens, Some(10));
        assert_eq!(r.stop, vec!["X".to_owned()]);
    }

    #[test]
    fn what_cannot_be_translated_is_refused_where_it_is() {
        let base = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let with = |key: &str, value: Value| {
            let mut body = base.clone();
            body[key] = value;
            parse_request(&body).unwrap_err().pointer
        };
        assert_eq!(with("n", json!(2)), "/n");
        assert_eq!(with("logprobs", json!(true)), "/logprobs");
        assert_eq!(with("audio", json!({"voice": "x"})), "/audio");
        assert_eq!(with("modalities", json!(["text", "audio"])), "/modalities");
        assert_eq!(
            with("response_format", json!({"type": "json_object"})),
            "/response_format/type"
        );
        assert_eq!(with("functions", json!([])), "/functions");
        assert_eq!(with("tools", json!([{"type": "custom"}])), "/tools/0/type");
        assert_eq!(
            with("tool_choice", json!({"type": "allowed_tools"})),
            "/tool_choice/type"
        );
        let messages = |messages: Value| {
            parse_request(&json!({"model": "m", "messages": messages}))
                .unwrap_err()
                .pointer
        };
        assert_eq!(
            messages(json!([{"role": "user", "content": [
                {"type": "text", "text": "a"},
                {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}])),
            "/messages/0/content/1/type"
        );
        assert_eq!(
            messages(json!([{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}])),
            "/messages/0/content/0/image_url/url"
        );
        assert_eq!(
            messages(json!([{"role": "assistant", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}])),
            "/messages/0/tool_calls/0/function/arguments"
        );
        assert_eq!(
            messages(json!([{"role": "user", "content": "a"},
                {"role": "tool", "tool_call_id": "nope", "content": "x"}])),
            "/messages/1/tool_call_id"
        );
        assert_eq!(
            messages(json!([{"role": "function", "content": "a"}])),
            "/messages/0/role"
        );
        assert_eq!(
            parse_request(&json!({"messages": []})).unwrap_err().pointer,
            "/model"
        );
        assert_eq!(parse_request(&json!([])).unwrap_err().pointer, "");
    }

    #[test]
    fn a_response_body_parses_back() {
        for reason in [
            StopReason::EndTurn,
            StopReason::ToolUse,
            StopReason::MaxTokens,
            StopReason::Refusal,
        ] {
            let mut response = rich_response(reason);
            if reason == StopReason::EndTurn {
                // Tool calls read back as tool use, whatever the reason.
                response.content.truncate(1);
            }
            let body = response_body(&response, "id");
            if reason != StopReason::EndTurn {
                // Arguments are a JSON string.
                assert_eq!(
                    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
                    arguments_text(
                        &json!({"city": "Paris", "options": {"unit": "C", "days": [1, 2]}})
                    )
                );
            }
            assert_eq!(chat::parse_response(&body).unwrap(), response, "{reason:?}");
        }
        // Chat Completions says `stop` for a stop sequence as for the end
        // of a turn.
        let mut response = rich_response(StopReason::StopSequence);
        response.content.truncate(1);
        let back = chat::parse_response(&response_body(&response, "id")).unwrap();
        assert_eq!(back.stop_reason, StopReason::EndTurn);
        response.stop_reason = StopReason::EndTurn;
        assert_eq!(back, response);
    }

    #[test]
    fn the_stream_assembles_the_response() {
        for reason in [
            StopReason::EndTurn,
            StopReason::ToolUse,
            StopReason::MaxTokens,
            StopReason::Refusal,
        ] {
            let mut response = rich_response(reason);
            if reason == StopReason::EndTurn {
                response.content.truncate(1);
            }
            let events = stream_events(&response, "id");
            assert!(events.iter().all(|e| e.event.is_none()));
            assert_eq!(events.last().unwrap().data, "[DONE]");
            let mut stream = chat::Stream::new(None);
            let mut done = false;
            for event in parse_sse(&encode(&events)) {
                assert!(!done, "an event after [DONE]");
                done = stream.event(&event).unwrap();
            }
            assert!(done);
            assert_eq!(stream.finish().unwrap(), response, "{reason:?}");
        }
        // Text alone: no tool call deltas, `stop`.
        let mut response = rich_response(StopReason::EndTurn);
        response.content.truncate(1);
        let events = stream_events(&response, "id");
        let chunks: Vec<Value> = events[..events.len() - 1]
            .iter()
            .map(|e| serde_json::from_str(&e.data).unwrap())
            .collect();
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        assert!(
            chunks
                .iter()
                .all(|c| c["object"] == "chat.completion.chunk")
        );
        assert_eq!(
            chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
            "stop"
        );
        assert_eq!(chunks[chunks.len() - 1]["choices"], json!([]));
        assert_eq!(
            chunks[chunks.len() - 1]["usage"]["prompt_tokens_details"]["cached_tokens"],
            1024
        );
    }

    const DELTAS: [&str; 2] = [
        "/choices/0/delta/content",
        "/choices/0/delta/tool_calls/0/function/arguments",
    ];

    /// What `writer` writes for `events`, then the final `response`.
    fn written(
        writer: &mut StreamWriter,
        events: &[StreamEvent],
        response: &ModelResponse,
    ) -> Vec<SseOut> {
        let mut out = writer.start();
        for event in events {
            out.extend(writer.event(event));
        }
        out.extend(writer.finish(response));
        out
    }

    /// Checks that `out` is a whole stream: chunks of the completion `id`,
    /// the role first, one finish reason, `[DONE]` last.
    fn check(out: &[SseOut]) {
        assert_eq!(out.last().unwrap().data, "[DONE]");
        let chunks: Vec<Value> = out[..out.len() - 1]
            .iter()
            .map(|e| {
                assert!(e.event.is_none());
                serde_json::from_str(&e.data).unwrap()
            })
            .collect();
        assert!(chunks.iter().all(|c| c["id"] == "id"));
        assert!(
            chunks
                .iter()
                .all(|c| c["object"] == "chat.completion.chunk")
        );
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        let finishes = chunks
            .iter()
            .filter(|c| !c["choices"][0]["finish_reason"].is_null())
            .count();
        assert_eq!(finishes, 1);
    }

    #[test]
    fn stream_options_say_whether_the_usage_ends_the_stream() {
        let base = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "stream": true});
        let with = |options: Value| {
            let mut body = base.clone();
            body["stream_options"] = options;
            parse_request(&body)
        };
        assert!(!parse_request(&base).unwrap().include_usage);
        assert!(with(json!({"include_usage": true})).unwrap().include_usage);
        assert!(!with(json!({"include_usage": false})).unwrap().include_usage);
        assert!(!with(json!({})).unwrap().include_usage);
        assert_eq!(with(json!(3)).unwrap_err().pointer, "/stream_options");
        assert_eq!(
            with(json!({"include_usage": "yes"})).unwrap_err().pointer,
            "/stream_options/include_usage"
        );
        // Without it, no chunk without choices.
        let response = rich_response(StopReason::ToolUse);
        let mut writer = StreamWriter::new("id", "model-x", 0);
        let out = writer.finish(&response);
        check(&out);
        let before_done: Value = serde_json::from_str(&out[out.len() - 2].data).unwrap();
        assert_eq!(before_done["choices"][0]["finish_reason"], "tool_calls");
        assert!(before_done.get("usage").is_none());
        let back = read_back(Api::ChatCompletions, &out).unwrap();
        assert_eq!(back.usage, Usage::default());
        assert_eq!(back.content, response.content);
    }

    #[test]
    fn pieces_as_they_come_give_the_stream_of_the_final_response() {
        for (response, upstreams) in streamed_cases() {
            for api in upstreams {
                let (events, last) = upstream(api, &response);
                let mut writer = StreamWriter::new("id", "shown", 0);
                writer.include_usage(true);
                let out = written(&mut writer, &events, &last);
                check(&out);
                let first: Value = serde_json::from_str(&out[0].data).unwrap();
                assert_eq!(first["model"], "shown");
                let expected = stream_events(&last, "id");
                assert_eq!(
                    merged(&out[1..], &DELTAS)
                        .into_iter()
                        .map(|(name, mut chunk)| {
                            // The model given shows until the response is
                            // known.
                            if chunk.is_object() {
                                chunk["model"] = json!(last.model);
                            }
                            (name, chunk)
                        })
                        .collect::<Vec<_>>(),
                    merged(&expected[1..], &DELTAS),
                    "{api:?} {response:?}"
                );
                let back = read_back(Api::ChatCompletions, &out).unwrap();
                assert_eq!(
                    ModelResponse {
                        request_id: last.request_id.clone(),
                        ..back
                    },
                    // One text: Chat Completions joins text blocks.
                    chat::parse_response(&response_body(&last, "up")).unwrap()
                );
            }
        }
    }

    #[test]
    fn a_response_that_did_not_stream_is_written_whole_at_the_finish() {
        for (response, _) in streamed_cases() {
            let mut writer = StreamWriter::new("id", "model-x", 0);
            writer.include_usage(true);
            let mut out = writer.start();
            out.extend(writer.finish(&response));
            assert_eq!(out, stream_events(&response, "id"));
            let mut writer = StreamWriter::new("id", "model-x", 0);
            writer.include_usage(true);
            assert_eq!(writer.finish(&response), out);
            check(&out);
            let back = read_back(Api::ChatCompletions, &out).unwrap();
            assert_eq!(
                back,
                chat::parse_response(&response_body(&response, "id")).unwrap()
            );
        }
    }

    #[test]
    fn what_did_not_stream_is_written_at_the_finish() {
        let response = rich_response(StopReason::ToolUse);
        let Content::Text { text } = &response.content[0] else {
            panic!("the fixture changed");
        };
        let Content::ToolCall { id, name, input } = &response.content[1] else {
            panic!("the fixture changed");
        };
        let arguments = arguments_text(input);
        let half = |s: &str| s.chars().take(s.chars().count() / 2).collect::<String>();
        let cases = [
            vec![StreamEvent::TextDelta {
                index: 0,
                text: half(text),
            }],
            vec![
                StreamEvent::TextDelta {
                    index: 0,
                    text: text.clone(),
                },
                StreamEvent::ToolCallStart {
                    index: 1,
                    id: id.clone(),
                    name: name.clone(),
                },
                StreamEvent::ToolCallDelta {
                    index: 1,
                    json: half(&arguments),
                },
            ],
            // The text's rest comes after the call began: nothing here
            // closes a block.
            vec![
                StreamEvent::TextDelta {
                    index: 0,
                    text: half(text),
                },
                StreamEvent::ToolCallStart {
                    index: 1,
                    id: id.clone(),
                    name: name.clone(),
                },
            ],
        ];
        for events in cases {
            let mut writer = StreamWriter::new("id", "model-x", 0);
            writer.include_usage(true);
            let out = written(&mut writer, &events, &response);
            check(&out);
            assert_eq!(read_back(Api::ChatCompletions, &out).unwrap(), response);
        }
    }

    #[test]
    fn a_response_that_contradicts_the_stream_still_ends_it_well() {
        let response = rich_response(StopReason::ToolUse);
        let text = |index, text: &str| StreamEvent::TextDelta {
            index,
            text: text.into(),
        };
        let call = |index, id: &str| StreamEvent::ToolCallStart {
            index,
            id: id.into(),
            name: "other".into(),
        };
        let json = |index, json: &str| StreamEvent::ToolCallDelta {
            index,
            json: json.into(),
        };
        let cases = [
            vec![text(0, "Hello wor")],
            vec![
                text(0, "Checking"),
                call(1, "call_z"),
                json(1, "{\"x\":"),
                call(2, "call_y"),
                call(3, "call_x"),
            ],
            vec![call(0, "call_a"), text(0, "late")],
            vec![
                text(5, "x"),
                json(2, "{"),
                text(5, "z"),
                text(7, ""),
                json(2, "}"),
            ],
        ];
        for events in cases {
            let mut writer = StreamWriter::new("id", "model-x", 0);
            writer.include_usage(true);
            let out = written(&mut writer, &events, &response);
            check(&out);
            let back = read_back(Api::ChatCompletions, &out).unwrap();
            assert_eq!(back.stop_reason, response.stop_reason);
            assert_eq!(back.usage, response.usage);
        }
    }

    #[test]
    fn a_failure_after_the_start_is_an_error_chunk() {
        let mut writer = StreamWriter::new("id", "m", 10);
        let mut out = writer.start();
        out.extend(writer.event(&StreamEvent::TextDelta {
            index: 0,
            text: "Hi".into(),
        }));
        let failed = writer.fail(&rate_limited());
        assert_eq!(failed.len(), 2);
        let error: Value = serde_json::from_str(&failed[0].data).unwrap();
        assert_eq!(error, error_body(&rate_limited()).1);
        assert_eq!(error["error"]["code"], "rate_limit_exceeded");
        assert_eq!(failed[1].data, "[DONE]");
        out.extend(failed);
        let mut stream = chat::Stream::new(None);
        let events = parse_sse(&encode(&out));
        let mut result = Ok(false);
        for event in &events {
            result = stream.event(event);
            if result.is_err() {
                break;
            }
        }
        assert!(matches!(result, Err(ModelError::RateLimited { .. })));
        assert!(
            writer
                .finish(&rich_response(StopReason::EndTurn))
                .is_empty()
        );
        assert!(writer.fail(&rate_limited()).is_empty());
    }
}
