//! [`Services`]: the run kernel and the services around it, composed in
//! one place. A service holds a handle of the kernel ([`AgentRuntime`])
//! and the store parts it needs, and reaches another service only through
//! that service's own API; the binary, the server and the tests build them
//! here, once per process, so that state a service keeps in memory (the
//! conversations taking a message) is one for the whole process.

use std::sync::Arc;

use hane_core::ControlTool;

use crate::tools::ControlService;
use crate::{
    AgentRuntime, Approvals, Budgets, Conversations, Evaluations, Integrations, ReceptionDesk,
    Workflows,
};

/// Every service of one host, over one run kernel. Cheap to clone; clones
/// share everything.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Services {
    /// The run kernel: starts, drives, follows and cancels runs; every
    /// tool and model call of a run passes its gateways.
    pub runs: AgentRuntime,
    /// Outbound actions as people decide them, and decider overrides.
    pub approvals: Approvals,
    /// The day's usage against the active release's Budget.
    pub budgets: Budgets,
    /// Free text in, an agent's run out.
    pub reception: ReceptionDesk,
    /// The built-in chat: each message a run.
    pub conversations: Conversations,
    /// Suites evaluated; releases activated when they pass.
    pub evaluations: Evaluations,
    /// Workflow cases, step by step; also the workflow tools of runs.
    pub workflows: Workflows,
    /// Customer APIs: the integration tools of runs.
    pub integrations: Integrations,
    /// The services the kernel calls for control tools it does not answer
    /// itself: it holds them weakly, so they live as long as these.
    _controls: [Arc<dyn ControlService>; 2],
}

impl Services {
    /// The services around `runs`. Compose one per runtime: the kernel
    /// asks the latest composition's [`Workflows`] for the workflow tools
    /// of its runs, and while none lives those tools fail saying so.
    pub fn new(runs: AgentRuntime) -> Self {
        let approvals = Approvals::new(&runs);
        let budgets = Budgets::new(&runs);
        let reception = ReceptionDesk::new(&runs);
        let conversations = Conversations::new(&runs, &reception);
        let evaluations = Evaluations::new(&runs);
        let workflows = Workflows::new(&runs);
        let integrations = Integrations::new(&runs);
        let controls: Arc<dyn ControlService> = Arc::new(workflows.clone());
        runs.answer_controls(
            &[ControlTool::WorkflowStart, ControlTool::WorkflowGetCase],
            &controls,
        );
        let apis: Arc<dyn ControlService> = Arc::new(integrations.clone());
        runs.answer_controls(
            &[
                ControlTool::IntegrationDescribe,
                ControlTool::IntegrationRead,
            ],
            &apis,
        );
        Self {
            runs,
            approvals,
            budgets,
            reception,
            conversations,
            evaluations,
            workflows,
            integrations,
            _controls: [controls, apis],
        }
    }
}
