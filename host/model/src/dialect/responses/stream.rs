//! The Responses event stream both ways: a provider's named events
//! assembled into the normalized response ([`ResponsesStream`]), and the
//! normalized response written as those events while it streams in
//! ([`ResponsesWriter`]), each event named, numbered in sequence, and closed
//! by the final response.

use serde_json::{Value, json};

use super::{envelope, error_body, failed, function_call, status, stop_reason, usage, usage_body};
use crate::dialect::assemble::{Blocks, count, event_json, event_kind, id_at, incomplete, str_at};
use crate::dialect::sse::SseEvent;
use crate::dialect::writer::{Head, Wire, Writer};
use crate::dialect::{Failure, SseOut};
use crate::{EventSink, ModelError, ModelResponse};

/// A streamed answer being assembled.
pub struct ResponsesStream<'a> {
    blocks: Blocks<'a>,
    completed: Option<Value>,
    refused: bool,
}

impl<'a> ResponsesStream<'a> {
    /// The start of a stream whose pieces go to `sink`.
    pub fn new(sink: Option<EventSink<'a>>) -> Self {
        Self {
            blocks: Blocks::new(sink),
            completed: None,
            refused: false,
        }
    }

    /// Takes in one event; `Ok(true)` once the response is complete
    /// (`response.completed` or `response.incomplete`).
    ///
    /// # Errors
    ///
    /// `error` and `response.failed` events, or an event that is not JSON.
    pub fn event(&mut self, event: &SseEvent) -> Result<bool, ModelError> {
        let json = event_json(&event.data)?;
        let kind = event_kind(&json, event);
        // Items are told apart by their id (this server reuses an output
        // index for a second call), else by their output index.
        let call = |json: &Value, id: &str| match json.pointer(id).and_then(Value::as_str) {
            Some(id) if !id.is_empty() => format!("{id}.call"),
            _ => format!("{}.call", count(json, "/output_index")),
        };
        let key = |json: &Value| {
            format!(
                "{}.{}",
                count(json, "/output_index"),
                count(json, "/content_index")
            )
        };
        match kind {
            "response.output_item.added" => {
                let item = &json["item"];
                if str_at(item, "/type") == "function_call" {
                    self.blocks.tool_start(
                        &call(&json, "/item/id"),
                        str_at(item, "/call_id"),
                        str_at(item, "/name"),
                    );
                }
            }
            "response.output_text.delta" => self.blocks.text(&key(&json), str_at(&json, "/delta")),
            "response.refusal.delta" => {
                self.refused = true;
                self.blocks.text(&key(&json), str_at(&json, "/delta"));
            }
            "response.output_text.done" => {
                let key = key(&json);
                self.blocks.text(&key, "");
                self.blocks.complete(&key, str_at(&json, "/text"));
            }
            "response.function_call_arguments.delta" => self
                .blocks
                .tool_arguments(&call(&json, "/item_id"), str_at(&json, "/delta")),
            "response.function_call_arguments.done" => self
                .blocks
                .complete(&call(&json, "/item_id"), str_at(&json, "/arguments")),
            "response.completed" | "response.incomplete" => {
                self.completed = Some(json["response"].clone());
                return Ok(true);
            }
            "response.failed" => {
                return Err(failed(&json["response"]).unwrap_or_else(|| {
                    ModelError::Transport("the provider reported the response failed".into())
                }));
            }
            "error" => return Err(crate::error::from_body(&json)),
            _ => {}
        }
        Ok(false)
    }

    /// The completed response: content as streamed, status, usage, model
    /// and id from the final `response` object.
    ///
    /// # Errors
    ///
    /// [`ModelError::Transport`] when the stream ended before
    /// `response.completed`.
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        let Some(response) = self.completed else {
            return Err(incomplete("response.completed"));
        };
        let has_tool_calls = self.blocks.has_tool_calls();
        Ok(ModelResponse {
            stop_reason: stop_reason(&response, has_tool_calls, self.refused),
            content: self.blocks.finish(),
            usage: usage(&response["usage"]),
            model: str_at(&response, "/model").to_owned(),
            request_id: id_at(&response, "/id"),
        })
    }
}

/// The events OpenAI streams for `response`: what a [`ResponsesWriter`]
/// writes when each block streams in pieces.
pub fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
    ResponsesWriter::new(id, &response.model, response.usage.input_tokens).whole(response)
}

