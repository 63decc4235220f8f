//! What the context builder costs on a long history. Rows, per tokenizer
//! (`o200k_base` and the estimate):
//!
//! - `push+build/…`: one message added to a builder holding 1,000 (texts
//!   and tool call groups of 200–2,000 bytes) and the input built right
//!   after; the target is ≤ 100 µs;
//! - `scratch/…`: a new builder from the same 1,000 messages, built.
//!
//! The window holds about a third of the history, so builds drop and
//! compact the oldest units.
//!
//! - `count-1k/…`: one 1 KB message counted with `o200k_base` by
//!   bpe-openai (what the builder uses) and by tiktoken-rs, side by side.

use std::time::Duration;

use criterion::{BatchSize, Criterion};
use hane_context::{ContextBuilder, ContextConfig, Tokenizer};
use hane_model_types::{Content, Message, Role, ToolSpec};
use serde_json::json;

const MESSAGES: usize = 1_000;

/// Text of `n` bytes, varied by `seed`.
fn text(n: usize, seed: usize) -> String {
    let words = [
        "the ",
        "vehicle ",
        "AB-123 ",
        "is leased ",
        "until ",
        "2031-04-01, ",
        "and ",
    ];
    let mut s = String::with_capacity(n + 16);
    let mut i = seed;
    while s.len() < n {
        s.push_str(words[i % words.len()]);
        i = i.wrapping_mul(31).wrapping_add(7);
    }
    s
}

/// A history of about `n` messages: user texts, assistant texts and tool
/// call groups, sizes 200–2,000 bytes.
fn history(n: usize) -> Vec<Message> {
    let mut out = Vec::with_capacity(n + 2);
    out.push(Message::user(text(400, 0)));
    let mut k = 1;
    while out.len() < n {
        let size = 200 + (k * 7919) % 1_800;
        match k % 4 {
            0 => out.push(Message::user(text(size, k))),
            1 | 3 => {
                let id = format!("call-{k}");
                out.push(Message {
                    role: Role::Assistant,
                    content: vec![Content::ToolCall {
                        id: id.clone(),
                        name: "find_record".to_owned(),
                        input: json!({"collection": "vehicles", "match": {"registration": text(40, k)}}),
                    }],
                });
                out.push(Message {
                    role: Role::User,
                    content: vec![Content::ToolResult {
                        call_id: id,
                        content: text(size, k),
                        is_error: false,
                    }],
                });
            }
            _ => out.push(Message::assistant(text(size, k))),
        }
        k += 1;
    }
    out.truncate(n);
    out
}

fn config(tokenizer: Tokenizer) -> ContextConfig {
    let tools = vec![ToolSpec {
        name: "find_record".to_owned(),
        description: "Finds a record of a collection.".to_owned(),
        input_schema: json!({"type": "object", "properties": {"collection": {"type": "string"}}}),
    }];
    ContextConfig::new(text(2_000, 1), tools, 100_000, 8_000, tokenizer)
}

fn context(c: &mut Criterion) {
    let messages = history(MESSAGES);
    let next = Message::user(text(1_000, 99));
    for tokenizer in [Tokenizer::O200k, Tokenizer::Estimate] {
        let name = tokenizer.name();
        let base = ContextBuilder::from_messages(config(tokenizer), messages.iter().cloned());
        let built = base.build();
        println!(
            "{name}: {} of {} messages kept, {} input tokens",
            built.report.kept, built.report.messages, built.report.input_tokens
        );
        drop(built);
        let mut group = c.benchmark_group("context");
        group.bench_function(format!("push+build/{name}"), |b| {
            b.iter_batched(
                || (base.clone(), next.clone()),
                |(mut builder, message)| {
                    builder.push(message);
                    let kept = builder.build().messages.len();
                    (builder, kept)
                },
                BatchSize::LargeInput,
            );
        });
        group.bench_function(format!("scratch/{name}"), |b| {
            b.iter(|| {
                let builder =
                    ContextBuilder::from_messages(config(tokenizer), messages.iter().cloned());
                builder.build().messages.len()
            });
        });
        group.finish();
    }
}

/// One 1 KB message counted by the crate the builder uses and by
/// tiktoken-rs, the alternative, on the same text.
fn tokenizers(c: &mut Criterion) {
    let message = text(1_000, 99);
    assert_eq!(
        Tokenizer::O200k.count(&message),
        tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(&message)
            .len() as u64
    );
    let mut group = c.benchmark_group("count-1k");
    group.bench_function("o200k_base/bpe-openai", |b| {
        b.iter(|| Tokenizer::O200k.count(&message));
    });
    group.bench_function("o200k_base/tiktoken-rs", |b| {
        let bpe = tiktoken_rs::o200k_base_singleton();
        b.iter(|| bpe.encode_ordinary(&message).len());
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    context(&mut c);
    tokenizers(&mut c);
    c.final_summary();
}
