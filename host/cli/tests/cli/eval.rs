//! `hane eval` and `hane release activate --eval`: the examples' suite
//! passing with exit 0, a broken candidate refused with exit 1 and the
//! active release unchanged, and `hane eval compare` naming the regressed
//! case with exit 1.

use std::process::{Command, Output};

use hane_test_support::{examples_copy, replace_in};

use crate::common::{activated_examples, failed, hane_on, json, ok, text};

/// Stdout of an `output` that exited with `code`.
fn stdout_of(output: &Output, code: i32) -> String {
    failed(output, code);
    text(&output.stdout)
}

#[test]
fn a_suite_passes_a_broken_candidate_is_refused_and_compare_names_the_regression() {
    let dir = tempfile::tempdir().unwrap();
    let store = activated_examples(dir.path());
    let out = ok(&hane_on(&store, &["eval", "run", "lease-qa-eval"]));
    assert!(
        out.contains(
            "of lease-qa-eval (agent lease-qa, release 1): 2/2 passed, 100% (passRate 100%): ok"
        ),
        "{out}"
    );
    assert!(
        out.contains("  Contract in the ledger      passed"),
        "{out}"
    );
    let baseline = json(&hane_on(&store, &["eval", "list", "--json"]))[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let broken = examples_copy();
    replace_in(
        &broken.path().join("agents/lease-qa.yaml"),
        "lessee: \"${steps.contract.records.0.lessee}\"",
        "lessee: \"${input.contract_no}\"",
    );
    let output = hane_on(
        &store,
        &[
            "release",
            "activate",
            "--eval",
            broken.path().to_str().unwrap(),
        ],
    );
    let out = stdout_of(&output, 1);
    assert!(out.contains("release 2, candidate): 1/2 passed"), "{out}");
    assert!(
        out.contains("      /lessee: expected \"Kita Logistics\", found \"C-1001\""),
        "{out}"
    );
    let err = text(&output.stderr);
    assert!(
        err.contains("release 2 was not activated: lease-qa-eval below its passRate"),
        "{err}"
    );
    let releases = ok(&hane_on(&store, &["release", "list"]));
    let lines: Vec<&str> = releases.lines().collect();
    assert!(
        lines[0].contains("CREATED") && lines[0].contains("STATE"),
        "a header: {releases}"
    );
    assert!(
        lines[1].starts_with("*    1") && lines[1].contains(" active "),
        "{releases}"
    );
    assert!(
        lines[2].starts_with("     2") && lines[2].contains(" refused "),
        "{releases}"
    );

    // Shown, the candidate's evaluation says each case's input and
    // result.
    let candidate = json(&hane_on(&store, &["eval", "list", "--json"]))[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = ok(&hane_on(&store, &["eval", "show", &candidate]));
    assert!(
        shown.contains(r#"      input   {"contract_no":"C-1001"}"#),
        "{shown}"
    );
    assert!(shown.contains(r#""lessee":"C-1001""#), "{shown}");
    assert!(shown.contains("      result  "), "{shown}");

    // The candidate's evaluation is the newest: compared with the
    // baseline, the case it broke is regressed.
    let candidate = json(&hane_on(&store, &["eval", "list", "--json"]))[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let output = hane_on(&store, &["eval", "compare", &baseline, &candidate]);
    let out = stdout_of(&output, 1);
    assert!(
        out.contains("  regressed      Contract in the ledger"),
        "{out}"
    );
    assert!(
        out.contains("  unchanged      Contract not in the ledger"),
        "{out}"
    );
    assert!(out.contains("1 regressed, 1 unchanged"), "{out}");
    // Compared the other way round, it is fixed: exit 0.
    let out = ok(&hane_on(
        &store,
        &["eval", "compare", &candidate, &baseline],
    ));
    assert!(
        out.contains("  fixed          Contract in the ledger"),
        "{out}"
    );

    // HANE_RELEASE_EVAL makes --eval the default; --no-eval skips it.
    let eval_by_default = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hane"))
            .args(args)
            .arg("--store")
            .arg(&store)
            .env("HANE_CACHE_DIR", hane_test_support::component_cache())
            .env("HANE_RELEASE_EVAL", "1")
            .output()
            .unwrap()
    };
    let path = broken.path().to_str().unwrap();
    let out = stdout_of(&eval_by_default(&["release", "activate", path]), 1);
    assert!(out.contains("release 3, candidate): 1/2 passed"), "{out}");
    let out = ok(&eval_by_default(&[
        "release",
        "activate",
        "--no-eval",
        path,
    ]));
    assert!(out.starts_with("activated release 4:"), "{out}");
}

#[test]
fn unknown_suites_and_evaluations_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let store = activated_examples(dir.path());
    let err = failed(&hane_on(&store, &["eval", "run", "nobody-eval"]), 2);
    assert!(
        err.contains("suite `nobody-eval` is not in release 1; its suites are lease-qa-eval"),
        "{err}"
    );
    let err = failed(
        &hane_on(&store, &["eval", "show", "eval_00000000000000000000000000"]),
        2,
    );
    assert!(
        err.contains("evaluation `eval_00000000000000000000000000` not found"),
        "{err}"
    );
}
