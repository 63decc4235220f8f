//! Property tests of the context builder over random histories.

use std::collections::HashSet;

use hane_context::{Action, ContextBuilder, ContextConfig, Tokenizer};
use hane_model_types::{Content, Message, Role, ToolSpec};
use proptest::prelude::*;
use serde_json::json;

/// One step of a history.
#[derive(Debug, Clone)]
enum Step {
    User(usize),
    Assistant(usize),
    /// Calls with results of these sizes.
    Calls(Vec<usize>),
}

fn text(n: usize, seed: usize) -> String {
    let words = [
        "fleet ", "vehicle ", "AB-123 ", "lease ", "架空 ", "0042 ", "ok. ",
    ];
    let mut s = String::new();
    let mut i = seed;
    while s.len() < n {
        s.push_str(words[i % words.len()]);
        i += 1;
    }
    s
}

fn history(steps: &[Step], open_end: bool) -> Vec<Message> {
    let mut out = Vec::new();
    let mut call = 0;
    for (k, step) in steps.iter().enumerate() {
        match step {
            Step::User(n) => out.push(Message::user(format!("u{k} {}", text(*n, k)))),
            Step::Assistant(n) => out.push(Message::assistant(format!("a{k} {}", text(*n, k)))),
            Step::Calls(sizes) => {
                let ids: Vec<String> = sizes
                    .iter()
                    .map(|_| {
                        call += 1;
                        format!("c{call}")
                    })
                    .collect();
                out.push(Message {
                    role: Role::Assistant,
                    content: ids
                        .iter()
                        .map(|id| Content::ToolCall {
                            id: id.clone(),
                            name: "find".to_owned(),
                            input: json!({"q": id}),
                        })
                        .collect(),
                });
                out.push(Message {
                    role: Role::User,
                    content: ids
                        .iter()
                        .zip(sizes)
                        .map(|(id, n)| Content::ToolResult {
                            call_id: id.clone(),
                            content: text(*n, *n),
                            is_error: false,
                        })
                        .collect(),
                });
            }
        }
    }
    if open_end {
        call += 1;
        out.push(Message {
            role: Role::Assistant,
            content: vec![Content::ToolCall {
                id: format!("c{call}"),
                name: "find".to_owned(),
                input: json!({}),
            }],
        });
    }
    out
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..400).prop_map(Step::User),
        (0usize..400).prop_map(Step::Assistant),
        prop::collection::vec(prop_oneof![4 => 0usize..300, 1 => 2_000usize..9_000], 1..=3)
            .prop_map(Step::Calls),
    ]
}

fn config(window: u64, tokenizer: Tokenizer) -> ContextConfig {
    let tools = vec![ToolSpec {
        name: "find".to_owned(),
        description: "Finds a record.".to_owned(),
        input_schema: json!({"type": "object"}),
    }];
    let mut c = ContextConfig::new("You check vehicles.", tools, window, 64, tokenizer);
    c.truncate_results_above = 300;
    c.truncated_result_head = 40;
    c
}

fn is_note(block: &Content) -> bool {
    matches!(block, Content::Text { text } if text.starts_with('[') && text.contains("omitted to fit the model's context window"))
}

/// Whether `emitted` is `original`, or `original` cut to a head and a mark.
fn matches(original: &Content, emitted: &Content) -> bool {
    let cut = |a: &str, b: &str| {
        b.contains("[truncated: ")
            && a.starts_with(
                b.split("[truncated: ")
                    .next()
                    .unwrap()
                    .trim_end_matches('\n'),
            )
    };
    match (original, emitted) {
        _ if original == emitted => true,
        (Content::Text { text: a }, Content::Text { text: b }) => cut(a, b),
        (
            Content::ToolResult {
                call_id: a_id,
                content: a,
                ..
            },
            Content::ToolResult {
                call_id: b_id,
                content: b,
                ..
            },
        ) => a_id == b_id && cut(a, b),
        _ => false,
    }
}

