//! The normalized model request and completed response.
//!
//! They are what a provider's wire format has in common, no more: a
//! request is system text, messages, tools, a tool choice and sampling
//! caps; a response is the content the model produced, why it stopped,
//! and what it used. Anything a provider adds beyond this is dropped by its
//! adapter; anything a request asks for that a provider cannot do is
//! refused by that adapter with an error that names it.
//!
//! ```
//! use hane_model_types::{Content, Message, ModelRequest};
//!
//! let mut request = ModelRequest::new("smollm2");
//! request.system = Some("You check vehicles.".to_owned());
//! request.messages.push(Message::user("Is AB-123 in the fleet?"));
//! assert_eq!(request.messages[0].content, vec![Content::text("Is AB-123 in the fleet?")]);
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One request to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
    /// The model's name as its provider knows it.
    pub model: String,
    /// The system instructions, kept apart from the messages because
    /// providers place them differently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation, oldest first.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// The tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Whether and which tool the model must call.
    #[serde(default, skip_serializing_if = "ToolChoice::is_auto")]
    pub tool_choice: ToolChoice,
    /// The most tokens the answer may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Sequences that end the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Sampling temperature; the provider's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
}

impl ModelRequest {
    /// An empty request to `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            system: None,
            messages: Vec::new(),
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_output_tokens: None,
            stop: Vec::new(),
            temperature: None,
        }
    }
}

/// Who wrote a message. System text is [`ModelRequest::system`], not a
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person, or the host speaking for them; tool results too.
    User,
    /// The model.
    Assistant,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What it says, in order.
    pub content: Vec<Content>,
}

impl Message {
    /// A user message of one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![Content::text(text)],
        }
    }

    /// An assistant message of one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![Content::text(text)],
        }
    }

    /// The tool calls in the message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|c| match c {
            Content::ToolCall { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }

    /// The ids of the calls whose results the message carries.
    pub fn tool_results(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|c| match c {
            Content::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
    }
}

/// One block of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, inline.
    Image {
        /// Its media type, such as `image/png`.
        media_type: String,
        /// Its bytes, base64.
        data: String,
    },
    /// A call the model made (assistant messages only).
    ToolCall {
        /// The call's id, as the provider gave it; its result refers to it.
        id: String,
        /// The tool's name as the model saw it.
        name: String,
        /// The arguments, a JSON object.
        input: Value,
    },
    /// The result of a call (user messages only).
    ToolResult {
        /// The id of the call it answers.
        call_id: String,
        /// The result as text.
        content: String,
        /// Whether the call failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// Its name; providers allow `[A-Za-z0-9_-]{1,64}`.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its input, an object.
    pub input_schema: Value,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool.
    None,
    /// Some tool.
    Required,
    /// This tool.
    Tool {
        /// Its name.
        name: String,
    },
}

impl ToolChoice {
    fn is_auto(&self) -> bool {
        *self == ToolChoice::Auto
    }
}

/// A model's completed answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelResponse {
    /// What the model produced: [`Content::Text`] and [`Content::ToolCall`]
    /// blocks, in order.
    pub content: Vec<Content>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// What the request used, as the provider reported it.
    pub usage: Usage,
    /// The model that answered, as the provider named it.
    pub model: String,
    /// The provider's id of the request or response, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ModelResponse {
    /// The response's text blocks, joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The assistant message the response adds to a conversation.
    pub fn message(&self) -> Message {
        Message {
            role: Role::Assistant,
            content: self.content.clone(),
        }
    }
}

/// Why a model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It called one or more tools and waits for their results.
    ToolUse,
    /// It reached the output token cap.
    MaxTokens,
    /// It produced one of the request's stop sequences.
    StopSequence,
    /// It refused, or the provider's filter stopped it.
    Refusal,
}

impl StopReason {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::Refusal => "refusal",
        }
    }
}

/// Tokens one request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Tokens of the input, cached ones included.
    pub input_tokens: u64,
    /// Tokens of the answer.
    pub output_tokens: u64,
    /// Of the input tokens, those the provider read from its cache.
    #[serde(default)]
    pub cached_tokens: u64,
}

impl Usage {
    /// Input and output tokens: what a run's `maxModelTokens` and the
    /// day's `modelTokensPerDay` count.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_tagged_by_type() {
        let json = serde_json::to_value(Content::ToolResult {
            call_id: "c1".to_owned(),
            content: "ok".to_owned(),
            is_error: false,
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type": "tool_result", "call_id": "c1", "content": "ok"})
        );
    }
}
