//! The scripted driver: the agent's `script`, step by step, no model.

use hane_manifest::{Scope, ScriptStep};
use serde_json::Value;

use super::{BoxFuture, ModelCaller, RunDriver, RunEnd, ToolCaller};
use crate::tools::ToolResult;
use hane_core::ControlTool;

/// Runs an agent's `script`: each step whose condition holds calls its
/// tool with its rendered input, through the gateway like any driver. A
/// successful `submit_result` (or a review agent's `submit_review`) ends
/// the run; a step that fails ends it as failed; so does a script that
/// ends without a result.
#[derive(Debug, Clone, Copy)]
pub struct Scripted<'s> {
    script: &'s [ScriptStep],
}

impl<'s> Scripted<'s> {
    /// The driver of `script`.
    pub fn new(script: &'s [ScriptStep]) -> Self {
        Self { script }
    }
}

impl RunDriver for Scripted<'_> {
    fn drive<'a>(
        &'a self,
        tools: &'a dyn ToolCaller,
        _model: Option<&'a dyn ModelCaller>,
        input: Value,
    ) -> BoxFuture<'a, Result<(), RunEnd>> {
        Box::pin(run(self.script, tools, input))
    }
}

async fn run(script: &[ScriptStep], tools: &dyn ToolCaller, input: Value) -> Result<(), RunEnd> {
    let mut scope = Scope::new(input);
    for (index, step) in script.iter().enumerate() {
        let at = |message: String| {
            RunEnd::Failed(format!(
                "script step {} (`{}`): {message}",
                index + 1,
                step.tool
            ))
        };
        if step.when.as_ref().is_some_and(|c| !scope.holds(c)) {
            continue;
        }
        let input = scope.render(&step.input).map_err(|e| at(e.to_string()))?;
        match tools
            .call(&step.tool, input)
            .await
            .map_err(RunEnd::Gateway)?
        {
            ToolResult::Output(output) => {
                if step.tool == ControlTool::SubmitResult.name()
                    || step.tool == ControlTool::SubmitReview.name()
                {
                    return Ok(());
                }
                scope.record(step, output);
            }
            ToolResult::Error { kind, message } => {
                return Err(at(format!("{kind}: {message}")));
            }
        }
    }
    Err(RunEnd::Failed(
        "the script ended without a result: no `submit_result` step ran".to_owned(),
    ))
}
