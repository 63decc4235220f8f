//! Drivers: what runs an agent. A [`Driver`] reaches the tools of its run
//! only through a [`ToolCaller`] bound to that run, which passes every call
//! through the Tool Gateway with the run's token; a driver never holds the
//! runtime, the store or a credential.

mod scripted;

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

pub use scripted::Scripted;

use crate::gateway::GatewayError;
use crate::release::LoadedAgent;
use crate::tools::ToolResult;

/// A boxed future, as the driver traits return them (they are used as
/// trait objects; one allocation per call is nothing beside a tool call).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

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

/// Runs an agent: decides which tools to call, calls them through its
/// [`ToolCaller`], and ends the run by calling `submit_result` (or a review
/// agent's `submit_review`).
pub trait Driver: Send + Sync {
    /// Drives one run with `input`.
    ///
    /// # Errors
    ///
    /// [`RunEnd`]: the gateway stopped the run, or the driver could not
    /// reach a result.
    fn drive<'a>(
        &'a self,
        tools: &'a dyn ToolCaller,
        input: Value,
    ) -> BoxFuture<'a, Result<(), RunEnd>>;
}

/// The driver that runs `agent`, when this build has one for its `driver`.
pub(crate) fn for_agent(agent: &LoadedAgent) -> Option<Box<dyn Driver + '_>> {
    let spec = &agent.manifest.spec;
    match spec.driver {
        hane_core::Driver::Scripted => Some(Box::new(Scripted::new(&spec.script))),
        _ => None,
    }
}
