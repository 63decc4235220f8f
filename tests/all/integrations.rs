//! Customer APIs as tools, against a real API service: the
//! fleet-maintenance service (FastAPI, `examples/services/`), started on
//! loopback for each test, its OpenAPI document the one it generates.
//! Connections, `integration.describe` and `integration.read`, exposed read
//! and write tools, approvals of writes delivered once, HTTPS with a
//! connection's own CA, and what is refused: bad documents and CA files at
//! activation, a missing credential at a run's start, a service that fails,
//! hangs, answers too much, redirects or presents a certificate no trusted
//! root signed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hane_coordinator::{AgentRuntime, RunError, Services, StartRun};
use hane_core::{ActionState, AgentRun, Person, RunStatus};
use hane_delivery::DeliveryConfig;
use hane_test_support::fleet::{self, FleetMode, FleetService, FleetTls};
use serde_json::{Value, json};

use crate::agents::release_with;
use crate::approvals::{action_of, runtime};

const TOKEN: &str = "fleet-token-3b8e61c0";
const VEHICLE: &str = "架空 300 あ 10-02";

const CONNECTION: &str = r#"
apiVersion: platform/v1alpha1
kind: Connection
metadata:
  name: fleet-maintenance
spec:
  baseUrl: BASE_URL
  openapi: fleet-maintenance.openapi.json
  credential: fleet-maintenance
  allow: [getServiceHistory, listServiceSlots, bookServiceSlot, getBooking]
  timeout: 2s
  maxResponseBytes: 256Ki
"#;

const EXPOSURES: &str = r#"
apiVersion: agents/v1alpha1
kind: ToolExposure
metadata:
  name: service-history
spec:
  tool: fleet.service_history
  connection: fleet-maintenance
  operation: getServiceHistory
  impact: read
  timeout: 1s
---
apiVersion: agents/v1alpha1
kind: ToolExposure
metadata:
  name: book-service
spec:
  tool: fleet.book_service
  connection: fleet-maintenance
  operation: POST /bookings
  description: Books a vehicle into an open service slot of its depot.
  impact: outbound
"#;

const BOOKER: &str = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: service-booker
spec:
  purpose: Reads a vehicle's service history and books it into its depot's first open slot
  input:
    type: object
    required: [vehicle, depot]
    properties: { vehicle: { type: string }, depot: { type: string } }
  driver: scripted
  tools: [integration.describe, integration.read, fleet.service_history, fleet.book_service]
  connections: [fleet-maintenance]
  toolExposures: [service-history, book-service]
  approval: { assignment: fleet-desk }
  limits: { maxToolCalls: 6, maxSeconds: 60 }
  script:
    - id: api
      tool: integration.describe
      input: { connection: fleet-maintenance }
    - id: history
      tool: fleet.service_history
      input: { registration: "${input.vehicle}" }
    - id: slots
      tool: integration.read
      input:
        connection: fleet-maintenance
        operation: listServiceSlots
        input: { depot: "${input.depot}" }
    - id: booking
      tool: fleet.book_service
      input:
        body:
          registration: "${input.vehicle}"
          slot: "${steps.slots.body.0.id}"
          note: Statutory inspection due
    - tool: submit_result
      input:
        status: "${steps.booking.state}"
        services: "${steps.history.body}"
        slot: "${steps.slots.body.0.id}"
        operations: "${steps.api.operations}"
  output:
    type: object
    required: [status]
    properties: { status: { type: string } }
"#;

/// A release with the examples' operations and ledger, the connection to
/// `service` with the service's committed OpenAPI document, the two
/// exposures and the booking agent, with `extra` files added or replacing.
fn release(dir: &Path, service: &FleetService, extra: &[(&str, &str)]) -> PathBuf {
    let openapi = std::fs::read_to_string(fleet::openapi_file()).unwrap();
    let connection = CONNECTION.replace("BASE_URL", &service.url());
    let mut files = vec![
        ("connection.yaml", connection.as_str()),
        ("fleet-maintenance.openapi.json", openapi.as_str()),
        ("exposures.yaml", EXPOSURES),
        ("booker.yaml", BOOKER),
    ];
    for (name, text) in extra {
        files.retain(|(n, _)| n != name);
        files.push((name, text));
    }
    release_with(dir, &files)
}

