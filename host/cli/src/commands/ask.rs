//! `hane ask "TEXT"`: reception from the terminal. The request in free
//! text goes to the agent of the active release it is for, with an input
//! derived from it; the run is followed to its end here, as `hane run`
//! does.

use std::process::ExitCode;

use clap::Args;
use hane_coordinator::reception::ReceptionRequest;
use hane_coordinator::{AgentRuntime, ModelConfig};
use hane_core::{ReceptionStatus, RunStatus};

use crate::context::{StoreArg, block_on, finish, serve_for_cli};
use crate::exit;
use crate::output::print_reception;
use crate::output::print_run;
use crate::terminal::terminal_json;

#[derive(Args)]
pub struct AskArgs {
    #[command(flatten)]
    store: StoreArg,
    /// What you need, in your words.
    text: String,
    /// Only say which agent would start, with which input.
    #[arg(long)]
    dry_run: bool,
    /// The agent the request is for: no shortlist, the model only derives
    /// its input from TEXT (or declines, saying what is missing).
    #[arg(long, value_name = "AGENT")]
    agent: Option<String>,
    /// Print the request (and the run, when one started) as JSON.
    #[arg(long)]
    json: bool,
    /// Only print, as JSON, the model request reception would send for
    /// TEXT (the shortlisted agents' tools and the default model); nothing
    /// is asked, stored or started.
    #[arg(long, conflicts_with_all = ["dry_run", "json"])]
    show_request: bool,
}

pub fn main(args: AskArgs) -> ExitCode {
    finish(block_on(async {
        let model = ModelConfig::from_vars(std::env::vars());
        let services = crate::runtime::open_runtime_with(&args.store.path()?, model).await?;
        let runtime = services.runs.clone();
        if args.show_request {
            match services
                .reception
                .model_request(&args.text, args.agent.as_deref())
                .await?
            {
                Some(request) => println!("{}", terminal_json(&request)?),
                None => eprintln!("no agent shares a word with the request: no model is asked"),
            }
            return Ok(ExitCode::SUCCESS);
        }
        // An agent with a CLI driver reaches its model and tools through
        // hane's HTTP server: one runs in this process while it may start.
        let _server = match any_cli_agent(&runtime).await {
            Some(agent) => serve_for_cli(&services, &agent).await?,
            None => None,
        };
        let reception = services
            .reception
            .receive(ReceptionRequest {
                text: args.text,
                dry_run: args.dry_run,
                agent: args.agent,
            })
            .await?;
        let run = match &reception.run {
            Some(id) => Some(runtime.wait(id).await?),
            None => None,
        };
        if args.json {
            let mut out = serde_json::to_value(&reception)?;
            out["input"] = reception
                .input
                .as_ref()
                .and_then(|i| i.to_value().ok())
                .unwrap_or_default();
            if let Some(run) = &run {
                out["agentRun"] = serde_json::to_value(run)?;
            }
            println!("{}", terminal_json(&out)?);
        } else {
            print_reception(&reception);
            if let Some(run) = &run {
                print_run(&runtime, run, false).await?;
            }
        }
        Ok(ExitCode::from(match (reception.status, &run) {
            (ReceptionStatus::WouldStart, _) => 0,
            (ReceptionStatus::Started, Some(run)) => match run.status {
                RunStatus::Succeeded => 0,
                RunStatus::LimitExceeded => exit::LIMIT,
                _ => exit::FAILURE,
            },
            (ReceptionStatus::Declined, _) => exit::USAGE,
            _ => exit::FAILURE,
        }))
    }))
}

/// The first agent of the active release with a CLI driver.
async fn any_cli_agent(runtime: &AgentRuntime) -> Option<String> {
    let release = runtime.release().await.ok()?;
    release
        .agents
        .iter()
        .find(|(_, a)| a.manifest.spec.driver.is_cli())
        .map(|(name, _)| name.clone())
}
