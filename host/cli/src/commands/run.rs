//! `hane run` and `hane runs`: run an agent of the active release against
//! the embedded store, with no server, and list or show runs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::terminal::{terminal_json, terminal_line};
use hane_coordinator::{ModelConfig, StartRun};
use hane_core::RunId;
use hane_core::RunStatus;
use hane_store::RunQuery;

use crate::context::StoreArg;
use crate::context::block_on;
use crate::context::finish;
use crate::context::read_input;
use crate::context::serve_for_cli;
use crate::exit;
use crate::output::note_skipped;
use crate::output::print_run;
use crate::output::result_status;
use crate::output::time;

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The agent, from the active release.
    agent: String,
    /// The run's input as JSON, or `@FILE`, or `@-` for stdin.
    #[arg(long, value_name = "JSON")]
    input: String,
    /// Skip handovers and outbound actions; only keep a record.
    #[arg(long)]
    shadow: bool,
    /// Record every model call (request and response) to FILE, for a
    /// `recorded` ModelProvider to replay offline.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Print the run as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct RunsArgs {
    #[command(flatten)]
    store: StoreArg,
    #[command(subcommand)]
    command: RunsCommand,
}

#[derive(Subcommand)]
enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Only runs of this agent.
        #[arg(long)]
        agent: Option<String>,
        /// Only runs with this status (queued, running, succeeded, failed,
        /// cancelled, limit_exceeded).
        #[arg(long)]
        status: Option<RunStatus>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one run: input, tool calls, result, tasks.
    Show {
        /// The run's id.
        id: RunId,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: RunArgs) -> ExitCode {
    finish(block_on(async {
        let input = read_input(&args.input)?;
        let mut model = ModelConfig::from_vars(std::env::vars());
        if let Some(file) = &args.record {
            model.record(file.clone());
        }
        let services = crate::runtime::open_runtime_with(&args.store.path()?, model).await?;
        let runtime = services.runs.clone();
        // Runs a dead process left that can be resumed go on here, and
        // this command waits for them before it exits.
        let resumed = crate::runtime::take_over(&runtime, true).await;
        // A CLI driver's CLI reaches its model and tools only through
        // hane's HTTP server: one runs in this process for the run.
        let _server = serve_for_cli(&services, &args.agent).await?;
        let working = crate::terminal::Working::start(&format!("running {}", args.agent));
        let run = runtime
            .run_to_end(StartRun {
                agent: args.agent,
                input,
                shadow: args.shadow,
            })
            .await;
        drop(working);
        let run = run?;
        for other in &resumed {
            let ended = runtime.wait(&other.id).await?;
            eprintln!(
                "hane: run {} (resumed here) ended {}",
                ended.id,
                ended.status.as_str()
            );
        }
        print_run(&runtime, &run, args.json).await?;
        if let Some(file) = &args.record {
            eprintln!("model calls recorded to {}", file.display());
        }
        Ok(ExitCode::from(match run.status {
            RunStatus::Succeeded => 0,
            RunStatus::LimitExceeded => exit::LIMIT,
            _ => exit::FAILURE,
        }))
    }))
}

pub fn runs(args: RunsArgs) -> ExitCode {
    finish(block_on(async {
        let services = crate::runtime::open_runtime(&args.store.path()?).await?;
        let runtime = services.runs.clone();
        match args.command {
            RunsCommand::List {
                agent,
                status,
                limit,
                json,
            } => {
                let runs = runtime
                    .list(RunQuery {
                        agent,
                        status,
                        limit,
                    })
                    .await?;
                if json {
                    println!("{}", terminal_json(&runs.items)?);
                } else if runs.items.is_empty() && runs.skipped.is_empty() {
                    eprintln!("no runs");
                } else {
                    for run in &runs.items {
                        println!(
                            "{}  {}  {:<15} {}  {}",
                            run.id,
                            time(run.created_at_ms),
                            run.status.as_str(),
                            terminal_line(&run.agent),
                            terminal_line(&result_status(run))
                        );
                    }
                }
                note_skipped(("run", "runs"), &runs.skipped);
            }
            RunsCommand::Show { id, json } => {
                let run = runtime.get(&id).await?;
                print_run(&runtime, &run, json).await?;
            }
        }
        Ok(ExitCode::SUCCESS)
    }))
}