/// The service, and a runtime on a store in `dir` with the release of
/// [`release`] active and the services composed around it.
struct Setup {
    service: FleetService,
    dir: tempfile::TempDir,
    runtime: AgentRuntime,
    _services: Services,
}

async fn setup() -> Setup {
    let service = FleetService::start(TOKEN);
    let dir = tempfile::tempdir().unwrap();
    let release = release(dir.path(), &service, &[]);
    let runtime = runtime(dir.path(), delivery());
    let services = Services::new(runtime.clone());
    runtime.activate(&release).await.unwrap();
    Setup {
        service,
        dir,
        runtime,
        _services: services,
    }
}

/// The host's credential for the connection; the host gives a delivery
/// that gets no answer 3 s, unless its connection says otherwise.
fn delivery() -> DeliveryConfig {
    let mut delivery = DeliveryConfig::new();
    delivery
        .credential("fleet-maintenance", TOKEN)
        .timeout(Duration::from_secs(3));
    delivery
}

fn booking(depot: &str) -> StartRun {
    StartRun {
        agent: "service-booker".to_owned(),
        input: json!({"vehicle": VEHICLE, "depot": depot}),
        shadow: false,
    }
}

fn person() -> Person {
    Person {
        by: "person:sato".to_owned(),
        groups: Some(vec!["fleet-desk".to_owned()]),
    }
}

fn result(run: &AgentRun) -> Value {
    run.result.as_ref().unwrap().to_value().unwrap()
}

/// Every byte under `dir` (the store among them) is free of `secret`.
pub(crate) fn assert_nowhere_under(dir: &Path, secret: &str) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{} holds the credential",
                    path.display()
                );
            }
        }
    }
}