/// Writes the Responses event stream of a response while it streams in,
/// each piece as it comes; every event is named, its `type` the name,
/// and numbered by `sequence_number` from 0.
///
/// [`start`](Writer::start) writes `response.created` and
/// `response.in_progress` (the response `in_progress`, no output, the
/// model given). Text blocks in a row are the `output_text` parts of one
/// `message` item (`msg_{id}_{output_index}`), each tool call a
/// `function_call` item (`fc_{id}_{output_index}`, its `call_id` the
/// upstream's call id). An item has `response.output_item.added`; a part
/// `response.content_part.added`, its `response.output_text.delta`s,
/// `response.output_text.done` and `response.content_part.done`; a call
/// its `response.function_call_arguments.delta`s and `.done`; then
/// `response.output_item.done`. A part or item is done when the next one
/// begins or at the finish. [`finish`](Writer::finish) writes what the
/// final response has that was not streamed, closes what is open, and
/// ends with `response.completed` (or `response.incomplete`) carrying the
/// whole response and its usage. [`fail`](Writer::fail) ends the stream
/// with `error` and `response.failed` instead. The input estimate is not
/// shown: this format reports usage only at the end.
///
/// Where the final response contradicts what was streamed, the closing
/// events (the `.done` events still to come, and `response.completed`)
/// carry the final response's text and arguments, and leave out blocks
/// it does not have. A piece for a part or item done already (an upstream
/// that interleaves blocks) is not sent; `response.completed` has it.
pub type ResponsesWriter = Writer<Items>;

/// The Responses part of a [`ResponsesWriter`]: the output items and their
/// parts, and the events' sequence.
#[derive(Debug)]
pub struct Items {
    sequence: usize,
    /// Each block's output item and part index, by block position.
    places: Vec<(usize, usize)>,
    /// Each output item's blocks: a message's parts, or one call.
    items: Vec<Vec<usize>>,
    /// Whether the last item is open.
    open: bool,
}

impl Items {
    fn emit(&mut self, out: &mut Vec<SseOut>, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        out.push(SseOut::named(kind, &data));
    }

    fn is_call(&self, head: &Head, item: usize) -> bool {
        head.blocks.0[self.items[item][0]].call.is_some()
    }

    fn item_id(&self, head: &Head, item: usize) -> String {
        let kind = if self.is_call(head, item) {
            "fc"
        } else {
            "msg"
        };
        format!("{kind}_{}_{item}", head.id)
    }

    /// Item `item`, as added (in progress, empty) or done (its blocks the
    /// final response has, with their closing values).
    fn item(&self, head: &Head, item: usize, done: bool) -> Value {
        let status = if done { "completed" } else { "in_progress" };
        let id = self.item_id(head, item);
        let first = &head.blocks.0[self.items[item][0]];
        match &first.call {
            Some((call_id, name)) => function_call(
                json!({"type": "function_call", "id": id, "call_id": call_id,
                "arguments": if done { first.closing() } else { "" },
                "status": status}),
                name,
            ),
            None => {
                let parts: Vec<Value> = if done {
                    self.items[item]
                        .iter()
                        .map(|&at| &head.blocks.0[at])
                        .filter(|b| !b.dropped)
                        .map(|b| json!({"type": "output_text", "text": b.closing(), "annotations": []}))
                        .collect()
                } else {
                    Vec::new()
                };
                json!({"type": "message", "id": id, "status": status, "role": "assistant",
                    "content": parts})
            }
        }
    }

    fn close_part(&mut self, head: &Head, at: usize, out: &mut Vec<SseOut>) {
        let (item, part) = self.places[at];
        let item_id = self.item_id(head, item);
        let text = head.blocks.0[at].closing().to_owned();
        self.emit(
            out,
            "response.output_text.done",
            json!({"item_id": item_id, "output_index": item, "content_index": part,
                "text": text, "logprobs": []}),
        );
        self.emit(
            out,
            "response.content_part.done",
            json!({"item_id": item_id, "output_index": item, "content_index": part,
                "part": {"type": "output_text", "text": text, "annotations": []}}),
        );
    }

    fn close_item(&mut self, head: &Head, out: &mut Vec<SseOut>) {
        if !std::mem::take(&mut self.open) {
            return;
        }
        let item = self.items.len() - 1;
        let last = *self.items[item].last().unwrap_or(&0);
        if self.is_call(head, item) {
            let item_id = self.item_id(head, item);
            let arguments = head.blocks.0[last].closing().to_owned();
            self.emit(
                out,
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": item, "arguments": arguments}),
            );
        } else {
            self.close_part(head, last, out);
        }
        let done = self.item(head, item, true);
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": item, "item": done}),
        );
    }

    /// The block open now, when one is.
    fn open_block(&self) -> Option<usize> {
        self.items
            .last()
            .and_then(|item| item.last())
            .copied()
            .filter(|_| self.open)
    }
}

