//! The context builder: a run's history in, the model's input out, with a
//! report of everything left out.
//!
//! A [`ContextBuilder`] holds the agent's system text and tools, the
//! model's window, and every message pushed to it, each counted once when
//! pushed. [`ContextBuilder::build`] returns the input that fits the
//! window ([`Context`], borrowing the kept messages) and a
//! [`ContextReport`] saying what was truncated, compacted or omitted.
//!
//! # Units
//!
//! Messages are kept or dropped in *units*: a user input on its own, an
//! assistant message without calls on its own, or an assistant message
//! with tool calls together with the user messages after it that carry
//! tool results (a user message carrying results joins the call group
//! before it, even when it has text too). So a call is never kept without
//! its result, nor a result without its call. The newest unit may be a
//! call group whose results have not arrived yet; it is kept as it is.
//! Calls the history itself left unanswered, and results whose call was
//! never pushed, stay as they were pushed.
//!
//! # Rules, in order
//!
//! The budget is `window - reserve_output`; system text and tools are
//! always in it. Then, stopping at the first step that fits:
//!
//! 1. everything, whole;
//! 2. tool results above [`ContextConfig::truncate_results_above`] tokens
//!    are cut to their head of [`ContextConfig::truncated_result_head`]
//!    tokens and a `[truncated: N tokens omitted]` mark, oldest unit first,
//!    the newest unit never;
//! 3. with all of those cut, the oldest units are dropped, oldest first,
//!    except the *latest input* (the unit of the latest user message with
//!    text) and the *task* (the unit of the first one, when
//!    [`ContextConfig::keep_task`]); each run of dropped messages is
//!    compacted into a short note (`[12 earlier messages (3400 tokens)
//!    were omitted to fit the model's context window.]`);
//! 4. the same, with the newest unit's large results cut too;
//! 5. the same, with the task dropped too;
//! 6. the same without the notes (the dropped messages are then reported
//!    omitted rather than compacted);
//! 7. the window is too small ([`ContextReport::too_small`]): only the
//!    latest input's unit is kept, and the latest input's text is cut to
//!    what is left (to its mark alone if nothing is).
//!
//! The kept messages stay in the order they were pushed. A note never
//! makes two user messages adjacent, nor sits between a call and its
//! result: it is appended to the user message before the dropped run
//! (which then also takes in the user message after the run, if there is
//! one), or prepended to the user message after it, or else stands as a
//! user message of its own before an assistant message.
//!
//! # Cost
//!
//! [`ContextBuilder::push`] counts the message (and precomputes its cut
//! form, when it has large tool results) and appends to running sums:
//! work in proportion to the message. [`ContextBuilder::build`] searches
//! the sums (`O(log n)`) and lists the kept messages as borrows (`O(kept)`
//! pointers); it clones only what it changes: a note's neighbour, the
//! latest input when cut. The same history always gives the same input and
//! report, however it was pushed.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::tokens::{MESSAGE_OVERHEAD, REPLY_PRIMING, Tokenizer};
use hane_model_types::{Content, Message, ModelRequest, Role, ToolSpec};

/// What a builder is built for: the agent's instructions and tools, and
/// the model's window.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextConfig {
    /// The system instructions; always kept.
    pub system: String,
    /// The tools the model may call; always kept.
    pub tools: Vec<ToolSpec>,
    /// The model's context window, in tokens, input and output together.
    pub window: u64,
    /// Tokens left for the answer: the input is kept to
    /// `window - reserve_output`.
    pub reserve_output: u64,
    /// How tokens are counted.
    pub tokenizer: Tokenizer,
    /// A tool result larger than this, in tokens, may be cut to its head.
    pub truncate_results_above: u64,
    /// The head a cut tool result keeps, in tokens.
    pub truncated_result_head: u64,
    /// Whether the task (the first user input) is kept while anything
    /// else can be dropped instead.
    pub keep_task: bool,
}

impl ContextConfig {
    /// A config with the default truncation (results above 1,024 tokens cut
    /// to 256) that keeps the task.
    pub fn new(
        system: impl Into<String>,
        tools: Vec<ToolSpec>,
        window: u64,
        reserve_output: u64,
        tokenizer: Tokenizer,
    ) -> Self {
        Self {
            system: system.into(),
            tools,
            window,
            reserve_output,
            tokenizer,
            truncate_results_above: 1_024,
            truncated_result_head: 256,
            keep_task: true,
        }
    }
}

