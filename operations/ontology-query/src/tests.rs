use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::json;

use super::*;

/// A ledger in memory that answers queries by the rules the host's
/// `records.query` documents, and records every query it is asked.
struct Memory {
    ontology: Option<Value>,
    collections: BTreeMap<&'static str, Vec<Value>>,
    granted: Vec<&'static str>,
    summaries: BTreeMap<&'static str, Summary>,
    queries: RefCell<Vec<Query>>,
}

impl Memory {
    fn fleet() -> Self {
        let vehicles = [
            // id, registration, model, inspection_expiry, mileage_km, depot, electric
            (
                "V-001",
                "架空 300 あ 10-02",
                "Hiace",
                "2027-03-31",
                "48210",
                "Shinagawa",
                "false",
            ),
            (
                "V-002",
                "架空 500 さ 12-34",
                "Caravan",
                "2026-12-15",
                "91544",
                "Shinagawa",
                "false",
            ),
            (
                "V-003",
                "品川 400 か 56-78",
                "Leaf",
                "2026-06-30",
                "30500",
                "Shinagawa",
                "true",
            ),
            (
                "V-004",
                "架空 300 な 11-11",
                "NV200",
                "2027-01-20",
                "9800",
                "Shinagawa",
                "false",
            ),
            (
                "V-005",
                "架空 100 あ 22-22",
                "Proace",
                "2028-02-01",
                "65000",
                "Kawasaki",
                "false",
            ),
            (
                "V-006",
                "架空 300 た 33-33",
                "HiAce",
                "2026-08-08",
                "120000",
                "Shinagawa",
                "",
            ),
            (
                "V-007",
                "架空 800 は 44-44",
                "e-NV200",
                "",
                "15000",
                "Shinagawa",
                "true",
            ),
        ]
        .map(
            |(id, registration, model, expiry, mileage, depot, electric)| {
                json!({"id": id, "registration": registration, "model": model,
                "inspection_expiry": expiry, "mileage_km": mileage, "depot": depot,
                "electric": electric})
            },
        );
        let leases = [
            ("L-01", "V-001", "c-1001.txt", "2025-04-01", 36, 52000.5),
            ("L-02", "V-002", "c-1002.txt", "2024-10-01", 24, 48000.0),
            ("L-04", "V-002", "", "2022-10-01", 12, 39000.0),
            ("L-05", "V-002", "c-1005.txt", "2026-10-01", 36, 51000.0),
            ("L-07", "V-007", "c-1007.txt", "2026-02-01", 60, 61000.0),
            ("L-09", "V-404", "c-1009.txt", "2026-03-01", 12, 30000.0),
        ]
        .map(|(id, vehicle, document, start, months, fee)| {
            json!({"id": id, "lessee": format!("Lessee of {id}"), "vehicle": vehicle,
                "document": document, "start": start, "months": months, "monthly_fee": fee})
        });
        let drivers = [
            json!({"id": "D-01", "name": "Aoi Sato", "vehicle": "架空 300 あ 10-02"}),
            json!({"id": "D-02", "name": "Ren Suzuki", "vehicle": "架空 500 さ 12-34"}),
        ];
        let summaries = ["c-1001.txt", "c-1002.txt", "c-1005.txt", "c-1007.txt"]
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                let stem = name.trim_end_matches(".txt").to_uppercase();
                let summary = Summary {
                    document: name.to_owned(),
                    title: format!("Lease contract {stem}"),
                    summary: format!("Terms of lease {stem}."),
                    pages: i as u32 + 1,
                };
                (name, summary)
            })
            .collect();
        Self {
            ontology: Some(fleet_ontology()),
            collections: BTreeMap::from([
                ("vehicles", vehicles.to_vec()),
                ("leases", leases.to_vec()),
                ("drivers", drivers.to_vec()),
            ]),
            granted: vec!["vehicles", "leases", "drivers"],
            summaries,
            queries: RefCell::new(Vec::new()),
        }
    }

    fn queries(&self) -> Vec<Query> {
        self.queries.borrow().clone()
    }
}