#[tokio::test]
async fn an_agent_reads_through_a_connection_and_its_booking_is_delivered_once_approved() {
    let Setup {
        service,
        dir,
        runtime,
        _services,
    } = setup().await;

    // The exposed tools are listed like an operation's, with their
    // schemas from the API's document and their impact.
    let tools = runtime.tools().await.unwrap();
    let history = tools
        .iter()
        .find(|t| t.name == "fleet.service_history")
        .unwrap();
    assert_eq!(history.impact, "read");
    assert_eq!(history.timeout, "1s");
    assert_eq!(
        history.operation.as_deref(),
        Some("fleet-maintenance: getServiceHistory")
    );
    assert_eq!(history.input_schema["required"], json!(["registration"]));
    assert!(
        history.output_schema["properties"]["body"].is_object(),
        "{history:?}"
    );
    let book = tools
        .iter()
        .find(|t| t.name == "fleet.book_service")
        .unwrap();
    assert_eq!(book.impact, "outbound");
    assert_eq!(
        book.description,
        "Books a vehicle into an open service slot of its depot."
    );
    // The host sets the Idempotency-Key itself: the model never sees it.
    assert!(
        !book.input_schema.to_string().contains("Idempotency-Key"),
        "{}",
        book.input_schema
    );
    assert!(book.input_schema["properties"]["body"]["properties"]["slot"].is_object());

    let run = runtime.start(booking("Shinagawa")).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    // The reads ran at once, with the host's credential; the booking
    // waits for a person and has not reached the service.
    let seen = service.requests();
    assert_eq!(seen.count("getServiceHistory"), 1, "{seen:?}");
    assert_eq!(seen.count("listServiceSlots"), 1, "{seen:?}");
    assert_eq!(seen.count("bookServiceSlot"), 0, "{seen:?}");
    assert!(seen.requests.iter().all(|r| r.authorized), "{seen:?}");
    assert_eq!(action.tool, "integration.execute");
    assert_eq!(action.recipient, "fleet-maintenance");
    let content = action.content.to_value().unwrap();
    assert_eq!(content["operation"], "bookServiceSlot");
    assert_eq!(content["method"], "POST");
    assert_eq!(content["path"], "/bookings");
    assert_eq!(content["body"]["registration"], VEHICLE);
    assert!(
        content["body"]["slot"]
            .as_str()
            .unwrap()
            .starts_with("SHI-"),
        "{content}"
    );

    let approved = runtime
        .actions()
        .approve(action.id.as_str(), &action.digest, person(), None)
        .await
        .unwrap();
    assert_eq!(
        approved.state,
        ActionState::Delivered,
        "{:?}",
        approved.outcome
    );
    // The booking the service answered is the one its document describes.
    assert!(
        approved
            .outcome
            .as_ref()
            .unwrap()
            .schema_violations
            .is_empty(),
        "{:?}",
        approved.outcome
    );
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    let result = result(&ended);
    assert_eq!(result["status"], "delivered");
    assert!(
        result["services"].as_array().is_some_and(|s| !s.is_empty()),
        "{result}"
    );
    let described: Vec<&str> = result["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["operation"].as_str().unwrap())
        .collect();
    assert_eq!(
        described,
        [
            "bookServiceSlot",
            "getBooking",
            "getServiceHistory",
            "listServiceSlots"
        ]
    );

    // Delivered once, with the action's id as its Idempotency-Key.
    let seen = service.requests();
    assert_eq!(seen.count("bookServiceSlot"), 1, "{seen:?}");
    assert_eq!(seen.bookings.len(), 1, "{seen:?}");
    let booked = seen
        .requests
        .iter()
        .find(|r| r.operation_id == "bookServiceSlot")
        .unwrap();
    assert_eq!(booked.idempotency_key.as_deref(), Some(action.id.as_str()));
    // Approving again changes nothing and sends nothing.
    assert!(
        runtime
            .actions()
            .approve(action.id.as_str(), &action.digest, person(), None)
            .await
            .is_err()
    );
    assert_eq!(service.requests().count("bookServiceSlot"), 1);

    // The credential reached the service and nothing else.
    assert!(!serde_json::to_string(&ended).unwrap().contains(TOKEN));
    assert!(!approved.to_json().to_string().contains(TOKEN));
    drop(runtime);
    assert_nowhere_under(dir.path(), TOKEN);
}

#[tokio::test]
async fn a_rejected_booking_never_reaches_the_service() {
    let Setup {
        service,
        dir: _dir,
        runtime,
        _services,
    } = setup().await;
    let run = runtime.start(booking("Kawasaki")).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    let rejected = runtime
        .actions()
        .reject(
            action.id.as_str(),
            &action.digest,
            person(),
            Some("not this week".to_owned()),
        )
        .await
        .unwrap();
    assert_eq!(rejected.state, ActionState::Rejected);
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(result(&ended)["status"], "rejected");
    let seen = service.requests();
    assert_eq!(seen.count("bookServiceSlot"), 0, "{seen:?}");
    assert!(seen.bookings.is_empty());
}

/// A scripted agent that makes one call of `tool` with `input` and
/// returns what it answered.
fn one_call(name: &str, tool: &str, input: &str, extra_tools: &str) -> String {
    format!(
        r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: {name}
spec:
  purpose: Makes one call and returns what it answered
  input: {{ type: object }}
  driver: scripted
  tools: [{tool}{extra_tools}]
  connections: [fleet-maintenance]
  approval: {{ assignment: fleet-desk }}
  limits: {{ maxToolCalls: 2, maxSeconds: 30 }}
  script:
    - id: call
      tool: {tool}
      input: {input}
    - tool: submit_result
      input: {{ status: answered, answer: "${{steps.call}}" }}
  output: {{ type: object, required: [status], properties: {{ status: {{ type: string }} }} }}
"#
    )
}

async fn run_one(runtime: &AgentRuntime, agent: &str) -> AgentRun {
    runtime
        .run_to_end(StartRun {
            agent: agent.to_owned(),
            input: json!({}),
            shadow: false,
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn reads_are_held_to_the_connection_and_a_failing_service_gives_typed_errors() {
    let service = FleetService::start(TOKEN);
    let dir = tempfile::tempdir().unwrap();
    let reader = one_call(
        "reader",
        "integration.read",
        &format!(
            r#"{{ connection: fleet-maintenance, operation: "GET /vehicles/{{registration}}/services", input: {{ registration: "{VEHICLE}" }} }}"#
        ),
        "",
    );
    let unknown = one_call(
        "unknown-vehicle",
        "integration.read",
        r#"{ connection: fleet-maintenance, operation: getServiceHistory, input: { registration: "品川 999 ん 99-99" } }"#,
        "",
    );
    let writer = one_call(
        "sneaky-writer",
        "integration.read",
        r#"{ connection: fleet-maintenance, operation: bookServiceSlot, input: { body: { registration: x, slot: y } } }"#,
        "",
    );
    let release = release(
        dir.path(),
        &service,
        &[
            ("reader.yaml", &reader),
            ("unknown.yaml", &unknown),
            ("writer.yaml", &writer),
        ],
    );
    let runtime = runtime(dir.path(), delivery());
    let _services = Services::new(runtime.clone());
    runtime.activate(&release).await.unwrap();

    // A read answers with the API's status and body, untrusted, checked
    // against the documented schema.
    let run = run_one(&runtime, "reader").await;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    let answer = &result(&run)["answer"];
    assert_eq!(answer["status"], 200, "{answer}");
    assert_eq!(answer["untrusted"], true);
    assert_eq!(answer["schemaViolations"], json!([]));
    assert!(answer["body"][0]["kind"].is_string(), "{answer}");

    // A 404 is the API's answer, not a failure of the call.
    let run = run_one(&runtime, "unknown-vehicle").await;
    assert_eq!(result(&run)["answer"]["status"], 404, "{run:#?}");

    // A write cannot be made as a read.
    let run = run_one(&runtime, "sneaky-writer").await;
    assert_eq!(run.status, RunStatus::Failed);
    assert!(
        run.error
            .as_deref()
            .unwrap()
            .contains("propose it with integration.execute"),
        "{run:#?}"
    );
    assert_eq!(service.requests().count("bookServiceSlot"), 0);

    // A service that fails, answers past the cap, redirects or hangs: a
    // typed error naming the connection, and a read asked once.
    for (mode, says) in [
        (FleetMode::Error, "failed with 503"),
        (FleetMode::Large, "answered more than 262144 bytes"),
        (FleetMode::Redirect, "redirects are not followed"),
        (
            FleetMode::Hang,
            "no answer from connection \"fleet-maintenance\"",
        ),
    ] {
        service.reset();
        service.behave("getServiceHistory", mode);
        let run = run_one(&runtime, "reader").await;
        assert_eq!(run.status, RunStatus::Failed, "{mode:?}: {run:#?}");
        let error = run.error.as_deref().unwrap();
        assert!(error.contains(says), "{mode:?}: {error}");
        assert!(error.contains("fleet-maintenance"), "{mode:?}: {error}");
        assert!(!error.contains(TOKEN));
        assert_eq!(service.requests().count("getServiceHistory"), 1, "{mode:?}");
    }
}

#[tokio::test]
async fn a_booking_the_service_refuses_fails_and_one_it_does_not_answer_is_unknown() {
    let Setup {
        service,
        dir: _dir,
        runtime,
        _services,
    } = setup().await;

    // The slot is taken between the proposal and the approval: the
    // service answers 409, which says the booking was not made.
    let run = runtime.start(booking("Yokohama")).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    let body = action.content.to_value().unwrap()["body"].clone();
    let taken = service.api(
        "POST",
        "/bookings",
        Some(&json!({"registration": "架空 100 た 20-20", "slot": body["slot"]})),
        None,
    );
    assert_eq!(taken.status, 201, "{taken:?}");
    let decided = runtime
        .actions()
        .approve(action.id.as_str(), &action.digest, person(), None)
        .await
        .unwrap();
    assert_eq!(decided.state, ActionState::Failed, "{:?}", decided.outcome);
    assert!(
        decided.outcome.as_ref().unwrap().detail.contains("409"),
        "{:?}",
        decided.outcome
    );
    assert_eq!(
        result(&runtime.wait(&run.id).await.unwrap())["status"],
        "failed"
    );

    // A server error or no answer at all does not say whether the
    // booking was made: `unknown`, sent once and never again.
    for mode in [FleetMode::Error, FleetMode::Hang] {
        service.reset();
        service.behave("bookServiceSlot", mode);
        let run = runtime.start(booking("Yokohama")).await.unwrap();
        let action = action_of(&runtime, &run.id, ActionState::Pending).await;
        let decided = runtime
            .actions()
            .approve(action.id.as_str(), &action.digest, person(), None)
            .await
            .unwrap();
        assert_eq!(
            decided.state,
            ActionState::Unknown,
            "{mode:?}: {:?}",
            decided.outcome
        );
        if mode == FleetMode::Hang {
            // The connection's timeout bounds the delivery, not the
            // host's (3 s here).
            let detail = &decided.outcome.as_ref().unwrap().detail;
            assert!(detail.contains("within 2 s"), "{detail}");
        }
        runtime.wait(&run.id).await.unwrap();
        assert_eq!(service.requests().count("bookServiceSlot"), 1, "{mode:?}");
        let again = runtime
            .actions()
            .approve(action.id.as_str(), &action.digest, person(), None)
            .await;
        assert!(again.is_err(), "{mode:?}: {again:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(service.requests().count("bookServiceSlot"), 1, "{mode:?}");
    }
}

#[tokio::test]
async fn a_connection_whose_credential_is_not_set_refuses_the_run_naming_the_variable() {
    let service = FleetService::start(TOKEN);
    let dir = tempfile::tempdir().unwrap();
    let release = release(dir.path(), &service, &[]);
    let runtime = runtime(dir.path(), DeliveryConfig::new());
    let _services = Services::new(runtime.clone());
    runtime.activate(&release).await.unwrap();
    let refused = runtime.start(booking("Shinagawa")).await.unwrap_err();
    assert!(
        matches!(&refused, RunError::ConnectionUnavailable { var, .. } if var == "HANE_CREDENTIAL_FLEET_MAINTENANCE"),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .contains("set HANE_CREDENTIAL_FLEET_MAINTENANCE")
    );
    assert_eq!(service.requests().total, 0);
}

#[tokio::test]
async fn documents_and_exposures_that_cannot_be_tools_are_refused_at_activation() {
    let service = FleetService::start(TOKEN);
    let openapi = std::fs::read_to_string(fleet::openapi_file()).unwrap();
    let cases: Vec<(Vec<(&str, String)>, &str)> = vec![
        (
            vec![("fleet-maintenance.openapi.json", "{ not json".to_owned())],
            "connection.yaml: spec.openapi:",
        ),
        (
            vec![(
                "fleet-maintenance.openapi.json",
                openapi.replace(
                    "\"$ref\": \"#/components/schemas/BookingRequest\"",
                    "\"$ref\": \"#/components/schemas/Missing\"",
                ),
            )],
            "operation `bookServiceSlot`",
        ),
        (
            vec![(
                "fleet-maintenance.openapi.json",
                openapi.replace(
                    "\"$ref\": \"#/components/schemas/BookingRequest\"",
                    "\"$ref\": \"booking.json#/BookingRequest\"",
                ),
            )],
            "spec.allow[2]: operation `bookServiceSlot` of fleet-maintenance.openapi.json cannot be a tool: the external `$ref` `booking.json#/BookingRequest` is not supported",
        ),
        (
            vec![(
                "connection.yaml",
                CONNECTION
                    .replace("BASE_URL", &service.url())
                    .replace("getBooking]", "getBooking, deleteEverything]"),
            )],
            "`deleteEverything` is not an operation of fleet-maintenance.openapi.json",
        ),
        (
            vec![(
                "exposures.yaml",
                EXPOSURES.replace("impact: outbound", "impact: read"),
            )],
            "only a GET or HEAD is `read`",
        ),
    ];
    for (files, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let extra: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
        let release = release(dir.path(), &service, &extra);
        let runtime = runtime(dir.path(), delivery());
        let _services = Services::new(runtime.clone());
        let error = runtime.activate(&release).await.unwrap_err().to_string();
        assert!(error.contains(says), "expected {says:?} in:\n{error}");
    }
    let dir = tempfile::tempdir().unwrap();
    let big = format!("{{\"padding\": \"{}\"}}", "x".repeat(5 << 20));
    let release = release(
        dir.path(),
        &service,
        &[("fleet-maintenance.openapi.json", &big)],
    );
    let runtime = runtime(dir.path(), delivery());
    let _services = Services::new(runtime.clone());
    let error = runtime.activate(&release).await.unwrap_err().to_string();
    assert!(error.contains("connection.yaml: spec.openapi:"), "{error}");
    assert!(
        error.contains("4 MiB") || error.contains("4194304"),
        "{error}"
    );
}

#[tokio::test]
async fn a_booking_answered_without_a_documented_field_is_delivered_with_its_schema_violations() {
    let service = FleetService::start(TOKEN);
    let slots = service
        .api("GET", "/slots?depot=Kawasaki", None, None)
        .json();
    let slot = slots[0]["id"].as_str().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let direct = one_call(
        "direct-booker",
        "integration.execute",
        &format!(
            r#"{{ connection: fleet-maintenance, operation: bookServiceSlot, input: {{ body: {{ registration: "架空 400 か 77-10", slot: {slot} }} }} }}"#
        ),
        "",
    );
    let release = release(dir.path(), &service, &[("direct.yaml", &direct)]);
    let runtime = runtime(dir.path(), delivery());
    let _services = Services::new(runtime.clone());
    runtime.activate(&release).await.unwrap();
    // The service makes each booking, then answers it without its `id`,
    // which the document's `Booking` requires.
    service.behave("bookServiceSlot", FleetMode::Incomplete);

    // Through the exposed write tool: delivered (the booking was made),
    // with the violation in what the action keeps and the API shows.
    let run = runtime.start(booking("Shinagawa")).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    assert!(
        action
            .connection
            .as_ref()
            .unwrap()
            .response_schema
            .is_some(),
        "{action:?}"
    );
    let approved = runtime
        .actions()
        .approve(action.id.as_str(), &action.digest, person(), None)
        .await
        .unwrap();
    assert_eq!(
        approved.state,
        ActionState::Delivered,
        "{:?}",
        approved.outcome
    );
    let outcome = approved.outcome.as_ref().unwrap();
    assert_eq!(outcome.schema_violations.len(), 1, "{outcome:?}");
    let violation = &outcome.schema_violations[0];
    assert!(
        violation.contains("\"id\"") && violation.contains("required"),
        "{violation}"
    );
    assert!(
        outcome.detail.contains(&format!(
            "; the body does not match the documented schema: {violation}"
        )),
        "{}",
        outcome.detail
    );
    assert_eq!(
        approved.to_json()["outcome"]["schemaViolations"],
        json!([violation])
    );
    let shown = runtime.actions().get(action.id.as_str()).await.unwrap();
    assert_eq!(shown.outcome, approved.outcome);
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    assert_eq!(result(&ended)["status"], "delivered");
    assert_eq!(service.requests().bookings.len(), 1);

    // Through integration.execute: the agent sees them too.
    let run = runtime
        .start(StartRun {
            agent: "direct-booker".to_owned(),
            input: json!({}),
            shadow: false,
        })
        .await
        .unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    runtime
        .actions()
        .approve(action.id.as_str(), &action.digest, person(), None)
        .await
        .unwrap();
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    let answer = &result(&ended)["answer"];
    assert_eq!(answer["state"], "delivered", "{answer}");
    assert_eq!(answer["schemaViolations"], json!([violation]), "{answer}");
    assert!(
        answer["summary"]
            .as_str()
            .unwrap()
            .contains("the body does not match the documented schema"),
        "{answer}"
    );
    let seen = service.requests();
    assert_eq!(seen.count("bookServiceSlot"), 2, "{seen:?}");
    assert_eq!(seen.bookings.len(), 2, "{seen:?}");
}

/// A CA of the API's owner and the certificate it signs for the service
/// (`127.0.0.1` and `localhost`): what the service serves HTTPS with.
fn private_ca() -> FleetTls {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "Hane Fleet Leasing private CA");
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let server =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
    FleetTls {
        certificate: server.pem(),
        private_key: key.serialize_pem(),
        ca_certificates: ca.pem(),
    }
}

/// The connection to `service`, trusting the CA file `ca_file` when given.
fn https_connection(service: &FleetService, ca_file: Option<&str>) -> String {
    let mut connection = CONNECTION.replace("BASE_URL", &service.url());
    if let Some(file) = ca_file {
        connection.push_str(&format!("  tls: {{ caFile: {file} }}\n"));
    }
    connection
}

#[tokio::test]
async fn an_https_connection_trusts_its_ca_file_for_reads_and_an_approved_booking() {
    let tls = private_ca();
    let service = FleetService::start_tls(TOKEN, &tls);
    assert!(service.url().starts_with("https://"), "{}", service.url());
    let dir = tempfile::tempdir().unwrap();
    let connection = https_connection(&service, Some("fleet-ca.pem"));
    let release = release(
        dir.path(),
        &service,
        &[
            ("connection.yaml", &connection),
            ("fleet-ca.pem", &tls.ca_certificates),
        ],
    );
    let runtime = runtime(dir.path(), delivery());
    let _services = Services::new(runtime.clone());
    runtime.activate(&release).await.unwrap();
    // The release keeps the certificates: the file is not read again.
    std::fs::remove_file(release.join("fleet-ca.pem")).unwrap();

    let run = runtime.start(booking("Shinagawa")).await.unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    let seen = service.requests();
    assert_eq!(seen.count("getServiceHistory"), 1, "{seen:?}");
    assert_eq!(seen.count("listServiceSlots"), 1, "{seen:?}");
    assert!(seen.requests.iter().all(|r| r.authorized), "{seen:?}");
    // The action keeps the roots its delivery trusts, as it keeps the URL.
    let target = action.connection.as_ref().unwrap();
    assert_eq!(target.base_url, service.url());
    assert_eq!(
        target.ca_certificates.as_deref(),
        Some(tls.ca_certificates.as_str())
    );

    let approved = runtime
        .actions()
        .approve(action.id.as_str(), &action.digest, person(), None)
        .await
        .unwrap();
    assert_eq!(
        approved.state,
        ActionState::Delivered,
        "{:?}",
        approved.outcome
    );
    assert!(
        approved.outcome.as_ref().unwrap().detail.contains("201"),
        "{:?}",
        approved.outcome
    );
    let ended = runtime.wait(&run.id).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    assert_eq!(result(&ended)["status"], "delivered");
    let seen = service.requests();
    assert_eq!(seen.count("bookServiceSlot"), 1, "{seen:?}");
    assert_eq!(seen.bookings.len(), 1, "{seen:?}");
}

#[tokio::test]
async fn an_https_connection_without_its_ca_file_refuses_the_certificate_and_sends_nothing() {
    let service = FleetService::start_tls(TOKEN, &private_ca());
    let dir = tempfile::tempdir().unwrap();
    let reader = one_call(
        "reader",
        "integration.read",
        &format!(
            r#"{{ connection: fleet-maintenance, operation: getServiceHistory, input: {{ registration: "{VEHICLE}" }} }}"#
        ),
        "",
    );
    let booker = one_call(
        "direct-booker",
        "integration.execute",
        &format!(
            r#"{{ connection: fleet-maintenance, operation: bookServiceSlot, input: {{ body: {{ registration: "{VEHICLE}", slot: SHI-20990101-0900 }} }} }}"#
        ),
        "",
    );
    let connection = https_connection(&service, None);
    let release = release(
        dir.path(),
        &service,
        &[
            ("connection.yaml", &connection),
            ("reader.yaml", &reader),
            ("booker.yaml", &booker),
        ],
    );
    let runtime = runtime(dir.path(), delivery());
    let _services = Services::new(runtime.clone());
    runtime.activate(&release).await.unwrap();

    // A read: a typed error naming the connection and the untrusted
    // certificate.
    let run = run_one(&runtime, "reader").await;
    assert_eq!(run.status, RunStatus::Failed, "{run:#?}");
    let error = run.error.as_deref().unwrap();
    assert!(
        error.contains("connection \"fleet-maintenance\""),
        "{error}"
    );
    assert!(
        error.contains("is not trusted: it is not signed by a trusted root"),
        "{error}"
    );
    assert!(error.contains("tls.caFile"), "{error}");

    // An approved write: failed (nothing was sent), and never sent again.
    let run = runtime
        .start(StartRun {
            agent: "direct-booker".to_owned(),
            input: json!({}),
            shadow: false,
        })
        .await
        .unwrap();
    let action = action_of(&runtime, &run.id, ActionState::Pending).await;
    let decided = runtime
        .actions()
        .approve(action.id.as_str(), &action.digest, person(), None)
        .await
        .unwrap();
    assert_eq!(decided.state, ActionState::Failed, "{:?}", decided.outcome);
    let detail = &decided.outcome.as_ref().unwrap().detail;
    assert!(
        detail.contains("connection \"fleet-maintenance\""),
        "{detail}"
    );
    assert!(
        detail.contains("is not trusted: it is not signed by a trusted root"),
        "{detail}"
    );
    assert!(detail.contains("nothing was sent"), "{detail}");
    runtime.wait(&run.id).await.unwrap();
    assert!(
        runtime
            .actions()
            .approve(action.id.as_str(), &action.digest, person(), None)
            .await
            .is_err()
    );
    // No request reached the service: the handshake stopped each.
    let seen = service.requests();
    assert_eq!(seen.total, 0, "{seen:?}");
    assert_eq!(seen.count("bookServiceSlot"), 0, "{seen:?}");
}

#[tokio::test]
async fn a_ca_file_that_is_missing_or_holds_no_certificate_is_refused_at_activation() {
    let tls = private_ca();
    let service = FleetService::start_tls(TOKEN, &tls);
    let connection = https_connection(&service, Some("fleet-ca.pem"));
    let cases: Vec<(Option<&str>, &str)> = vec![
        (None, "fleet-ca.pem"),
        (
            Some("not a certificate\n"),
            "fleet-ca.pem holds no PEM certificate",
        ),
        (
            Some(tls.private_key.as_str()),
            "fleet-ca.pem holds no PEM certificate",
        ),
        (
            Some(
                "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
            ),
            "a certificate in fleet-ca.pem cannot be a root",
        ),
    ];
    for (pem, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut files = vec![("connection.yaml", connection.as_str())];
        if let Some(pem) = pem {
            files.push(("fleet-ca.pem", pem));
        }
        let release = release(dir.path(), &service, &files);
        let runtime = runtime(dir.path(), delivery());
        let _services = Services::new(runtime.clone());
        let error = runtime.activate(&release).await.unwrap_err().to_string();
        assert!(
            error.contains("connection.yaml: spec.tls.caFile:"),
            "{pem:?}: {error}"
        );
        assert!(
            error.contains(says),
            "{pem:?}: expected {says:?} in:\n{error}"
        );
    }
    assert_eq!(service.requests().total, 0);
}