fn check(messages: &[Message], window: u64, tokenizer: Tokenizer) -> Result<(), TestCaseError> {
    let cfg = config(window, tokenizer);
    // 6: pushing one by one (building in between) equals from scratch.
    let mut builder = ContextBuilder::new(cfg.clone());
    for m in messages {
        builder.push(m.clone());
        let _ = builder.build();
    }
    let scratch = ContextBuilder::from_messages(cfg.clone(), messages.iter().cloned());
    let ctx = builder.build();
    let again = scratch.build();
    prop_assert_eq!(&ctx.messages, &again.messages);
    prop_assert_eq!(&ctx.report, &again.report);
    let report = &ctx.report;
    // The report round-trips through JSON.
    let json = serde_json::to_string(report).unwrap();
    prop_assert_eq!(
        &serde_json::from_str::<hane_context::ContextReport>(&json).unwrap(),
        report
    );

    // 1: the system instructions.
    prop_assert_eq!(ctx.system, cfg.system.as_str());
    prop_assert_eq!(ctx.tools, &cfg.tools[..]);

    // 5: every message accounted for, once.
    let mut omitted = vec![false; messages.len()];
    let mut truncated = HashSet::new();
    for item in &report.items {
        match item.action {
            Action::Omitted | Action::Compacted => {
                for (i, seen) in omitted
                    .iter_mut()
                    .enumerate()
                    .skip(item.message)
                    .take(item.count)
                {
                    prop_assert!(!*seen, "{i} reported twice");
                    *seen = true;
                }
            }
            Action::Truncated => {
                prop_assert!(truncated.insert(item.message));
            }
        }
    }
    let kept: Vec<usize> = (0..messages.len()).filter(|i| !omitted[*i]).collect();
    prop_assert_eq!(kept.len(), report.kept);
    prop_assert_eq!(report.messages, messages.len());
    for i in &truncated {
        prop_assert!(!omitted[*i]);
    }

    // 7 and 5: the kept messages' blocks, in push order, notes aside.
    let expected: Vec<&Content> = kept.iter().flat_map(|i| &messages[*i].content).collect();
    let emitted: Vec<&Content> = ctx
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter(|b| !is_note(b))
        .collect();
    prop_assert_eq!(expected.len(), emitted.len());
    for (a, b) in expected.iter().zip(&emitted) {
        prop_assert!(matches(a, b), "{a:?} became {b:?}");
    }
    // No two user messages adjacent unless they were pushed so.
    for pair in ctx.messages.windows(2) {
        if pair[0].role == Role::User && pair[1].role == Role::User {
            let strip = |m: &Message| {
                m.content
                    .iter()
                    .filter(|b| !is_note(b))
                    .cloned()
                    .collect::<Vec<_>>()
            };
            let pushed = messages.windows(2).any(|p| {
                p[1].role == Role::User
                    && p[0].role == Role::User
                    && p[1].content.first() == strip(&pair[1]).first()
            });
            prop_assert!(pushed, "adjacent user messages made: {pair:?}");
        }
    }

    // 2: the latest input is kept (maybe cut).
    let latest = messages.iter().rposition(|m| {
        m.role == Role::User && m.content.iter().any(|c| matches!(c, Content::Text { .. }))
    });
    if let Some(latest) = latest {
        prop_assert!(!omitted[latest], "latest input {latest} dropped");
    }

    // 3: calls and results together.
    let mut calls = HashSet::new();
    let mut answered = HashSet::new();
    for m in &ctx.messages {
        for (id, _, _) in m.tool_calls() {
            calls.insert(id.to_owned());
        }
        for id in m.tool_results() {
            prop_assert!(calls.contains(id), "result {id} without its call");
            answered.insert(id.to_owned());
        }
    }
    let last_open: HashSet<String> = messages
        .last()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.tool_calls().map(|(id, _, _)| id.to_owned()).collect())
        .unwrap_or_default();
    for id in &calls {
        prop_assert!(
            answered.contains(id) || last_open.contains(id),
            "call {id} without its result"
        );
    }

    // 4: the count is right, and fits when system, tools and latest input do.
    let recount =
        tokenizer.request_tokens(ctx.system, ctx.tools, ctx.messages.iter().map(|m| &**m));
    prop_assert_eq!(recount, report.input_tokens);
    let room = window - 64;
    let fixed = tokenizer.request_tokens(&cfg.system, &cfg.tools, []);
    let needed = fixed + latest.map_or(0, |i| tokenizer.message_tokens(&messages[i]));
    if needed <= room {
        prop_assert!(!report.too_small);
    }
    if !report.too_small {
        prop_assert!(
            report.input_tokens <= room,
            "{} > {room}",
            report.input_tokens
        );
    } else if let Some(latest) = latest {
        prop_assert!(
            report
                .items
                .iter()
                .any(|i| i.message == latest && i.action == Action::Truncated)
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn invariants_hold_estimated(
        steps in prop::collection::vec(step(), 0..40),
        open_end in any::<bool>(),
        window in prop_oneof![64u64..200, 200u64..3_000, 3_000u64..40_000],
    ) {
        check(&history(&steps, open_end), window, Tokenizer::Estimate)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn invariants_hold_with_o200k(
        steps in prop::collection::vec(step(), 0..25),
        open_end in any::<bool>(),
        window in prop_oneof![64u64..200, 200u64..3_000, 3_000u64..20_000],
    ) {
        check(&history(&steps, open_end), window, Tokenizer::O200k)?;
    }
}

#[test]
fn a_too_small_window_cuts_the_latest_input() {
    for tokenizer in [Tokenizer::Estimate, Tokenizer::O200k] {
        let cfg = config(300, tokenizer);
        let b = ContextBuilder::from_messages(cfg, [Message::user(text(4_000, 0))]);
        let ctx = b.build();
        assert!(ctx.report.too_small);
        assert_eq!(ctx.messages.len(), 1);
        assert!(
            ctx.report.input_tokens <= 236,
            "{}",
            ctx.report.input_tokens
        );
        assert!(ctx.report.input_tokens > 150, "{}", ctx.report.input_tokens);
    }
}

#[test]
fn the_report_is_compact_camel_case_json() {
    let cfg = config(400, Tokenizer::Estimate);
    let mut b = ContextBuilder::new(cfg);
    b.push(Message::user("task"));
    for k in 0..30 {
        b.push(Message::assistant(text(100, k)));
        b.push(Message::user(text(100, k)));
    }
    let json = serde_json::to_value(&b.build().report).unwrap();
    assert_eq!(json["tokenizer"], "estimate");
    assert_eq!(json["items"][0]["action"], "compacted");
    assert_eq!(json["items"][0]["reason"], "window");
    assert!(json["items"][0]["tokensBefore"].as_u64().unwrap() > 0);
    assert!(json.get("tooSmall").is_none());
}
