//! Outbound actions end to end: agents propose email and text messages,
//! deciders (people, review agents, policy rules, overrides) decide, and
//! the execution ledger delivers to a real SMTP server on loopback exactly
//! once — also when approvals race, repeat, or the approving process is
//! killed. Budgets refuse runs and actions past the day's limits.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use hane_coordinator::{ActionError, AgentRuntime, RunError, StartRun};
use hane_core::{
    ActionRequest, ActionState, AgentRun, DeciderKind, Person, RunId, RunStatus, Verdict, digest,
};
use hane_delivery::{DeliveryConfig, HttpProvider, SmtpConfig, SmtpTls};
use serde_json::{Value, json};

use crate::agents::release_with;
use crate::delivery::{Answer, Provider};
use crate::harness;
use hane_test_support::SmtpServer;

const REMINDER_TO_A_PERSON: &str = "depot@elsewhere.example";

pub(crate) fn runtime(dir: &Path, delivery: DeliveryConfig) -> AgentRuntime {
    let mut config = crate::agents::config();
    config.delivery(delivery);
    AgentRuntime::open(&dir.join("hane.db"), &config).unwrap()
}

/// Every channel configured, each at a port nothing listens on: an
/// approved action is attempted, and fails before anything is sent.
fn unreachable_delivery() -> DeliveryConfig {
    let closed = hane_test_support::closed_port();
    let mut smtp = SmtpConfig::new("127.0.0.1", SmtpTls::None, "hane@fleet.example");
    smtp.port = closed;
    let provider = HttpProvider::new(format!("http://127.0.0.1:{closed}/send"));
    let mut delivery = DeliveryConfig::new();
    delivery.smtp(smtp).sms(provider.clone()).call(provider);
    delivery
}

fn smtp_delivery(server: &SmtpServer) -> DeliveryConfig {
    let mut smtp = SmtpConfig::new("127.0.0.1", SmtpTls::None, "hane@fleet.example");
    smtp.port = server.port;
    let mut delivery = DeliveryConfig::new();
    delivery.smtp(smtp).timeout(Duration::from_secs(10));
    delivery
}

async fn activated(dir: &Path, delivery: DeliveryConfig) -> AgentRuntime {
    let runtime = runtime(dir, delivery);
    runtime.activate(&harness::examples()).await.unwrap();
    runtime
}

fn reminder(to: &str) -> StartRun {
    StartRun {
        agent: "inspection-reminder".to_owned(),
        input: json!({"vehicle": "架空 300 あ 10-02", "to": to}),
        shadow: false,
    }
}

fn text(phone: &str) -> StartRun {
    StartRun {
        agent: "driver-text".to_owned(),
        input: json!({"phone": phone, "text": "Your van's inspection is booked for Monday 9:00."}),
        shadow: false,
    }
}

/// `person:a`, of every group, approves `action` as it was shown (its
/// digest), through the ledger.
async fn approve_as_shown(
    runtime: &AgentRuntime,
    action: &ActionRequest,
) -> Result<ActionRequest, ActionError> {
    let by = Person::anyone("person:a");
    runtime
        .actions()
        .approve(action.id.as_str(), &action.digest, by, None)
        .await
}

/// As [`approve_as_shown`], rejecting.
async fn reject_as_shown(
    runtime: &AgentRuntime,
    action: &ActionRequest,
) -> Result<ActionRequest, ActionError> {
    let by = Person::anyone("person:a");
    runtime
        .actions()
        .reject(action.id.as_str(), &action.digest, by, None)
        .await
}

