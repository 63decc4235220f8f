//! Reception's accuracy on the labelled requests of
//! `tests/reception/labelled.json` (44 requests over the example agents,
//! in English and Japanese, six that no agent answers), with the real
//! local model (llama.cpp's server running SmolLM2-135M-Instruct, as the
//! tests provision it) choosing among the lexical shortlist.
//!
//! Reported, side by side: how often the BM25 shortlist's first agent is
//! right (the lexical stage alone), how often reception's choice is right
//! (an agent the label allows, or a decline for a request nothing
//! answers), how often a chosen agent's input is valid against its
//! schema, and how often it is the labelled input exactly. Each request is
//! a dry run: nothing starts.
//!
//! `cargo bench -p hane-benches --bench reception` (after `cargo xtask
//! provision`).

use std::path::Path;

use hane_coordinator::reception::ReceptionRequest;
use hane_coordinator::{AgentRuntime, ModelConfig, RuntimeConfig};
use hane_core::{ReceptionStatus, credential::Secret};
use hane_sandbox::SandboxConfig;
use hane_test_support::LlamaServer;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Labelled {
    text: String,
    agents: Vec<String>,
    input: Option<Value>,
}

/// The examples as a release whose default model is the local server
/// instead of their recorded provider.
fn release(dir: &Path, server: &LlamaServer) -> std::path::PathBuf {
    let examples = hane_test_support::repository().join("examples");
    let release = dir.join("release");
    copy(&examples, &release);
    std::fs::remove_dir_all(release.join("providers")).unwrap();
    std::fs::remove_dir_all(release.join("recordings")).unwrap();
    std::fs::write(
        release.join("llama.yaml"),
        format!(
            "apiVersion: platform/v1alpha1\nkind: ModelProvider\nmetadata:\n  name: llama\nspec:\n  api: chat-completions\n  baseUrl: {}/v1\n  credential: llama\n  temperature: 0\n  default: true\n  models:\n    - {{ name: {}, contextWindow: 4096, maxOutputTokens: 128 }}\n",
            server.base_url(),
            server.model()
        ),
    )
    .unwrap();
    release
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn percent(n: usize, of: usize) -> String {
    if of == 0 {
        return "-".to_owned();
    }
    format!("{n}/{of} ({:.0}%)", 100.0 * n as f64 / of as f64)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter naming another benchmark
    // skips this one.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"reception".contains(a.as_str()))
    {
        return;
    }
    let set: Vec<Labelled> = serde_json::from_str(
        &std::fs::read_to_string(
            hane_test_support::repository().join("tests/reception/labelled.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let server = LlamaServer::shared();
    let dir = tempfile::tempdir().unwrap();
    let release = release(dir.path(), server);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut config = RuntimeConfig::new();
        config.sandbox(
            SandboxConfig::new()
                .cache_dir(Some(hane_test_support::component_cache()))
                .max_instances(16)
                .clone(),
        );
        config.components(hane_manager::Components::with_builtins(hane_builtins::all()));
        let mut model = ModelConfig::new();
        model.credential("llama", Secret::new(server.api_key()));
        config.model(model);
        let hane = AgentRuntime::open(&dir.path().join("hane.db"), &config).unwrap();
        hane.activate(&release).await.unwrap();
        let desk = hane_coordinator::ReceptionDesk::new(&hane);
        let (mut lexical, mut chosen, mut picked, mut valid, mut exact, mut labelled_inputs) =
            (0, 0, 0, 0, 0, 0);
        let mut latency = Vec::new();
        for request in &set {
            let reception = desk
                .receive(ReceptionRequest {
                    text: request.text.clone(),
                    dry_run: true,
                    agent: None,
                })
                .await
                .unwrap();
            let first = reception.shortlist.first().map(|c| c.agent.as_str());
            let declined = reception.status == ReceptionStatus::Declined;
            let agent = reception.agent.as_deref().filter(|_| !declined);
            let lexical_right = match first {
                None => request.agents.is_empty(),
                Some(a) => request.agents.iter().any(|l| l == a),
            };
            let right = match agent {
                None => request.agents.is_empty(),
                Some(a) => request.agents.iter().any(|l| l == a),
            };
            lexical += usize::from(lexical_right);
            chosen += usize::from(right);
            if reception.agent.is_some() {
                picked += 1;
                valid += usize::from(reception.status == ReceptionStatus::WouldStart);
            }
            let input = reception.input.as_ref().and_then(|i| i.to_value().ok());
            if let Some(expected) = &request.input {
                labelled_inputs += 1;
                exact += usize::from(right && input.as_ref() == Some(expected));
            }
            if let Some(call) = &reception.model_call {
                latency.push(call.latency_ms);
            }
            println!(
                "{:<4} {:<11} {:<24} {:<60} {}",
                if right { "ok" } else { "MISS" },
                reception.status.as_str(),
                reception.agent.as_deref().unwrap_or("-"),
                request.text.chars().take(60).collect::<String>(),
                input.map(|i| i.to_string()).unwrap_or_default()
            );
        }
        latency.sort_unstable();
        let p50 = latency.get(latency.len() / 2).copied().unwrap_or_default();
        println!();
        println!("| measure | result |");
        println!("|---|---|");
        println!(
            "| BM25 shortlist's first agent right (lexical stage alone) | {} |",
            percent(lexical, set.len())
        );
        println!(
            "| reception's choice right (agent, or decline when none fits) | {} |",
            percent(chosen, set.len())
        );
        println!(
            "| a chosen agent's input valid against its schema | {} |",
            percent(valid, picked)
        );
        println!(
            "| input exactly as labelled (of the labelled inputs) | {} |",
            percent(exact, labelled_inputs)
        );
        println!("| model call p50 | {p50} ms over {} calls |", latency.len());
    });
}
