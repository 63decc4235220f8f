//! The local operation manager: outputs and receipts, typed failures, the
//! concurrency bound, and cancellation of queued and running operations.

use hane_builtins::test_programs;
use hane_core::{
    Impact, JsonText, Limits, Operation, Outcome, Policy, SessionId, ToolCallId, WasmCall,
};
use hane_manager::{Components, LocalConfig, LocalOperationManager, component_digest};
use hane_manager::{Ending, OperationManager, Ticket, Update};

use crate::harness;

/// An operation calling the component with `digest`.
fn operation(digest: &str, name: &str, input: &str, limits: Limits, policy: Policy) -> Operation {
    Operation::wasm(
        SessionId::new(),
        ToolCallId::new(),
        Impact::Read,
        WasmCall {
            name: name.to_owned(),
            component: digest.to_owned(),
            policy,
            limits,
            input: JsonText::parse(input).unwrap(),
        },
    )
}

/// Adds the test program at `path` and returns its digest.
fn add_program(components: &Components, path: &str) -> String {
    components.insert(std::fs::read(path).unwrap())
}

fn manager(components: Components, concurrency: usize) -> LocalOperationManager {
    LocalOperationManager::new(
        harness::sandbox().clone(),
        components,
        LocalConfig::new().concurrency(concurrency),
    )
}

/// Limits under which a looping guest runs until it is cancelled.
fn until_cancelled() -> Limits {
    Limits {
        fuel: u64::MAX / 2,
        timeout: hane_core::Duration::seconds(60),
        ..Limits::default()
    }
}

async fn next(ticket: &mut Ticket) -> Update {
    ticket
        .next()
        .await
        .expect("an update before the ticket closes")
}

