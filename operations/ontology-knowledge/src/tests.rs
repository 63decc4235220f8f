use std::cell::RefCell;

use serde_json::json;

use super::*;

/// A document of the stand-in: its set, its name and its pages.
type Document = (&'static str, String, Vec<String>);

/// A ledger in memory: leases, and documents split into pages, answering
/// as the host's `records.query`, `documents.search` and
/// `documents.read_pages` do, with every call recorded.
struct Memory {
    ontology: Option<Value>,
    leases: Vec<Value>,
    documents: Vec<Document>,
    granted_sets: Vec<&'static str>,
    calls: RefCell<Vec<String>>,
}

impl Memory {
    fn fleet() -> Self {
        let c1002: Vec<String> = (1..=23)
            .map(|page| match page {
                1 => "Lease contract C-1002\nLessee: Minato Catering.".to_owned(),
                17 => "The termination fee is two monthly payments.".to_owned(),
                23 => "Early return of the vehicle is allowed after 12 months.".to_owned(),
                n => format!("Clause {n}."),
            })
            .collect();
        let pages = |pages: &[&str]| pages.iter().map(|p| (*p).to_owned()).collect();
        Self {
            ontology: Some(fleet_ontology()),
            leases: vec![
                json!({"id": "L-01", "contract_no": "C-1001", "vehicle": "V-001", "document": "c-1001.txt", "months": "36"}),
                json!({"id": "L-02", "contract_no": "C-1002", "vehicle": "V-002", "document": "c-1002.txt", "months": "24"}),
                json!({"id": "L-03", "contract_no": "C-1003", "vehicle": "V-003", "document": "", "months": "48"}),
            ],
            documents: vec![
                (
                    "leases",
                    "c-1001.txt".to_owned(),
                    pages(&[
                        "Lease contract C-1001\nLessee: Kita Logistics. Term 36 months.",
                        "Early termination:   the lessee may end the lease early\nby paying a termination fee of three monthly payments.",
                        "Maintenance is included. No fee applies to scheduled maintenance.",
                    ]),
                ),
                ("leases", "c-1002.txt".to_owned(), c1002),
                (
                    "handbook",
                    "fleet-handbook.md".to_owned(),
                    pages(&[
                        "# Fleet handbook\nHow the fleet is run.",
                        "Early termination of a lease needs the manager's approval; the fee is charged to the depot.",
                    ]),
                ),
            ],
            granted_sets: vec!["leases", "handbook"],
            calls: RefCell::new(Vec::new()),
        }
    }

    fn calls(&self) -> Vec<String> {
        self.calls.borrow().clone()
    }

    fn set(&self, set: &str) -> Result<Vec<&Document>, Error> {
        if !self.granted_sets.contains(&set) {
            return Err(Error::Denied(format!(
                "document set `{set}` is not granted to this call"
            )));
        }
        Ok(self.documents.iter().filter(|d| d.0 == set).collect())
    }
}

fn fleet_ontology() -> Value {
    json!({
        "name": "fleet",
        "objectTypes": {
            "vehicle": {
                "description": "A leased vehicle", "collection": "vehicles", "key": "id",
                "properties": {"id": {"type": "string", "description": "Fleet number"}},
                "links": {}, "knowledge": [{"documents": "handbook", "from": null}]
            },
            "lease": {
                "description": "A lease of one vehicle to one lessee",
                "collection": "leases", "key": "contract_no",
                "properties": {
                    "id": {"type": "string", "description": "Lease number"},
                    "contract_no": {"type": "string", "description": "Contract number"},
                    "months": {"type": "integer", "description": "Term in months"}
                },
                "links": {
                    "vehicle": {"description": "The leased vehicle", "from": "vehicle",
                        "target": {"object": {"to": "vehicle", "via": "id", "many": false}}},
                    "contract": {"description": "The signed contract", "from": "document",
                        "target": {"document": {"set": "leases"}}}
                },
                "knowledge": [
                    {"documents": "leases", "from": "document"},
                    {"documents": "handbook", "from": null}
                ]
            }
        }
    })
}

impl Ledger for Memory {
    fn ontology(&self) -> Result<Option<Value>, Error> {
        Ok(self.ontology.clone())
    }

    fn query(&self, query: &Query) -> Result<Page, Error> {
        self.calls
            .borrow_mut()
            .push(format!("query {} {:?}", query.collection, query.conditions));
        assert_eq!((query.collection.as_str(), query.limit), ("leases", 1));
        let [condition] = query.conditions.as_slice() else {
            panic!("one condition: {query:?}")
        };
        assert_eq!(condition.comparison, Comparison::Equal);
        let records = self
            .leases
            .iter()
            .filter(|l| l.get(&condition.field) == Some(&condition.value))
            .take(1)
            .cloned()
            .collect();
        Ok(Page {
            records,
            next: None,
        })
    }

    fn search(&self, set: &str, query: &str, limit: u32) -> Result<Vec<Hit>, Error> {
        self.calls
            .borrow_mut()
            .push(format!("search {set} {query:?} {limit}"));
        let words = text::question_words(query);
        let mut hits = Vec::new();
        for (_, name, pages) in self.set(set)? {
            let mut all = String::new();
            let mut best: Option<(u32, u32)> = None;
            for (page, text) in (1..).zip(pages) {
                all.push_str(text);
                all.push('\n');
                let (score, _) = text::matches(text, &words);
                if score > 0 && best.is_none_or(|(s, _)| score > s) {
                    best = Some((score, page));
                }
            }
            let Some((_, page)) = best else { continue };
            let text = &pages[page as usize - 1];
            hits.push(Hit {
                document: name.clone(),
                title: text::first_line(&pages[0]),
                page,
                snippet: text.split_whitespace().collect::<Vec<_>>().join(" "),
                matched_words: text::matches(&all, &words).0,
            });
        }
        hits.sort_by(|a, b| {
            b.matched_words
                .cmp(&a.matched_words)
                .then_with(|| a.document.cmp(&b.document))
        });
        hits.truncate(limit as usize);
        Ok(hits)
    }

    fn read_pages(
        &self,
        set: &str,
        document: &str,
        first: u32,
        count: u32,
    ) -> Result<Pages, Error> {
        self.calls
            .borrow_mut()
            .push(format!("read {set} {document} {first} {count}"));
        let (_, name, pages) = self
            .set(set)?
            .into_iter()
            .find(|d| d.1 == document)
            .ok_or_else(|| Error::NotFound(format!("set `{set}` has no document `{document}`")))?;
        let total = pages.len() as u32;
        if first == 0 || first > total {
            return Err(Error::InvalidInput(format!(
                "`{document}` has {total} pages"
            )));
        }
        let end = (first + count.min(10) - 1).min(total);
        Ok(Pages {
            document: name.clone(),
            first,
            pages: pages[first as usize - 1..end as usize].to_vec(),
            total_pages: total,
        })
    }
}

fn input(value: Value) -> KnowledgeInput {
    serde_json::from_value(value).unwrap()
}

fn answer(ledger: &Memory, value: Value) -> Value {
    serde_json::to_value(find_knowledge(input(value), ledger).unwrap()).unwrap()
}

#[test]
fn an_objects_contract_and_the_handbook_are_ranked_together() {
    let ledger = Memory::fleet();
    let out = answer(
        &ledger,
        json!({"type": "lease", "id": "C-1001", "question": "Early termination fee?"}),
    );
    assert_eq!(
        out,
        json!({
            "type": "lease",
            "definition": {
                "description": "A lease of one vehicle to one lessee",
                "key": "contract_no",
                "properties": {
                    "contract_no": {"type": "string", "description": "Contract number"},
                    "id": {"type": "string", "description": "Lease number"},
                    "months": {"type": "integer", "description": "Term in months"}
                },
                "links": {
                    "contract": {"description": "The signed contract", "from": "document",
                        "target": {"document": {"set": "leases"}}},
                    "vehicle": {"description": "The leased vehicle", "from": "vehicle",
                        "target": {"object": {"to": "vehicle", "via": "id", "many": false}}}
                },
                "source": {"ontology": "fleet"}
            },
            "object": {"contract_no": "C-1001", "id": "L-01", "months": 36},
            "knowledge": [
                {
                    "source": {"set": "leases", "document": "c-1001.txt", "page": 2},
                    "title": "Lease contract C-1001",
                    "text": "Early termination: the lessee may end the lease early by paying a termination fee of three monthly payments.",
                    "score": 3,
                    "aboutObject": true
                },
                {
                    "source": {"set": "leases", "document": "c-1001.txt", "page": 3},
                    "title": "Lease contract C-1001",
                    "text": "Maintenance is included. No fee applies to scheduled maintenance.",
                    "score": 1,
                    "aboutObject": true
                },
                {
                    "source": {"set": "handbook", "document": "fleet-handbook.md", "page": 2},
                    "title": "# Fleet handbook",
                    "text": "Early termination of a lease needs the manager's approval; the fee is charged to the depot.",
                    "score": 3,
                    "aboutObject": false
                }
            ]
        })
    );
    assert_eq!(
        ledger.calls(),
        [
            r#"query leases [Condition { field: "contract_no", comparison: Equal, value: String("C-1001") }]"#,
            "read leases c-1001.txt 1 10",
            r#"search handbook "Early termination fee?" 5"#,
        ]
    );
}

#[test]
fn without_an_id_every_source_is_searched_and_limit_cuts() {
    let ledger = Memory::fleet();
    let out = answer(
        &ledger,
        json!({"type": "lease", "question": "termination fee", "limit": 2}),
    );
    assert!(out.get("object").is_none());
    let sources: Vec<&Value> = out["knowledge"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["source"])
        .collect();
    assert_eq!(
        sources,
        [
            &json!({"set": "handbook", "document": "fleet-handbook.md", "page": 2}),
            &json!({"set": "leases", "document": "c-1001.txt", "page": 2}),
        ]
    );
    assert_eq!(
        ledger.calls(),
        [
            r#"search leases "termination fee" 2"#,
            r#"search handbook "termination fee" 2"#
        ]
    );
}

#[test]
fn a_long_document_is_read_ten_pages_at_a_time() {
    let ledger = Memory::fleet();
    let out = answer(
        &ledger,
        json!({"type": "lease", "id": "L-02", "question": "early termination fee", "limit": 20}),
    );
    let leases: Vec<(u64, u64)> = out["knowledge"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"]["set"] == "leases")
        .map(|p| {
            (
                p["source"]["page"].as_u64().unwrap(),
                p["score"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(leases, [(17, 2), (23, 1)]);
    assert_eq!(
        out["knowledge"][1]["title"], "Lease contract C-1002",
        "{out:#}"
    );
    // "L-02" is no lease's contract_no, but it is a record id.
    assert_eq!(
        ledger.calls()[..5],
        [
            r#"query leases [Condition { field: "contract_no", comparison: Equal, value: String("L-02") }]"#,
            r#"query leases [Condition { field: "id", comparison: Equal, value: String("L-02") }]"#,
            "read leases c-1002.txt 1 10",
            "read leases c-1002.txt 11 10",
            "read leases c-1002.txt 21 10",
        ]
    );
}

#[test]
fn pages_past_the_cap_are_not_read() {
    let mut ledger = Memory::fleet();
    let pages: Vec<String> = (1..=150)
        .map(|p| {
            if p == 120 {
                "fee".to_owned()
            } else {
                format!("page {p}")
            }
        })
        .collect();
    ledger.documents[1].2 = pages;
    let out = answer(
        &ledger,
        json!({"type": "lease", "id": "L-02", "question": "fee"}),
    );
    assert!(
        out["knowledge"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["source"]["set"] == "handbook"),
        "{out:#}"
    );
    let reads: Vec<String> = ledger
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("read"))
        .collect();
    assert_eq!(reads.len(), 10);
    assert_eq!(reads[9], "read leases c-1002.txt 91 10");
}

#[test]
fn the_same_page_from_two_sources_is_kept_once_with_its_best_score() {
    let mut ledger = Memory::fleet();
    let mut ontology = fleet_ontology();
    ontology["objectTypes"]["lease"]["knowledge"] =
        json!([{"documents": "leases", "from": "document"}, {"documents": "leases"}]);
    ledger.ontology = Some(ontology);
    let out = answer(
        &ledger,
        json!({"type": "lease", "id": "L-01", "question": "early termination fee"}),
    );
    let pages: Vec<(&str, u64, u64)> = out["knowledge"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["source"]["document"].as_str().unwrap(),
                p["source"]["page"].as_u64().unwrap(),
                p["score"].as_u64().unwrap(),
            )
        })
        .collect();
    // The object's own pages first; the search scores c-1002 by the words
    // of the whole document.
    assert_eq!(
        pages,
        [
            ("c-1001.txt", 2, 3),
            ("c-1001.txt", 3, 1),
            ("c-1002.txt", 17, 3)
        ]
    );
}

#[test]
fn an_object_without_a_document_has_only_the_sets_about_its_type() {
    let ledger = Memory::fleet();
    let out = answer(
        &ledger,
        json!({"type": "lease", "id": "L-03", "question": "fee"}),
    );
    assert_eq!(
        out["object"],
        json!({"contract_no": "C-1003", "id": "L-03", "months": 48})
    );
    assert_eq!(out["knowledge"].as_array().unwrap().len(), 1);
    assert!(!ledger.calls().iter().any(|c| c.starts_with("read")));
}

#[test]
fn mistakes_are_named() {
    let ledger = Memory::fleet();
    let invalid = [
        (
            json!({"type": "lease", "question": "  "}),
            "the question is empty; ask about something, such as \"early termination fee\"",
        ),
        (
            json!({"type": "lease", "question": "?!"}),
            "the question \"?!\" has no words to look for",
        ),
        (
            json!({"type": "lease", "question": "fee", "limit": 0}),
            "limit must be from 1 to 20, not 0",
        ),
        (
            json!({"type": "lease", "question": "fee", "limit": 21}),
            "limit must be from 1 to 20, not 21",
        ),
        (
            json!({"type": "lease", "question": "fee", "id": " "}),
            "`id` is empty; give an object's key, or no `id`",
        ),
        (
            json!({"type": "contract", "question": "fee"}),
            "the ontology has no object type `contract`; it has lease, vehicle",
        ),
    ];
    for (request, message) in invalid {
        let err = find_knowledge(input(request.clone()), &ledger).unwrap_err();
        assert_eq!(err, Error::InvalidInput(message.into()), "{request}");
    }
    let long = "word ".repeat(MAX_QUESTION_BYTES / 5 + 2);
    let err =
        find_knowledge(input(json!({"type": "lease", "question": long})), &ledger).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.ends_with("at most 1024 are allowed")),
        "{err:?}"
    );
    assert_eq!(ledger.calls(), Vec::<String>::new());

    let err = find_knowledge(
        input(json!({"type": "lease", "id": "L-99", "question": "fee"})),
        &ledger,
    )
    .unwrap_err();
    assert_eq!(
        err,
        Error::NotFound("there is no `lease` whose `contract_no` or `id` is `L-99`".into())
    );

    let mut ledger = Memory::fleet();
    ledger.ontology = None;
    let err =
        find_knowledge(input(json!({"type": "lease", "question": "fee"})), &ledger).unwrap_err();
    assert_eq!(
        err,
        Error::NotFound("the release defines no ontology".into())
    );
}

#[test]
fn host_errors_pass_through() {
    let mut ledger = Memory::fleet();
    ledger.granted_sets = vec!["leases"];
    let err = find_knowledge(
        input(json!({"type": "lease", "id": "L-01", "question": "fee"})),
        &ledger,
    )
    .unwrap_err();
    assert_eq!(
        err,
        Error::Denied("document set `handbook` is not granted to this call".into())
    );
    let mut ledger = Memory::fleet();
    ledger
        .leases
        .push(json!({"id": "L-01x", "document": "c-404.txt"}));
    let err = find_knowledge(
        input(json!({"type": "lease", "id": "L-01x", "question": "fee"})),
        &ledger,
    )
    .unwrap_err();
    assert_eq!(
        err,
        Error::NotFound("set `leases` has no document `c-404.txt`".into())
    );
    let err = run(input(json!({"type": "lease", "question": "fee"}))).unwrap_err();
    assert!(
        matches!(&err, Error::Failed(m) if m.contains("only available inside")),
        "{err:?}"
    );
}

#[test]
fn the_schemas_tell_a_model_what_to_send_and_what_comes_back() {
    let d = hane_guest::__private::describe(
        run,
        "ontology.knowledge",
        "0",
        "",
        hane_guest::Impact::Read,
    );
    let input_schema: Value = serde_json::from_str(&d.input_schema).unwrap();
    assert_eq!(input_schema["required"], json!(["type", "question"]));
    assert_eq!(input_schema["additionalProperties"], false);
    assert_eq!(input_schema["properties"]["limit"]["maximum"], 20);
    let output_schema: Value = serde_json::from_str(&d.output_schema).unwrap();
    assert_eq!(
        output_schema["required"],
        json!(["type", "definition", "knowledge"])
    );
    let passage = &output_schema["$defs"]["Passage"];
    assert_eq!(
        passage["required"],
        json!(["source", "title", "text", "score", "aboutObject"])
    );
    let err = hane_guest::__private::run_json(r#"{"type": "lease"}"#, run).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.contains("missing field `question`")),
        "{err:?}"
    );
}