fn fleet_ontology() -> Value {
    let p = |kind: &str| json!({"type": kind, "description": format!("a {kind}")});
    json!({
        "name": "fleet",
        "objectTypes": {
            "vehicle": {
                "description": "A leased vehicle", "collection": "vehicles", "key": "id",
                "properties": {
                    "id": p("string"), "registration": p("string"), "model": p("string"),
                    "inspection_expiry": p("date"), "mileage_km": p("integer"),
                    "depot": p("string"), "electric": p("boolean")
                },
                "links": {
                    "leases": {"description": "Its leases", "from": "id",
                        "target": {"object": {"to": "lease", "via": "vehicle", "many": true}}},
                    "drivers": {"description": "", "from": "registration",
                        "target": {"object": {"to": "driver", "via": "vehicle", "many": true}}}
                },
                "knowledge": [{"documents": "handbook", "from": null}]
            },
            "lease": {
                "description": "A lease contract", "collection": "leases", "key": "id",
                "properties": {
                    "id": p("string"), "lessee": p("string"), "vehicle": p("string"),
                    "start": p("date"), "months": p("integer"), "monthly_fee": p("number")
                },
                "links": {
                    "vehicle": {"description": "", "from": "vehicle",
                        "target": {"object": {"to": "vehicle", "via": "id", "many": false}}},
                    "contract": {"description": "", "from": "document",
                        "target": {"document": {"set": "leases"}}}
                },
                "knowledge": [{"documents": "leases", "from": "document"}]
            },
            "driver": {
                "description": "", "collection": "drivers", "key": "id",
                "properties": {"id": p("string"), "name": p("string")},
                "links": {}, "knowledge": []
            }
        }
    })
}

/// A number, or text holding one, as the host compares numbers.
fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn holds(record: &Value, condition: &Condition) -> bool {
    let Some(actual) = record.get(&condition.field) else {
        return false;
    };
    let expected = &condition.value;
    let ordering = match expected {
        Value::Number(_) => number(actual)
            .zip(number(expected))
            .and_then(|(a, e)| a.partial_cmp(&e)),
        Value::String(e) => actual.as_str().map(|a| a.cmp(e.as_str())),
        // Booleans equal `true`/`false` and their text (CSV cells).
        Value::Bool(b) => (actual == expected || actual.as_str() == Some(&b.to_string()))
            .then_some(Ordering::Equal),
        _ => (actual == expected).then_some(Ordering::Equal),
    };
    match condition.comparison {
        Comparison::Equal => ordering == Some(Ordering::Equal),
        Comparison::Less => ordering == Some(Ordering::Less),
        Comparison::LessOrEqual => matches!(ordering, Some(Ordering::Less | Ordering::Equal)),
        Comparison::Greater => ordering == Some(Ordering::Greater),
        Comparison::GreaterOrEqual => {
            matches!(ordering, Some(Ordering::Greater | Ordering::Equal))
        }
        Comparison::Prefix => actual
            .as_str()
            .zip(expected.as_str())
            .is_some_and(|(a, e)| a.starts_with(e)),
    }
}

/// Numbers by value, then strings, then no value.
fn order_key(record: &Value, field: &str) -> (u8, f64, String) {
    match record.get(field) {
        Some(v) if number(v).is_some() => (0, number(v).unwrap(), String::new()),
        Some(Value::String(s)) if !s.is_empty() => (1, 0.0, s.clone()),
        _ => (2, 0.0, String::new()),
    }
}

/// A `next` token: where the page ended and which query it belongs to.
fn fingerprint(query: &Query) -> u64 {
    let mut hasher = DefaultHasher::new();
    format!(
        "{}{:?}{:?}{}",
        query.collection, query.conditions, query.order_by, query.descending
    )
    .hash(&mut hasher);
    hasher.finish()
}

impl Ledger for Memory {
    fn ontology(&self) -> Result<Option<Value>, Error> {
        Ok(self.ontology.clone())
    }

