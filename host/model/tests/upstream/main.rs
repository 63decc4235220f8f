//! hane-model against a real model server: llama.cpp's own HTTP server on
//! loopback (see `hane_test_support::llama`), in each of the three APIs,
//! streamed and not. The model is tiny, so the tests assert on structure,
//! never on wording.

mod apis;
mod errors;
mod recording;

use std::sync::Arc;
use std::time::Duration;

use hane_core::credential::Secret;
use hane_model::{
    AdapterConfig, Api, Content, Message, ModelAdapter, ModelRequest, Role, ToolChoice, ToolSpec,
};
use hane_test_support::llama::LlamaServer;

/// Every API, streamed and not.
const MODES: [(Api, bool); 6] = [
    (Api::ChatCompletions, true),
    (Api::ChatCompletions, false),
    (Api::Responses, true),
    (Api::Responses, false),
    (Api::AnthropicMessages, true),
    (Api::AnthropicMessages, false),
];

fn server() -> &'static LlamaServer {
    LlamaServer::shared()
}

fn config(api: Api, stream: bool) -> AdapterConfig {
    let server = server();
    let mut config = AdapterConfig::new(api, format!("{}/v1", server.base_url()));
    config.credential = Some(Secret::new(server.api_key()));
    config.stream = stream;
    config.timeout = Duration::from_secs(120);
    config.parallel_tool_calls = Some(false);
    config
}

fn adapter(api: Api, stream: bool) -> Arc<dyn ModelAdapter> {
    hane_model::adapter(config(api, stream)).unwrap()
}

/// A short answer in plain text.
fn text_request() -> ModelRequest {
    let mut request = ModelRequest::new(server().model());
    request.system = Some("You are terse.".into());
    request.messages.push(Message::user("Say hello."));
    request.temperature = Some(0.0);
    request.max_output_tokens = Some(16);
    request
}

/// One tool, and the answer begun as a call: the way this small model
/// reliably calls a tool (see `hane_test_support::llama`).
fn tool_request(api: Api) -> ModelRequest {
    let mut request = ModelRequest::new(server().model());
    request.tools.push(ToolSpec {
        name: "get_weather".into(),
        description: "The current weather in a city.".into(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }),
    });
    request.tool_choice = ToolChoice::Required;
    request
        .messages
        .push(Message::user("What is the weather in Paris?"));
    request.messages.push(Message {
        role: Role::Assistant,
        content: vec![Content::text("<tool_call>\n")],
    });
    request.temperature = Some(0.0);
    request.max_output_tokens = Some(64);
    // The Responses API has no stop sequences (its adapter refuses them).
    if api != Api::Responses {
        request.stop.push("</tool_call>".into());
    }
    request
}
