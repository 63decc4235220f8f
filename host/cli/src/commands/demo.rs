//! `hane demo`: the examples activated and run end to end on the embedded
//! store: a run, a reception, an outbound action, the model budget, and a
//! customer API when its service is up and its token given.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use hane_coordinator::AgentRuntime;
use hane_coordinator::reception::ReceptionRequest;

use crate::terminal::terminal_line;
use hane_coordinator::{Services, StartRun};
use hane_core::{ActionState, Person};
use hane_core::{ReceptionStatus, RunStatus};

use crate::context::StoreArg;
use crate::context::block_on;
use crate::context::finish;
use crate::exit;
use crate::output::print_run;

#[derive(Args)]
pub struct DemoArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The release to activate.
    #[arg(long, default_value = "examples", value_name = "DIR")]
    examples: PathBuf,
}

pub fn main(args: DemoArgs) -> ExitCode {
    finish(block_on(async {
        let path = args.store.path()?;
        let services = crate::runtime::open_runtime(&path).await?;
        let runtime = services.runs.clone();
        let info = runtime.activate(&args.examples).await.with_context(|| {
            format!(
                "activating {} (run `hane demo` from the repository's root, or pass --examples DIR)",
                args.examples.display()
            )
        })?;
        println!(
            "activated release {} from {}: {}\n",
            info.number,
            args.examples.display(),
            info.summary
        );
        let mut failed = false;
        for agent in ["vehicle-check-scripted", "vehicle-check-llm"] {
            for vehicle in ["架空 300 あ 10-02", "架空 999 ん 00-00"] {
                let run = runtime
                    .run_to_end(StartRun {
                        agent: agent.to_owned(),
                        input: serde_json::json!({ "vehicle": vehicle }),
                        shadow: false,
                    })
                    .await?;
                failed |= run.status != RunStatus::Succeeded;
                print_run(&runtime, &run, false).await?;
                println!();
            }
        }
        failed |= !demo_reception(&services).await?;
        print_model_budget(&services.budgets).await?;
        failed |= !demo_outbound(&runtime).await?;
        failed |= !demo_connection(&runtime).await?;
        println!(
            "store: {}\nsee them again with `hane runs list`, `hane runs show RUN` and `hane approvals list`",
            runtime.registry().path().display()
        );
        Ok(if failed {
            ExitCode::from(exit::FAILURE)
        } else {
            ExitCode::SUCCESS
        })
    }))
}

/// The demo's reception: a request in free text started as a run of the
/// agent it is for (the example provider's recording holds the choice),
/// and one that no agent answers declined without asking the model. True
/// when both went so.
async fn demo_reception(services: &Services) -> anyhow::Result<bool> {
    let runtime = &services.runs;
    println!(
        "reception: a request in free text goes to the agent it is for, with an input derived from its words (`hane ask TEXT`):"
    );
    let reception = services
        .reception
        .receive(ReceptionRequest {
            text: "When does the inspection of 架空 300 あ 10-02 expire?".to_owned(),
            dry_run: false,
            agent: None,
        })
        .await?;
    crate::output::print_reception(&reception);
    let found = match &reception.run {
        Some(run) => {
            let run = runtime.wait(run).await?;
            print_run(runtime, &run, false).await?;
            run.status == RunStatus::Succeeded
        }
        None => false,
    };
    println!();
    let declined = services
        .reception
        .receive(ReceptionRequest {
            text: "Bake me a chocolate cake".to_owned(),
            dry_run: false,
            agent: None,
        })
        .await?;
    crate::output::print_reception(&declined);
    println!();
    Ok(found && declined.status == ReceptionStatus::Declined)
}

/// The demo's outbound action: an email proposed, shown with its digest
/// and decider, then rejected so that nothing leaves the machine. True
/// when the run ended as expected.
async fn demo_outbound(runtime: &AgentRuntime) -> anyhow::Result<bool> {
    println!(
        "inspection-reminder proposes an email to a depot outside fleet.example; its DeciderPolicy leaves that to a person of fleet-desk:"
    );
    let run = runtime
        .start(StartRun {
            agent: "inspection-reminder".to_owned(),
            input: serde_json::json!({"vehicle": "架空 500 さ 12-34", "to": "depot@elsewhere.example"}),
            shadow: false,
        })
        .await?;
    let action = match pending_action(runtime, &run.id).await? {
        Ok(action) => action,
        Err(ended) => {
            print_run(runtime, &ended, false).await?;
            return Ok(false);
        }
    };
    let content = action.content.to_value()?;
    println!(
        "  action  {} {} to {}",
        action.id,
        action.tool,
        terminal_line(&action.recipient)
    );
    println!(
        "  subject {}",
        terminal_line(content["subject"].as_str().unwrap_or_default())
    );
    println!("  digest  {}", action.digest);
    println!(
        "  decider {} of {} ({})",
        action.decider.as_str(),
        terminal_line(action.assignment.as_deref().unwrap_or("-")),
        terminal_line(action.rule.as_deref().unwrap_or("no rule"))
    );
    println!(
        "the demo rejects it, so nothing is sent; a person would approve it with\n  hane approvals approve {} --digest {}\n",
        action.id, action.digest
    );
    reject_and_show(runtime, &action, "the demo sends nothing").await
}