/// What the builder did to some messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Left out, without a note.
    Omitted,
    /// Kept, with some of its content cut.
    Truncated,
    /// Left out, and replaced by a note saying so.
    Compacted,
}

/// Why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A tool result above the size cut-off, cut to its head.
    LargeToolResult,
    /// The oldest units, dropped to fit the window.
    Window,
    /// The latest input, cut because the system text, tools and it do not
    /// fit the window.
    InputTooLarge,
}

/// One thing the builder did, to one message or a run of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextItem {
    /// The first message's index, in push order from 0.
    pub message: usize,
    /// How many messages from it (1 when absent).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: usize,
    /// What was done.
    pub action: Action,
    /// Why.
    pub reason: Reason,
    /// Their tokens as pushed.
    pub tokens_before: u64,
    /// Their tokens in the input: what is left of them, or the note's.
    pub tokens_after: u64,
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// What a build did: recorded with the LLM turn it built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextReport {
    /// How tokens were counted.
    pub tokenizer: Tokenizer,
    /// The model's window.
    pub window: u64,
    /// Tokens left for the answer.
    pub reserve_output: u64,
    /// Tokens of the input built: system, tools, messages and notes.
    pub input_tokens: u64,
    /// Messages pushed.
    pub messages: usize,
    /// Of them, those kept, whole or truncated.
    pub kept: usize,
    /// Whether the system text, tools and latest input did not fit, so the
    /// latest input was cut (and the input may still exceed the window).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub too_small: bool,
    /// What was truncated, compacted or omitted, in message order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ContextItem>,
}

/// The model's input, borrowing from its builder.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// The system instructions.
    pub system: &'a str,
    /// The tools.
    pub tools: &'a [ToolSpec],
    /// The messages, oldest first: kept ones borrowed, changed ones owned.
    pub messages: Vec<Cow<'a, Message>>,
    /// What was left out.
    pub report: ContextReport,
}

impl Context<'_> {
    /// The request to `model`: system (when not empty), tools and messages
    /// cloned, and `max_output_tokens` the reserve (when not 0).
    pub fn into_request(self, model: &str) -> ModelRequest {
        let mut request = ModelRequest::new(model);
        if !self.system.is_empty() {
            request.system = Some(self.system.to_owned());
        }
        request.tools = self.tools.to_vec();
        request.messages = self.messages.into_iter().map(Cow::into_owned).collect();
        if self.report.reserve_output > 0 {
            request.max_output_tokens = Some(self.report.reserve_output);
        }
        request
    }
}

/// One pushed message, counted.
#[derive(Debug, Clone)]
struct Entry {
    message: Message,
    tokens: u64,
    /// Its form with large tool results cut, and that form's tokens.
    cut: Option<(Message, u64)>,
    unit: usize,
}

/// Assembles the model's input from a history, statefully, in memory.
#[derive(Debug, Clone)]
pub struct ContextBuilder {
    config: ContextConfig,
    /// System, tools and reply priming.
    fixed: u64,
    /// Upper bound of one note's tokens.
    note_reserve: u64,
    entries: Vec<Entry>,
    /// `full[i]`: tokens of messages `..i` whole; `cut[i]`: with large
    /// results cut.
    full: Vec<u64>,
    cut: Vec<u64>,
    /// The first message of each unit.
    starts: Vec<usize>,
    /// Whether the newest unit is a call group.
    open_group: bool,
    first_input: Option<usize>,
    latest_input: Option<usize>,
}

/// How a build keeps messages.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Units before it are dropped, unless protected.
    front: usize,
    /// Units before it have their large results cut.
    cut: usize,
    keep_task: bool,
    notes: bool,
    too_small: bool,
}

impl ContextBuilder {
    /// An empty builder.
    pub fn new(config: ContextConfig) -> Self {
        let t = config.tokenizer;
        let fixed = REPLY_PRIMING + t.system_tokens(&config.system) + t.tools_tokens(&config.tools);
        let note_reserve = MESSAGE_OVERHEAD + t.block_tokens(&note(usize::MAX, u64::MAX));
        Self {
            config,
            fixed,
            note_reserve,
            entries: Vec::new(),
            full: vec![0],
            cut: vec![0],
            starts: Vec::new(),
            open_group: false,
            first_input: None,
            latest_input: None,
        }
    }

    /// A builder holding `messages`.
    pub fn from_messages(
        config: ContextConfig,
        messages: impl IntoIterator<Item = Message>,
    ) -> Self {
        let mut builder = Self::new(config);
        for message in messages {
            builder.push(message);
        }
        builder
    }

