//! Reception end to end, on a recorded provider: free text starts the
//! agent it is for with a valid input, a dry run starts nothing, an input
//! the model could not make valid and a request nothing fits are declined
//! with what is missing, every answer is stored, and the choice's tokens
//! count against the day's budget. Then the same against the real local
//! model (structure only), and the lexical shortlist over the labelled
//! requests of `tests/reception/labelled.json`.

use std::path::{Path, PathBuf};

use hane_coordinator::reception::{ReceptionError, ReceptionRequest};
use hane_coordinator::{AgentRuntime, ModelConfig};
use hane_core::{ReceptionStatus, RunStatus, credential::Secret};
use hane_model::{Content, ModelResponse, StopReason, Usage};
use hane_test_support::LlamaServer;
use serde_json::{Value, json};

use crate::agents::release_with;
use crate::harness;
use crate::model::{recorded_provider, runtime_with};

const FOUND: &str = "架空 300 あ 10-02";

/// The example agents reception chooses among, and a review agent it must
/// never offer.
fn example_agents() -> Vec<(&'static str, String)> {
    ["lease-qa.yaml", "vehicle-check-scripted.yaml"]
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(harness::examples().join("agents").join(file));
            (file, text.unwrap())
        })
        .chain([("review.yaml", REVIEW_AGENT.to_owned())])
        .collect()
}

/// A review agent whose purpose shares words with the requests below.
const REVIEW_AGENT: &str = "apiVersion: agents/v1alpha1
kind: Agent
metadata:
  name: lease-review
spec:
  purpose: Review a proposed lease contract message about a vehicle inspection
  input:
    type: object
    required: [action]
    properties:
      action: { type: object }
  driver: scripted
  script:
    - tool: submit_review
      input: { decision: escalate, reason: always }
  tools: [submit_review]
  output:
    type: object
    required: [status]
    properties:
      status: { type: string }
";

/// The model choosing `tool` with `arguments`.
fn chooses(tool: &str, arguments: Value) -> ModelResponse {
    ModelResponse {
        content: vec![Content::ToolCall {
            id: "call_1".to_owned(),
            name: tool.to_owned(),
            input: arguments,
        }],
        stop_reason: StopReason::ToolUse,
        usage: Usage {
            input_tokens: 300,
            output_tokens: 20,
            cached_tokens: 0,
        },
        model: "fleet-assistant".to_owned(),
        request_id: None,
    }
}

/// A release of the example agents whose default model is a recorded
/// provider answering each `(text, answer)`: the requests are reception's
/// own for the text (from a first activation with no answers), so the
/// recording pins what reception asks.
async fn answering(dir: &Path, answers: Vec<(&str, ModelResponse)>) -> (AgentRuntime, PathBuf) {
    let agents = example_agents();
    let files: Vec<(&str, &str)> = agents.iter().map(|(f, t)| (*f, t.as_str())).collect();
    let release = release_with(dir, &files);
    recorded_provider(&release, "desk", Vec::new());
    let runtime = runtime_with(dir, ModelConfig::new());
    let services = hane_coordinator::Services::new(runtime.clone());
    runtime.activate(&release).await.unwrap();
    let mut turns = Vec::new();
    for (text, response) in answers {
        let request = services
            .reception
            .model_request(text, None)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("nothing shortlisted for {text:?}"));
        turns.push(hane_model::Turn {
            request: hane_model::pin(&request),
            response,
        });
    }
    recorded_provider(&release, "desk", turns);
    runtime.activate(&release).await.unwrap();
    (runtime, release)
}

/// Reception's answer to `text`, with no agent named.
async fn ask(runtime: &AgentRuntime, text: &str, dry_run: bool) -> hane_core::Reception {
    let services = hane_coordinator::Services::new(runtime.clone());
    services
        .reception
        .receive(ReceptionRequest {
            text: text.to_owned(),
            dry_run,
            agent: None,
        })
        .await
        .unwrap()
}

async fn tokens_used_today(runtime: &AgentRuntime) -> u64 {
    let report = serde_json::to_value(
        hane_coordinator::Budgets::new(runtime)
            .report()
            .await
            .unwrap(),
    )
    .unwrap();
    report["usage"]["modelTokensUsed"].as_u64().unwrap()
}

