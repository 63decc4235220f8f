use super::*;
use hane_core::JsonText;

#[tokio::test]
async fn an_approval_that_resumes_a_delivery_checks_the_group_too() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path().join("hane.db")).unwrap();
    let lease = Lease::acquire(&registry, crate::lease::DEFAULT_LEASE).unwrap();
    let ledger = ExecutionLedger::new(
        registry,
        DeliveryConfig::new(),
        BudgetScope::default(),
        lease,
    );
    let tool = "communication.send_sms";
    let content = serde_json::json!({"text": "Your van is ready"});
    let now = now_ms();
    let action = ActionRequest {
        id: ActionId::new(),
        run: RunId::new(),
        agent: "notify".to_owned(),
        tool: tool.to_owned(),
        recipient: "+15550100".to_owned(),
        digest: digest(tool, "+15550100", &content),
        content: JsonText::from_value(&content),
        state: ActionState::Pending,
        decider: DeciderKind::Person,
        assignment: Some("desk".to_owned()),
        reviewer: None,
        rule: None,
        overridden: false,
        task: None,
        connection: None,
        trail: Vec::new(),
        attempts: Vec::new(),
        outcome: None,
        created_at_ms: now,
        updated_at_ms: now,
    };
    let id = action.id.to_string();
    ledger.propose(action.clone(), None).await.unwrap();
    // Approved by a person whose process stopped before the claim.
    let approval = person(Verdict::Approve, "key:desk", &action.digest, None);
    ledger.decide(&id, approval, None, None).await.unwrap();

    // Another group's key cannot resume it.
    let lease = Person::of_groups("key:lease", vec!["lease-desk".to_owned()]);
    let refused = ledger
        .approve(&id, &action.digest, lease, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ActionError::NotTheirGroup { by, .. } if by == "key:lease"),
        "{refused:?}"
    );
    let still = ledger.get(&id).await.unwrap();
    assert_eq!(still.state, ActionState::Approved);
    assert!(still.attempts.is_empty());

    // The desk's approval would resume it here, where no SMS provider is
    // configured: refused, and it stays approved for a process that has
    // one.
    let desk = Person::of_groups("key:desk-2", vec!["desk".to_owned()]);
    let refused = ledger
        .approve(&id, &action.digest, desk, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ActionError::NotDeliverableHere { missing, .. } if missing.var == "HANE_SMS_URL"),
        "{refused:?}"
    );
    let still = ledger.get(&id).await.unwrap();
    assert_eq!(still.state, ActionState::Approved);
    assert!(still.attempts.is_empty());
    assert_eq!(still.trail.len(), 1, "the refusal decides nothing anew");
}
