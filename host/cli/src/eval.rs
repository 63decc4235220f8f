//! `hane eval`: run an `EvalSuite` of the active release as shadow runs and
//! print how each case went; show, list and compare evaluations. And the
//! report of `hane release activate --eval`.

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use hane_coordinator::ModelConfig;
use hane_core::{
    CaseChange, CaseOutcome, CaseResult, Difference, Evaluation, EvaluationComparison,
};

use crate::agents::{StoreArg, block_on, finish, serve_for_cli, time};
use crate::exit;
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
                crate::store::note_skipped(("evaluation", "evaluations"), &listed.skipped);
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

/// A progress bar on stderr, drawn only when stderr is a terminal.
pub(crate) struct Progress {
    label: String,
    total: usize,
    done: usize,
    failed: usize,
    draw: bool,
}

impl Progress {
    pub(crate) fn new(label: &str, total: usize, wanted: bool) -> Self {
        let progress = Self {
            label: terminal_line(label).into_owned(),
            total,
            done: 0,
            failed: 0,
            draw: wanted && std::io::stderr().is_terminal(),
        };
        progress.show();
        progress
    }

    pub(crate) fn case(&mut self, case: &CaseResult) {
        self.done += 1;
        if case.outcome == CaseOutcome::Failed {
            self.failed += 1;
        }
        self.show();
    }

    fn show(&self) {
        if !self.draw {
            return;
        }
        const WIDTH: usize = 30;
        let filled = (self.done * WIDTH).checked_div(self.total).unwrap_or(0);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K{} [{}{}] {}/{}{}",
            self.label,
            "#".repeat(filled),
            " ".repeat(WIDTH - filled),
            self.done,
            self.total,
            match self.failed {
                0 => String::new(),
                n => format!(", {n} failed"),
            }
        );
        let _ = err.flush();
    }

    pub(crate) fn clear(&self) {
        if self.draw {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}

/// How much [`print_evaluation`] says of each case.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detail {
    /// What differs from what was expected.
    Differences,
    /// That, and each case's input and result.
    InputsAndResults,
}

/// An evaluation as a table, a line per case and a line per difference
/// (and with [`Detail::InputsAndResults`], its input and result).
pub(crate) fn print_evaluation(e: &Evaluation, detail: Detail) {
    println!(
        "evaluation {} of {} (agent {}, release {}{}): {}/{} passed, {:.0}% (passRate {:.0}%): {}",
        e.id,
        terminal_line(&e.suite),
        terminal_line(&e.agent),
        e.release,
        if e.candidate { ", candidate" } else { "" },
        e.passed,
        e.cases.len(),
        e.rate() * 100.0,
        e.pass_rate * 100.0,
        if e.meets_pass_rate() {
            "ok"
        } else {
            "below passRate"
        },
    );
    let width = e
        .cases
        .iter()
        .map(|c| terminal_line(&c.name).chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 48);
    println!(
        "  {:<width$}  {:<6}  {:>6}  {:>8}  RUN",
        "CASE", "RESULT", "TOKENS", "TIME"
    );
    for case in &e.cases {
        let name = crate::agents::cut_line(&terminal_line(&case.name), width);
        println!(
            "  {:<width$}  {:<6}  {:>6}  {:>5} ms  {}",
            name,
            case.outcome,
            case.tokens,
            case.duration_ms,
            case.run
                .as_ref()
                .map_or("-".to_owned(), ToString::to_string),
        );
        if detail == Detail::InputsAndResults {
            println!("      input   {}", terminal_line(case.input.as_str()));
            let result = case.result.as_ref().map_or("none", |r| r.as_str());
            println!("      result  {}", terminal_line(result));
        }
        print_differences(&case.differences, case.error.as_deref());
    }
    println!("  took {} ms", e.duration_ms);
}

fn print_differences(differences: &[Difference], error: Option<&str>) {
    for d in differences {
        let path = if d.path.is_empty() { "/" } else { &d.path };
        let found = d
            .found
            .as_ref()
            .map_or_else(|| "nothing".to_owned(), |f| f.as_str().to_owned());
        println!(
            "      {}: expected {}, found {}",
            terminal_line(path),
            terminal_line(d.expected.as_str()),
            terminal_line(&found)
        );
    }
    if let Some(error) = error {
        println!("      {}", terminal_line(error));
    }
}

/// Two evaluations compared, a line per case.
fn print_comparison(c: &EvaluationComparison) {
    println!(
        "{}: {} (release {}, {} passed) -> {} (release {}, {} passed)",
        terminal_line(&c.suite),
        c.a,
        c.a_release,
        c.a_passed,
        c.b,
        c.b_release,
        c.b_passed
    );
    let mut counts = std::collections::BTreeMap::new();
    for case in &c.cases {
        *counts.entry(case.change.as_str()).or_insert(0) += 1;
        println!("  {:<13}  {}", case.change, terminal_line(&case.name));
        if matches!(
            case.change,
            CaseChange::Regressed | CaseChange::StillFailing
        ) {
            print_differences(&case.differences, case.error.as_deref());
        }
    }
    let summary: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!("{}", summary.join(", "));
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
