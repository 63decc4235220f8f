use super::*;

#[test]
fn a_release_stored_by_version_1_still_reads() {
    let old = ReleaseBodyV1 {
        agents: vec![SourceFile {
            file: "agents/a.yaml".to_owned(),
            text: "{}".to_owned(),
        }],
        eval_suites: Vec::new(),
        operations: vec![ReleasedOperationV1 {
            name: "data.find_record".to_owned(),
            digest: "sha256:00".to_owned(),
            policy: PolicyV1 {
                files: Vec::new(),
                env: Vec::new(),
                http: Vec::new(),
                records: vec!["vehicles".to_owned()],
                documents: vec!["leases".to_owned()],
            },
            limits: Limits::default(),
            version: "1.0.0".to_owned(),
            description: "finds records".to_owned(),
            input_schema: "{}".to_owned(),
            output_schema: "{}".to_owned(),
            impact: Impact::Read,
        }],
        ledger: LedgerV1 {
            collections: BTreeMap::new(),
            document_sets: BTreeMap::new(),
        },
    };
    // The envelope a version 1 build wrote.
    let payload = postcard::to_allocvec(&old).unwrap();
    let mut sealed = b"HANE".to_vec();
    sealed.extend(postcard::to_allocvec(&("release", 1u16, payload.as_slice())).unwrap());
    let body: ReleaseBody = hane_stored::open(&sealed).unwrap();
    assert_eq!(body.agents, old.agents);
    assert_eq!(body.operations.len(), 1);
    let op = &body.operations[0];
    assert_eq!(op.name, "data.find_record");
    assert_eq!(op.policy.records, ["vehicles"]);
    assert_eq!(op.policy.documents, ["leases"]);
    assert!(op.policy.actions.is_empty());
    assert!(body.decider_policies.is_empty() && body.budgets.is_empty());
    // And the current version round-trips.
    let again: ReleaseBody = hane_stored::open(&hane_stored::seal(&body)).unwrap();
    assert_eq!(again, body);
}

#[test]
fn a_ledger_stored_by_version_5_reads_without_an_ontology() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ledger");
    let ledger = Ledger::load_dir(&dir).unwrap();
    let old = ReleaseBodyV5 {
        agents: Vec::new(),
        eval_suites: Vec::new(),
        operations: Vec::new(),
        ledger: LedgerV1 {
            collections: ledger
                .collections
                .iter()
                .map(|(name, c)| (name.clone(), c.records.clone()))
                .collect(),
            document_sets: ledger.document_sets.clone(),
        },
        decider_policies: Vec::new(),
        budgets: Vec::new(),
        model_providers: Vec::new(),
        workflows: Vec::new(),
        schedules: Vec::new(),
        connections: Vec::new(),
        tool_exposures: Vec::new(),
    };
    let payload = postcard::to_allocvec(&old).unwrap();
    let mut sealed = b"HANE".to_vec();
    sealed.extend(postcard::to_allocvec(&("release", 5u16, payload.as_slice())).unwrap());
    let body: ReleaseBody = hane_stored::open(&sealed).unwrap();
    assert_eq!(body.ledger, ledger);
    assert!(body.ledger.ontology.is_none());
    assert_eq!(body.ledger.collections["vehicles"].records.len(), 5);
}

#[test]
fn a_connection_stored_by_version_6_reads_without_ca_certificates() {
    let connection = ReleasedConnectionV1 {
        source: SourceFile {
            file: "connections/fleet.yaml".to_owned(),
            text: r#"{"apiVersion":"platform/v1alpha1","kind":"Connection"}"#.to_owned(),
        },
        openapi: r#"{"openapi":"3.1.0"}"#.to_owned(),
    };
    let old = ReleaseBodyV6 {
        agents: Vec::new(),
        eval_suites: Vec::new(),
        operations: Vec::new(),
        ledger: Ledger::default(),
        decider_policies: Vec::new(),
        budgets: Vec::new(),
        model_providers: Vec::new(),
        workflows: Vec::new(),
        schedules: Vec::new(),
        connections: vec![connection],
        tool_exposures: Vec::new(),
    };
    let payload = postcard::to_allocvec(&old).unwrap();
    let mut sealed = b"HANE".to_vec();
    sealed.extend(postcard::to_allocvec(&("release", 6u16, payload.as_slice())).unwrap());
    let body: ReleaseBody = hane_stored::open(&sealed).unwrap();
    assert_eq!(
        body.connections,
        [ReleasedConnection {
            source: old.connections[0].source.clone(),
            openapi: old.connections[0].openapi.clone(),
            ca_certificates: None,
        }]
    );
    // And the current version keeps a connection's certificates.
    let mut body = body;
    body.connections[0].ca_certificates = Some("-----BEGIN CERTIFICATE-----".to_owned());
    let again: ReleaseBody = hane_stored::open(&hane_stored::seal(&body)).unwrap();
    assert_eq!(again, body);
}
