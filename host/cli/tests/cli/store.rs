//! The store as the CLI opens it: only a path where nothing is makes a
//! new store, said in one line; a file that is not a store is refused, its
//! cause said once; an empty `HANE_STORE` is unset; a listing leaves out a
//! damaged run and names it; `hane store check` reports every problem; a
//! damaged write-ahead log is reported until `hane store recover`.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{activated_examples, failed, hane_on, json, ok, text};

fn damage_run(store: &Path, id: &str) {
    let db = rusqlite::Connection::open(store).unwrap();
    let changed = db
        .execute("UPDATE runs SET body = x'48414e45ff' WHERE id = ?1", [id])
        .unwrap();
    assert_eq!(changed, 1, "no run {id}");
}

/// Runs the scripted vehicle check; the run's id.
fn run(store: &Path, vehicle: &str) -> String {
    let input = serde_json::json!({ "vehicle": vehicle }).to_string();
    let run = json(&hane_on(
        store,
        &["run", "vehicle-check-scripted", "--input", &input, "--json"],
    ));
    run["id"].as_str().unwrap().to_owned()
}

#[test]
fn a_file_that_is_not_a_store_is_refused_naming_it_and_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    for (content, cause) in [
        (
            &b""[..],
            "is empty: it is not a hane store; remove it to start a new store, or give the right path",
        ),
        (
            &b"notes, not a database; ".repeat(50)[..],
            "is not a SQLite database: it is not a hane store; give the right path, or move it away to start a new store there",
        ),
    ] {
        std::fs::write(&store, content).unwrap();
        for args in [
            &["runs", "list"][..],
            &["keys", "list"],
            &["store", "check"],
        ] {
            let stderr = failed(&hane_on(&store, args), 1);
            assert_eq!(
                stderr,
                format!("error: `{}` {cause}\n", store.display()),
                "{args:?}"
            );
        }
        assert_eq!(
            std::fs::read(&store).unwrap(),
            content,
            "the file is left as it was"
        );
    }
}

#[test]
fn a_new_store_is_made_only_where_nothing_is_and_said_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("mistyped.db");
    let first = hane_on(&store, &["runs", "list"]);
    ok(&first);
    assert_eq!(
        text(&first.stderr),
        format!(
            "hane: created a new store at {}\nno runs\n",
            store.display()
        )
    );
    let again = hane_on(&store, &["runs", "list"]);
    ok(&again);
    assert_eq!(text(&again.stderr), "no runs\n");
}

#[test]
fn an_empty_hane_store_is_unset() {
    let dir = tempfile::tempdir().unwrap();
    let listed = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["runs", "list"])
        .current_dir(dir.path())
        .env("HANE_STORE", "")
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .unwrap();
    ok(&listed);
    let default = dir.path().join("hane/hane.db");
    assert!(default.is_file(), "{}", text(&listed.stderr));
    assert!(
        text(&listed.stderr).contains(&format!("created a new store at {}", default.display())),
        "{}",
        text(&listed.stderr)
    );
}

#[test]
fn a_run_that_does_not_read_is_left_out_of_the_listing_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = activated_examples(dir.path());
    let good = run(&store, "架空 500 さ 12-34");
    let damaged = run(&store, "架空 1 x 0");
    damage_run(&store, &damaged);

    let listed: Output = hane_on(&store, &["runs", "list"]);
    let out = ok(&listed);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with(&good), "{out}");
    let said = text(&listed.stderr);
    assert!(
        said.starts_with(&format!(
            "hane: skipped 1 run that could not be read: {damaged} (`envelope` envelope is corrupt: "
        )),
        "{said}"
    );
    assert!(
        said.trim_end()
            .ends_with("; `hane store check` reports every one"),
        "{said}"
    );
    assert_eq!(said.lines().count(), 1, "{said}");

    let as_json: Value = json(&hane_on(&store, &["runs", "list", "--json"]));
    let ids: Vec<&str> = as_json
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [good.as_str()]);

    let shown = failed(&hane_on(&store, &["runs", "show", &damaged]), 1);
    assert!(shown.contains(&format!("run {damaged}: ")), "{shown}");
}

