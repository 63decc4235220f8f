//! Agent, EvalSuite, DeciderPolicy, Budget and bundle manifests: the
//! examples and the bundles under `tests/bundles/` parse, and each invalid
//! manifest under `tests/manifests/` fails with the error in its
//! `error.txt`.
//!
//! Each case is a folder read with `read_bundle_dir`; `error.txt` holds the
//! whole error, with file paths relative to the folder. To write the
//! `error.txt` files from what the code does now (then review the diff):
//! `HANE_BLESS=1 cargo test -p hane-core --test agent_manifest`.

use std::path::{Path, PathBuf};

use hane_core::Ledger;
use hane_manifest::OperationManifest;
use hane_manifest::{
    AgentManifest, Decider, Definition, Driver, EvalSuiteManifest, ManifestError, PolicyVerdict,
    Scope, read_bundle_dir,
    script::{Condition, ValuePath},
};
use serde_json::json;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn agent(name: &str) -> AgentManifest {
    let path = examples().join("agents").join(format!("{name}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap();
    AgentManifest::from_yaml(&path.display().to_string(), &text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_example_agents_parse() {
    let vehicle = agent("vehicle-check");
    assert_eq!(vehicle.metadata.name, "vehicle-check");
    assert_eq!(vehicle.spec.driver, Driver::Opencode);
    assert!(vehicle.spec.driver.is_available_in_this_build());
    assert_eq!(vehicle.spec.driver.check_available(), Ok(()));
    assert_eq!(
        vehicle.spec.tools,
        ["data.find_record", "request_human_help"]
    );
    assert!(vehicle.spec.allows("submit_result"));
    assert!(vehicle.spec.allows("data.find_record"));
    assert!(!vehicle.spec.allows("documents.search"));
    assert_eq!(vehicle.spec.limits.max_tool_calls, 4);
    assert_eq!(vehicle.spec.limits.max_seconds, 120);
    assert_eq!(vehicle.spec.limits.max_model_tokens, 50_000);
    assert_eq!(
        vehicle.spec.handover.as_ref().unwrap().assignment,
        "fleet-desk"
    );
    assert!(
        vehicle
            .spec
            .instructions
            .as_ref()
            .unwrap()
            .starts_with("Find the vehicle")
    );
    assert!(vehicle.spec.script.is_empty());
    assert_eq!(
        vehicle.spec.operation_for("data.find_record"),
        Some("data.find_record")
    );
    assert_eq!(vehicle.spec.operation_for("request_human_help"), None);

    let scripted = agent("vehicle-check-scripted");
    assert_eq!(scripted.spec.driver, Driver::Scripted);
    assert!(scripted.spec.driver.is_available_in_this_build());
    assert_eq!(scripted.spec.script.len(), 4);
    assert_eq!(scripted.spec.script[0].id.as_deref(), Some("find"));
    assert_eq!(
        scripted.spec.script[1].when,
        Some(Condition::Empty("steps.find.records".parse().unwrap()))
    );
    assert_eq!(scripted.spec.examples.len(), 2);

    let lease = agent("lease-qa");
    assert_eq!(lease.spec.script.len(), 5);
    assert_eq!(
        lease.spec.output["required"],
        json!(["status", "contract_no"])
    );
}

/// A release stores manifests as JSON, which the YAML parser reads back.
#[test]
fn the_example_agents_round_trip_through_json() {
    for name in ["vehicle-check", "vehicle-check-scripted", "lease-qa"] {
        let agent = agent(name);
        let json = serde_json::to_string(&agent).unwrap();
        assert_eq!(
            AgentManifest::from_yaml("a.json", &json).unwrap(),
            agent,
            "{name}"
        );
    }
}

#[test]
fn the_example_eval_suite_parses() {
    let path = examples().join("evals/lease-qa-eval.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let suite = EvalSuiteManifest::from_yaml("lease-qa-eval.yaml", &text).unwrap();
    assert_eq!(suite.metadata.name, "lease-qa-eval");
    assert_eq!(suite.spec.agent, "lease-qa");
    assert_eq!(suite.spec.pass_rate, 1.0);
    assert_eq!(suite.spec.cases.len(), 2);
    assert_eq!(
        suite.spec.cases[0].input,
        json!({ "contract_no": "C-9999" })
    );
    assert_eq!(suite.spec.cases[1].expect["lessee"], "Kita Logistics");
    let json = serde_json::to_string(&suite).unwrap();
    assert_eq!(
        EvalSuiteManifest::from_yaml("s.json", &json).unwrap(),
        suite
    );
}

/// The scripted example, run by hand against made-up tool outputs: the
/// templates and conditions give the result the script promises.
#[test]
fn the_scripted_example_renders_its_steps() {
    let spec = agent("vehicle-check-scripted").spec;
    let mut scope = Scope::new(json!({ "vehicle": "架空 300 あ 10-02" }));
    let find = &spec.script[0];
    assert_eq!(
        scope.render(&find.input).unwrap(),
        json!({ "collection": "vehicles", "match": { "registration": "架空 300 あ 10-02" } })
    );
    scope.record(
        find,
        json!({ "records": [{ "model": "Toyota Hiace", "inspection_expiry": "2026-03-31", "mileage_km": 48210 }] }),
    );
    assert!(!scope.holds(spec.script[1].when.as_ref().unwrap()));
    assert_eq!(
        scope.render(&spec.script[3].input).unwrap(),
        json!({
            "status": "found",
            "vehicle": "架空 300 あ 10-02",
            "model": "Toyota Hiace",
            "inspectionExpiry": "2026-03-31",
            "mileageKm": 48210,
        })
    );

    let mut scope = Scope::new(json!({ "vehicle": "none" }));
    scope.record(find, json!({ "records": [] }));
    assert!(scope.holds(spec.script[1].when.as_ref().unwrap()));
    assert_eq!(
        scope.render(&spec.script[1].input).unwrap(),
        json!({ "reason": "Vehicle none is not in the fleet ledger" })
    );
    let path: ValuePath = "steps.find.records.0.model".parse().unwrap();
    assert!(scope.get(&path).is_err());
}

#[test]
fn the_examples_folder_is_one_bundle() {
    let definitions = read_bundle_dir(&examples()).unwrap_or_else(|e| panic!("{e}"));
    let found: Vec<(&str, &str)> = definitions
        .iter()
        .map(|d| (d.definition.kind(), d.definition.name()))
        .collect();
    assert_eq!(
        found,
        [
            ("Agent", "driver-text"),
            ("Agent", "inspection-reminder"),
            ("Agent", "lease-qa"),
            ("Agent", "service-booker"),
            ("Agent", "sms-review"),
            ("Agent", "vehicle-check-llm"),
            ("Agent", "vehicle-check-scripted"),
            ("Agent", "vehicle-check"),
            ("Budget", "daily-budget"),
            ("EvalSuite", "lease-qa-eval"),
            ("Connection", "fleet-maintenance"),
            ("ToolExposure", "service-history"),
            ("ToolExposure", "book-service"),
            ("Ontology", "fleet"),
            ("DeciderPolicy", "fleet-outbound"),
            ("ModelProvider", "fleet-assistant"),
            ("Operation", "data.find_record"),
            ("Operation", "data.get_record"),
            ("Operation", "documents.read_pages"),
            ("Operation", "documents.read_summary"),
            ("Operation", "documents.search"),
            ("Operation", "ontology.knowledge"),
            ("Operation", "ontology.query"),
            ("Workflow", "lease-inquiry"),
        ]
    );
    let search = &definitions[definitions.len() - 4];
    assert_eq!(search.file, examples().join("tools/documents.search.yaml"));
    assert_eq!(search.line, 1);
    assert_eq!(search.folder(), examples().join("tools"));
    let Definition::Operation(operation) = &search.definition else {
        panic!("not an operation");
    };
    // Paths stay as written; the caller resolves them against the folder.
    let mut operation = operation.clone();
    assert_eq!(
        operation.spec.capabilities.files[0].host,
        Path::new("../documents")
    );
    operation.resolve_relative_to(search.folder());
    assert_eq!(
        operation.spec.capabilities.files[0].host,
        examples().join("tools/../documents")
    );

    // Every tool of every agent is served by the runtime, by an operation
    // here, or by one of the agent's tool exposures.
    for agent in definitions.iter().filter_map(|d| d.definition.as_agent()) {
        let exposed: Vec<&str> = definitions
            .iter()
            .filter_map(|d| d.definition.as_tool_exposure())
            .filter(|e| agent.spec.tool_exposures.contains(&e.metadata.name))
            .map(|e| e.spec.tool.as_str())
            .collect();
        for tool in &agent.spec.tools {
            if exposed.contains(&tool.as_str()) {
                continue;
            }
            if let Some(operation) = agent.spec.operation_for(tool) {
                assert!(
                    found.contains(&("Operation", operation)),
                    "{}: {tool}",
                    agent.metadata.name
                );
            }
        }
    }
}

#[test]
fn the_example_policy_and_budget_parse() {
    let definitions = read_bundle_dir(&examples()).unwrap_or_else(|e| panic!("{e}"));
    let find = |kind: &str| {
        definitions
            .iter()
            .find(|d| d.definition.kind() == kind)
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    let policy = find("DeciderPolicy");
    assert_eq!(policy.file, examples().join("policies/outbound.yaml"));
    let spec = &policy.definition.as_decider_policy().unwrap().spec;
    let reminder = json!({ "subject": "Inspection reminder: KT-12" });
    let email = "communication.send_email";
    assert_eq!(
        spec.decide(email, "desk@fleet.example", &reminder),
        Some((Some(0), &Decider::Policy(PolicyVerdict::Approve)))
    );
    assert_eq!(
        spec.decide("communication.send_sms", "+81 90 0000 0000", &json!({})),
        Some((Some(1), &Decider::Agent("sms-review".into())))
    );
    assert_eq!(
        spec.decide(email, "someone@else.example", &reminder),
        Some((None, &Decider::Person("fleet-desk".into())))
    );

    let budget = find("Budget").definition.as_budget().unwrap();
    assert_eq!(budget.metadata.name, "daily-budget");
    assert_eq!(budget.spec.agent_runs_per_day, Some(200));
    assert_eq!(budget.spec.external_actions_per_day, Some(50));
    assert_eq!(budget.spec.model_tokens_per_day, Some(200_000));
    assert_eq!(budget.spec.alert_at_percent, 80);
}

fn bundles() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bundles")
}

#[test]
fn a_bundle_with_deciders_and_budgets_parses() {
    let dir = bundles().join("outbound");
    let definitions = read_bundle_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    let found: Vec<(&str, &str, usize)> = definitions
        .iter()
        .map(|d| (d.definition.kind(), d.definition.name(), d.line))
        .collect();
    assert_eq!(
        found,
        [
            ("Agent", "reminder", 1),
            ("Agent", "sms-review", 34),
            ("Budget", "daily-budget", 1),
            ("Budget", "staging-budget", 9),
            ("DeciderPolicy", "fleet-outbound", 1),
            ("ModelProvider", "reviewer", 1),
        ]
    );
    let get = |name: &str| {
        &definitions
            .iter()
            .find(|d| d.definition.name() == name)
            .unwrap()
            .definition
    };

    let reminder = get("reminder").as_agent().unwrap();
    let approval = reminder.spec.approval.as_ref().unwrap();
    assert_eq!(approval.decider.as_deref(), Some("fleet-outbound"));
    assert_eq!(approval.assignment.as_deref(), Some("approvers"));
    // Outbound tools are served by the runtime, like the control tools.
    for tool in hane_core::tool::OUTBOUND_TOOLS {
        assert_eq!(reminder.spec.operation_for(tool), None, "{tool}");
    }
    assert_eq!(reminder.spec.script[1].tool, "communication.send_sms");
    let review = get("sms-review").as_agent().unwrap();
    assert!(review.spec.allows(hane_core::tool::SUBMIT_REVIEW));
    assert_eq!(
        review.spec.operation_for(hane_core::tool::SUBMIT_REVIEW),
        None
    );

    let policy = get("fleet-outbound").as_decider_policy().unwrap();
    assert!(get("fleet-outbound").as_agent().is_none());
    let rules = &policy.spec.rules;
    assert_eq!(rules.len(), 3);
    assert_eq!(rules[0].name.as_deref(), Some("reminders"));
    assert_eq!(rules[0].tools, ["communication.send_email"]);
    assert_eq!(rules[0].recipient.as_deref(), Some("*@fleet.example"));
    assert_eq!(rules[0].content["subject"], "Inspection reminder*");
    assert_eq!(rules[0].decider, Decider::Policy(PolicyVerdict::Approve));
    assert_eq!(rules[1].name, None);
    assert_eq!(rules[1].recipient, None);
    assert!(rules[1].content.is_empty());
    assert_eq!(rules[1].decider, Decider::Agent("sms-review".into()));
    assert_eq!(rules[2].tools, ["*"]);
    assert_eq!(rules[2].decider, Decider::Policy(PolicyVerdict::Reject));
    assert_eq!(
        policy.spec.default,
        Some(Decider::Person("fleet-desk".into()))
    );
    // The first matching rule decides: rule 2 would reject this call, but
    // rule 1 matches it first.
    assert_eq!(
        policy
            .spec
            .decide("communication.place_call", "x@blocked.example", &json!({})),
        Some((Some(1), &Decider::Agent("sms-review".into())))
    );
    assert_eq!(
        policy
            .spec
            .decide("integration.execute", "x@blocked.example", &json!({})),
        Some((Some(2), &Decider::Policy(PolicyVerdict::Reject)))
    );

    let daily = get("daily-budget").as_budget().unwrap();
    assert_eq!(
        (daily.spec.project.as_str(), daily.spec.environment.as_str()),
        ("default", "default")
    );
    assert_eq!(daily.spec.agent_runs_per_day, Some(200));
    assert_eq!(daily.spec.external_actions_per_day, Some(50));
    assert_eq!(daily.spec.model_tokens_per_day, Some(200_000));
    assert_eq!(daily.spec.alert_at_percent, 80);
    let staging = get("staging-budget").as_budget().unwrap();
    assert_eq!(
        (
            staging.spec.project.as_str(),
            staging.spec.environment.as_str()
        ),
        ("fleet", "staging")
    );
    assert_eq!(staging.spec.agent_runs_per_day, None);
    assert_eq!(staging.spec.external_actions_per_day, None);
    assert_eq!(staging.spec.model_tokens_per_day, Some(10_000));
    assert_eq!(staging.spec.alert_at_percent, 50);

    // A release stores manifests as JSON, which the YAML parser reads back.
    let json = serde_json::to_string(policy).unwrap();
    assert_eq!(
        hane_manifest::DeciderPolicyManifest::from_yaml("p.json", &json).unwrap(),
        *policy
    );
    let json = serde_json::to_string(daily).unwrap();
    assert_eq!(
        hane_manifest::BudgetManifest::from_yaml("b.json", &json).unwrap(),
        *daily
    );
}

#[test]
fn a_missing_bundle_folder_is_an_error() {
    let err = read_bundle_dir(Path::new("/nonexistent/hane-bundle")).unwrap_err();
    assert_eq!(err.errors.len(), 1);
    assert!(
        err.to_string()
            .starts_with("/nonexistent/hane-bundle: cannot read folder: "),
        "{err}"
    );
}

#[test]
fn agent_defaults_apply_when_absent() {
    let text = std::fs::read_to_string(cases().join("zero_max_tool_calls/manifest.yaml")).unwrap();
    let text = text.replace(
        "  limits:\n    maxToolCalls: 0\n    maxSeconds: 120\n",
        "  limits:\n    maxSeconds: 120\n",
    );
    let agent = AgentManifest::from_yaml("a.yaml", &text).unwrap();
    assert_eq!(agent.spec.limits.max_tool_calls, 20);
    assert_eq!(agent.spec.limits.max_seconds, 120);
    assert!(!agent.spec.shadow);
    assert!(agent.spec.connections.is_empty());

    let text = text.replace("  limits:\n    maxSeconds: 120\n", "  shadow: true\n");
    let agent = AgentManifest::from_yaml("a.yaml", &text).unwrap();
    assert_eq!(agent.spec.limits, Default::default());
    assert_eq!(agent.spec.limits.max_seconds, 300);
    assert!(agent.spec.shadow);

    // What is read can be written back and read again.
    let yaml = serde_yaml_ng::to_string(&agent).unwrap();
    assert_eq!(AgentManifest::from_yaml("b.yaml", &yaml).unwrap(), agent);
}

#[test]
fn every_optional_agent_field_parses() {
    let text = std::fs::read_to_string(cases().join("zero_max_tool_calls/manifest.yaml")).unwrap();
    let text = text
        .replace(
            "maxToolCalls: 0",
            "maxToolCalls: 9\n    maxModelTokens: 1000",
        )
        .replace("driver: scripted", "driver: claude")
        .replace("  script:", "  unused:")
        + "  instructions: Look it up.
  approval:
    decider: careful-deciders
    assignment: fleet-leads
  workflows: [vehicle-recall]
  connections: [fleet-api]
  toolExposures: [fleet-lookup]
  cliProfile:
    cliVersion: 2.1.0
    image: sha256:4f0e4c6b0c5e2a1d8f3b7a9e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c
  shadow: true
";
    // Drop the script, which only the scripted driver takes.
    let start = text.find("  unused:").unwrap();
    let end = text.find("  tools:").unwrap();
    let text = format!("{}{}", &text[..start], &text[end..]).replace(
        "tools: [data.find_record, request_human_help]",
        "tools: [data.find_record, request_human_help, fleet.lookup]",
    );
    let agent = AgentManifest::from_yaml("a.yaml", &text).unwrap_or_else(|e| panic!("{e}"));
    let spec = &agent.spec;
    assert_eq!(spec.driver, Driver::Claude);
    assert_eq!(spec.limits.max_tool_calls, 9);
    assert_eq!(spec.limits.max_model_tokens, 1000);
    let approval = spec.approval.as_ref().unwrap();
    assert_eq!(approval.decider.as_deref(), Some("careful-deciders"));
    assert_eq!(spec.workflows, ["vehicle-recall"]);
    assert_eq!(spec.connections, ["fleet-api"]);
    assert_eq!(spec.tool_exposures, ["fleet-lookup"]);
    assert_eq!(spec.cli_profile.as_ref().unwrap().cli_version, "2.1.0");
    assert_eq!(
        spec.cli_profile.as_ref().unwrap().image,
        "sha256:4f0e4c6b0c5e2a1d8f3b7a9e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c"
    );

    // An image is named by its digest only: a name, a tag, upper case or
    // a short digest is refused, naming the field.
    let digest = "sha256:4f0e4c6b0c5e2a1d8f3b7a9e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c";
    for bad in [
        "codex-baseline",
        "registry.example.com/claude:2.1.0",
        "sha256:4F0E4C6B0C5E2A1D8F3B7A9E6D5C4B3A2F1E0D9C8B7A6F5E4D3C2B1A0F9E8D7C",
        "sha256:4f0e4c6b",
        "sha512:4f0e4c6b0c5e2a1d8f3b7a9e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c",
    ] {
        let err = AgentManifest::from_yaml("a.yaml", &text.replace(digest, bad)).unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.contains("spec.cliProfile.image")
                && shown.contains(&format!("`{bad}` is not an image digest"))
                && shown.contains("hane image build"),
            "{shown}"
        );
    }
    assert!(spec.shadow);
    // Every driver is in this build; whether a host can run a CLI driver
    // is decided at run start.
    assert!(spec.driver.check_available().is_ok());
    assert!(Driver::Llm.check_available().is_ok());
    assert_eq!(
        Driver::ALL.map(Driver::as_str),
        ["scripted", "llm", "opencode", "codex", "claude"]
    );
}

#[test]
fn an_error_displays_file_line_field_and_message() {
    let text = std::fs::read_to_string(cases().join("zero_max_tool_calls/manifest.yaml")).unwrap();
    let err: ManifestError = AgentManifest::from_yaml("agent.yaml", &text).unwrap_err();
    assert_eq!(err.file, "agent.yaml");
    assert_eq!(err.field, "spec.limits.maxToolCalls");
    assert_eq!(err.line, Some(34));
    assert_eq!(
        err.to_string(),
        "agent.yaml:34: spec.limits.maxToolCalls: must be at least 1"
    );
}

#[test]
fn an_eval_suite_has_one_to_fifty_cases() {
    let head = "apiVersion: agents/v1alpha1\nkind: EvalSuite\nmetadata:\n  name: s\nspec:\n  agent: a\n  cases:\n";
    let case = |i: usize| {
        format!("    - name: case {i}\n      input: {{}}\n      expect: {{ status: ok }}\n")
    };
    let fifty: String = (0..50).map(case).collect();
    let suite = EvalSuiteManifest::from_yaml("s.yaml", &format!("{head}{fifty}")).unwrap();
    assert_eq!(suite.spec.cases.len(), 50);
    assert_eq!(suite.spec.pass_rate, 1.0);

    let err =
        EvalSuiteManifest::from_yaml("s.yaml", &format!("{head}{fifty}{}", case(50))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "s.yaml:7: spec.cases: expected 1 to 50 cases, found 51"
    );
    let err = EvalSuiteManifest::from_yaml("s.yaml", &format!("{head}    []\n")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "s.yaml:7: spec.cases: expected 1 to 50 cases, found 0"
    );
}

fn cases() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/manifests")
}

/// Every folder under `tests/manifests/` is a bundle that fails with the
/// error in its `error.txt`.
#[test]
fn each_invalid_bundle_fails_with_its_error() {
    let bless = std::env::var_os("HANE_BLESS").is_some();
    let mut folders: Vec<PathBuf> = std::fs::read_dir(cases())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    assert!(folders.len() >= 20, "cases are missing");
    let mut failures = Vec::new();
    for folder in &folders {
        let name = folder.file_name().unwrap().to_string_lossy();
        let actual = match read_bundle_dir(folder) {
            Ok(definitions) => format!("ok: {} definitions", definitions.len()),
            Err(e) => e.to_string().replace(&format!("{}/", folder.display()), ""),
        };
        let expected_file = folder.join("error.txt");
        if bless {
            std::fs::write(&expected_file, format!("{actual}\n")).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_file)
            .unwrap_or_else(|e| panic!("{}: {e}", expected_file.display()));
        if expected.trim_end() != actual {
            failures.push(format!(
                "{name}:\n  expected: {}\n  actual:   {actual}",
                expected.trim_end()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_example_tool_manifests_grant_ledger_names() {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tools");
    let find = OperationManifest::from_file(&tools.join("data.find_record.yaml")).unwrap();
    assert_eq!(
        find.spec.capabilities.records,
        ["vehicles", "leases", "drivers"]
    );
    let summary = OperationManifest::from_file(&tools.join("documents.read_summary.yaml")).unwrap();
    assert_eq!(summary.spec.capabilities.documents, ["leases"]);
    let ledger = Ledger::load_dir(&tools.join("../ledger")).unwrap();
    for name in &find.spec.capabilities.records {
        assert!(ledger.collections.contains_key(name), "{name}");
    }
}
