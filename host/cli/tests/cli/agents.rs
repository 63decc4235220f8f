//! `hane release`, `hane run`, `hane runs`, `hane demo` and `hane keys`,
//! run as the real binary against a store in a temporary directory.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::common::{failed, hane_on, ok, text};

use hane_test_support::examples;

fn hane(store: &Path, args: &[&str]) -> Output {
    hane_on(store, args)
}

#[test]
fn verbose_shows_the_run_its_tool_calls_and_operations_with_their_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    ok(&hane(
        &store,
        &["release", "activate", examples().to_str().unwrap()],
    ));
    let vehicle = r#"{"vehicle": "架空 500 さ 12-34"}"#;
    let verbose = hane(
        &store,
        &[
            "-v",
            "run",
            "vehicle-check-scripted",
            "--input",
            vehicle,
            "--json",
        ],
    );
    let run: Value = serde_json::from_str(&ok(&verbose)).unwrap();
    let log = text(&verbose.stderr);
    let id = run["id"].as_str().unwrap();
    assert!(log.contains(&format!("run{{run={id}")), "{log}");
    assert!(log.contains("tool_call{tool=\"data.find_record\""), "{log}");
    assert!(log.contains("operation{operation=op_"), "{log}");
    assert!(log.contains("run ended status=\"succeeded\""), "{log}");
    // Without -v, nothing but errors.
    let quiet = hane(
        &store,
        &["run", "vehicle-check-scripted", "--input", vehicle],
    );
    ok(&quiet);
    assert_eq!(text(&quiet.stderr), "");
}

