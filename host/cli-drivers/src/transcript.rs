//! How a `recorded` provider answers a CLI driver's run.
//!
//! A CLI sends large requests that change from one CLI version to the
//! next: its own system prompt and reminders, its built-in tools, and
//! hane's tools under its own MCP names (`mcp__hane__data-find_record`
//! for Claude Code, and for Codex CLI, whose namespaced tools the
//! gateway joins the same way; `hane_data-find_record` for opencode).
//! [`CliTranscript`] stands in front of the recording and hands it the
//! conversation as hane sees it, so one recording serves every CLI and
//! still checks what matters:
//!
//! - hane's tools under their own names (the CLI's MCP prefix taken
//!   off), in what is offered and in the calls the model made; every
//!   other tool the CLI offers is kept under its own name, so a recording
//!   lists the CLI's own tools too and a built-in tool that was not
//!   turned off fails the match;
//! - the prompt hane wrote on the CLI's stdin, exactly, and what the
//!   model said;
//! - text blocks the CLI adds to the user's turn on its own (Claude Code's
//!   `<system-reminder>` blocks) are left out, like the system text,
//!   which recordings never pin.
//!
//! The answer's tool calls get the CLI's names back (as do the pieces of
//! a stream), so the CLI finds the tools it offered; a recorded call of a
//! tool the CLI did not offer (neither hane's nor its own) gets the CLI's
//! MCP prefix, as a model guessing at hane's other tools would write it.

use std::collections::HashMap;
use std::sync::Arc;

use hane_core::BoxFuture;
use hane_model::{
    Content, EventSink, Message, ModelAdapter, ModelError, ModelRequest, ModelResponse, Role,
    StreamEvent,
};

use crate::Cli;

/// A `recorded` provider's adapter as a CLI driver's runs see it.
#[derive(Debug)]
pub(crate) struct CliTranscript {
    prefix: &'static str,
    /// hane's names of the run's MCP tools (as `model_tool_name` makes
    /// them), which a CLI may have rewritten further.
    tools: Vec<String>,
    inner: Arc<dyn ModelAdapter>,
}

impl CliTranscript {
    /// `inner` (a recording), answering `cli`'s requests in a run whose
    /// MCP tools are `tools` (hane's names for the model).
    pub(crate) fn new(cli: Cli, tools: Vec<String>, inner: Arc<dyn ModelAdapter>) -> Self {
        Self {
            prefix: prefix(cli),
            tools,
            inner,
        }
    }

    /// hane's name of the tool a CLI calls `name`, when it is one of the
    /// run's: the CLI's prefix taken off, and its own rewriting of the
    /// characters it does not allow (Codex CLI writes `-` as `_`) undone.
    fn hane_name(&self, name: &str) -> Option<String> {
        let bare = name.strip_prefix(self.prefix)?;
        let sanitized = |t: &str| -> String {
            t.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        self.tools
            .iter()
            .find(|t| t.as_str() == bare)
            .or_else(|| self.tools.iter().find(|t| sanitized(t) == bare))
            .cloned()
            .or_else(|| Some(bare.to_owned()))
    }
}

/// The prefix `cli` gives the tools of hane's MCP server (named `hane`).
fn prefix(cli: Cli) -> &'static str {
    match cli {
        Cli::Codex | Cli::Claude => "mcp__hane__",
        Cli::Opencode => "hane_",
    }
}

/// What a CLI adds to a user's turn on its own.
fn is_cli_text(text: &str) -> bool {
    text.trim_start().starts_with("<system-reminder>")
}

