//! Releases: numbered in order of activation, at most one active; the
//! components they run, stored once per digest. A release can also be
//! stored without being made active: a candidate, for an evaluation to
//! decide on.

use super::{ReleaseTable, now_ms};
use crate::StoreError;
use crate::sql::{Query, Row, Sql, SqlError, args, failed};

/// A release as listed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReleaseInfo {
    /// Its number, from 1, in order of activation.
    pub number: u64,
    /// When it was first activated, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Where it was activated from, such as a directory.
    pub source: String,
    /// One line about what it holds.
    pub summary: String,
    /// Whether it is the active release.
    pub active: bool,
}

/// A release to activate.
#[derive(Debug, Clone)]
pub struct NewRelease {
    /// Where it comes from.
    pub source: String,
    /// One line about what it holds.
    pub summary: String,
    /// Its body, sealed by the caller.
    pub body: Vec<u8>,
    /// The components it runs, by digest; stored once per digest.
    pub components: Vec<(String, Vec<u8>)>,
}

/// A release from a row whose first four columns are its number,
/// `created_at`, source and summary.
pub(crate) fn release_info(row: &dyn Row, active: bool) -> Result<ReleaseInfo, SqlError> {
    Ok(ReleaseInfo {
        number: row.int(0)? as u64,
        created_at_ms: row.int(1)? as u64,
        source: row.text(2)?,
        summary: row.text(3)?,
        active,
    })
}

