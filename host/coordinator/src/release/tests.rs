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
        ledger: Ledger::default(),
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
