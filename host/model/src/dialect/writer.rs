//! What every format's stream writer shares: the [`StreamWriter`] API the
//! gateway drives, and the one [`Writer`] that implements it, keeping the
//! blocks sent so far and deciding when a block opens, when a piece of it
//! can still be sent and what the final response adds at the finish; a
//! format's [`Wire`] writes the events it decides on.
//!
//! A writer writes its event stream while the response streams in:
//! [`StreamEvent`]s as the upstream produces them, then the completed
//! response, which supplies whatever did not stream (all of it, from an
//! upstream that does not stream) and wins over what it contradicts where
//! the format has closing objects.

use super::assemble::arguments_text;
use super::{Failure, SseOut};
use crate::{Content, ModelResponse, StreamEvent};

/// Writes a format's event stream of one response while it streams in,
/// each piece as it comes: the same calls for every format.
pub trait StreamWriter {
    /// The events that open the stream. Once; [`event`](Self::event) and
    /// [`finish`](Self::finish) start the stream themselves when it has
    /// not been.
    fn start(&mut self) -> Vec<SseOut>;

    /// The events for one piece of the response: a block opened (and the
    /// one before closed, where the format closes blocks) when the piece
    /// begins a block, then its delta. Nothing after the end.
    fn event(&mut self, event: &StreamEvent) -> Vec<SseOut>;

    /// The end of the stream for the final `response`: the rest of what
    /// was streamed, the blocks never streamed (a non-streaming
    /// upstream's whole response), what closes the open block, then the
    /// format's closing events with the stop reason and usage. Nothing
    /// after the end.
    fn finish(&mut self, response: &ModelResponse) -> Vec<SseOut>;

    /// The end of the stream for a failure after it began, in the
    /// format's error events. Nothing after the end.
    fn fail(&mut self, failure: &Failure) -> Vec<SseOut>;
}

/// What a [`Writer`] keeps for its format's [`Wire`] to write from.
#[derive(Debug)]
pub struct Head {
    /// The response's id, as the client sees it.
    pub(crate) id: String,
    /// The model shown: the one given until the finish, the response's
    /// from then on (where the response names one).
    pub(crate) model: String,
    /// The blocks sent so far.
    pub(crate) blocks: SentBlocks,
}

/// A format's own part of a [`Writer`]: the events it writes where the
/// writer decides one is due, and what the format lets it still send.
pub trait Wire: std::fmt::Debug {
    /// The part of a writer that is to show `input_tokens` (the gateway's
    /// estimate) where the format shows the input before the end.
    fn new(input_tokens: u64) -> Self
    where
        Self: Sized;

    /// The events that open the stream.
    fn opening(&mut self, head: &Head) -> Vec<SseOut>;

    /// The events that open the block just added at `at` (and close the
    /// one before, where the format closes blocks).
    fn open(&mut self, head: &Head, at: usize, out: &mut Vec<SseOut>);

    /// Whether a piece of the block at `at` can still be sent.
    fn is_open(&self, head: &Head, at: usize) -> bool;

    /// The delta of `more` text or arguments of the block at `at`.
    fn more(&mut self, head: &Head, at: usize, more: &str, out: &mut Vec<SseOut>);

    /// The blocks whose rest the final response may still add at the
    /// finish: the open one, or every block where nothing closes them.
    fn unfinished(&self, head: &Head) -> Vec<usize>;

    /// The events that end the stream for `response`, the blocks all
    /// sent: the open block closed, the stop reason and the usage.
    fn closing(&mut self, head: &Head, response: &ModelResponse, out: &mut Vec<SseOut>);

    /// The events that end the stream for `failure`.
    fn failing(&mut self, head: &Head, failure: &Failure) -> Vec<SseOut>;
}

/// The [`StreamWriter`] of the format whose [`Wire`] is `W`. Its methods
/// are also its own, so that a caller need not name the trait.
#[derive(Debug)]
pub struct Writer<W> {
    pub(crate) head: Head,
    started: bool,
    ended: bool,
    pub(crate) wire: W,
}

impl<W: Wire> Writer<W> {
    /// A writer for the response `id`, showing `model` until the response
    /// is known and `input_tokens` (the gateway's estimate) where the
    /// format shows the input at the start (the others report usage only
    /// at the end, from the response).
    pub fn new(id: &str, model: &str, input_tokens: u64) -> Self {
        Self {
            head: Head {
                id: id.to_owned(),
                model: model.to_owned(),
                blocks: SentBlocks::default(),
            },
            started: false,
            ended: false,
            wire: W::new(input_tokens),
        }
    }

    /// See [`StreamWriter::start`].
    pub fn start(&mut self) -> Vec<SseOut> {
        if self.started {
            return Vec::new();
        }
        self.started = true;
        self.wire.opening(&self.head)
    }

    /// See [`StreamWriter::event`].
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
        let at = match self.head.blocks.position(index) {
            Some(at) => at,
            None => {
                let at = self.head.blocks.push(index, call);
                self.wire.open(&self.head, at, out);
                at
            }
        };
        // A piece of a closed block, or of another kind, cannot be sent.
        if more.is_empty()
            || !self.wire.is_open(&self.head, at)
            || self.head.blocks.0[at].call.is_some() != call.is_some()
        {
            return;
        }
        self.head.blocks.0[at].text.push_str(more);
        self.wire.more(&self.head, at, more, out);
    }

    /// See [`StreamWriter::finish`]. The response's model is shown from
    /// here on, by the formats that show it on every event.
    pub fn finish(&mut self, response: &ModelResponse) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        let mut out = self.start();
        if !response.model.is_empty() {
            response.model.clone_into(&mut self.head.model);
        }
        let missing = self.head.blocks.reconcile(response);
        for at in self.wire.unfinished(&self.head) {
            if let Some(rest) = self.head.blocks.0[at].take_rest() {
                self.wire.more(&self.head, at, &rest, &mut out);
            }
        }
        for event in &missing {
            self.piece(event, &mut out);
        }
        self.wire.closing(&self.head, response, &mut out);
        self.ended = true;
        out
    }

    /// See [`StreamWriter::fail`].
    pub fn fail(&mut self, failure: &Failure) -> Vec<SseOut> {
        if self.ended {
            return Vec::new();
        }
        self.ended = true;
        self.wire.failing(&self.head, failure)
    }

    /// The whole stream of `response` as this writer writes it when each
    /// block streams in pieces: what the format's provider streams.
    pub(crate) fn whole(mut self, response: &ModelResponse) -> Vec<SseOut> {
        let mut out = self.start();
        for event in streamed(response) {
            out.extend(self.event(&event));
        }
        out.extend(self.finish(response));
        out
    }
}

impl<W: Wire> StreamWriter for Writer<W> {
    fn start(&mut self) -> Vec<SseOut> {
        Writer::start(self)
    }

    fn event(&mut self, event: &StreamEvent) -> Vec<SseOut> {
        Writer::event(self, event)
    }

    fn finish(&mut self, response: &ModelResponse) -> Vec<SseOut> {
        Writer::finish(self, response)
    }

    fn fail(&mut self, failure: &Failure) -> Vec<SseOut> {
        Writer::fail(self, failure)
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
                            sent.last = Some(arguments_text(input));
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
            let arguments = arguments_text(input);
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
mod tests {
    use super::*;

    #[test]
    fn pieces_cut_on_characters() {
        assert!(pieces("").is_empty());
        let text = "ééééééééééééééééé-abc";
        let cut = pieces(text);
        assert_eq!(cut.len(), 2);
        assert_eq!(cut.concat(), text);
        assert_eq!(cut[0].chars().count(), PIECE_CHARS);
    }
}
