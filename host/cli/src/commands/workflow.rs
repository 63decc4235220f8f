//! `hane workflow`: start a case of a workflow of the active release and
//! move it on as far as it goes here, show and list cases, complete a
//! person's task, and resume cases a stopped process left running.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use hane_coordinator::ModelConfig;
use hane_core::{
    WorkflowCase, WorkflowCaseId,
    workflow::{CaseStatus, StepStatus},
};

use crate::context::{StoreArg, block_on, finish, read_input};
use crate::exit;
use crate::output::{cut_line, time};
use crate::terminal::{terminal_json, terminal_line};

#[derive(Args)]
pub struct WorkflowArgs {
    #[command(flatten)]
    store: StoreArg,
    #[command(subcommand)]
    command: WorkflowCommand,
}

#[derive(Subcommand)]
enum WorkflowCommand {
    /// Start a case of WORKFLOW (of the active release) and move it on
    /// until a person's task waits or it ends. Exits 1 when it failed.
    Start {
        /// The workflow.
        workflow: String,
        /// The case's input as JSON, or `@FILE`, or `@-` for stdin.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        input: String,
        /// Print the case as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one case: each step, its run or task, its output.
    Show {
        /// The case's id (`case_…`).
        case: WorkflowCaseId,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List cases, newest first.
    List {
        /// Only cases of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// Only cases in this status (running, waiting, succeeded, failed).
        #[arg(long)]
        status: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Complete a person's task: STEP of CASE, with its result (a JSON
    /// object later steps read); then move the case on here.
    Complete {
        /// The case.
        case: WorkflowCaseId,
        /// The task step's id.
        step: String,
        /// The result as JSON, or `@FILE`, or `@-` for stdin.
        #[arg(long, value_name = "JSON")]
        result: String,
        /// Who did it.
        #[arg(long, default_value = "cli")]
        by: String,
        /// Print the case as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Move on a case left running (by a process that stopped), or every
    /// such case, here.
    Resume {
        /// The case; every running case when absent.
        case: Option<WorkflowCaseId>,
    },
}

pub fn main(args: WorkflowArgs) -> ExitCode {
    finish(block_on(async {
        let model = ModelConfig::from_vars(std::env::vars());
        let services = crate::runtime::open_runtime_with(&args.store.path()?, model).await?;
        let workflows = &services.workflows;
        match args.command {
            WorkflowCommand::Start {
                workflow,
                input,
                json,
            } => {
                let input = read_input(&input)?;
                let case = workflows.start_case(&workflow, input).await?;
                let case = workflows.advance_case(&case.id).await?;
                show(&case, json)?;
                Ok(code(&case))
            }
            WorkflowCommand::Show { case, json } => {
                show(&workflows.case(&case).await?, json)?;
                Ok(ExitCode::SUCCESS)
            }
            WorkflowCommand::List {
                workflow,
                status,
                limit,
                json,
            } => {
                let status = match status.as_deref() {
                    None => None,
                    Some("running") => Some(CaseStatus::Running),
                    Some("waiting") => Some(CaseStatus::Waiting),
                    Some("succeeded") => Some(CaseStatus::Succeeded),
                    Some("failed") => Some(CaseStatus::Failed),
                    Some(other) => anyhow::bail!(
                        "--status `{other}`: expected running, waiting, succeeded or failed"
                    ),
                };
                let listed = workflows.cases(workflow, status, limit).await?;
                crate::output::note_skipped(("workflow case", "workflow cases"), &listed.skipped);
                if json {
                    println!("{}", terminal_json(&listed.items)?);
                    return Ok(ExitCode::SUCCESS);
                }
                if listed.items.is_empty() && listed.skipped.is_empty() {
                    eprintln!(
                        "no cases: start one with `hane workflow start WORKFLOW --input JSON`"
                    );
                }
                for case in &listed.items {
                    println!(
                        "{}  {}  {}  {:<9}  {}",
                        case.id,
                        time(case.created_at_ms),
                        case.workflow,
                        case.status,
                        current(case)
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            WorkflowCommand::Complete {
                case,
                step,
                result,
                by,
                json,
            } => {
                let result = read_input(&result)?;
                workflows.complete_task(&case, &step, result, &by).await?;
                let case = workflows.advance_case(&case).await?;
                show(&case, json)?;
                Ok(code(&case))
            }
            WorkflowCommand::Resume { case } => {
                let ids: Vec<WorkflowCaseId> = match case {
                    Some(id) => vec![id],
                    None => {
                        let listed = workflows.cases(None, Some(CaseStatus::Running), 0).await?;
                        crate::output::note_skipped(
                            ("workflow case", "workflow cases"),
                            &listed.skipped,
                        );
                        listed.items.into_iter().map(|c| c.id).collect()
                    }
                };
                if ids.is_empty() {
                    eprintln!("no case is running");
                }
                let mut failed = false;
                for id in ids {
                    let case = workflows.advance_case(&id).await?;
                    println!(
                        "{}  {}  {:<9}  {}",
                        case.id,
                        case.workflow,
                        case.status,
                        current(&case)
                    );
                    failed |= case.status == CaseStatus::Failed;
                }
                Ok(if failed {
                    ExitCode::from(exit::FAILURE)
                } else {
                    ExitCode::SUCCESS
                })
            }
        }
    }))
}

fn code(case: &WorkflowCase) -> ExitCode {
    if case.status == CaseStatus::Failed {
        ExitCode::from(exit::FAILURE)
    } else {
        ExitCode::SUCCESS
    }
}

/// The step a case is at, or why it failed, in a few words.
fn current(case: &WorkflowCase) -> String {
    if let Some(error) = &case.error {
        return cut_line(&terminal_line(error), 80);
    }
    match case.steps.iter().find(|s| {
        matches!(
            s.status,
            StepStatus::Running | StepStatus::Waiting | StepStatus::Pending
        )
    }) {
        Some(step) => format!("at {} ({})", step.id, step.status),
        None => String::new(),
    }
}

fn show(case: &WorkflowCase, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", terminal_json(case)?);
        return Ok(());
    }
    println!(
        "case {} of {} (release {}): {}",
        case.id, case.workflow, case.release, case.status
    );
    println!("  input  {}", terminal_line(case.input.as_str()));
    let width = case.steps.iter().map(|s| s.id.len()).max().unwrap_or(4);
    for step in &case.steps {
        let what = match (&step.run, &step.task) {
            (Some(run), _) => run.to_string(),
            (None, Some(task)) => format!(
                "task for {}: {}",
                terminal_line(&task.assignment),
                terminal_line(&task.title)
            ),
            (None, None) => String::new(),
        };
        println!("  {:<width$}  {:<7}  {what}", step.id, step.status);
        if let Some(output) = &step.output {
            println!(
                "  {:<width$}  output   {}",
                "",
                cut_line(&terminal_line(output.as_str()), 160)
            );
        }
        if let Some(task) = step
            .task
            .as_ref()
            .filter(|_| step.status == StepStatus::Waiting)
        {
            if let Some(details) = &task.details {
                println!(
                    "  {:<width$}  details  {}",
                    "",
                    terminal_line(details.as_str())
                );
            }
            println!(
                "  {:<width$}  complete it: hane workflow complete {} {} --result '{{...}}'",
                "", case.id, step.id
            );
        }
        if let Some(error) = &step.error {
            println!("  {:<width$}  error    {}", "", terminal_line(error));
        }
    }
    Ok(())
}
