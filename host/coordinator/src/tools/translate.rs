//! Translators: pure functions between a tool call and what runs it.
//!
//! [`translate`] validates a call and returns its status and the
//! operations it produces; [`format`] turns a recorded status and how its
//! operation ended into the result the driver sees. Neither does I/O, so
//! both run on the coordinator's path without waiting on anything.

use std::sync::LazyLock;

use hane_core::{
    JsonText, Operation, Outcome, SessionId, ToolCall, ToolCallStatus, WasmCall,
    action::ProposedAction,
};
use hane_sandbox::{Schema, describe_violations};
use serde_json::Value;

use super::{ControlTool, Tool, ToolKind};
use hane_manager::Ending;

/// What the driver sees of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResult {
    /// The tool's output.
    Output(Value),
    /// What went wrong, in words the driver (or a model) can act on.
    Error {
        /// `invalid_input`, `not_found`, `denied`, `rejected`, or the
        /// operation's outcome such as `timeout`.
        kind: String,
        /// The message.
        message: String,
    },
}

impl ToolResult {
    /// An error result.
    pub fn error(kind: impl Into<String>, message: impl Into<String>) -> Self {
        ToolResult::Error {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

static CONTROL_SCHEMAS: LazyLock<Vec<Schema>> = LazyLock::new(|| {
    ControlTool::ALL
        .iter()
        .map(|t| {
            Schema::from_value(&t.definition().input_schema).expect("control tool schemas compile")
        })
        .collect()
});

/// Validates `call` of `tool` in `session`: an invalid input is
/// `rejected` with the schema's words; a valid call of an operation tool
/// is `submitted` with one `pending` operation; a valid call of a control
/// tool is `submitted` with none (the host runs it).
pub fn translate(
    tool: &Tool,
    session: &SessionId,
    call: &ToolCall,
    input: &Value,
) -> (ToolCallStatus, Vec<Operation>) {
    let schema = match &tool.kind {
        ToolKind::Operation(op) => &op.input,
        ToolKind::Control(control) => &CONTROL_SCHEMAS[*control as usize],
        ToolKind::Api(api) => &api.allowed().input,
    };
    if let Err(list) = schema.check(input) {
        let message = format!(
            "invalid input for `{}`: {}",
            call.tool,
            describe_violations(&list)
        );
        return (ToolCallStatus::Rejected { message }, Vec::new());
    }
    match &tool.kind {
        ToolKind::Operation(op) => {
            let operation = Operation::wasm(
                session.clone(),
                call.id.clone(),
                op.operation.impact,
                WasmCall {
                    name: op.operation.name.clone(),
                    component: op.operation.digest.clone(),
                    policy: op.operation.policy.clone(),
                    limits: op.limits,
                    input: call.input.clone(),
                },
            );
            let status = ToolCallStatus::Submitted {
                operations: vec![operation.id.clone()],
            };
            (status, vec![operation])
        }
        // The host runs it: no operation.
        ToolKind::Control(_) | ToolKind::Api(_) => (
            ToolCallStatus::Submitted {
                operations: Vec::new(),
            },
            Vec::new(),
        ),
    }
}

/// The outbound tool call an operation's proposal stands for: the tool
/// and the input the agent would have given it, checked against that
/// tool's input schema, so a proposal goes through exactly what a call of
/// the tool goes through.
///
/// # Errors
///
/// The tool is not an outbound tool, the content is not a JSON object, or
/// the input does not match the tool's schema (such as an email without a
/// subject).
pub fn proposal_input(proposal: &ProposedAction) -> Result<(ControlTool, Value), BadProposal> {
    let control = ControlTool::named(&proposal.tool)
        .filter(|c| c.is_outbound())
        .ok_or_else(|| BadProposal::NotOutbound(proposal.tool.clone()))?;
    let Ok(Value::Object(content)) = proposal.content.to_value() else {
        return Err(BadProposal::NotAnObject);
    };
    let mut input = content;
    let recipient = Value::String(proposal.recipient.clone());
    match control {
        ControlTool::IntegrationExecute => input.insert("connection".to_owned(), recipient),
        _ => input.insert("to".to_owned(), recipient),
    };
    let input = Value::Object(input);
    if let Err(list) = CONTROL_SCHEMAS[control as usize].check(&input) {
        return Err(BadProposal::Invalid {
            tool: proposal.tool.clone(),
            violations: describe_violations(&list),
        });
    }
    Ok((control, input))
}

/// Why an operation's proposal stands for no outbound tool call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BadProposal {
    /// The tool is not an outbound tool.
    #[error("`{0}` is not an outbound tool")]
    NotOutbound(String),
    /// The content is not a JSON object.
    #[error("its content is not a JSON object")]
    NotAnObject,
    /// The input does not match the tool's schema.
    #[error("as a `{tool}` call it is invalid: {violations}")]
    Invalid {
        /// The tool.
        tool: String,
        /// What does not match, as the schema check says it.
        violations: String,
    },
}

/// The result the driver sees for a call with `status` whose operation
/// ended as `ending` (none for a rejected call).
pub fn format(status: &ToolCallStatus, ending: Option<&Ending>) -> ToolResult {
    match (status, ending) {
        (ToolCallStatus::Rejected { message }, _) => ToolResult::error("rejected", message.clone()),
        (ToolCallStatus::Submitted { .. }, None) => {
            ToolResult::error("failed", "the operation did not run")
        }
        (ToolCallStatus::Submitted { .. }, Some(Ending::Succeeded(output))) => {
            match output.output.to_value() {
                Ok(value) => ToolResult::Output(value),
                Err(e) => ToolResult::error("failed", format!("output is not JSON: {e}")),
            }
        }
        (ToolCallStatus::Submitted { .. }, Some(Ending::Failed(failure))) => {
            let kind = match (failure.outcome, failure.guest_error) {
                (Outcome::OperationError, Some(kind)) => kind.as_str(),
                (other, _) => other.as_str(),
            };
            ToolResult::error(kind, without_kind(&failure.message, kind).to_owned())
        }
        (ToolCallStatus::Submitted { .. }, Some(Ending::Lost { reason })) => ToolResult::error(
            "unknown",
            format!("the operation's outcome is unknown: {reason}"),
        ),
    }
}

/// `message` without the words that repeat `kind` at its start: an
/// operation's failure reads `operation error: not found: no record …`,
/// and the result already says `not_found`, so the driver and the people
/// reading it see `not_found: no record …`.
fn without_kind<'m>(message: &'m str, kind: &str) -> &'m str {
    let message = message.strip_prefix("operation error: ").unwrap_or(message);
    let words = kind.replace('_', " ");
    message
        .strip_prefix(words.as_str())
        .and_then(|rest| rest.strip_prefix(": "))
        .unwrap_or(message)
}