impl Wire for Items {
    fn new(_input_tokens: u64) -> Self {
        Self {
            sequence: 0,
            places: Vec::new(),
            items: Vec::new(),
            open: false,
        }
    }

    fn opening(&mut self, head: &Head) -> Vec<SseOut> {
        let response = envelope(
            &head.id,
            &head.model,
            ("in_progress", Value::Null),
            Vec::new(),
            Value::Null,
        );
        let mut out = Vec::new();
        self.emit(
            &mut out,
            "response.created",
            json!({"response": response.clone()}),
        );
        self.emit(
            &mut out,
            "response.in_progress",
            json!({"response": response}),
        );
        out
    }

    /// A text after text is the next part of the message item; any other
    /// block begins an item, the one before done.
    fn open(&mut self, head: &Head, at: usize, out: &mut Vec<SseOut>) {
        let text = head.blocks.0[at].call.is_none();
        let joins = text && self.open && !self.is_call(head, self.items.len() - 1);
        if joins {
            let previous = *self.items[self.items.len() - 1].last().unwrap_or(&0);
            self.close_part(head, previous, out);
        } else {
            self.close_item(head, out);
            self.items.push(Vec::new());
            self.open = true;
        }
        let item = self.items.len() - 1;
        self.items[item].push(at);
        self.places.push((item, self.items[item].len() - 1));
        if !joins {
            let added = self.item(head, item, false);
            self.emit(
                out,
                "response.output_item.added",
                json!({"output_index": item, "item": added}),
            );
        }
        if text {
            let item_id = self.item_id(head, item);
            self.emit(
                out,
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": item,
                    "content_index": self.places[at].1,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
        }
    }

    fn is_open(&self, _head: &Head, at: usize) -> bool {
        self.open_block() == Some(at)
    }

    fn more(&mut self, head: &Head, at: usize, more: &str, out: &mut Vec<SseOut>) {
        let (item, part) = self.places[at];
        let item_id = self.item_id(head, item);
        if self.is_call(head, item) {
            self.emit(
                out,
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": item, "delta": more}),
            );
        } else {
            self.emit(
                out,
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": item, "content_index": part,
                    "delta": more, "logprobs": []}),
            );
        }
    }

    fn unfinished(&self, _head: &Head) -> Vec<usize> {
        self.open_block().into_iter().collect()
    }

    /// The open part and item done, then `response.completed`
    /// (`response.incomplete` for the token cap or a refusal) with the
    /// output, the response's model and usage.
    fn closing(&mut self, head: &Head, response: &ModelResponse, out: &mut Vec<SseOut>) {
        self.close_item(head, out);
        let output = (0..self.items.len())
            .filter(|&item| {
                self.items[item]
                    .iter()
                    .any(|&at| !head.blocks.0[at].dropped)
            })
            .map(|item| self.item(head, item, true))
            .collect();
        let (status, incomplete) = status(response);
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        let done = envelope(
            &head.id,
            &response.model,
            (status, incomplete),
            output,
            usage_body(response),
        );
        self.emit(out, kind, json!({"response": done}));
    }

    /// An `error` event (the error both nested, as OpenAI sends it and its
    /// SDKs raise it, and flat, as its reference documents it), then
    /// `response.failed` with the response `failed` and its `error` (which
    /// Codex reads). The error is [`error_body`]'s.
    fn failing(&mut self, head: &Head, failure: &Failure) -> Vec<SseOut> {
        let error = error_body(failure).1["error"].take();
        let code = match &error["code"] {
            Value::Null => error["type"].clone(),
            code => code.clone(),
        };
        let mut out = Vec::new();
        self.emit(
            &mut out,
            "error",
            json!({"code": error["code"], "message": error["message"],
                "param": error["param"], "error": error}),
        );
        let mut response = envelope(
            &head.id,
            &head.model,
            ("failed", Value::Null),
            Vec::new(),
            Value::Null,
        );
        response["error"] = json!({"code": code, "message": error["message"]});
        self.emit(&mut out, "response.failed", json!({"response": response}));
        out
    }
}