/// The action run `run` proposed, once it is `state`.
pub(crate) async fn action_of(
    runtime: &AgentRuntime,
    run: &RunId,
    state: ActionState,
) -> ActionRequest {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = runtime
            .actions()
            .list(Some(state), Some(run))
            .await
            .unwrap()
            .items;
        if let Some(action) = found.into_iter().next() {
            return action;
        }
        let all = actions_of(runtime, run).await;
        assert!(
            Instant::now() < deadline,
            "run {run} has no {state} action; it has {all:#?}; the run: {:#?}",
            runtime.get(run).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn result(run: &AgentRun) -> Value {
    run.result
        .as_ref()
        .unwrap_or_else(|| panic!("no result: {run:#?}"))
        .to_value()
        .unwrap()
}

#[tokio::test]
async fn a_person_approves_an_email_and_it_is_delivered_once_a_rejected_one_never() {
    let server = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path(), smtp_delivery(&server)).await;

    let run = runtime.start(reminder(REMINDER_TO_A_PERSON)).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    // Exactly what would go out, fixed with its digest.
    assert_eq!(action.tool, "communication.send_email");
    assert_eq!(action.recipient, REMINDER_TO_A_PERSON);
    let content = action.content.to_value().unwrap();
    assert_eq!(content["subject"], "Inspection reminder: 架空 300 あ 10-02");
    assert!(
        content["body"].as_str().unwrap().contains("2027-03-31"),
        "{content}"
    );
    assert_eq!(
        action.digest,
        digest("communication.send_email", REMINDER_TO_A_PERSON, &content)
    );
    // The fleet-outbound policy's default: a person of the fleet desk.
    assert_eq!(action.decider, DeciderKind::Person);
    assert_eq!(action.assignment.as_deref(), Some("fleet-desk"));
    assert_eq!(action.rule.as_deref(), Some("fleet-outbound default"));
    let tasks = runtime.tasks(&run.id).await.unwrap().items;
    assert_eq!(tasks.len(), 1, "{tasks:#?}");
    assert_eq!(tasks[0].kind, "approval");
    assert_eq!(Some(&tasks[0].id), action.task.as_ref());
    assert!(
        server.messages().is_empty(),
        "nothing goes out before approval"
    );

    // A digest of other content is refused and changes nothing.
    let stale = digest(
        "communication.send_email",
        REMINDER_TO_A_PERSON,
        &json!({"subject": "Inspection reminder: 架空 300 あ 10-02", "body": "other"}),
    );
    let refused = runtime
        .actions()
        .approve(action.id.as_str(), &stale, Person::anyone("person:a"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ActionError::StaleDigest { .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains(&action.digest), "{refused}");
    assert_eq!(
        runtime
            .actions()
            .get(action.id.as_str())
            .await
            .unwrap()
            .state,
        ActionState::Pending
    );

    let approved = runtime
        .actions()
        .approve(
            action.id.as_str(),
            &action.digest,
            Person::anyone("person:a"),
            Some("ok".into()),
        )
        .await
        .unwrap();
    assert_eq!(
        approved.state,
        ActionState::Delivered,
        "{:?}",
        approved.outcome
    );
    assert!(approved.human_approved());
    assert_eq!(approved.attempts.len(), 1);
    let messages = server.messages();
    assert_eq!(messages.len(), 1);
    assert!(
        messages[0].contains(&format!("X-Hane-Action: {}", action.id)),
        "{}",
        messages[0]
    );
    assert!(
        messages[0].contains(REMINDER_TO_A_PERSON),
        "{}",
        messages[0]
    );

    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    assert_eq!(result(&ended)["status"], "delivered");
    assert_eq!(result(&ended)["action"], action.id.as_str());

    // Approving again sends nothing more.
    let again = runtime
        .actions()
        .approve(
            action.id.as_str(),
            &action.digest,
            Person::anyone("person:b"),
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            again,
            ActionError::AlreadyDecided {
                state: ActionState::Delivered,
                ..
            }
        ),
        "{again}"
    );
    assert_eq!(server.messages().len(), 1);

    // A rejected action is never sent, and the run goes on with it.
    let run = runtime.start(reminder(REMINDER_TO_A_PERSON)).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    let rejected = runtime
        .actions()
        .reject(
            action.id.as_str(),
            &action.digest,
            Person::anyone("person:a"),
            Some("wrong depot".into()),
        )
        .await
        .unwrap();
    assert_eq!(rejected.state, ActionState::Rejected);
    assert!(
        rejected.outcome.unwrap().detail.contains("wrong depot"),
        "the reason is kept"
    );
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(result(&ended)["status"], "rejected");
    assert_eq!(server.messages().len(), 1);
}

#[tokio::test]
async fn fifty_concurrent_approvals_execute_the_action_once() {
    // A slow server keeps the first delivery open while the others arrive.
    let server = SmtpServer::start(&["--delay-ms", "200"]);
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path(), smtp_delivery(&server)).await;
    let run = runtime.start(reminder(REMINDER_TO_A_PERSON)).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;

    let mut approvals = Vec::new();
    for i in 0..50 {
        let ledger = runtime.actions().clone();
        let (id, digest) = (action.id.to_string(), action.digest.clone());
        approvals.push(tokio::spawn(async move {
            ledger
                .approve(&id, &digest, Person::anyone(format!("person:{i}")), None)
                .await
        }));
    }
    let mut decided = 0;
    for approval in approvals {
        match approval.await.unwrap() {
            Ok(_) => decided += 1,
            Err(ActionError::AlreadyDecided { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(decided >= 1);
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(result(&ended)["status"], "delivered", "{ended:#?}");
    let action = runtime.actions().get(action.id.as_str()).await.unwrap();
    assert_eq!(action.state, ActionState::Delivered);
    assert_eq!(action.attempts.len(), 1, "{:#?}", action.attempts);
    let approvals = action
        .trail
        .iter()
        .filter(|d| d.verdict == Verdict::Approve)
        .count();
    assert_eq!(
        approvals, 1,
        "one approval is recorded: {:#?}",
        action.trail
    );
    assert_eq!(server.messages().len(), 1);
    assert_eq!(server.messages_of(action.id.as_str()), 1);
}

#[tokio::test]
async fn a_policy_rule_approves_without_a_task_and_it_is_not_human_approval() {
    let server = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path(), smtp_delivery(&server)).await;
    let ended = runtime
        .run_to_end(reminder("shinagawa@fleet.example"))
        .await
        .unwrap();
    assert_eq!(result(&ended)["status"], "delivered", "{ended:#?}");
    let action = actions_of(&runtime, &ended.id).await.remove(0);
    assert_eq!(action.decider, DeciderKind::Policy);
    assert_eq!(
        action.rule.as_deref(),
        Some("fleet-outbound rule 1 (inspection-reminders)")
    );
    assert_eq!(action.trail.len(), 1);
    assert_eq!(action.trail[0].kind, DeciderKind::Policy);
    assert!(!action.human_approved());
    let shown = action.to_json();
    assert_eq!(shown["humanApproved"], false);
    assert_eq!(shown["approvedBy"], "policy");
    assert!(action.task.is_none());
    assert!(runtime.tasks(&ended.id).await.unwrap().items.is_empty());
    assert_eq!(server.messages_of(action.id.as_str()), 1);
}

#[tokio::test]
async fn a_recipient_that_is_not_one_plain_address_is_refused_at_proposal_and_nothing_counts() {
    let server = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path(), smtp_delivery(&server)).await;
    // Shown raw, the first reads `boss@fleet.example` on a terminal; it
    // matches the fleet-outbound policy's `*@fleet.example`, which would
    // approve it itself, and the day's budget would count it before SMTP
    // refused it.
    let hidden = "boss\u{1b}[4D\u{1b}[K@fleet.example";
    assert!(hane_manifest::glob_matches("*@fleet.example", hidden));
    for (to, problem) in [
        (hidden, r"it holds the control character \u{1b}"),
        (
            "boss@attacker.example\u{1b}[16Dfleet.example\u{1b}[K",
            r"it holds the control character \u{1b}",
        ),
        ("boss@fleet.example,ops.example", "it holds a comma"),
        ("\"boss\"@fleet.example", "it holds a quote `\"`"),
        (
            "boss\u{200b}@fleet.example",
            r"it holds \u{200b}, which is not ASCII",
        ),
    ] {
        let ended = runtime.run_to_end(reminder(to)).await.unwrap();
        assert_eq!(ended.status, RunStatus::Failed, "{ended:#?}");
        let error = ended.error.as_deref().unwrap();
        assert!(
            error.contains(&format!(
                "`to` of `communication.send_email` is not one email address (`name@example.com`): {problem}; nothing was proposed"
            )),
            "{to:?}: {error}"
        );
        assert!(!error.contains('\u{1b}'), "{error:?}");
        assert!(actions_of(&runtime, &ended.id).await.is_empty());
        assert!(runtime.tasks(&ended.id).await.unwrap().items.is_empty());
    }
    // A text to a number that is not E.164 (the tool's schema says so
    // too, and refuses it first).
    let ended = runtime.run_to_end(text("090-1234-5678")).await.unwrap();
    assert_eq!(ended.status, RunStatus::Failed, "{ended:#?}");
    let error = ended.error.as_deref().unwrap();
    assert!(
        error.contains("communication.send_sms") && error.contains("/to"),
        "{error}"
    );

    assert!(
        runtime
            .actions()
            .list(None, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let report = hane_coordinator::Budgets::new(&runtime)
        .report()
        .await
        .unwrap();
    assert_eq!(report.budget.as_deref(), Some("daily-budget"));
    assert_eq!(report.usage.external_actions, 0, "{report:#?}");
    assert!(server.messages().is_empty());

    // A plain address of the same domain is approved by the policy and
    // delivered, and counts.
    let ended = runtime
        .run_to_end(reminder("boss@fleet.example"))
        .await
        .unwrap();
    assert_eq!(result(&ended)["status"], "delivered", "{ended:#?}");
    assert_eq!(
        hane_coordinator::Budgets::new(&runtime)
            .report()
            .await
            .unwrap()
            .usage
            .external_actions,
        1
    );
}

#[tokio::test]
async fn a_review_agent_decides_texts_as_an_agent_and_escalates_to_a_person() {
    // No SMS provider: an approved text fails saying what to configure,
    // which is enough to see who decided.
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path(), unreachable_delivery()).await;

    let ended = runtime.run_to_end(text("+815012340001")).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    let action = actions_of(&runtime, &ended.id).await.remove(0);
    assert_eq!(action.decider, DeciderKind::Agent);
    assert_eq!(action.reviewer.as_deref(), Some("sms-review"));
    assert_eq!(action.trail.len(), 1, "{:#?}", action.trail);
    let review = &action.trail[0];
    assert_eq!(review.kind, DeciderKind::Agent);
    assert_eq!(review.verdict, Verdict::Approve);
    assert!(
        review.by.starts_with("agent:sms-review (run_"),
        "{}",
        review.by
    );
    assert!(
        review.reason.as_deref().unwrap().contains("Aoi Sato"),
        "{review:?}"
    );
    assert!(!action.human_approved(), "an agent's approval is not human");
    assert_eq!(action.to_json()["approvedBy"], "agent");
    assert_eq!(action.state, ActionState::Failed);
    assert!(
        action
            .outcome
            .as_ref()
            .unwrap()
            .detail
            .contains("could not connect to SMS provider"),
        "{:?}",
        action.outcome
    );
    assert_eq!(result(&ended)["status"], "failed");
    // The review agent's own run is recorded like any run.
    let reviews = runtime
        .list(hane_store::RunQuery {
            agent: Some("sms-review".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .items;
    assert_eq!(reviews.len(), 1);
    assert_eq!(result(&reviews[0])["status"], "approve");

    // A number that is no driver's: the agent escalates to a person, and
    // a person may not decide until then.
    let run = runtime.start(text("+815099999999")).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let escalated = loop {
        let now = runtime.actions().get(action.id.as_str()).await.unwrap();
        if now.decider == DeciderKind::Person {
            break now;
        }
        assert!(Instant::now() < deadline, "never escalated: {now:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(escalated.trail[0].kind, DeciderKind::Agent);
    assert_eq!(escalated.trail[0].verdict, Verdict::Escalate);
    assert_eq!(escalated.assignment.as_deref(), Some("fleet-desk"));
    assert!(escalated.task.is_some());
    // Only a person of that group decides it.
    let lease = Person::of_groups("key:lease", vec!["lease-desk".into(), "billing".into()]);
    for refused in [
        runtime
            .actions()
            .approve(action.id.as_str(), &action.digest, lease.clone(), None)
            .await
            .unwrap_err(),
        runtime
            .actions()
            .reject(action.id.as_str(), &action.digest, lease.clone(), None)
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(&refused, ActionError::NotTheirGroup { assignment: Some(group), .. } if group == "fleet-desk"),
            "{refused:?}"
        );
        assert_eq!(
            refused.to_string(),
            format!(
                "key:lease decides the actions of `lease-desk`, `billing` only; action `{}` is assigned to `fleet-desk`",
                action.id
            )
        );
    }
    let unchanged = runtime.actions().get(action.id.as_str()).await.unwrap();
    assert_eq!(unchanged.state, ActionState::Pending);
    assert_eq!(unchanged.trail, escalated.trail);
    let desk = Person::of_groups("key:desk", vec!["fleet-desk".into()]);
    let approved = runtime
        .actions()
        .approve(action.id.as_str(), &action.digest, desk, None)
        .await
        .unwrap();
    assert_eq!(approved.trail.last().unwrap().by, "key:desk");
    assert!(approved.human_approved());
    assert_eq!(approved.to_json()["approvedBy"], "person");
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(result(&ended)["status"], "failed");
    let tasks = runtime.tasks(&run.id).await.unwrap().items;
    assert_eq!(tasks.len(), 1, "the escalation task: {tasks:#?}");
}

#[tokio::test]
async fn cancelling_a_run_withdraws_its_pending_action() {
    let server = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path(), smtp_delivery(&server)).await;
    let run = runtime.start(reminder(REMINDER_TO_A_PERSON)).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    runtime.cancel(&run.id).await.unwrap();
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::Cancelled, "{ended:#?}");
    let withdrawn = runtime.actions().get(action.id.as_str()).await.unwrap();
    assert_eq!(withdrawn.state, ActionState::Rejected);
    assert!(withdrawn.trail.is_empty(), "no one decided it");
    assert!(
        withdrawn.outcome.unwrap().detail.contains("withdrawn"),
        "the outcome says why"
    );
    // A late approval sends nothing.
    let late = approve_as_shown(&runtime, &action).await.unwrap_err();
    assert!(matches!(late, ActionError::AlreadyDecided { .. }), "{late}");
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn a_decider_override_sends_the_very_next_action_to_people() {
    let server = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path(), smtp_delivery(&server)).await;
    let refused = hane_coordinator::Approvals::new(&runtime)
        .add_override("data.find_record", "no", "person:a")
        .await
        .unwrap_err();
    assert!(matches!(refused, ActionError::NotOutbound(_)), "{refused}");

    hane_coordinator::Approvals::new(&runtime)
        .add_override(
            "communication.send_email",
            "reminders under review this week",
            "person:a",
        )
        .await
        .unwrap();
    assert_eq!(
        hane_coordinator::Approvals::new(&runtime)
            .overrides()
            .await
            .unwrap()
            .len(),
        1
    );
    let run = runtime
        .start(reminder("shinagawa@fleet.example"))
        .await
        .unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    assert_eq!(action.decider, DeciderKind::Person);
    assert!(action.overridden);
    assert_eq!(action.rule, None);
    assert!(server.messages().is_empty());
    reject_as_shown(&runtime, &action).await.unwrap();
    runtime.wait(&run.id).await.unwrap();

    // Removed: the policy decides the next one again.
    assert!(
        hane_coordinator::Approvals::new(&runtime)
            .remove_override("communication.send_email")
            .await
            .unwrap()
    );
    assert!(
        !hane_coordinator::Approvals::new(&runtime)
            .remove_override("communication.send_email")
            .await
            .unwrap()
    );
    let ended = runtime
        .run_to_end(reminder("shinagawa@fleet.example"))
        .await
        .unwrap();
    assert_eq!(result(&ended)["status"], "delivered");
}

#[tokio::test]
async fn a_shadow_run_records_what_it_would_send_and_sends_nothing() {
    let server = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path(), smtp_delivery(&server)).await;
    let mut request = reminder("shinagawa@fleet.example");
    request.shadow = true;
    let ended = runtime.run_to_end(request).await.unwrap();
    assert_eq!(result(&ended)["status"], "shadowed", "{ended:#?}");
    let action = actions_of(&runtime, &ended.id).await.remove(0);
    assert_eq!(action.state, ActionState::Shadowed);
    assert!(action.trail.is_empty() && action.attempts.is_empty());
    assert_eq!(action.recipient, "shinagawa@fleet.example");
    assert!(runtime.tasks(&ended.id).await.unwrap().items.is_empty());
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn an_action_whose_deliverer_died_is_unknown_and_a_person_reconciles_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = SmtpServer::start(&["--delay-ms", "3000"]);
    let runtime = activated(dir.path(), unreachable_delivery()).await;
    let run = runtime.start(reminder(REMINDER_TO_A_PERSON)).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;

    // Another process approves and is killed once its claim is on disk,
    // while it talks to the server (which holds the message 3 s before it
    // answers).
    let mut child = approve_host(dir.path(), &action, &server);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        if line.unwrap() == "approving" {
            break;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = runtime.actions().get(action.id.as_str()).await.unwrap();
        if now.state == ActionState::Executing {
            break;
        }
        assert!(Instant::now() < deadline, "never claimed: {now:#?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let pid = child.id();
    // The run waiting for it notices that the process delivering it is
    // gone (its lease lapsed), and makes it `unknown`: no restart needed,
    // nothing resent.
    let deadline = Instant::now() + Duration::from_secs(10);
    let unknown = loop {
        let now = runtime.actions().get(action.id.as_str()).await.unwrap();
        if now.state == ActionState::Unknown {
            break now;
        }
        assert!(Instant::now() < deadline, "still {now:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(unknown.attempts.len(), 1);
    assert!(
        unknown.attempts[0].owner.contains(&format!("/{pid}/")),
        "{:?}",
        unknown.attempts
    );
    assert!(
        unknown
            .outcome
            .as_ref()
            .unwrap()
            .detail
            .contains("reconcile"),
        "{:?}",
        unknown.outcome
    );
    let recovered = runtime.actions().recover(true).await.unwrap();
    assert!(recovered.unknown.is_empty() && recovered.resumed.is_empty());
    // Approving again sends nothing; the run goes on with `unknown`.
    let again = approve_as_shown(&runtime, &action).await.unwrap_err();
    assert!(
        matches!(again, ActionError::AlreadyDecided { .. }),
        "{again}"
    );
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(result(&ended)["status"], "unknown");

    let bad = runtime
        .actions()
        .reconcile(action.id.as_str(), "sent", Person::anyone("person:a"), "")
        .await
        .unwrap_err();
    assert!(matches!(bad, ActionError::BadReconcile(_)), "{bad}");
    let reconciled = runtime
        .actions()
        .reconcile(
            action.id.as_str(),
            "delivered",
            Person::anyone("person:a"),
            "the depot confirmed it",
        )
        .await
        .unwrap();
    assert_eq!(reconciled.state, ActionState::Delivered);
    let outcome = reconciled.outcome.unwrap();
    assert_eq!(outcome.reconciled_by.as_deref(), Some("person:a"));
    assert!(outcome.detail.contains("the depot confirmed it"));
    let twice = runtime
        .actions()
        .reconcile(action.id.as_str(), "failed", Person::anyone("person:a"), "")
        .await
        .unwrap_err();
    assert!(matches!(twice, ActionError::NotUnknown { .. }), "{twice}");
}

#[tokio::test]
async fn a_process_that_lost_its_lease_stops_its_runs_and_starts_and_sends_nothing() {
    let server = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::agents::config();
    config
        .delivery(smtp_delivery(&server))
        .lease(Duration::from_millis(600));
    let runtime = AgentRuntime::open(&dir.path().join("hane.db"), &config).unwrap();
    runtime.activate(&harness::examples()).await.unwrap();
    let run = runtime.start(reminder(REMINDER_TO_A_PERSON)).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    // Its lease is gone from the store, as when another process took it
    // for dead: the next renewal finds out.
    let holder = runtime.lease().holder().to_owned();
    runtime.registry().leases().give_up(&holder).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), runtime.wait(&run.id))
        .await
        .expect("the run is stopped once the lease is lost")
        .unwrap();
    assert!(runtime.lease().lapsed());
    assert_eq!(ended.status, RunStatus::Failed, "{ended:#?}");
    let error = ended.error.as_deref().unwrap();
    assert!(
        error.contains("lease on the store") && error.contains(&holder),
        "{error}"
    );
    // Its action was withdrawn with it; nothing more starts or goes out.
    let withdrawn = runtime.actions().get(action.id.as_str()).await.unwrap();
    assert_eq!(withdrawn.state, ActionState::Rejected, "{withdrawn:#?}");
    let refused = runtime
        .start(reminder(REMINDER_TO_A_PERSON))
        .await
        .unwrap_err();
    assert!(matches!(refused, RunError::LeaseLapsed), "{refused}");
    assert!(server.messages().is_empty());
}

/// Every action run `run` proposed.
async fn actions_of(runtime: &AgentRuntime, run: &RunId) -> Vec<ActionRequest> {
    runtime.actions().list(None, Some(run)).await.unwrap().items
}

/// Copies the test program `name` (a guest of tests/guests) to `to`.
fn copy_test_program(name: &str, to: &Path) {
    let (_, path) = hane_builtins::test_programs::ALL
        .iter()
        .find(|(program, _)| *program == name)
        .unwrap_or_else(|| panic!("no test program {name}"));
    std::fs::copy(path, to).unwrap();
}

/// The inspection-reminder agent without a decider policy: a person
/// decides every email.
fn reminder_for_people() -> String {
    let manifest =
        std::fs::read_to_string(harness::examples().join("agents/inspection-reminder.yaml"))
            .unwrap();
    assert!(manifest.contains("decider: fleet-outbound\n"));
    manifest.replace("decider: fleet-outbound\n", "")
}

fn approve_host(dir: &Path, action: &ActionRequest, server: &SmtpServer) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_approve-host"))
        .arg(dir.join("hane.db"))
        .arg(action.id.as_str())
        .arg(&action.digest)
        .env("HANE_SMTP_URL", server.url())
        // A killed approver's delivery is taken for dead this soon.
        .env("HANE_LEASE", "0.5")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start approve-host")
}

/// A tiny xorshift generator: the kill points vary per run, and the seed
/// is printed so a failure can be replayed.
struct Random(u64);

impl Random {
    fn new() -> Self {
        let seed = std::env::var("HANE_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("kill points from HANE_TEST_SEED={seed}");
        Self(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_then_kill_at_random_points_never_resends() {
    const CYCLES: usize = 100;
    const BATCH: usize = 20;
    // The server holds each message 30 ms before answering, so kills land
    // before, inside and after delivery.
    let server = SmtpServer::start(&["--delay-ms", "30"]);
    let dir = tempfile::tempdir().unwrap();
    // The examples' daily budget allows 50 actions; this test needs 100.
    let release = release_with(dir.path(), &[("reminder.yaml", &reminder_for_people())]);
    let runtime = runtime(dir.path(), unreachable_delivery());
    runtime.activate(&release).await.unwrap();
    let mut random = Random::new();
    let mut outcomes = std::collections::BTreeMap::<&'static str, usize>::new();
    let mut actions = Vec::new();
    for batch in 0..CYCLES / BATCH {
        let mut runs = Vec::new();
        for i in 0..BATCH {
            let to = format!("depot-{}@elsewhere.example", batch * BATCH + i);
            runs.push(runtime.start(reminder(&to)).await.unwrap().id);
        }
        for run in &runs {
            let action = action_of(&runtime, run, ActionState::Pending).await;
            let mut child = approve_host(dir.path(), &action, &server);
            // Process start and recovery take a few ms, delivery 30 ms and more:
            // kills land before the claim, inside delivery and after it.
            let kill_after = Duration::from_micros(random.below(120_000));
            tokio::time::sleep(kill_after).await;
            let _ = child.kill();
            child.wait().unwrap();
            // The restart: a person approves again, in a new process.
            let output = approve_host(dir.path(), &action, &server)
                .wait_with_output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "{stdout}{}",
                String::from_utf8_lossy(&output.stderr)
            );
            actions.push(action);
        }
        for run in &runs {
            let ended = tokio::time::timeout(Duration::from_secs(30), runtime.wait(run))
                .await
                .expect("the run goes on once its action is settled")
                .unwrap();
            assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
        }
    }
    let mut unknown_received = 0;
    for action in &actions {
        let now = runtime.actions().get(action.id.as_str()).await.unwrap();
        let received = server.messages_of(action.id.as_str());
        assert!(
            received <= 1,
            "action {} was received {received} times",
            action.id
        );
        assert!(now.attempts.len() <= 1, "{:#?}", now.attempts);
        match now.state {
            ActionState::Delivered => assert_eq!(received, 1, "{now:#?}"),
            ActionState::Unknown => unknown_received += received,
            ActionState::Failed => assert_eq!(received, 0, "{now:#?}"),
            other => panic!("action {} ended {other}: {now:#?}", action.id),
        }
        *outcomes.entry(now.state.as_str()).or_default() += 1;
    }
    eprintln!(
        "outcomes of {CYCLES} approve-then-kill cycles: {outcomes:?}; {unknown_received} of the unknown ones had reached the server"
    );
    assert_eq!(server.messages().len(), {
        let mut n = 0;
        for action in &actions {
            n += server.messages_of(action.id.as_str());
        }
        n
    });
    assert!(
        outcomes.get("delivered").copied().unwrap_or(0) > 0,
        "{outcomes:?}"
    );
}

/// An agent whose driver uses a model: it reserves 50,000 tokens a run.
/// An agent whose driver uses a model and which this build does not run:
/// its runs reserve `maxModelTokens`, then are refused.
const SUMMARIZER: &str = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: summarizer
spec:
  purpose: Summarize a vehicle's history with a model
  input: { type: object }
  driver: opencode
  instructions: Summarize.
  tools: [data.find_record]
  limits: { maxModelTokens: 50000 }
  output: { type: object, required: [status], properties: { status: { type: string } } }
"#;

#[tokio::test]
async fn budgets_refuse_runs_actions_and_model_reservations_past_the_day() {
    let dir = tempfile::tempdir().unwrap();
    let scripted = reminder_for_people();
    let budget = |tokens: u64, runs: u64, actions: u64| {
        format!(
            "apiVersion: platform/v1alpha1\nkind: Budget\nmetadata:\n  name: daily\nspec:\n  agentRunsPerDay: {runs}\n  externalActionsPerDay: {actions}\n  modelTokensPerDay: {tokens}\n  alertAtPercent: 50\n"
        )
    };
    let release = release_with(
        dir.path(),
        &[
            ("summarizer.yaml", SUMMARIZER),
            ("reminder.yaml", &scripted),
            ("budget.yaml", &budget(40_000, 10, 1)),
        ],
    );
    let runtime = runtime(dir.path(), unreachable_delivery());
    runtime.activate(&release).await.unwrap();
    let start = |agent: &str, input: Value| StartRun {
        agent: agent.to_owned(),
        input,
        shadow: false,
    };

    // 40,000 tokens a day cannot cover a 50,000-token reservation.
    let refused = runtime
        .start(start("summarizer", json!({})))
        .await
        .unwrap_err();
    let RunError::Budget(exceeded) = &refused else {
        panic!("{refused}")
    };
    assert_eq!(exceeded.limit, "modelTokensPerDay");
    assert_eq!((exceeded.limit_value, exceeded.requested), (40_000, 50_000));
    assert!(
        refused.to_string().contains("modelTokensPerDay"),
        "{refused}"
    );
    let report = hane_coordinator::Budgets::new(&runtime)
        .report()
        .await
        .unwrap();
    assert_eq!(report.budget.as_deref(), Some("daily"));
    assert_eq!(report.usage.agent_runs, 0, "a refused run is not counted");
    assert_eq!(report.usage.model_tokens_reserved, 0);

    // One external action a day: the first is sent (here: fails for want
    // of an adapter, but was attempted and counts), the second is refused
    // before it is proposed.
    let first = runtime
        .start(start(
            "inspection-reminder",
            json!({"vehicle": "架空 300 あ 10-02", "to": "a@fleet.example"}),
        ))
        .await
        .unwrap();
    let action = action_of(&runtime, &first.id, ActionState::Pending).await;
    let executed = approve_as_shown(&runtime, &action).await.unwrap();
    assert_eq!(executed.state, ActionState::Failed, "no adapter here");
    assert_eq!(executed.attempts.len(), 1);
    runtime.wait(&first.id).await.unwrap();
    let report = hane_coordinator::Budgets::new(&runtime)
        .report()
        .await
        .unwrap();
    assert_eq!(report.usage.external_actions, 1, "{report:#?}");
    assert!(
        report
            .alerts
            .iter()
            .any(|a| a.limit == "externalActionsPerDay"),
        "crossing 50% of the limit is an alert: {report:#?}"
    );
    let second = runtime
        .run_to_end(start(
            "inspection-reminder",
            json!({"vehicle": "架空 300 あ 10-02", "to": "b@fleet.example"}),
        ))
        .await
        .unwrap();
    assert_eq!(second.status, RunStatus::Failed, "{second:#?}");
    assert!(
        second
            .error
            .as_deref()
            .unwrap()
            .contains("externalActionsPerDay"),
        "{second:#?}"
    );
    assert!(
        actions_of(&runtime, &second.id).await.is_empty(),
        "no action is proposed past the limit"
    );
}

#[tokio::test]
async fn a_model_run_that_fits_reserves_then_gives_back_and_runs_are_limited() {
    let dir = tempfile::tempdir().unwrap();
    // Room for one reservation of 50,000 tokens at a time: a second
    // start fits only if the first gave its reservation back.
    let budget = "apiVersion: platform/v1alpha1\nkind: Budget\nmetadata:\n  name: daily\nspec:\n  agentRunsPerDay: 2\n  modelTokensPerDay: 60000\n";
    let release = release_with(
        dir.path(),
        &[("summarizer.yaml", SUMMARIZER), ("budget.yaml", budget)],
    );
    std::fs::copy(
        harness::examples().join("agents/vehicle-check-scripted.yaml"),
        release.join("vehicle-check-scripted.yaml"),
    )
    .unwrap();
    let runtime = runtime(dir.path(), unreachable_delivery());
    runtime.activate(&release).await.unwrap();
    let start = |agent: &str, input: Value| StartRun {
        agent: agent.to_owned(),
        input,
        shadow: false,
    };
    // The reservation fits; the driver is not in this build, and neither
    // the reservation nor the run that never started is kept.
    for _ in 0..2 {
        let refused = runtime
            .start(start("summarizer", json!({})))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, RunError::DriverUnavailable { .. }),
            "{refused}"
        );
    }
    let report = hane_coordinator::Budgets::new(&runtime)
        .report()
        .await
        .unwrap();
    assert_eq!(report.usage.model_tokens_reserved, 0, "{report:#?}");
    assert_eq!(report.usage.agent_runs, 0, "{report:#?}");
    assert_eq!(report.limits.agent_runs_per_day, Some(2));

    // Two runs a day: the third is refused.
    let found = || {
        start(
            "vehicle-check-scripted",
            json!({"vehicle": "架空 300 あ 10-02"}),
        )
    };
    for _ in 0..2 {
        let run = runtime.run_to_end(found()).await.unwrap();
        assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    }
    let refused = runtime.start(found()).await.unwrap_err();
    let RunError::Budget(exceeded) = &refused else {
        panic!("{refused}")
    };
    assert_eq!(exceeded.limit, "agentRunsPerDay");
    assert_eq!((exceeded.used, exceeded.limit_value), (2, 2));
    let report = hane_coordinator::Budgets::new(&runtime)
        .report()
        .await
        .unwrap();
    assert_eq!(report.usage.agent_runs, 2, "a refused run is not counted");
    let alerts: Vec<&str> = report.alerts.iter().map(|a| a.limit.as_str()).collect();
    // Each limit's alert once: tokens when a reservation took 50,000 of
    // 60,000 (reserved counts), runs at the second run.
    assert_eq!(
        alerts,
        ["modelTokensPerDay", "agentRunsPerDay"],
        "recorded once each: {report:#?}"
    );
}

#[tokio::test]
pub(crate) async fn an_outbound_operation_proposes_an_email_that_is_sent_only_once_approved() {
    let server = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let agent = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: notice
spec:
  purpose: Propose an inspection notice through an outbound operation
  input:
    type: object
    required: [to, mode]
    properties: { to: { type: string }, mode: { type: string } }
  driver: scripted
  script:
    - id: notice
      tool: test.outbound_notice
      input: { to: "${input.to}", vehicle: "架空 300 あ 10-02", mode: "${input.mode}" }
    - tool: submit_result
      input:
        status: "${steps.notice.actions.0.state}"
        proposal: "${steps.notice.output.proposal}"
  tools: [test.outbound_notice]
  approval: { assignment: fleet-desk }
  limits: { maxToolCalls: 3, maxSeconds: 60 }
  output:
    type: object
    required: [status]
    properties: { status: { type: string }, proposal: { type: string } }
"#;
    let operation = r#"
apiVersion: operations/v1alpha1
kind: Operation
metadata:
  name: test.outbound_notice
spec:
  component: outbound_notice.wasm
  impact: outbound
  capabilities:
    actions: [communication.send_email]
"#;
    let release = release_with(
        dir.path(),
        &[("notice.yaml", agent), ("outbound_notice.yaml", operation)],
    );
    copy_test_program("outbound_notice", &release.join("outbound_notice.wasm"));
    let runtime = runtime(dir.path(), smtp_delivery(&server));
    runtime.activate(&release).await.unwrap();
    let tools = runtime.tools().await.unwrap();
    let tool = tools
        .iter()
        .find(|t| t.name == "test.outbound_notice")
        .unwrap();
    assert_eq!(tool.impact, "outbound");
    assert_eq!(tool.output_schema["required"], json!(["output", "actions"]));

    let run = runtime
        .start(StartRun {
            agent: "notice".to_owned(),
            input: json!({"to": REMINDER_TO_A_PERSON, "mode": "ok"}),
            shadow: false,
        })
        .await
        .unwrap();
    // The operation ran and proposed; nothing is sent until a person
    // approves the action the host made of the proposal.
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    assert_eq!(action.tool, "communication.send_email");
    assert_eq!(action.recipient, REMINDER_TO_A_PERSON);
    let content = action.content.to_value().unwrap();
    assert_eq!(content["subject"], "Inspection due: 架空 300 あ 10-02");
    assert_eq!(
        action.digest,
        digest("communication.send_email", REMINDER_TO_A_PERSON, &content)
    );
    assert!(server.messages().is_empty());
    approve_as_shown(&runtime, &action).await.unwrap();
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    assert_eq!(result(&ended)["status"], "delivered");
    assert_eq!(result(&ended)["proposal"], "prop-1");
    assert_eq!(server.messages_of(action.id.as_str()), 1);

    // A proposal of a tool the operation was not granted fails the call
    // in the sandbox: no action, nothing sent.
    let refused = runtime
        .run_to_end(StartRun {
            agent: "notice".to_owned(),
            input: json!({"to": REMINDER_TO_A_PERSON, "mode": "ungranted"}),
            shadow: false,
        })
        .await
        .unwrap();
    assert_eq!(refused.status, RunStatus::Failed, "{refused:#?}");
    assert!(
        refused.error.as_deref().unwrap().contains("denied"),
        "{refused:#?}"
    );
    assert!(actions_of(&runtime, &refused.id).await.is_empty());
    assert_eq!(server.messages().len(), 1);

    // A recipient that is not one plain address is refused to the
    // operation as it proposes, as it would be to the agent.
    let refused = runtime
        .run_to_end(StartRun {
            agent: "notice".to_owned(),
            input: json!({"to": "depot\u{1b}[2K@elsewhere.example", "mode": "ok"}),
            shadow: false,
        })
        .await
        .unwrap();
    assert_eq!(refused.status, RunStatus::Failed, "{refused:#?}");
    let error = refused.error.as_deref().unwrap();
    assert!(
        error.contains("the recipient is not one email address"),
        "{error}"
    );
    assert!(actions_of(&runtime, &refused.id).await.is_empty());
    assert_eq!(server.messages().len(), 1);
}

#[tokio::test]
async fn integration_execute_calls_the_customer_api_with_the_hosts_credential_once_approved() {
    const SECRET: &str = "crm-secret-5f2b9c";
    let provider = Provider::start(Answer::Status(200, r#"{"updated":true}"#)).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: crm-update
spec:
  purpose: Record in the customer's CRM that a contact was reached
  input:
    type: object
    required: [contact, connection]
    properties: { contact: { type: string }, connection: { type: string } }
  driver: scripted
  script:
    - id: update
      tool: integration.execute
      input:
        connection: "${input.connection}"
        operation: updateContact
        input: { id: "${input.contact}", body: { status: contacted } }
    - tool: submit_result
      input: { status: "${steps.update.state}" }
  tools: [integration.execute]
  connections: [crm]
  approval: { assignment: crm-desk }
  limits: { maxToolCalls: 2, maxSeconds: 60 }
  output: { type: object, required: [status], properties: { status: { type: string } } }
"#;
    let connection = format!(
        r#"
apiVersion: platform/v1alpha1
kind: Connection
metadata:
  name: crm
spec:
  baseUrl: {}
  openapi: crm.openapi.json
  credential: crm-api
  allow: [updateContact]
"#,
        provider.url("/api")
    );
    let openapi = serde_json::to_string(&json!({
        "openapi": "3.1.0",
        "info": {"title": "CRM", "version": "1"},
        "paths": {"/contacts/{id}": {"patch": {
            "operationId": "updateContact",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
            "requestBody": {"required": true, "content": {"application/json": {"schema": {
                "type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}
            }}}},
            "responses": {"200": {"description": "Updated"}}
        }}}
    }))
    .unwrap();
    let release = release_with(
        dir.path(),
        &[
            ("crm.yaml", agent),
            ("connection.yaml", &connection),
            ("crm.openapi.json", &openapi),
        ],
    );
    let mut delivery = DeliveryConfig::new();
    delivery.credential("crm-api", SECRET);
    let runtime = runtime(dir.path(), delivery);
    runtime.activate(&release).await.unwrap();

    let run = runtime
        .start(StartRun {
            agent: "crm-update".to_owned(),
            input: json!({"contact": "7", "connection": "crm"}),
            shadow: false,
        })
        .await
        .unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    assert_eq!(action.recipient, "crm");
    assert_eq!(
        action.content.to_value().unwrap(),
        json!({"operation": "updateContact", "method": "PATCH", "path": "/contacts/7", "body": {"status": "contacted"}})
    );
    let connection = action.connection.as_ref().unwrap();
    assert_eq!(connection.credential.as_deref(), Some("crm-api"));
    assert!(provider.seen().is_empty(), "nothing before approval");
    let approved = approve_as_shown(&runtime, &action).await.unwrap();
    assert_eq!(
        approved.state,
        ActionState::Delivered,
        "{:?}",
        approved.outcome
    );
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(result(&ended)["status"], "delivered");
    let seen = provider.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("PATCH", "/api/contacts/7")
    );
    assert_eq!(seen[0].json(), json!({"status": "contacted"}));
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
    assert_eq!(seen[0].header("idempotency-key"), Some(action.id.as_str()));
    // The credential went to the API and nowhere else: not into the
    // action, the run, or any byte of the store.
    assert!(!approved.to_json().to_string().contains(SECRET));
    assert!(!serde_json::to_string(&ended).unwrap().contains(SECRET));
    drop(runtime);
    crate::integrations::assert_nowhere_under(dir.path(), SECRET);

    // A connection the agent does not declare is refused before any
    // action exists.
    let mut delivery = unreachable_delivery();
    delivery.credential("crm-api", SECRET);
    let runtime = self::runtime(dir.path(), delivery);
    let refused = runtime
        .run_to_end(StartRun {
            agent: "crm-update".to_owned(),
            input: json!({"contact": "7", "connection": "billing"}),
            shadow: false,
        })
        .await
        .unwrap();
    assert_eq!(refused.status, RunStatus::Failed);
    assert!(
        refused
            .error
            .as_deref()
            .unwrap()
            .contains("connection `billing` is not one of agent `crm-update`'s connections"),
        "{refused:#?}"
    );
    assert!(actions_of(&runtime, &refused.id).await.is_empty());
    assert_eq!(provider.seen().len(), 1);
}

#[tokio::test]
async fn an_operation_whose_manifest_misstates_its_impact_is_refused_at_activation() {
    let dir = tempfile::tempdir().unwrap();
    // A read operation declared outbound: the declaration must match what
    // the component says of itself.
    let operation = r#"
apiVersion: operations/v1alpha1
kind: Operation
metadata:
  name: lookup
spec:
  component: builtin:data.find_record
  impact: outbound
  capabilities:
    records: [vehicles]
"#;
    let release = release_with(dir.path(), &[("lookup.yaml", operation)]);
    let runtime = runtime(dir.path(), unreachable_delivery());
    let refused = runtime.activate(&release).await.unwrap_err().to_string();
    assert!(
        refused.contains(
            "lookup.yaml: spec.impact: the manifest says `outbound` but the component describes itself as `read`"
        ),
        "{refused}"
    );
    assert!(matches!(runtime.release().await, Err(RunError::NoRelease)));
}

#[tokio::test]
async fn an_approver_who_goes_away_mid_delivery_does_not_stop_it() {
    let server = SmtpServer::start(&["--delay-ms", "500"]);
    let dir = tempfile::tempdir().unwrap();
    let runtime = activated(dir.path(), smtp_delivery(&server)).await;
    let run = runtime.start(reminder(REMINDER_TO_A_PERSON)).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    // The approving caller (an HTTP request whose client hung up) is
    // dropped while the server holds the message.
    let approval = approve_as_shown(&runtime, &action);
    assert!(
        tokio::time::timeout(Duration::from_millis(150), approval)
            .await
            .is_err()
    );
    let settled = tokio::time::timeout(
        Duration::from_secs(10),
        runtime.actions().wait_settled(action.id.as_str()),
    )
    .await
    .expect("the delivery goes on without its caller")
    .unwrap();
    assert_eq!(settled.state, ActionState::Delivered, "{settled:#?}");
    assert_eq!(server.messages_of(action.id.as_str()), 1);
    assert_eq!(
        result(&runtime.wait(&run.id).await.unwrap())["status"],
        "delivered"
    );
}

#[tokio::test]
async fn the_time_limit_withdraws_a_pending_action() {
    let server = SmtpServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let quick = reminder_for_people().replace("maxSeconds: 3600", "maxSeconds: 1");
    let release = release_with(dir.path(), &[("reminder.yaml", &quick)]);
    let runtime = runtime(dir.path(), smtp_delivery(&server));
    runtime.activate(&release).await.unwrap();
    let run = runtime.start(reminder(REMINDER_TO_A_PERSON)).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::LimitExceeded, "{ended:#?}");
    let withdrawn = runtime.actions().get(action.id.as_str()).await.unwrap();
    assert_eq!(withdrawn.state, ActionState::Rejected);
    assert!(
        withdrawn
            .outcome
            .unwrap()
            .detail
            .contains("the run ended limit_exceeded"),
    );
    let late = hane_coordinator::Approvals::new(&runtime)
        .approve(
            action.id.as_str(),
            &action.digest,
            Person::anyone("person:a"),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(late, ActionError::AlreadyDecided { .. }), "{late}");
    assert!(server.messages().is_empty());
}

#[tokio::test]
pub(crate) async fn an_override_set_while_a_review_agent_works_hands_the_action_to_people() {
    let dir = tempfile::tempdir().unwrap();
    // A review agent that takes a while (a second or so of arithmetic in
    // the sandbox) before it approves.
    let spin = r#"
apiVersion: operations/v1alpha1
kind: Operation
metadata:
  name: test.spin
spec:
  component: guest_spin.wasm
  limits: { fuel: 200000000000, timeout: 60s }
"#;
    let review = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: slow-review
spec:
  purpose: Approves every text, after thinking it over
  input: { type: object, required: [action] }
  driver: scripted
  script:
    - tool: test.spin
      input: { iterations: 1500000000 }
    - tool: submit_review
      input: { decision: approve, reason: "looks fine" }
  tools: [test.spin, submit_review]
  limits: { maxSeconds: 120 }
  output: { type: object, required: [status], properties: { status: { type: string } } }
"#;
    let policy = r#"
apiVersion: agents/v1alpha1
kind: DeciderPolicy
metadata:
  name: reviewed
spec:
  rules:
    - tools: [communication.send_sms]
      decider: { agent: slow-review }
"#;
    let texter = std::fs::read_to_string(harness::examples().join("agents/driver-text.yaml"))
        .unwrap()
        .replace("decider: fleet-outbound", "decider: reviewed");
    let release = release_with(
        dir.path(),
        &[
            ("spin.yaml", spin),
            ("review.yaml", review),
            ("policy.yaml", policy),
            ("texter.yaml", &texter),
        ],
    );
    copy_test_program("guest_spin", &release.join("guest_spin.wasm"));
    let runtime = runtime(dir.path(), unreachable_delivery());
    runtime.activate(&release).await.unwrap();

    // 1. While the agent reviews, a person is refused; once an override
    //    names the tool, a person of the agent's group decides, and the
    //    agent's late approval changes nothing.
    let run = runtime.start(text("+815012340001")).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    assert_eq!(action.decider, DeciderKind::Agent);
    assert_eq!(action.assignment.as_deref(), Some("fleet-desk"));
    let desk = Person::of_groups("key:desk", vec!["fleet-desk".into()]);
    let refused = hane_coordinator::Approvals::new(&runtime)
        .approve(action.id.as_str(), &action.digest, desk.clone(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ActionError::AwaitingAgent { .. }),
        "{refused}"
    );
    hane_coordinator::Approvals::new(&runtime)
        .add_override("communication.send_sms", "texts under review", "person:a")
        .await
        .unwrap();
    let lease = Person::of_groups("key:lease", vec!["lease-desk".into()]);
    let refused = hane_coordinator::Approvals::new(&runtime)
        .approve(action.id.as_str(), &action.digest, lease, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ActionError::NotTheirGroup { assignment: Some(group), .. } if group == "fleet-desk"),
        "{refused}"
    );
    let approved = hane_coordinator::Approvals::new(&runtime)
        .approve(action.id.as_str(), &action.digest, desk, None)
        .await
        .unwrap();
    assert!(approved.human_approved());
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    assert_eq!(result(&ended)["status"], "failed", "no SMS provider here");
    let action = runtime.actions().get(action.id.as_str()).await.unwrap();
    assert_eq!(action.trail.len(), 1, "{:#?}", action.trail);
    assert_eq!(action.trail[0].kind, DeciderKind::Person);
    hane_coordinator::Approvals::new(&runtime)
        .remove_override("communication.send_sms")
        .await
        .unwrap();

    // 2. An override set while the agent reviews turns its approval into
    //    an escalation: people decide.
    let run = runtime.start(text("+815012340002")).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    assert_eq!(action.decider, DeciderKind::Agent);
    hane_coordinator::Approvals::new(&runtime)
        .add_override("communication.send_sms", "texts under review", "person:a")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let escalated = loop {
        let now = runtime.actions().get(action.id.as_str()).await.unwrap();
        if !now.trail.is_empty() {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "the review never ended: {now:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(escalated.state, ActionState::Pending);
    assert_eq!(escalated.decider, DeciderKind::Person);
    assert_eq!(escalated.trail[0].kind, DeciderKind::Agent);
    assert_eq!(escalated.trail[0].verdict, Verdict::Escalate);
    assert!(
        escalated.trail[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("decider override"),
        "{:#?}",
        escalated.trail
    );
    reject_as_shown(&runtime, &action).await.unwrap();
    assert_eq!(
        result(&runtime.wait(&run.id).await.unwrap())["status"],
        "rejected"
    );
}

#[tokio::test]
async fn the_claim_checks_the_budget_when_two_actions_passed_the_proposal_check() {
    let dir = tempfile::tempdir().unwrap();
    let budget = "apiVersion: platform/v1alpha1\nkind: Budget\nmetadata:\n  name: daily\nspec:\n  externalActionsPerDay: 1\n";
    let release = release_with(
        dir.path(),
        &[
            ("reminder.yaml", &reminder_for_people()),
            ("budget.yaml", budget),
        ],
    );
    let runtime = runtime(dir.path(), unreachable_delivery());
    runtime.activate(&release).await.unwrap();
    // Both are proposed while none was sent: both pass the check made
    // when an action is proposed.
    let first = runtime
        .start(reminder("a@elsewhere.example"))
        .await
        .unwrap();
    let second = runtime
        .start(reminder("b@elsewhere.example"))
        .await
        .unwrap();
    let a = action_of(&runtime, &first.id, ActionState::Pending).await;
    let b = action_of(&runtime, &second.id, ActionState::Pending).await;
    let a = hane_coordinator::Approvals::new(&runtime)
        .approve(a.id.as_str(), &a.digest, Person::anyone("person:a"), None)
        .await
        .unwrap();
    assert_eq!(a.attempts.len(), 1, "the first is attempted");
    let b = hane_coordinator::Approvals::new(&runtime)
        .approve(b.id.as_str(), &b.digest, Person::anyone("person:a"), None)
        .await
        .unwrap();
    assert_eq!(b.state, ActionState::Failed);
    assert!(b.attempts.is_empty(), "the second is never attempted");
    assert!(b.outcome.unwrap().detail.contains(
        "not sent: the daily budget `daily` does not allow this: externalActionsPerDay is 1"
    ),);
    assert_eq!(
        hane_coordinator::Budgets::new(&runtime)
            .report()
            .await
            .unwrap()
            .usage
            .external_actions,
        1
    );
}