#[test]
fn release_run_and_runs_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let examples = examples();
    let examples = examples.to_str().unwrap();

    // Nothing active yet: a clear usage error.
    let none = hane(&store, &["run", "vehicle-check-scripted", "--input", "{}"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none.stderr).contains("no release is active"),
        "{}",
        text(&none.stderr)
    );

    let activated = ok(&hane(&store, &["release", "activate", examples]));
    assert!(
        activated.contains(
            "activated release 1: 8 agents, 7 operations, 1 model provider, 1 connection, 2 tool exposures"
        ),
        "{activated}"
    );
    assert!(
        activated.contains("3 collections, 1 document set, an ontology of 3 object types"),
        "{activated}"
    );

    let found = hane(
        &store,
        &[
            "run",
            "vehicle-check-scripted",
            "--input",
            r#"{"vehicle": "架空 500 さ 12-34"}"#,
            "--json",
        ],
    );
    let run: Value = serde_json::from_str(&ok(&found)).unwrap();
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["result"]["status"], "found");
    assert_eq!(run["result"]["model"], "Nissan Caravan");
    let id = run["id"].as_str().unwrap().to_owned();

    let missing = ok(&hane(
        &store,
        &[
            "run",
            "vehicle-check-scripted",
            "--input",
            r#"{"vehicle": "架空 1 x 0"}"#,
        ],
    ));
    assert!(missing.contains("succeeded"), "{missing}");
    assert!(missing.contains(r#""status": "handed_over""#), "{missing}");
    assert!(missing.contains("handover for fleet-desk"), "{missing}");

    // The seed's agent activated; on a host with no CLIs installed its
    // driver is refused at run start, naming what is missing.
    let opencode = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["run", "vehicle-check", "--input", r#"{"vehicle": "x"}"#])
        .arg("--store")
        .arg(&store)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env_remove("HANE_CLIS")
        .output()
        .expect("run hane");
    assert_eq!(opencode.status.code(), Some(2));
    let refusal = text(&opencode.stderr);
    assert!(
        refusal.contains("driver `opencode`, which this host cannot run")
            && refusal.contains("HANE_CLIS"),
        "{refusal}"
    );
    // Input that breaks the agent's schema names the field.
    let bad = hane(
        &store,
        &[
            "run",
            "vehicle-check-scripted",
            "--input",
            r#"{"vehicle": 1}"#,
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("/vehicle"),
        "{}",
        text(&bad.stderr)
    );

    let list = ok(&hane(&store, &["runs", "list"]));
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(
        list.lines().last().unwrap().contains(&id),
        "oldest last: {list}"
    );
    let shown = ok(&hane(&store, &["runs", "show", &id]));
    assert!(shown.contains("data.find_record"), "{shown}");
    assert!(shown.contains("Nissan Caravan"), "{shown}");
    let filtered = ok(&hane(&store, &["runs", "list", "--status", "failed"]));
    assert!(filtered.is_empty(), "{filtered}");
    let wrong = hane(&store, &["runs", "list", "--status", "done"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        text(&wrong.stderr).contains("limit_exceeded"),
        "{}",
        text(&wrong.stderr)
    );

    // A broken release is refused with file, line and field; release 1
    // stays active.
    let broken = dir.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("agent.yaml"),
        "apiVersion: agents/v1alpha1\nkind: Agent\nmetadata:\n  name: broken\nspec:\n  purpose: x\n  input: { type: object }\n  output: { type: object, required: [status] }\n  driver: scripted\n  script: [{ tool: submit_result, input: {} }]\n  colour: blue\n",
    )
    .unwrap();
    let refused = hane(&store, &["release", "activate", broken.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    let message = text(&refused.stderr);
    assert!(message.contains("agent.yaml:11"), "{message}");
    assert!(message.contains("colour"), "{message}");
    let releases = ok(&hane(&store, &["release", "list"]));
    assert_eq!(releases.lines().count(), 2, "a header and one: {releases}");
    assert!(
        releases.lines().nth(1).unwrap().starts_with("*    1"),
        "{releases}"
    );

    // A second release, and a rollback to the first.
    ok(&hane(&store, &["release", "activate", examples]));
    let back = ok(&hane(&store, &["release", "rollback"]));
    assert!(back.contains("release 1 is active again"), "{back}");
    let nothing = hane(&store, &["release", "rollback"]);
    assert_eq!(nothing.status.code(), Some(2));
    assert!(
        text(&nothing.stderr).contains("no release before"),
        "{}",
        text(&nothing.stderr)
    );
}

#[test]
fn demo_runs_a_found_and_a_missing_vehicle() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let out = ok(&hane(
        &store,
        &["demo", "--examples", examples().to_str().unwrap()],
    ));
    assert!(out.contains("activated release 1"), "{out}");
    assert_eq!(
        out.matches("vehicle-check-scripted  succeeded").count(),
        2,
        "{out}"
    );
    // Without the fleet-maintenance API's token, the demo says how to see
    // service-booker use it.
    assert!(
        out.contains("HANE_CREDENTIAL_FLEET_MAINTENANCE=TOKEN hane demo"),
        "{out}"
    );
    assert!(out.contains(r#""model": "Toyota Hiace Van""#), "{out}");
    assert!(out.contains(r#""status": "handed_over""#), "{out}");
    assert!(out.contains("handover for fleet-desk"), "{out}");
    // The llm agent, on the recorded model: two turns for the vehicle it
    // finds, three for the one it hands over, each with its tokens and
    // context report; then the day's model tokens.
    // Reception's request in free text starts the llm agent a third time
    // (the recording holds the model's choice); one nothing fits is
    // declined.
    assert_eq!(
        out.matches("vehicle-check-llm  succeeded").count(),
        3,
        "{out}"
    );
    assert!(
        out.contains("  started  vehicle-check-llm  (release 1)"),
        "{out}"
    );
    assert!(
        out.contains(
            "  shortlist     vehicle-check-llm (8.95), vehicle-check-scripted (8.77), inspection-reminder (3.01)"
        ),
        "{out}"
    );
    assert!(out.contains("  declined  -  (release 1)"), "{out}");
    assert_eq!(out.matches("  model   turn ").count(), 7, "{out}");
    assert!(
        out.contains("fleet-assistant/fleet-assistant  642 in + 41 out tokens"),
        "{out}"
    );
    assert!(out.contains("calls data.find_record"), "{out}");
    assert_eq!(
        out.matches("nothing omitted, truncated or compacted")
            .count(),
        7,
        "{out}"
    );
    assert!(
        out.contains("model tokens on ")
            && out.contains(": 6139 used, 0 reserved, 193861 of 200000 left"),
        "{out}"
    );
}

/// A release of the examples' tools and ledger with an `llm` agent `local`
/// whose provider is `provider` (YAML).
fn llm_release(dir: &Path, provider: &str) -> std::path::PathBuf {
    let release = dir.join("release");
    for sub in ["tools", "ledger/records"] {
        std::fs::create_dir_all(release.join(sub)).unwrap();
        for entry in std::fs::read_dir(examples().join(sub)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), release.join(sub).join(entry.file_name())).unwrap();
        }
    }
    std::fs::create_dir_all(release.join("documents")).unwrap();
    std::fs::create_dir_all(release.join("ledger/documents/leases")).unwrap();
    let agent = std::fs::read_to_string(examples().join("agents/vehicle-check-llm.yaml"))
        .unwrap()
        .replace("name: vehicle-check-llm", "name: local")
        .replace("maxModelTokens: 8000", "maxModelTokens: 20000");
    std::fs::write(release.join("agent.yaml"), agent).unwrap();
    std::fs::write(release.join("provider.yaml"), provider).unwrap();
    release
}

#[test]
fn a_run_recorded_against_a_real_model_replays_offline() {
    let server = hane_test_support::LlamaServer::shared();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let recording = dir.path().join("recording.json");
    let live = format!(
        "apiVersion: platform/v1alpha1\nkind: ModelProvider\nmetadata:\n  name: llama\nspec:\n  api: chat-completions\n  baseUrl: {}/v1\n  credential: llama\n  temperature: 0\n  models:\n    - {{ name: {}, contextWindow: 4096, maxOutputTokens: 48 }}\n",
        server.base_url(),
        server.model()
    );
    let release = llm_release(dir.path(), &live);
    ok(&hane(
        &store,
        &["release", "activate", release.to_str().unwrap()],
    ));
    let input = r#"{"vehicle": "架空 300 あ 10-02"}"#;
    let recorded = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args([
            "-vv", "run", "local", "--input", input, "--json", "--record",
        ])
        .arg(&recording)
        .arg("--store")
        .arg(&store)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("HANE_CREDENTIAL_LLAMA", server.api_key())
        .output()
        .unwrap();
    let first: Value = serde_json::from_slice(&recorded.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&recorded.stderr)));
    assert!(
        text(&recorded.stderr).contains("model calls recorded to"),
        "{}",
        text(&recorded.stderr)
    );
    let turns = first["llmTurns"].as_array().unwrap();
    assert!(!turns.is_empty(), "{first:#}");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    assert_eq!(file["format"], "hane-model-recording");
    assert_eq!(file["turns"].as_array().unwrap().len(), turns.len());
    // The key is in no file the run wrote, and in no log line.
    assert!(
        text(&recorded.stderr).contains("model call answered"),
        "{}",
        text(&recorded.stderr)
    );
    assert!(!text(&recorded.stderr).contains(server.api_key()));
    for written in [&recording, &store] {
        let bytes = std::fs::read(written).unwrap();
        let key = server.api_key().as_bytes();
        assert!(
            !bytes.windows(key.len()).any(|w| w == key),
            "{}",
            written.display()
        );
    }

    // The same agent on a recorded provider: the same turns, no server.
    let replay = "apiVersion: platform/v1alpha1\nkind: ModelProvider\nmetadata:\n  name: llama\nspec:\n  api: recorded\n  recording: ../recording.json\n  models:\n    - { name: smollm2, contextWindow: 4096, maxOutputTokens: 48 }\n";
    std::fs::write(release.join("provider.yaml"), replay).unwrap();
    ok(&hane(
        &store,
        &["release", "activate", release.to_str().unwrap()],
    ));
    let replayed = hane(&store, &["run", "local", "--input", input, "--json"]);
    assert_eq!(replayed.status.code(), recorded.status.code());
    let again: Value = serde_json::from_slice(&replayed.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&replayed.stderr)));
    assert_eq!(again["status"], first["status"], "{again:#}");
    assert_eq!(again["tokensUsed"], first["tokensUsed"]);
    let answers = |run: &Value| -> Vec<Value> {
        run["llmTurns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                serde_json::from_str(t["response"].as_str().unwrap_or("null"))
                    .unwrap_or(t["response"].clone())
            })
            .collect()
    };
    assert_eq!(answers(&again), answers(&first));

    // `hane runs show` prints each turn with its usage and context report.
    let id = again["id"].as_str().unwrap();
    let shown = ok(&hane(&store, &["runs", "show", id]));
    assert_eq!(
        shown.matches("  model   turn ").count(),
        turns.len(),
        "{shown}"
    );
    assert!(shown.contains("llama/smollm2"), "{shown}");
    assert!(
        shown.contains("tokens of a 4096-token window (estimate)"),
        "{shown}"
    );
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
    let ops: Value = crate::common::json(&hane(
        &store,
        &["keys", "create", "ops", "--role", "operator", "--json"],
    ));
    assert_eq!(ops["groups"], Value::Null);
    assert_eq!(ops["role"], "operator");
    ok(&hane(
        &store,
        &["keys", "create", "dashboard", "--role", "viewer"],
    ));

    let listed: Value = crate::common::json(&hane(&store, &["keys", "list", "--json"]));
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
    let said = failed(
        &hane(
            &store,
            &["keys", "create", "v", "--role", "viewer", "--group", "desk"],
        ),
        2,
    );
    assert!(said.contains("a viewer key decides no actions"), "{said}");
    let said = failed(
        &hane(
            &store,
            &["keys", "create", "w", "--role", "approver", "--group", ""],
        ),
        2,
    );
    assert!(said.contains(r#"invalid group """#), "{said}");
    let said = failed(
        &hane(&store, &["keys", "create", "desk", "--role", "viewer"]),
        2,
    );
    assert!(said.contains("a key named `desk` already exists"), "{said}");
    let said = failed(
        &hane(&store, &["keys", "create", "x", "--role", "admin"]),
        2,
    );
    assert!(said.contains("admin"), "{said}");
    let listed: Value = crate::common::json(&hane(&store, &["keys", "list", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 3);

    let removed = hane(&store, &["keys", "remove", "desk"]);
    ok(&removed);
    assert!(text(&removed.stderr).contains("removed key `desk`"));
    let said = failed(&hane(&store, &["keys", "remove", "desk"]), 2);
    assert!(said.contains("no key is named `desk`"), "{said}");
    let listed: Value = crate::common::json(&hane(&store, &["keys", "list", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 2);
}

/// The installed coding CLIs (`cargo xtask provision` installs them and
/// prints `HANE_TEST_CLIS`).
fn clis() -> std::path::PathBuf {
    let dir = std::env::var_os("HANE_TEST_CLIS")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || hane_test_support::repository().join("target/test-env/clis/node_modules"),
            std::path::PathBuf::from,
        );
    assert!(
        dir.join("opencode-ai/package.json").is_file(),
        "the coding CLIs are not installed in {}: run `cargo xtask provision` and export what it prints",
        dir.display()
    );
    dir
}

#[test]
fn the_seeds_vehicle_check_runs_under_opencode_in_a_container() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let examples = examples();
    ok(&hane(
        &store,
        &["release", "activate", examples.to_str().unwrap()],
    ));
    let run = |vehicle: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hane"));
        command
            .args(["run", "vehicle-check", "--json", "--input"])
            .arg(json!({ "vehicle": vehicle }).to_string())
            .arg("--store")
            .arg(&store)
            .env("HANE_CACHE_DIR", hane_test_support::component_cache())
            .env("HANE_CLIS", clis());
        if let Some(bwrap) = std::env::var_os("HANE_TEST_BWRAP").filter(|p| !p.is_empty()) {
            command.env("HANE_CONTAINER_RUNTIME", bwrap);
        }
        let out = command.output().expect("run hane");
        let run: Value = serde_json::from_str(&ok(&out)).unwrap();
        run
    };

    // The seed's manifest as is: opencode, in bubblewrap, its model calls
    // through the Model Gateway (the examples' recorded provider) and its
    // tool calls through hane's MCP server.
    let found = run("架空 300 あ 10-02");
    assert_eq!(found["status"], "succeeded", "{found:#}");
    assert_eq!(found["result"]["status"], "found", "{found:#}");
    assert_eq!(found["result"]["model"], "Toyota Hiace Van", "{found:#}");
    let unknown = run("架空 999 ん 00-00");
    assert_eq!(unknown["status"], "succeeded", "{unknown:#}");
    assert_eq!(unknown["result"]["status"], "handed_over", "{unknown:#}");
    assert_eq!(
        unknown["tasks"].as_array().map(Vec::len),
        Some(1),
        "{unknown:#}"
    );

    for (run, tools) in [
        (&found, &["data.find_record", "submit_result"][..]),
        (
            &unknown,
            &["data.find_record", "request_human_help", "submit_result"][..],
        ),
    ] {
        // Every tool call went through the Tool Gateway...
        let called: Vec<&str> = run["toolCalls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["tool"].as_str().unwrap())
            .collect();
        assert_eq!(called, tools, "{run:#}");
        // ... every model call through the Model Gateway, counted ...
        // (a turn per tool call, and one after the result unless hane
        // stopped the CLI first: it has a moment to end on its own)
        let turns = run["llmTurns"].as_array().unwrap().len();
        assert!(turns == tools.len() || turns == tools.len() + 1, "{run:#}");
        assert!(run["tokensUsed"].as_u64().unwrap() > 0, "{run:#}");
        // ... and the CLI's own events are in the run's record, with its
        // exit.
        assert_eq!(run["cliOutput"]["driver"], "opencode", "{run:#}");
        assert_eq!(run["cliOutput"]["version"], "1.18.33", "{run:#}");
        let exit = &run["cliOutput"]["exit"];
        assert!(
            exit == "exit code 0" || exit == "stopped by hane",
            "{run:#}"
        );
        assert!(
            !run["cliOutput"]["events"].as_array().unwrap().is_empty(),
            "{run:#}"
        );
    }
}

/// What a run's input put into its tool details and tasks reaches the
/// terminal escaped: `hane run` and `hane runs show` print no control
/// character a guest, a model or a caller wrote.
#[test]
fn a_runs_untrusted_text_is_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    ok(&hane(
        &store,
        &["release", "activate", examples().to_str().unwrap()],
    ));
    let vehicle = "架空 999 ん 00-00\u{1b}[2J\u{1b}]0;owned\u{7}";
    let input = json!({ "vehicle": vehicle }).to_string();
    let run = ok(&hane(
        &store,
        &["run", "vehicle-check-scripted", "--input", &input],
    ));
    let id = run
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no run id in {run}"))
        .to_owned();
    let shown = ok(&hane(&store, &["runs", "show", &id]));
    for out in [&run, &shown] {
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
        // The task the handover made names the vehicle, escaped.
        assert!(
            out.contains(
                r"Vehicle 架空 999 ん 00-00\u{1b}[2J\u{1b}]0;owned\u{7} is not in the fleet ledger"
            ),
            "{out}"
        );
    }
}
