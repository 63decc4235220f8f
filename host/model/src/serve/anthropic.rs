//! Serving Anthropic Messages: a client's `POST /v1/messages` body as the
//! normalized request, and the normalized response as a `message` object
//! or its named event stream.
//!
//! `system` (a string or text blocks) is the system text; `thinking` and
//! `redacted_thinking` blocks a client sends back are dropped, as are
//! `cache_control` marks. Refused: a missing `max_tokens` (the API
//! requires it), server tools (`web_search_…`, `bash_…`, …) and
//! `mcp_servers`, images by URL or file, documents and other block types,
//! images in tool results, and a tool result whose call is not in the
//! conversation.

use serde_json::{Map, Value, json};

use super::{
    Calls, Failure, Inbound, InboundError, SentBlocks, SseOut, array, as_object, at, field, flag,
    object, optional_f64, optional_str, required_str,
};
use crate::{
    Content, Message, ModelRequest, ModelResponse, Role, StopReason, StreamEvent, ToolChoice,
    ToolSpec,
};

/// The normalized request for a Messages request body.
///
/// # Errors
///
/// [`InboundError`] for a malformed body or what hane cannot translate.
pub fn parse_request(body: &Value) -> Result<Inbound, InboundError> {
    let map = object(body)?;
    if !array(map, "", "mcp_servers")?.is_empty() {
        return Err(InboundError::new(
            "/mcp_servers",
            "MCP servers are not supported",
        ));
    }
    let mut request = ModelRequest::new(required_str(map, "", "model")?);
    request.max_output_tokens =
        match field(map, "max_tokens") {
            Some(max) => Some(max.as_u64().ok_or_else(|| {
                InboundError::new("/max_tokens", "must be a non-negative integer")
            })?),
            None => return Err(InboundError::new("/max_tokens", "is required")),
        };
    request.system = match field(map, "system") {
        None => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(Value::Array(blocks)) => {
            let mut pieces = Vec::new();
            for (i, block) in blocks.iter().enumerate() {
                let p = at("/system", i);
                let block = as_object(block, &p)?;
                match required_str(block, &p, "type")? {
                    "text" => pieces.push(required_str(block, &p, "text")?.to_owned()),
                    other => {
                        return Err(InboundError::new(
                            at(&p, "type"),
                            format!("a {other:?} system block is not supported"),
                        ));
                    }
                }
            }
            super::system(pieces)
        }
        Some(_) => {
            return Err(InboundError::new(
                "/system",
                "must be a string or an array of text blocks",
            ));
        }
    };
    let mut calls = Calls::default();
    for (i, message) in array(map, "", "messages")?.iter().enumerate() {
        let p = at("/messages", i);
        let message = as_object(message, &p)?;
        let role = match required_str(message, &p, "role")? {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(InboundError::new(
                    at(&p, "role"),
                    format!("the role {other:?} is not supported"),
                ));
            }
        };
        let content = match field(message, "content") {
            None => Vec::new(),
            Some(Value::String(text)) => vec![Content::text(text.clone())],
            Some(Value::Array(blocks)) => {
                let mut content = Vec::new();
                for (j, block) in blocks.iter().enumerate() {
                    let pb = at(&at(&p, "content"), j);
                    if let Some(block) = content_block(block, &pb, role, &mut calls)? {
                        content.push(block);
                    }
                }
                content
            }
            Some(_) => {
                return Err(InboundError::new(
                    at(&p, "content"),
                    "must be a string or an array of blocks",
                ));
            }
        };
        request.messages.push(Message { role, content });
    }
    for (i, tool) in array(map, "", "tools")?.iter().enumerate() {
        request.tools.push(tool_spec(tool, &at("/tools", i))?);
    }
    if let Some(choice) = field(map, "tool_choice") {
        request.tool_choice = tool_choice(choice)?;
    }
    for (i, stop) in array(map, "", "stop_sequences")?.iter().enumerate() {
        let stop = stop
            .as_str()
            .ok_or_else(|| InboundError::new(at("/stop_sequences", i), "must be a string"))?;
        request.stop.push(stop.to_owned());
    }
    request.temperature = optional_f64(map, "temperature")?;
    let stream = flag(map, "", "stream")?;
    Ok(Inbound {
        request,
        stream,
        include_usage: true,
    })
}

