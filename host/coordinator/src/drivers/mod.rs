//! Drivers: what runs an agent. A [`RunDriver`] reaches the tools of its run
//! only through a [`ToolCaller`] bound to that run, which passes every call
//! through the Tool Gateway with the run's token, and its model only
//! through a [`ModelCaller`], which passes every call through the Model
//! Gateway; a driver never holds the runtime, the store or a credential.

mod external;
mod llm;
mod scripted;

use serde_json::Value;

pub(crate) use external::NoExternalDrivers;
pub use external::{CliDriverUnavailable, ExternalDriver, ExternalDrivers, ExternalRun};
pub use llm::{Llm, MAX_RESULT_BYTES, REMINDER, UNTRUSTED_NOTE, model_tool_name, task_message};
pub use scripted::Scripted;

use crate::gateway::GatewayError;
use crate::gateway::model::ModelCallError;
use crate::release::LoadedAgent;
use crate::tools::ToolResult;

use hane_core::BoxFuture;

/// How a driver stopped before its run had a result.
#[derive(Debug)]
pub enum RunEnd {
    /// The gateway refused a call: the run was cancelled, went over a
    /// limit, or its token is no longer valid.
    Gateway(GatewayError),
    /// Something failed; the message says what.
    Failed(String),
}

/// The one way a driver calls a tool of its run.
pub trait ToolCaller: Send + Sync {
    /// Calls `tool` with `input` through the Tool Gateway.
    ///
    /// # Errors
    ///
    /// The gateway refused the call ([`GatewayError`]); the driver should
    /// stop. A call that was let through and failed is an `Ok`
    /// [`ToolResult::Error`], which the driver can act on.
    fn call<'a>(
        &'a self,
        tool: &'a str,
        input: Value,
    ) -> BoxFuture<'a, Result<ToolResult, GatewayError>>;
}

/// The model a run calls, as its release defines it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The `ModelProvider`.
    pub provider: String,
    /// The model's name.
    pub name: String,
    /// Its context window, in tokens.
    pub context_window: u64,
    /// The most output tokens it gives one request.
    pub max_output_tokens: u64,
    /// The provider's sampling temperature, when it sets one.
    pub temperature: Option<f64>,
}

/// One model call a driver asks for: the request as the context builder
/// assembled it (the gateway sets the model and caps its output) and the
/// builder's report, which is recorded with the turn.
#[derive(Debug, Clone)]
pub struct ModelCall {
    /// The request.
    pub request: hane_model::ModelRequest,
    /// The request's input tokens as the context builder counted them.
    pub input_tokens: u64,
    /// The context builder's report, as JSON.
    pub context: Value,
}

/// The one way a driver calls its run's model.
pub trait ModelCaller: Send + Sync {
    /// The model.
    fn model(&self) -> &ModelInfo;

    /// Sends `call` through the Model Gateway.
    ///
    /// # Errors
    ///
    /// The gateway refused the call or the provider failed
    /// ([`ModelCallError`]); the driver should stop.
    fn call<'a>(
        &'a self,
        call: ModelCall,
    ) -> BoxFuture<'a, Result<hane_model::ModelResponse, ModelCallError>>;
}

/// Runs an agent: decides which tools to call, calls them through its
/// [`ToolCaller`], and ends the run by calling `submit_result` (or a review
/// agent's `submit_review`).
pub trait RunDriver: Send + Sync {
    /// Drives one run with `input`; `model` is the run's model, for the
    /// drivers that use one.
    ///
    /// # Errors
    ///
    /// [`RunEnd`]: the gateway stopped the run, or the driver could not
    /// reach a result.
    fn drive<'a>(
        &'a self,
        tools: &'a dyn ToolCaller,
        model: Option<&'a dyn ModelCaller>,
        input: Value,
    ) -> BoxFuture<'a, Result<(), RunEnd>>;
}

/// What runs an agent's runs.
pub(crate) enum Chosen<'a> {
    /// A [`RunDriver`] in this process.
    Driver(Box<dyn RunDriver + 'a>),
    /// An [`ExternalDriver`], attached to the run.
    External,
}

/// What runs `agent`, when this build has a driver for its `driver`: the
/// one place that decides it. [`hane_manifest::Driver::is_available_in_this_build`],
/// which answers before a run starts, agrees with it (a test checks every
/// driver).
///
/// `history` is the conversation before the run's task, for a message's
/// run: the `llm` driver puts it before the task message.
pub(crate) fn for_agent(
    agent: &LoadedAgent,
    history: Vec<hane_model_types::Message>,
) -> Option<Chosen<'_>> {
    let spec = &agent.manifest.spec;
    match spec.driver {
        hane_manifest::Driver::Scripted => {
            Some(Chosen::Driver(Box::new(Scripted::new(&spec.script))))
        }
        hane_manifest::Driver::Llm => Some(Chosen::Driver(Box::new(
            Llm::new(agent).with_history(history),
        ))),
        hane_manifest::Driver::Opencode
        | hane_manifest::Driver::Codex
        | hane_manifest::Driver::Claude => Some(Chosen::External),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use hane_manifest::AgentManifest;
    use hane_sandbox::Schema;

    use super::*;

    #[test]
    fn the_drivers_this_build_runs_are_the_ones_core_says_it_has() {
        for driver in hane_manifest::Driver::ALL {
            let body = if driver == hane_manifest::Driver::Scripted {
                "  script:\n    - tool: submit_result\n      input: { status: done }\n"
            } else {
                "  instructions: Answer.\n"
            };
            let yaml = format!(
                "apiVersion: agents/v1alpha1\nkind: Agent\nmetadata:\n  name: a\nspec:\n  purpose: A test\n  input: {{ type: object }}\n  output: {{ type: object, required: [status] }}\n  driver: {driver}\n{body}"
            );
            let manifest = AgentManifest::from_yaml("a.yaml", &yaml).unwrap();
            let agent = LoadedAgent {
                input: Schema::from_value(&manifest.spec.input).unwrap(),
                output: Schema::from_value(&manifest.spec.output).unwrap(),
                manifest,
                tools: BTreeMap::new(),
                model: None,
            };
            assert_eq!(
                for_agent(&agent, Vec::new()).is_some(),
                driver.is_available_in_this_build(),
                "{driver}"
            );
        }
    }
}
