//! The Responses event stream written as a response streams in: each
//! event named, numbered in sequence, and closed by the final response.

use serde_json::{Value, json};

use super::{
    Failure, ModelResponse, SentBlocks, SseOut, StreamEvent, envelope, error_body, function_call,
    status, usage,
};

/// Writes the Responses event stream of a response while it streams in,
/// each piece as it comes; every event is named, its `type` the name,
/// and numbered by `sequence_number` from 0.
///
/// [`start`](Self::start) writes `response.created` and
/// `response.in_progress` (the response `in_progress`, no output, the
/// model given). Text blocks in a row are the `output_text` parts of one
/// `message` item (`msg_{id}_{output_index}`), each tool call a
/// `function_call` item (`fc_{id}_{output_index}`, its `call_id` the
/// upstream's call id). An item has `response.output_item.added`; a part
/// `response.content_part.added`, its `response.output_text.delta`s,
/// `response.output_text.done` and `response.content_part.done`; a call
/// its `response.function_call_arguments.delta`s and `.done`; then
/// `response.output_item.done`. A part or item is done when the next one
/// begins or at the finish. [`finish`](Self::finish) writes what the
/// final response has that was not streamed, closes what is open, and
/// ends with `response.completed` (or `response.incomplete`) carrying the
/// whole response and its usage. [`fail`](Self::fail) ends the stream
/// with `error` and `response.failed` instead.
///
/// Where the final response contradicts what was streamed, the closing
/// events (the `.done` events still to come, and `response.completed`)
/// carry the final response's text and arguments, and leave out blocks
/// it does not have. A piece for a part or item done already (an upstream
/// that interleaves blocks) is not sent; `response.completed` has it.
#[derive(Debug)]
pub struct StreamWriter {
    id: String,
    model: String,
    started: bool,
    ended: bool,
    sequence: usize,
    blocks: SentBlocks,
    /// Each block's output item and part index, by block position.
    places: Vec<(usize, usize)>,
    /// Each output item's blocks: a message's parts, or one call.
    items: Vec<Vec<usize>>,
    /// Whether the last item is open.
    open: bool,
}

impl StreamWriter {
    /// A writer for the response `id`, showing `model` until the response
    /// is known. `input_tokens` is not shown: this format reports usage
    /// only at the end, from the response.
    pub fn new(id: &str, model: &str, input_tokens: u64) -> Self {
        let _ = input_tokens;
        Self {
            id: id.to_owned(),
            model: model.to_owned(),
            started: false,
            ended: false,
            sequence: 0,
            blocks: SentBlocks::default(),
            places: Vec::new(),
            items: Vec::new(),
            open: false,
        }
    }

    fn emit(&mut self, out: &mut Vec<SseOut>, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        out.push(SseOut::named(kind, &data));
    }

