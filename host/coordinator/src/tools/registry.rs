//! The tool registry of a release: every operation as a tool under its
//! own name, the control tools, and the tools the release's
//! `ToolExposure`s make of its operations and of its connections'.

use std::collections::BTreeMap;
use std::sync::Arc;

use hane_core::{Impact, Limits};
use hane_manifest::{AgentSpec, ManifestError, ToolExposureManifest};
use hane_sandbox::Schema;
use serde_json::json;

use super::{ControlTool, OperationTool, ReleasedOperation, Tool, ToolDefinition, ToolKind};
use crate::integrations::{ApiTool, LoadedConnection};

/// What a release offers, and the one place a tool name is resolved.
pub(crate) struct ToolRegistry<'r> {
    operations: BTreeMap<&'r str, &'r ReleasedOperation>,
    /// Every tool's definition, including the exposures'.
    definitions: BTreeMap<String, ToolDefinition>,
    /// The operations as tools under their own names.
    operation_tools: BTreeMap<String, Arc<OperationTool>>,
    /// The release's exposures by name, each with the tool it makes.
    exposures: BTreeMap<String, Tool>,
}

impl<'r> ToolRegistry<'r> {
    /// The registry of `operations`, the control tools and the tools
    /// `exposures` make (of `operations` and of `connections`); an
    /// operation whose schemas do not parse, or an exposure that does not
    /// resolve, is left out, its error pushed to `errors`.
    pub(crate) fn new(
        operations: &'r [ReleasedOperation],
        connections: &BTreeMap<String, Arc<LoadedConnection>>,
        exposures: &[(String, ToolExposureManifest)],
        errors: &mut Vec<ManifestError>,
    ) -> Self {
        let mut registry = Self {
            operations: operations.iter().map(|op| (op.name.as_str(), op)).collect(),
            definitions: BTreeMap::new(),
            operation_tools: BTreeMap::new(),
            exposures: BTreeMap::new(),
        };
        for op in operations {
            match operation_tool(op, &op.name, None, op.limits) {
                Ok((definition, tool)) => {
                    registry.definitions.insert(op.name.clone(), definition);
                    registry.operation_tools.insert(op.name.clone(), tool);
                }
                Err(e) => errors.push(e),
            }
        }
        for control in ControlTool::ALL {
            registry
                .definitions
                .insert(control.name().to_owned(), control.definition().clone());
        }
        for (file, exposure) in exposures {
            match registry.expose(file, exposure, connections) {
                Ok(tool) => {
                    registry
                        .definitions
                        .insert(exposure.spec.tool.clone(), tool.definition.clone());
                    registry
                        .exposures
                        .insert(exposure.metadata.name.clone(), tool);
                }
                Err(e) => errors.push(e),
            }
        }
        registry
    }

