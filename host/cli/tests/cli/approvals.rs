//! `hane approvals`, run as the real binary against a store in a temporary
//! directory, beside a `hane run` in another process that waits for the
//! decision.

use std::io::Read as _;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{failed, json, ok, text};

/// An agent that proposes an email, then ends with the action's state.
const RELEASE: &str = include_str!("../../../../tests/fixtures/notify.yaml");

const INPUT: &str =
    r#"{"email": "driver@example.com", "subject": "Your van is ready", "body": "Gate 3."}"#;

/// How long a test waits for another process.
const PATIENCE: Duration = Duration::from_secs(60);

fn command(store: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hane"));
    command
        .args(args)
        .arg("--store")
        .arg(store)
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("USER", "tester");
    command
}

fn hane(store: &Path, args: &[&str]) -> Output {
    command(store, args).output().expect("run hane")
}

/// A store with [`RELEASE`] active.
fn store_with_release(dir: &Path) -> std::path::PathBuf {
    let release = dir.join("release");
    std::fs::create_dir_all(&release).unwrap();
    std::fs::write(release.join("notify.yaml"), RELEASE).unwrap();
    let store = dir.join("hane.db");
    ok(&hane(
        &store,
        &["release", "activate", release.to_str().unwrap()],
    ));
    store
}

/// `hane run notify` in the background, printing its run as JSON.
fn run_in_background(store: &Path) -> Child {
    command(store, &["run", "notify", "--input", INPUT, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hane run")
}

/// The pending action, once `child`'s run has proposed it.
fn pending_action(store: &Path, child: &mut Child) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let listed = json(&hane(
            store,
            &["approvals", "list", "--state", "pending", "--json"],
        ));
        if let Some(action) = listed.as_array().and_then(|l| l.first()) {
            return action.clone();
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("hane run ended ({status}) before proposing an action");
        }
        assert!(Instant::now() < deadline, "no pending action in time");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `child`'s exit code and stdout once it ends; killed after
/// [`PATIENCE`].
fn finish(mut child: Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hane run did not end after the decision");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        status.success(),
        "{status}\nstdout: {stdout}\nstderr: {stderr}"
    );
    (status.code(), stdout)
}

#[test]
fn nothing_is_pending_in_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let out = hane(&store, &["approvals", "list"]);
    assert_eq!(ok(&out), "");
    assert!(
        text(&out.stderr).contains("no pending actions"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        json(&hane(&store, &["approvals", "list", "--json"])),
        serde_json::json!([])
    );
    let out = hane(&store, &["approvals", "list", "--state", "sent"]);
    let message = failed(&out, 2);
    assert!(message.contains("pending, approved"), "{message}");
}

#[test]
fn overrides_are_added_listed_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    assert_eq!(
        json(&hane(&store, &["approvals", "overrides", "list", "--json"])),
        serde_json::json!([])
    );
    let added = ok(&hane(
        &store,
        &[
            "approvals",
            "overrides",
            "add",
            "communication.send_sms",
            "--reason",
            "texts under review",
        ],
    ));
    assert!(added.contains("people decide every action of communication.send_sms"));
    let listed = json(&hane(&store, &["approvals", "overrides", "list", "--json"]));
    assert_eq!(listed[0]["tool"], "communication.send_sms");
    assert_eq!(listed[0]["reason"], "texts under review");
    assert!(
        listed[0]["createdBy"].as_str().unwrap().starts_with("cli"),
        "{listed}"
    );
    let message = failed(
        &hane(
            &store,
            &[
                "approvals",
                "overrides",
                "add",
                "data.find_record",
                "--reason",
                "x",
            ],
        ),
        2,
    );
    assert!(message.contains("is not an outbound tool"), "{message}");
    ok(&hane(
        &store,
        &["approvals", "overrides", "remove", "communication.send_sms"],
    ));
    let message = failed(
        &hane(
            &store,
            &["approvals", "overrides", "remove", "communication.send_sms"],
        ),
        2,
    );
    assert!(message.contains("has no override"), "{message}");
}

#[test]
fn refusals_and_usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let unknown = "act_00000000000000000000000000";
    let message = failed(&hane(&store, &["approvals", "show", unknown]), 2);
    assert!(message.contains(unknown), "{message}");
    assert!(message.contains("not found"), "{message}");
    let message = failed(&hane(&store, &["approvals", "show", "not-an-action"]), 2);
    assert!(message.contains("`act_`"), "{message}");
    let message = failed(&hane(&store, &["approvals", "approve", unknown]), 2);
    assert!(message.contains("--digest"), "{message}");
    let message = failed(
        &hane(
            &store,
            &[
                "approvals",
                "reconcile",
                unknown,
                "--state",
                "sent",
                "--note",
                "x",
            ],
        ),
        2,
    );
    assert!(message.contains("delivered"), "{message}");
    // A malformed delivery setting names the variable.
    let out = command(&store, &["approvals", "list"])
        .env("HANE_SMS_TOKEN", "secret")
        .env_remove("HANE_SMS_URL")
        .output()
        .unwrap();
    let message = failed(&out, 2);
    assert!(message.contains("HANE_SMS_TOKEN"), "{message}");
    assert!(!message.contains("secret"), "{message}");
}

