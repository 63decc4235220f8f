//! The execution ledger: decisions on [`ActionRequest`]s, and delivery
//! of approved ones exactly once.
//!
//! Every change to an action is one registry transaction that reads the
//! row, checks its state, and writes it back. An approved action is
//! *claimed* before anything goes out: its state becomes `executing` with
//! the claiming process's lease ([`Lease`]) as owner and the attempt
//! recorded, in one transaction, so of any number of approvals, in any
//! number of processes on any number of hosts, one claim wins and the
//! others find it claimed. Only then is the content checked against the
//! approved digest and handed to the adapter, and the outcome recorded. A
//! process that dies between claim and outcome leaves the action
//! `executing` until its lease lapses; then [`ExecutionLedger::recover`]
//! (or a run waiting for it) finds the owner gone and makes it `unknown`,
//! which is never resent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hane_core::{ActionId, ErrorKind, RunId, TaskState};
use hane_store::{
    ActionQuery, ActionRow, OverrideRow, Registry, RegistryTx, StoreError, TaskRow, UsageDelta,
};
use serde_json::Value;
use tokio::sync::Notify;
use tracing::Instrument as _;

use crate::Listed;
use crate::budget::{ActiveBudget, BudgetExceeded, BudgetScope, ChargeError, charge, utc_day};
use crate::lease::Lease;
use hane_core::ControlTool;
use hane_core::{
    ActionRequest, ActionState, DeciderKind, Decision, Person, Verdict,
    approval::{ActionOutcome, Attempt},
    digest,
};
use hane_delivery::{Delivery, DeliveryConfig, Outbound, deliver};
use hane_manifest::connection::DEFAULT_MAX_RESPONSE_BYTES;

/// How often a run waiting for a decision made in another process looks
/// at the store.
const POLL: Duration = Duration::from_millis(100);

/// How many more times an outcome is written when the store fails.
const SETTLE_TRIES: u32 = 5;

pub use error::ActionError;

/// Why an action in `state` is not reconciled: what is known of it.
fn not_unknown(state: ActionState) -> &'static str {
    match state {
        ActionState::Pending => "it awaits a decision and nothing was sent",
        ActionState::Approved => "it is approved and not attempted yet",
        ActionState::Executing => {
            "its delivery is under way; if its process died, recovery marks it `unknown`"
        }
        ActionState::Delivered
        | ActionState::Failed
        | ActionState::Rejected
        | ActionState::Shadowed
        | ActionState::Unknown => "its outcome is recorded already",
    }
}

/// Refuses `person` for `action` unless they act for its group.
fn check_group(action: &ActionRequest, person: &Person) -> Result<(), ActionError> {
    if person.acts_for(action.assignment.as_deref()) {
        return Ok(());
    }
    Err(ActionError::NotTheirGroup {
        action: action.id.clone(),
        by: person.by.clone(),
        groups: person.groups.clone().unwrap_or_default(),
        assignment: action.assignment.clone(),
    })
}

/// What [`ExecutionLedger::recover`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveredActions {
    /// Actions whose delivering process is gone: now `unknown`.
    pub unknown: Vec<ActionId>,
    /// Approved actions never attempted: delivered now.
    pub resumed: Vec<ActionId>,
}

/// Decides and executes outbound actions; see the module documentation.
/// Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct ExecutionLedger {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    delivery: DeliveryConfig,
    scope: BudgetScope,
    budget: Mutex<Option<ActiveBudget>>,
    changed: Notify,
    lease: Lease,
}

impl std::fmt::Debug for ExecutionLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutionLedger")
            .field("owner", &self.inner.lease.holder())
            .finish_non_exhaustive()
    }
}

pub(crate) use hane_core::now_ms;

fn decode(row: &ActionRow) -> Result<ActionRequest, ActionError> {
    hane_stored::open(&row.body)
        .map_err(|e| ActionError::Corrupt(format!("action {}: {e}", row.id)))
}

fn encode(action: &ActionRequest) -> ActionRow {
    ActionRow {
        id: action.id.to_string(),
        run: action.run.to_string(),
        tool: action.tool.clone(),
        state: action.state,
        owner: match action.state {
            ActionState::Executing => action.attempts.last().map(|a| a.owner.clone()),
            _ => None,
        },
        created_at_ms: action.created_at_ms,
        updated_at_ms: action.updated_at_ms,
        body: hane_stored::seal(action),
    }
}

