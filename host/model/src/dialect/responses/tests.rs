//! Responses: its request and response both ways, its stream parsed,
//! and what only its writer does (the shared writer tests are in
//! `dialect::tests::writer`).

use serde_json::{Value, json};

use super::*;
use crate::dialect::tests::writer::{Subject, written};
use crate::dialect::tests::{
    call, contradicting, json, openai_responses, parse_sse, rate_limited, read_back, rich_request,
    rich_response, text, upstream,
};
use crate::dialect::{SseOut, encode};
use crate::{
    Api, Content, ModelError, ModelResponse, Role, StopReason, StreamEvent, ToolChoice, WireOptions,
};

#[test]
fn a_request_round_trips_through_the_outbound_format_except_is_error() {
    // The Responses API has no stop sequences (the outbound side
    // refuses them).
    let mut request = rich_request();
    request.stop.clear();
    for stream in [false, true] {
        let options = WireOptions {
            stream,
            parallel_tool_calls: None,
        };
        let body = request_body(&request, &options).unwrap();
        let inbound = parse_request(&body).unwrap();
        assert_eq!(inbound.stream, stream);
        // A call output has no is_error.
        let mut expected = request.clone();
        let Content::ToolResult { is_error, .. } = &mut expected.messages[2].content[1] else {
            panic!("the fixture changed");
        };
        *is_error = false;
        assert_eq!(inbound.request, expected);
    }
}

