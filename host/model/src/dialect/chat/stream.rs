//! The Chat Completions event stream both ways: a provider's
//! `chat.completion.chunk` events assembled into the normalized response
//! ([`ChatStream`]), and the normalized response written as those events
//! while it streams in ([`ChatWriter`]).

use serde_json::{Value, json};

use super::{error_body, finish_reason, stop_reason, usage, usage_body};
use crate::dialect::assemble::{Blocks, count, event_json, id_at, incomplete, str_at};
use crate::dialect::sse::SseEvent;
use crate::dialect::writer::{Head, Wire, Writer};
use crate::dialect::{Failure, SseOut};
use crate::{EventSink, ModelError, ModelResponse, Usage};

/// A streamed answer being assembled.
pub struct ChatStream<'a> {
    blocks: Blocks<'a>,
    finish_reason: Option<String>,
    usage: Usage,
    model: String,
    id: Option<String>,
    done: bool,
}

impl<'a> ChatStream<'a> {
    /// The start of a stream whose pieces go to `sink`.
    pub fn new(sink: Option<EventSink<'a>>) -> Self {
        Self {
            blocks: Blocks::new(sink),
            finish_reason: None,
            usage: Usage::default(),
            model: String::new(),
            id: None,
            done: false,
        }
    }

    /// Takes in one event; `Ok(true)` once the stream is complete
    /// (`[DONE]`).
    ///
    /// # Errors
    ///
    /// The provider's error event, or an event that is not JSON.
    pub fn event(&mut self, event: &SseEvent) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let json = event_json(data)?;
        if json.get("error").is_some_and(|e| !e.is_null()) {
            return Err(crate::error::from_body(&json));
        }
        if self.id.is_none() {
            self.id = id_at(&json, "/id");
        }
        if let Some(model) = json["model"].as_str().filter(|m| !m.is_empty()) {
            model.clone_into(&mut self.model);
        }
        if json["usage"].is_object() {
            self.usage = usage(&json["usage"]);
        }
        for choice in json["choices"].as_array().into_iter().flatten() {
            let delta = &choice["delta"];
            if let Some(text) = delta["content"].as_str() {
                self.blocks.text("text", text);
            }
            if let Some(text) = delta["refusal"].as_str() {
                self.blocks.text("text", text);
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let key = format!("tool{}", count(call, "/index"));
                let name = str_at(call, "/function/name");
                let id = str_at(call, "/id");
                if !name.is_empty() || !id.is_empty() {
                    self.blocks.tool_start(&key, id, name);
                }
                match &call["function"]["arguments"] {
                    Value::String(more) => self.blocks.tool_arguments(&key, more),
                    Value::Null => {}
                    other => self.blocks.tool_arguments(&key, &other.to_string()),
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(false)
    }

    /// The completed response.
    ///
    /// # Errors
    ///
    /// [`ModelError::Transport`] when the stream ended before a
    /// `finish_reason` (a stream that ends after one but without `[DONE]`
    /// is accepted: some servers close instead).
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        let Some(reason) = self.finish_reason else {
            return Err(incomplete("finish_reason"));
        };
        let has_tool_calls = self.blocks.has_tool_calls();
        Ok(ModelResponse {
            content: self.blocks.finish(),
            stop_reason: stop_reason(&reason, has_tool_calls),
            usage: self.usage,
            model: self.model,
            request_id: self.id,
        })
    }
}

/// The `chat.completion.chunk` events for `response`, as OpenAI streams
/// them with `stream_options.include_usage`: what a [`ChatWriter`]
/// writes when each block streams in pieces.
pub fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
    let mut writer = ChatWriter::new(id, &response.model, response.usage.input_tokens);
    writer.include_usage(true);
    writer.whole(response)
}