#[test]
fn store_check_reports_each_problem_by_table_and_id_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let store = activated_examples(dir.path());
    let first = run(&store, "架空 500 さ 12-34");
    run(&store, "架空 1 x 0");

    let sound = hane_on(&store, &["store", "check"]);
    let out = ok(&sound);
    let summary = out.lines().last().unwrap();
    let prefix = format!("store {}: ", store.display());
    assert!(summary.starts_with(&prefix), "{out}");
    assert!(summary.ends_with(" items checked, no problems"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    let checked: u64 = summary[prefix.len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(checked > 2, "the release, the runs and their events: {out}");

    damage_run(&store, &first);
    let damaged = hane_on(&store, &["store", "check"]);
    assert_eq!(damaged.status.code(), Some(1), "{}", text(&damaged.stderr));
    let out = text(&damaged.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with(&format!("runs {first}: `envelope` envelope is corrupt: ")),
        "{out}"
    );
    assert_eq!(
        lines[1],
        format!("{prefix}{checked} items checked, 1 problem")
    );

    let report = hane_on(&store, &["store", "check", "--json"]);
    assert_eq!(report.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["sound"], false);
    assert_eq!(report["problems"][0]["table"], "runs");
    assert_eq!(report["problems"][0]["id"], first.as_str());
}

/// The store's files as a crash would leave them: copied into `to` while
/// a connection (`_held`) keeps the store open, so the last commits are in
/// its log only.
fn crashed(store: &Path, _held: &rusqlite::Connection, to: &Path) -> std::path::PathBuf {
    let copy = to.join("hane.db");
    for suffix in ["", "-wal", "-mark"] {
        let from = format!("{}{suffix}", store.display());
        std::fs::copy(&from, format!("{}{suffix}", copy.display()))
            .unwrap_or_else(|e| panic!("copying {from}: {e}"));
    }
    copy
}

/// A write-ahead log that lost committed runs is reported by every command
/// that opens the store, and by the check; `hane store recover` accepts
/// the loss and the store opens again.
#[test]
fn a_damaged_log_is_reported_never_silently_absorbed() {
    let dir = tempfile::tempdir().unwrap();
    let store = activated_examples(dir.path());
    // Held open, so the runs' commits stay in the log as `hane` exits.
    let holder = rusqlite::Connection::open(&store).unwrap();
    holder
        .query_row("SELECT count(*) FROM runs", [], |row| row.get::<_, i64>(0))
        .unwrap();
    let runs = [run(&store, "架空 500 さ 12-34"), run(&store, "架空 1 x 0")];
    let intact_dir = tempfile::tempdir().unwrap();
    let intact = crashed(&store, &holder, intact_dir.path());
    let listed = ok(&hane_on(&intact, &["runs", "list"]));
    let crash = tempfile::tempdir().unwrap();
    let copy = crashed(&store, &holder, crash.path());
    for id in &runs {
        assert!(
            listed.contains(id.as_str()),
            "an undamaged log replays: {listed}"
        );
    }

    // The log's header overwritten: SQLite would replay none of it.
    let log = format!("{}-wal", copy.display());
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[..32].fill(0x5a);
    std::fs::write(&log, &bytes).unwrap();
    let kept = format!("{}-wal.damaged", copy.display());
    for args in [
        &["runs", "list"][..],
        &["run", "vehicle-check-scripted", "--input", "{}"],
    ] {
        let stderr = failed(&hane_on(&copy, args), 1);
        assert!(
            stderr.starts_with(&format!(
                "error: the store at {} is damaged: it holds ",
                copy.display()
            )),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("the log is kept at {kept}")),
            "{stderr}"
        );
        assert!(stderr.contains("`hane store recover`"), "{stderr}");
    }
    assert_eq!(std::fs::read(&kept).unwrap(), bytes, "kept as it was found");

    let checked = hane_on(&copy, &["store", "check"]);
    assert_eq!(checked.status.code(), Some(1), "{}", text(&checked.stderr));
    let out = text(&checked.stdout);
    assert!(out.starts_with("damage: it holds "), "{out}");
    assert!(out.trim_end().ends_with("1 problem"), "{out}");
    let report: Value =
        serde_json::from_slice(&hane_on(&copy, &["store", "check", "--json"]).stdout).unwrap();
    assert_eq!(report["sound"], false);
    assert!(report["damage"].as_str().unwrap().contains("acknowledged"));

    let recovered = ok(&hane_on(&copy, &["store", "recover"]));
    assert!(recovered.contains("it now opens as it is"), "{recovered}");
    let listed = ok(&hane_on(&copy, &["runs", "list"]));
    for id in &runs {
        assert!(
            !listed.contains(id.as_str()),
            "the lost runs are not made up: {listed}"
        );
    }
    run(&copy, "架空 500 さ 12-34");
    ok(&hane_on(&copy, &["store", "check"]));
    let again = ok(&hane_on(&copy, &["store", "recover"]));
    assert!(again.contains("nothing to recover"), "{again}");
    drop(holder);
}

#[test]
fn store_check_makes_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("absent.db");
    let stderr = failed(&hane_on(&store, &["store", "check"]), 1);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: there is no store at `{}`: nothing is at that path",
            store.display()
        )
    );
    assert!(!store.exists());
}

/// A PostgreSQL database as the store: made a store once, said in one
/// line naming server and database; its password never printed; `hane
/// store check` refuses it by name.
#[test]
fn a_postgres_database_is_a_store_and_its_password_is_never_shown() {
    let db = hane_test_support::postgres::database();
    // The test server trusts every login, so any password is accepted.
    let url = db
        .url
        .replacen("postgres://hane@", "postgres://hane:s3cret@", 1);
    let store = Path::new(&url);
    let server = hane_test_support::postgres::server();
    let place = format!("127.0.0.1:{}/{}", server.port, db.name);

    let made = hane_on(store, &["runs", "list"]);
    let said = text(&made.stderr);
    ok(&made);
    assert!(
        said.contains(&format!("hane: created a new store at {place}")),
        "{said}"
    );
    let again = hane_on(store, &["runs", "list"]);
    ok(&again);
    assert!(!text(&again.stderr).contains("created"), "made once");

    let check = hane_on(store, &["store", "check"]);
    let message = failed(&check, 1);
    assert!(message.contains("is a PostgreSQL database"), "{message}");
    for output in [&made, &again, &check] {
        let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
        assert!(!all.contains("s3cret"), "{all}");
    }

    // `hane serve` names the store it serves as the registry does.
    crate::common::operator_key(store);
    let mut serve = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", &url])
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = serve.stderr.take().unwrap();
    let mut said = String::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
        let line = line.unwrap();
        said.push_str(&line);
        said.push('\n');
        if line.starts_with("no release is active in") {
            break;
        }
    }
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(
        said.contains(&format!("no release is active in {place}")),
        "{said}"
    );
    assert!(!said.contains("s3cret"), "{said}");
}