/// The call's input as stored text.
pub(crate) fn input_text(input: &Value) -> JsonText {
    JsonText::from_value(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hane_core::{OperationFailure, ToolCallId, operation::GuestErrorKind};

    fn control(tool: ControlTool) -> Tool {
        Tool {
            definition: tool.definition().clone(),
            kind: ToolKind::Control(tool),
        }
    }

    #[test]
    fn control_tools_are_validated_and_produce_no_operations() {
        let tool = control(ControlTool::RequestHumanHelp);
        let session = SessionId::new();
        let good = serde_json::json!({"reason": "not in the ledger"});
        let call = ToolCall {
            id: ToolCallId::new(),
            tool: "request_human_help".into(),
            input: input_text(&good),
        };
        let (status, ops) = translate(&tool, &session, &call, &good);
        assert_eq!(status, ToolCallStatus::Submitted { operations: vec![] });
        assert!(ops.is_empty());
        let bad = serde_json::json!({"why": 1});
        let (status, _) = translate(&tool, &session, &call, &bad);
        let ToolCallStatus::Rejected { message } = status else {
            panic!("accepted {bad}");
        };
        assert!(message.contains("reason"), "{message}");
    }

    #[test]
    fn format_reports_guest_errors_by_kind() {
        let submitted = ToolCallStatus::Submitted { operations: vec![] };
        let ending = Ending::Failed(OperationFailure {
            outcome: Outcome::OperationError,
            guest_error: Some(GuestErrorKind::NotFound),
            message: "operation error: not found: no record `V-9` in `vehicles`".into(),
            receipt: None,
            logs: vec![],
        });
        assert_eq!(
            format(&submitted, Some(&ending)),
            ToolResult::error("not_found", "no record `V-9` in `vehicles`")
        );
        let timeout = Ending::failed(
            Outcome::Timeout,
            "timeout: the operation ran longer than 2s",
        );
        assert_eq!(
            format(&submitted, Some(&timeout)),
            ToolResult::error("timeout", "the operation ran longer than 2s")
        );
        // What does not repeat the kind is kept whole.
        let host = Ending::failed(Outcome::HostError, "the queue is full");
        assert_eq!(
            format(&submitted, Some(&host)),
            ToolResult::error("host_error", "the queue is full")
        );
    }
}