#[tokio::test]
async fn a_request_starts_the_agent_it_is_for_with_a_valid_input() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("When does the inspection of {FOUND} expire?");
    let (runtime, _) = answering(
        dir.path(),
        vec![(
            &text,
            chooses(
                "start_vehicle-check-scripted",
                json!({"input": {"vehicle": FOUND}, "reason": "an inspection expiry in the fleet ledger"}),
            ),
        )],
    )
    .await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let before = tokens_used_today(&runtime).await;
    let reception = ask(&runtime, &format!("  {text}\n"), false).await;
    assert_eq!(reception.status, ReceptionStatus::Started, "{reception:#?}");
    assert_eq!(reception.text, text);
    assert_eq!(reception.agent.as_deref(), Some("vehicle-check-scripted"));
    assert_eq!(
        reception.input.as_ref().unwrap().to_value().unwrap(),
        json!({"vehicle": FOUND})
    );
    assert_eq!(
        reception.reasons,
        "an inspection expiry in the fleet ledger"
    );
    assert_eq!(reception.shortlist[0].agent, "vehicle-check-scripted");
    // The review agent shares words with the request but is never offered.
    assert!(
        reception
            .shortlist
            .iter()
            .all(|c| c.agent != "lease-review"),
        "{reception:#?}"
    );
    let call = reception.model_call.as_ref().unwrap();
    assert_eq!((call.input_tokens, call.output_tokens), (300, 20));
    assert!(call.request_digest.starts_with("sha256:"));
    // The run is an ordinary run, which finds the vehicle.
    let run = runtime.wait(reception.run.as_ref().unwrap()).await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
    assert_eq!(run.agent, "vehicle-check-scripted");
    let result = run.result.unwrap().to_value().unwrap();
    assert_eq!(result["status"], "found", "{result}");
    // Its tokens count against the day, and the answer is stored.
    assert_eq!(tokens_used_today(&runtime).await, before + 320);
    assert_eq!(
        services.reception.get(reception.id.as_str()).await.unwrap(),
        reception
    );
    assert_eq!(services.reception.list(0).await.unwrap().items, [reception]);
}

#[tokio::test]
async fn a_dry_run_answers_what_would_start_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let text = "What does lease contract C-1001 say?";
    let (runtime, _) = answering(
        dir.path(),
        vec![(
            text,
            chooses(
                "start_lease-qa",
                json!({"input": {"contract_no": "C-1001"}, "reason": "a lease contract's summary"}),
            ),
        )],
    )
    .await;
    let reception = ask(&runtime, text, true).await;
    assert_eq!(
        reception.status,
        ReceptionStatus::WouldStart,
        "{reception:#?}"
    );
    assert_eq!(reception.agent.as_deref(), Some("lease-qa"));
    assert_eq!(reception.run, None);
    assert!(reception.dry_run);
    let runs = runtime
        .list(hane_store::RunQuery::default())
        .await
        .unwrap()
        .items;
    assert!(runs.is_empty(), "{runs:#?}");
}

#[tokio::test]
async fn an_input_the_model_could_not_make_valid_is_declined_with_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let vague = "What does my lease contract say about returning the car?";
    let declined = "Summarize the lease documents";
    let (runtime, _) = answering(
        dir.path(),
        vec![
            (
                vague,
                chooses(
                    "start_lease-qa",
                    json!({"input": {"contract_no": "my lease"}, "reason": "a lease contract"}),
                ),
            ),
            (
                declined,
                chooses(
                    "decline",
                    json!({"reason": "no contract is named", "missing": ["the contract number, such as C-1001"]}),
                ),
            ),
        ],
    )
    .await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let reception = ask(&runtime, vague, false).await;
    assert_eq!(
        reception.status,
        ReceptionStatus::Declined,
        "{reception:#?}"
    );
    assert_eq!(reception.agent.as_deref(), Some("lease-qa"));
    assert_eq!(reception.run, None);
    assert_eq!(reception.missing.len(), 1, "{reception:#?}");
    assert!(
        reception.missing[0].starts_with("input /contract_no:"),
        "{reception:#?}"
    );
    assert!(reception.reasons.contains("not valid"), "{reception:#?}");

    let reception = ask(&runtime, declined, false).await;
    assert_eq!(
        reception.status,
        ReceptionStatus::Declined,
        "{reception:#?}"
    );
    assert_eq!(reception.agent, None);
    assert_eq!(reception.reasons, "no contract is named");
    assert_eq!(reception.missing, ["the contract number, such as C-1001"]);
    assert!(reception.alternatives.contains(&"lease-qa".to_owned()));
    // Nothing started for either.
    assert!(
        runtime
            .list(hane_store::RunQuery::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(services.reception.list(0).await.unwrap().items.len(), 2);
}

#[tokio::test]
async fn a_request_nothing_fits_is_declined_without_asking_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _) = answering(dir.path(), Vec::new()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let before = tokens_used_today(&runtime).await;
    let reception = ask(&runtime, "Bake me a chocolate cake", false).await;
    assert_eq!(reception.status, ReceptionStatus::Declined);
    assert!(reception.shortlist.is_empty());
    assert_eq!(reception.model_call, None);
    assert_eq!(reception.missing.len(), 1);
    // What is missing names what the agents do.
    assert!(
        reception.missing[0].contains("lease-qa (Summarize a vehicle lease contract"),
        "{reception:#?}"
    );
    assert_eq!(tokens_used_today(&runtime).await, before);
    // A request with no words at all is refused as such, and not stored.
    let err = services
        .reception
        .receive(ReceptionRequest {
            text: " \n ".to_owned(),
            dry_run: false,
            agent: None,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ReceptionError::Invalid { path, .. } if path == "/text"),
        "{err:?}"
    );
    assert_eq!(services.reception.list(0).await.unwrap().items.len(), 1);
    let err = services
        .reception
        .get("req_00000000000000000000000000")
        .await;
    assert!(matches!(err, Err(ReceptionError::NotFound(_))), "{err:?}");
}

