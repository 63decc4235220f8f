//! Leases: which processes sharing a store are alive. A process holds one
//! lease and renews it while it lives; what it runs (its runs, the action
//! it is delivering) names the lease. A lease past its expiry, or one no
//! longer in the table, is a dead holder: another process takes its runs
//! over, and its deliveries become `unknown`.
//!
//! Expiry is judged by the clock of the process that reads it, so the
//! machines sharing a store keep their clocks in step (NTP) and a lease is
//! much longer than their drift.

use std::time::Duration;

use super::{LeaseTable, RunRow, now_ms, run_row};
use crate::StoreError;
use crate::sql::{Query, Row, SqlError, args, failed};

/// A lease as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    /// Its holder's name, unique to one process's life.
    pub holder: String,
    /// The host the process runs on.
    pub host: String,
    /// Its process id there.
    pub pid: u32,
    /// When it was first acquired, in milliseconds since the Unix epoch.
    pub acquired_at_ms: u64,
    /// When it lapses unless renewed.
    pub expires_at_ms: u64,
}

impl LeaseRow {
    /// Whether it is still held at `now_ms`.
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.expires_at_ms >= now_ms
    }
}

/// A run taken over from a dead holder ([`LeaseTable::take_over_runs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenRun {
    /// The run, now held by the taker.
    pub run: RunRow,
    /// The holder it had, if any.
    pub from: Option<String>,
    /// That holder's lease, if it is still in the table.
    pub lease: Option<LeaseRow>,
}

fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn lease_row(row: &dyn Row) -> Result<LeaseRow, SqlError> {
    lease_at(row, 0)
}

/// The lease in the five columns from `first`.
fn lease_at(row: &dyn Row, first: usize) -> Result<LeaseRow, SqlError> {
    Ok(LeaseRow {
        holder: row.text(first)?,
        host: row.text(first + 1)?,
        pid: row.int(first + 2)? as u32,
        acquired_at_ms: row.int(first + 3)? as u64,
        expires_at_ms: row.int(first + 4)? as u64,
    })
}

