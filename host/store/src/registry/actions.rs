//! What the registry keeps of outbound actions: one row per action (its
//! ledger entry), decider overrides, and the per-day usage of a budget.
//!
//! Every change to an action goes through [`Registry::transact`], one
//! write transaction that no other write transaction interleaves with,
//! from this process or another, so a claim read and written inside it
//! cannot race another process's claim.

use std::cell::RefCell;

use hane_core::{ActionState, Lifecycle, TaskState};

use super::{
    ActionTable, OverrideTable, RunRow, TaskRow, UsageTable, insert_run, insert_task, state,
    state_changed,
};
use crate::StoreError;
use crate::sql::{Query, Row, Sql, SqlError, args, failed};

/// The most actions one listing returns.
pub const MAX_ACTIONS_LISTED: u32 = 1000;

/// An action as stored: its ledger columns and its body, sealed by its
/// owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRow {
    /// `act_…`.
    pub id: String,
    /// The run that proposed it.
    pub run: String,
    /// The tool, such as `communication.send_email`.
    pub tool: String,
    /// Where it is, stored as its name (`pending`).
    pub state: ActionState,
    /// While `executing`: the process executing it.
    pub owner: Option<String>,
    /// When it was proposed.
    pub created_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
    /// The sealed action.
    pub body: Vec<u8>,
}

/// Which actions to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionQuery {
    /// Only actions in this state.
    pub state: Option<ActionState>,
    /// Only actions this run proposed.
    pub run: Option<String>,
    /// At most this many (capped at [`MAX_ACTIONS_LISTED`]; 0 means the
    /// cap).
    pub limit: u32,
}

/// A decider override: approvals of `tool` go to people only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideRow {
    /// The tool.
    pub tool: String,
    /// Why, as its author wrote it.
    pub reason: String,
    /// Who set it (an API key's name, or `cli`).
    pub created_by: String,
    /// When.
    pub created_at_ms: u64,
}

/// One day's usage of a budget scope.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetUsage {
    /// Runs started.
    pub runs: u64,
    /// External actions executed.
    pub actions: u64,
    /// Model tokens used by runs that ended.
    pub tokens_used: u64,
    /// Model tokens reserved by runs still going.
    pub tokens_reserved: u64,
}

/// A change to a day's usage; negative numbers give back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageDelta {
    /// Runs.
    pub runs: i64,
    /// External actions.
    pub actions: i64,
    /// Tokens used.
    pub tokens_used: i64,
    /// Tokens reserved.
    pub tokens_reserved: i64,
}

/// A budget alert: a limit's usage crossed its alert percentage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertRow {
    /// The limit, such as `externalActionsPerDay`.
    pub name: String,
    /// The usage when it crossed.
    pub used: u64,
    /// The limit.
    pub limit: u64,
    /// When.
    pub at_ms: u64,
}

/// The registry inside one transaction; see [`Registry::transact`].
pub struct RegistryTx<'a> {
    pub(super) tx: RefCell<&'a mut dyn Sql>,
}

