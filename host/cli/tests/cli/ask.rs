//! `hane ask`: reception from the terminal, on the examples (whose
//! recorded provider holds the model's choice for the demo's request).

use std::path::Path;
use std::process::Output;

use serde_json::json;

use crate::common::{activated_examples, failed, hane_on, json, ok, text};

const REQUEST: &str = "When does the inspection of 架空 300 あ 10-02 expire?";

fn hane(store: &Path, args: &[&str]) -> Output {
    hane_on(store, args)
}

#[test]
fn a_dry_run_says_what_would_start_and_a_request_starts_and_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = activated_examples(dir.path());
    let out = ok(&hane(&store, &["ask", "--dry-run", REQUEST]));
    assert!(out.contains("  would_start  vehicle-check-llm"), "{out}");
    assert!(
        out.contains(r#"  input         {"vehicle":"架空 300 あ 10-02"}"#),
        "{out}"
    );
    assert!(
        out.contains(
            "  model         fleet-assistant/fleet-assistant: 701 input + 52 output tokens"
        ),
        "{out}"
    );
    let runs = ok(&hane(&store, &["runs", "list"]));
    assert!(!runs.contains("vehicle-check-llm"), "{runs}");

    // Started, the run is followed to its end and printed with it.
    let answer = json(&hane(&store, &["ask", "--json", REQUEST]));
    assert_eq!(answer["status"], "started", "{answer:#}");
    assert_eq!(answer["input"], json!({"vehicle": "架空 300 あ 10-02"}));
    assert_eq!(answer["agentRun"]["status"], "succeeded", "{answer:#}");
    assert_eq!(answer["agentRun"]["id"], answer["run"]);
    let runs = ok(&hane(&store, &["runs", "list"]));
    assert_eq!(runs.matches("vehicle-check-llm").count(), 1, "{runs}");
}

#[test]
fn a_request_nothing_fits_is_declined_with_exit_2_and_bad_text_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = activated_examples(dir.path());
    let output = hane(&store, &["ask", "Bake me a chocolate cake"]);
    failed(&output, 2);
    let out = text(&output.stdout);
    assert!(out.contains("  declined  -"), "{out}");
    assert!(
        out.contains("  missing       a request for what an agent"),
        "{out}"
    );
    let err = failed(&hane(&store, &["ask", "   "]), 2);
    assert!(err.contains("`text` is empty"), "{err}");
}

#[test]
fn show_request_prints_what_the_model_would_be_asked_and_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = activated_examples(dir.path());
    let request = json(&hane(&store, &["ask", "--show-request", REQUEST]));
    let mut tools: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    tools.sort_unstable();
    assert_eq!(
        tools,
        [
            "decline",
            "start_inspection-reminder",
            "start_vehicle-check-llm",
            "start_vehicle-check-scripted"
        ]
    );
    assert_eq!(request["toolChoice"], "required");
    let output = hane(&store, &["ask", "--show-request", "Bake me a cake"]);
    assert!(text(&output.stdout).is_empty());
    assert!(text(&output.stderr).contains("no model is asked"));
    let runs = ok(&hane(&store, &["runs", "list"]));
    assert!(!runs.contains("run_"), "{runs}");
}