fn content_block(
    block: &Value,
    p: &str,
    role: Role,
    calls: &mut Calls,
) -> Result<Option<Content>, InboundError> {
    let block = as_object(block, p)?;
    let kind = required_str(block, p, "type")?;
    let content = match (kind, role) {
        ("text", _) => Content::text(required_str(block, p, "text")?),
        ("image", Role::User) => image(block, p)?,
        ("tool_use", Role::Assistant) => {
            let id = required_str(block, p, "id")?;
            let name = required_str(block, p, "name")?;
            let input = match field(block, "input") {
                None => json!({}),
                Some(object @ Value::Object(_)) => object.clone(),
                Some(_) => return Err(InboundError::new(at(p, "input"), "must be an object")),
            };
            calls.add(id);
            Content::ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                input,
            }
        }
        ("tool_result", Role::User) => {
            let call_id = required_str(block, p, "tool_use_id")?;
            calls.check(call_id, &at(p, "tool_use_id"))?;
            let content = match field(block, "content") {
                None => String::new(),
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(blocks)) => {
                    let mut texts = Vec::new();
                    for (k, inner) in blocks.iter().enumerate() {
                        let pi = at(&at(p, "content"), k);
                        let inner = as_object(inner, &pi)?;
                        match required_str(inner, &pi, "type")? {
                            "text" => texts.push(required_str(inner, &pi, "text")?),
                            other => {
                                return Err(InboundError::new(
                                    at(&pi, "type"),
                                    format!(
                                        "a {other:?} block in a tool result is not supported, only text"
                                    ),
                                ));
                            }
                        }
                    }
                    texts.join("\n")
                }
                Some(_) => {
                    return Err(InboundError::new(
                        at(p, "content"),
                        "must be a string or an array of blocks",
                    ));
                }
            };
            Content::ToolResult {
                call_id: call_id.to_owned(),
                content,
                is_error: flag(block, p, "is_error")?,
            }
        }
        ("thinking" | "redacted_thinking", Role::Assistant) => return Ok(None),
        (other, _) => {
            let role = match role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            return Err(InboundError::new(
                at(p, "type"),
                format!("a {other:?} block is not supported in a {role} message"),
            ));
        }
    };
    Ok(Some(content))
}

fn image(block: &Map<String, Value>, p: &str) -> Result<Content, InboundError> {
    let ps = at(p, "source");
    let source = as_object(
        field(block, "source").ok_or_else(|| InboundError::new(&ps, "is required"))?,
        &ps,
    )?;
    match required_str(source, &ps, "type")? {
        "base64" => Ok(Content::Image {
            media_type: required_str(source, &ps, "media_type")?.to_owned(),
            data: required_str(source, &ps, "data")?.to_owned(),
        }),
        other => Err(InboundError::new(
            at(&ps, "type"),
            format!("a {other:?} image source is not supported, only base64"),
        )),
    }
}

fn tool_spec(tool: &Value, p: &str) -> Result<ToolSpec, InboundError> {
    let tool = as_object(tool, p)?;
    if let Some(kind) = optional_str(tool, p, "type")?
        && kind != "custom"
    {
        return Err(InboundError::new(
            at(p, "type"),
            format!("the server tool {kind:?} is not supported, only client tools"),
        ));
    }
    Ok(ToolSpec {
        name: required_str(tool, p, "name")?.to_owned(),
        description: optional_str(tool, p, "description")?
            .unwrap_or_default()
            .to_owned(),
        input_schema: field(tool, "input_schema")
            .cloned()
            .ok_or_else(|| InboundError::new(at(p, "input_schema"), "is required"))?,
    })
}

