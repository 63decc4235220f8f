//! `hane eval`: run an `EvalSuite` of the active release as shadow runs and
//! print how each case went; show, list and compare evaluations. And the
//! report of `hane release activate --eval`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use hane_coordinator::ModelConfig;

use crate::context::{StoreArg, block_on, finish, serve_for_cli};
use crate::exit;
use crate::output::Detail;
use crate::output::Progress;
use crate::output::print_comparison;
use crate::output::print_evaluation;
use crate::output::time;
use crate::terminal::{terminal_json, terminal_line};

#[derive(Args)]
pub struct EvalArgs {
    #[command(flatten)]
    store: StoreArg,
    #[command(subcommand)]
    command: EvalCommand,
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Run every case of SUITE (an EvalSuite of the active release) as a
    /// shadow run of its agent and compare each result with what the case
    /// expects. Exits 1 when fewer cases pass than the suite's passRate.
    Run {
        /// The suite's name.
        suite: String,
        /// Print the evaluation as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one evaluation, case by case.
    Show {
        /// The evaluation's id (`eval_…`).
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List evaluations, newest first.
    List {
        /// Only evaluations of this suite.
        #[arg(long)]
        suite: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compare evaluation A (the earlier) with B, of the same suite, case
    /// by case: regressed, fixed, still failing, unchanged. Exits 1 when a
    /// case regressed.
    Compare {
        /// The earlier evaluation.
        a: String,
        /// The later evaluation.
        b: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn main(args: EvalArgs) -> ExitCode {
    finish(block_on(async {
        let model = ModelConfig::from_vars(std::env::vars());
        let services = crate::runtime::open_runtime_with(&args.store.path()?, model).await?;
        let runtime = services.runs.clone();
        match args.command {
            EvalCommand::Run { suite, json } => {
                let release = runtime.release().await?;
                // An agent with a CLI driver reaches its model and tools
                // through hane's HTTP server: one runs here meanwhile.
                let agent = release
                    .eval_suites
                    .get(&suite)
                    .map(|s| s.spec.agent.clone());
                let _server = match agent {
                    Some(agent) => serve_for_cli(&services, &agent).await?,
                    None => None,
                };
                let total = release
                    .eval_suites
                    .get(&suite)
                    .map_or(0, |s| s.spec.cases.len());
                let mut bar = Progress::new(&suite, total, !json);
                let evaluation = services
                    .evaluations
                    .evaluate(&suite, |case| bar.case(case))
                    .await?;
                bar.clear();
                if json {
                    println!("{}", terminal_json(&evaluation)?);
                } else {
                    print_evaluation(&evaluation, Detail::Differences);
                }
                Ok(if evaluation.meets_pass_rate() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(exit::FAILURE)
                })
            }
            EvalCommand::Show { id, json } => {
                let evaluation = services.evaluations.get(&id).await?;
                if json {
                    println!("{}", terminal_json(&evaluation)?);
                } else {
                    print_evaluation(&evaluation, Detail::InputsAndResults);
                }
                Ok(ExitCode::SUCCESS)
            }
            EvalCommand::List { suite, limit, json } => {
                let listed = services.evaluations.list(suite, limit).await?;
                crate::output::note_skipped(("evaluation", "evaluations"), &listed.skipped);
                if json {
                    println!("{}", terminal_json(&listed.items)?);
                    return Ok(ExitCode::SUCCESS);
                }
                if listed.items.is_empty() && listed.skipped.is_empty() {
                    eprintln!("no evaluations yet: run one with `hane eval run SUITE`");
                }
                for e in &listed.items {
                    println!(
                        "{}  {}  {}  release {}{}  {}/{} passed  {}",
                        e.id,
                        time(e.created_at_ms),
                        terminal_line(&e.suite),
                        e.release,
                        if e.candidate { " (candidate)" } else { "" },
                        e.passed,
                        e.cases.len(),
                        if e.meets_pass_rate() {
                            "ok"
                        } else {
                            "below passRate"
                        },
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            EvalCommand::Compare { a, b, json } => {
                let comparison = services.evaluations.compare(&a, &b).await?;
                if json {
                    println!("{}", terminal_json(&comparison)?);
                } else {
                    print_comparison(&comparison);
                }
                Ok(if comparison.regressed().next().is_some() {
                    ExitCode::from(exit::FAILURE)
                } else {
                    ExitCode::SUCCESS
                })
            }
        }
    }))
}