#[tokio::test]
async fn a_builtin_and_a_test_program_return_output_and_receipt() {
    let components = Components::with_builtins(hane_builtins::all());
    let echo = add_program(&components, test_programs::GUEST_ECHO);
    let manager = manager(components, 2);

    let search = hane_builtins::get("documents.search").unwrap();
    let documents = Policy {
        files: vec![
            format!(
                "{}:/documents",
                harness::examples().join("documents").display()
            )
            .parse()
            .unwrap(),
        ],
        ..Policy::default()
    };
    let mut ticket = manager.submit(operation(
        &component_digest(search),
        "documents.search",
        r#"{"query":"tyre tread depth","limit":2}"#,
        Limits::default(),
        documents,
    ));
    assert_eq!(next(&mut ticket).await, Update::Started);
    let Update::Finished(Ending::Succeeded(done)) = next(&mut ticket).await else {
        panic!("documents.search did not succeed");
    };
    let output = done.output.to_value().unwrap();
    assert_eq!(
        output["results"][0]["path"],
        "/documents/inspection-procedure.md"
    );
    assert_eq!(done.receipt.operation, "documents.search");
    assert_eq!(done.receipt.digest, component_digest(search));
    assert_eq!(done.receipt.outcome, Outcome::Succeeded);
    assert!(done.receipt.fuel_consumed > 0);
    assert!(ticket.next().await.is_none(), "nothing after Finished");

    let ending = manager
        .submit(operation(
            &echo,
            "test.echo",
            r#"{"message":"hello"}"#,
            Limits::default(),
            Policy::default(),
        ))
        .ending()
        .await;
    let Ending::Succeeded(done) = ending else {
        panic!("test.echo did not succeed: {ending:?}");
    };
    assert_eq!(done.output.as_str(), r#"{"message":"hello","length":5}"#);
    assert_eq!(done.receipt.operation, "test.echo");
    assert_eq!(done.receipt.digest, echo);
}

#[tokio::test]
async fn a_failing_guest_reports_its_outcome_receipt_and_message() {
    let components = Components::new();
    let looping = add_program(&components, test_programs::HOSTILE_LOOP);
    let manager = manager(components, 1);
    let limits = Limits {
        fuel: 5_000_000,
        ..Limits::default()
    };
    let ending = manager
        .submit(operation(
            &looping,
            "hostile.loop",
            "{}",
            limits,
            Policy::default(),
        ))
        .ending()
        .await;
    let Ending::Failed(failure) = ending else {
        panic!("the loop did not fail: {ending:?}");
    };
    assert_eq!(failure.outcome, Outcome::FuelExhausted);
    assert!(failure.message.contains("fuel"), "{}", failure.message);
    let receipt = failure.receipt.expect("a receipt from the sandbox");
    assert_eq!(receipt.outcome, Outcome::FuelExhausted);
    assert_eq!(receipt.fuel_consumed, 5_000_000);
}

#[tokio::test]
async fn a_missing_or_broken_component_is_a_host_error_naming_it() {
    let components = Components::new();
    let broken = components.insert(b"not a component".to_vec());
    let manager = manager(components, 1);
    let missing = component_digest(b"never added");

    let mut ticket = manager.submit(operation(
        &missing,
        "gone",
        "{}",
        Limits::default(),
        Policy::default(),
    ));
    let Update::Finished(Ending::Failed(failure)) = next(&mut ticket).await else {
        panic!("a missing component must fail without starting");
    };
    assert_eq!(failure.outcome, Outcome::HostError);
    assert!(failure.message.contains(&missing), "{}", failure.message);

    let ending = manager
        .submit(operation(
            &broken,
            "broken",
            "{}",
            Limits::default(),
            Policy::default(),
        ))
        .ending()
        .await;
    let Ending::Failed(failure) = ending else {
        panic!("a broken component must fail: {ending:?}");
    };
    assert_eq!(failure.outcome, Outcome::HostError);
    assert!(failure.message.contains(&broken), "{}", failure.message);
    assert!(
        failure
            .message
            .contains("not a valid WebAssembly component"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn with_concurrency_one_the_next_operation_starts_after_the_first_finished() {
    let components = Components::new();
    let spin = add_program(&components, test_programs::GUEST_SPIN);
    let echo = add_program(&components, test_programs::GUEST_ECHO);
    let manager = manager(components, 1);

    let mut first = manager.submit(operation(
        &spin,
        "test.spin",
        r#"{"iterations":50000000}"#,
        Limits::default(),
        Policy::default(),
    ));
    assert_eq!(next(&mut first).await, Update::Started);
    let mut second = manager.submit(operation(
        &echo,
        "test.echo",
        r#"{"message":"next"}"#,
        Limits::default(),
        Policy::default(),
    ));
    assert_eq!(next(&mut second).await, Update::Started);
    // The first reports its ending before it frees its slot, so when the
    // second has started the first's ending is already on its ticket.
    let ended = first.try_next();
    assert!(
        matches!(ended, Some(Update::Finished(Ending::Succeeded(_)))),
        "the second operation started while the first was running: {ended:?}"
    );
    assert!(matches!(
        next(&mut second).await,
        Update::Finished(Ending::Succeeded(_))
    ));
}

#[tokio::test]
async fn cancelling_a_running_guest_interrupts_it() {
    let components = Components::new();
    let looping = add_program(&components, test_programs::HOSTILE_LOOP);
    let manager = manager(components, 1);
    let op = operation(
        &looping,
        "hostile.loop",
        "{}",
        until_cancelled(),
        Policy::default(),
    );
    let id = op.id.clone();
    let mut ticket = manager.submit(op);
    assert_eq!(next(&mut ticket).await, Update::Started);
    manager.cancel(&id);
    // Without the interruption the loop would run into its 60 s timeout
    // and end as `timeout`.
    let Update::Finished(Ending::Failed(failure)) = next(&mut ticket).await else {
        panic!("a cancelled loop must fail");
    };
    assert_eq!(failure.outcome, Outcome::Cancelled);
    assert_eq!(failure.receipt.map(|r| r.outcome), Some(Outcome::Cancelled));
}

#[tokio::test]
async fn a_cancelled_queued_operation_never_starts() {
    let components = Components::new();
    let looping = add_program(&components, test_programs::HOSTILE_LOOP);
    let echo = add_program(&components, test_programs::GUEST_ECHO);
    let manager = manager(components, 1);
    let running = operation(
        &looping,
        "hostile.loop",
        "{}",
        until_cancelled(),
        Policy::default(),
    );
    let running_id = running.id.clone();
    let mut running = manager.submit(running);
    assert_eq!(next(&mut running).await, Update::Started);

    let queued = operation(
        &echo,
        "test.echo",
        r#"{"message":"never"}"#,
        Limits::default(),
        Policy::default(),
    );
    let queued_id = queued.id.clone();
    let mut queued = manager.submit(queued);
    manager.cancel(&queued_id);
    let Update::Finished(Ending::Failed(failure)) = next(&mut queued).await else {
        panic!("a cancelled queued operation must fail without starting");
    };
    assert_eq!(failure.outcome, Outcome::Cancelled);
    assert!(failure.receipt.is_none(), "it never reached the sandbox");

    manager.cancel(&running_id);
    assert!(matches!(
        next(&mut running).await,
        Update::Finished(Ending::Failed(f)) if f.outcome == Outcome::Cancelled
    ));
    // The same id may run once it has ended.
    let again = operation(
        &echo,
        "test.echo",
        r#"{"message":"again"}"#,
        Limits::default(),
        Policy::default(),
    );
    let again = Operation {
        id: queued_id,
        ..again
    };
    assert!(matches!(
        manager.submit(again).ending().await,
        Ending::Succeeded(_)
    ));
}