#[test]
fn what_clients_send_is_accepted() {
    let body = json!({
        "model": "m",
        "instructions": "A",
        "input": [
            {"role": "developer", "content": "B"},
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "xx"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""},
            {"type": "function_call_output", "call_id": "c1",
             "output": [{"type": "input_text", "text": "ok"}]},
        ],
        "tools": [{"type": "function", "name": "f", "strict": false,
            "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "f"},
        "max_output_tokens": 99,
        "store": false,
        "parallel_tool_calls": true,
        "reasoning": {"effort": "low", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "metadata": {"a": "b"},
        "user": "u",
        "text": {"format": {"type": "text"}, "verbosity": "low"},
        "stream": true,
    });
    let inbound = parse_request(&body).unwrap();
    assert!(inbound.stream);
    let r = inbound.request;
    assert_eq!(r.system.as_deref(), Some("A\n\nB"));
    assert_eq!(r.messages.len(), 3);
    assert_eq!(r.messages[1].role, Role::Assistant);
    assert_eq!(
        r.messages[2].content,
        vec![Content::ToolResult {
            call_id: "c1".into(),
            content: "ok".into(),
            is_error: false
        }]
    );
    assert_eq!(r.tool_choice, ToolChoice::Tool { name: "f".into() });
    assert_eq!(r.max_output_tokens, Some(99));
    let inbound = parse_request(&json!({"model": "m", "input": "hello"})).unwrap();
    assert_eq!(
        inbound.request.messages,
        vec![crate::Message::user("hello")]
    );
}

#[test]
fn what_cannot_be_translated_is_refused_where_it_is() {
    let base = json!({"model": "m", "input": "hi"});
    let with = |key: &str, value: Value| {
        let mut body = base.clone();
        body[key] = value;
        parse_request(&body).unwrap_err().pointer
    };
    assert_eq!(
        with("tools", json!([{"type": "web_search"}])),
        "/tools/0/type"
    );
    assert_eq!(
        with("tool_choice", json!({"type": "web_search_preview"})),
        "/tool_choice/type"
    );
    assert_eq!(
        with("previous_response_id", json!("resp_1")),
        "/previous_response_id"
    );
    assert_eq!(with("background", json!(true)), "/background");
    assert_eq!(
        with(
            "text",
            json!({"format": {"type": "json_schema", "schema": {}}})
        ),
        "/text/format/type"
    );
    assert_eq!(with("input", json!(3)), "/input");
    let input = |input: Value| {
        parse_request(&json!({"model": "m", "input": input}))
            .unwrap_err()
            .pointer
    };
    assert_eq!(
        input(json!([{"role": "user", "content": [
            {"type": "input_text", "text": "a"}, {"type": "input_file", "file_id": "f"}]}])),
        "/input/0/content/1/type"
    );
    assert_eq!(
        input(json!([{"role": "user", "content": [
            {"type": "input_image", "image_url": "https://x/y.png"}]}])),
        "/input/0/content/0/image_url"
    );
    assert_eq!(
        input(json!([{"type": "function_call_output", "call_id": "c9", "output": "x"}])),
        "/input/0/call_id"
    );
    assert_eq!(
        input(
            json!([{"type": "function_call", "call_id": "c", "name": "f",
            "arguments": "\"x\""}])
        ),
        "/input/0/arguments"
    );
    assert_eq!(
        input(json!([{"type": "web_search_call", "id": "w"}])),
        "/input/0/type"
    );
}

#[test]
fn a_response_body_parses_back() {
    for (reason, response) in openai_responses() {
        let body = response_body(&response, "id");
        assert_eq!(body["object"], "response");
        assert_eq!(parse_response(&body).unwrap(), response, "{reason:?}");
    }
    let body = response_body(&rich_response(StopReason::MaxTokens), "id");
    assert_eq!(body["status"], "incomplete");
    assert_eq!(body["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(body["usage"]["input_tokens_details"]["cached_tokens"], 1024);
    assert_eq!(body["usage"]["total_tokens"], 1280);
    assert_eq!(body["output"][1]["call_id"], "call_a");
    // A stop sequence reads back as the end of a turn: the format
    // tells them not apart.
    let mut response = rich_response(StopReason::StopSequence);
    response.content.truncate(1);
    let back = parse_response(&response_body(&response, "id")).unwrap();
    assert_eq!(back.stop_reason, StopReason::EndTurn);
}

#[test]
fn the_stream_assembles_the_response() {
    for (reason, mut response) in openai_responses() {
        // Two text blocks around a call: separate items and parts.
        response.content.push(Content::text("And one more thing."));
        let events = stream_events(&response, "id");
        for (n, event) in events.iter().enumerate() {
            let data: Value = serde_json::from_str(&event.data).unwrap();
            assert_eq!(data["sequence_number"], n);
            assert_eq!(Some(data["type"].as_str().unwrap()), event.event.as_deref());
        }
        assert_eq!(events[0].event.as_deref(), Some("response.created"));
        assert_eq!(events[1].event.as_deref(), Some("response.in_progress"));
        let mut stream = ResponsesStream::new(None);
        let mut done = false;
        for event in parse_sse(&encode(&events)) {
            assert!(!done, "an event after the end");
            done = stream.event(&event).unwrap();
        }
        assert!(done);
        let back = stream.finish().unwrap();
        if reason == StopReason::EndTurn {
            // Text blocks in a row are one streamed part each; the
            // stream keeps them apart as well.
            assert_eq!(back.content.len(), 2);
        }
        assert_eq!(back, response, "{reason:?}");
    }
}

impl Subject for ResponsesWriter {
    const API: Api = Api::Responses;
    const DELTAS: &'static [&'static str] = &["/delta"];
    const MODEL: &'static str = "/response/model";

    fn writer(id: &str, model: &str, input_tokens: u64) -> Self {
        ResponsesWriter::new(id, model, input_tokens)
    }

    fn stream_events(response: &ModelResponse, id: &str) -> Vec<SseOut> {
        stream_events(response, id)
    }

    fn check(out: &[SseOut]) {
        check(out);
    }
}

/// Checks that `out` is a whole stream: numbered, started, items and
/// parts one at a time and numbered from 0, deltas inside them, ended
/// by the response whose items are the ones streamed. Returns that
/// response.
fn check(out: &[SseOut]) -> Value {
    let data: Vec<Value> = out
        .iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    for (n, (event, data)) in out.iter().zip(&data).enumerate() {
        assert_eq!(data["sequence_number"], n);
        assert_eq!(Some(data["type"].as_str().unwrap()), event.event.as_deref());
    }
    assert_eq!(data[0]["type"], "response.created");
    assert_eq!(data[1]["type"], "response.in_progress");
    let last = &data[data.len() - 1];
    assert!(
        last["type"] == "response.completed" || last["type"] == "response.incomplete",
        "{last}"
    );
    let mut ids = Vec::new();
    let mut item: Option<(u64, String, bool)> = None;
    let mut part: Option<u64> = None;
    let mut parts = 0;
    for data in &data[2..data.len() - 1] {
        let kind = data["type"].as_str().unwrap();
        let at = |item: &Option<(u64, String, bool)>, call: bool| {
            let (index, id, is_call) = item.as_ref().expect("an event outside an item");
            assert_eq!(data["output_index"], *index);
            if kind != "response.output_item.done" {
                assert_eq!(data["item_id"], id.as_str());
            }
            assert_eq!(*is_call, call, "{kind} in the wrong item");
        };
        match kind {
            "response.output_item.added" => {
                assert!(item.is_none(), "an item added inside another");
                assert_eq!(data["output_index"], ids.len());
                let id = data["item"]["id"].as_str().unwrap().to_owned();
                ids.push(id.clone());
                item = Some((
                    ids.len() as u64 - 1,
                    id,
                    data["item"]["type"] == "function_call",
                ));
                parts = 0;
            }
            "response.content_part.added" => {
                at(&item, false);
                assert!(part.is_none());
                assert_eq!(data["content_index"], parts);
                part = Some(parts);
                parts += 1;
            }
            "response.output_text.delta" | "response.output_text.done" => {
                at(&item, false);
                assert_eq!(data["content_index"], part.expect("text outside a part"));
            }
            "response.content_part.done" => {
                at(&item, false);
                assert_eq!(data["content_index"], part.take().expect("no part open"));
            }
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                at(&item, true)
            }
            "response.output_item.done" => {
                let call = data["item"]["type"] == "function_call";
                at(&item, call);
                assert!(part.is_none(), "an item done with a part open");
                assert_eq!(data["item"]["id"], item.take().unwrap().1.as_str());
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert!(item.is_none(), "an item left open");
    let response = last["response"].clone();
    for output in response["output"].as_array().unwrap() {
        assert!(ids.iter().any(|id| output["id"] == id.as_str()), "{output}");
    }
    response
}

#[test]
fn the_final_response_wins_in_what_closes_the_stream() {
    let response = rich_response(StopReason::ToolUse);
    let final_output = response_body(&response, "id")["output"].clone();
    // The final response wins in what closes the stream, where the
    // streamed blocks line up with its blocks.
    let lined_up = [
        // Text the final text does not extend.
        vec![text(0, "Hello wor")],
        // Calls with other ids, names and arguments.
        vec![
            text(0, "Checking"),
            call(1, "call_z"),
            json(1, "{\"x\":"),
            call(2, "call_y"),
        ],
    ];
    for (n, events) in lined_up.into_iter().enumerate() {
        let mut writer = ResponsesWriter::new("id", "model-x", 0);
        let out = written(&mut writer, &events, &response);
        let done = check(&out);
        assert_eq!(done["output"], final_output);
        if n == 0 {
            // The text was still open: its done event has the final
            // text (the second case's was done when the call began).
            let text_done = out
                .iter()
                .find(|e| e.event.as_deref() == Some("response.output_text.done"))
                .unwrap();
            let text_done: Value = serde_json::from_str(&text_done.data).unwrap();
            assert_eq!(text_done["text"], final_output[0]["content"][0]["text"]);
        }
        read_back(Api::Responses, &out).unwrap();
    }
    for events in contradicting() {
        let mut writer = ResponsesWriter::new("id", "model-x", 0);
        let out = written(&mut writer, &events, &response);
        let done = check(&out);
        // Only blocks the final response has.
        assert_eq!(done["output"].as_array().unwrap().len(), 3, "{done}");
        let back = read_back(Api::Responses, &out).unwrap();
        assert_eq!(back.usage, response.usage);
    }
}

#[test]
fn a_piece_of_an_item_done_already_is_in_the_completed_response() {
    // Chat Completions has one text: text after a tool call extends
    // the first block, whose item is done by then.
    let mut response = rich_response(StopReason::ToolUse);
    response.content.truncate(2);
    response.content.push(Content::text(" Then more."));
    let (events, last) = upstream(Api::ChatCompletions, &response);
    assert_eq!(last.content.len(), 2);
    let mut writer = ResponsesWriter::new("id", "model-x", 0);
    let out = written(&mut writer, &events, &last);
    let done = check(&out);
    assert_eq!(done, response_body(&last, "id"));
}

#[test]
fn a_failure_after_the_start_is_an_error_and_a_failed_response() {
    let mut writer = ResponsesWriter::new("resp_1", "m", 10);
    let mut out = writer.start();
    out.extend(writer.event(&StreamEvent::TextDelta {
        index: 0,
        text: "Hi".into(),
    }));
    let failed = writer.fail(&rate_limited());
    let names: Vec<_> = failed.iter().map(|e| e.event.as_deref().unwrap()).collect();
    assert_eq!(names, ["error", "response.failed"]);
    let error: Value = serde_json::from_str(&failed[0].data).unwrap();
    // What the openai SDK raises: an `error` event with an `error`
    // object that has a message.
    assert_eq!(error["error"], error_body(&rate_limited()).1["error"]);
    assert_eq!(
        error["error"]["message"],
        "rate limited by the provider: slow down"
    );
    assert_eq!(error["message"], error["error"]["message"]);
    assert_eq!(error["code"], "rate_limit_exceeded");
    // What Codex reads: the failed response's error.
    let failed_response: Value = serde_json::from_str(&failed[1].data).unwrap();
    assert_eq!(failed_response["response"]["status"], "failed");
    assert_eq!(failed_response["response"]["id"], "resp_1");
    assert_eq!(
        failed_response["response"]["error"]["code"],
        "rate_limit_exceeded"
    );
    out.extend(failed);
    for (n, event) in out.iter().enumerate() {
        let data: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(data["sequence_number"], n);
    }
    assert!(matches!(
        read_back(Api::Responses, &out),
        Err(ModelError::RateLimited { .. })
    ));
    // Each of the two events alone reads as the error.
    for one in &out[out.len() - 2..] {
        let mut stream = ResponsesStream::new(None);
        let event = &parse_sse(&encode(std::slice::from_ref(one)))[0];
        assert!(matches!(
            stream.event(event),
            Err(ModelError::RateLimited { .. })
        ));
    }
}