    fn query(&self, query: &Query) -> Result<Page, Error> {
        self.queries.borrow_mut().push(query.clone());
        if !self.granted.contains(&query.collection.as_str()) {
            return Err(Error::Denied(format!(
                "collection `{}` is not granted to this call",
                query.collection
            )));
        }
        let records = self
            .collections
            .get(query.collection.as_str())
            .ok_or_else(|| Error::NotFound(format!("no collection `{}`", query.collection)))?;
        let mut matched: Vec<&Value> = records
            .iter()
            .filter(|r| query.conditions.iter().all(|c| holds(r, c)))
            .collect();
        if let Some(field) = &query.order_by {
            matched.sort_by(|a, b| {
                let ordering = order_key(a, field)
                    .partial_cmp(&order_key(b, field))
                    .unwrap();
                if query.descending {
                    ordering.reverse()
                } else {
                    ordering
                }
            });
        }
        let start = match &query.after {
            None => 0,
            Some(after) => after
                .split_once('/')
                .filter(|(_, f)| *f == fingerprint(query).to_string())
                .and_then(|(offset, _)| offset.parse::<usize>().ok())
                .ok_or_else(|| {
                    Error::InvalidInput("`after` is not a `next` of this query".into())
                })?,
        };
        let end = matched.len().min(start + query.limit.min(100) as usize);
        let next = (end < matched.len()).then(|| format!("{end}/{}", fingerprint(query)));
        Ok(Page {
            records: matched[start.min(end)..end]
                .iter()
                .map(|r| (*r).clone())
                .collect(),
            next,
        })
    }

    fn read_summary(&self, set: &str, document: &str) -> Result<Summary, Error> {
        assert_eq!(set, "leases");
        self.summaries
            .get(document)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("set `{set}` has no document `{document}`")))
    }
}

fn input(value: Value) -> QueryInput {
    serde_json::from_value(value).unwrap()
}

fn answer(ledger: &Memory, value: Value) -> Value {
    serde_json::to_value(query_objects(input(value), ledger).unwrap()).unwrap()
}

fn condition(field: &str, comparison: Comparison, value: Value) -> Condition {
    Condition {
        field: field.into(),
        comparison,
        value,
    }
}

fn contract(stem: &str, pages: u32) -> Value {
    json!({
        "document": format!("{}.txt", stem.to_lowercase()),
        "title": format!("Lease contract {stem}"),
        "summary": format!("Terms of lease {stem}."),
        "pages": pages,
    })
}

#[test]
fn follows_vehicles_to_leases_to_contracts_with_filters_and_order() {
    let ledger = Memory::fleet();
    let request = json!({
        "type": "vehicle",
        "where": {
            "depot": "Shinagawa",
            "mileage_km": {"gte": "10000", "lt": 100000},
            "registration": {"prefix": "架空"}
        },
        "fields": ["id", "mileage_km", "id"],
        "orderBy": "mileage_km",
        "descending": true,
        "limit": 2,
        "follow": [{
            "link": "leases",
            "where": {"months": {"gte": 24}},
            "fields": ["id", "start", "months"],
            "orderBy": "start",
            "descending": true,
            "limit": 1,
            "follow": [{"link": "contract"}]
        }]
    });
    let out = answer(&ledger, request.clone());
    let next = out["next"].as_str().expect("a next token").to_owned();
    assert_eq!(
        out,
        json!({
            "type": "vehicle",
            "objects": [
                {
                    "id": "V-002", "mileage_km": 91544,
                    "leases": [{"id": "L-05", "start": "2026-10-01", "months": 36,
                        "contract": contract("C-1005", 3)}],
                    "_truncated": ["leases"]
                },
                {
                    "id": "V-001", "mileage_km": 48210,
                    "leases": [{"id": "L-01", "start": "2025-04-01", "months": 36,
                        "contract": contract("C-1001", 1)}]
                }
            ],
            "next": next,
            "truncated": false
        })
    );
    let queries = ledger.queries();
    assert_eq!(queries.len(), 3, "{queries:#?}");
    assert_eq!(
        queries[0],
        Query {
            collection: "vehicles".into(),
            conditions: vec![
                condition("depot", Comparison::Equal, json!("Shinagawa")),
                condition("mileage_km", Comparison::GreaterOrEqual, json!(10000)),
                condition("mileage_km", Comparison::Less, json!(100000)),
                condition("registration", Comparison::Prefix, json!("架空")),
            ],
            order_by: Some("mileage_km".into()),
            descending: true,
            after: None,
            limit: 2,
        }
    );
    assert_eq!(
        queries[1],
        Query {
            collection: "leases".into(),
            conditions: vec![
                condition("vehicle", Comparison::Equal, json!("V-002")),
                condition("months", Comparison::GreaterOrEqual, json!(24)),
            ],
            order_by: Some("start".into()),
            descending: true,
            after: None,
            limit: 1,
        }
    );
    assert_eq!(queries[2].conditions[0].value, json!("V-001"));

    // The next page continues after V-001 with the same query.
    let mut again = request;
    again["after"] = json!(next);
    let out = answer(&ledger, again);
    assert_eq!(
        out,
        json!({
            "type": "vehicle",
            "objects": [{
                "id": "V-007", "mileage_km": 15000,
                "leases": [{"id": "L-07", "start": "2026-02-01", "months": 60,
                    "contract": contract("C-1007", 4)}]
            }],
            "next": null,
            "truncated": false
        })
    );
    assert_eq!(ledger.queries()[3].after.as_deref(), Some(next.as_str()));
}

