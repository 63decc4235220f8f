//! What a query over the ontology costs on a large ledger: 100,000
//! vehicles and 100,000 leases (one per vehicle), generated here, with the
//! ontology of `examples/ontology/fleet.yaml` over them. Rows, side by side
//! in one run:
//!
//! - `ontology.query`: one call of the built-in operation in the sandbox:
//!   the vehicles of one depot over a mileage, highest first, ten of them,
//!   each with its leases (one link): the query checked against the
//!   ontology, one `records.query` for the vehicles and one per vehicle
//!   for its leases, the answer typed;
//! - `ledger`: the same eleven queries as `Ledger::query` on the host, no
//!   sandbox: the floor of the operation;
//! - `find_record`: the nearest answer without the ontology: one
//!   `data.find_record` call for the depot's vehicles and one per vehicle
//!   for its lease, each an equality looked up in its field's column (no
//!   ranges or order: it finds the first ten of the depot, not the ten
//!   highest).
//!
//! The first query of a field builds its column (reported apart). Target:
//! `ontology.query` at most 5 ms at p50. The command and the results:
//! `BENCHMARKS.md`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hane_core::ledger::{Collection, Comparison, FieldCondition, Record, RecordQuery};
use hane_core::{JsonText, Ledger, Limits, Policy};
use hane_manifest::OntologyManifest;
use hane_sandbox::{LoadedOperation, Sandbox, SandboxConfig};
use serde_json::{Value, json};

const OBJECTS: usize = 100_000;
const DEPOTS: usize = 20;
const TARGET: Duration = Duration::from_millis(5);

fn ledger() -> Ledger {
    let mut vehicles = Vec::with_capacity(OBJECTS);
    let mut leases = Vec::with_capacity(OBJECTS);
    const MODELS: [&str; 3] = ["Toyota Hiace Van", "Nissan Caravan", "Honda N-VAN"];
    for i in 0..OBJECTS {
        let id = format!("V-{i:06}");
        let vehicle = json!({
            "id": id,
            "registration": format!("架空 {:03} あ {:02}-{:02}", i % 1000, i / 1000 % 100, i % 97),
            "model": MODELS[i % 3],
            "inspection_expiry": format!("20{:02}-{:02}-{:02}", 26 + i % 3, 1 + i % 12, 1 + i % 28),
            "mileage_km": (i * 7919) % 200_000,
            "depot": format!("Depot-{:02}", i % DEPOTS),
        });
        vehicles.push(record(&id, &vehicle));
        let lease_id = format!("L-{i:06}");
        let lease = json!({
            "id": lease_id,
            "contract_no": format!("C-{i:06}"),
            "lessee": format!("Customer {}", i % 5000),
            "vehicle": id,
            "document": "",
            "start": "2025-04-01",
            "months": 12 + (i % 4) * 12,
        });
        leases.push(record(&lease_id, &lease));
    }
    let mut collections = BTreeMap::new();
    collections.insert("vehicles".to_owned(), Collection::new(vehicles));
    collections.insert("leases".to_owned(), Collection::new(leases));
    collections.insert("drivers".to_owned(), Collection::new(Vec::new()));
    let mut ledger = Ledger {
        collections,
        ..Ledger::default()
    };
    // The example's ontology, without what needs documents.
    let text = include_str!("../examples/ontology/fleet.yaml")
        .replace(
            "        contract: { documents: leases, from: document, description: The signed contract }\n",
            "",
        )
        .replace(
            "      knowledge:\n        - documents: leases\n          from: document\n        - documents: leases\n",
            "",
        );
    let ontology = OntologyManifest::from_yaml("fleet.yaml", &text)
        .unwrap()
        .ontology();
    let problems = ontology.check(&ledger);
    assert!(problems.is_empty(), "{problems:?}");
    ledger.ontology = Some(ontology);
    ledger
}

fn record(id: &str, value: &Value) -> Record {
    Record {
        id: id.to_owned(),
        json: JsonText::from_value(value),
    }
}

fn policy() -> Policy {
    Policy {
        records: vec![
            "vehicles".to_owned(),
            "leases".to_owned(),
            "drivers".to_owned(),
        ],
        documents: vec!["leases".to_owned()],
        ..Policy::default()
    }
}

fn load(rt: &tokio::runtime::Runtime, sandbox: &Sandbox, name: &str) -> LoadedOperation {
    let bytes = hane_builtins::get(name).expect("a built-in");
    rt.block_on(sandbox.load(name, bytes, &policy())).unwrap()
}

