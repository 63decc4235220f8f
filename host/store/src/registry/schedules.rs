//! What the registry keeps of schedules: one row per tick handled. The
//! row's key, the schedule and the tick's own time, is what makes a tick
//! start once: every process that sees the tick due tries to insert it,
//! and only the one whose insert took starts its run.

use super::{TickTable, now_ms};
use crate::StoreError;
use crate::sql::{Query, Row, SqlError, args, failed};
use hane_core::schedule::TickOutcome;

/// The most ticks one listing returns.
pub const MAX_TICKS_LISTED: u32 = 1000;

/// One tick of a schedule, as handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickRow {
    /// The schedule's name.
    pub schedule: String,
    /// The tick's own time (not when it was noticed), in milliseconds
    /// since the Unix epoch.
    pub tick_ms: u64,
    /// When a process claimed it.
    pub claimed_at_ms: u64,
    /// The process that claimed it.
    pub claimed_by: String,
    /// What became of it.
    pub outcome: TickOutcome,
    /// The run it started, if any.
    pub run: Option<String>,
    /// The workflow case it started, if any.
    pub workflow_case: Option<String>,
    /// Why it was refused or skipped.
    pub error: Option<String>,
}

/// What became of a claimed tick ([`TickTable::finish`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickEnd {
    /// Its outcome.
    pub outcome: TickOutcome,
    /// The run it started.
    pub run: Option<String>,
    /// The workflow case it started.
    pub workflow_case: Option<String>,
    /// Why it was refused or skipped.
    pub error: Option<String>,
}

impl TickEnd {
    /// An outcome with nothing started and no error.
    pub fn new(outcome: TickOutcome) -> Self {
        Self {
            outcome,
            run: None,
            workflow_case: None,
            error: None,
        }
    }
}

impl TickTable<'_> {
    /// Claims tick `tick_ms` of `schedule` for `claimed_by`, in one
    /// statement: `true` for the one caller, of any process, whose claim
    /// took; `false` when the tick was claimed before. A claimed tick is
    /// `claimed` until [`TickTable::finish`] says more.
    ///
    /// # Errors
    ///
    /// The database failed; then nothing was claimed.
    pub async fn claim(
        &self,
        schedule: &str,
        tick_ms: u64,
        claimed_by: &str,
    ) -> Result<bool, StoreError> {
        let (schedule, claimed_by) = (schedule.to_owned(), claimed_by.to_owned());
        self.registry
            .on("claiming a tick", move |db| {
                db.execute(
                    "INSERT INTO schedule_ticks (schedule, tick, claimed_at, claimed_by, outcome)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT DO NOTHING",
                    args![
                        &schedule,
                        tick_ms as i64,
                        now_ms() as i64,
                        &claimed_by,
                        TickOutcome::Claimed.as_str()
                    ],
                )
                .map(|inserted| inserted == 1)
                .map_err(failed("claiming a tick"))
            })
            .await
    }

    /// Records what became of a claimed tick: its outcome, the run or the
    /// workflow case it started, or the error it was refused or skipped
    /// with.
    ///
    /// # Errors
    ///
    /// The database failed, or the tick was never claimed
    /// ([`StoreError::Database`], naming it).
    pub async fn finish(
        &self,
        schedule: &str,
        tick_ms: u64,
        end: TickEnd,
    ) -> Result<(), StoreError> {
        let schedule = schedule.to_owned();
        let TickEnd {
            outcome,
            run,
            workflow_case,
            error,
        } = end;
        self.registry.on("recording a tick", move |db| {
            let updated = db
                .execute(
                    "UPDATE schedule_ticks SET outcome = ?3, run = ?4, workflow_case = ?5, error = ?6
                     WHERE schedule = ?1 AND tick = ?2",
                    args![
                        &schedule,
                        tick_ms as i64,
                        outcome.as_str(),
                        run.as_ref(),
                        workflow_case.as_ref(),
                        error.as_ref()
                    ],
                )
                .map_err(failed("recording a tick"))?;
            if updated == 0 {
                return Err(StoreError::Database(format!(
                    "recording a tick: tick {tick_ms} of schedule `{schedule}` was never claimed"
                )));
            }
            Ok(())
        })
        .await
    }

    /// The newest tick of `schedule` handled, whatever became of it.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn last(&self, schedule: &str) -> Result<Option<u64>, StoreError> {
        let schedule = schedule.to_owned();
        self.registry
            .on("reading the last tick", move |db| {
                db.row(
                    "SELECT MAX(tick) FROM schedule_ticks WHERE schedule = ?1",
                    args![&schedule],
                    |row| row.opt_int(0),
                )
                .map(|tick| tick.flatten().map(|t| t as u64))
                .map_err(failed("reading the last tick"))
            })
            .await
    }

    /// Ticks handled, newest first, of `schedule` or of every schedule; at
    /// most `limit` (capped at [`MAX_TICKS_LISTED`]; 0 means the cap).
    ///
    /// # Errors
    ///
    /// The database failed, or a row's outcome is not one this build knows.
    pub async fn list(
        &self,
        schedule: Option<&str>,
        limit: u32,
    ) -> Result<Vec<TickRow>, StoreError> {
        let schedule = schedule.map(str::to_owned);
        self.registry
            .on("listing ticks", move |db| {
                let limit = match limit {
                    0 => MAX_TICKS_LISTED,
                    n => n.min(MAX_TICKS_LISTED),
                };
                db.rows(
                "SELECT schedule, tick, claimed_at, claimed_by, outcome, run, workflow_case, error
                 FROM schedule_ticks WHERE CAST(?1 AS TEXT) IS NULL OR schedule = ?1
                 ORDER BY tick DESC, schedule LIMIT ?2",
                args![schedule.as_ref(), limit],
                tick_row,
            )
            .map_err(failed("listing ticks"))
            })
            .await
    }
}

fn tick_row(row: &dyn Row) -> Result<TickRow, SqlError> {
    Ok(TickRow {
        schedule: row.text(0)?,
        tick_ms: row.int(1)? as u64,
        claimed_at_ms: row.int(2)? as u64,
        claimed_by: row.text(3)?,
        outcome: row
            .text(4)?
            .parse()
            .map_err(|e| SqlError::column(4, format!("not a tick outcome: {e}")))?,
        run: row.opt_text(5)?,
        workflow_case: row.opt_text(6)?,
        error: row.opt_text(7)?,
    })
}
