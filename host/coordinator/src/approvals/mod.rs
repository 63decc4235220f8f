//! Approvals of outbound actions: the [`ActionRequest`] a call of an
//! outbound tool becomes, the choice of its decider (a person, a review
//! agent or a policy rule) in `proposal`, and the [`ExecutionLedger`] that
//! records decisions and executes an approved action exactly once.

mod action;
mod ledger;
mod proposal;

pub use action::{
    ActionOutcome, ActionRequest, ActionState, Attempt, ConnectionTarget, DeciderKind, Decision,
    Person, Verdict, digest,
};
pub use ledger::{ActionError, ExecutionLedger, Recovered};
