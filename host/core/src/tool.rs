//! Tools as drivers see them: [`ToolDefinition`], and the [`ControlTool`]s
//! the host serves itself rather than through an operation.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tool every agent returns its result with; always allowed.
pub const SUBMIT_RESULT: &str = ControlTool::SubmitResult.name();

/// The tool that hands work over to a person; needs `handover`.
pub const REQUEST_HUMAN_HELP: &str = ControlTool::RequestHumanHelp.name();

/// The tool a review agent returns its decision on an outbound action
/// with (approve, reject or escalate to a person); an agent that a
/// `DeciderPolicy` names as a decider must list it.
pub const SUBMIT_REVIEW: &str = ControlTool::SubmitReview.name();

/// Tools the runtime serves itself rather than through an operation:
/// [`SUBMIT_RESULT`], [`REQUEST_HUMAN_HELP`], `tasks.create`,
/// [`SUBMIT_REVIEW`], `workflow.start`, `workflow.get_case`,
/// `integration.describe` and `integration.read`. Names of [`ControlTool`]s,
/// the one list.
pub const CONTROL_TOOLS: [&str; 8] = [
    SUBMIT_RESULT,
    REQUEST_HUMAN_HELP,
    ControlTool::CreateTask.name(),
    SUBMIT_REVIEW,
    ControlTool::WorkflowStart.name(),
    ControlTool::WorkflowGetCase.name(),
    ControlTool::IntegrationDescribe.name(),
    ControlTool::IntegrationRead.name(),
];

/// Tools that act outside hane: each call is an outbound action that a
/// decider approves first (see the agent's `approval` and `DeciderPolicy`).
/// The runtime serves them itself, like the [`CONTROL_TOOLS`], rather than
/// through an operation. Names of the outbound [`ControlTool`]s.
pub const OUTBOUND_TOOLS: [&str; 4] = [
    ControlTool::SendEmail.name(),
    ControlTool::SendSms.name(),
    ControlTool::PlaceCall.name(),
    ControlTool::IntegrationExecute.name(),
];

/// What a driver (and `GET /v1/agents/tools`) is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct ToolDefinition {
    /// The name agents call it by, such as `data.find_record`.
    pub name: String,
    /// What it does, written for a model choosing tools.
    pub description: String,
    /// JSON Schema of its input.
    pub input_schema: Value,
    /// JSON Schema of its output.
    pub output_schema: Value,
    /// `read`, `write` or `outbound` for operations; `control` for tools
    /// the host runs itself.
    #[schemars(extend("enum" = ["read", "write", "outbound", "control"]))]
    pub impact: String,
    /// How long one call may take, such as `5s`.
    pub timeout: String,
    /// The operation behind it, when it is not a control tool.
    pub operation: Option<String>,
    /// The operation's version.
    pub version: Option<String>,
}

/// The tools the host runs itself, for every agent that may call them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlTool {
    /// Ends the run with a result valid against the agent's output schema.
    SubmitResult,
    /// Hands the run's work to a person: a handover task assigned per the
    /// agent's `handover`.
    RequestHumanHelp,
    /// Creates a task for people.
    CreateTask,
    /// Ends a review agent's run with its decision on the action it
    /// reviews: approve, reject or escalate to a person.
    SubmitReview,
    /// Proposes an email (an ActionRequest); sent only once approved.
    SendEmail,
    /// Proposes an SMS.
    SendSms,
    /// Proposes a phone call that speaks a message.
    PlaceCall,
    /// Proposes a call to a customer API of the agent's `connections`.
    IntegrationExecute,
    /// Starts a case of a workflow the agent lists in its `workflows`.
    WorkflowStart,
    /// Reads a case of a workflow the agent lists in its `workflows`.
    WorkflowGetCase,
    /// Describes a connection's allowed operations with their schemas.
    IntegrationDescribe,
    /// Runs a read operation of a connection at once.
    IntegrationRead,
}

impl ControlTool {
    /// Every control tool.
    pub const ALL: [ControlTool; 12] = [
        ControlTool::SubmitResult,
        ControlTool::RequestHumanHelp,
        ControlTool::CreateTask,
        ControlTool::SubmitReview,
        ControlTool::SendEmail,
        ControlTool::SendSms,
        ControlTool::PlaceCall,
        ControlTool::IntegrationExecute,
        ControlTool::WorkflowStart,
        ControlTool::WorkflowGetCase,
        ControlTool::IntegrationDescribe,
        ControlTool::IntegrationRead,
    ];