/// Ends `action` as `state`, with `detail` saying why.
fn end(action: &mut ActionRequest, state: ActionState, detail: String) {
    action.state = state;
    action.outcome = Some(ActionOutcome {
        state,
        detail,
        reconciled_by: None,
        at_ms: now_ms(),
        schema_violations: Vec::new(),
    });
}

/// Reads, changes and writes back action `id` inside `tx`, moving it
/// from the state it was read in; written only when `f` changed it.
fn change<T>(
    tx: &RegistryTx<'_>,
    id: &str,
    f: impl FnOnce(&mut ActionRequest) -> Result<T, ActionError>,
) -> Result<(T, ActionRequest), ActionError> {
    let row = tx
        .action(id)?
        .ok_or_else(|| ActionError::NotFound(id.to_owned()))?;
    let mut action = decode(&row)?;
    let read = action.clone();
    let value = f(&mut action)?;
    if action != read {
        action.updated_at_ms = now_ms();
        tx.update_action(row.state, &encode(&action))?;
    }
    Ok((value, action))
}

impl ExecutionLedger {
    /// The delivery configuration actions are sent with, which also
    /// holds the credentials of connections.
    pub(crate) fn delivery(&self) -> &DeliveryConfig {
        &self.inner.delivery
    }

    /// A ledger over `registry`, delivering with `delivery` under
    /// `lease` (this process's, on the same store) and counting against
    /// `scope`'s budget (set with [`ExecutionLedger::set_budget`]).
    pub fn new(
        registry: Registry,
        delivery: DeliveryConfig,
        scope: BudgetScope,
        lease: Lease,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                registry,
                delivery,
                scope,
                budget: Mutex::new(None),
                changed: Notify::new(),
                lease,
            }),
        }
    }

    /// Whether the deliverer `owner` names may still be delivering: its
    /// lease is held. This process's own lease is known without a read.
    async fn alive(&self, owner: &str) -> Result<bool, ActionError> {
        let lease = &self.inner.lease;
        if owner == lease.holder() {
            return Ok(!lease.lapsed());
        }
        Ok(self.inner.registry.leases().is_live(owner).await?)
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// The scope usage is counted against.
    pub fn scope(&self) -> &BudgetScope {
        &self.inner.scope
    }

    /// The budget limits apply from now on (the active release's Budget
    /// for the scope, if any).
    pub fn set_budget(&self, budget: Option<ActiveBudget>) {
        *self.inner.budget.lock().unwrap_or_else(|e| e.into_inner()) = budget;
    }

    /// The budget limits apply.
    pub fn budget(&self) -> Option<ActiveBudget> {
        self.inner
            .budget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Applies `f` to action `id` in one transaction (see [`change`]) and
    /// tells waiters.
    async fn update<T: Send + 'static>(
        &self,
        id: &str,
        f: impl FnOnce(&RegistryTx<'_>, &mut ActionRequest) -> Result<T, ActionError> + Send + 'static,
    ) -> Result<(T, ActionRequest), ActionError> {
        self.update_with(false, id, f).await
    }

    /// As [`ExecutionLedger::update`], with the commit synced to disk when
    /// `synced`, whatever the store's mode.
    async fn update_with<T: Send + 'static>(
        &self,
        synced: bool,
        id: &str,
        f: impl FnOnce(&RegistryTx<'_>, &mut ActionRequest) -> Result<T, ActionError> + Send + 'static,
    ) -> Result<(T, ActionRequest), ActionError> {
        let id = id.to_owned();
        let registry = &self.inner.registry;
        let apply = move |tx: &RegistryTx<'_>| change(tx, &id, |action| f(tx, action));
        let changed = if synced {
            registry.transact_synced(apply).await?
        } else {
            registry.transact(apply).await?
        };
        self.inner.changed.notify_waiters();
        Ok(changed)
    }

    /// Action `id`.
    ///
    /// # Errors
    ///
    /// No such action, or the store failed.
    pub async fn get(&self, id: &str) -> Result<ActionRequest, ActionError> {
        let row = self
            .inner
            .registry
            .actions()
            .get(id)
            .await?
            .ok_or_else(|| ActionError::NotFound(id.to_owned()))?;
        decode(&row)
    }

    /// Actions in `state` (any when `None`), of `run` (any when `None`),
    /// oldest first; a stored action that does not read is left out and
    /// named in [`Listed::skipped`].
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn list(
        &self,
        state: Option<ActionState>,
        run: Option<&RunId>,
    ) -> Result<Listed<ActionRequest>, ActionError> {
        let rows = self
            .inner
            .registry
            .actions()
            .list(ActionQuery {
                state,
                run: run.map(ToString::to_string),
                limit: 0,
            })
            .await?;
        Ok(Listed::read(
            "action",
            rows,
            |row| &row.id,
            |row| hane_stored::open(&row.body),
        ))
    }

    /// Every decider override, by tool.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn overrides(&self) -> Result<Vec<OverrideRow>, ActionError> {
        Ok(self.inner.registry.overrides().list().await?)
    }

    /// Sends every later action of `tool` to people, whatever the decider
    /// policies say, from the very next action on; an action a review
    /// agent is still deciding goes to people too. Replaces an override of
    /// the same tool.
    ///
    /// # Errors
    ///
    /// `tool` is not an outbound tool, or the store failed.
    pub async fn add_override(
        &self,
        tool: &str,
        reason: &str,
        by: &str,
    ) -> Result<OverrideRow, ActionError> {
        if !ControlTool::named(tool).is_some_and(ControlTool::is_outbound) {
            return Err(ActionError::NotOutbound(tool.to_owned()));
        }
        Ok(self
            .inner
            .registry
            .overrides()
            .put(OverrideRow {
                tool: tool.to_owned(),
                reason: reason.to_owned(),
                created_by: by.to_owned(),
                created_at_ms: now_ms(),
            })
            .await?)
    }

    /// Removes the override of `tool`: its actions go to the deciders the
    /// policies name again. False when there was none.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn remove_override(&self, tool: &str) -> Result<bool, ActionError> {
        Ok(self.inner.registry.overrides().remove(tool).await?)
    }

    /// Stores a new action, and its approval task when a person decides,
    /// in one transaction.
    pub(crate) async fn propose(
        &self,
        action: ActionRequest,
        task: Option<TaskRow>,
    ) -> Result<ActionRequest, ActionError> {
        let row = encode(&action);
        self.inner
            .registry
            .transact(move |tx| {
                tx.insert_action(&row)?;
                if let Some(task) = &task {
                    tx.create_task(task)?;
                }
                Ok::<_, ActionError>(())
            })
            .await?;
        self.inner.changed.notify_waiters();
        Ok(action)
    }

    /// A person approves action `id`, having seen content with `digest`;
    /// then the action is executed (see [`ExecutionLedger::execute`]) and
    /// returned as it ended. An action approved earlier but never
    /// attempted (its approver stopped before the claim) is executed now,
    /// once. `by` must act for the action's group.
    ///
    /// # Errors
    ///
    /// No such action; a stale digest; it waits for a review agent; it is
    /// assigned to a group the person does not act for; it was decided
    /// already; the store failed.
    pub async fn approve(
        &self,
        id: &str,
        digest: &str,
        by: Person,
        reason: Option<String>,
    ) -> Result<ActionRequest, ActionError> {
        // One task for the decision and the delivery: an approver who goes
        // away (an HTTP client hanging up) cannot leave the action
        // approved and never attempted.
        let ledger = self.clone();
        let (id, digest) = (id.to_owned(), digest.to_owned());
        tokio::spawn(async move {
            let decision = person(Verdict::Approve, &by.by, &digest, reason);
            let decided = ledger.decide(&id, decision, None, Some(&by)).await;
            match decided {
                Ok(_) => ledger.execute_here(&id).await,
                Err(ActionError::AlreadyDecided {
                    state: ActionState::Approved,
                    ..
                }) => {
                    // A repeated approval of the same content resumes an
                    // approval whose process stopped before the claim.
                    // `decide` checked the group before the state.
                    let action = ledger.get(&id).await?;
                    check_digest(&action, &digest)?;
                    deliverable_here(&ledger.inner.delivery, &action)?;
                    ledger.execute_here(&id).await
                }
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|e| ActionError::Corrupt(format!("approving an action: {e}")))?
    }

    /// A person rejects action `id`, having seen content with `digest`.
    ///
    /// # Errors
    ///
    /// As [`ExecutionLedger::approve`].
    pub async fn reject(
        &self,
        id: &str,
        digest: &str,
        by: Person,
        reason: Option<String>,
    ) -> Result<ActionRequest, ActionError> {
        let decision = person(Verdict::Reject, &by.by, digest, reason);
        self.decide(id, decision, None, Some(&by)).await
    }

    /// Records `decision` on pending action `id`: approve makes it
    /// `approved` (not executed: call [`ExecutionLedger::execute`]), reject
    /// makes it `rejected`, escalate hands it to a person with
    /// `escalation`'s task. A person's decision closes the action's task;
    /// `who` is that person, checked against the action's group.
    pub(crate) async fn decide(
        &self,
        id: &str,
        mut decision: Decision,
        escalation: Option<TaskRow>,
        who: Option<&Person>,
    ) -> Result<ActionRequest, ActionError> {
        // A person's approval (`who`) delivers from this process: one that
        // cannot send the action refuses to decide, so it stays pending for
        // one that can rather than failing for good.
        let delivery = (who.is_some() && decision.verdict == Verdict::Approve)
            .then(|| self.inner.delivery.clone());
        let who = who.cloned();
        let (_, action) = self
            .update(id, move |tx, action| {
                // Someone who does not decide for its group is told so
                // first, whatever its state.
                if let Some(who) = &who {
                    check_group(action, who)?;
                }
                if action.state != ActionState::Pending {
                    return Err(ActionError::AlreadyDecided {
                        action: action.id.clone(),
                        state: action.state,
                    });
                }
                // An override set since the action was proposed takes
                // effect now: people decide, and an agent's approval goes
                // to them instead.
                let overridden = tx.overridden(&action.tool)?;
                if decision.kind == DeciderKind::Person
                    && action.decider == DeciderKind::Agent
                    && !overridden
                {
                    return Err(ActionError::AwaitingAgent {
                        action: action.id.clone(),
                        reviewer: action.reviewer.clone().unwrap_or_default(),
                    });
                }
                if decision.kind == DeciderKind::Agent
                    && decision.verdict == Verdict::Approve
                    && overridden
                {
                    decision.verdict = Verdict::Escalate;
                    decision.reason = Some(format!(
                        "{}; escalated: a decider override sends `{}` to people",
                        decision.reason.as_deref().unwrap_or("approved"),
                        action.tool
                    ));
                }
                check_digest(action, &decision.digest)?;
                if let Some(delivery) = &delivery {
                    deliverable_here(delivery, action)?;
                }
                if decision.verdict == Verdict::Escalate {
                    if let Some(task) = &escalation {
                        tx.create_task(task)?;
                        action.assignment = Some(task.assignment.clone());
                        action.task = task.id.parse().ok();
                    }
                } else if let Some(task) = &action.task {
                    tx.set_task_state(task.as_str(), TaskState::Open, TaskState::Done)?;
                }
                record(action, decision);
                Ok(())
            })
            .await?;
        Ok(action)
    }

    /// Withdraws pending action `id` because the run that proposed it
    /// stopped: it becomes `rejected` (no decider decided; the outcome
    /// says why) and its task is closed, so no later approval can send
    /// what no run waits for. An action decided already is left as it is;
    /// returns it either way.
    pub(crate) async fn withdraw(
        &self,
        id: &str,
        why: String,
    ) -> Result<ActionRequest, ActionError> {
        let (_, action) = self
            .update(id, move |tx, action| {
                if action.state != ActionState::Pending {
                    return Ok(());
                }
                end(
                    action,
                    ActionState::Rejected,
                    format!("withdrawn before a decision: {why}"),
                );
                if let Some(task) = &action.task {
                    tx.set_task_state(task.as_str(), TaskState::Open, TaskState::Done)?;
                }
                Ok(())
            })
            .await?;
        Ok(action)
    }

    /// Withdraws every action run `run` left pending (see
    /// [`ExecutionLedger::withdraw`]), because it ended as `why` says.
    pub(crate) async fn withdraw_run(&self, run: &RunId, why: &str) -> Result<(), ActionError> {
        for action in self
            .list(Some(ActionState::Pending), Some(run))
            .await?
            .items
        {
            self.withdraw(action.id.as_str(), why.to_owned()).await?;
        }
        Ok(())
    }

    /// Executes approved action `id` exactly once: claims it (state
    /// `executing`, the attempt recorded, the day's external actions
    /// counted) in one transaction, checks its content against the
    /// approved digest, delivers it and records the outcome. When the
    /// claim finds it claimed or ended already, nothing is sent and the
    /// action is returned as it is.
    ///
    /// # Errors
    ///
    /// No such action, or the store failed. An exhausted budget is not an
    /// error: the action ends `failed` saying so.
    ///
    /// The work runs in a task of its own: a caller that goes away (an
    /// HTTP client hanging up on its approval) cannot stop a delivery
    /// between its claim and its outcome, which would leave the action
    /// `executing` under a process that is still alive.
    pub async fn execute(&self, id: &str) -> Result<ActionRequest, ActionError> {
        let ledger = self.clone();
        let id = id.to_owned();
        let span = tracing::info_span!("action", action = %id);
        tokio::spawn(async move { ledger.execute_here(&id).await }.instrument(span))
            .await
            .map_err(|e| ActionError::Corrupt(format!("delivering an action: {e}")))?
    }

    async fn execute_here(&self, id: &str) -> Result<ActionRequest, ActionError> {
        if self.inner.lease.lapsed() {
            // Another process may be taking what this one held for dead:
            // a claim now would be made `unknown` at once.
            return Err(ActionError::LeaseLapsed);
        }
        let owner = self.inner.lease.holder().to_owned();
        let scope = self.inner.scope.key();
        let budget = self.budget();
        // Synced in any store mode: a claim lost to a power cut after the
        // message went out would let it be sent again.
        let (claimed, action) = self
            .update_with(true, id, move |tx, action| {
                if action.state != ActionState::Approved || !action.attempts.is_empty() {
                    return Ok(false);
                }
                let now = now_ms();
                let delta = UsageDelta {
                    actions: 1,
                    ..UsageDelta::default()
                };
                match charge(tx, &scope, &utc_day(now), budget.as_ref(), delta, now) {
                    Ok(_) => {}
                    Err(ChargeError::Exceeded(e)) => {
                        end(action, ActionState::Failed, format!("not sent: {e}"));
                        return Ok(false);
                    }
                    Err(ChargeError::Store(e)) => return Err(e.into()),
                }
                action.state = ActionState::Executing;
                action.attempts.push(Attempt {
                    owner,
                    started_at_ms: now,
                });
                Ok(true)
            })
            .await?;
        if !claimed {
            return Ok(action);
        }
        let delivery = self.deliver(&action).await;
        let (state, detail, violations) = match delivery {
            Delivery::Delivered { detail, answer } => {
                // The API applied it whatever it answered: delivered, with
                // how its answer departs from the documented one.
                let violations = match (&action.connection, answer) {
                    (Some(target), Some(answer)) => {
                        crate::integrations::delivered_violations(target, &answer)
                    }
                    _ => Vec::new(),
                };
                let detail = detail + &crate::integrations::violations_note(&violations);
                (ActionState::Delivered, detail, violations)
            }
            Delivery::Failed { detail } => (ActionState::Failed, detail, Vec::new()),
            Delivery::Unknown { detail } => (ActionState::Unknown, detail, Vec::new()),
        };
        self.settle(id, state, detail, violations).await
    }

    /// Hands a claimed action to its adapter, after checking that what
    /// goes out is what was approved.
    async fn deliver(&self, action: &ActionRequest) -> Delivery {
        let content = match action.content.to_value() {
            Ok(content) => content,
            Err(e) => {
                return Delivery::Failed {
                    detail: format!("not sent: the stored content is not JSON: {e}"),
                };
            }
        };
        let now = digest(&action.tool, &action.recipient, &content);
        let approved = action.approval().map(|d| d.digest.as_str());
        if now != action.digest || approved != Some(now.as_str()) {
            return Delivery::Failed {
                detail: format!(
                    "not sent: the content about to go out has digest {now}, but {} was approved",
                    approved.unwrap_or("nothing")
                ),
            };
        }
        match outbound(action, &content) {
            Ok(outbound) => deliver(&self.inner.delivery, outbound).await,
            Err(detail) => Delivery::Failed { detail },
        }
    }

    /// Records how an executing action ended, with the schema violations
    /// of a delivered answer.
    async fn settle(
        &self,
        id: &str,
        state: ActionState,
        detail: String,
        violations: Vec<String>,
    ) -> Result<ActionRequest, ActionError> {
        match state {
            ActionState::Delivered => tracing::info!(action = id, "delivered: {detail}"),
            _ => tracing::warn!(action = id, state = state.as_str(), "{detail}"),
        }
        // The outcome is what a person would otherwise have to reconcile:
        // worth a few tries when the store is busy.
        let mut tries = 0;
        loop {
            let detail = detail.clone();
            let violations = violations.clone();
            let owner = self.inner.lease.holder().to_owned();
            let settled = self
                .update(id, move |_, action| {
                    let ours = action.attempts.last().map(|a| a.owner.as_str()) == Some(&owner);
                    let open = match action.state {
                        ActionState::Executing => true,
                        // Made unknown by someone who took this process for
                        // dead, and not reconciled since: the adapter knows
                        // better.
                        ActionState::Unknown => action
                            .outcome
                            .as_ref()
                            .is_some_and(|o| o.reconciled_by.is_none()),
                        _ => false,
                    };
                    if ours && open {
                        end(action, state, detail);
                        if let Some(outcome) = &mut action.outcome {
                            outcome.schema_violations = violations;
                        }
                    }
                    Ok(())
                })
                .await;
            match settled {
                Ok((_, action)) => return Ok(action),
                Err(ActionError::Store(e)) if tries < SETTLE_TRIES => {
                    tries += 1;
                    tracing::warn!(
                        action = id,
                        "recording the outcome failed ({e}); trying again"
                    );
                    tokio::time::sleep(POLL * tries).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A person records what happened to an `unknown` action: `delivered`
    /// or `failed`, with a note. Nothing is sent. `by` must act for the
    /// action's group.
    ///
    /// # Errors
    ///
    /// No such action, it is not `unknown`, a state other than delivered
    /// or failed, a group the person does not act for, or the store
    /// failed.
    pub async fn reconcile(
        &self,
        id: &str,
        state: &str,
        by: Person,
        note: &str,
    ) -> Result<ActionRequest, ActionError> {
        let state = match state {
            "delivered" => ActionState::Delivered,
            "failed" => ActionState::Failed,
            other => return Err(ActionError::BadReconcile(other.to_owned())),
        };
        let (who, note) = (by, note.to_owned());
        let (_, action) = self
            .update(id, move |_, action| {
                check_group(action, &who)?;
                if action.state != ActionState::Unknown {
                    return Err(ActionError::NotUnknown {
                        action: action.id.clone(),
                        state: action.state,
                    });
                }
                let earlier = action
                    .outcome
                    .as_ref()
                    .map(|o| o.detail.clone())
                    .unwrap_or_default();
                let detail = if note.is_empty() {
                    format!("reconciled; before: {earlier}")
                } else {
                    format!("reconciled: {note}; before: {earlier}")
                };
                end(action, state, detail);
                if let Some(outcome) = &mut action.outcome {
                    outcome.reconciled_by = Some(who.by.clone());
                }
                Ok(())
            })
            .await?;
        Ok(action)
    }

    /// After a restart: every `executing` action whose process is gone
    /// becomes `unknown` (never resent); with `resume`, every `approved`
    /// action never attempted is executed now.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn recover(&self, resume: bool) -> Result<RecoveredActions, ActionError> {
        let mut recovered = RecoveredActions::default();
        for action in self.list(Some(ActionState::Executing), None).await?.items {
            if self.orphaned(&action).await? {
                recovered.unknown.push(action.id);
            }
        }
        if resume {
            for action in self.list(Some(ActionState::Approved), None).await?.items {
                let done = self.execute(action.id.as_str()).await?;
                if !done.attempts.is_empty() {
                    recovered.resumed.push(action.id);
                }
            }
        }
        Ok(recovered)
    }

    /// Makes `action` `unknown` when it is `executing` and the process
    /// delivering it is gone; true when it did.
    async fn orphaned(&self, action: &ActionRequest) -> Result<bool, ActionError> {
        let Some(owner) = action.attempts.last().map(|a| a.owner.clone()) else {
            return Ok(false);
        };
        if action.state != ActionState::Executing || self.alive(&owner).await? {
            return Ok(false);
        }
        let (changed, _) = self
            .update(action.id.as_str(), move |_, action| {
                let same = action.attempts.last().map(|a| a.owner.as_str()) == Some(owner.as_str());
                if action.state != ActionState::Executing || !same {
                    return Ok(false);
                }
                end(
                    action,
                    ActionState::Unknown,
                    format!(
                        "the process that was delivering it ({owner}) stopped before recording the outcome (its lease lapsed): it may or may not have gone out; it is not resent, reconcile it"
                    ),
                );
                Ok(true)
            })
            .await?;
        Ok(changed)
    }

    /// Waits until action `id` is settled (decided and, if approved,
    /// executed), whichever process decides it. An action whose
    /// delivering process died meanwhile is made `unknown` here, so the
    /// run does not wait for a restart.
    ///
    /// # Errors
    ///
    /// No such action, or the store failed.
    pub async fn wait_settled(&self, id: &str) -> Result<ActionRequest, ActionError> {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let action = self.get(id).await?;
            if action.state.is_settled() {
                return Ok(action);
            }
            if self.orphaned(&action).await? {
                continue;
            }
            let _ = tokio::time::timeout(POLL, changed).await;
        }
    }
}

/// Applies `decision` to a pending `action` and adds it to the trail:
/// approve makes it `approved`, reject `rejected` (the outcome says by
/// whom and why), escalate hands it to a person.
pub(crate) fn record(action: &mut ActionRequest, decision: Decision) {
    match decision.verdict {
        Verdict::Approve => action.state = ActionState::Approved,
        Verdict::Reject => {
            let reason = decision
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            let detail = format!(
                "rejected by {} ({}){reason}",
                decision.by,
                decision.kind.as_str()
            );
            end(action, ActionState::Rejected, detail);
        }
        Verdict::Escalate => action.decider = DeciderKind::Person,
    }
    action.trail.push(decision);
}

/// A person's decision.
fn person(verdict: Verdict, by: &str, digest: &str, reason: Option<String>) -> Decision {
    Decision {
        kind: DeciderKind::Person,
        by: by.to_owned(),
        verdict,
        reason,
        digest: digest.to_owned(),
        at_ms: now_ms(),
    }
}

fn check_digest(action: &ActionRequest, given: &str) -> Result<(), ActionError> {
    if action.digest == given {
        Ok(())
    } else {
        Err(ActionError::StaleDigest {
            action: action.id.clone(),
            expected: action.digest.clone(),
            given: given.to_owned(),
        })
    }
}

mod error;
/// Whether `delivery` has what sending `action` needs. An action whose
/// content cannot be sent at all passes: its delivery fails saying why.
fn deliverable_here(delivery: &DeliveryConfig, action: &ActionRequest) -> Result<(), ActionError> {
    let Ok(content) = action.content.to_value() else {
        return Ok(());
    };
    let Ok(outbound) = outbound(action, &content) else {
        return Ok(());
    };
    delivery
        .can_send(&outbound)
        .map_err(|missing| ActionError::NotDeliverableHere {
            action: action.id.clone(),
            missing,
        })
}

/// What `action` sends, with its `content`; why it cannot be sent, if it
/// cannot.
fn outbound<'a>(action: &'a ActionRequest, content: &'a Value) -> Result<Outbound<'a>, String> {
    let text = |field: &str| content.get(field).and_then(Value::as_str).unwrap_or("");
    let id = action.id.as_str();
    Ok(match action.tool.as_str() {
        "communication.send_email" => Outbound::Email {
            to: &action.recipient,
            subject: text("subject"),
            body: text("body"),
            message_id: id,
        },
        "communication.send_sms" => Outbound::Sms {
            to: &action.recipient,
            text: text("text"),
            action: id,
        },
        "communication.place_call" => Outbound::Call {
            to: &action.recipient,
            message: text("message"),
            action: id,
        },
        "integration.execute" => {
            let Some(connection) = &action.connection else {
                return Err("not sent: the action names no connection".to_owned());
            };
            Outbound::Integration {
                connection: &connection.name,
                base_url: &connection.base_url,
                credential: connection.credential.as_deref(),
                ca_certificates: connection.ca_certificates.as_deref(),
                method: text("method"),
                path: text("path"),
                headers: content.get("headers"),
                body: content.get("body"),
                timeout: connection.timeout_ms.map(Duration::from_millis),
                // The answer is read whole only to be checked.
                max_response_bytes: connection.response_schema.as_ref().map(|_| {
                    connection
                        .max_response_bytes
                        .map_or(DEFAULT_MAX_RESPONSE_BYTES.as_usize(), |b| {
                            usize::try_from(b).unwrap_or(usize::MAX)
                        })
                }),
                action: id,
            }
        }
        other => return Err(format!("not sent: `{other}` is not an outbound tool")),
    })
}

#[cfg(test)]
mod tests;
