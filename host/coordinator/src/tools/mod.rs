//! Tools: what an agent may call, each with its [`ToolDefinition`] and what
//! runs it — an operation in the sandbox or a control tool in the host —
//! and the [`translate`] and [`format`] functions between a call and what
//! runs it.

mod control;
mod registry;
mod translate;

pub(crate) use control::{ControlCall, ControlService, Controls};
pub(crate) use registry::ToolRegistry;

pub use translate::{ToolResult, format, translate};
pub(crate) use translate::{input_text, proposal_input};

use std::sync::Arc;

use hane_core::{ControlTool, ToolDefinition};
use hane_core::{Impact, Limits, Policy};
use hane_sandbox::Schema;
use serde::{Deserialize, Serialize};

/// An operation a release makes available as a tool, with everything
/// needed to run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleasedOperation {
    /// Its name in the release.
    pub name: String,
    /// `sha256:` digest of the component.
    pub digest: String,
    /// What it may touch; host paths absolute.
    pub policy: Policy,
    /// Its limits.
    pub limits: Limits,
    /// The component's version.
    pub version: String,
    /// The component's description.
    pub description: String,
    /// JSON Schema of its input, as text.
    pub input_schema: String,
    /// JSON Schema of its output, as text.
    pub output_schema: String,
    /// What it may do outside.
    pub impact: Impact,
}

/// What runs a tool.
#[derive(Debug, Clone)]
pub enum ToolKind {
    /// An operation, run in the sandbox.
    Operation(Arc<OperationTool>),
    /// A control tool, run by the host.
    Control(ControlTool),
    /// An operation of a customer API, exposed by a `ToolExposure`: a read
    /// runs at once, anything else is an outbound action.
    Api(Arc<crate::integrations::ApiTool>),
}

/// An operation-backed tool, with its input schema compiled once.
pub struct OperationTool {
    /// The operation.
    pub operation: ReleasedOperation,
    /// Its limits for this tool (an exposure may shorten the timeout).
    pub limits: Limits,
    /// The compiled input schema.
    pub input: Schema,
}

impl std::fmt::Debug for OperationTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationTool")
            .field("operation", &self.operation.name)
            .finish_non_exhaustive()
    }
}

/// A tool as the gateway and translators see it.
#[derive(Debug, Clone)]
pub struct Tool {
    /// What drivers are told.
    pub definition: ToolDefinition,
    /// What runs it.
    pub kind: ToolKind,
}
