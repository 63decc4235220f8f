//! The stream writers' tests, written once against [`StreamWriter`] and
//! run for each format: what a writer writes is a whole stream of its
//! format, the same whether the response streamed in or came whole, and
//! its format's own parser reads back the response as the format carries
//! it.

use serde_json::Value;

use super::{
    carried, contradicting, merged, rate_limited, read_back, rich_response, streamed_cases,
    upstream,
};
use crate::dialect::{SseOut, StreamWriter};
use crate::{Api, Content, ModelError, ModelResponse, StopReason, StreamEvent, arguments_text};

/// A format's stream writer, as the shared tests drive and check it (each
/// format's tests implement it).
pub(crate) trait Subject: StreamWriter + Sized {
    /// The format, whose parser reads the stream back.
    const API: Api;
    /// Where its events carry delta strings, for merging deltas in a row.
    const DELTAS: &'static [&'static str];
    /// Where its first event shows the model given.
    const MODEL: &'static str;

    /// A writer for `id` showing `model` and `input_tokens` until the
    /// response is known, writing all its provider would (Chat
    /// Completions' usage chunk included).
    fn writer(id: &str, model: &str, input_tokens: u64) -> Self;

    /// The stream its provider sends for `response`.
    fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut>;

    /// Panics unless `out` is a whole, well-formed stream of the format.
    fn check(out: &[SseOut]);
}

/// What `writer` writes for `events`, then the final `response`.
pub(crate) fn written(
    writer: &mut impl StreamWriter,
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

/// Pieces as an upstream of each format sends them (cut otherwise than
/// the writer's own) give the stream of the final response, which reads
/// back as that response.
fn pieces_as_they_come<T: Subject>() {
    for (response, upstreams) in streamed_cases() {
        for api in upstreams {
            let (events, last) = upstream(api, &response);
            let mut writer = T::writer("id", &last.model, last.usage.input_tokens);
            let out = written(&mut writer, &events, &last);
            T::check(&out);
            assert_eq!(
                merged(&out, T::DELTAS),
                merged(&T::stream_events(&last, "id"), T::DELTAS),
                "{:?} from {api:?}: {response:?}",
                T::API
            );
            let back = read_back(T::API, &out).unwrap();
            assert_eq!(back.request_id.as_deref(), Some("id"));
            assert_eq!(
                ModelResponse {
                    request_id: last.request_id.clone(),
                    ..back
                },
                carried(T::API, &last),
                "{:?} from {api:?}",
                T::API
            );
        }
    }
}

/// The stream starts once, showing the model given.
fn the_start_shows_the_model_given<T: Subject>() {
    let mut writer = T::writer("id", "asked-for", 999);
    let start = writer.start();
    let first: Value = serde_json::from_str(&start[0].data).unwrap();
    assert_eq!(first.pointer(T::MODEL), Some(&Value::from("asked-for")));
    assert!(writer.start().is_empty(), "the stream starts once");
}

/// A response from an upstream that does not stream is written whole at
/// the finish, which starts the stream when nothing did.
fn a_response_that_did_not_stream<T: Subject>() {
    for (response, _) in streamed_cases() {
        let mut writer = T::writer("id", &response.model, response.usage.input_tokens);
        let mut out = writer.start();
        out.extend(writer.finish(&response));
        assert_eq!(out, T::stream_events(&response, "id"));
        let mut writer = T::writer("id", &response.model, response.usage.input_tokens);
        assert_eq!(writer.finish(&response), out);
        T::check(&out);
        assert_eq!(read_back(T::API, &out).unwrap(), carried(T::API, &response));
    }
}

/// What did not stream (the rest of a block, blocks never begun) is
/// written at the finish, as if it had streamed.
fn what_did_not_stream<T: Subject>() {
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
        let mut writer = T::writer("id", &response.model, response.usage.input_tokens);
        let out = written(&mut writer, &events, &response);
        T::check(&out);
        assert_eq!(
            merged(&out, T::DELTAS),
            merged(&T::stream_events(&response, "id"), T::DELTAS)
        );
        assert_eq!(read_back(T::API, &out).unwrap(), carried(T::API, &response));
    }
}

/// Pieces the final response contradicts still make a whole stream,
/// ending with the final response's stop reason and usage.
fn a_response_that_contradicts_the_stream<T: Subject>() {
    let response = rich_response(StopReason::ToolUse);
    for events in contradicting() {
        let mut writer = T::writer("id", "model-x", 1);
        let out = written(&mut writer, &events, &response);
        T::check(&out);
        let back = read_back(T::API, &out).unwrap();
        assert_eq!(back.stop_reason, response.stop_reason, "{events:?}");
        assert_eq!(back.usage, response.usage, "{events:?}");
    }
}

/// A failure after the stream began ends it in the format's error, which
/// its parser reads as the failure; nothing comes after the end.
fn a_failure_after_the_start<T: Subject>() {
    let mut writer = T::writer("id", "m", 10);
    let mut out = writer.start();
    out.extend(writer.event(&StreamEvent::TextDelta {
        index: 0,
        text: "Hi".into(),
    }));
    let failed = writer.fail(&rate_limited());
    assert!(!failed.is_empty());
    out.extend(failed);
    assert!(matches!(
        read_back(T::API, &out),
        Err(ModelError::RateLimited { .. })
    ));
    assert!(
        writer
            .finish(&rich_response(StopReason::EndTurn))
            .is_empty()
    );
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

/// The shared tests, one module a format.
macro_rules! writer_tests {
    ($($format:ident: $writer:ty;)*) => {$(
        mod $format {
            #[test]
            fn pieces_as_they_come_give_the_stream_of_the_final_response() {
                super::pieces_as_they_come::<$writer>();
            }

            #[test]
            fn the_start_shows_the_model_given() {
                super::the_start_shows_the_model_given::<$writer>();
            }

            #[test]
            fn a_response_that_did_not_stream_is_written_whole_at_the_finish() {
                super::a_response_that_did_not_stream::<$writer>();
            }

            #[test]
            fn what_did_not_stream_is_written_at_the_finish() {
                super::what_did_not_stream::<$writer>();
            }

            #[test]
            fn a_response_that_contradicts_the_stream_still_ends_it_well() {
                super::a_response_that_contradicts_the_stream::<$writer>();
            }

            #[test]
            fn a_failure_after_the_start_ends_the_stream() {
                super::a_failure_after_the_start::<$writer>();
            }
        }
    )*};
}

writer_tests! {
    chat: crate::dialect::chat::ChatWriter;
    responses: crate::dialect::responses::ResponsesWriter;
    anthropic: crate::dialect::anthropic::AnthropicWriter;
}
