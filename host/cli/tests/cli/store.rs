//! The store as the CLI opens it: only a path where nothing is makes a
//! new store, said in one line; a file that is not a store is refused,
//! its cause said once; an empty `HANE_STORE` is unset.

use std::process::Command;

use crate::common::{failed, hane_on, ok, text};

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
        for args in [&["runs", "list"][..], &["keys", "list"]] {
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
