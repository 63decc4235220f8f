//! `hane_store::check`: SQLite's integrity check and every stored item
//! read as its owner reads it, each one that does not reported by table
//! and id; writing nothing.

use hane_core::{AgentRun, Impact, JsonText, RunId, RunStatus};
use hane_store::{
    CheckReport, NewRelease, Problem, Registry, RunRow, SessionStore, StoreError, check,
};
use hane_stored::{EnvelopeError, seal};

use crate::{Scratch, older_than_the_mark, operation, run, tool_call};

/// Releases in these tests are sealed runs: the store knows no release
/// type, its caller says how one reads.
fn release(body: &[u8]) -> Result<(), EnvelopeError> {
    hane_stored::open::<AgentRun>(body).map(drop)
}

fn agent_run(at: u64) -> AgentRun {
    AgentRun {
        id: RunId::new(),
        agent: "vehicle-check".into(),
        release: 1,
        status: RunStatus::Succeeded,
        shadow: false,
        input: JsonText::parse(r#"{"vehicle":"500"}"#).unwrap(),
        result: None,
        error: None,
        tool_calls: Vec::new(),
        tokens_used: 0,
        tasks: Vec::new(),
        session: None,
        created_at_ms: at,
        updated_at_ms: at,
        resumable: true,
        resumed: 0,
    }
}

fn run_row(run: &AgentRun) -> RunRow {
    RunRow {
        id: run.id.to_string(),
        agent: run.agent.clone(),
        status: run.status,
        created_at_ms: run.created_at_ms,
        updated_at_ms: run.updated_at_ms,
        body: seal(run),
        holder: None,
    }
}

/// A store with a session of three events (one a tool call with an
/// operation), three runs and a release: 8 items. Returns the session's
/// id and the runs' ids.
async fn filled(scratch: &Scratch) -> (String, Vec<String>) {
    let store = scratch.open();
    let session = store.create_session().await.unwrap().id;
    let op = operation(&session, Impact::Read);
    store
        .append(&session, vec![run("a"), tool_call([&op]), run("b")])
        .await
        .unwrap();
    let registry = Registry::open(scratch.path()).unwrap();
    let mut runs = Vec::new();
    for at in [10, 20, 30] {
        let run = agent_run(at);
        // Stored as a process would: queued, running, then succeeded.
        let row = run_row(&run);
        for (from, status) in [
            (None, RunStatus::Queued),
            (Some(RunStatus::Queued), RunStatus::Running),
            (Some(RunStatus::Running), RunStatus::Succeeded),
        ] {
            let row = RunRow {
                status,
                ..row.clone()
            };
            match from {
                None => registry.runs().insert(row).await.unwrap(),
                Some(from) => registry.runs().update(from, row).await.unwrap(),
            }
        }
        runs.push(run.id.to_string());
    }
    registry
        .releases()
        .activate(NewRelease {
            source: "examples".into(),
            summary: "one agent".into(),
            body: seal(&agent_run(1)),
            components: Vec::new(),
        })
        .await
        .unwrap();
    (session.to_string(), runs)
}

fn db(scratch: &Scratch) -> rusqlite::Connection {
    rusqlite::Connection::open(scratch.path()).unwrap()
}

#[tokio::test]
async fn a_sound_store_reads_whole_every_item_counted() {
    let scratch = Scratch::new();
    filled(&scratch).await;
    let report = check(scratch.path(), release).unwrap();
    assert_eq!(
        report,
        CheckReport {
            path: scratch.path(),
            checked: 8,
            integrity: Vec::new(),
            problems: Vec::new(),
            damage: None,
        }
    );
    assert!(report.is_sound());
}

#[tokio::test]
async fn every_item_that_does_not_read_is_reported_by_table_and_id() {
    let scratch = Scratch::new();
    let (session, runs) = filled(&scratch).await;
    {
        let db = db(&scratch);
        db.execute(
            "UPDATE runs SET body = ?1 WHERE id = ?2",
            rusqlite::params![b"HANE\x09cut".to_vec(), runs[0]],
        )
        .unwrap();
        db.execute("UPDATE runs SET status = 'lost' WHERE id = ?1", [&runs[2]])
            .unwrap();
        db.execute("UPDATE events SET body = x'00' WHERE seq = 2", [])
            .unwrap();
        db.execute("UPDATE releases SET body = x'484e' WHERE number = 1", [])
            .unwrap();
    }
    let report = check(scratch.path(), release).unwrap();
    assert!(!report.is_sound());
    assert_eq!(report.checked, 8);
    assert!(report.integrity.is_empty(), "{:?}", report.integrity);
    let found: Vec<(&str, Option<&str>)> = report
        .problems
        .iter()
        .map(|p| (p.table, p.id.as_deref()))
        .collect();
    let event = format!("event 2 of session {session}");
    assert_eq!(
        found,
        [
            ("events", Some(event.as_str())),
            ("releases", Some("release 1")),
            ("runs", Some(runs[0].as_str())),
            ("runs", Some(runs[2].as_str())),
        ],
        "{:#?}",
        report.problems
    );
    assert_eq!(
        report.problems[1].to_string(),
        "releases release 1: not a hane envelope: the data does not start with `HANE`"
    );
    assert!(
        report.problems[2]
            .error
            .starts_with("`envelope` envelope is corrupt"),
        "{}",
        report.problems[2]
    );
    assert!(
        report.problems[3].error.starts_with("its status column: "),
        "{}",
        report.problems[3]
    );
}

#[tokio::test]
async fn what_sqlite_finds_wrong_with_the_file_is_reported() {
    let scratch = Scratch::new();
    filled(&scratch).await;
    // An index whose entries no longer match its definition, as a damaged
    // page leaves one.
    {
        let db = db(&scratch);
        db.execute_batch(
            "PRAGMA writable_schema = ON;
             UPDATE sqlite_master SET sql = 'CREATE INDEX runs_by_created ON runs (agent)'
             WHERE name = 'runs_by_created';
             PRAGMA writable_schema = OFF;",
        )
        .unwrap();
    }
    let report = check(scratch.path(), release).unwrap();
    assert!(!report.integrity.is_empty(), "{report:?}");
    assert!(
        report
            .integrity
            .iter()
            .any(|line| line.contains("runs_by_created")),
        "{:?}",
        report.integrity
    );
    assert!(!report.is_sound());
}

#[tokio::test]
async fn nothing_at_the_path_is_no_store_and_is_left_so() {
    let scratch = Scratch::new();
    let err = check(scratch.path(), release).unwrap_err();
    assert!(
        matches!(&err, StoreError::NoStore(path) if *path == scratch.path()),
        "{err:?}"
    );
    assert!(!scratch.path().exists());
    std::fs::write(scratch.path(), b"").unwrap();
    let err = check(scratch.path(), release).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err:?}");
}

