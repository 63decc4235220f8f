//! What the registry keeps of outbound actions: one row per action (its
//! ledger entry), decider overrides, and the per-day usage of a budget.
//!
//! Every change to an action goes through [`Registry::transact`], one
//! `IMMEDIATE` transaction: SQLite lets one writer in at a time across
//! processes, so a claim read and written inside it cannot race another
//! process's claim.

use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};

use super::{Registry, RunRow, TaskRow, db, insert_task, upsert_run};
use crate::StoreError;
use crate::sqlite::Synchronous;

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
    /// Where it is: `pending`, `approved`, `executing`, `delivered`, …
    pub state: String,
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
    pub state: Option<String>,
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
pub struct Usage {
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
    tx: &'a Transaction<'a>,
}

impl RegistryTx<'_> {
    /// The action with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn action(&self, id: &str) -> Result<Option<ActionRow>, StoreError> {
        self.tx
            .prepare_cached(
                "SELECT id, run, tool, state, owner, created_at, updated_at, body
                 FROM actions WHERE id = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([id], action_row).optional())
            .map_err(db("reading an action"))
    }

    /// Inserts or replaces an action.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn put_action(&self, row: &ActionRow) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO actions (id, run, tool, state, owner, created_at, updated_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (id) DO UPDATE SET state = ?4, owner = ?5, updated_at = ?7, body = ?8",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    row.id,
                    row.run,
                    row.tool,
                    row.state,
                    row.owner,
                    row.created_at_ms as i64,
                    row.updated_at_ms as i64,
                    row.body
                ])
            })
            .map_err(db("storing an action"))?;
        Ok(())
    }

    /// True when a decider override sends `tool`'s actions to people.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn overridden(&self, tool: &str) -> Result<bool, StoreError> {
        self.tx
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM decider_overrides WHERE tool = ?1)",
                [tool],
                |row| row.get(0),
            )
            .map_err(db("reading decider overrides"))
    }

    /// Inserts or replaces a run.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn put_run(&self, run: &RunRow) -> Result<(), StoreError> {
        upsert_run(self.tx, run)
    }

    /// Stores a new task.
    ///
    /// # Errors
    ///
    /// The database failed, or a task with this id exists.
    pub fn create_task(&self, task: &TaskRow) -> Result<(), StoreError> {
        insert_task(self.tx, task)
    }

    /// Sets the state of a task (`open`, `done`).
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn set_task_state(&self, id: &str, state: &str) -> Result<(), StoreError> {
        self.tx
            .execute(
                "UPDATE tasks SET state = ?2 WHERE id = ?1",
                params![id, state],
            )
            .map_err(db("updating a task"))?;
        Ok(())
    }

    /// `day`'s usage of `scope`.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub fn usage(&self, day: &str, scope: &str) -> Result<Usage, StoreError> {
        usage(self.tx, day, scope)
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
    ) -> Result<Usage, StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO budget_usage (day, scope, runs, actions, tokens_used, tokens_reserved)
                 VALUES (?1, ?2, max(?3, 0), max(?4, 0), max(?5, 0), max(?6, 0))
                 ON CONFLICT (day, scope) DO UPDATE SET
                    runs = max(runs + ?3, 0),
                    actions = max(actions + ?4, 0),
                    tokens_used = max(tokens_used + ?5, 0),
                    tokens_reserved = max(tokens_reserved + ?6, 0)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    day,
                    scope,
                    delta.runs,
                    delta.actions,
                    delta.tokens_used,
                    delta.tokens_reserved
                ])
            })
            .map_err(db("counting budget usage"))?;
        usage(self.tx, day, scope)
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
            .execute(
                "INSERT OR IGNORE INTO budget_alerts (day, scope, name, used, limit_value, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    day,
                    scope,
                    alert.name,
                    alert.used as i64,
                    alert.limit as i64,
                    alert.at_ms as i64
                ],
            )
            .map_err(db("recording a budget alert"))?;
        Ok(n == 1)
    }
}

fn usage(conn: &rusqlite::Connection, day: &str, scope: &str) -> Result<Usage, StoreError> {
    conn.prepare_cached(
        "SELECT runs, actions, tokens_used, tokens_reserved FROM budget_usage
         WHERE day = ?1 AND scope = ?2",
    )
    .and_then(|mut stmt| {
        stmt.query_row([day, scope], |row| {
            Ok(Usage {
                runs: row.get::<_, i64>(0)? as u64,
                actions: row.get::<_, i64>(1)? as u64,
                tokens_used: row.get::<_, i64>(2)? as u64,
                tokens_reserved: row.get::<_, i64>(3)? as u64,
            })
        })
        .optional()
    })
    .map(Option::unwrap_or_default)
    .map_err(db("reading budget usage"))
}

fn action_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ActionRow> {
    Ok(ActionRow {
        id: row.get(0)?,
        run: row.get(1)?,
        tool: row.get(2)?,
        state: row.get(3)?,
        owner: row.get(4)?,
        created_at_ms: row.get::<_, i64>(5)? as u64,
        updated_at_ms: row.get::<_, i64>(6)? as u64,
        body: row.get(7)?,
    })
}

