//! Answers a real model server gave (llama.cpp's own server, the one the
//! `upstream` tests run against, in `tests/recorded/`: each format, a
//! text answer and a forced tool call, whole and streamed) decode through
//! each format, streamed pieces adding up to the response; and a decoded
//! answer served again by hane in its format decodes the same.

use std::sync::Mutex;

use super::{carried, parse_sse, read_back};
use crate::dialect::{anthropic, chat, responses};
use crate::{Api, Content, ModelError, ModelResponse, StopReason, StreamEvent};

/// Each recorded answer: the format, what was asked for (`text` or
/// `tool`), the body, the event stream.
const RECORDED: [(Api, &str, &str, &str); 6] = [
    (
        Api::ChatCompletions,
        "text",
        include_str!("../../../tests/recorded/chat-text.json"),
        include_str!("../../../tests/recorded/chat-text.sse"),
    ),
    (
        Api::ChatCompletions,
        "tool",
        include_str!("../../../tests/recorded/chat-tool.json"),
        include_str!("../../../tests/recorded/chat-tool.sse"),
    ),
    (
        Api::Responses,
        "text",
        include_str!("../../../tests/recorded/responses-text.json"),
        include_str!("../../../tests/recorded/responses-text.sse"),
    ),
    (
        Api::Responses,
        "tool",
        include_str!("../../../tests/recorded/responses-tool.json"),
        include_str!("../../../tests/recorded/responses-tool.sse"),
    ),
    (
        Api::AnthropicMessages,
        "text",
        include_str!("../../../tests/recorded/anthropic-text.json"),
        include_str!("../../../tests/recorded/anthropic-text.sse"),
    ),
    (
        Api::AnthropicMessages,
        "tool",
        include_str!("../../../tests/recorded/anthropic-tool.json"),
        include_str!("../../../tests/recorded/anthropic-tool.sse"),
    ),
];

/// A whole answer of `api` decoded.
fn decode_body(api: Api, body: &str) -> Result<ModelResponse, ModelError> {
    let json = serde_json::from_str(body).unwrap();
    match api {
        Api::ChatCompletions => chat::parse_response(&json),
        Api::Responses => responses::parse_response(&json),
        Api::AnthropicMessages => anthropic::parse_response(&json),
    }
}

/// A streamed answer of `api` decoded, with the pieces passed on.
fn decode_stream(api: Api, body: &str) -> (ModelResponse, Vec<StreamEvent>) {
    let pieces = Mutex::new(Vec::new());
    let sink = |event: StreamEvent| pieces.lock().unwrap().push(event);
    let events = parse_sse(body);
    let mut done = false;
    macro_rules! feed {
        ($stream:expr) => {{
            let mut stream = $stream;
            for event in &events {
                assert!(!done, "{api:?}: an event after the end: {event:?}");
                done = stream.event(event).unwrap();
            }
            stream.finish().unwrap()
        }};
    }
    let response = match api {
        Api::ChatCompletions => feed!(chat::ChatStream::new(Some(&sink))),
        Api::Responses => feed!(responses::ResponsesStream::new(Some(&sink))),
        Api::AnthropicMessages => feed!(anthropic::AnthropicStream::new(Some(&sink))),
    };
    assert!(done, "{api:?}: the stream did not end");
    (response, pieces.into_inner().unwrap())
}

/// Checks what a text or tool answer must be, whatever the model said.
fn check(api: Api, asked: &str, response: &ModelResponse) {
    let what = format!("{api:?} {asked}: {response:?}");
    assert_eq!(response.model, "smollm2", "{what}");
    assert!(response.request_id.is_some(), "{what}");
    assert!(response.usage.input_tokens > 0, "{what}");
    assert!(response.usage.output_tokens > 0, "{what}");
    if asked == "text" {
        assert!(!response.text().is_empty(), "{what}");
        assert!(
            matches!(
                response.stop_reason,
                StopReason::EndTurn | StopReason::MaxTokens
            ),
            "{what}"
        );
        return;
    }
    assert_eq!(response.stop_reason, StopReason::ToolUse, "{what}");
    let calls: Vec<_> = response
        .content
        .iter()
        .filter_map(|c| match c {
            Content::ToolCall { id, name, input } => Some((id, name, input)),
            _ => None,
        })
        .collect();
    assert!(!calls.is_empty(), "{what}");
    for (id, name, input) in calls {
        assert!(!id.is_empty(), "{what}");
        assert_eq!(name, "get_weather", "{what}");
        assert!(input["city"].is_string(), "{what}");
    }
}

/// The pieces add up to the content: text deltas to the text, a start to
/// each call and its arguments to its input.
fn check_pieces(api: Api, response: &ModelResponse, pieces: &[StreamEvent]) {
    let text: String = pieces
        .iter()
        .map(|e| match e {
            StreamEvent::TextDelta { text, .. } => text.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(text, response.text(), "{api:?}");
    let starts = pieces
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolCallStart { .. }))
        .count();
    let calls = response
        .content
        .iter()
        .filter(|c| matches!(c, Content::ToolCall { .. }))
        .count();
    assert_eq!(starts, calls, "{api:?}: {pieces:?}");
}

#[test]
fn recorded_answers_decode_in_each_format() {
    for (api, asked, body, stream) in RECORDED {
        check(api, asked, &decode_body(api, body).unwrap());
        let (response, pieces) = decode_stream(api, stream);
        check(api, asked, &response);
        check_pieces(api, &response, &pieces);
    }
}

#[test]
fn recorded_answers_served_again_decode_the_same() {
    for (api, _, body, stream) in RECORDED {
        for response in [
            decode_body(api, body).unwrap(),
            decode_stream(api, stream).0,
        ] {
            let id = response.request_id.clone().unwrap_or_default();
            let (served, events) = match api {
                Api::ChatCompletions => (
                    chat::response_body(&response, &id),
                    chat::stream_events(&response, &id),
                ),
                Api::Responses => (
                    responses::response_body(&response, &id),
                    responses::stream_events(&response, &id),
                ),
                Api::AnthropicMessages => (
                    anthropic::response_body(&response, &id),
                    anthropic::stream_events(&response, &id),
                ),
            };
            let expected = carried(api, &response);
            assert_eq!(decode_body(api, &served.to_string()).unwrap(), expected);
            assert_eq!(read_back(api, &events).unwrap(), expected);
        }
    }
}
