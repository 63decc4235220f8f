//! `hane release`: validate, activate (after its evaluations, with
//! `--eval`), list and roll back the releases of the embedded store.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::terminal::terminal_line;

use crate::context::StoreArg;
use crate::context::block_on;
use crate::context::finish;
use crate::exit;
use crate::output::Detail;
use crate::output::Progress;
use crate::output::print_evaluation;
use crate::output::time;

#[derive(Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    store: StoreArg,
    #[command(subcommand)]
    command: ReleaseCommand,
}

#[derive(Subcommand)]
enum ReleaseCommand {
    /// Check every manifest, component and ledger file in DIR and activate
    /// them together as a new release. On any error nothing changes.
    Activate {
        /// The release's directory: manifests (*.yaml) anywhere in it, the
        /// ledger under `ledger/`.
        dir: PathBuf,
        /// Evaluate the release's EvalSuites against its own definitions
        /// first, and activate it only when each meets its passRate
        /// (otherwise it is stored, not active, and exit is 1).
        #[arg(
            long,
            env = "HANE_RELEASE_EVAL",
            value_parser = clap::builder::FalseyValueParser::new()
        )]
        eval: bool,
        /// Activate without evaluating, even when HANE_RELEASE_EVAL is set
        /// (or --eval given).
        #[arg(long)]
        no_eval: bool,
    },
    /// List releases; the active one is marked.
    List,
    /// Activate an earlier release again: release N, or the one before
    /// the active one.
    Rollback {
        /// The release to activate.
        number: Option<u64>,
    },
}

pub fn main(args: ReleaseArgs) -> ExitCode {
    finish(block_on(async {
        let services = crate::runtime::open_runtime(&args.store.path()?).await?;
        let runtime = services.runs.clone();
        match args.command {
            ReleaseCommand::Activate { dir, eval, no_eval } if eval && !no_eval => {
                return activate_evaluated(&services.evaluations, &dir).await;
            }
            ReleaseCommand::Activate { dir, .. } => {
                let working = crate::terminal::Working::start(&format!(
                    "activating {}: checking its manifests and compiling its components",
                    dir.display()
                ));
                let info = runtime.activate(&dir).await;
                drop(working);
                let info = info?;
                println!("activated release {}: {}", info.number, info.summary);
            }
            ReleaseCommand::List => {
                let releases = runtime.registry().releases().list().await?;
                if releases.is_empty() {
                    eprintln!("no releases yet: activate one with `hane release activate DIR`");
                }
                // A candidate whose evaluation fell below its passRate was
                // stored but refused: say so, or it reads as one rolled
                // back from.
                let evaluations = services.evaluations.list(None, 0).await?;
                let refused: std::collections::BTreeSet<u64> = evaluations
                    .items
                    .iter()
                    .filter(|e| e.candidate && !e.meets_pass_rate())
                    .map(|e| e.release)
                    .collect();
                if !releases.is_empty() {
                    println!(
                        "  {:>4}  {:<19}  {:<7}  SUMMARY  SOURCE",
                        "#", "CREATED", "STATE"
                    );
                }
                for r in releases {
                    let state = match (r.active, refused.contains(&r.number)) {
                        (true, _) => "active",
                        (false, true) => "refused",
                        (false, false) => "stored",
                    };
                    println!(
                        "{} {:>4}  {}  {:<7}  {}  {}",
                        if r.active { "*" } else { " " },
                        r.number,
                        time(r.created_at_ms),
                        state,
                        terminal_line(&r.summary),
                        terminal_line(&r.source)
                    );
                }
            }
            ReleaseCommand::Rollback { number } => {
                let info = runtime.registry().releases().rollback(number).await?;
                println!("release {} is active again: {}", info.number, info.summary);
            }
        }
        Ok(ExitCode::SUCCESS)
    }))
}

/// `hane release activate DIR --eval`: the candidate's suites evaluated
/// against its own definitions, a table each, then whether it became
/// active.
pub(crate) async fn activate_evaluated(
    evaluations: &hane_coordinator::Evaluations,
    dir: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    let mut bar: Option<Progress> = None;
    let gated = evaluations
        .activate_evaluated(dir, |suite, total, case| {
            if bar.as_ref().is_none_or(|b| b.label != *suite) {
                if let Some(done) = &bar {
                    done.clear();
                }
                bar = Some(Progress::new(suite, total, true));
            }
            if let Some(bar) = &mut bar {
                bar.case(case);
            }
        })
        .await?;
    if let Some(bar) = &bar {
        bar.clear();
    }
    for evaluation in &gated.evaluations {
        print_evaluation(evaluation, Detail::Differences);
    }
    let release = &gated.release;
    if gated.activated {
        println!("activated release {}: {}", release.number, release.summary);
        return Ok(ExitCode::SUCCESS);
    }
    let below: Vec<&str> = gated
        .evaluations
        .iter()
        .filter(|e| !e.meets_pass_rate())
        .map(|e| e.suite.as_str())
        .collect();
    eprintln!(
        "release {} was not activated: {} below its passRate; the active release is unchanged",
        release.number,
        below.join(", ")
    );
    Ok(ExitCode::from(exit::FAILURE))
}