    /// Its config.
    pub fn config(&self) -> &ContextConfig {
        &self.config
    }

    /// The messages pushed, in order.
    pub fn messages(&self) -> impl ExactSizeIterator<Item = &Message> {
        self.entries.iter().map(|e| &e.message)
    }

    /// How many messages were pushed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds the next message of the history.
    pub fn push(&mut self, message: Message) {
        let t = self.config.tokenizer;
        let index = self.entries.len();
        let has_text = message
            .content
            .iter()
            .any(|c| matches!(c, Content::Text { .. }));
        let has_results = message.tool_results().next().is_some();
        let joins = message.role == Role::User && has_results && self.open_group;
        if !joins {
            self.starts.push(index);
            self.open_group =
                message.role == Role::Assistant && message.tool_calls().next().is_some();
        }
        if message.role == Role::User && has_text {
            self.latest_input = Some(index);
            self.first_input.get_or_insert(index);
        }
        let tokens = t.message_tokens(&message);
        let cut = has_results.then(|| self.cut_results(&message)).flatten();
        let cut_tokens = cut.as_ref().map_or(tokens, |(_, n)| *n);
        self.full.push(self.full[index] + tokens);
        self.cut.push(self.cut[index] + cut_tokens);
        self.entries.push(Entry {
            message,
            tokens,
            cut,
            unit: self.starts.len() - 1,
        });
    }

    /// The message with its large tool results cut, if it has any.
    fn cut_results(&self, message: &Message) -> Option<(Message, u64)> {
        let t = self.config.tokenizer;
        let mut changed = false;
        let content = message
            .content
            .iter()
            .map(|block| match block {
                Content::ToolResult {
                    call_id,
                    content,
                    is_error,
                } => {
                    let n = t.count(content);
                    if n <= self.config.truncate_results_above {
                        return block.clone();
                    }
                    changed = true;
                    Content::ToolResult {
                        call_id: call_id.clone(),
                        content: cut_text(t, content, n, self.config.truncated_result_head),
                        is_error: *is_error,
                    }
                }
                other => other.clone(),
            })
            .collect();
        changed.then(|| {
            let cut = Message {
                role: message.role,
                content,
            };
            let n = t.message_tokens(&cut);
            (cut, n)
        })
    }

    /// The first message of unit `u` (the end for the unit past the last).
    fn unit_start(&self, u: usize) -> usize {
        self.starts.get(u).copied().unwrap_or(self.entries.len())
    }

    /// Tokens of units `..k` with units `..cut` cut.
    fn sum(&self, k: usize, cut: usize) -> u64 {
        let m = self.unit_start(k);
        let c = self.unit_start(cut).min(m);
        self.cut[c] + self.full[m] - self.full[c]
    }

    fn unit_tokens(&self, u: usize, cut: usize) -> u64 {
        self.sum(u + 1, cut) - self.sum(u, cut)
    }

    /// The protected units, ascending, distinct.
    fn protected(&self, keep_task: bool) -> [Option<usize>; 2] {
        let latest = self.latest_input.map(|i| self.entries[i].unit);
        let task = self
            .first_input
            .filter(|_| keep_task)
            .map(|i| self.entries[i].unit)
            .filter(|u| Some(*u) != latest);
        [task, latest]
    }

    /// Tokens of the messages kept by `front` and `cut`, notes aside.
    fn kept_tokens(&self, front: usize, cut: usize, protected: [Option<usize>; 2]) -> u64 {
        let units = self.starts.len();
        let mut n = self.sum(units, cut) - self.sum(front, cut);
        for p in protected.into_iter().flatten() {
            if p < front {
                n += self.unit_tokens(p, cut);
            }
        }
        n
    }

    /// Runs of dropped units when units `..front` are dropped.
    fn gaps(&self, front: usize, protected: [Option<usize>; 2]) -> u64 {
        let mut gaps = 0;
        let mut at = 0;
        for p in protected.into_iter().flatten().filter(|p| *p < front) {
            if p > at {
                gaps += 1;
            }
            at = p + 1;
        }
        if front > at {
            gaps += 1;
        }
        gaps
    }

    /// Tokens left for the messages (0 when even system and tools
    /// exceed the window), and whether they do.
    fn budget(&self) -> (u64, bool) {
        let room = self
            .config
            .window
            .saturating_sub(self.config.reserve_output);
        (room.saturating_sub(self.fixed), self.fixed > room)
    }