#[tokio::test]
async fn a_model_answer_that_leaves_the_recording_fails_and_gives_back_its_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _) = answering(dir.path(), Vec::new()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let before = serde_json::to_value(
        hane_coordinator::Budgets::new(&runtime)
            .report()
            .await
            .unwrap(),
    )
    .unwrap();
    let err = services
        .reception
        .receive(ReceptionRequest {
            text: "What is the mileage of this vehicle?".to_owned(),
            dry_run: false,
            agent: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ReceptionError::Model { .. }), "{err:?}");
    let after = serde_json::to_value(
        hane_coordinator::Budgets::new(&runtime)
            .report()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(before["usage"], after["usage"]);
}

/// Reception on the real llama.cpp server: whatever the tiny model
/// chooses, the answer is one of the valid outcomes, consistent with
/// itself, stored, and its tokens are counted.
#[tokio::test]
async fn reception_on_the_local_model_ends_in_a_valid_answer() {
    let dir = tempfile::tempdir().unwrap();
    let server = LlamaServer::shared();
    let agents = example_agents();
    let files: Vec<(&str, &str)> = agents.iter().map(|(f, t)| (*f, t.as_str())).collect();
    let release = release_with(dir.path(), &files);
    std::fs::write(
        release.join("provider.yaml"),
        format!(
            "apiVersion: platform/v1alpha1\nkind: ModelProvider\nmetadata:\n  name: llama\nspec:\n  api: chat-completions\n  baseUrl: {}/v1\n  credential: llama\n  temperature: 0\n  models:\n    - {{ name: {}, contextWindow: 4096, maxOutputTokens: 96 }}\n",
            server.base_url(),
            server.model()
        ),
    )
    .unwrap();
    let mut model = ModelConfig::new();
    model.credential("llama", Secret::new(server.api_key()));
    let runtime = runtime_with(dir.path(), model);
    let services = hane_coordinator::Services::new(runtime.clone());
    runtime.activate(&release).await.unwrap();
    let before = tokens_used_today(&runtime).await;
    let reception = ask(
        &runtime,
        &format!("When does the inspection of {FOUND} expire?"),
        false,
    )
    .await;
    eprintln!(
        "local model: {} {:?} {:?} {:?} {:?}",
        reception.status, reception.agent, reception.input, reception.missing, reception.reasons
    );
    let call = reception.model_call.as_ref().unwrap();
    assert!(call.input_tokens > 0 && call.output_tokens > 0, "{call:?}");
    assert_eq!(
        tokens_used_today(&runtime).await,
        before + call.input_tokens + call.output_tokens
    );
    match reception.status {
        ReceptionStatus::Started => {
            let agent = reception.agent.as_deref().unwrap();
            let input = reception.input.as_ref().unwrap().to_value().unwrap();
            let release = runtime.release().await.unwrap();
            assert!(release.agents[agent].input.check(&input).is_ok());
            let run = runtime.wait(reception.run.as_ref().unwrap()).await.unwrap();
            assert_eq!(run.agent, agent);
            assert!(run.status.is_final(), "{run:#?}");
        }
        ReceptionStatus::Declined => {
            assert_eq!(reception.run, None);
            assert!(!reception.reasons.is_empty(), "{reception:#?}");
        }
        other => panic!("{other} for a request that is not a dry run: {reception:#?}"),
    }
    assert_eq!(
        services.reception.get(reception.id.as_str()).await.unwrap(),
        reception
    );
}

/// One labelled request.
#[derive(Debug, serde::Deserialize)]
struct Labelled {
    text: String,
    /// The agents that answer it; empty when none does.
    agents: Vec<String>,
}

/// Every request of the labelled set that an example agent answers has
/// one of its agents on the shortlist the model chooses from, and one
/// that no agent answers shortlists nothing.
#[tokio::test]
async fn the_shortlist_holds_the_right_agent_for_every_labelled_request() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = crate::agents::activated(dir.path()).await;
    let services = hane_coordinator::Services::new(runtime.clone());
    let set: Vec<Labelled> = serde_json::from_str(
        &std::fs::read_to_string(
            hane_test_support::repository().join("tests/reception/labelled.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(set.len() >= 40, "{} requests", set.len());
    let mut wrong = Vec::new();
    for labelled in &set {
        let request = services
            .reception
            .model_request(&labelled.text, None)
            .await
            .unwrap();
        let offered: Vec<String> = request
            .map(|r| {
                r.tools
                    .iter()
                    .filter_map(|t| t.name.strip_prefix("start_").map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let fits = if labelled.agents.is_empty() {
            offered.is_empty()
        } else {
            labelled.agents.iter().any(|a| offered.contains(a))
        };
        if !fits {
            wrong.push(format!("{:?}: offered {offered:?}", labelled.text));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