impl LeaseTable<'_> {
    /// Takes the lease `holder` for `ttl`, for the process `pid` on
    /// `host`. Blocking: a process takes its lease while it opens the
    /// store, before it runs anything under it.
    ///
    /// # Errors
    ///
    /// The database failed, or `holder` is held already (holder names are
    /// never reused).
    pub fn acquire(
        &self,
        holder: &str,
        host: &str,
        pid: u32,
        ttl: Duration,
    ) -> Result<LeaseRow, StoreError> {
        let now = now_ms();
        let expires = now.saturating_add(ms(ttl) as u64);
        self.registry.blocking(|db| {
            db.execute(
                "INSERT INTO leases (holder, host, pid, acquired_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                args![holder, host, pid, now as i64, expires as i64],
            )
            .map_err(failed("taking a lease"))
        })?;
        Ok(LeaseRow {
            holder: holder.to_owned(),
            host: host.to_owned(),
            pid,
            acquired_at_ms: now,
            expires_at_ms: expires,
        })
    }

    /// Renews lease `holder` for `ttl` from now. `Ok(false)` when it
    /// cannot be renewed: it lapsed, or it is gone. A lapsed lease is never
    /// revived, since others may have taken over what it held.
    ///
    /// # Errors
    ///
    /// The database failed; the lease may lapse meanwhile.
    pub async fn renew(&self, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let holder = holder.to_owned();
        self.registry
            .on("renewing a lease", move |db| {
                let now = now_ms() as i64;
                let changed = db
                    .execute(
                        "UPDATE leases SET expires_at = ?2 WHERE holder = ?1 AND expires_at >= ?3",
                        args![&holder, now.saturating_add(ms(ttl)), now],
                    )
                    .map_err(failed("renewing a lease"))?;
                Ok(changed == 1)
            })
            .await
    }

    /// Gives lease `holder` up: what it still holds is taken over at once.
    ///
    /// # Errors
    ///
    /// The database failed; the lease lapses by itself.
    pub async fn give_up(&self, holder: &str) -> Result<(), StoreError> {
        let holder = holder.to_owned();
        self.registry
            .on("giving up a lease", move |db| {
                db.execute("DELETE FROM leases WHERE holder = ?1", args![&holder])
                    .map_err(failed("giving up a lease"))?;
                Ok(())
            })
            .await
    }

    /// Lease `holder`, if it is in the table (live or lapsed).
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn get(&self, holder: &str) -> Result<Option<LeaseRow>, StoreError> {
        let holder = holder.to_owned();
        self.registry
            .on("reading a lease", move |db| {
                db.row(
                "SELECT holder, host, pid, acquired_at, expires_at FROM leases WHERE holder = ?1",
                args![&holder],
                lease_row,
            )
            .map_err(failed("reading a lease"))
            })
            .await
    }

    /// Whether lease `holder` is held now: in the table and not past its
    /// expiry.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn is_live(&self, holder: &str) -> Result<bool, StoreError> {
        Ok(self
            .get(holder)
            .await?
            .is_some_and(|lease| lease.is_live(now_ms())))
    }

    /// Takes over, for `holder`, every `queued` or `running` run that
    /// `wanted` accepts and whose holder is dead (no lease, or a lapsed
    /// one), in one transaction, so of any number of processes looking at
    /// once each run goes to one.
    /// Lapsed leases that hold nothing more are removed.
    ///
    /// # Errors
    ///
    /// The database failed; then nothing was taken.
    pub async fn take_over_runs(
        &self,
        holder: &str,
        wanted: impl Fn(&RunRow) -> bool + Send + 'static,
    ) -> Result<Vec<TakenRun>, StoreError> {
        let holder = holder.to_owned();
        self.registry
            .tx("taking over runs", move |db| {
                let what = failed("taking over runs");
                let now = now_ms() as i64;
                // `runs_live` covers queued and running, the only states a
                // run is held in. A run queued for any process (held by none)
                // waits for one with room (`RunTable::claim_queued`).
                let found = db
                .rows(
                    "SELECT r.id, r.agent, r.status, r.created_at, r.updated_at, r.body, r.holder,
                            l.holder, l.host, l.pid, l.acquired_at, l.expires_at
                     FROM runs r LEFT JOIN leases l ON l.holder = r.holder
                     WHERE r.status IN ('queued', 'running')
                       AND (r.holder IS NULL OR l.holder IS NULL OR l.expires_at < ?1)
                       AND r.holder IS DISTINCT FROM ?2
                       AND NOT (r.status = 'queued' AND r.holder IS NULL)
                     ORDER BY r.created_at, r.id",
                    args![now, &holder],
                    |row| {
                        let run = run_row(row)?;
                        let lease = match row.opt_text(7)? {
                            Some(_) => Some(lease_at(row, 7)?),
                            None => None,
                        };
                        Ok((run, lease))
                    },
                )
                .map_err(&what)?;
                let mut runs = Vec::new();
                for (mut run, lease) in found {
                    if !wanted(&run) {
                        continue;
                    }
                    db.execute(
                        "UPDATE runs SET holder = ?2 WHERE id = ?1",
                        args![&run.id, &holder],
                    )
                    .map_err(&what)?;
                    let from = run.holder.replace(holder.clone());
                    runs.push(TakenRun { run, from, lease });
                }
                // A lapsed lease that holds no live run is of no more use: a
                // delivery naming it finds it gone, which is as dead.
                db.execute(
                    "DELETE FROM leases WHERE expires_at < ?1
                   AND NOT EXISTS (SELECT 1 FROM runs
                                   WHERE runs.holder = leases.holder
                                     AND runs.status IN ('queued', 'running'))",
                    args![now],
                )
                .map_err(&what)?;
                Ok(runs)
            })
            .await
    }
}