#[test]
fn an_after_from_another_query_is_the_hosts_invalid_input() {
    let ledger = Memory::fleet();
    let first = answer(&ledger, json!({"type": "vehicle", "limit": 1}));
    let next = first["next"].as_str().unwrap();
    let err = query_objects(
        input(json!({"type": "vehicle", "orderBy": "id", "after": next})),
        &ledger,
    )
    .unwrap_err();
    assert_eq!(
        err,
        Error::InvalidInput("`after` is not a `next` of this query".into())
    );
}

#[test]
fn properties_are_typed_and_links_to_one_give_an_object_or_null() {
    let ledger = Memory::fleet();
    let out = answer(
        &ledger,
        json!({
            "type": "lease",
            "where": {"vehicle": "V-002", "start": {"gte": "2022-10-01", "prefix": "202"}},
            "follow": [
                {"link": "vehicle", "fields": ["id", "electric", "inspection_expiry", "mileage_km"]},
                {"link": "contract"}
            ]
        }),
    );
    let v002 = json!({"id": "V-002", "electric": false, "inspection_expiry": "2026-12-15",
        "mileage_km": 91544});
    assert_eq!(
        out,
        json!({
            "type": "lease",
            "objects": [
                {"id": "L-02", "lessee": "Lessee of L-02", "vehicle": v002, "start": "2024-10-01",
                    "months": 24, "monthly_fee": 48000.0, "contract": contract("C-1002", 2)},
                {"id": "L-04", "lessee": "Lessee of L-04", "vehicle": v002, "start": "2022-10-01",
                    "months": 12, "monthly_fee": 39000.0, "contract": null},
                {"id": "L-05", "lessee": "Lessee of L-05", "vehicle": v002, "start": "2026-10-01",
                    "months": 36, "monthly_fee": 51000.0, "contract": contract("C-1005", 3)}
            ],
            "next": null,
            "truncated": false
        })
    );
    let queries = ledger.queries();
    assert_eq!(
        queries[0].conditions,
        [
            condition("start", Comparison::GreaterOrEqual, json!("2022-10-01")),
            condition("start", Comparison::Prefix, json!("202")),
            condition("vehicle", Comparison::Equal, json!("V-002")),
        ]
    );
    assert_eq!(
        queries[1],
        Query {
            collection: "vehicles".into(),
            conditions: vec![condition("id", Comparison::Equal, json!("V-002"))],
            order_by: None,
            descending: false,
            after: None,
            limit: 1,
        }
    );

    // A lease whose vehicle the ledger does not have links to null, and the
    // typed values of a vehicle: "true" is true, "" is null.
    let out = answer(
        &ledger,
        json!({"type": "lease", "where": {"id": "L-09"}, "fields": ["id"],
            "follow": [{"link": "vehicle"}]}),
    );
    assert_eq!(out["objects"], json!([{"id": "L-09", "vehicle": null}]));
    let out = answer(
        &ledger,
        json!({"type": "vehicle", "where": {"electric": true, "mileage_km": {"lte": 15000.0}}}),
    );
    assert_eq!(
        out["objects"],
        json!([{"id": "V-007", "registration": "架空 800 は 44-44", "model": "e-NV200",
            "inspection_expiry": null, "mileage_km": 15000, "depot": "Shinagawa",
            "electric": true}])
    );
}