fn tool_choice(choice: &Value) -> Result<ToolChoice, InboundError> {
    let map = as_object(choice, "/tool_choice")?;
    match required_str(map, "/tool_choice", "type")? {
        "auto" => Ok(ToolChoice::Auto),
        "any" => Ok(ToolChoice::Required),
        "none" => Ok(ToolChoice::None),
        "tool" => Ok(ToolChoice::Tool {
            name: required_str(map, "/tool_choice", "name")?.to_owned(),
        }),
        other => Err(InboundError::new(
            "/tool_choice/type",
            format!("the tool choice {other:?} is not supported"),
        )),
    }
}

fn stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::Refusal => "refusal",
    }
}

/// The content blocks of `response`.
fn blocks(response: &ModelResponse) -> Vec<Value> {
    response
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(json!({"type": "text", "text": text})),
            Content::ToolCall { id, name, input } => {
                Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
            }
            _ => None,
        })
        .collect()
}

/// The usage in Anthropic's terms: `input_tokens` leaves out the cache
/// reads (the normalized count includes them).
fn usage(response: &ModelResponse) -> Value {
    let u = response.usage;
    json!({
        "input_tokens": u.input_tokens.saturating_sub(u.cached_tokens),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached_tokens,
        "output_tokens": u.output_tokens,
    })
}

/// The `message` object for `response`.
pub fn response_body(response: &ModelResponse, id: &str) -> Value {
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": response.model,
        "content": blocks(response),
        "stop_reason": stop_reason(response.stop_reason),
        "stop_sequence": null,
        "usage": usage(response),
    })
}

/// The events Anthropic streams for `response`: what a [`StreamWriter`]
/// writes when each block streams in pieces.
pub fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
    let mut writer = StreamWriter::new(id, &response.model, response.usage.input_tokens);
    let mut out = writer.start();
    for event in super::streamed(response) {
        out.extend(writer.event(&event));
    }
    out.extend(writer.finish(response));
    out
}

/// Writes the Messages event stream of a response while it streams in,
/// each piece as it comes, all events named.
///
/// [`start`](Self::start) writes `message_start` (the message with no
/// content, the model given and the estimated input tokens) and `ping`.
/// Each block then has `content_block_start` (text, or `tool_use` with
/// `input: {}`), its `content_block_delta`s (`text_delta` or
/// `input_json_delta`) and `content_block_stop`, which comes when the
/// next block begins or at the finish; blocks are numbered from 0 in the
/// order they began. [`finish`](Self::finish) writes what the final
/// response has that was not streamed, closes the open block, and ends
/// with `message_delta` (stop reason and the response's usage) and
/// `message_stop`. [`fail`](Self::fail) ends the stream with an `error`
/// event instead.
///
/// What cannot be sent is left out, never a malformed stream: a piece for
/// a block closed already (an upstream that interleaves blocks), or final
/// text that does not extend what was streamed (this format has no
/// closing object to correct it in).
#[derive(Debug)]
pub struct StreamWriter {
    id: String,
    model: String,
    input_tokens: u64,
    started: bool,
    ended: bool,
    blocks: SentBlocks,
    /// The position of the block open now, when one is.
    open: Option<usize>,
}

impl StreamWriter {
    /// A writer for the message `id`, showing `model` and `input_tokens`
    /// (the gateway's estimate) in `message_start`, before the response
    /// is known.
    pub fn new(id: &str, model: &str, input_tokens: u64) -> Self {
        Self {
            id: id.to_owned(),
            model: model.to_owned(),
            input_tokens,
            started: false,
            ended: false,
            blocks: SentBlocks::default(),
            open: None,
        }
    }

