//! [`ActionError`]: why a decision or a reconciliation was refused.

use super::*;

/// Why a decision or a reconciliation was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActionError {
    /// No action has this id.
    #[error("action `{0}` not found")]
    NotFound(String),
    /// The digest given is not the action's: the decider saw other
    /// content.
    #[error(
        "action `{action}` has digest {expected}, not {given}: the content shown is not the content that would go out; show it again and decide on what it is now"
    )]
    StaleDigest {
        /// The action.
        action: ActionId,
        /// Its digest.
        expected: String,
        /// The digest given.
        given: String,
    },
    /// The action was decided already.
    #[error("action `{action}` is already {state}; nothing was done")]
    AlreadyDecided {
        /// The action.
        action: ActionId,
        /// Its state.
        state: ActionState,
    },
    /// A person may not decide it now: a review agent does.
    #[error(
        "action `{action}` waits for the review agent `{reviewer}`; a person decides it once the agent escalates it, or once a decider override sends its tool to people"
    )]
    AwaitingAgent {
        /// The action.
        action: ActionId,
        /// The review agent.
        reviewer: String,
    },
    /// The person acts for other assignment groups than the action's.
    #[error("{by} decides the actions of {} only; action `{action}` is {}", list(.groups), assigned(.assignment.as_deref()))]
    NotTheirGroup {
        /// The action.
        action: ActionId,
        /// Who tried.
        by: String,
        /// The groups they act for.
        groups: Vec<String>,
        /// The action's group, if any.
        assignment: Option<String>,
    },
    /// Only `unknown` actions are reconciled.
    #[error("action `{action}` is {state}; only an `unknown` action is reconciled ({})", not_unknown(*.state))]
    NotUnknown {
        /// The action.
        action: ActionId,
        /// Its state.
        state: ActionState,
    },
    /// An override names a tool that proposes no actions.
    #[error(
        "`{0}` is not an outbound tool; overrides apply to communication.send_email, communication.send_sms, communication.place_call and integration.execute"
    )]
    NotOutbound(String),
    /// A reconciliation names a state other than delivered or failed.
    #[error("a reconciliation records `delivered` or `failed`, not `{0}`")]
    BadReconcile(String),
    /// Approving delivers from the approving process, and this one lacks
    /// what the action needs: nothing was decided.
    #[error(
        "action `{action}` was not approved: approving delivers it from this process, and {missing}. It is still pending: approve it where delivery is configured (such as through the HTTP API of the `hane serve` that has it: POST /v1/agents/action-requests/{action}/approve), or set it here"
    )]
    NotDeliverableHere {
        /// The action.
        action: ActionId,
        /// What this process lacks.
        missing: hane_delivery::NotConfigured,
    },
    /// A limit of the day's budget.
    #[error(transparent)]
    Budget(#[from] BudgetExceeded),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored action could not be read.
    #[error("{0}")]
    Corrupt(String),
    /// This process's lease on the store lapsed: it delivers nothing
    /// more.
    #[error(
        "this process's lease on the store lapsed, so another may take what it held for dead: it delivers nothing more; the action stays approved for another process (restart this one)"
    )]
    LeaseLapsed,
}

impl ActionError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ActionError::NotFound(_) => ErrorKind::NotFound,
            ActionError::NotOutbound(_) | ActionError::BadReconcile(_) => ErrorKind::Invalid,
            ActionError::StaleDigest { .. }
            | ActionError::AlreadyDecided { .. }
            | ActionError::AwaitingAgent { .. }
            | ActionError::NotUnknown { .. }
            | ActionError::NotDeliverableHere { .. } => ErrorKind::Conflict,
            ActionError::NotTheirGroup { .. } => ErrorKind::Forbidden,
            ActionError::Budget(_) => ErrorKind::LimitExceeded,
            ActionError::Store(_) | ActionError::Corrupt(_) | ActionError::LeaseLapsed => {
                ErrorKind::Internal
            }
        }
    }
}

fn list(groups: &[String]) -> String {
    let named: Vec<String> = groups.iter().map(|g| format!("`{g}`")).collect();
    named.join(", ")
}

fn assigned(assignment: Option<&str>) -> String {
    match assignment {
        Some(group) => format!("assigned to `{group}`"),
        None => "assigned to no group: only a key without groups acts on it".to_owned(),
    }
}

impl From<ChargeError> for ActionError {
    fn from(e: ChargeError) -> Self {
        match e {
            ChargeError::Exceeded(e) => ActionError::Budget(e),
            ChargeError::Store(e) => ActionError::Store(e),
        }
    }
}