impl RegistryTx<'_> {
    /// The action with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn action(&self, id: &str) -> Result<Option<ActionRow>, StoreError> {
        self.tx
            .borrow_mut()
            .row(
                "SELECT id, run, tool, state, owner, created_at, updated_at, body
                 FROM actions WHERE id = ?1",
                args![id],
                action_row,
            )
            .map_err(failed("reading an action"))
    }

    /// Stores a new action, in an initial state (`pending`, or as a
    /// policy decided it, or `shadowed`).
    ///
    /// # Errors
    ///
    /// [`StoreError::IllegalTransition`] for a state an action does not
    /// start in, [`StoreError::AlreadyExists`] when an action has this
    /// id, or the database failed.
    pub fn insert_action(&self, row: &ActionRow) -> Result<(), StoreError> {
        row.state.check_initial()?;
        let inserted = self
            .tx
            .borrow_mut()
            .execute(
                "INSERT INTO actions (id, run, tool, state, owner, created_at, updated_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (id) DO NOTHING",
                args![
                    &row.id,
                    &row.run,
                    &row.tool,
                    row.state.as_str(),
                    row.owner.as_ref(),
                    row.created_at_ms as i64,
                    row.updated_at_ms as i64,
                    &row.body
                ],
            )
            .map_err(failed("storing a new action"))?;
        if inserted == 0 {
            return Err(StoreError::AlreadyExists {
                kind: ActionState::KIND,
                id: row.id.clone(),
            });
        }
        Ok(())
    }

    /// Stores action `row` as it is now, moving it from state `from` to
    /// its own: applied only while it is `from`.
    ///
    /// # Errors
    ///
    /// [`StoreError::IllegalTransition`] when an action does not go from
    /// `from` to `row.state`, [`StoreError::StateChanged`] when it is not
    /// `from` (or not stored), or the database failed.
    pub fn update_action(&self, from: ActionState, row: &ActionRow) -> Result<(), StoreError> {
        from.check_transition(row.state)?;
        let what = "storing an action";
        let mut db = self.tx.borrow_mut();
        let changed = db
            .execute(
                "UPDATE actions SET state = ?3, owner = ?4, updated_at = ?5, body = ?6
                 WHERE id = ?1 AND state = ?2",
                args![
                    &row.id,
                    from.as_str(),
                    row.state.as_str(),
                    row.owner.as_ref(),
                    row.updated_at_ms as i64,
                    &row.body
                ],
            )
            .map_err(failed(what))?;
        if changed == 1 {
            return Ok(());
        }
        Err(state_changed(
            *db,
            "SELECT state FROM actions WHERE id = ?1",
            &row.id,
            from,
            what,
        ))
    }

    /// True when a decider override sends `tool`'s actions to people.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn overridden(&self, tool: &str) -> Result<bool, StoreError> {
        self.tx
            .borrow_mut()
            .row(
                "SELECT 1 FROM decider_overrides WHERE tool = ?1",
                args![tool],
                |row| row.int(0),
            )
            .map(|found| found.is_some())
            .map_err(failed("reading decider overrides"))
    }

    /// Stores a new run, as [`RunTable::insert`](super::RunTable::insert).
    ///
    /// # Errors
    ///
    /// As [`RunTable::insert`](super::RunTable::insert).
    pub fn insert_run(&self, run: &RunRow) -> Result<(), StoreError> {
        insert_run(*self.tx.borrow_mut(), run)
    }

    /// Stores a new task, as [`TaskTable::create`](super::TaskTable::create).
    ///
    /// # Errors
    ///
    /// As [`TaskTable::create`](super::TaskTable::create).
    pub fn create_task(&self, task: &TaskRow) -> Result<(), StoreError> {
        insert_task(*self.tx.borrow_mut(), task)
    }

    /// Moves task `id` from state `from` to `to`: applied only while it
    /// is `from`.
    ///
    /// # Errors
    ///
    /// [`StoreError::IllegalTransition`] when a task does not go from
    /// `from` to `to`, [`StoreError::StateChanged`] when it is not `from`
    /// (or not stored), or the database failed.
    pub fn set_task_state(
        &self,
        id: &str,
        from: TaskState,
        to: TaskState,
    ) -> Result<(), StoreError> {
        from.check_transition(to)?;
        let what = "updating a task";
        let mut db = self.tx.borrow_mut();
        let changed = db
            .execute(
                "UPDATE tasks SET state = ?3 WHERE id = ?1 AND state = ?2",
                args![id, from.as_str(), to.as_str()],
            )
            .map_err(failed(what))?;
        if changed == 1 {
            return Ok(());
        }
        Err(state_changed(
            *db,
            "SELECT state FROM tasks WHERE id = ?1",
            id,
            from,
            what,
        ))
    }

    /// `day`'s usage of `scope`.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn usage(&self, day: &str, scope: &str) -> Result<BudgetUsage, StoreError> {
        usage(*self.tx.borrow_mut(), day, scope)
    }

    /// Adds `delta` to `day`'s usage of `scope` and returns the new usage.
    /// No count goes below zero.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn add_usage(
        &self,
        day: &str,
        scope: &str,
        delta: UsageDelta,
    ) -> Result<BudgetUsage, StoreError> {
        let mut db = self.tx.borrow_mut();
        let at_least_0 = |n: i64| n.max(0);
        db.execute(
            "INSERT INTO budget_usage (day, scope, runs, actions, tokens_used, tokens_reserved)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (day, scope) DO UPDATE SET
                runs = CASE WHEN budget_usage.runs + ?7 > 0 THEN budget_usage.runs + ?7 ELSE 0 END,
                actions = CASE WHEN budget_usage.actions + ?8 > 0
                               THEN budget_usage.actions + ?8 ELSE 0 END,
                tokens_used = CASE WHEN budget_usage.tokens_used + ?9 > 0
                                   THEN budget_usage.tokens_used + ?9 ELSE 0 END,
                tokens_reserved = CASE WHEN budget_usage.tokens_reserved + ?10 > 0
                                       THEN budget_usage.tokens_reserved + ?10 ELSE 0 END",
            args![
                day,
                scope,
                at_least_0(delta.runs),
                at_least_0(delta.actions),
                at_least_0(delta.tokens_used),
                at_least_0(delta.tokens_reserved),
                delta.runs,
                delta.actions,
                delta.tokens_used,
                delta.tokens_reserved
            ],
        )
        .map_err(failed("counting budget usage"))?;
        usage(*db, day, scope)
    }

    /// Records an alert for `name` on `day`, unless one was recorded
    /// already; true when this one is new.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn record_alert(
        &self,
        day: &str,
        scope: &str,
        alert: &AlertRow,
    ) -> Result<bool, StoreError> {
        let n = self
            .tx
            .borrow_mut()
            .execute(
                "INSERT INTO budget_alerts (day, scope, name, used, limit_value, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT DO NOTHING",
                args![
                    day,
                    scope,
                    &alert.name,
                    alert.used as i64,
                    alert.limit as i64,
                    alert.at_ms as i64
                ],
            )
            .map_err(failed("recording a budget alert"))?;
        Ok(n == 1)
    }
}