    /// The events that open the stream: `message_start` and `ping`. Once;
    /// [`event`](Self::event) and [`finish`](Self::finish) start the
    /// stream themselves when it has not been.
    pub fn start(&mut self) -> Vec<SseOut> {
        if self.started {
            return Vec::new();
        }
        self.started = true;
        let message = json!({
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": self.input_tokens, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0, "output_tokens": 0},
        });
        let mut out = Vec::new();
        emit(&mut out, "message_start", json!({"message": message}));
        emit(&mut out, "ping", json!({}));
        out
    }

    /// The events for one piece of the response: a block opened (and the
    /// one before closed) when the piece begins a block, then its delta.
    /// Nothing after the end.
    pub fn event(&mut self, event: &StreamEvent) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        let mut out = self.start();
        self.piece(event, &mut out);
        out
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
            None => self.open_block(index, call, out),
        };
        // A piece of a closed block, or of another kind, cannot be sent.
        if more.is_empty()
            || self.open != Some(at)
            || self.blocks.0[at].call.is_some() != call.is_some()
        {
            return;
        }
        self.blocks.0[at].text.push_str(more);
        out.push(self.delta(at, more));
    }

    fn open_block(
        &mut self,
        upstream: usize,
        call: Option<(&str, &str)>,
        out: &mut Vec<SseOut>,
    ) -> usize {
        self.close(out);
        let at = self.blocks.push(upstream, call);
        let block = match call {
            Some((id, name)) => json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            None => json!({"type": "text", "text": ""}),
        };
        emit(
            out,
            "content_block_start",
            json!({"index": at, "content_block": block}),
        );
        self.open = Some(at);
        at
    }

    fn delta(&self, at: usize, more: &str) -> SseOut {
        let delta = if self.blocks.0[at].call.is_some() {
            json!({"type": "input_json_delta", "partial_json": more})
        } else {
            json!({"type": "text_delta", "text": more})
        };
        named("content_block_delta", json!({"index": at, "delta": delta}))
    }

    fn close(&mut self, out: &mut Vec<SseOut>) {
        if let Some(at) = self.open.take() {
            emit(out, "content_block_stop", json!({"index": at}));
        }
    }

    /// The end of the stream for the final `response`: the rest of the
    /// open block, the blocks never streamed (a non-streaming upstream's
    /// whole response), `content_block_stop`, `message_delta` with the
    /// stop reason and the response's usage, `message_stop`. Nothing
    /// after the end.
    pub fn finish(&mut self, response: &ModelResponse) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        let mut out = self.start();
        let missing = self.blocks.reconcile(response);
        if let Some(at) = self.open
            && let Some(rest) = self.blocks.0[at].take_rest()
        {
            out.push(self.delta(at, &rest));
        }
        for event in &missing {
            self.piece(event, &mut out);
        }
        self.close(&mut out);
        emit(
            &mut out,
            "message_delta",
            json!({"delta": {"stop_reason": stop_reason(response.stop_reason), "stop_sequence": null},
                "usage": usage(response)}),
        );
        emit(&mut out, "message_stop", json!({}));
        self.ended = true;
        out
    }

    /// The end of the stream for a failure after it began: an `error`
    /// event with the body [`error_body`] gives. Nothing after the end.
    pub fn fail(&mut self, failure: &Failure) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        self.ended = true;
        vec![SseOut::named("error", &error_body(failure).1)]
    }
}

/// The event `kind` of `data`, its `type` set.
fn named(kind: &str, mut data: Value) -> SseOut {
    data["type"] = json!(kind);
    SseOut::named(kind, &data)
}

fn emit(out: &mut Vec<SseOut>, kind: &str, data: Value) {
    out.push(named(kind, data));
}

