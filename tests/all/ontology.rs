//! The ontology end to end: `examples/ontology/fleet.yaml` over
//! `examples/ledger`, read by the `ontology.query` and `ontology.knowledge`
//! built-ins in the real sandbox, and a release that carries it (or is
//! refused because its ledger contradicts it).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hane_coordinator::StartRun;
use hane_core::{Ledger, Limits, Policy, RunStatus};
use hane_manifest::OntologyManifest;
use hane_sandbox::{CallError, GuestError, LoadedOperation, Sandbox, SandboxConfig};
use serde_json::{Value, json};

use crate::agents::{release_with, runtime};
use crate::harness::{cache_dir, examples};

const FLEET: &str = include_str!("../../examples/ontology/fleet.yaml");

fn ledger_with_ontology() -> Arc<Ledger> {
    static LEDGER: OnceLock<Arc<Ledger>> = OnceLock::new();
    LEDGER
        .get_or_init(|| {
            let mut ledger = Ledger::load_dir(&examples().join("ledger")).expect("ledger");
            let ontology = OntologyManifest::from_yaml("fleet.yaml", FLEET)
                .unwrap()
                .ontology();
            assert_eq!(ontology.check(&ledger), []);
            ledger.ontology = Some(ontology);
            Arc::new(ledger)
        })
        .clone()
}

/// A sandbox reading `ledger`, of this module's own.
fn sandbox(ledger: Arc<Ledger>) -> Sandbox {
    let mut config = SandboxConfig::new();
    config.cache_dir(Some(cache_dir())).max_instances(4);
    let sandbox = Sandbox::new(&config).expect("sandbox");
    sandbox.set_ledger(ledger);
    sandbox
}

fn grants(records: &[&str]) -> Policy {
    Policy {
        records: records.iter().map(|s| (*s).to_owned()).collect(),
        documents: vec!["leases".to_owned()],
        ..Policy::default()
    }
}

async fn builtin(sandbox: &Sandbox, name: &str, policy: &Policy) -> LoadedOperation {
    let bytes = hane_builtins::get(name).unwrap_or_else(|| panic!("no builtin {name}"));
    sandbox
        .load(name, bytes, policy)
        .await
        .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

async fn call(op: &LoadedOperation, input: Value) -> Result<Value, GuestError> {
    let call = op.call(&input.to_string(), &Limits::default()).await;
    match call.result {
        Ok(text) => Ok(serde_json::from_str(&text).unwrap()),
        Err(CallError::Operation(e)) => Err(e),
        Err(other) => panic!("the call failed in the host: {other}"),
    }
}

fn message(err: &GuestError) -> String {
    err.to_string()
}

#[tokio::test]
async fn a_query_follows_vehicle_to_lease_to_contract_with_filters_and_order() {
    let sandbox = sandbox(ledger_with_ontology());
    let query = builtin(
        &sandbox,
        "ontology.query",
        &grants(&["vehicles", "leases", "drivers"]),
    )
    .await;
    let out = call(
        &query,
        json!({
            "type": "vehicle",
            "where": {"depot": "Shinagawa", "mileage_km": {"gte": 40000}},
            "fields": ["id", "registration", "mileage_km"],
            "orderBy": "mileage_km",
            "descending": true,
            "follow": [{
                "link": "leases",
                "fields": ["contract_no", "lessee", "months"],
                "follow": [{"link": "contract"}]
            }]
        }),
    )
    .await
    .unwrap();
    assert_eq!(out["type"], "vehicle");
    assert_eq!(out["next"], Value::Null);
    let objects = out["objects"].as_array().unwrap();
    let ids: Vec<&str> = objects.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["V-002", "V-001"], "{out:#}");
    // Typed as the ontology says, though the CSV holds text.
    assert_eq!(objects[0]["mileage_km"], json!(91544));
    assert!(
        objects[0].get("depot").is_none(),
        "only the fields asked for: {out:#}"
    );
    let lease = &objects[1]["leases"][0];
    assert_eq!(lease["contract_no"], "C-1001");
    assert_eq!(lease["lessee"], "Kita Logistics");
    assert_eq!(lease["months"], json!(36));
    assert_eq!(lease["contract"]["document"], "c-1001.txt");
    assert!(
        lease["contract"]["title"]
            .as_str()
            .unwrap()
            .starts_with("Lease contract C-1001"),
        "{out:#}"
    );

    // Backwards: a lease to its vehicle and the vehicle's drivers, joined
    // on the registration.
    let out = call(
        &query,
        json!({
            "type": "lease",
            "where": {"contract_no": {"prefix": "C-100"}, "start": {"lt": "2026-01-01"}},
            "fields": ["contract_no"],
            "follow": [{"link": "leased_vehicle", "fields": ["id"], "follow": [{"link": "drivers", "fields": ["name"]}]}]
        }),
    )
    .await
    .unwrap();
    assert_eq!(
        out["objects"],
        json!([
            {"contract_no": "C-1001", "leased_vehicle": {"id": "V-001", "drivers": [{"name": "Aoi Sato"}]}},
            {"contract_no": "C-1002", "leased_vehicle": {"id": "V-002", "drivers": [{"name": "Ren Suzuki"}]}}
        ]),
        "{out:#}"
    );
}