#[test]
fn a_link_may_start_from_a_field_that_is_not_a_property() {
    let ledger = Memory::fleet();
    let out = answer(
        &ledger,
        json!({"type": "vehicle", "where": {"id": {"eq": "V-001"}}, "fields": [],
            "follow": [{"link": "drivers"}]}),
    );
    assert_eq!(
        out["objects"],
        json!([{"drivers": [{"id": "D-01", "name": "Aoi Sato"}]}])
    );
    assert_eq!(
        ledger.queries()[1].conditions,
        [condition(
            "vehicle",
            Comparison::Equal,
            json!("架空 300 あ 10-02")
        )]
    );
}

#[test]
fn follows_up_to_three_links_deep() {
    let ledger = Memory::fleet();
    let out = answer(
        &ledger,
        json!({"type": "vehicle", "where": {"id": "V-001"}, "fields": ["id"],
            "follow": [{"link": "leases", "fields": ["id"], "follow": [
                {"link": "vehicle", "fields": ["id"], "follow": [
                    {"link": "drivers", "fields": ["name"]}]}]}]}),
    );
    assert_eq!(
        out["objects"],
        json!([{"id": "V-001", "leases": [{"id": "L-01", "vehicle": {"id": "V-001",
            "drivers": [{"name": "Aoi Sato"}]}}]}])
    );
}

/// `vehicles` vehicles with `leases` leases each, all followed with
/// `limit`: the leases each vehicle got (0 when its key is missing), which
/// vehicles list `leases` in `_truncated`, the answer's `truncated`, and
/// the queries made.
fn capped(
    vehicles: usize,
    leases: usize,
    limit: u32,
) -> (Vec<usize>, Vec<usize>, bool, Vec<Query>) {
    let mut ledger = Memory::fleet();
    let records: Vec<Value> = (0..vehicles)
        .map(|v| json!({"id": format!("V{v:02}")}))
        .collect();
    ledger.collections.insert("vehicles", records);
    let records: Vec<Value> = (0..vehicles * leases)
        .map(|l| json!({"id": format!("L{l:04}"), "vehicle": format!("V{:02}", l / leases)}))
        .collect();
    ledger.collections.insert("leases", records);
    let out = query_objects(
        input(json!({"type": "vehicle", "limit": 50, "fields": ["id"],
            "follow": [{"link": "leases", "fields": ["id"], "limit": limit}]})),
        &ledger,
    )
    .unwrap();
    assert_eq!(out.objects.len(), vehicles);
    let followed = out
        .objects
        .iter()
        .map(|o| {
            o.get("leases")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        })
        .collect();
    let cut = (0..vehicles)
        .filter(|&v| match out.objects[v].get(TRUNCATED_KEY) {
            None => false,
            Some(cut) => {
                assert_eq!(cut, &json!(["leases"]));
                true
            }
        })
        .collect();
    (followed, cut, out.truncated, ledger.queries())
}

#[test]
fn the_answer_is_capped_and_says_what_the_cap_cut() {
    // 10 vehicles and 490 leases fill the answer exactly.
    let (followed, cut, truncated, queries) = capped(10, 49, 50);
    assert_eq!(followed, [49; 10]);
    assert_eq!((cut, truncated, queries.len()), (vec![], false, 11));

    // The cap cuts the last vehicle's leases.
    let (followed, cut, truncated, _) = capped(10, 50, 50);
    assert_eq!(followed, [[50; 9].as_slice(), &[40]].concat());
    assert_eq!((cut, truncated), (vec![9], true));

    // The cap is reached exactly after 9 vehicles: the rest are not
    // followed, and have no `leases` key.
    let (followed, cut, truncated, queries) = capped(50, 50, 50);
    assert_eq!(followed, [[50; 9].as_slice(), &[0; 41]].concat());
    assert_eq!((cut, truncated), ((9..50).collect::<Vec<_>>(), true));
    assert_eq!(queries.len(), 1 + 9);

    // Both: the 23rd vehicle gets the 10 leases the cap leaves.
    let (followed, cut, truncated, queries) = capped(50, 20, 20);
    assert_eq!(followed.iter().sum::<usize>() + 50, MAX_OBJECTS);
    assert_eq!(followed[..24], [[20; 22].as_slice(), &[10, 0]].concat());
    assert_eq!((cut[0], cut.len(), truncated), (22, 28, true));
    assert_eq!(queries.len(), 1 + 23);
    assert_eq!(queries[23].limit, 10);

    // A link's own limit cuts without the cap.
    let (followed, cut, truncated, _) = capped(3, 5, 4);
    assert_eq!(followed, [4, 4, 4]);
    assert_eq!((cut, truncated), (vec![0, 1, 2], false));
}

