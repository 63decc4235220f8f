//! `hane workflow` and workflow cases under `hane serve`: a case waiting
//! for a person survives `kill -9` of the server and goes on at its step
//! in the next one, its first step not run again; and the CLI's own
//! start, complete and show.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{activated_examples, failed, hane_on, json, ok, operator_key, request, serve};

/// Reads the case at `path` until it is `wanted`.
fn settled(addr: &str, path: &str, key: &str, wanted: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, case) = request(addr, "GET", path, key, None);
        assert_eq!(status, 200, "{case}");
        if case["status"] == wanted {
            return case;
        }
        assert!(Instant::now() < deadline, "never {wanted}: {case:#}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn lease_qa_runs(store: &Path) -> usize {
    json(&hane_on(
        store,
        &["runs", "list", "--agent", "lease-qa", "--json"],
    ))
    .as_array()
    .unwrap()
    .len()
}

#[test]
fn a_case_waiting_for_a_person_survives_kill_9_of_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let store = activated_examples(dir.path());
    let key = operator_key(&store);
    let (mut first, addr) = serve(&store);
    let (status, case) = request(
        &addr,
        "POST",
        "/v1/agents/workflows/lease-inquiry/cases",
        &key,
        Some(&json!({"input": {"contract_no": "C-9999"}})),
    );
    assert_eq!(status, 201, "{case}");
    let path = format!(
        "/v1/agents/workflows/lease-inquiry/cases/{}",
        case["id"].as_str().unwrap()
    );
    let waiting = settled(&addr, &path, &key, "waiting");
    assert_eq!(waiting["steps"][1]["status"], "waiting");
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    assert_eq!(lease_qa_runs(&store), 1);

    let (mut second, addr) = serve(&store);
    let (status, case) = request(&addr, "GET", &path, &key, None);
    assert_eq!(
        (status, &case["status"]),
        (200, &json!("waiting")),
        "{case}"
    );
    let (status, case) = request(
        &addr,
        "POST",
        &format!("{path}/tasks/desk"),
        &key,
        Some(&json!({"result": {"contract_no": "C-1003"}})),
    );
    assert_eq!(status, 200, "{case}");
    let done = settled(&addr, &path, &key, "succeeded");
    assert_eq!(done["steps"][0]["run"], waiting["steps"][0]["run"]);
    assert_eq!(done["steps"][2]["output"]["lessee"], "Aoba Florists");
    second.kill().unwrap();
    second.wait().unwrap();
    // The first step ran once, before the kill; the last once, after.
    assert_eq!(lease_qa_runs(&store), 2);
}

#[test]
fn the_cli_starts_completes_and_shows_a_case() {
    let dir = tempfile::tempdir().unwrap();
    let store = activated_examples(dir.path());
    let out = ok(&hane_on(
        &store,
        &[
            "workflow",
            "start",
            "lease-inquiry",
            "--input",
            r#"{"contract_no":"C-9999"}"#,
        ],
    ));
    assert!(
        out.contains("of lease-inquiry (release 1): waiting"),
        "{out}"
    );
    assert!(
        out.contains("task for leasing-desk: Find lease contract C-9999: it is not in the ledger"),
        "{out}"
    );
    let case = json(&hane_on(
        &store,
        &["workflow", "list", "--status", "waiting", "--json"],
    ))[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        out.contains(&format!("complete it: hane workflow complete {case} desk")),
        "{out}"
    );
    let out = ok(&hane_on(
        &store,
        &[
            "workflow",
            "complete",
            &case,
            "desk",
            "--result",
            r#"{"contract_no":"C-1002"}"#,
            "--by",
            "aoi",
        ],
    ));
    assert!(out.contains("): succeeded"), "{out}");
    assert!(out.contains("Minato Catering"), "{out}");
    let shown = json(&hane_on(&store, &["workflow", "show", &case, "--json"]));
    assert_eq!(shown["steps"][1]["task"]["completedBy"], "aoi");
    // Bad input is a usage error naming the place; so is an unknown case.
    let err = failed(
        &hane_on(
            &store,
            &[
                "workflow",
                "start",
                "lease-inquiry",
                "--input",
                r#"{"contract_no":"X"}"#,
            ],
        ),
        2,
    );
    assert!(err.contains("at `/contract_no`"), "{err}");
    let err = failed(
        &hane_on(
            &store,
            &["workflow", "show", "case_00000000000000000000000000"],
        ),
        2,
    );
    assert!(
        err.contains("workflow case `case_00000000000000000000000000` not found"),
        "{err}"
    );
}
