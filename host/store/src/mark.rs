//! The commit mark: how far the store's commits are known to reach, kept
//! outside the write-ahead log.
//!
//! SQLite replays its log (`-wal`) up to the first frame that does not
//! read (a checksum that does not match, a header of other bytes) and
//! takes what follows for a write never finished. A log damaged in its
//! first frames therefore replays to nothing, and the commits it held are
//! gone without a word: the next connection to close even removes it.
//!
//! So every write transaction also counts itself in the database
//! (`commit_mark.n`, one more per transaction), and after each commit
//! synced to disk the count is written to a small file beside the
//! database (`<store>-mark`). A store whose database holds fewer commits
//! than its mark says were synced has lost some: opening it for writing
//! is refused, its log is copied aside first, and `hane store check`
//! reports it. The mark trails the database, never leads it: it is
//! written only once the log holding the count is on disk, so a torn
//! write of an unsynced commit, which the log's checksums drop as they
//! should, is never mistaken for damage.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension as _};

use crate::StoreError;
use crate::schema::sibling;

/// The file beside the store that holds its mark.
pub(crate) const MARK_SUFFIX: &str = "-mark";

/// What a mark file starts with; the count follows, 8 bytes little-endian.
const MAGIC: &[u8; 8] = b"hanemrk1";
const MARK_LEN: usize = 16;

/// Counts the transaction open on `conn` in the database: run inside
/// every write transaction that changed something, before its commit.
/// The commits the database holds with it.
pub(crate) fn count(conn: &Connection) -> rusqlite::Result<u64> {
    let n: i64 = conn
        .prepare_cached("UPDATE commit_mark SET n = n + 1 WHERE one = 1 RETURNING n")?
        .query_row([], |row| row.get(0))?;
    Ok(n.max(0) as u64)
}

/// What is wrong with a store whose commits do not reach its mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The database holds fewer commits than were synced: the log that
    /// held the rest does not replay (or the file is an older copy).
    LostCommits {
        /// The commits the database holds.
        holds: u64,
        /// The commits known to have been synced to disk.
        acknowledged: u64,
        /// Where the log was copied before anything could remove it;
        /// `None` when no log was left.
        kept: Option<PathBuf>,
    },
    /// The mark file holds something other than a mark.
    UnreadableMark {
        /// The mark file.
        mark: PathBuf,
        /// Its length in bytes.
        len: u64,
    },
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::LostCommits {
                holds,
                acknowledged,
                kept,
            } => {
                let lost = acknowledged - holds;
                write!(
                    f,
                    "it holds {holds} commits, but {acknowledged} were synced to disk: {lost} \
                     acknowledged {} missing, so its write-ahead log does not replay (or the \
                     file is an older copy)",
                    if lost == 1 {
                        "commit is"
                    } else {
                        "commits are"
                    }
                )?;
                match kept {
                    Some(kept) => write!(f, "; the log is kept at {}", kept.display()),
                    None => f.write_str("; no log was left beside it"),
                }
            }
            Damage::UnreadableMark { mark, len } => write!(
                f,
                "its commit mark {} is not one hane wrote ({len} bytes), so what was committed \
                 cannot be checked",
                mark.display()
            ),
        }
    }
}

/// The mark file of an open store, advanced after synced commits.
#[derive(Debug)]
pub(crate) struct Mark {
    file: Option<File>,
    path: PathBuf,
}

impl Mark {
    /// The mark of the store at `db`, opened when first advanced.
    pub(crate) fn of(db: &Path) -> Self {
        Self {
            file: None,
            path: sibling(db, MARK_SUFFIX),
        }
    }

    /// Records that `n` commits are on disk, unless the mark already says
    /// as many: another connection, of this process or another, may have
    /// advanced it past `n` meanwhile. A lock on the file orders the
    /// read and the write across processes. A mark that cannot be written
    /// stays behind, which only checks less.
    pub(crate) fn advance(&mut self, n: u64) {
        if self.file.is_none() {
            self.file = open_mark(&self.path).ok();
        }
        let Some(file) = &self.file else { return };
        if file.lock().is_err() {
            return;
        }
        if read_count(file).is_ok_and(|count| count.unwrap_or(0) < n) {
            drop(file.write_all_at(&encode(n), 0));
        }
        drop(file.unlock());
    }
}

fn open_mark(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
}

fn encode(n: u64) -> [u8; MARK_LEN] {
    let mut bytes = [0; MARK_LEN];
    bytes[..8].copy_from_slice(MAGIC);
    bytes[8..].copy_from_slice(&n.to_le_bytes());
    bytes
}

/// The count in a mark file: `None` when it is empty (made, never
/// written); an error naming its length when it is not a mark.
fn read_count(file: &File) -> Result<Option<u64>, u64> {
    let len = file.metadata().map_err(|_| 0u64)?.len();
    if len == 0 {
        return Ok(None);
    }
    let mut bytes = [0; MARK_LEN];
    if len != MARK_LEN as u64 || file.read_exact_at(&mut bytes, 0).is_err() {
        return Err(len);
    }
    if &bytes[..8] != MAGIC {
        return Err(len);
    }
    let mut count = [0; 8];
    count.copy_from_slice(&bytes[8..]);
    Ok(Some(u64::from_le_bytes(count)))
}