#[tokio::test]
async fn pages_continue_until_every_object_was_read_once() {
    let sandbox = sandbox(ledger_with_ontology());
    let query = builtin(
        &sandbox,
        "ontology.query",
        &grants(&["vehicles", "leases", "drivers"]),
    )
    .await;
    let mut input =
        json!({"type": "vehicle", "fields": ["id"], "orderBy": "inspection_expiry", "limit": 2});
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let out = call(&query, input.clone()).await.unwrap();
        pages += 1;
        for object in out["objects"].as_array().unwrap() {
            seen.push(object["id"].as_str().unwrap().to_owned());
        }
        match out["next"].as_str() {
            Some(next) => input["after"] = json!(next),
            None => break,
        }
        assert!(pages < 10, "pages never end: {out:#}");
    }
    let total = ledger_with_ontology().collections["vehicles"].records.len();
    assert_eq!(seen.len(), total, "{seen:?}");
    assert_eq!(pages, total.div_ceil(2));
    // By the day each inspection expires, 2026-09-30 to 2028-01-10.
    assert_eq!(seen, ["V-004", "V-002", "V-001", "V-003", "V-005"]);
}

#[tokio::test]
async fn what_the_ontology_does_not_define_is_refused_by_name() {
    let sandbox = sandbox(ledger_with_ontology());
    let query = builtin(
        &sandbox,
        "ontology.query",
        &grants(&["vehicles", "leases", "drivers"]),
    )
    .await;
    let refused = |input: Value| {
        let query = &query;
        async move {
            let err = call(query, input).await.unwrap_err();
            assert!(matches!(err, GuestError::InvalidInput(_)), "{err:?}");
            message(&err)
        }
    };
    let said = refused(json!({"type": "car"})).await;
    assert!(
        said.contains("no object type `car`") && said.contains("driver, lease, vehicle"),
        "{said}"
    );
    let said = refused(json!({"type": "vehicle", "where": {"colour": "red"}})).await;
    assert!(
        said.contains("no property `colour`") && said.contains("mileage_km"),
        "{said}"
    );
    let said = refused(json!({"type": "vehicle", "follow": [{"link": "contracts"}]})).await;
    assert!(
        said.contains("no link `contracts`") && said.contains("drivers, leases"),
        "{said}"
    );
    let said = refused(json!({"type": "vehicle", "where": {"mileage_km": "many"}})).await;
    assert!(
        said.contains("`mileage_km`") && said.contains("integer"),
        "{said}"
    );
    let said = refused(json!({"type": "vehicle", "where": {"mileage_km": {"prefix": "4"}}})).await;
    assert!(said.contains("prefix"), "{said}");
    let said = refused(json!({"type": "vehicle", "after": "99:V-404"})).await;
    assert!(said.contains("`after`"), "{said}");

    // A collection the operation's policy does not grant is denied by the
    // host, whatever the ontology says, and recorded as a denial.
    let narrow = builtin(&sandbox, "ontology.query", &grants(&["vehicles"])).await;
    let denied = narrow
        .call(&json!({"type": "lease"}).to_string(), &Limits::default())
        .await;
    assert!(
        matches!(&denied.result, Err(CallError::Denied { denial, .. }) if denial.contains("collection `leases` is not granted")),
        "{:?}",
        denied.result
    );

    // A ledger without an ontology.
    let bare = self::sandbox(Arc::new(
        Ledger::load_dir(&examples().join("ledger")).unwrap(),
    ));
    let query = builtin(&bare, "ontology.query", &grants(&["vehicles"])).await;
    let err = call(&query, json!({"type": "vehicle"})).await.unwrap_err();
    assert!(
        matches!(&err, GuestError::NotFound(m) if m.contains("defines no ontology")),
        "{err:?}"
    );
}