/// The status and Anthropic error body for `failure`.
pub fn error_body(failure: &Failure) -> (u16, Value) {
    super::anthropic_error_body(failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::encode;
    use crate::serve::tests::{
        merged, parse_sse, rate_limited, read_back, rich_request, rich_response, streamed_cases,
        upstream,
    };
    use crate::{Api, ModelError, WireOptions, anthropic, arguments_text};

    const REASONS: [StopReason; 5] = [
        StopReason::EndTurn,
        StopReason::ToolUse,
        StopReason::MaxTokens,
        StopReason::StopSequence,
        StopReason::Refusal,
    ];

    #[test]
    fn a_request_round_trips_through_the_outbound_format() {
        let request = rich_request();
        for stream in [false, true] {
            let options = WireOptions {
                stream,
                parallel_tool_calls: Some(false),
            };
            let body = anthropic::request_body(&request, &options).unwrap();
            let inbound = parse_request(&body).unwrap();
            assert_eq!(inbound.stream, stream);
            assert_eq!(inbound.request, request);
        }
    }

    #[test]
    fn what_clients_send_is_accepted() {
        let body = json!({
            "model": "m",
            "max_tokens": 100,
            "system": [{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "B"}],
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1",
                     "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
                     "is_error": true}]},
            ],
            "tools": [{"name": "f", "input_schema": {"type": "object"},
                "cache_control": {"type": "ephemeral"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "metadata": {"user_id": "u"},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "stream": true,
        });
        let inbound = parse_request(&body).unwrap();
        assert!(inbound.stream);
        let r = inbound.request;
        assert_eq!(r.system.as_deref(), Some("A\n\nB"));
        assert_eq!(r.messages[1].content.len(), 1);
        assert_eq!(
            r.messages[2].content,
            vec![Content::ToolResult {
                call_id: "t1".into(),
                content: "one\ntwo".into(),
                is_error: true
            }]
        );
        assert_eq!(r.tool_choice, ToolChoice::Required);
        assert_eq!(r.max_output_tokens, Some(100));
    }

    #[test]
    fn what_cannot_be_translated_is_refused_where_it_is() {
        let base = json!({"model": "m", "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}]});
        let without = |key: &str| {
            let mut body = base.clone();
            body.as_object_mut().unwrap().remove(key);
            parse_request(&body).unwrap_err().pointer
        };
        assert_eq!(without("max_tokens"), "/max_tokens");
        assert_eq!(without("model"), "/model");
        let with = |key: &str, value: Value| {
            let mut body = base.clone();
            body[key] = value;
            parse_request(&body).unwrap_err().pointer
        };
        assert_eq!(
            with(
                "tools",
                json!([{"type": "web_search_20250305", "name": "web_search"}])
            ),
            "/tools/0/type"
        );
        assert_eq!(
            with("tool_choice", json!({"type": "sometimes"})),
            "/tool_choice/type"
        );
        assert_eq!(
            with("mcp_servers", json!([{"type": "url", "url": "x"}])),
            "/mcp_servers"
        );
        let messages = |messages: Value| {
            let mut body = base.clone();
            body["messages"] = messages;
            parse_request(&body).unwrap_err().pointer
        };
        assert_eq!(
            messages(json!([{"role": "user", "content": [
                {"type": "text", "text": "a"}, {"type": "document", "source": {}}]}])),
            "/messages/0/content/1/type"
        );
        assert_eq!(
            messages(json!([{"role": "user", "content": [
                {"type": "image", "source": {"type": "url", "url": "https://x"}}]}])),
            "/messages/0/content/0/source/type"
        );
        assert_eq!(
            messages(
                json!([{"role": "user", "content": "a"}, {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "gone", "content": "x"}]}])
            ),
            "/messages/1/content/0/tool_use_id"
        );
        assert_eq!(
            messages(json!([
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                    "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                    "content": [{"type": "image", "source": {}}]}]}])),
            "/messages/1/content/0/content/0/type"
        );
        assert_eq!(
            messages(json!([{"role": "user", "content": [
                {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}])),
            "/messages/0/content/0/type"
        );
    }

    #[test]
    fn a_response_body_parses_back() {
        for reason in REASONS {
            let response = rich_response(reason);
            let body = response_body(&response, "id");
            assert_eq!(body["usage"]["input_tokens"], 1200 - 1024);
            assert_eq!(body["usage"]["cache_read_input_tokens"], 1024);
            assert_eq!(
                anthropic::parse_response(&body).unwrap(),
                response,
                "{reason:?}"
            );
        }
    }

    #[test]
    fn the_stream_assembles_the_response() {
        for reason in REASONS {
            let mut response = rich_response(reason);
            response.content.push(Content::text("Done."));
            let events = stream_events(&response, "id");
            assert_eq!(events[0].event.as_deref(), Some("message_start"));
            assert_eq!(
                events.last().unwrap().event.as_deref(),
                Some("message_stop")
            );
            let mut stream = anthropic::Stream::new(None);
            let mut done = false;
            for event in parse_sse(&encode(&events)) {
                assert!(!done, "an event after message_stop");
                done = stream.event(&event).unwrap();
            }
            assert!(done);
            assert_eq!(stream.finish().unwrap(), response, "{reason:?}");
        }
    }

    const DELTAS: [&str; 2] = ["/delta/text", "/delta/partial_json"];

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

    /// Checks that `out` is a whole stream: started, blocks one at a time
    /// numbered from 0 (deltas of their kind), ended.
    fn check(out: &[SseOut]) {
        let names: Vec<&str> = out.iter().map(|e| e.event.as_deref().unwrap()).collect();
        assert_eq!(names[..2], ["message_start", "ping"]);
        assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
        let mut open: Option<(u64, String)> = None;
        let mut next = 0;
        for (name, event) in names.iter().zip(out).take(out.len() - 2).skip(2) {
            let data: Value = serde_json::from_str(&event.data).unwrap();
            assert_eq!(data["type"], *name);
            let index = data["index"].as_u64().unwrap();
            match *name {
                "content_block_start" => {
                    assert!(open.is_none(), "a block starts inside another");
                    assert_eq!(index, next);
                    let kind = data["content_block"]["type"].as_str().unwrap().to_owned();
                    open = Some((index, kind));
                    next += 1;
                }
                "content_block_delta" => {
                    let (at, kind) = open.as_ref().expect("a delta outside a block");
                    assert_eq!(*at, index);
                    let expected = if kind == "text" {
                        "text_delta"
                    } else {
                        "input_json_delta"
                    };
                    assert_eq!(data["delta"]["type"], expected);
                }
                "content_block_stop" => {
                    assert_eq!(open.take().map(|(at, _)| at), Some(index));
                }
                other => panic!("unexpected {other}"),
            }
        }
        assert!(open.is_none(), "a block left open");
    }

    #[test]
    fn pieces_as_they_come_give_the_stream_of_the_final_response() {
        for (response, upstreams) in streamed_cases() {
            for api in upstreams {
                let (events, last) = upstream(api, &response);
                let mut writer = StreamWriter::new("id", &last.model, last.usage.input_tokens);
                let out = written(&mut writer, &events, &last);
                check(&out);
                assert_eq!(
                    merged(&out, &DELTAS),
                    merged(&stream_events(&last, "id"), &DELTAS),
                    "{api:?} {response:?}"
                );
                let back = read_back(Api::AnthropicMessages, &out).unwrap();
                assert_eq!(back.request_id.as_deref(), Some("id"));
                assert_eq!(
                    ModelResponse {
                        request_id: last.request_id.clone(),
                        ..back
                    },
                    last
                );
            }
        }
    }

    #[test]
    fn a_response_that_did_not_stream_is_written_whole_at_the_finish() {
        for (response, _) in streamed_cases() {
            let mut writer = StreamWriter::new("id", "model-x", 1200);
            let mut out = writer.start();
            out.extend(writer.finish(&response));
            assert_eq!(out, stream_events(&response, "id"));
            // The finish starts the stream when nothing did.
            let mut writer = StreamWriter::new("id", "model-x", 1200);
            assert_eq!(writer.finish(&response), out);
            assert_eq!(read_back(Api::AnthropicMessages, &out).unwrap(), response);
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
        ];
        for events in cases {
            let mut writer = StreamWriter::new("id", "model-x", 1200);
            let out = written(&mut writer, &events, &response);
            check(&out);
            assert_eq!(
                merged(&out, &DELTAS),
                merged(&stream_events(&response, "id"), &DELTAS)
            );
            assert_eq!(read_back(Api::AnthropicMessages, &out).unwrap(), response);
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
            // Text the final text does not extend.
            vec![text(0, "Hello wor")],
            // Calls the final response does not have.
            vec![
                text(0, "Checking"),
                call(1, "call_z"),
                json(1, "{\"x\":"),
                call(2, "call_y"),
                call(3, "call_x"),
            ],
            // A call where the final response has text, and text for it.
            vec![call(0, "call_a"), text(0, "late")],
            // Blocks interleaved, and arguments with no start.
            vec![
                text(5, "x"),
                json(2, "{"),
                text(5, "z"),
                text(7, ""),
                json(2, "}"),
            ],
        ];
        for events in cases {
            let mut writer = StreamWriter::new("id", "model-x", 1);
            let out = written(&mut writer, &events, &response);
            check(&out);
            let back = read_back(Api::AnthropicMessages, &out).unwrap();
            assert_eq!(back.stop_reason, response.stop_reason);
            assert_eq!(back.usage, response.usage);
        }
    }

    #[test]
    fn the_start_shows_the_estimate_and_the_end_the_usage() {
        let response = rich_response(StopReason::EndTurn);
        let mut writer = StreamWriter::new("msg_1", "asked-for", 999);
        let start = writer.start();
        let message: Value = serde_json::from_str(&start[0].data).unwrap();
        assert_eq!(message["message"]["id"], "msg_1");
        assert_eq!(message["message"]["model"], "asked-for");
        assert_eq!(message["message"]["usage"]["input_tokens"], 999);
        assert!(writer.start().is_empty(), "the stream starts once");
        let end = writer.finish(&response);
        let delta: Value = serde_json::from_str(&end[end.len() - 2].data).unwrap();
        assert_eq!(delta["usage"]["input_tokens"], 1200 - 1024);
        assert_eq!(delta["usage"]["cache_read_input_tokens"], 1024);
        assert_eq!(delta["usage"]["output_tokens"], 80);
        let back = read_back(Api::AnthropicMessages, &[start, end].concat()).unwrap();
        assert_eq!(back.usage, response.usage);
    }

    #[test]
    fn a_failure_after_the_start_is_an_error_event() {
        let mut writer = StreamWriter::new("id", "m", 10);
        let mut out = writer.start();
        out.extend(writer.event(&StreamEvent::TextDelta {
            index: 0,
            text: "Hi".into(),
        }));
        let failed = writer.fail(&rate_limited());
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].event.as_deref(), Some("error"));
        let data: Value = serde_json::from_str(&failed[0].data).unwrap();
        assert_eq!(data, error_body(&rate_limited()).1);
        assert_eq!(data["error"]["type"], "rate_limit_error");
        out.extend(failed);
        assert!(matches!(
            read_back(Api::AnthropicMessages, &out),
            Err(ModelError::RateLimited { .. })
        ));
        // Nothing after the end.
        let response = rich_response(StopReason::EndTurn);
        assert!(writer.finish(&response).is_empty());
        assert!(writer.fail(&rate_limited()).is_empty());
        assert!(
            writer
                .event(&StreamEvent::TextDelta {
                    index: 0,
                    text: "more".into()
                })
                .is_empty()
        );
    }
}
