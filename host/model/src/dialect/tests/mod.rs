//! What the formats' tests share: a rich request and response, reading
//! an event stream back through a format's own parser, what an upstream
//! streams; and the tests run for every format alike (the stream
//! writers', the round trips', the recorded answers').

mod recorded;
mod roundtrip;
pub(crate) mod writer;

use serde_json::{Value, json};

use super::sse::{SseEvent, SseParser};
use super::{Failure, SseOut, encode};
use crate::{
    Api, Content, EventSink, Message, ModelError, ModelRequest, ModelResponse, Role, StopReason,
    StreamEvent, ToolChoice, ToolSpec, Usage,
};

/// A rich request: system, user text and image, assistant text and two
/// tool calls, their results (one an error) and more user text, tools,
/// a tool choice, a cap, stop sequences and a temperature.
pub fn rich_request() -> ModelRequest {
    let mut request = ModelRequest::new("model-x");
    request.system = Some("Be brief.".into());
    request.messages = vec![
        Message {
            role: Role::User,
            content: vec![
                Content::text("What is in this picture, and what's the weather?"),
                Content::Image {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
            ],
        },
        Message {
            role: Role::Assistant,
            content: vec![
                Content::text("Let me look."),
                Content::ToolCall {
                    id: "call_1".into(),
                    name: "weather".into(),
                    input: json!({"city": "Paris", "days": 2}),
                },
                Content::ToolCall {
                    id: "call_2".into(),
                    name: "describe".into(),
                    input: json!({}),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                Content::ToolResult {
                    call_id: "call_1".into(),
                    content: "sunny, 21 °C".into(),
                    is_error: false,
                },
                Content::ToolResult {
                    call_id: "call_2".into(),
                    content: "no such image".into(),
                    is_error: true,
                },
                Content::text("Go on."),
            ],
        },
    ];
    request.tools = vec![
        ToolSpec {
            name: "weather".into(),
            description: "The weather in a city.".into(),
            input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]}),
        },
        ToolSpec {
            name: "describe".into(),
            description: "Describes the image.".into(),
            input_schema: json!({"type": "object", "properties": {}}),
        },
    ];
    request.tool_choice = ToolChoice::Tool {
        name: "weather".into(),
    };
    request.max_output_tokens = Some(512);
    request.stop = vec!["END".into(), "\n\nUser:".into()];
    request.temperature = Some(0.25);
    request
}

/// A response of text and two tool calls.
pub fn rich_response(stop_reason: StopReason) -> ModelResponse {
    ModelResponse {
        content: vec![
            Content::text("Checking the weather in two cities — één moment."),
            Content::ToolCall {
                id: "call_a".into(),
                name: "weather".into(),
                input: json!({"city": "Paris", "options": {"unit": "C", "days": [1, 2]}}),
            },
            Content::ToolCall {
                id: "call_b".into(),
                name: "weather".into(),
                input: json!({}),
            },
        ],
        stop_reason,
        usage: Usage {
            input_tokens: 1200,
            output_tokens: 80,
            cached_tokens: 1024,
        },
        model: "model-x".into(),
        request_id: Some("id".into()),
    }
}

/// The events of `body`, parsed in small chunks.
pub fn parse_sse(body: &str) -> Vec<SseEvent> {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for chunk in body.as_bytes().chunks(7) {
        events.extend(parser.push(chunk).unwrap());
    }
    events.extend(parser.finish());
    events
}

/// The formats, as upstreams and as clients.
pub const APIS: [Api; 3] = [Api::ChatCompletions, Api::Responses, Api::AnthropicMessages];

/// hane's `events` read back by the outbound parser of `api`, which
/// must see the stream end and nothing after it.
pub fn read_back(api: Api, events: &[SseOut]) -> Result<ModelResponse, ModelError> {
    assemble(api, events, None)
}