#[test]
fn mistakes_are_named_before_anything_is_read() {
    let cases = [
        (
            json!({"type": "car"}),
            "the ontology has no object type `car`; it has driver, lease, vehicle",
        ),
        (
            json!({"type": "vehicle", "where": {"colour": "red"}}),
            "object type `vehicle` has no property `colour`; it has depot, electric, id, inspection_expiry, mileage_km, model, registration",
        ),
        (
            json!({"type": "vehicle", "fields": ["id", "leases"]}),
            "object type `vehicle` has no property `leases`; it has depot, electric, id, inspection_expiry, mileage_km, model, registration (`leases` is a link: follow it)",
        ),
        (
            json!({"type": "vehicle", "orderBy": "age"}),
            "object type `vehicle` has no property `age`; it has depot, electric, id, inspection_expiry, mileage_km, model, registration",
        ),
        (
            json!({"type": "vehicle", "follow": [{"link": "contracts"}]}),
            "`vehicle` has no link `contracts`; it has drivers, leases",
        ),
        (
            json!({"type": "vehicle", "follow": [{"link": "leases", "where": {"colour": "red"}}]}),
            "object type `lease` has no property `colour`; it has id, lessee, monthly_fee, months, start, vehicle",
        ),
        (
            json!({"type": "vehicle", "where": {"mileage_km": "abc"}}),
            "`mileage_km` is an integer, not \"abc\"",
        ),
        (
            json!({"type": "vehicle", "where": {"mileage_km": {"gt": 1.5}}}),
            "`mileage_km` is an integer, not 1.5",
        ),
        (
            json!({"type": "vehicle", "where": {"mileage_km": {"prefix": "4"}}}),
            "`prefix` needs a string or date property; `mileage_km` is an integer",
        ),
        (
            json!({"type": "vehicle", "where": {"inspection_expiry": {"lt": "2027-13-01"}}}),
            "`inspection_expiry` is a date (YYYY-MM-DD), not \"2027-13-01\"",
        ),
        (
            json!({"type": "vehicle", "where": {"inspection_expiry": {"prefix": 2027}}}),
            "`prefix` of `inspection_expiry` needs text, not 2027",
        ),
        (
            json!({"type": "vehicle", "where": {"mileage_km": {"ge": 5}}}),
            "`mileage_km` has an unknown comparison `ge`; use eq, gt, gte, lt, lte or prefix",
        ),
        (
            json!({"type": "vehicle", "where": {"mileage_km": {}}}),
            "`mileage_km` has no comparison: give the value it must equal, or comparisons such as {\"gte\": 10} (eq, gt, gte, lt, lte, prefix)",
        ),
        (
            json!({"type": "vehicle", "where": {"electric": {"gt": false}}}),
            "`electric` is a boolean; compare it only for equality, with a value or `eq`",
        ),
        (
            json!({"type": "vehicle", "where": {"depot": null}}),
            "`depot` is a string, not null",
        ),
        (
            json!({"type": "vehicle", "limit": 0}),
            "limit must be from 1 to 50, not 0",
        ),
        (
            json!({"type": "vehicle", "limit": 51}),
            "limit must be from 1 to 50, not 51",
        ),
        (
            json!({"type": "vehicle", "follow": [{"link": "leases", "limit": 51}]}),
            "the limit of link `leases` must be from 1 to 50, not 51",
        ),
        (
            json!({"type": "vehicle", "descending": true}),
            "`descending` needs `orderBy`, the property to order by",
        ),
        (
            json!({"type": "vehicle", "follow": [{"link": "leases"}, {"link": "leases"}]}),
            "`vehicle` follows `leases` twice; follow each link once",
        ),
        (
            json!({"type": "vehicle", "follow": [{"link": "leases", "follow": [{"link": "vehicle",
                "follow": [{"link": "leases", "follow": [{"link": "vehicle"}]}]}]}]}),
            "follow goes at most 3 links deep; leases → vehicle → leases → vehicle is 4",
        ),
        (
            json!({"type": "lease", "follow": [{"link": "vehicle", "limit": 1}]}),
            "`vehicle` links a `lease` to one `vehicle`; `limit` applies only to links to many objects",
        ),
        (
            json!({"type": "lease", "follow": [{"link": "vehicle", "orderBy": "id"}]}),
            "`vehicle` links a `lease` to one `vehicle`; `orderBy` applies only to links to many objects",
        ),
        (
            json!({"type": "lease", "follow": [{"link": "contract", "fields": ["title"]}]}),
            "`contract` leads to a document of set `leases`, which has no objects to filter, order or follow: give it no `fields`",
        ),
    ];
    let mut ledger = Memory::fleet();
    ledger.granted.clear();
    for (request, message) in cases {
        let err = query_objects(input(request.clone()), &ledger).unwrap_err();
        assert_eq!(err, Error::InvalidInput(message.into()), "{request}");
    }
    assert_eq!(ledger.queries(), []);
}