/// The request as hane sees it, and the CLI's name of each hane tool.
fn normalize(
    transcript: &CliTranscript,
    request: &ModelRequest,
) -> (ModelRequest, HashMap<String, String>) {
    let mut names = HashMap::new();
    let mut normalized = request.clone();
    for tool in &mut normalized.tools {
        if let Some(hane) = transcript.hane_name(&tool.name) {
            names.insert(hane.clone(), tool.name.clone());
            tool.name = hane;
        }
    }
    normalized.messages = request
        .messages
        .iter()
        .filter_map(|message| {
            let content: Vec<Content> = message
                .content
                .iter()
                .filter(|block| {
                    !(message.role == Role::User
                        && matches!(block, Content::Text { text } if is_cli_text(text)))
                })
                .cloned()
                .map(|block| match block {
                    Content::ToolCall { id, name, input } => Content::ToolCall {
                        id,
                        name: transcript.hane_name(&name).unwrap_or(name),
                        input,
                    },
                    other => other,
                })
                .collect();
            (!content.is_empty()).then_some(Message {
                role: message.role,
                content,
            })
        })
        .collect();
    (normalized, names)
}

/// The CLI's name of the tool a recording calls `name`: the one it
/// offered, else one of hane's under the CLI's prefix.
fn rename(
    names: &HashMap<String, String>,
    offered: &[hane_model::ToolSpec],
    prefix: &str,
    name: String,
) -> String {
    if let Some(cli) = names.get(&name) {
        return cli.clone();
    }
    if offered.iter().any(|t| t.name == name) {
        return name;
    }
    format!("{prefix}{name}")
}

impl ModelAdapter for CliTranscript {
    fn send<'a>(
        &'a self,
        request: &'a ModelRequest,
        events: Option<EventSink<'a>>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let (normalized, names) = normalize(self, request);
            let sink = |event: StreamEvent| {
                let event = match event {
                    StreamEvent::ToolCallStart { index, id, name } => StreamEvent::ToolCallStart {
                        index,
                        id,
                        name: rename(&names, &request.tools, self.prefix, name),
                    },
                    other => other,
                };
                if let Some(events) = events {
                    events(event);
                }
            };
            let sink: Option<EventSink<'_>> = events.is_some().then_some(&sink);
            let mut response = self.inner.send(&normalized, sink).await?;
            for block in &mut response.content {
                if let Content::ToolCall { name, .. } = block {
                    *name = rename(&names, &request.tools, self.prefix, std::mem::take(name));
                }
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn hane_sees_its_own_tools_and_the_prompt_without_the_cli_s_additions() {
        let mut request = ModelRequest::new("m");
        for name in ["mcp__hane__data_find_record", "list_mcp_resources"] {
            request.tools.push(hane_model::ToolSpec {
                name: name.into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
            });
        }
        request.messages = vec![
            Message {
                role: Role::User,
                content: vec![
                    Content::text("<system-reminder>today is …</system-reminder>"),
                    Content::text("the prompt"),
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![Content::ToolCall {
                    id: "c".into(),
                    name: "mcp__hane__data-find_record".into(),
                    input: json!({}),
                }],
            },
        ];
        let transcript = CliTranscript::new(
            Cli::Codex,
            vec!["data-find_record".into()],
            Arc::new(hane_model::ReplayAdapter::new(
                hane_model::Recording {
                    format: hane_model::RECORDING_FORMAT.into(),
                    version: hane_model::RECORDING_VERSION,
                    model: "m".into(),
                    turns: Vec::new(),
                },
                "r",
            )),
        );
        let (normalized, names) = normalize(&transcript, &request);
        let tools: Vec<&str> = normalized.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(tools, ["data-find_record", "list_mcp_resources"]);
        assert_eq!(
            normalized.messages[0].content,
            [Content::text("the prompt")]
        );
        assert!(matches!(
            &normalized.messages[1].content[0],
            Content::ToolCall { name, .. } if name == "data-find_record"
        ));
        assert_eq!(names["data-find_record"], "mcp__hane__data_find_record");

        // The answer's calls: hane's offered tool under the CLI's name, the
        // CLI's own as it is, and a tool it did not offer under its prefix.
        let offered = &request.tools;
        let rename = |name: &str| rename(&names, offered, transcript.prefix, name.to_owned());
        assert_eq!(rename("data-find_record"), "mcp__hane__data_find_record");
        assert_eq!(rename("list_mcp_resources"), "list_mcp_resources");
        assert_eq!(rename("data-get_record"), "mcp__hane__data-get_record");
    }
}