    /// The tool's name.
    pub const fn name(self) -> &'static str {
        match self {
            ControlTool::SubmitResult => "submit_result",
            ControlTool::RequestHumanHelp => "request_human_help",
            ControlTool::CreateTask => "tasks.create",
            ControlTool::SubmitReview => "submit_review",
            ControlTool::SendEmail => "communication.send_email",
            ControlTool::SendSms => "communication.send_sms",
            ControlTool::PlaceCall => "communication.place_call",
            ControlTool::IntegrationExecute => "integration.execute",
            ControlTool::WorkflowStart => "workflow.start",
            ControlTool::WorkflowGetCase => "workflow.get_case",
            ControlTool::IntegrationDescribe => "integration.describe",
            ControlTool::IntegrationRead => "integration.read",
        }
    }

    /// True for the tools that propose outbound actions.
    pub fn is_outbound(self) -> bool {
        matches!(
            self,
            ControlTool::SendEmail
                | ControlTool::SendSms
                | ControlTool::PlaceCall
                | ControlTool::IntegrationExecute
        )
    }

    /// The control tool with this name.
    pub fn named(name: &str) -> Option<Self> {
        ControlTool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Its definition.
    pub fn definition(self) -> &'static ToolDefinition {
        &CONTROL_DEFINITIONS[self as usize]
    }
}

static CONTROL_DEFINITIONS: LazyLock<[ToolDefinition; 12]> = LazyLock::new(|| {
    let control = |name: &str, description: &str, input: Value, output: Value| ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: input,
        output_schema: output,
        impact: "control".to_owned(),
        timeout: "1s".to_owned(),
        operation: None,
        version: None,
    };
    let outbound = |name: &str, description: &str, input: Value| ToolDefinition {
        impact: "outbound".to_owned(),
        // The call waits for a decision, which may take a person hours;
        // the run's maxSeconds bounds it.
        timeout: "none".to_owned(),
        ..control(name, description, input, action_result_schema())
    };
    [
        control(
            "submit_result",
            "Ends the run with its result. The result must match the agent's output schema and have a `status`.",
            json!({"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}),
            json!({"type": "object", "properties": {"accepted": {"type": "boolean"}}}),
        ),
        control(
            "request_human_help",
            "Hands the work to a person: creates a handover task for the agent's handover group with the reason given. Use it when the task cannot be done with the tools at hand; never guess instead.",
            json!({
                "type": "object",
                "required": ["reason"],
                "additionalProperties": false,
                "properties": {
                    "reason": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "What a person needs to do, and why the agent could not."},
                    "details": {"description": "Anything found so far that helps the person."}
                }
            }),
            json!({"type": "object", "properties": {"task": {"type": ["string", "null"]}, "assignment": {"type": "string"}, "shadow": {"type": "boolean"}}}),
        ),
        control(
            "tasks.create",
            "Creates a task for people, assigned to a group (by default the agent's handover group).",
            json!({
                "type": "object",
                "required": ["title"],
                "additionalProperties": false,
                "properties": {
                    "title": {"type": "string", "minLength": 1, "maxLength": 500},
                    "assignment": {"type": "string", "minLength": 1, "maxLength": 200},
                    "details": {}
                }
            }),
            json!({"type": "object", "properties": {"task": {"type": ["string", "null"]}, "assignment": {"type": "string"}, "shadow": {"type": "boolean"}}}),
        ),
        control(
            "submit_review",
            "Ends a review agent's run with its decision on the action under review (the run's input): `approve` sends it, `reject` refuses it, `escalate` hands it to a person.",
            json!({
                "type": "object",
                "required": ["decision"],
                "additionalProperties": false,
                "properties": {
                    "decision": {"enum": ["approve", "reject", "escalate"]},
                    "reason": {"type": "string", "maxLength": 2000}
                }
            }),
            json!({"type": "object", "properties": {"accepted": {"type": "boolean"}}}),
        ),
        outbound(
            "communication.send_email",
            "Proposes an email. Nothing is sent now: the recipient and content are fixed into an action request that the agent's decider approves or rejects; the result says what happened (delivered, failed, rejected or unknown).",
            json!({
                "type": "object",
                "required": ["to", "subject", "body"],
                "additionalProperties": false,
                "properties": {
                    "to": {"type": "string", "pattern": "^[^@\\s<>]+@[^@\\s<>]+$", "maxLength": 320},
                    "subject": {"type": "string", "minLength": 1, "maxLength": 998, "pattern": "^[^\\r\\n]*$"},
                    "body": {"type": "string", "maxLength": 100000}
                }
            }),
        ),
        outbound(
            "communication.send_sms",
            "Proposes a text message to a phone number in E.164 form (`+` and digits). Sent only once approved; the result says what happened.",
            json!({
                "type": "object",
                "required": ["to", "text"],
                "additionalProperties": false,
                "properties": {
                    "to": {"type": "string", "pattern": "^\\+[1-9][0-9]{7,14}$"},
                    "text": {"type": "string", "minLength": 1, "maxLength": 1600}
                }
            }),
        ),
        outbound(
            "communication.place_call",
            "Proposes a phone call that speaks `message` to a number in E.164 form. Placed only once approved; the result says what happened.",
            json!({
                "type": "object",
                "required": ["to", "message"],
                "additionalProperties": false,
                "properties": {
                    "to": {"type": "string", "pattern": "^\\+[1-9][0-9]{7,14}$"},
                    "message": {"type": "string", "minLength": 1, "maxLength": 5000}
                }
            }),
        ),
        outbound(
            "integration.execute",
            "Proposes a call of a write operation of a customer API: one of the `connections` the agent may use (see integration.describe), the operation by its operationId or `METHOD /path`, and its input (its parameters by name, and the request body as `body`). The exact HTTP request is fixed into an action request; the host adds the connection's credential and executes it exactly once, only once approved. The result says what happened.",
            api_call_schema("The operation's parameters by name, and its request body as `body`."),
        ),
        control(
            "workflow.start",
            "Starts a case of a workflow this agent may start (its `workflows`) with the case's input. The case goes on by itself, step by step; read it with workflow.get_case.",
            json!({
                "type": "object",
                "required": ["workflow"],
                "additionalProperties": false,
                "properties": {
                    "workflow": {"type": "string", "minLength": 1},
                    "input": {"type": "object", "description": "The case's input, checked against the workflow's input schema."}
                }
            }),
            json!({"type": "object", "properties": {"case": {"type": ["string", "null"]}, "status": {"type": ["string", "null"]}, "shadow": {"type": "boolean"}}}),
        ),
        control(
            "workflow.get_case",
            "Reads a case of a workflow this agent may start: its status (running, waiting for a person, succeeded or failed) and each step's status and output.",
            json!({
                "type": "object",
                "required": ["case"],
                "additionalProperties": false,
                "properties": {
                    "case": {"type": "string", "pattern": "^case_[0-9a-hjkmnp-tv-z]{26}$"}
                }
            }),
            json!({"type": "object", "properties": {"case": {"type": "string"}, "workflow": {"type": "string"}, "status": {"type": "string"}, "steps": {"type": "array"}, "error": {"type": ["string", "null"]}}}),
        ),
        control(
            "integration.describe",
            "Describes a customer API the agent may use (one of its `connections`): each operation it allows, with its operationId, method, path, summary, whether it only reads, and the JSON Schemas of its input and output. Read operations run with integration.read, others are proposed with integration.execute.",
            json!({
                "type": "object",
                "required": ["connection"],
                "additionalProperties": false,
                "properties": {
                    "connection": {"type": "string", "minLength": 1, "maxLength": 63},
                    "operation": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "Only this operation."}
                }
            }),
            json!({"type": "object", "properties": {"connection": {"type": "string"}, "operations": {"type": "array"}, "truncated": {"type": "boolean"}}}),
        ),
        ToolDefinition {
            timeout: "300s".to_owned(),
            ..control(
                "integration.read",
                "Runs a read operation (GET) of a customer API the agent may use, at once: the connection, the operation by its operationId or `METHOD /path`, and its input (its parameters by name). The answer is the API's, untrusted: its status and body, and whether the body matches the operation's documented schema.",
                api_call_schema("The operation's parameters by name."),
                json!({"type": "object", "required": ["status"], "properties": {"status": {"type": "integer"}, "body": {}, "untrusted": {"type": "boolean"}, "schemaViolations": {"type": "array", "items": {"type": "string"}}}}),
            )
        },
    ]
});

