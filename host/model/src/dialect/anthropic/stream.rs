//! The Messages event stream both ways: a provider's named events
//! assembled into the normalized response ([`AnthropicStream`]), and the
//! normalized response written as those events while it streams in
//! ([`AnthropicWriter`]).

use serde_json::{Value, json};

use super::{add_usage, error_body, stop_reason, stop_word, usage_body};
use crate::dialect::assemble::{Blocks, count, event_json, event_kind, id_at, incomplete, str_at};
use crate::dialect::sse::SseEvent;
use crate::dialect::writer::{Head, Wire, Writer};
use crate::dialect::{Failure, SseOut};
use crate::{EventSink, ModelError, ModelResponse, Usage};

/// A streamed answer being assembled.
pub struct AnthropicStream<'a> {
    blocks: Blocks<'a>,
    usage: Usage,
    model: String,
    id: Option<String>,
    stop_reason: Option<String>,
    stopped: bool,
}

impl<'a> AnthropicStream<'a> {
    /// The start of a stream whose pieces go to `sink`.
    pub fn new(sink: Option<EventSink<'a>>) -> Self {
        Self {
            blocks: Blocks::new(sink),
            usage: Usage::default(),
            model: String::new(),
            id: None,
            stop_reason: None,
            stopped: false,
        }
    }

    /// Takes in one event; `Ok(true)` once the message is complete
    /// (`message_stop`).
    ///
    /// # Errors
    ///
    /// `error` events, or an event that is not JSON.
    pub fn event(&mut self, event: &SseEvent) -> Result<bool, ModelError> {
        let json = event_json(&event.data)?;
        let kind = event_kind(&json, event);
        let key = format!("{}", count(&json, "/index"));
        match kind {
            "message_start" => {
                let message = &json["message"];
                self.model = str_at(message, "/model").to_owned();
                self.id = id_at(message, "/id");
                add_usage(&mut self.usage, &message["usage"]);
            }
            "content_block_start" => {
                let block = &json["content_block"];
                match str_at(block, "/type") {
                    "text" => self.blocks.text(&key, str_at(block, "/text")),
                    "tool_use" => {
                        self.blocks
                            .tool_start(&key, str_at(block, "/id"), str_at(block, "/name"));
                        // The start carries `input: {}`; the arguments
                        // follow as `input_json_delta`s.
                        if let Some(input) = block["input"].as_object()
                            && !input.is_empty()
                        {
                            self.blocks
                                .tool_arguments(&key, &block["input"].to_string());
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = &json["delta"];
                match str_at(delta, "/type") {
                    "text_delta" => self.blocks.text(&key, str_at(delta, "/text")),
                    "input_json_delta" => {
                        self.blocks
                            .tool_arguments(&key, str_at(delta, "/partial_json"));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = json["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                add_usage(&mut self.usage, &json["usage"]);
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => return Err(crate::error::from_body(&json)),
            _ => {}
        }
        Ok(false)
    }

    /// The completed response.
    ///
    /// # Errors
    ///
    /// [`ModelError::Transport`] when the stream ended before
    /// `message_stop`.
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        if !self.stopped {
            return Err(incomplete("message_stop"));
        }
        Ok(ModelResponse {
            content: self.blocks.finish(),
            stop_reason: stop_reason(self.stop_reason.as_deref().unwrap_or("end_turn")),
            usage: self.usage,
            model: self.model,
            request_id: self.id,
        })
    }
}

/// The events Anthropic streams for `response`: what a [`AnthropicWriter`]
/// writes when each block streams in pieces.
pub fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
    AnthropicWriter::new(id, &response.model, response.usage.input_tokens).whole(response)
}

/// Writes the Messages event stream of a response while it streams in,
/// each piece as it comes, all events named.
///
/// [`start`](Writer::start) writes `message_start` (the message with no
/// content, the model given and the estimated input tokens) and `ping`.
/// Each block then has `content_block_start` (text, or `tool_use` with
/// `input: {}`), its `content_block_delta`s (`text_delta` or
/// `input_json_delta`) and `content_block_stop`, which comes when the
/// next block begins or at the finish; blocks are numbered from 0 in the
/// order they began. [`finish`](Writer::finish) writes what the final
/// response has that was not streamed, closes the open block, and ends
/// with `message_delta` (stop reason and the response's usage) and
/// `message_stop`. [`fail`](Writer::fail) ends the stream with an `error`
/// event instead.
///
/// What cannot be sent is left out, never a malformed stream: a piece for
/// a block closed already (an upstream that interleaves blocks), or final
/// text that does not extend what was streamed (this format has no
/// closing object to correct it in).
pub type AnthropicWriter = Writer<ContentBlocks>;

/// The Messages part of a [`AnthropicWriter`]: content blocks one at a time.
#[derive(Debug)]
pub struct ContentBlocks {
    /// The gateway's estimate of the input, shown in `message_start`.
    input_tokens: u64,
    /// The position of the block open now, when one is.
    open: Option<usize>,
}

impl ContentBlocks {
    fn close(&mut self, out: &mut Vec<SseOut>) {
        if let Some(at) = self.open.take() {
            emit(out, "content_block_stop", json!({"index": at}));
        }
    }
}

impl Wire for ContentBlocks {
    fn new(input_tokens: u64) -> Self {
        Self {
            input_tokens,
            open: None,
        }
    }

    fn opening(&mut self, head: &Head) -> Vec<SseOut> {
        let message = json!({
            "id": head.id, "type": "message", "role": "assistant", "model": head.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": self.input_tokens, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0, "output_tokens": 0},
        });
        let mut out = Vec::new();
        emit(&mut out, "message_start", json!({"message": message}));
        emit(&mut out, "ping", json!({}));
        out
    }

    fn open(&mut self, head: &Head, at: usize, out: &mut Vec<SseOut>) {
        self.close(out);
        let block = match &head.blocks.0[at].call {
            Some((id, name)) => json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            None => json!({"type": "text", "text": ""}),
        };
        emit(
            out,
            "content_block_start",
            json!({"index": at, "content_block": block}),
        );
        self.open = Some(at);
    }

    fn is_open(&self, _head: &Head, at: usize) -> bool {
        self.open == Some(at)
    }

    fn more(&mut self, head: &Head, at: usize, more: &str, out: &mut Vec<SseOut>) {
        let delta = if head.blocks.0[at].call.is_some() {
            json!({"type": "input_json_delta", "partial_json": more})
        } else {
            json!({"type": "text_delta", "text": more})
        };
        emit(
            out,
            "content_block_delta",
            json!({"index": at, "delta": delta}),
        );
    }

    fn unfinished(&self, _head: &Head) -> Vec<usize> {
        self.open.into_iter().collect()
    }

    /// `content_block_stop`, `message_delta` with the stop reason and the
    /// response's usage, `message_stop`.
    fn closing(&mut self, _head: &Head, response: &ModelResponse, out: &mut Vec<SseOut>) {
        self.close(out);
        emit(
            out,
            "message_delta",
            json!({"delta": {"stop_reason": stop_word(response.stop_reason), "stop_sequence": null},
                "usage": usage_body(response)}),
        );
        emit(out, "message_stop", json!({}));
    }

    /// An `error` event with the body [`error_body`] gives.
    fn failing(&mut self, _head: &Head, failure: &Failure) -> Vec<SseOut> {
        vec![SseOut::named("error", &error_body(failure).1)]
    }
}

/// Adds the event `kind` of `data` to `out`, its `type` set.
fn emit(out: &mut Vec<SseOut>, kind: &str, mut data: Value) {
    data["type"] = json!(kind);
    out.push(SseOut::named(kind, &data));
}
