//! The `actions` capability end to end: `outbound_notice` proposes an email
//! and the proposal comes back in the call's result, never sent; refusals
//! reach the guest as WIT errors; the grant is checked at load.

use std::sync::OnceLock;

use hane_builtins::test_programs;
use hane_core::{Impact, Limits, Outcome, Policy, action::ProposedAction};
use hane_sandbox::{
    Call, CallError, GuestError, LoadError, LoadedOperation, Sandbox, SandboxConfig,
};
use serde_json::{Value, json};

const EMAIL: &str = "communication.send_email";

fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        Sandbox::new(
            &SandboxConfig::new()
                .cache_dir(Some(hane_test_support::component_cache()))
                .max_instances(8)
                .clone(),
        )
        .expect("sandbox")
    })
}

fn granting(tools: &[&str]) -> Policy {
    Policy {
        actions: tools.iter().map(|t| (*t).to_owned()).collect(),
        ..Policy::default()
    }
}

async fn load(path: &str, policy: &Policy) -> Result<LoadedOperation, LoadError> {
    sandbox().load_file(path.as_ref(), policy).await
}

async fn notice(policy: &Policy) -> LoadedOperation {
    load(test_programs::OUTBOUND_NOTICE, policy)
        .await
        .expect("outbound_notice loads")
}

async fn run(op: &LoadedOperation, input: Value) -> Call {
    op.call(&input.to_string(), &Limits::default()).await
}

fn input(mode: &str) -> Value {
    json!({"to": "kenji@example.com", "vehicle": "V-001", "mode": mode})
}

#[tokio::test]
async fn a_granted_proposal_comes_back_with_the_call_and_nothing_is_sent() {
    let op = notice(&granting(&[EMAIL])).await;
    assert_eq!(op.descriptor().impact, Impact::Outbound);
    let call = run(&op, json!({"to": "kenji@example.com", "vehicle": "V-001"})).await;
    let output: Value = serde_json::from_str(call.result.as_ref().unwrap()).unwrap();
    assert_eq!(output, json!({"proposal": "prop-1"}));
    assert_eq!(call.proposals.len(), 1);
    let ProposedAction {
        id,
        tool,
        recipient,
        content,
    } = &call.proposals[0];
    assert_eq!(id, "prop-1");
    assert_eq!(tool, EMAIL);
    assert_eq!(recipient, "kenji@example.com");
    let content = content.to_value().unwrap();
    assert_eq!(content["subject"], "Inspection due: V-001");
    assert!(content["body"].as_str().unwrap().contains("V-001"));
    assert_eq!(call.receipt.outcome, Outcome::Succeeded);
    assert_eq!(call.receipt.host_calls.denied, 0);
}

#[tokio::test]
async fn an_ungranted_tool_is_denied_and_recorded() {
    let op = notice(&granting(&[EMAIL])).await;
    let call = run(&op, input("ungranted")).await;
    match &call.result {
        Err(CallError::Denied { denial, guest }) => {
            assert_eq!(
                denial,
                "action tool `communication.send_sms` is not granted"
            );
            let guest = guest.as_deref().unwrap_or_default();
            assert!(
                guest.contains(
                    "(granted: communication.send_email); grant it in `capabilities.actions`"
                ),
                "{guest}"
            );
        }
        other => panic!("expected a denial, got {other:?}"),
    }
    assert_eq!(call.receipt.outcome, Outcome::Denied);
    assert_eq!(call.receipt.host_calls.denied, 1);
    assert!(call.proposals.is_empty());
}

#[tokio::test]
async fn content_that_is_not_a_json_object_is_refused() {
    let op = notice(&granting(&[EMAIL])).await;
    for (mode, expected) in [
        ("bad_json", "the content is not JSON"),
        ("not_object", "the content is JSON but not an object"),
    ] {
        let call = run(&op, input(mode)).await;
        match &call.result {
            Err(CallError::Operation(GuestError::InvalidInput(m))) => {
                assert!(m.contains(expected), "{mode}: {m}");
            }
            other => panic!("{mode}: expected invalid input, got {other:?}"),
        }
        assert_eq!(call.receipt.host_calls.denied, 0, "{mode}");
        assert!(call.proposals.is_empty(), "{mode}");
    }
}

#[tokio::test]
async fn more_than_sixteen_proposals_are_refused() {
    let op = notice(&granting(&[EMAIL])).await;
    let call = run(&op, input("too_many")).await;
    match &call.result {
        Err(CallError::Operation(GuestError::InvalidInput(m))) => {
            assert!(
                m.contains(&format!(
                    "already made {} proposals",
                    hane_sandbox::actions::MAX_PROPOSALS
                )),
                "{m}"
            );
        }
        other => panic!("expected invalid input, got {other:?}"),
    }
    // The call failed, so the sixteen it made are dropped too.
    assert!(call.proposals.is_empty());
}

#[tokio::test]
async fn a_failed_call_returns_no_proposals() {
    let op = notice(&granting(&[EMAIL])).await;
    let call = run(&op, input("fail")).await;
    assert!(
        matches!(&call.result, Err(CallError::Operation(GuestError::Failed(m))) if m == "gave up after proposing"),
        "{:?}",
        call.result
    );
    assert!(call.proposals.is_empty());

    let call = run(&op, input("panic")).await;
    assert!(
        matches!(&call.result, Err(CallError::Trap { panic: Some(p), .. }) if p == "panicked after proposing"),
        "{:?}",
        call.result
    );
    assert_eq!(call.receipt.outcome, Outcome::Trap);
    assert!(call.proposals.is_empty());

    let call = op
        .call(
            &input("ok").to_string(),
            &Limits {
                fuel: 1_000,
                ..Limits::default()
            },
        )
        .await;
    assert!(
        matches!(call.result, Err(CallError::FuelExhausted { .. })),
        "{:?}",
        call.result
    );
    assert!(call.proposals.is_empty());
}

#[tokio::test]
async fn importing_actions_without_a_grant_is_refused_at_load() {
    // Records granted, actions not: the actions import is what is named.
    let policy = Policy {
        records: vec!["vehicles".into()],
        ..Policy::default()
    };
    let err = load(test_programs::OUTBOUND_NOTICE, &policy)
        .await
        .unwrap_err();
    match &err {
        LoadError::NotGranted { import, grant, .. } => {
            assert!(
                import.starts_with("hane:operation/actions@0.1."),
                "{import}"
            );
            assert_eq!(*grant, "action tools");
        }
        other => panic!("expected NotGranted, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("but its policy grants no action tools; add `capabilities.actions`"),
        "{err}"
    );
}

#[tokio::test]
async fn an_actions_grant_is_refused_to_an_operation_that_is_not_outbound() {
    let err = load(test_programs::GUEST_ECHO, &granting(&[EMAIL]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            LoadError::ActionsNotOutbound { operation, impact: Impact::Read } if operation == "test.echo"
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("only an operation whose impact is `outbound` may propose actions"),
        "{err}"
    );

    let err = load(
        test_programs::OUTBOUND_NOTICE,
        &granting(&["communication.send_fax"]),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, LoadError::Policy(_)), "{err:?}");
}
