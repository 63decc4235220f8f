//! Text and forced tool calls, in each API, streamed and not.

use std::sync::Mutex;
use std::time::Instant;

use hane_model::{Content, StopReason, StreamEvent};

use super::{MODES, adapter, text_request, tool_request};

#[tokio::test]
async fn a_plain_text_answer_in_every_api() {
    for (api, stream) in MODES {
        let events = Mutex::new(Vec::new());
        let sink = |e: StreamEvent| events.lock().unwrap().push(e);
        let response = adapter(api, stream)
            .send(&text_request(), Some(&sink))
            .await
            .unwrap_or_else(|e| panic!("{api:?} stream={stream}: {e}"));
        let what = format!("{api:?} stream={stream}: {response:?}");
        assert!(
            matches!(
                response.stop_reason,
                StopReason::EndTurn | StopReason::MaxTokens
            ),
            "{what}"
        );
        assert!(!response.text().is_empty(), "{what}");
        assert!(response.usage.input_tokens > 0, "{what}");
        assert!(response.usage.output_tokens > 0, "{what}");
        assert!(!response.model.is_empty(), "{what}");
        let events = events.into_inner().unwrap();
        if stream {
            // The deltas add up to the text.
            let streamed: String = events
                .iter()
                .map(|e| match e {
                    StreamEvent::TextDelta { text, .. } => text.as_str(),
                    _ => "",
                })
                .collect();
            assert_eq!(streamed, response.text(), "{what}");
        } else {
            assert!(events.is_empty(), "{what}");
        }
    }
}

#[tokio::test]
async fn a_forced_tool_call_in_every_api() {
    for (api, stream) in MODES {
        let events = Mutex::new(Vec::new());
        let sink = |e: StreamEvent| events.lock().unwrap().push(e);
        let started = Instant::now();
        let response = adapter(api, stream)
            .send(&tool_request(api), Some(&sink))
            .await
            .unwrap_or_else(|e| panic!("{api:?} stream={stream}: {e}"));
        eprintln!(
            "{api:?} stream={stream}: a forced tool call in {:?}",
            started.elapsed()
        );
        let what = format!("{api:?} stream={stream}: {response:?}");
        let calls: Vec<_> = response
            .content
            .iter()
            .filter_map(|c| match c {
                Content::ToolCall { id, name, input } => Some((id, name, input)),
                _ => None,
            })
            .collect();
        assert!(!calls.is_empty(), "{what}");
        for (id, name, input) in &calls {
            assert_eq!(name.as_str(), "get_weather", "{what}");
            assert!(input.is_object(), "{what}");
            assert!(!id.is_empty(), "{what}");
        }
        assert_eq!(response.stop_reason, StopReason::ToolUse, "{what}");
        if stream {
            let events = events.into_inner().unwrap();
            let starts = events
                .iter()
                .filter(|e| matches!(e, StreamEvent::ToolCallStart { name, .. } if name == "get_weather"))
                .count();
            assert_eq!(starts, calls.len(), "{what}: {events:?}");
        }
    }
}