    fn plan(&self) -> Plan {
        let (budget, over) = self.budget();
        let units = self.starts.len();
        let keep_task = self.config.keep_task;
        let plan = |front, cut, keep_task, notes| Plan {
            front,
            cut,
            keep_task,
            notes,
            too_small: false,
        };
        let last_resort = Plan {
            front: units,
            cut: units,
            keep_task: false,
            notes: false,
            too_small: true,
        };
        if over {
            return last_resort;
        }
        // 1 and 2: nothing dropped, the oldest large results cut.
        let last = units.saturating_sub(1);
        if self.sum(units, last) <= budget {
            let cut = first(0, last, |c| self.sum(units, c) <= budget);
            return plan(0, cut, keep_task, false);
        }
        // 3, 4 and 5: drop the oldest units.
        for (cut, keep_task) in [(last, keep_task), (units, keep_task), (units, false)] {
            let protected = self.protected(keep_task);
            let reserve = self.gaps(units, protected) * self.note_reserve;
            let fits = |f| self.kept_tokens(f, cut, protected) + reserve <= budget;
            if fits(units) {
                return plan(first(1, units, fits), cut, keep_task, true);
            }
        }
        // 6: without notes.
        let too_small = self.kept_tokens(units, units, self.protected(false)) > budget;
        Plan {
            too_small,
            ..last_resort
        }
    }

    /// The model's input and what was left out of it.
    pub fn build(&self) -> Context<'_> {
        let t = self.config.tokenizer;
        let plan = self.plan();
        let (budget, _) = self.budget();
        let protected = self.protected(plan.keep_task);
        let units = self.starts.len();

        // Kept runs of units, ascending: protected ones before the front,
        // then the front onwards.
        let mut runs: Vec<(usize, usize)> = protected
            .into_iter()
            .flatten()
            .filter(|p| *p < plan.front)
            .map(|p| (p, p + 1))
            .collect();
        if plan.front < units {
            runs.push((plan.front, units));
        }

        let mut out: Vec<Cow<'_, Message>> = Vec::with_capacity(
            self.unit_start(units) - self.unit_start(plan.front) + 2 * runs.len() + 1,
        );
        let mut items = Vec::new();
        let mut tokens = self.fixed;
        let mut kept = 0;
        let mut at = 0;
        let mut pending: Option<Content> = None;
        let n_msgs = self.entries.len();
        let ranges: Vec<(usize, usize)> = runs
            .iter()
            .map(|&(from, to)| (self.unit_start(from), self.unit_start(to)))
            .chain([(n_msgs, n_msgs)])
            .collect();
        for (start, end) in ranges {
            if start > at {
                let dropped = self.full[start] - self.full[at];
                let count = start - at;
                let (action, after) = if plan.notes {
                    let block = note(count, dropped);
                    let n = t.block_tokens(&block);
                    pending = Some(block);
                    (Action::Compacted, n)
                } else {
                    (Action::Omitted, 0)
                };
                items.push(ContextItem {
                    message: at,
                    count,
                    action,
                    reason: Reason::Window,
                    tokens_before: dropped,
                    tokens_after: after,
                });
            }
            for i in start..end {
                let entry = &self.entries[i];
                let (mut message, mut n) = match &entry.cut {
                    Some((cut, n)) if entry.unit < plan.cut => {
                        items.push(ContextItem {
                            message: i,
                            count: 1,
                            action: Action::Truncated,
                            reason: Reason::LargeToolResult,
                            tokens_before: entry.tokens,
                            tokens_after: *n,
                        });
                        (Cow::Borrowed(cut), *n)
                    }
                    _ => (Cow::Borrowed(&entry.message), entry.tokens),
                };
                if plan.too_small && Some(i) == self.latest_input {
                    let others = self.kept_tokens(units, units, protected) - n;
                    let room = budget.saturating_sub(others);
                    let before = n;
                    let (cut, cut_n) = cut_input(t, &message, room);
                    message = Cow::Owned(cut);
                    n = cut_n;
                    match items.last_mut() {
                        Some(item) if item.message == i => {
                            item.reason = Reason::InputTooLarge;
                            item.tokens_after = n;
                        }
                        _ => items.push(ContextItem {
                            message: i,
                            count: 1,
                            action: Action::Truncated,
                            reason: Reason::InputTooLarge,
                            tokens_before: before,
                            tokens_after: n,
                        }),
                    }
                    if let Some(item) = items.last_mut() {
                        item.tokens_before = entry.tokens;
                    }
                }
                kept += 1;
                tokens += n;
                if let Some(block) = pending.take() {
                    tokens += place_note(t, &mut out, block, Some(message));
                } else {
                    out.push(message);
                }
            }
            at = end;
        }
        if let Some(block) = pending.take() {
            tokens += place_note(t, &mut out, block, None);
        }
        Context {
            system: &self.config.system,
            tools: &self.config.tools,
            messages: out,
            report: ContextReport {
                tokenizer: t,
                window: self.config.window,
                reserve_output: self.config.reserve_output,
                input_tokens: tokens,
                messages: self.entries.len(),
                kept,
                too_small: plan.too_small,
                items,
            },
        }
    }
}