#[tokio::test]
async fn a_store_of_an_older_schema_is_checked_as_it_is() {
    let scratch = Scratch::new();
    filled(&scratch).await;
    {
        let db = db(&scratch);
        db.execute_batch(
            "ALTER TABLE api_keys DROP COLUMN groups;
             DROP TABLE receptions;
             DROP TABLE evaluations;
             DROP TABLE workflow_cases;
             DROP TABLE schedule_ticks;
             DROP INDEX runs_live;
             DROP TABLE leases;
             ALTER TABLE runs DROP COLUMN holder;
             DROP TABLE conversation_entries;
             DROP TABLE conversations;
             DROP TABLE commit_mark;
             PRAGMA user_version = 3;",
        )
        .unwrap();
    }
    older_than_the_mark(&scratch);
    let report = check(scratch.path(), release).unwrap();
    assert!(report.is_sound(), "{report:?}");
    assert_eq!(report.checked, 8);
    let version: u32 = db(&scratch)
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, 3, "a check does not migrate");
}

#[test]
fn a_problem_names_its_table_and_item() {
    let problem = Problem {
        table: "runs",
        id: Some("run_1".into()),
        error: "damaged".into(),
    };
    assert_eq!(problem.to_string(), "runs run_1: damaged");
    let table = Problem {
        id: None,
        ..problem
    };
    assert_eq!(table.to_string(), "runs: damaged");
}