#[tokio::test]
async fn knowledge_comes_from_documents_with_their_sources() {
    let sandbox = sandbox(ledger_with_ontology());
    let knowledge = builtin(
        &sandbox,
        "ontology.knowledge",
        &grants(&["vehicles", "leases", "drivers"]),
    )
    .await;
    // One object's own contract, ranked for the question.
    let out = call(
        &knowledge,
        json!({"type": "lease", "id": "C-1001", "question": "what is charged per kilometre over the mileage"}),
    )
    .await
    .unwrap();
    assert_eq!(out["definition"]["source"], json!({"ontology": "fleet"}));
    assert_eq!(out["object"]["lessee"], "Kita Logistics");
    let first = &out["knowledge"][0];
    assert_eq!(first["source"]["set"], "leases");
    assert_eq!(first["source"]["document"], "c-1001.txt", "{out:#}");
    assert!(first["source"]["page"].as_u64().unwrap() >= 1);
    assert!(first["text"].as_str().unwrap().contains("9 yen"), "{out:#}");

    // The type's knowledge: every contract, ranked.
    let out = call(
        &knowledge,
        json!({"type": "lease", "question": "early termination", "limit": 3}),
    )
    .await
    .unwrap();
    let sources = out["knowledge"].as_array().unwrap();
    assert!(!sources.is_empty() && sources.len() <= 3, "{out:#}");
    assert!(sources.iter().all(|k| k["source"]["set"] == "leases"));
    let scores: Vec<u64> = sources
        .iter()
        .map(|k| k["score"].as_u64().unwrap())
        .collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "ranked: {scores:?}"
    );

    let err = call(
        &knowledge,
        json!({"type": "lease", "id": "C-9999", "question": "fees"}),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, GuestError::NotFound(m) if m.contains("C-9999")),
        "{err:?}"
    );
    let err = call(&knowledge, json!({"type": "truck", "question": "fees"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, GuestError::InvalidInput(m) if m.contains("`truck`")),
        "{err:?}"
    );
}

const READER: &str = r#"
apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: lease-reader
spec:
  purpose: Reads a vehicle's leases and what their contracts say about mileage
  input:
    type: object
    required: [vehicle]
    properties: { vehicle: { type: string } }
  driver: scripted
  tools: [ontology.query, ontology.knowledge]
  limits: { maxToolCalls: 3, maxSeconds: 60 }
  script:
    - id: vehicle
      tool: ontology.query
      input:
        type: vehicle
        where: { id: "${input.vehicle}" }
        follow: [{ link: leases, fields: [contract_no, lessee] }]
    - id: terms
      tool: ontology.knowledge
      input:
        type: lease
        id: "${steps.vehicle.objects.0.leases.0.contract_no}"
        question: mileage included per year
        limit: 1
    - tool: submit_result
      input:
        status: answered
        lessee: "${steps.vehicle.objects.0.leases.0.lessee}"
        document: "${steps.terms.knowledge.0.source.document}"
  output:
    type: object
    required: [status, lessee, document]
    properties: { status: { type: string }, lessee: { type: string }, document: { type: string } }
"#;

#[tokio::test]
async fn a_release_keeps_its_ontology_and_an_agent_reads_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let release = release_with(
        dir.path(),
        &[("fleet-ontology.yaml", FLEET), ("reader.yaml", READER)],
    );
    let runtime = runtime(dir.path());
    runtime.activate(&release).await.unwrap();
    let active = runtime.release().await.unwrap();
    let ontology = active
        .ledger
        .ontology
        .as_ref()
        .expect("the release's ontology");
    assert_eq!(ontology.name, "fleet");
    assert!(active.tools.contains_key("ontology.query"));

    let run = runtime
        .start(StartRun {
            agent: "lease-reader".to_owned(),
            input: json!({"vehicle": "V-002"}),
            shadow: false,
        })
        .await
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(60), runtime.wait(&run.id))
        .await
        .expect("the run ends")
        .unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:#?}");
    let result = ended.result.as_ref().unwrap().to_value().unwrap();
    assert_eq!(
        result,
        json!({"status": "answered", "lessee": "Minato Catering", "document": "c-1002.txt"})
    );
}

#[tokio::test]
async fn a_release_whose_ledger_contradicts_its_ontology_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = FLEET.replace(
        "model: { type: string, description: Make and model }",
        "model: { type: integer, description: Make and model }",
    );
    assert_ne!(wrong, FLEET);
    let release = release_with(dir.path(), &[("fleet-ontology.yaml", &wrong)]);
    let runtime = runtime(dir.path());
    let err = runtime.activate(&release).await.unwrap_err().to_string();
    assert!(err.contains("fleet-ontology.yaml"), "{err}");
    assert!(
        err.contains("spec.objectTypes.vehicle.properties.model"),
        "{err}"
    );
    assert!(
        err.contains(
            "records of `vehicles` do not hold an integer: record `V-001` has \"Toyota Hiace Van\""
        ),
        "{err}"
    );

    // One ontology per release.
    let dir = tempfile::tempdir().unwrap();
    let second = FLEET.replace("name: fleet", "name: fleet-two");
    let release = release_with(dir.path(), &[("a.yaml", FLEET), ("b.yaml", &second)]);
    let runtime = self::runtime(dir.path());
    let err = runtime.activate(&release).await.unwrap_err().to_string();
    assert!(
        err.contains("b.yaml") && err.contains("a release has one Ontology"),
        "{err}"
    );
    assert!(runtime.release().await.is_err(), "nothing was activated");
}