/// Writes the `chat.completion.chunk` stream of a response while it
/// streams in, each piece as it comes, as unnamed `data:` events.
///
/// [`start`](Writer::start) writes the first chunk, the role (`delta:
/// {"role": "assistant", "content": ""}`). Text then goes as `content`
/// deltas; a tool call as a `tool_calls` delta with its index (tool calls
/// numbered from 0 in the order they began), id, name and empty
/// arguments, then its arguments in `tool_calls` deltas of that index.
/// [`finish`](Writer::finish) writes what the final response has that was
/// not streamed, then the chunk with the `finish_reason`, the usage chunk
/// (`choices: []`) when [`include_usage`](Writer::include_usage) says so,
/// and `[DONE]`. [`fail`](Writer::fail) ends the stream with an error chunk
/// instead. Every chunk has the id given; the model is the one given
/// until the finish, the response's from then on. The input estimate is
/// not shown: this format reports usage only at the end.
///
/// Nothing here closes a block, so a piece of any block can be sent when
/// it comes; final text that does not extend what was streamed cannot be
/// corrected (the format has no closing object) and is left out.
pub type ChatWriter = Writer<Chunks>;

/// The Chat Completions part of a [`ChatWriter`]: chunks of one choice.
#[derive(Debug)]
pub struct Chunks {
    include_usage: bool,
}

impl Writer<Chunks> {
    /// Whether the stream ends with a usage chunk, as the client asked
    /// with `stream_options.include_usage`
    /// ([`Inbound::include_usage`](crate::dialect::Inbound::include_usage));
    /// `false` by default, as OpenAI does.
    pub fn include_usage(&mut self, include: bool) -> &mut Self {
        self.wire.include_usage = include;
        self
    }
}

/// A chunk of `choices`.
fn chunk(head: &Head, choices: Value) -> Value {
    json!({"id": head.id, "object": "chat.completion.chunk", "created": 0,
        "model": head.model, "choices": choices})
}

/// A chunk of the one choice's `delta`.
fn delta(head: &Head, delta: Value) -> SseOut {
    SseOut::data(&chunk(
        head,
        json!([{"index": 0, "delta": delta, "finish_reason": null}]),
    ))
}

/// The index of the tool call at position `at` among the tool calls.
fn call_index(head: &Head, at: usize) -> usize {
    head.blocks.0[..at]
        .iter()
        .filter(|b| b.call.is_some())
        .count()
}

/// The `[DONE]` that ends the stream.
fn done() -> SseOut {
    SseOut {
        event: None,
        data: "[DONE]".into(),
    }
}

impl Wire for Chunks {
    fn new(_input_tokens: u64) -> Self {
        Self {
            include_usage: false,
        }
    }

    fn opening(&mut self, head: &Head) -> Vec<SseOut> {
        vec![delta(
            head,
            json!({"role": "assistant", "content": "", "refusal": null}),
        )]
    }

    fn open(&mut self, head: &Head, at: usize, out: &mut Vec<SseOut>) {
        if let Some((id, name)) = &head.blocks.0[at].call {
            out.push(delta(
                head,
                json!({"tool_calls": [{
                "index": call_index(head, at), "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            ));
        }
    }

    fn is_open(&self, _head: &Head, _at: usize) -> bool {
        true
    }

    fn more(&mut self, head: &Head, at: usize, more: &str, out: &mut Vec<SseOut>) {
        out.push(if head.blocks.0[at].call.is_some() {
            delta(
                head,
                json!({"tool_calls": [{"index": call_index(head, at),
                "function": {"arguments": more}}]}),
            )
        } else {
            delta(head, json!({"content": more}))
        });
    }

    fn unfinished(&self, head: &Head) -> Vec<usize> {
        (0..head.blocks.0.len()).collect()
    }

    fn closing(&mut self, head: &Head, response: &ModelResponse, out: &mut Vec<SseOut>) {
        out.push(SseOut::data(&chunk(
            head,
            json!([{"index": 0, "delta": {},
            "finish_reason": finish_reason(response.stop_reason)}]),
        )));
        if self.include_usage {
            let mut last = chunk(head, json!([]));
            last["usage"] = usage_body(response);
            out.push(SseOut::data(&last));
        }
        out.push(done());
    }

    /// A chunk that is the body [`error_body`] gives (`{"error": {...}}`,
    /// which the OpenAI SDKs raise), then `[DONE]`.
    fn failing(&mut self, _head: &Head, failure: &Failure) -> Vec<SseOut> {
        vec![SseOut::data(&error_body(failure).1), done()]
    }
}
