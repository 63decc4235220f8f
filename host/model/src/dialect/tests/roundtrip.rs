//! Property tests: any normalized request survives being encoded by the
//! client side of a format and decoded by its server side, and any
//! normalized response survives the server side's body and event stream
//! read back by the client side, in each format. What a format cannot
//! carry is taken out first by the normalization the test names
//! ([`request_carried`], [`carried`]: a format's stream carries what its
//! body does), never by comparing less.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::{carried, read_back};
use crate::dialect::{anthropic, chat, responses};
use crate::{
    Api, Content, Message, ModelRequest, ModelResponse, Role, StopReason, ToolChoice, ToolSpec,
    Usage, WireOptions,
};

/// Text as a model or a person writes it, never empty (an empty text
/// block is not a block the formats keep).
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,!?'\"{}é€\n-]{1,24}"
}

/// A tool's name. Names of the form `mcp__{server}__{tool}` are left out:
/// the Responses server side answers them as a namespaced call, which the
/// gateway's own tests cover.
fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_.]{0,11}".prop_filter("an MCP tool's joined name", |n| !n.starts_with("mcp__"))
}

/// A JSON object, as tool call arguments and input schemas are (no
/// floats: their text is not always read back to the same bits).
fn object() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1_000_000i64..1_000_000).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(2, 8, 3, |inner| {
        prop::collection::vec(inner, 0..3).prop_map(Value::Array)
    });
    prop::collection::btree_map("[a-z_]{1,8}", value, 0..4)
        .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>()))
}

/// A tool call with an id, a name and object arguments.
fn tool_call() -> impl Strategy<Value = Content> {
    ("[a-zA-Z0-9_]{1,12}", name(), object()).prop_map(|(id, name, input)| Content::ToolCall {
        id,
        name,
        input,
    })
}

/// A user's own block: text or an image.
fn user_block() -> impl Strategy<Value = Content> {
    prop_oneof![
        3 => text().prop_map(Content::text),
        1 => ("image/(png|jpeg)", "[A-Za-z0-9+/]{4,16}")
            .prop_map(|(media_type, data)| Content::Image { media_type, data }),
    ]
}

/// An assistant's block: text or a tool call.
fn assistant_block() -> impl Strategy<Value = Content> {
    prop_oneof![text().prop_map(Content::text), tool_call()]
}

/// A conversation: user and assistant in turn, each user message after
/// the first answering every call of the assistant message before it
/// (results first, as clients send them), then its own blocks.
fn messages() -> impl Strategy<Value = Vec<Message>> {
    let turn = (
        prop::collection::vec(user_block(), 1..3),
        prop::collection::vec(("[a-zA-Z0-9 ]{0,12}", any::<bool>()), 0..3),
        prop::collection::vec(assistant_block(), 1..4),
    );
    (prop::collection::vec(turn, 1..4), any::<bool>()).prop_map(|(turns, end_with_user)| {
        let mut messages: Vec<Message> = Vec::new();
        for (own, results, answer) in turns {
            let calls: Vec<String> = messages
                .last()
                .into_iter()
                .flat_map(|m| &m.content)
                .filter_map(|c| match c {
                    Content::ToolCall { id, .. } => Some(id.clone()),
                    _ => None,
                })
                .collect();
            let mut content: Vec<Content> = calls
                .into_iter()
                .zip(results.into_iter().cycle())
                .map(|(call_id, (content, is_error))| Content::ToolResult {
                    call_id,
                    content,
                    is_error,
                })
                .collect();
            content.extend(own);
            messages.push(Message {
                role: Role::User,
                content,
            });
            messages.push(Message {
                role: Role::Assistant,
                content: answer,
            });
        }
        if !end_with_user {
            return messages;
        }
        messages.push(Message::user("Go on."));
        messages
    })
}

/// A tool offered.
fn tool() -> impl Strategy<Value = ToolSpec> {
    (name(), "[a-zA-Z .]{0,24}", object()).prop_map(|(name, description, input_schema)| ToolSpec {
        name,
        description,
        input_schema,
    })
}

/// A request with everything the normalized request has.
fn request() -> impl Strategy<Value = ModelRequest> {
    let choice = prop_oneof![
        Just(ToolChoice::Auto),
        Just(ToolChoice::None),
        Just(ToolChoice::Required),
        name().prop_map(|name| ToolChoice::Tool { name }),
    ];
    (
        "[a-z0-9.-]{1,12}",
        prop::option::of("[a-zA-Z .\n]{0,24}"),
        messages(),
        (prop::collection::vec(tool(), 0..3), choice),
        prop::option::of(1u64..100_000),
        prop::collection::vec("[A-Z<>/\n]{1,6}", 0..3),
        prop::option::of((0u32..=200).prop_map(|n| f64::from(n) / 100.0)),
    )
        .prop_map(
            |(model, system, messages, (tools, tool_choice), max, stop, temperature)| {
                let mut request = ModelRequest::new(model);
                request.system = system;
                request.messages = messages;
                request.tools = tools;
                request.tool_choice = tool_choice;
                request.max_output_tokens = max;
                request.stop = stop;
                request.temperature = temperature;
                request
            },
        )
}

/// How the client side sends a request.
fn options() -> impl Strategy<Value = WireOptions> {
    (any::<bool>(), prop::option::of(any::<bool>())).prop_map(|(stream, parallel_tool_calls)| {
        WireOptions {
            stream,
            parallel_tool_calls,
        }
    })
}

