//! The tool registry of a release: every operation as a tool under its
//! own name, the control tools, and the tools an agent's exposures add.

use std::collections::BTreeMap;
use std::sync::Arc;

use hane_core::{Impact, Limits};
use hane_manifest::{AgentSpec, ManifestError};
use hane_sandbox::Schema;

use super::{ControlTool, OperationTool, ReleasedOperation, Tool, ToolDefinition, ToolKind};

/// What a release offers, and the one place a tool name is resolved.
pub(crate) struct ToolRegistry<'r> {
    operations: BTreeMap<&'r str, &'r ReleasedOperation>,
    /// Every tool's definition, including the agents' exposures.
    definitions: BTreeMap<String, ToolDefinition>,
    /// The operations as tools under their own names.
    operation_tools: BTreeMap<String, Arc<OperationTool>>,
}

impl<'r> ToolRegistry<'r> {
    /// The registry of `operations` and the control tools; an operation
    /// whose schemas do not parse is left out, its error pushed to
    /// `errors`.
    pub(crate) fn new(
        operations: &'r [ReleasedOperation],
        errors: &mut Vec<ManifestError>,
    ) -> Self {
        let mut registry = Self {
            operations: operations.iter().map(|op| (op.name.as_str(), op)).collect(),
            definitions: BTreeMap::new(),
            operation_tools: BTreeMap::new(),
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
        registry
    }

    /// The tools the agent `spec` (in `file`) may call, by name: those in
    /// its `tools`, resolved first among its exposures, then the control
    /// tools, then the release's operations; and `submit_result`. Each
    /// name that resolves to nothing is pushed to `errors`.
    pub(crate) fn agent_tools(
        &mut self,
        file: &str,
        spec: &AgentSpec,
        errors: &mut Vec<ManifestError>,
    ) -> BTreeMap<String, Tool> {
        let exposed = self.expose(file, spec, errors);
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
                        .chain(exposed.keys().map(String::as_str))
                        .chain(ControlTool::ALL.iter().map(|c| c.name()))
                        .collect();
                    errors.push(ManifestError::new(
                        file,
                        "spec.tools",
                        format!(
                            "tool `{name}` is neither an operation of the release nor a control tool; known tools are {}",
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        tools
    }

    /// The tools the agent's `toolExposures` make of the release's
    /// operations, under their new names and limits.
    fn expose(
        &mut self,
        file: &str,
        spec: &AgentSpec,
        errors: &mut Vec<ManifestError>,
    ) -> BTreeMap<String, (ToolDefinition, Arc<OperationTool>)> {
        let mut exposed = BTreeMap::new();
        for exposure in &spec.tool_exposures {
            let Some(op) = self.operations.get(exposure.operation.as_str()) else {
                errors.push(ManifestError::new(
                    file,
                    "spec.toolExposures",
                    format!("operation `{}` is not in the release", exposure.operation),
                ));
                continue;
            };
            let mut limits: Limits = op.limits;
            if let Some(timeout) = exposure.timeout {
                limits.timeout = timeout;
            }
            match operation_tool(op, &exposure.tool, exposure.description.as_deref(), limits) {
                Ok((definition, tool)) => {
                    self.definitions
                        .insert(exposure.tool.clone(), definition.clone());
                    exposed.insert(exposure.tool.clone(), (definition, tool));
                }
                Err(e) => errors.push(e),
            }
        }
        exposed
    }

    /// The tool `name` stands for, given an agent's exposures.
    fn resolve(
        &self,
        name: &str,
        exposed: &BTreeMap<String, (ToolDefinition, Arc<OperationTool>)>,
    ) -> Option<Tool> {
        if let Some((definition, tool)) = exposed.get(name) {
            return Some(Tool {
                definition: definition.clone(),
                kind: ToolKind::Operation(tool.clone()),
            });
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