/// The least `x` in `lo..=hi` for which `fits` holds, `fits(hi)` holding
/// and `fits` monotone.
fn first(mut lo: usize, mut hi: usize, fits: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi
}

/// The note that stands for `count` dropped messages of `tokens` tokens.
fn note(count: usize, tokens: u64) -> Content {
    let (noun, verb) = if count == 1 {
        ("message", "was")
    } else {
        ("messages", "were")
    };
    Content::text(format!(
        "[{count} earlier {noun} ({tokens} tokens) {verb} omitted to fit the model's context window.]"
    ))
}

/// Puts a note where messages were dropped, before `next` (the first kept
/// message after them), without making two user messages adjacent. Returns
/// the tokens it adds.
fn place_note<'a>(
    t: Tokenizer,
    out: &mut Vec<Cow<'a, Message>>,
    block: Content,
    next: Option<Cow<'a, Message>>,
) -> u64 {
    let n = t.block_tokens(&block);
    let next_is_user = next.as_ref().is_some_and(|m| m.role == Role::User);
    match out.last_mut() {
        Some(prev) if prev.role == Role::User => {
            let prev = prev.to_mut();
            prev.content.push(block);
            match next {
                Some(next) if next_is_user => {
                    prev.content.extend(next.into_owned().content);
                    n - MESSAGE_OVERHEAD.min(n)
                }
                Some(next) => {
                    out.push(next);
                    n
                }
                None => n,
            }
        }
        _ => match next {
            Some(next) if next_is_user => {
                let mut next = next.into_owned();
                next.content.insert(0, block);
                out.push(Cow::Owned(next));
                n
            }
            next => {
                out.push(Cow::Owned(Message {
                    role: Role::User,
                    content: vec![block],
                }));
                out.extend(next);
                n + MESSAGE_OVERHEAD
            }
        },
    }
}

/// `text`, of `tokens` tokens, cut to a head of about `head` tokens and a
/// mark saying how many were cut.
fn cut_text(t: Tokenizer, text: &str, tokens: u64, head: u64) -> String {
    let head = t.head(text, head);
    let omitted = tokens.saturating_sub(t.count(head));
    if head.is_empty() {
        format!("[truncated: {omitted} tokens omitted]")
    } else {
        format!("{head}\n[truncated: {omitted} tokens omitted]")
    }
}

/// The latest input with its text cut so that it takes at most `room`
/// tokens (or its marks alone, if even those do not fit).
fn cut_input(t: Tokenizer, message: &Message, room: u64) -> (Message, u64) {
    let counts: Vec<u64> = message
        .content
        .iter()
        .map(|b| match b {
            Content::Text { text } => t.count(text),
            _ => 0,
        })
        .collect();
    let with_heads = |mut left: u64| {
        let content: Vec<Content> = message
            .content
            .iter()
            .zip(&counts)
            .map(|(b, &n)| match b {
                Content::Text { text } if n > left => {
                    let cut = cut_text(t, text, n, left);
                    left = 0;
                    Content::text(cut)
                }
                Content::Text { .. } => {
                    left -= n;
                    b.clone()
                }
                other => other.clone(),
            })
            .collect();
        let cut = Message {
            role: message.role,
            content,
        };
        let n = t.message_tokens(&cut);
        (cut, n)
    };
    let (bare, bare_n) = with_heads(0);
    let mut heads = room.saturating_sub(bare_n);
    for _ in 0..4 {
        if heads == 0 {
            break;
        }
        let (cut, n) = with_heads(heads);
        if n <= room {
            return (cut, n);
        }
        heads = heads.saturating_sub(n - room);
    }
    (bare, bare_n)
}