/// A response: text and tool calls in any order, any stop reason and
/// usage.
fn response() -> impl Strategy<Value = ModelResponse> {
    let stop = prop_oneof![
        Just(StopReason::EndTurn),
        Just(StopReason::ToolUse),
        Just(StopReason::MaxTokens),
        Just(StopReason::StopSequence),
        Just(StopReason::Refusal),
    ];
    let count = || 0u64..1_000_000;
    (
        prop::collection::vec(assistant_block(), 0..5),
        stop,
        (count(), count(), count()),
        "[a-z0-9.-]{1,12}",
    )
        .prop_map(
            |(content, stop_reason, (input, output, cached), model)| ModelResponse {
                content,
                stop_reason,
                usage: Usage {
                    input_tokens: input,
                    output_tokens: output,
                    cached_tokens: cached,
                },
                model,
                request_id: None,
            },
        )
}

/// `request` as `api` carries it: what its server side decodes from what
/// its client side encodes.
///
/// No format sends a tool choice without tools, so it is `auto` then.
/// Chat Completions has no tool result `is_error` and one text per
/// assistant message (its blocks joined, ahead of the calls); Responses
/// has no `is_error` either, and no stop sequences (the client side
/// refuses them, so they are taken out before encoding); Anthropic
/// Messages requires an output cap, [`anthropic::DEFAULT_MAX_TOKENS`]
/// when the request sets none.
fn request_carried(api: Api, request: &ModelRequest) -> ModelRequest {
    let mut carried = request.clone();
    if carried.tools.is_empty() {
        carried.tool_choice = ToolChoice::Auto;
    }
    let no_is_error = |message: &mut Message| {
        for block in &mut message.content {
            if let Content::ToolResult { is_error, .. } = block {
                *is_error = false;
            }
        }
    };
    match api {
        Api::ChatCompletions => {
            for message in &mut carried.messages {
                no_is_error(message);
                if message.role == Role::Assistant {
                    let (texts, calls): (Vec<Content>, Vec<Content>) = message
                        .content
                        .drain(..)
                        .partition(|c| matches!(c, Content::Text { .. }));
                    let text: String = texts
                        .iter()
                        .filter_map(|c| match c {
                            Content::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect();
                    let joined = Some(Content::text(text)).filter(|t| t != &Content::text(""));
                    message.content = joined.into_iter().chain(calls).collect();
                }
            }
        }
        Api::Responses => {
            carried.stop.clear();
            carried.messages.iter_mut().for_each(no_is_error);
        }
        Api::AnthropicMessages => {
            carried.max_output_tokens = Some(
                carried
                    .max_output_tokens
                    .unwrap_or(anthropic::DEFAULT_MAX_TOKENS),
            );
        }
    }
    carried
}

/// The client side's body for `request`, decoded by the server side.
fn request_round_trip(
    api: Api,
    request: &ModelRequest,
    options: &WireOptions,
) -> (ModelRequest, bool) {
    let (body, inbound) = match api {
        Api::ChatCompletions => {
            let body = chat::request_body(request, options).unwrap();
            (body.clone(), chat::parse_request(&body))
        }
        Api::Responses => {
            let body = responses::request_body(request, options).unwrap();
            (body.clone(), responses::parse_request(&body))
        }
        Api::AnthropicMessages => {
            let body = anthropic::request_body(request, options).unwrap();
            (body.clone(), anthropic::parse_request(&body))
        }
    };
    let inbound = inbound.unwrap_or_else(|e| panic!("{api:?} refused its own {body}: {e}"));
    (inbound.request, inbound.stream)
}

/// The server side's body for `response`, decoded by the client side.
fn response_round_trip(api: Api, response: &ModelResponse, id: &str) -> ModelResponse {
    let decoded = match api {
        Api::ChatCompletions => chat::parse_response(&chat::response_body(response, id)),
        Api::Responses => responses::parse_response(&responses::response_body(response, id)),
        Api::AnthropicMessages => {
            anthropic::parse_response(&anthropic::response_body(response, id))
        }
    };
    decoded.unwrap()
}

/// The server side's event stream for `response`, read back by the
/// client side.
fn stream_round_trip(api: Api, response: &ModelResponse, id: &str) -> ModelResponse {
    let events = match api {
        Api::ChatCompletions => chat::stream_events(response, id),
        Api::Responses => responses::stream_events(response, id),
        Api::AnthropicMessages => anthropic::stream_events(response, id),
    };
    read_back(api, &events).unwrap()
}

proptest! {
    #[test]
    fn any_request_survives_each_format(request in request(), options in options()) {
        for api in super::APIS {
            let mut sent = request.clone();
            if api == Api::Responses && !sent.stop.is_empty() {
                prop_assert!(responses::request_body(&sent, &options).is_err());
                sent.stop.clear();
            }
            let (decoded, stream) = request_round_trip(api, &sent, &options);
            prop_assert_eq!(stream, options.stream);
            prop_assert_eq!(decoded, request_carried(api, &request), "{:?}", api);
        }
    }

    #[test]
    fn any_response_survives_each_format(response in response(), id in "[a-zA-Z0-9_-]{1,16}") {
        for api in super::APIS {
            let expected = ModelResponse {
                request_id: Some(id.clone()),
                ..response.clone()
            };
            prop_assert_eq!(
                response_round_trip(api, &response, &id),
                carried(api, &expected),
                "{:?} body", api
            );
            prop_assert_eq!(
                stream_round_trip(api, &response, &id),
                carried(api, &expected),
                "{:?} stream", api
            );
        }
    }
}
