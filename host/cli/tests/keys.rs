//! `hane keys create | list | remove`, run as the real binary against a
//! store in a temporary directory.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn hane(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(args)
        .arg("--store")
        .arg(store)
        .output()
        .expect("run hane")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// The exit code and stderr of a command that must fail.
fn refused(output: &Output) -> (Option<i32>, String) {
    assert!(!output.status.success(), "{}", text(&output.stdout));
    (output.status.code(), text(&output.stderr))
}

#[test]
fn keys_are_created_with_their_groups_listed_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");

    let created = hane(
        &store,
        &[
            "keys",
            "create",
            "desk",
            "--role",
            "approver",
            "--group",
            "fleet-desk",
            "--group",
            "lease desk",
            "--group",
            "fleet-desk",
        ],
    );
    let key = ok(&created);
    assert!(
        key.trim().starts_with("hane_") && key.trim().len() == 45,
        "{key}"
    );
    let said = text(&created.stderr);
    assert!(
        said.contains("deciding the actions of fleet-desk, lease desk;"),
        "{said}"
    );
    let ops: Value = serde_json::from_str(&ok(&hane(
        &store,
        &["keys", "create", "ops", "--role", "operator", "--json"],
    )))
    .unwrap();
    assert_eq!(ops["groups"], Value::Null);
    assert_eq!(ops["role"], "operator");
    ok(&hane(
        &store,
        &["keys", "create", "dashboard", "--role", "viewer"],
    ));

    let listed: Value =
        serde_json::from_str(&ok(&hane(&store, &["keys", "list", "--json"]))).unwrap();
    let shown: Vec<Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| json!([k["name"], k["role"], k["groups"]]))
        .collect();
    assert_eq!(
        shown,
        [
            json!(["dashboard", "viewer", null]),
            json!(["desk", "approver", ["fleet-desk", "lease desk"]]),
            json!(["ops", "operator", null]),
        ]
    );
    let table = ok(&hane(&store, &["keys", "list"]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].ends_with("GROUPS"), "{table}");
    assert!(
        lines[1].starts_with("dashboard") && lines[1].ends_with("  -"),
        "{table}"
    );
    assert!(lines[2].ends_with("  fleet-desk, lease desk"), "{table}");
    assert!(lines[3].ends_with("  (every group)"), "{table}");
    assert!(!table.contains(key.trim()), "a key is never shown again");

    // Refusals are usage errors that name what was wrong; nothing is added.
    let (code, said) = refused(&hane(
        &store,
        &["keys", "create", "v", "--role", "viewer", "--group", "desk"],
    ));
    assert_eq!(code, Some(2));
    assert!(said.contains("a viewer key decides no actions"), "{said}");
    let (code, said) = refused(&hane(
        &store,
        &["keys", "create", "w", "--role", "approver", "--group", ""],
    ));
    assert_eq!(code, Some(2));
    assert!(said.contains(r#"invalid group """#), "{said}");
    let (code, said) = refused(&hane(
        &store,
        &["keys", "create", "desk", "--role", "viewer"],
    ));
    assert_eq!(code, Some(2));
    assert!(said.contains("a key named `desk` already exists"), "{said}");
    let (code, said) = refused(&hane(&store, &["keys", "create", "x", "--role", "admin"]));
    assert_eq!(code, Some(2));
    assert!(said.contains("admin"), "{said}");
    let listed: Value =
        serde_json::from_str(&ok(&hane(&store, &["keys", "list", "--json"]))).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 3);

    let removed = hane(&store, &["keys", "remove", "desk"]);
    ok(&removed);
    assert!(text(&removed.stderr).contains("removed key `desk`"));
    let (code, said) = refused(&hane(&store, &["keys", "remove", "desk"]));
    assert_eq!(code, Some(2));
    assert!(said.contains("no key is named `desk`"), "{said}");
    let listed: Value =
        serde_json::from_str(&ok(&hane(&store, &["keys", "list", "--json"]))).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
}
