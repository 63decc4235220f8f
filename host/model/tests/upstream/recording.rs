//! Recording a conversation against the real server, then replaying it
//! offline.

use std::sync::Arc;

use hane_model::{
    Api, Content, Message, ModelAdapter, ModelError, Recorder, ReplayAdapter, Role, StopReason,
};

use super::{adapter, tool_request};

#[tokio::test]
async fn a_recorded_conversation_replays_offline_and_a_changed_one_fails_where_it_differs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conversation.json");
    let recorder = Recorder::new(adapter(Api::AnthropicMessages, true), &path);

    // Turn 1: the model calls the tool. Turn 2: its result comes back.
    let mut request = tool_request(Api::AnthropicMessages);
    let first = recorder.send(&request, None).await.unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse, "{first:?}");
    let (call_id, _, _) = first
        .message()
        .tool_calls()
        .next()
        .map(|(a, b, c)| (a.to_owned(), b, c.clone()))
        .unwrap();
    request.messages.pop(); // the prefill
    request.messages.push(first.message());
    request.messages.push(Message {
        role: Role::User,
        content: vec![Content::ToolResult {
            call_id: call_id.clone(),
            content: "run r-1: sunny, 21 °C".into(),
            is_error: false,
        }],
    });
    request.tool_choice = hane_model::ToolChoice::Auto;
    request.stop.clear();
    request.max_output_tokens = Some(16);
    let second = recorder.send(&request, None).await.unwrap();

    // Offline: the same requests get the same answers, usage included, even
    // with what varies between runs changed (here a tool result's content
    // and the system text).
    let replay = Arc::new(ReplayAdapter::open(&path).unwrap());
    assert_eq!(replay.recording().turns.len(), 2);
    let first_request = tool_request(Api::AnthropicMessages);
    assert_eq!(replay.send(&first_request, None).await.unwrap(), first);
    let mut varied = request.clone();
    varied.system = Some("another system prompt".into());
    varied.messages[2].content[0] = Content::ToolResult {
        call_id,
        content: "run r-2: sunny, 21 °C".into(),
        is_error: false,
    };
    assert_eq!(replay.send(&varied, None).await.unwrap(), second);
    // Replayed again, in another order: each request finds its own turn.
    assert_eq!(replay.send(&varied, None).await.unwrap(), second);
    assert_eq!(replay.send(&first_request, None).await.unwrap(), first);
    assert_eq!(replay.replayed(), 4);

    // A changed behaviour: the assistant answered with text instead. The
    // closest turn is the second, which shares the task.
    let mut changed = request.clone();
    changed.messages[1] = Message::assistant("It is sunny.");
    match replay.send(&changed, None).await.unwrap_err() {
        ModelError::RecordingMismatch {
            turn,
            place,
            detail,
            ..
        } => {
            assert_eq!(turn, 2);
            assert_eq!(place, "messages[1].content[0]");
            assert_eq!(detail, "recorded a tool_call to get_weather, got text");
        }
        other => panic!("{other:?}"),
    }
}
