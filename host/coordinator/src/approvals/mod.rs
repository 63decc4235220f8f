//! Approvals of outbound actions: a call of an outbound tool becomes an
//! [`ActionRequest`](hane_core::ActionRequest) (a `hane-core` type, since
//! the store keeps it), its decider (a person, a review agent or a policy
//! rule) is chosen in `proposal`, and the [`ExecutionLedger`] records
//! decisions and executes an approved action exactly once.

mod ledger;
mod proposal;
mod service;

pub use ledger::{ActionError, ExecutionLedger, RecoveredActions};
pub(crate) use proposal::Proposals;
pub use service::Approvals;