/// The eleven queries of the `ontology.query` row, on the host.
fn host_query(ledger: &Ledger) -> usize {
    let vehicles = ledger
        .query(&RecordQuery {
            collection: "vehicles".to_owned(),
            conditions: vec![
                FieldCondition {
                    field: "depot".to_owned(),
                    comparison: Comparison::Equal,
                    value: json!("Depot-07"),
                },
                FieldCondition {
                    field: "mileage_km".to_owned(),
                    comparison: Comparison::GreaterOrEqual,
                    value: json!(50_000),
                },
            ],
            order_by: Some("mileage_km".to_owned()),
            descending: true,
            after: None,
            limit: 10,
            max_bytes: 1 << 20,
        })
        .unwrap();
    let mut found = 0;
    for vehicle in &vehicles.records {
        let leases = ledger
            .query(&RecordQuery {
                collection: "leases".to_owned(),
                conditions: vec![FieldCondition {
                    field: "vehicle".to_owned(),
                    comparison: Comparison::Equal,
                    value: json!(vehicle.id),
                }],
                limit: 10,
                max_bytes: 1 << 20,
                ..RecordQuery::default()
            })
            .unwrap();
        found += leases.records.len();
    }
    found
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let calls = if measuring { 400 } else { 5 };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let at = Instant::now();
    let ledger = Arc::new(ledger());
    let generated = at.elapsed();
    let sandbox = Sandbox::new(&SandboxConfig::new()).unwrap();
    sandbox.set_ledger(ledger.clone());
    let query = load(&rt, &sandbox, "ontology.query");
    let find = load(&rt, &sandbox, "data.find_record");
    let limits = Limits::default();
    let input = json!({
        "type": "vehicle",
        "where": {"depot": "Depot-07", "mileage_km": {"gte": 50000}},
        "orderBy": "mileage_km",
        "descending": true,
        "limit": 10,
        "follow": [{"link": "leases"}]
    })
    .to_string();
    let run_query = || async {
        let call = query.call(&input, &limits).await;
        let out: Value = serde_json::from_str(call.result.as_ref().unwrap()).unwrap();
        let objects = out["objects"].as_array().unwrap();
        assert_eq!(objects.len(), 10, "{out}");
        assert!(
            objects
                .iter()
                .all(|o| o["leases"].as_array().is_some_and(|l| l.len() == 1)),
            "{out}"
        );
    };
    let run_find = || async {
        let call = find
            .call(
                &json!({"collection": "vehicles", "match": {"depot": "Depot-07"}, "limit": 10})
                    .to_string(),
                &limits,
            )
            .await;
        let out: Value = serde_json::from_str(call.result.as_ref().unwrap()).unwrap();
        for vehicle in out["records"].as_array().unwrap() {
            let call = find
                .call(
                    &json!({"collection": "leases", "match": {"vehicle": vehicle["id"]}, "limit": 10})
                        .to_string(),
                    &limits,
                )
                .await;
            assert!(call.result.is_ok());
        }
    };

    let at = Instant::now();
    rt.block_on(run_query());
    let first = at.elapsed();
    let mut times: [Vec<Duration>; 3] = Default::default();
    rt.block_on(async {
        for _ in 0..calls {
            let at = Instant::now();
            run_query().await;
            times[0].push(at.elapsed());
            let at = Instant::now();
            assert_eq!(host_query(&ledger), 10);
            times[1].push(at.elapsed());
            let at = Instant::now();
            run_find().await;
            times[2].push(at.elapsed());
        }
    });
    let percentile = |times: &mut Vec<Duration>, p: f64| {
        times.sort();
        times[((times.len() - 1) as f64 * p).round() as usize]
    };
    println!(
        "ontology: {OBJECTS} vehicles and {OBJECTS} leases (generated in {:.1} s); the first query, building its columns: {:.1} ms",
        generated.as_secs_f64(),
        first.as_secs_f64() * 1e3
    );
    println!("{:14} {:>6} {:>12} {:>12}", "row", "calls", "p50", "p99");
    let mut p50 = [Duration::ZERO; 3];
    for (i, name) in ["ontology.query", "ledger", "find_record"]
        .iter()
        .enumerate()
    {
        let n = times[i].len();
        p50[i] = percentile(&mut times[i], 0.50);
        let p99 = percentile(&mut times[i], 0.99);
        println!(
            "{name:14} {n:>6} {:>9.3} ms {:>9.3} ms",
            p50[i].as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
    println!(
        "ontology.query with one link on {OBJECTS} objects: {:.3} ms at p50 (target <= {} ms): {}",
        p50[0].as_secs_f64() * 1e3,
        TARGET.as_millis(),
        if p50[0] <= TARGET { "met" } else { "not met" }
    );
}