#[test]
fn help_lists_the_environment() {
    for command in ["approvals", "serve"] {
        let out = Command::new(env!("CARGO_BIN_EXE_hane"))
            .args([command, "--help"])
            .output()
            .unwrap();
        let help = ok(&out);
        for var in [
            "HANE_PROJECT",
            "HANE_ENVIRONMENT",
            "HANE_SMTP_URL",
            "HANE_SMTP_PASSWORD",
            "HANE_SMTP_CA_FILE",
            "HANE_SMS_URL",
            "HANE_SMS_TOKEN",
            "HANE_CALL_URL",
            "HANE_CALL_TOKEN",
            "HANE_CREDENTIAL_<NAME>",
            "HANE_DELIVERY_TIMEOUT_MS",
        ] {
            assert!(help.contains(var), "`hane {command} --help` lacks {var}");
        }
    }
}

/// A person rejects one waiting run's email and approves another's from a
/// second terminal; each run goes on with the outcome.
#[test]
fn decisions_from_another_process_reach_the_waiting_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_release(dir.path());

    let mut child = run_in_background(&store);
    let action = pending_action(&store, &mut child);
    let id = action["id"].as_str().unwrap().to_owned();
    let digest = action["digest"].as_str().unwrap().to_owned();
    assert_eq!(action["recipient"], "driver@example.com");
    assert_eq!(action["assignment"], "desk");

    let shown = ok(&hane(&store, &["approvals", "show", &id]));
    for part in [
        "communication.send_email",
        "driver@example.com",
        "Your van is ready",
        digest.as_str(),
        "a person of desk",
        "hane approvals approve|reject",
    ] {
        assert!(shown.contains(part), "no {part} in {shown}");
    }

    let stale = format!("sha256:{}", "0".repeat(64));
    let message = failed(
        &hane(&store, &["approvals", "approve", &id, "--digest", &stale]),
        2,
    );
    assert!(message.contains(&digest), "{message}");
    let rejected = ok(&hane(
        &store,
        &[
            "approvals",
            "reject",
            &id,
            "--digest",
            &digest,
            "--reason",
            "wrong address",
        ],
    ));
    assert!(rejected.contains(&format!("rejected {id}")), "{rejected}");
    assert!(
        rejected.contains("by cli:tester: wrong address"),
        "{rejected}"
    );
    let (_, out) = finish(child);
    let run: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["result"]["status"], "rejected", "{run}");
    let message = failed(
        &hane(&store, &["approvals", "reject", &id, "--digest", &digest]),
        2,
    );
    assert!(message.contains("already rejected"), "{message}");

    // Approving delivers from this process: with no email delivery
    // configured here it is refused, naming what to set, and the action
    // stays pending.
    let mut child = run_in_background(&store);
    let action = pending_action(&store, &mut child);
    let other = action["id"].as_str().unwrap().to_owned();
    let digest = action["digest"].as_str().unwrap().to_owned();
    let approve = [
        "approvals",
        "approve",
        &other,
        "--digest",
        &digest,
        "--json",
    ];
    let out = command(&store, &approve)
        .env_remove("HANE_SMTP_URL")
        .output()
        .unwrap();
    let message = failed(&out, 2);
    assert!(
        message.contains("HANE_SMTP_URL") && message.contains("still pending"),
        "{message}"
    );
    let still = json(&hane(&store, &["approvals", "show", &other, "--json"]));
    assert_eq!(still["state"], "pending", "{still}");
    // With email configured (a server that is not there), it is approved
    // and fails before anything is sent; the command still succeeds.
    let smtp = hane_test_support::unreachable_smtp_url();
    let out = command(&store, &approve)
        .env("HANE_SMTP_URL", &smtp)
        .output()
        .unwrap();
    let approved = json(&out);
    assert_eq!(approved["state"], "failed", "{approved}");
    assert_eq!(approved["humanApproved"], true);
    assert_eq!(approved["trail"][0]["by"], "cli:tester");
    let detail = approved["outcome"]["detail"].as_str().unwrap();
    let closed = smtp.split(['?', ':']).nth(2).unwrap();
    assert!(detail.contains(closed), "{detail}");
    let (_, out) = finish(child);
    let run: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(run["result"]["status"], "failed", "{run}");

    let all = json(&hane(
        &store,
        &["approvals", "list", "--state", "all", "--json"],
    ));
    let states: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["state"].as_str())
        .collect();
    assert_eq!(states, ["rejected", "failed"]);
    let listed = ok(&hane(&store, &["approvals", "list", "--state", "failed"]));
    assert!(listed.contains(&other), "{listed}");
    assert_eq!(listed.lines().count(), 1, "{listed}");
}

/// Whether `text` holds a character that would act on a terminal rather
/// than show: an escape, a C1 control, a bidirectional override or a
/// zero-width space (newlines and tabs aside).
fn acts_on_a_terminal(text: &str) -> bool {
    text.chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202e}' | '\u{200b}'))
}