fn assemble(
    api: Api,
    events: &[SseOut],
    sink: Option<EventSink<'_>>,
) -> Result<ModelResponse, ModelError> {
    fn feed(
        events: &[SseEvent],
        mut event: impl FnMut(&SseEvent) -> Result<bool, ModelError>,
    ) -> Result<(), ModelError> {
        let mut done = false;
        for e in events {
            assert!(!done, "an event after the end: {e:?}");
            done = event(e)?;
        }
        assert!(done, "the stream did not end");
        Ok(())
    }
    let parsed = parse_sse(&encode(events));
    match api {
        Api::ChatCompletions => {
            let mut stream = crate::dialect::chat::ChatStream::new(sink);
            feed(&parsed, |e| stream.event(e))?;
            stream.finish()
        }
        Api::Responses => {
            let mut stream = crate::dialect::responses::ResponsesStream::new(sink);
            feed(&parsed, |e| stream.event(e))?;
            stream.finish()
        }
        Api::AnthropicMessages => {
            let mut stream = crate::dialect::anthropic::AnthropicStream::new(sink);
            feed(&parsed, |e| stream.event(e))?;
            stream.finish()
        }
    }
}

/// What an upstream speaking `api` streams for `response`: the pieces
/// its parser passes on, cut again into pieces of 5 characters (not
/// the pieces `stream_events` cuts), and the response it assembles.
pub fn upstream(api: Api, response: &ModelResponse) -> (Vec<StreamEvent>, ModelResponse) {
    let body = match api {
        Api::ChatCompletions => super::chat::stream_events(response, "up"),
        Api::Responses => super::responses::stream_events(response, "up"),
        Api::AnthropicMessages => super::anthropic::stream_events(response, "up"),
    };
    let events = std::sync::Mutex::new(Vec::new());
    let sink = |event: StreamEvent| events.lock().unwrap().push(event);
    let assembled = assemble(api, &body, Some(&sink)).unwrap();
    let cut = |s: &str| -> Vec<String> {
        let chars: Vec<char> = s.chars().collect();
        chars.chunks(5).map(|c| c.iter().collect()).collect()
    };
    let events = events
        .into_inner()
        .unwrap()
        .into_iter()
        .flat_map(|event| match event {
            StreamEvent::TextDelta { index, text } => cut(&text)
                .into_iter()
                .map(|text| StreamEvent::TextDelta { index, text })
                .collect(),
            StreamEvent::ToolCallDelta { index, json } => cut(&json)
                .into_iter()
                .map(|json| StreamEvent::ToolCallDelta { index, json })
                .collect(),
            other => vec![other],
        })
        .collect();
    (events, assembled)
}

/// Responses to stream, each with the upstreams that stream it without
/// interleaving blocks (Chat Completions has one text, so text after a
/// tool call goes back to it).
pub fn streamed_cases() -> Vec<(ModelResponse, Vec<Api>)> {
    let rich = rich_response(StopReason::ToolUse);
    let [text, call_a, call_b] = <[Content; 3]>::try_from(rich.content.clone()).unwrap();
    let with = |content: Vec<Content>, stop_reason| ModelResponse {
        content,
        stop_reason,
        ..rich.clone()
    };
    vec![
        (
            with(vec![text.clone(), call_a.clone()], StopReason::ToolUse),
            APIS.to_vec(),
        ),
        (
            with(vec![call_a.clone(), call_b.clone()], StopReason::ToolUse),
            APIS.to_vec(),
        ),
        (rich.clone(), APIS.to_vec()),
        (
            with(
                vec![text.clone(), Content::text(" And a second text.")],
                StopReason::MaxTokens,
            ),
            APIS.to_vec(),
        ),
        (
            with(
                vec![text, call_a, Content::text("Then more.")],
                StopReason::ToolUse,
            ),
            vec![Api::Responses, Api::AnthropicMessages],
        ),
    ]
}

/// `events` as (name, JSON) with `sequence_number` left out and the
/// deltas in a row merged: an event whose string at one of `pointers`
/// differs from the one before only there extends it.
pub fn merged(events: &[SseOut], pointers: &[&str]) -> Vec<(Option<String>, Value)> {
    let mut out: Vec<(Option<String>, Value)> = Vec::new();
    'events: for event in events {
        let mut data: Value =
            serde_json::from_str(&event.data).unwrap_or_else(|_| json!(event.data));
        if let Some(map) = data.as_object_mut() {
            map.remove("sequence_number");
        }
        for &pointer in pointers {
            let Some(more) = data.pointer(pointer).and_then(Value::as_str) else {
                continue;
            };
            let blank = |value: &Value| {
                let mut value = value.clone();
                if let Some(s) = value.pointer_mut(pointer) {
                    *s = json!("");
                }
                value
            };
            if let Some((name, last)) = out.last_mut()
                && *name == event.event
                && last.pointer(pointer).is_some_and(Value::is_string)
                && blank(last) == blank(&data)
            {
                let joined = format!("{}{more}", last.pointer(pointer).unwrap().as_str().unwrap());
                *last.pointer_mut(pointer).unwrap() = json!(joined);
                continue 'events;
            }
        }
        out.push((event.event.clone(), data));
    }
    out
}