fn usage(db: &mut dyn Sql, day: &str, scope: &str) -> Result<BudgetUsage, StoreError> {
    db.row(
        "SELECT runs, actions, tokens_used, tokens_reserved FROM budget_usage
         WHERE day = ?1 AND scope = ?2",
        args![day, scope],
        |row| {
            Ok(BudgetUsage {
                runs: row.int(0)? as u64,
                actions: row.int(1)? as u64,
                tokens_used: row.int(2)? as u64,
                tokens_reserved: row.int(3)? as u64,
            })
        },
    )
    .map(Option::unwrap_or_default)
    .map_err(failed("reading budget usage"))
}

fn action_row(row: &dyn Row) -> Result<ActionRow, SqlError> {
    Ok(ActionRow {
        id: row.text(0)?,
        run: row.text(1)?,
        tool: row.text(2)?,
        state: state(row, 3)?,
        owner: row.opt_text(4)?,
        created_at_ms: row.int(5)? as u64,
        updated_at_ms: row.int(6)? as u64,
        body: row.blob(7)?,
    })
}

impl ActionTable<'_> {
    /// The action with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn get(&self, id: &str) -> Result<Option<ActionRow>, StoreError> {
        let id = id.to_owned();
        self.registry
            .on("reading an action", move |db| {
                db.row(
                    "SELECT id, run, tool, state, owner, created_at, updated_at, body
                 FROM actions WHERE id = ?1",
                    args![&id],
                    action_row,
                )
                .map_err(failed("reading an action"))
            })
            .await
    }

    /// Actions matching `query`, oldest first.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn list(&self, query: ActionQuery) -> Result<Vec<ActionRow>, StoreError> {
        self.registry
            .on("listing actions", move |db| {
                let limit = match query.limit {
                    0 => MAX_ACTIONS_LISTED,
                    n => n.min(MAX_ACTIONS_LISTED),
                };
                db.rows(
                    "SELECT id, run, tool, state, owner, created_at, updated_at, body
                 FROM actions
                 WHERE (CAST(?1 AS TEXT) IS NULL OR state = ?1)
                   AND (CAST(?2 AS TEXT) IS NULL OR run = ?2)
                 ORDER BY created_at, id LIMIT ?3",
                    args![
                        query.state.map(ActionState::as_str),
                        query.run.as_ref(),
                        limit
                    ],
                    action_row,
                )
                .map_err(failed("listing actions"))
            })
            .await
    }
}

impl OverrideTable<'_> {
    /// Sets an override for `tool`, replacing one that exists.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn put(&self, row: OverrideRow) -> Result<OverrideRow, StoreError> {
        self.registry
            .on("storing a decider override", move |db| {
                db.execute(
                    "INSERT INTO decider_overrides (tool, reason, created_by, created_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (tool) DO UPDATE SET reason = ?2, created_by = ?3, created_at = ?4",
                    args![
                        &row.tool,
                        &row.reason,
                        &row.created_by,
                        row.created_at_ms as i64
                    ],
                )
                .map_err(failed("storing a decider override"))?;
                Ok(row)
            })
            .await
    }

    /// Every decider override, by tool.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn list(&self) -> Result<Vec<OverrideRow>, StoreError> {
        self.registry
            .on("listing decider overrides", |db| {
                db.rows(
                    "SELECT tool, reason, created_by, created_at FROM decider_overrides
                 ORDER BY tool",
                    &[],
                    |row| {
                        Ok(OverrideRow {
                            tool: row.text(0)?,
                            reason: row.text(1)?,
                            created_by: row.text(2)?,
                            created_at_ms: row.int(3)? as u64,
                        })
                    },
                )
                .map_err(failed("listing decider overrides"))
            })
            .await
    }

    /// Removes the override of `tool`; false when there was none.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn remove(&self, tool: &str) -> Result<bool, StoreError> {
        let tool = tool.to_owned();
        self.registry
            .on("removing a decider override", move |db| {
                let n = db
                    .execute(
                        "DELETE FROM decider_overrides WHERE tool = ?1",
                        args![&tool],
                    )
                    .map_err(failed("removing a decider override"))?;
                Ok(n > 0)
            })
            .await
    }
}

impl UsageTable<'_> {
    /// `day`'s usage of `scope` and its alerts.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn of_day(
        &self,
        day: &str,
        scope: &str,
    ) -> Result<(BudgetUsage, Vec<AlertRow>), StoreError> {
        let (day, scope) = (day.to_owned(), scope.to_owned());
        self.registry
            .on("reading budget usage", move |db| {
                let used = usage(db, &day, &scope)?;
                let alerts = db
                    .rows(
                        "SELECT name, used, limit_value, at FROM budget_alerts
                     WHERE day = ?1 AND scope = ?2 ORDER BY at, name",
                        args![&day, &scope],
                        |row| {
                            Ok(AlertRow {
                                name: row.text(0)?,
                                used: row.int(1)? as u64,
                                limit: row.int(2)? as u64,
                                at_ms: row.int(3)? as u64,
                            })
                        },
                    )
                    .map_err(failed("reading budget alerts"))?;
                Ok((used, alerts))
            })
            .await
    }
}