/// The pending action of run `run`, or the run as it ended without one
/// (or still is, after 30 s).
async fn pending_action(
    runtime: &AgentRuntime,
    run: &hane_core::RunId,
) -> anyhow::Result<Result<hane_core::ActionRequest, hane_core::AgentRun>> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pending = runtime
            .actions()
            .list(Some(ActionState::Pending), Some(run))
            .await?;
        if let Some(action) = pending.items.into_iter().next() {
            return Ok(Ok(action));
        }
        let now = runtime.get(run).await?;
        if now.status.is_final() || std::time::Instant::now() > deadline {
            return Ok(Err(now));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The demo's customer API: `service-booker` reads a vehicle's service
/// history and a depot's open slots from the fleet-maintenance company's
/// API (the release's connection), at once, and proposes a booking, which
/// the demo shows and rejects. The API is a program of its own
/// (`examples/services/fleet-maintenance`); when the host does not hold
/// its token, the demo says how to start it and give it, and goes on.
/// True when the run ended as expected, or was not started.
async fn demo_connection(runtime: &AgentRuntime) -> anyhow::Result<bool> {
    let start = runtime
        .start(StartRun {
            agent: "service-booker".to_owned(),
            input: serde_json::json!({"vehicle": "架空 300 あ 10-02", "depot": "Shinagawa"}),
            shadow: false,
        })
        .await;
    let run = match start {
        Ok(run) => run,
        Err(hane_coordinator::RunError::ConnectionUnavailable { var, .. }) => {
            println!(
                "service-booker reads the fleet-maintenance company's API through a connection and proposes a booking; to see it, start the API (Python with FastAPI and uvicorn) and give hane its token:\n  python3 examples/services/fleet-maintenance/app.py --port 8765 --token TOKEN\n  {var}=TOKEN hane demo\n"
            );
            return Ok(true);
        }
        Err(e) => return Err(e.into()),
    };
    println!(
        "service-booker reads the fleet-maintenance company's API through its connection, at once, and proposes a booking, which a person of fleet-desk decides:"
    );
    let action = match pending_action(runtime, &run.id).await? {
        Ok(action) => action,
        Err(ended) => {
            print_run(runtime, &ended, false).await?;
            println!();
            return Ok(false);
        }
    };
    let content = action.content.to_value()?;
    println!(
        "  action  {} {} {} {} {} ({})",
        action.id,
        action.tool,
        terminal_line(&action.recipient),
        terminal_line(content["method"].as_str().unwrap_or_default()),
        terminal_line(content["path"].as_str().unwrap_or_default()),
        terminal_line(content["operation"].as_str().unwrap_or_default()),
    );
    println!("  body    {}", terminal_line(&content["body"].to_string()));
    println!("  digest  {}", action.digest);
    println!(
        "the demo rejects it, so nothing is booked; approved, it would be sent once with Idempotency-Key: {}\n",
        action.id
    );
    reject_and_show(runtime, &action, "the demo books nothing").await
}

/// Rejects `action` as the demo, saying `why`, and prints its run once it
/// has ended; true when the run succeeded.
async fn reject_and_show(
    runtime: &AgentRuntime,
    action: &hane_core::ActionRequest,
    why: &str,
) -> anyhow::Result<bool> {
    runtime
        .actions()
        .reject(
            action.id.as_str(),
            &action.digest,
            Person::anyone("cli:demo"),
            Some(why.to_owned()),
        )
        .await?;
    let ended = runtime.wait(&action.run).await?;
    print_run(runtime, &ended, false).await?;
    println!();
    Ok(ended.status == RunStatus::Succeeded)
}

/// The day's model tokens: used, reserved by runs still going, and what
/// the Budget leaves.
async fn print_model_budget(budgets: &hane_coordinator::Budgets) -> anyhow::Result<()> {
    let report = budgets.report().await?;
    let usage = &report.usage;
    let left = report.limits.model_tokens_per_day.map_or_else(
        || "no daily limit".to_owned(),
        |limit| {
            let left = limit.saturating_sub(usage.model_tokens_used + usage.model_tokens_reserved);
            format!("{left} of {limit} left")
        },
    );
    println!(
        "model tokens on {} (UTC): {} used, {} reserved, {left}\n",
        report.day, usage.model_tokens_used, usage.model_tokens_reserved
    );
    Ok(())
}
