//! A host process for the crash tests: it runs a plan of inputs through a
//! real coordinator, store, operation manager and sandbox, printing each
//! step, so that a test can kill it (`kill -9`) at any point and start it
//! again on the same store.
//!
//! Usage: `crash-host PLAN.json`. On start it recovers, acts on inputs that
//! were accepted and never handled, then delivers every input of the plan
//! three times (redelivery) and handles the ones accepted.
//!
//! With `CRASH_HOST_HOLD=PREFIX` in its environment the host stops for good
//! once it has printed a line starting with PREFIX, so a kill sent after
//! that line lands exactly there, however slowly the test reads.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use hane_coordinator::{Coordinator, CoordinatorConfig, coordinator::Received};
use hane_core::{
    Impact, Input, InputKind, JsonText, Limits, Operation, Policy, SessionEvent, SessionId,
    ToolCall, ToolCallId, ToolCallStatus, WasmCall,
};
use hane_manager::{Components, LocalConfig, LocalOperationManager};
use hane_sandbox::{Sandbox, SandboxConfig};
use hane_store::{SessionStore, SqliteConfig, SqliteStore};
use serde::Deserialize;

#[derive(Deserialize)]
struct Plan {
    store: PathBuf,
    /// Holds the session id between runs.
    session_file: PathBuf,
    cache_dir: PathBuf,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct Step {
    input: String,
    impact: Impact,
    component: PathBuf,
    tool: String,
    tool_input: serde_json::Value,
    policy: Policy,
    limits: Limits,
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // The test reads these lines to choose when to kill; they must not sit
    // in a buffer.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    drop(out);
    if std::env::var("CRASH_HOST_HOLD").is_ok_and(|prefix| line.starts_with(&prefix)) {
        // Blocks this thread; the test kills the process.
        loop {
            std::thread::park();
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let path = std::env::args()
        .nth(1)
        .context("usage: crash-host PLAN.json")?;
    let plan: Plan = serde_json::from_slice(&std::fs::read(&path)?)?;

    let store = SqliteStore::open(&plan.store, &SqliteConfig::new())?;
    let mut config = SandboxConfig::new();
    config
        .cache_dir(Some(plan.cache_dir.clone()))
        .max_instances(16);
    let sandbox = Sandbox::new(&config)?;
    let components = Components::new();
    let mut digests = Vec::new();
    for step in &plan.steps {
        let bytes = std::fs::read(&step.component)
            .with_context(|| format!("reading {}", step.component.display()))?;
        digests.push(components.insert(bytes));
    }
    let manager = LocalOperationManager::new(sandbox, components, &LocalConfig::new());
    let coordinator = Coordinator::new(
        Arc::new(store.clone()),
        Arc::new(manager),
        &CoordinatorConfig::new(),
    );

    let recovery = coordinator.recover().await?;
    say(&format!(
        "recovered resumed={} rerun={} unknown={}",
        recovery.resumed.len(),
        recovery.rerun.len(),
        recovery.unknown.len()
    ));
    for dispatched in recovery.resumed.into_iter().chain(recovery.rerun) {
        let settled = dispatched.settled().await?;
        say(&format!("settled {} {}", settled.id, settled.state));
    }

    let session: SessionId = match std::fs::read_to_string(&plan.session_file) {
        Ok(text) => text.trim().parse()?,
        Err(_) => {
            let session = store.create_session().await?.id;
            let tmp = plan.session_file.with_extension("tmp");
            std::fs::write(&tmp, session.as_str())?;
            std::fs::rename(&tmp, &plan.session_file)?;
            session
        }
    };

    for input in coordinator.unhandled_inputs(&session).await? {
        say(&format!("unhandled {}", input.id));
        let index = plan
            .steps
            .iter()
            .position(|step| step.input == input.id.as_str())
            .context("an unhandled input that is not in the plan")?;
        handle(&coordinator, &session, &plan.steps[index], &digests[index]).await?;
    }

    for (step, digest) in plan.steps.iter().zip(&digests) {
        let mut accepted = false;
        for _ in 0..3 {
            let input = Input {
                id: step.input.parse()?,
                kind: InputKind::External {
                    payload: JsonText::from_value(&step.tool_input),
                },
            };
            let delivery = coordinator.deliver(&session, input).await?;
            let word = match delivery {
                Received::Accepted { .. } => "accepted",
                Received::Duplicate => "duplicate",
            };
            say(&format!("delivered {} {word}", step.input));
            accepted |= matches!(delivery, Received::Accepted { .. });
        }
        if accepted {
            handle(&coordinator, &session, step, digest).await?;
        }
    }
    say("done");
    Ok(())
}

/// Acts on one input: a tool call with one operation, committed together
/// with the mark that the input was handled, then run to its end.
async fn handle(
    coordinator: &Coordinator,
    session: &SessionId,
    step: &Step,
    digest: &str,
) -> Result<()> {
    let call = ToolCall {
        id: ToolCallId::new(),
        tool: step.tool.clone(),
        input: JsonText::from_value(&step.tool_input),
    };
    let operation = Operation::wasm(
        session.clone(),
        call.id.clone(),
        step.impact,
        WasmCall {
            name: step.tool.clone(),
            component: digest.to_owned(),
            policy: step.policy.clone(),
            limits: step.limits,
            input: JsonText::from_value(&step.tool_input),
        },
    );
    let events = vec![
        SessionEvent::InputHandled {
            input: step.input.parse()?,
        },
        SessionEvent::ToolCallRecorded {
            status: ToolCallStatus::Submitted {
                operations: vec![operation.id.clone()],
            },
            call,
            operations: vec![operation],
        },
    ];
    for dispatched in coordinator.commit(session, events).await? {
        say(&format!("committed {} {}", step.input, dispatched.id()));
        let settled = dispatched.settled().await?;
        say(&format!("settled {} {}", settled.id, settled.state));
    }
    Ok(())
}
