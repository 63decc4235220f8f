//! `hane store check`: the store read whole, every item that does not read
//! reported; `hane store recover`: a damaged store accepted as it is; and
//! what the listings say of the items they leave out.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use hane_coordinator::ReleaseBody;
use hane_store::CheckReport;
use serde_json::json;

use crate::context::{StoreArg, finish};
use crate::output::plural;
use crate::terminal::{terminal_json, terminal_line};

#[derive(Args)]
pub struct StoreArgs {
    #[command(flatten)]
    store: StoreArg,
    #[command(subcommand)]
    command: StoreCommand,
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Check the store: SQLite's integrity check of the file, then every
    /// stored item (session events, operations, releases, runs, tasks,
    /// actions, conversations, reception's answers, evaluations, workflow
    /// cases) read as hane reads it. Each problem is printed with its table
    /// and id; exits 1 if there is any. Writes nothing, and may run beside
    /// `hane serve`.
    Check {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Open a damaged store again as it is, accepting the loss: a store
    /// whose write-ahead log lost commits it had acknowledged is refused
    /// by every other command (and reported by `hane store check`) until
    /// this sets its commit mark to what the file holds. The damaged log
    /// stays where the check kept it; nothing in the store changes. A
    /// store that is not damaged is left as it is.
    Recover,
}

pub fn main(args: StoreArgs) -> ExitCode {
    finish((|| {
        // Never made here: a check of a path where nothing is fails.
        let path = args.store.named()?;
        if let Some(url) = hane_store::postgres_url(&path) {
            anyhow::bail!(
                "hane store reads a SQLite store file; `{}` is a PostgreSQL database, whose \
                 pages the server checks itself (PostgreSQL's amcheck)",
                hane_store::without_password(url)
            );
        }
        match args.command {
            StoreCommand::Check { json } => {
                let report = hane_store::check(&path, |body| {
                    hane_stored::open::<ReleaseBody>(body).map(drop)
                })?;
                if json {
                    println!("{}", terminal_json(&report_json(&report))?);
                } else {
                    print_report(&report);
                }
                Ok(if report.is_sound() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                })
            }
            StoreCommand::Recover => {
                let recovered = hane_store::recover(&path)?;
                let path = recovered.path.display();
                match &recovered.damage {
                    None => println!(
                        "store {path}: not damaged ({}); nothing to recover",
                        plural(recovered.holds as usize, "commit", "commits")
                    ),
                    Some(damage) => println!(
                        "store {path}: {}; it now opens as it is, with {}",
                        terminal_line(&damage.to_string()),
                        plural(recovered.holds as usize, "commit", "commits")
                    ),
                }
                Ok(ExitCode::SUCCESS)
            }
        }
    })())
}

fn print_report(report: &CheckReport) {
    if let Some(damage) = &report.damage {
        println!("damage: {}", terminal_line(&damage.to_string()));
    }
    for line in &report.integrity {
        println!("integrity: {}", terminal_line(line));
    }
    for problem in &report.problems {
        // A problem quotes what it could not read: stored text.
        println!("{}", terminal_line(&problem.to_string()));
    }
    let path = report.path.display();
    let items = plural(report.checked as usize, "item", "items");
    if report.is_sound() {
        println!("store {path}: {items} checked, no problems");
    } else {
        let problems =
            report.integrity.len() + report.problems.len() + usize::from(report.damage.is_some());
        println!(
            "store {path}: {items} checked, {}",
            plural(problems, "problem", "problems")
        );
    }
}

fn report_json(report: &CheckReport) -> serde_json::Value {
    let problems: Vec<_> = report
        .problems
        .iter()
        .map(|p| json!({ "table": p.table, "id": p.id, "error": p.error }))
        .collect();
    json!({
        "path": report.path,
        "checked": report.checked,
        "sound": report.is_sound(),
        "damage": report.damage.as_ref().map(ToString::to_string),
        "integrity": report.integrity,
        "problems": problems,
    })
}