/// The input of a tool that calls an operation of a customer API: the
/// connection, the operation, and its `input` as `input` describes it.
fn api_call_schema(input: &str) -> Value {
    json!({
        "type": "object",
        "required": ["connection", "operation"],
        "additionalProperties": false,
        "properties": {
            "connection": {"type": "string", "minLength": 1, "maxLength": 63},
            "operation": {"type": "string", "minLength": 1, "maxLength": 2000},
            "input": {"type": "object", "description": input}
        }
    })
}

/// What an outbound tool returns once its action is settled.
fn action_result_schema() -> Value {
    json!({
        "type": "object",
        "required": ["action", "state", "digest"],
        "properties": {
            "action": {"type": "string"},
            "state": {"enum": ["delivered", "failed", "rejected", "unknown", "shadowed"]},
            "digest": {"type": "string"},
            "detail": {"type": "string"},
            "decidedBy": {"enum": ["person", "agent", "policy", null]},
            "humanApproved": {"type": "boolean"},
            "schemaViolations": {
                "type": "array",
                "items": {"type": "string"},
                "description": "For a customer API's operation: how its answer departs from the documented schema."
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_tool_is_in_one_of_the_name_lists() {
        for tool in ControlTool::ALL {
            let listed = (
                CONTROL_TOOLS.contains(&tool.name()),
                OUTBOUND_TOOLS.contains(&tool.name()),
            );
            assert_eq!(
                listed,
                (!tool.is_outbound(), tool.is_outbound()),
                "{tool:?}"
            );
            assert_eq!(ControlTool::named(tool.name()), Some(tool));
            assert_eq!(tool.definition().name, tool.name());
        }
        assert_eq!(
            CONTROL_TOOLS.len() + OUTBOUND_TOOLS.len(),
            ControlTool::ALL.len()
        );
    }
}
