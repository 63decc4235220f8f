//! A process for the approval crash tests: it approves one action the way
//! `hane approvals approve` does (an [`ExecutionLedger`] on the store, the
//! delivery configuration from the environment, the active release's
//! budget, recovery first), printing
//! each step, so that a test can kill it (`kill -9`) at any point and
//! start it again.
//!
//! Usage: `approve-host STORE ACTION DIGEST`. Prints the action's final
//! state as `state: STATE`; an approval refused because the action was
//! decided already prints `already: STATE` and still exits 0.

use std::io::Write;

use anyhow::{Context, Result};
use hane_coordinator::{
    ActionError, ExecutionLedger, Lease, budget::BudgetScope, lease::lease_from_env, load_active,
};
use hane_core::Person;
use hane_delivery::DeliveryConfig;
use hane_store::Registry;

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [store, action, digest] = args.as_slice() else {
        anyhow::bail!("usage: approve-host STORE ACTION DIGEST");
    };
    let delivery = DeliveryConfig::from_env().context("the delivery configuration")?;
    let registry = Registry::open(store)?;
    let release = load_active(&registry).await?;
    let scope = BudgetScope::default();
    let budget = release.and_then(|r| r.budget_for(&scope));
    let lease = Lease::acquire(&registry, lease_from_env()?)?;
    let ledger = ExecutionLedger::new(registry, delivery, scope, lease);
    ledger.set_budget(budget);
    say("recovering");
    let recovered = ledger.recover(false).await?;
    say(&format!("recovered: {} unknown", recovered.unknown.len()));
    say("approving");
    match ledger
        .approve(action, digest, Person::anyone("test:approve-host"), None)
        .await
    {
        Ok(action) => say(&format!("state: {}", action.state)),
        Err(ActionError::AlreadyDecided { state, .. }) => say(&format!("already: {state}")),
        Err(e) => return Err(e.into()),
    }
    Ok(())
}