impl Registry {
    /// Runs `f` in one `IMMEDIATE` transaction: committed when `f`
    /// returns `Ok`, rolled back when it returns `Err`. Another process's
    /// transaction waits until this one ends (up to the busy timeout).
    ///
    /// # Errors
    ///
    /// What `f` returned, or the database failed.
    pub async fn transact<T, E>(
        &self,
        f: impl FnOnce(&RegistryTx<'_>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.transaction(false, f).await
    }

    /// As [`Registry::transact`], with the commit synced to disk whatever
    /// the registry's synchronous mode: for a record that must survive a
    /// power loss as well as a crash, such as the claim of an action about
    /// to be sent.
    ///
    /// # Errors
    ///
    /// As [`Registry::transact`].
    pub async fn transact_synced<T, E>(
        &self,
        f: impl FnOnce(&RegistryTx<'_>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        self.transaction(true, f).await
    }

    async fn transaction<T, E>(
        &self,
        synced: bool,
        f: impl FnOnce(&RegistryTx<'_>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let conn = self.conn.clone();
        let mode = self.synchronous;
        let raise = synced && mode != Synchronous::Full;
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
            if raise {
                conn.pragma_update(None, "synchronous", Synchronous::Full.pragma())
                    .map_err(db("syncing a transaction"))?;
            }
            let done = (|| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db("starting a transaction"))?;
                let value = f(&RegistryTx { tx: &tx })?;
                tx.commit().map_err(db("committing"))?;
                Ok(value)
            })();
            if raise {
                conn.pragma_update(None, "synchronous", mode.pragma())
                    .map_err(db("restoring the synchronous mode"))?;
            }
            done
        })
        .await
        .map_err(|e| StoreError::Database(format!("a registry transaction: {e}")))?
    }

    /// The action with this id.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn action(&self, id: &str) -> Result<Option<ActionRow>, StoreError> {
        let id = id.to_owned();
        self.with("reading an action", move |conn| {
            conn.prepare_cached(
                "SELECT id, run, tool, state, owner, created_at, updated_at, body
                 FROM actions WHERE id = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([id], action_row).optional())
            .map_err(db("reading an action"))
        })
        .await
    }

    /// Actions matching `query`, oldest first.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn actions(&self, query: ActionQuery) -> Result<Vec<ActionRow>, StoreError> {
        self.with("listing actions", move |conn| {
            let limit = match query.limit {
                0 => MAX_ACTIONS_LISTED,
                n => n.min(MAX_ACTIONS_LISTED),
            };
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, run, tool, state, owner, created_at, updated_at, body
                     FROM actions
                     WHERE (?1 IS NULL OR state = ?1) AND (?2 IS NULL OR run = ?2)
                     ORDER BY created_at, id LIMIT ?3",
                )
                .map_err(db("listing actions"))?;
            let rows = stmt
                .query_map(params![query.state, query.run, limit], action_row)
                .map_err(db("listing actions"))?;
            rows.collect::<Result<_, _>>()
                .map_err(db("listing actions"))
        })
        .await
    }

    /// Sets an override for `tool`, replacing one that exists.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn put_override(&self, row: OverrideRow) -> Result<OverrideRow, StoreError> {
        self.with("storing a decider override", move |conn| {
            conn.execute(
                "INSERT INTO decider_overrides (tool, reason, created_by, created_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (tool) DO UPDATE SET reason = ?2, created_by = ?3, created_at = ?4",
                params![
                    row.tool,
                    row.reason,
                    row.created_by,
                    row.created_at_ms as i64
                ],
            )
            .map_err(db("storing a decider override"))?;
            Ok(row)
        })
        .await
    }

    /// Every decider override, by tool.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn overrides(&self) -> Result<Vec<OverrideRow>, StoreError> {
        self.with("listing decider overrides", |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT tool, reason, created_by, created_at FROM decider_overrides
                     ORDER BY tool",
                )
                .map_err(db("listing decider overrides"))?;
            let rows = stmt
                .query_map([], |row| {
                    Ok(OverrideRow {
                        tool: row.get(0)?,
                        reason: row.get(1)?,
                        created_by: row.get(2)?,
                        created_at_ms: row.get::<_, i64>(3)? as u64,
                    })
                })
                .map_err(db("listing decider overrides"))?;
            rows.collect::<Result<_, _>>()
                .map_err(db("listing decider overrides"))
        })
        .await
    }

    /// Removes the override of `tool`; false when there was none.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn remove_override(&self, tool: &str) -> Result<bool, StoreError> {
        let tool = tool.to_owned();
        self.with("removing a decider override", move |conn| {
            let n = conn
                .execute("DELETE FROM decider_overrides WHERE tool = ?1", [tool])
                .map_err(db("removing a decider override"))?;
            Ok(n > 0)
        })
        .await
    }

    /// `day`'s usage of `scope` and its alerts.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn usage(
        &self,
        day: &str,
        scope: &str,
    ) -> Result<(Usage, Vec<AlertRow>), StoreError> {
        let (day, scope) = (day.to_owned(), scope.to_owned());
        self.with("reading budget usage", move |conn| {
            let used = usage(conn, &day, &scope)?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT name, used, limit_value, at FROM budget_alerts
                     WHERE day = ?1 AND scope = ?2 ORDER BY at, name",
                )
                .map_err(db("reading budget alerts"))?;
            let alerts = stmt
                .query_map([&day, &scope], |row| {
                    Ok(AlertRow {
                        name: row.get(0)?,
                        used: row.get::<_, i64>(1)? as u64,
                        limit: row.get::<_, i64>(2)? as u64,
                        at_ms: row.get::<_, i64>(3)? as u64,
                    })
                })
                .map_err(db("reading budget alerts"))?
                .collect::<Result<_, _>>()
                .map_err(db("reading budget alerts"))?;
            Ok((used, alerts))
        })
        .await
    }
}