    /// The tools the agent `spec` (in `file`) may call, by name: those in
    /// its `tools`, resolved first among the tools of its `toolExposures`,
    /// then the control tools, then the release's operations; and
    /// `submit_result`. Each name that resolves to nothing is pushed to
    /// `errors`.
    pub(crate) fn agent_tools(
        &self,
        file: &str,
        spec: &AgentSpec,
        errors: &mut Vec<ManifestError>,
    ) -> BTreeMap<String, Tool> {
        let exposed: BTreeMap<&str, &Tool> = spec
            .tool_exposures
            .iter()
            .filter_map(|name| self.exposures.get(name))
            .map(|tool| (tool.definition.name.as_str(), tool))
            .collect();
        let names = spec
            .tools
            .iter()
            .map(String::as_str)
            .chain([ControlTool::SubmitResult.name()]);
        let mut tools = BTreeMap::new();
        for name in names {
            match self.resolve(name, &exposed) {
                Some(tool) => {
                    tools.insert(name.to_owned(), tool);
                }
                None => {
                    let known: Vec<&str> = self
                        .operations
                        .keys()
                        .copied()
                        .chain(exposed.keys().copied())
                        .chain(ControlTool::ALL.iter().map(|c| c.name()))
                        .collect();
                    errors.push(ManifestError::new(
                        file,
                        "spec.tools",
                        format!(
                            "tool `{name}` is neither an operation of the release, a tool of the agent's toolExposures nor a control tool; known tools are {}",
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        tools
    }

    /// The tool `exposure` (in `file`) makes: of a connection's operation,
    /// or of an operation of the release under a new name and limits.
    fn expose(
        &self,
        file: &str,
        exposure: &ToolExposureManifest,
        connections: &BTreeMap<String, Arc<LoadedConnection>>,
    ) -> Result<Tool, ManifestError> {
        let spec = &exposure.spec;
        let Some(connection) = &spec.connection else {
            let Some(op) = self.operations.get(spec.operation.as_str()) else {
                return Err(ManifestError::new(
                    file,
                    "spec.operation",
                    format!("operation `{}` is not in the release", spec.operation),
                ));
            };
            let mut limits: Limits = op.limits;
            if let Some(timeout) = spec.timeout {
                limits.timeout = timeout;
            }
            let (definition, tool) =
                operation_tool(op, &spec.tool, spec.description.as_deref(), limits)?;
            return Ok(Tool {
                definition,
                kind: ToolKind::Operation(tool),
            });
        };
        let Some(loaded) = connections.get(connection) else {
            return Err(ManifestError::new(
                file,
                "spec.connection",
                format!("connection `{connection}` is not in the release"),
            ));
        };
        let Some(allowed) = loaded.find(&spec.operation) else {
            let allowed: Vec<&str> = loaded.allowed.keys().map(String::as_str).collect();
            return Err(ManifestError::new(
                file,
                "spec.operation",
                format!(
                    "connection `{connection}` allows no operation `{}`; it allows {}",
                    spec.operation,
                    allowed.join(", ")
                ),
            ));
        };
        let operation = &allowed.operation;
        let impact = spec.impact.unwrap_or(Impact::Outbound);
        if impact == Impact::Read && !operation.is_read() {
            return Err(ManifestError::new(
                file,
                "spec.impact",
                format!(
                    "operation `{}` is {} {}, which may change state: only a GET or HEAD is `read`; say `write` or `outbound`",
                    operation.name(),
                    operation.method,
                    operation.path
                ),
            ));
        }
        let timeout = spec
            .timeout
            .unwrap_or(loaded.manifest.spec.timeout)
            .min(loaded.manifest.spec.timeout);
        let description = spec.description.clone().unwrap_or_else(|| {
            [
                operation.summary.as_deref(),
                operation.description.as_deref(),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(". ")
        });
        let output_schema = match impact {
            Impact::Read => json!({
                "type": "object",
                "required": ["status"],
                "properties": {
                    "status": {"type": "integer"},
                    "body": operation.output_schema.clone().unwrap_or(json!({})),
                    "untrusted": {"type": "boolean"},
                    "schemaViolations": {"type": "array", "items": {"type": "string"}},
                }
            }),
            _ => ControlTool::IntegrationExecute
                .definition()
                .output_schema
                .clone(),
        };
        let definition = ToolDefinition {
            name: spec.tool.clone(),
            description,
            input_schema: operation.input_schema.clone(),
            output_schema,
            impact: impact.to_string(),
            timeout: if impact == Impact::Read {
                timeout.to_string()
            } else {
                "none".to_owned()
            },
            operation: Some(format!("{connection}: {}", operation.name())),
            version: None,
        };
        Ok(Tool {
            definition,
            kind: ToolKind::Api(Arc::new(ApiTool {
                connection: loaded.clone(),
                operation: operation.name(),
                impact,
                timeout,
            })),
        })
    }

    /// The tool `name` stands for, given an agent's exposed tools.
    fn resolve(&self, name: &str, exposed: &BTreeMap<&str, &Tool>) -> Option<Tool> {
        if let Some(tool) = exposed.get(name) {
            return Some((*tool).clone());
        }
        if let Some(control) = ControlTool::named(name) {
            return Some(Tool {
                definition: control.definition().clone(),
                kind: ToolKind::Control(control),
            });
        }
        let (definition, tool) = (self.definitions.get(name)?, self.operation_tools.get(name)?);
        Some(Tool {
            definition: definition.clone(),
            kind: ToolKind::Operation(tool.clone()),
        })
    }

    /// Every tool's definition, by name.
    pub(crate) fn into_definitions(self) -> BTreeMap<String, ToolDefinition> {
        self.definitions
    }
}

fn operation_tool(
    op: &ReleasedOperation,
    name: &str,
    description: Option<&str>,
    limits: Limits,
) -> Result<(ToolDefinition, Arc<OperationTool>), ManifestError> {
    // The schemas are the component's own description, so the error names
    // the operation rather than a file.
    let source = format!("operation `{}`", op.name);
    let parse = |text: &str, which: &str| {
        serde_json::from_str::<serde_json::Value>(text).map_err(|e| {
            ManifestError::new(&source, format!("{which} schema"), format!("not JSON: {e}"))
        })
    };
    let input_schema = parse(&op.input_schema, "input")?;
    let mut output_schema = parse(&op.output_schema, "output")?;
    if op.impact == Impact::Outbound {
        // What the host makes of an outbound operation's result: its
        // output, and the outcome of each action it proposed.
        output_schema = serde_json::json!({
            "type": "object",
            "required": ["output", "actions"],
            "properties": {
                "output": output_schema,
                "actions": {"type": "array", "items": {"type": "object"}},
            }
        });
    }
    let input = Schema::from_value(&input_schema)
        .map_err(|e| ManifestError::new(&source, "input schema", e.to_string()))?;
    let definition = ToolDefinition {
        name: name.to_owned(),
        description: description.unwrap_or(&op.description).to_owned(),
        input_schema,
        output_schema,
        impact: op.impact.to_string(),
        timeout: limits.timeout.to_string(),
        operation: Some(op.name.clone()),
        version: Some(op.version.clone()),
    };
    Ok((
        definition,
        Arc::new(OperationTool {
            operation: op.clone(),
            limits,
            input,
        }),
    ))
}