#[test]
fn no_ontology_is_not_found_and_host_errors_pass_through() {
    let mut ledger = Memory::fleet();
    ledger.ontology = None;
    assert_eq!(
        query_objects(input(json!({"type": "vehicle"})), &ledger).unwrap_err(),
        Error::NotFound("the release defines no ontology".into())
    );

    let mut ledger = Memory::fleet();
    ledger.granted.retain(|c| *c != "drivers");
    let err = query_objects(
        input(json!({"type": "vehicle", "follow": [{"link": "drivers"}]})),
        &ledger,
    )
    .unwrap_err();
    assert_eq!(
        err,
        Error::Denied("collection `drivers` is not granted to this call".into())
    );

    let mut ledger = Memory::fleet();
    ledger
        .collections
        .insert("drivers", vec![json!("not an object")]);
    let err = query_objects(input(json!({"type": "driver"})), &ledger).unwrap_err();
    assert_eq!(
        err,
        Error::Failed("a record of `drivers` is not a JSON object: \"not an object\"".into())
    );

    // Outside a component the host's capabilities are not there.
    let err = run(input(json!({"type": "vehicle"}))).unwrap_err();
    assert!(
        matches!(&err, Error::Failed(m) if m.contains("only available inside")),
        "{err:?}"
    );
}

#[test]
fn the_schemas_tell_a_model_what_to_send_and_what_comes_back() {
    let d =
        hane_guest::__private::describe(run, "ontology.query", "0", "", hane_guest::Impact::Read);
    let input_schema: Value = serde_json::from_str(&d.input_schema).unwrap();
    assert_eq!(input_schema["required"], json!(["type"]));
    assert_eq!(input_schema["additionalProperties"], false);
    let properties = &input_schema["properties"];
    assert_eq!(properties["limit"]["maximum"], 50);
    assert!(properties["orderBy"].is_object());
    let filter = &properties["where"];
    assert!(filter["description"].as_str().unwrap().contains("gte"));
    assert_eq!(
        filter["additionalProperties"]["anyOf"][1]["properties"]["prefix"]["type"],
        "string"
    );
    let follow = &input_schema["$defs"]["Follow"];
    assert_eq!(follow["required"], json!(["link"]));
    assert_eq!(
        follow["properties"]["follow"]["items"]["$ref"],
        "#/$defs/Follow"
    );

    let output_schema: Value = serde_json::from_str(&d.output_schema).unwrap();
    assert_eq!(
        output_schema["required"],
        json!(["type", "objects", "next", "truncated"])
    );
    assert!(
        output_schema["properties"]["objects"]["description"]
            .as_str()
            .unwrap()
            .contains("_truncated")
    );

    let err =
        hane_guest::__private::run_json(r#"{"type": "vehicle", "sort": "id"}"#, run).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.contains("unknown field `sort`")),
        "{err:?}"
    );
}