    /// The events that open the stream: `response.created` and
    /// `response.in_progress`. Once; [`event`](Self::event) and
    /// [`finish`](Self::finish) start the stream themselves when it has
    /// not been.
    pub fn start(&mut self) -> Vec<SseOut> {
        if self.started {
            return Vec::new();
        }
        self.started = true;
        let response = envelope(
            &self.id,
            &self.model,
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

    /// The events for one piece of the response: an item or part added
    /// (and the one before done) when the piece begins a block, then its
    /// delta. Nothing after the end.
    pub fn event(&mut self, event: &StreamEvent) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        let mut out = self.start();
        self.piece(event, &mut out);
        out
    }

    fn is_call(&self, item: usize) -> bool {
        self.blocks.0[self.items[item][0]].call.is_some()
    }

    fn item_id(&self, item: usize) -> String {
        let kind = if self.is_call(item) { "fc" } else { "msg" };
        format!("{kind}_{}_{item}", self.id)
    }

    /// Item `item`, as added (in progress, empty) or done (its blocks the
    /// final response has, with their closing values).
    fn item(&self, item: usize, done: bool) -> Value {
        let status = if done { "completed" } else { "in_progress" };
        let id = self.item_id(item);
        let live = || {
            self.items[item]
                .iter()
                .map(|&at| &self.blocks.0[at])
                .filter(|b| !b.dropped)
        };
        match &self.blocks.0[self.items[item][0]].call {
            Some((call_id, name)) => function_call(
                json!({"type": "function_call", "id": id, "call_id": call_id,
                "arguments": if done { self.blocks.0[self.items[item][0]].closing() } else { "" },
                "status": status}),
                name,
            ),
            None => {
                let parts: Vec<Value> = if done {
                    live()
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

    /// Whether the block at `at` is the one open now.
    fn is_open(&self, at: usize) -> bool {
        self.open && self.items.last().and_then(|item| item.last()) == Some(&at)
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
            || !self.is_open(at)
            || self.blocks.0[at].call.is_some() != call.is_some()
        {
            return;
        }
        self.blocks.0[at].text.push_str(more);
        self.more(at, more, out);
    }

    /// The delta of more text or arguments of the block at `at`.
    fn more(&mut self, at: usize, more: &str, out: &mut Vec<SseOut>) {
        let (item, part) = self.places[at];
        let item_id = self.item_id(item);
        if self.is_call(item) {
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

    fn open_block(
        &mut self,
        upstream: usize,
        call: Option<(&str, &str)>,
        out: &mut Vec<SseOut>,
    ) -> usize {
        let joins = call.is_none() && self.open && !self.is_call(self.items.len() - 1);
        if joins {
            let previous = *self.items[self.items.len() - 1].last().unwrap_or(&0);
            self.close_part(previous, out);
        } else {
            self.close_item(out);
        }
        let at = self.blocks.push(upstream, call);
        if !joins {
            self.items.push(Vec::new());
            self.open = true;
        }
        let item = self.items.len() - 1;
        self.items[item].push(at);
        self.places.push((item, self.items[item].len() - 1));
        if !joins {
            let added = self.item(item, false);
            self.emit(
                out,
                "response.output_item.added",
                json!({"output_index": item, "item": added}),
            );
        }
        if call.is_none() {
            let item_id = self.item_id(item);
            self.emit(
                out,
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": item,
                    "content_index": self.places[at].1,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
        }
        at
    }

    fn close_part(&mut self, at: usize, out: &mut Vec<SseOut>) {
        let (item, part) = self.places[at];
        let item_id = self.item_id(item);
        let text = self.blocks.0[at].closing().to_owned();
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

    fn close_item(&mut self, out: &mut Vec<SseOut>) {
        if !std::mem::take(&mut self.open) {
            return;
        }
        let item = self.items.len() - 1;
        let last = *self.items[item].last().unwrap_or(&0);
        if self.is_call(item) {
            let item_id = self.item_id(item);
            let arguments = self.blocks.0[last].closing().to_owned();
            self.emit(
                out,
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": item, "arguments": arguments}),
            );
        } else {
            self.close_part(last, out);
        }
        let done = self.item(item, true);
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": item, "item": done}),
        );
    }

    /// The end of the stream for the final `response`: the rest of the
    /// open block, the blocks never streamed (a non-streaming upstream's
    /// whole response), the open part and item done, then
    /// `response.completed` (`response.incomplete` for the token cap or a
    /// refusal) with the output, the response's model and usage. Nothing
    /// after the end.
    pub fn finish(&mut self, response: &ModelResponse) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        let mut out = self.start();
        let missing = self.blocks.reconcile(response);
        if let Some(&at) = self.items.last().and_then(|item| item.last())
            && self.open
            && let Some(rest) = self.blocks.0[at].take_rest()
        {
            self.more(at, &rest, &mut out);
        }
        for event in &missing {
            self.piece(event, &mut out);
        }
        self.close_item(&mut out);
        let output = (0..self.items.len())
            .filter(|&item| {
                self.items[item]
                    .iter()
                    .any(|&at| !self.blocks.0[at].dropped)
            })
            .map(|item| self.item(item, true))
            .collect();
        let (status, incomplete) = status(response);
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        let done = envelope(
            &self.id,
            &response.model,
            (status, incomplete),
            output,
            usage(response),
        );
        self.emit(&mut out, kind, json!({"response": done}));
        self.ended = true;
        out
    }

    /// The end of the stream for a failure after it began: an `error`
    /// event (the error both nested, as OpenAI sends it and its SDKs
    /// raise it, and flat, as its reference documents it), then
    /// `response.failed` with the response `failed` and its `error` (which
    /// Codex reads). The error is [`error_body`]'s. Nothing after the end.
    pub fn fail(&mut self, failure: &Failure) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        self.ended = true;
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
            &self.id,
            &self.model,
            ("failed", Value::Null),
            Vec::new(),
            Value::Null,
        );
        response["error"] = json!({"code": code, "message": error["message"]});
        self.emit(&mut out, "response.failed", json!({"response": response}));
        out
    }
}