impl ReleaseTable<'_> {
    /// Stores `release` and its components and makes it the active release,
    /// in one transaction.
    ///
    /// # Errors
    ///
    /// The database failed; then nothing changed.
    pub async fn activate(&self, release: NewRelease) -> Result<ReleaseInfo, StoreError> {
        self.registry
            .tx("activating a release", move |db| {
                let now = now_ms();
                let number = insert_release(db, &release, now)?;
                set_active(db, number, now)?;
                Ok(ReleaseInfo {
                    number,
                    created_at_ms: now,
                    source: release.source,
                    summary: release.summary,
                    active: true,
                })
            })
            .await
    }

    /// Every release, oldest first.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn list(&self) -> Result<Vec<ReleaseInfo>, StoreError> {
        self.registry
            .on("listing releases", |db| {
                db.rows(
                    "SELECT r.number, r.created_at, r.source, r.summary,
                        CASE WHEN a.number IS NULL THEN 0 ELSE 1 END
                 FROM releases r LEFT JOIN active_release a ON a.number = r.number
                 ORDER BY r.number",
                    &[],
                    |row| release_info(row, row.int(4)? != 0),
                )
                .map_err(failed("listing releases"))
            })
            .await
    }

    /// The active release and its body, if any release was activated.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn active(&self) -> Result<Option<(ReleaseInfo, Vec<u8>)>, StoreError> {
        self.registry
            .on("reading the active release", |db| {
                db.row(
                    "SELECT r.number, r.created_at, r.source, r.summary, r.body
                 FROM active_release a JOIN releases r ON r.number = a.number",
                    &[],
                    |row| Ok((release_info(row, true)?, row.blob(4)?)),
                )
                .map_err(failed("reading the active release"))
            })
            .await
    }

    /// The number of the active release.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn active_number(&self) -> Result<Option<u64>, StoreError> {
        self.registry
            .on("reading the active release", |db| {
                db.row("SELECT number FROM active_release", &[], |row| row.int(0))
                    .map(|n| n.map(|n| n as u64))
                    .map_err(failed("reading the active release"))
            })
            .await
    }

    /// Makes release `to` active again; without `to`, the release before
    /// the active one.
    ///
    /// # Errors
    ///
    /// [`StoreError::ReleaseNotFound`] when there is no such release (or
    /// nothing before the active one); the database failed.
    pub async fn rollback(&self, to: Option<u64>) -> Result<ReleaseInfo, StoreError> {
        self.registry
            .tx("rolling back", move |db| {
                let what = failed("rolling back");
                let active = db
                    .row("SELECT number FROM active_release", &[], |row| row.int(0))
                    .map_err(&what)?;
                let target = match to {
                    Some(n) => db
                        .row(
                            "SELECT number FROM releases WHERE number = ?1",
                            args![n as i64],
                            |row| row.int(0),
                        )
                        .map_err(&what)?,
                    None => match active {
                        Some(a) => db
                            .row(
                                "SELECT max(number) FROM releases WHERE number < ?1",
                                args![a],
                                |row| row.opt_int(0),
                            )
                            .map_err(&what)?
                            .flatten(),
                        None => None,
                    },
                };
                let Some(target) = target else {
                    return Err(StoreError::ReleaseNotFound(match to {
                        Some(n) => format!("release {n} does not exist"),
                        None if active.is_some() => {
                            "there is no release before the active one".to_owned()
                        }
                        None => "no release was ever activated".to_owned(),
                    }));
                };
                set_active(db, target as u64, now_ms())?;
                db.row(
                    "SELECT number, created_at, source, summary FROM releases WHERE number = ?1",
                    args![target],
                    |row| release_info(row, true),
                )
                .map_err(&what)?
                .ok_or_else(|| StoreError::Database("rolling back: the release went away".into()))
            })
            .await
    }

    /// The bytes of the component with this digest.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn component(&self, digest: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let digest = digest.to_owned();
        self.registry
            .on("reading a component", move |db| {
                db.row(
                    "SELECT bytes FROM components WHERE digest = ?1",
                    args![&digest],
                    |row| row.blob(0),
                )
                .map_err(failed("reading a component"))
            })
            .await
    }

    /// Stores `release` and its components without making it active: a
    /// candidate, which [`ReleaseTable::activate_stored`] makes active once
    /// its evaluations pass.
    ///
    /// # Errors
    ///
    /// The database failed; then nothing was stored.
    pub async fn store(&self, release: NewRelease) -> Result<ReleaseInfo, StoreError> {
        self.registry
            .tx("storing a release", move |db| {
                let now = now_ms();
                let number = insert_release(db, &release, now)?;
                Ok(ReleaseInfo {
                    number,
                    created_at_ms: now,
                    source: release.source,
                    summary: release.summary,
                    active: false,
                })
            })
            .await
    }

    /// Release `number` and its body, active or not.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn get(&self, number: u64) -> Result<Option<(ReleaseInfo, Vec<u8>)>, StoreError> {
        self.registry
            .on("reading a release", move |db| {
                db.row(
                    "SELECT r.number, r.created_at, r.source, r.summary,
                        CASE WHEN a.number IS NULL THEN 0 ELSE 1 END, r.body
                 FROM releases r LEFT JOIN active_release a ON a.number = r.number
                 WHERE r.number = ?1",
                    args![number as i64],
                    |row| Ok((release_info(row, row.int(4)? != 0)?, row.blob(5)?)),
                )
                .map_err(failed("reading a release"))
            })
            .await
    }

    /// Makes stored release `number` active.
    ///
    /// # Errors
    ///
    /// [`StoreError::ReleaseNotFound`] when there is no such release; the
    /// database failed.
    pub async fn activate_stored(&self, number: u64) -> Result<ReleaseInfo, StoreError> {
        self.registry
            .tx("activating a release", move |db| {
                let info = db
                .row(
                    "SELECT number, created_at, source, summary FROM releases WHERE number = ?1",
                    args![number as i64],
                    |row| release_info(row, true),
                )
                .map_err(failed("activating a release"))?
                .ok_or_else(|| {
                    StoreError::ReleaseNotFound(format!("release {number} does not exist"))
                })?;
                set_active(db, number, now_ms())?;
                Ok(info)
            })
            .await
    }
}

/// Stores `release` and its components; returns its number.
fn insert_release(db: &mut dyn Sql, release: &NewRelease, now: u64) -> Result<u64, StoreError> {
    for (digest, bytes) in &release.components {
        db.execute(
            "INSERT INTO components (digest, bytes) VALUES (?1, ?2)
             ON CONFLICT (digest) DO NOTHING",
            args![digest, bytes],
        )
        .map_err(failed("storing a component"))?;
    }
    let number = db
        .row(
            "INSERT INTO releases (created_at, source, summary, body) VALUES (?1, ?2, ?3, ?4)
             RETURNING number",
            args![now as i64, &release.source, &release.summary, &release.body],
            |row| row.int(0),
        )
        .map_err(failed("storing a release"))?
        .ok_or_else(|| StoreError::Database("storing a release: no number came back".into()))?;
    Ok(number as u64)
}

fn set_active(db: &mut dyn Sql, number: u64, now: u64) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO active_release (one, number, activated_at) VALUES (1, ?1, ?2)
         ON CONFLICT (one) DO UPDATE SET number = ?1, activated_at = ?2",
        args![number as i64, now as i64],
    )
    .map_err(failed("activating a release"))?;
    Ok(())
}
