//! [`Integrations`]: the service that answers `integration.describe` and
//! `integration.read`, and the read tools exposures make, for the runs of
//! a kernel.

use std::sync::Arc;

use hane_core::{BoxFuture, ControlTool};
use hane_delivery::{ApiRead, ApiReadError, read_api};
use hane_sandbox::describe_violations;
use serde_json::{Value, json};

use super::{
    LoadedConnection, answer_body, may_use, not_listed, schema_violations, violations_note,
};
use crate::AgentRuntime;
use crate::tools::{ControlCall, ControlService, ToolResult};

/// The most bytes of JSON `integration.describe` answers with; operations
/// past it are left out and the answer says so.
pub const MAX_DESCRIBE_BYTES: usize = 64 * 1024;

/// Customer APIs for the runs of one kernel. Cheap to clone.
#[derive(Clone)]
pub struct Integrations {
    runs: AgentRuntime,
}

impl std::fmt::Debug for Integrations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Integrations").finish_non_exhaustive()
    }
}

impl ControlService for Integrations {
    fn answer<'a>(&'a self, call: ControlCall<'a>) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            match call.tool {
                ControlTool::IntegrationDescribe => self.describe(&call),
                ControlTool::IntegrationRead => self.read(&call).await,
                tool => ToolResult::error(
                    "failed",
                    format!(
                        "`{}` is not answered by the integrations service",
                        tool.name()
                    ),
                ),
            }
        })
    }
}

impl Integrations {
    /// The integration tools of the runs of `runs`.
    pub fn new(runs: &AgentRuntime) -> Self {
        Self { runs: runs.clone() }
    }

    /// The connection `call` names, if the run's agent may use it.
    fn connection<'c>(
        &self,
        call: &'c ControlCall<'_>,
    ) -> Result<&'c Arc<LoadedConnection>, ToolResult> {
        let name = call.input["connection"].as_str().unwrap_or_default();
        let agent = &call.agent.manifest;
        let listed = agent.spec.connections.iter().any(|c| c == name);
        let exposed = call.agent.tools.values().any(|t| {
            matches!(&t.kind, crate::tools::ToolKind::Api(api) if api.connection.name() == name)
        });
        if !listed && !exposed {
            return Err(ToolResult::error("denied", not_listed(agent, name)));
        }
        call.release.connections.get(name).ok_or_else(|| {
            ToolResult::error(
                "failed",
                format!(
                    "connection `{name}` is not in release {}",
                    call.release.info.number
                ),
            )
        })
    }

    /// `integration.describe`: the operations a connection allows, with
    /// their schemas, up to [`MAX_DESCRIBE_BYTES`].
    fn describe(&self, call: &ControlCall<'_>) -> ToolResult {
        let connection = match self.connection(call) {
            Ok(connection) => connection,
            Err(refused) => return refused,
        };
        let only = match call.input.get("operation").and_then(Value::as_str) {
            None => None,
            Some(selector) => match connection.find(selector) {
                Some(found) => Some(found),
                None => return not_allowed(connection, selector),
            },
        };
        let mut described = connection.describe(only);
        let operations = described["operations"].as_array_mut().expect("an array");
        let mut truncated = false;
        while serde_json::to_vec(&operations).map_or(0, |v| v.len()) > MAX_DESCRIBE_BYTES {
            operations.pop();
            truncated = true;
        }
        let count = operations.len();
        described["truncated"] = json!(truncated);
        described["summary"] = json!(format!(
            "{count} operation{} of connection `{}`{}",
            if count == 1 { "" } else { "s" },
            connection.name(),
            if truncated {
                " (more left out: ask for one by `operation`)"
            } else {
                ""
            }
        ));
        ToolResult::Output(described)
    }

    /// `integration.read`: one read operation of a connection, run now.
    async fn read(&self, call: &ControlCall<'_>) -> ToolResult {
        let connection = match self.connection(call) {
            Ok(connection) => connection,
            Err(refused) => return refused,
        };
        let selector = call.input["operation"].as_str().unwrap_or_default();
        let Some(allowed) = connection.find(selector) else {
            return not_allowed(connection, selector);
        };
        let operation = &allowed.operation;
        let name = operation.name();
        if !may_use(call.agent, connection.name(), &name) {
            return ToolResult::error(
                "denied",
                format!(
                    "agent `{}` may not use operation `{name}` of connection `{}`",
                    call.agent.manifest.metadata.name,
                    connection.name()
                ),
            );
        }
        if !operation.is_read() {
            return ToolResult::error(
                "denied",
                format!(
                    "operation `{name}` ({} {}) may change something: propose it with integration.execute, which a decider approves first",
                    operation.method, operation.path
                ),
            );
        }
        let input = call
            .input
            .get("input")
            .cloned()
            .unwrap_or_else(|| json!({}));
        if let Err(list) = allowed.input.check(&input) {
            return ToolResult::error(
                "invalid_input",
                format!(
                    "invalid input for operation `{name}`: {}",
                    describe_violations(&list)
                ),
            );
        }
        let request = match operation.request(&input) {
            Ok(request) => request,
            Err(problem) => {
                return ToolResult::error(
                    "invalid_input",
                    format!("invalid input for operation `{name}`: {problem}"),
                );
            }
        };
        let spec = &connection.manifest.spec;
        let timeout = call
            .exposure
            .map_or(spec.timeout, |tool| tool.timeout.min(spec.timeout));
        let read = ApiRead {
            connection: connection.name(),
            base_url: &spec.base_url,
            credential: spec.credential.as_deref(),
            ca_certificates: connection.ca_certificates.as_deref(),
            method: &request.method,
            path: &request.path_and_query,
            headers: &request.headers,
            timeout: timeout.0,
            cap: spec.max_response_bytes.as_usize(),
        };
        let answer = match read_api(self.runs.actions().delivery(), read).await {
            Ok(answer) => answer,
            Err(error) => {
                let kind = match &error {
                    ApiReadError::Unreachable { detail, .. } if detail.contains("timed out") => {
                        "timeout"
                    }
                    ApiReadError::NotConfigured(_) => "failed",
                    ApiReadError::Invalid { .. } => "invalid_input",
                    _ => "failed",
                };
                return ToolResult::error(kind, error.to_string());
            }
        };
        let body = match answer_body(&answer) {
            Ok(body) => body,
            Err(e) => {
                return ToolResult::error(
                    "failed",
                    format!(
                        "connection `{}` answered operation `{name}` with a body that is not the JSON it declares: {e}",
                        connection.name()
                    ),
                );
            }
        };
        let violations = allowed
            .output
            .as_ref()
            .map(|output| schema_violations(output, answer.status, &body))
            .unwrap_or_default();
        let summary = format!(
            "{} {} answered {} ({} bytes){}",
            request.method,
            request.path_and_query,
            answer.status,
            answer.body.len(),
            violations_note(&violations)
        );
        ToolResult::Output(json!({
            "status": answer.status,
            "body": body,
            "untrusted": true,
            "schemaViolations": violations,
            "summary": summary,
        }))
    }
}

/// The error for an operation `connection` does not allow.
fn not_allowed(connection: &LoadedConnection, selector: &str) -> ToolResult {
    let allowed: Vec<&str> = connection.allowed.keys().map(String::as_str).collect();
    ToolResult::error(
        "not_found",
        format!(
            "connection `{}` allows no operation `{selector}`; it allows {}",
            connection.name(),
            allowed.join(", ")
        ),
    )
}