/// The commits the database on `conn` holds: 0 for a store of a schema
/// without the count.
fn holds(conn: &Connection, path: &Path) -> Result<u64, StoreError> {
    let failed = |e: rusqlite::Error| {
        StoreError::Database(format!(
            "reading the commit count of {}: {e}",
            path.display()
        ))
    };
    let counted: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'commit_mark')",
            [],
            |row| row.get(0),
        )
        .map_err(failed)?;
    if !counted {
        return Ok(0);
    }
    let n: Option<i64> = conn
        .query_row("SELECT n FROM commit_mark WHERE one = 1", [], |row| {
            row.get(0)
        })
        .optional()
        .map_err(failed)?;
    Ok(n.map_or(0, |n| n.max(0) as u64))
}

/// Compares the database on `conn` (opened, nothing written yet) with its
/// mark. When commits are missing, the log is first copied aside, since
/// closing the connection may remove it.
pub(crate) fn inspect(conn: &Connection, path: &Path) -> Result<Option<Damage>, StoreError> {
    let mark_path = sibling(path, MARK_SUFFIX);
    let acknowledged = match File::open(&mark_path) {
        Ok(file) => match read_count(&file) {
            Ok(count) => count.unwrap_or(0),
            Err(len) => {
                return Ok(Some(Damage::UnreadableMark {
                    mark: mark_path,
                    len,
                }));
            }
        },
        Err(e) if e.kind() == ErrorKind::NotFound => 0,
        Err(e) => {
            return Err(StoreError::Database(format!(
                "reading {}: {e}",
                mark_path.display()
            )));
        }
    };
    let holds = holds(conn, path)?;
    if holds >= acknowledged {
        return Ok(None);
    }
    Ok(Some(Damage::LostCommits {
        holds,
        acknowledged,
        kept: keep_log(path)?,
    }))
}

/// Refuses a store that has lost commits (see [`inspect`]).
pub(crate) fn refuse_damaged(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    match inspect(conn, path)? {
        None => Ok(()),
        Some(damage) => Err(StoreError::Damaged {
            path: path.to_owned(),
            damage,
        }),
    }
}

/// Copies the log beside `path` to `<store>-wal.damaged` (or
/// `.damaged.2`, … when that is taken by another log), unless a copy
/// with the same bytes is there already. `None` when there is no log or
/// it is empty, and no copy was kept before.
fn keep_log(path: &Path) -> Result<Option<PathBuf>, StoreError> {
    let log = sibling(path, "-wal");
    let failed = |doing: &str, e: std::io::Error| {
        StoreError::Database(format!("{doing} {}: {e}", log.display()))
    };
    let bytes = match std::fs::read(&log) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(failed("reading", e)),
    };
    let mut last_kept = None;
    for n in 1.. {
        let kept = if n == 1 {
            sibling(path, "-wal.damaged")
        } else {
            sibling(path, &format!("-wal.damaged.{n}"))
        };
        match std::fs::read(&kept) {
            Ok(existing) => {
                if !bytes.is_empty() && existing == bytes {
                    return Ok(Some(kept));
                }
                last_kept = Some(kept);
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if bytes.is_empty() {
                    return Ok(last_kept);
                }
                let copy = || -> std::io::Result<()> {
                    let file = OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&kept)?;
                    file.write_all_at(&bytes, 0)?;
                    file.sync_all()
                };
                copy().map_err(|e| failed("copying the damaged log", e))?;
                return Ok(Some(kept));
            }
            Err(e) => return Err(failed("reading a copy of", e)),
        }
    }
    unreachable!("the loop returns")
}

/// What [`recover`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The store's file.
    pub path: PathBuf,
    /// What was wrong, if anything; the store now opens as it is.
    pub damage: Option<Damage>,
    /// The commits the store holds, which its mark now says.
    pub holds: u64,
}

/// Accepts a damaged store as it is: its mark is set to the commits the
/// database holds, so that it opens again. The damaged log, if any, stays
/// where [`Damage::LostCommits`] says it was kept; nothing in the database
/// changes. A store that is not damaged is left as it is.
///
/// # Errors
///
/// As [`crate::check`]: nothing at `path`, something other than a hane
/// store, a newer schema, or a file that cannot be read or a mark that
/// cannot be written.
pub fn recover(path: impl AsRef<Path>) -> Result<Recovered, StoreError> {
    let path = path.as_ref();
    if crate::schema::inspect(path)? == crate::schema::Found::Nothing {
        return Err(StoreError::NoStore(path.to_owned()));
    }
    let conn = crate::schema::connect(path)?;
    crate::schema::refuse_foreign(&conn, path)?;
    let damage = inspect(&conn, path)?;
    let holds = holds(&conn, path)?;
    if damage.is_some() {
        let mark = sibling(path, MARK_SUFFIX);
        let write = || -> std::io::Result<()> {
            let file = open_mark(&mark)?;
            file.lock()?;
            file.set_len(0)?;
            file.write_all_at(&encode(holds), 0)?;
            file.sync_all()
        };
        write().map_err(|e| StoreError::Database(format!("writing {}: {e}", mark.display())))?;
    }
    Ok(Recovered {
        path: path.to_owned(),
        damage,
        holds,
    })
}

/// Starts a new store's mark at nothing, replacing a mark left by a store
/// that was removed without it.
pub(crate) fn reset(db: &Path) -> Result<(), StoreError> {
    let mark = sibling(db, MARK_SUFFIX);
    match std::fs::remove_file(&mark) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::Database(format!(
            "removing the stale {}: {e}",
            mark.display()
        ))),
    }
}