/// The failure the in-stream error tests send.
pub fn rate_limited() -> Failure {
    Failure::Model(ModelError::RateLimited {
        retry_after: None,
        message: "slow down".into(),
    })
}

/// `response` as `api` carries it: what its body, or the stream its
/// writer writes, reads back as.
///
/// Chat Completions has one text (its blocks joined, ahead of the tool
/// calls) and says `stop` for a stop sequence as for the end of a turn,
/// which reads back as tool use when there are calls; Responses tells a
/// stop sequence and tool use from the end of a turn only by whether
/// there are calls; Anthropic Messages counts cache reads within the
/// input, so the input is never less than them.
pub fn carried(api: Api, response: &ModelResponse) -> ModelResponse {
    let mut carried = response.clone();
    let calls: Vec<Content> = response
        .content
        .iter()
        .filter(|c| matches!(c, Content::ToolCall { .. }))
        .cloned()
        .collect();
    let by_calls = if calls.is_empty() {
        StopReason::EndTurn
    } else {
        StopReason::ToolUse
    };
    match api {
        Api::ChatCompletions => {
            let text = response.text();
            carried.content = if text.is_empty() {
                calls
            } else {
                [vec![Content::text(text)], calls].concat()
            };
            if matches!(
                response.stop_reason,
                StopReason::EndTurn | StopReason::StopSequence
            ) {
                carried.stop_reason = by_calls;
            }
        }
        Api::Responses => {
            if matches!(
                response.stop_reason,
                StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse
            ) {
                carried.stop_reason = by_calls;
            }
        }
        Api::AnthropicMessages => {
            let usage = &mut carried.usage;
            usage.input_tokens = usage.input_tokens.max(usage.cached_tokens);
        }
    }
    carried
}

/// More text of block `index`.
pub fn text(index: usize, text: &str) -> StreamEvent {
    StreamEvent::TextDelta {
        index,
        text: text.into(),
    }
}

/// The start of a call `id` of the tool `other` at block `index`.
pub fn call(index: usize, id: &str) -> StreamEvent {
    StreamEvent::ToolCallStart {
        index,
        id: id.into(),
        name: "other".into(),
    }
}

/// More arguments of the call at block `index`.
pub fn json(index: usize, json: &str) -> StreamEvent {
    StreamEvent::ToolCallDelta {
        index,
        json: json.into(),
    }
}

/// Pieces that `rich_response(StopReason::ToolUse)` contradicts.
pub fn contradicting() -> Vec<Vec<StreamEvent>> {
    vec![
        // Text the final text does not extend.
        vec![text(0, "Hello wor")],
        // Calls the final response does not have.
        vec![
            text(0, "Checking"),
            call(1, "call_z"),
            json(1, "{\"x\":"),
            call(2, "call_y"),
            call(3, "call_x"),
        ],
        // A call where the final response has text, and text for it.
        vec![call(0, "call_a"), text(0, "late")],
        // Blocks interleaved, and arguments with no start.
        vec![
            text(5, "x"),
            json(2, "{"),
            text(5, "z"),
            text(7, ""),
            json(2, "}"),
        ],
    ]
}

/// The rich response for each stop reason the OpenAI formats tell apart
/// (all but a stop sequence), with text alone for the end of a turn
/// (tool calls read back as tool use, whatever the reason).
pub fn openai_responses() -> Vec<(StopReason, ModelResponse)> {
    [
        StopReason::EndTurn,
        StopReason::ToolUse,
        StopReason::MaxTokens,
        StopReason::Refusal,
    ]
    .into_iter()
    .map(|reason| {
        let mut response = rich_response(reason);
        if reason == StopReason::EndTurn {
            response.content.truncate(1);
        }
        (reason, response)
    })
    .collect()
}