#[test]
fn odd_content_and_a_stored_hostile_recipient_are_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_release(dir.path());
    // A valid email whose subject and body carry escape codes: clear the
    // screen, set the title, a C1 CSI, a right-to-left override, and a
    // zero-width space.
    let subject = "Your van\u{1b}[2J\u{1b}]0;owned\u{7} is ready \u{9b}31m";
    let body = "Gate\u{202e}3\u{200b}.";
    let input =
        serde_json::json!({"email": "driver@example.com", "subject": subject, "body": body})
            .to_string();
    let mut child = command(&store, &["run", "notify", "--input", &input, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hane run");
    let action = pending_action(&store, &mut child);
    let id = action["id"].as_str().unwrap().to_owned();
    let digest = action["digest"].as_str().unwrap().to_owned();

    // JSON stays JSON, and means the same, without a raw escape code.
    let out = hane(&store, &["approvals", "list", "--json"]);
    let listed = ok(&out);
    assert!(!acts_on_a_terminal(&listed), "{listed:?}");
    assert!(listed.contains(r"\u001b[2J"), "{listed}");
    assert!(listed.contains(r"\u009b31m"), "{listed}");
    let parsed = json(&out);
    assert_eq!(parsed[0]["content"]["subject"], subject);
    assert_eq!(parsed[0]["content"]["body"], body);

    let shown = ok(&hane(&store, &["approvals", "show", &id]));
    assert!(!acts_on_a_terminal(&shown), "{shown:?}");
    for part in [
        r"Your van\u001b[2J\u001b]0;owned\u0007 is ready \u009b31m",
        r"Gate\u202e3\u200b.",
        "driver@example.com",
        digest.as_str(),
    ] {
        assert!(shown.contains(part), "no {part} in {shown}");
    }
    let shown = ok(&hane(&store, &["approvals", "show", &id, "--json"]));
    assert!(!acts_on_a_terminal(&shown), "{shown:?}");
    ok(&hane(
        &store,
        &["approvals", "reject", &id, "--digest", &digest],
    ));
    finish(child);

    // A recipient that would show as `boss@fleet.example`, as a store
    // written before recipients were checked at proposal may hold, with a
    // reviewer's reason of the same kind.
    let hostile = "boss@attacker.example\u{1b}[16Dfleet.example\u{1b}[K";
    let old = stored_action(
        &store,
        hostile,
        "looks fine\u{1b}[2K\rapproved   by a person",
    );
    let listed = ok(&hane(&store, &["approvals", "list"]));
    assert!(!acts_on_a_terminal(&listed), "{listed:?}");
    assert!(
        listed.contains(r"to boss@attacker.example\u{1b}[16Dfleet.example\u{1b}[K  ("),
        "{listed}"
    );
    let shown = ok(&hane(&store, &["approvals", "show", &old]));
    assert!(!acts_on_a_terminal(&shown), "{shown:?}");
    assert!(
        shown.contains(r"recipient  boss@attacker.example\u{1b}[16Dfleet.example\u{1b}[K"),
        "{shown}"
    );
    assert!(
        shown.contains(r": looks fine\u{1b}[2K\u{d}approved   by a person"),
        "{shown}"
    );
}

/// Stores a pending email to `recipient`, escalated to people by a review
/// agent giving `reason`, straight into the store (as an older version
/// would have); its id.
fn stored_action(store: &Path, recipient: &str, reason: &str) -> String {
    use hane_core::{
        ActionId, ActionRequest, ActionState, DeciderKind, Decision, JsonText, RunId, Verdict,
        digest, now_ms,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let registry = hane_store::Registry::open(store).unwrap();
        let tool = "communication.send_email";
        let content = serde_json::json!({"subject": "Hello", "body": "Gate 3."});
        let now = now_ms();
        let action = ActionRequest {
            id: ActionId::new(),
            run: RunId::new(),
            agent: "notify".to_owned(),
            tool: tool.to_owned(),
            recipient: recipient.to_owned(),
            digest: digest(tool, recipient, &content),
            content: JsonText::from_value(&content),
            state: ActionState::Pending,
            decider: DeciderKind::Person,
            assignment: Some("desk".to_owned()),
            reviewer: Some("reviewer".to_owned()),
            rule: None,
            overridden: false,
            task: None,
            connection: None,
            trail: vec![Decision {
                kind: DeciderKind::Agent,
                by: "agent:reviewer".to_owned(),
                verdict: Verdict::Escalate,
                reason: Some(reason.to_owned()),
                digest: digest(tool, recipient, &content),
                at_ms: now,
            }],
            attempts: Vec::new(),
            outcome: None,
            created_at_ms: now,
            updated_at_ms: now,
        };
        let row = hane_store::ActionRow {
            id: action.id.to_string(),
            run: action.run.to_string(),
            tool: action.tool.clone(),
            state: action.state,
            owner: None,
            created_at_ms: now,
            updated_at_ms: now,
            body: hane_stored::seal(&action),
        };
        registry
            .transact(move |tx| tx.insert_action(&row))
            .await
            .unwrap();
        action.id.to_string()
    })
}
