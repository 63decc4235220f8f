//! `hane schedules`: the active release's schedules with their next
//! ticks, and the ticks `hane serve` handled. Only `hane serve` starts a
//! schedule's runs; these commands read the store.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use hane_coordinator::RunError;
use hane_core::now_ms;
use hane_manifest::{ScheduleManifest, ScheduleTarget};
use hane_store::TickRow;
use serde_json::{Value, json};

use crate::context::{StoreArg, UsageError, block_on, finish};
use crate::output::time;
use crate::terminal::{terminal_json, terminal_line};

#[derive(Args)]
pub struct SchedulesArgs {
    #[command(flatten)]
    store: StoreArg,
    #[command(subcommand)]
    command: SchedulesCommand,
}

#[derive(Subcommand)]
enum SchedulesCommand {
    /// The active release's schedules: what each starts, and its next tick
    /// in its time zone and in UTC.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The ticks handled, newest first: the run each started, or why none
    /// did.
    Ticks {
        /// Only the ticks of this schedule.
        #[arg(long, value_name = "NAME")]
        schedule: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn main(args: SchedulesArgs) -> ExitCode {
    finish(block_on(async {
        let registry = crate::runtime::open_registry(&args.store.path()?)?;
        match args.command {
            SchedulesCommand::List { json } => {
                let Some(release) = hane_coordinator::load_active(&registry).await? else {
                    return Err(RunError::NoRelease.into());
                };
                let now = now_ms();
                let listed: Vec<Value> = release
                    .schedules
                    .values()
                    .map(|schedule| listing(schedule, now))
                    .collect();
                if json {
                    println!("{}", terminal_json(&listed)?);
                } else if listed.is_empty() {
                    eprintln!("release {} has no schedules", release.info.number);
                } else {
                    for (schedule, item) in release.schedules.values().zip(&listed) {
                        print_schedule(schedule, item);
                    }
                }
            }
            SchedulesCommand::Ticks {
                schedule,
                limit,
                json,
            } => {
                let ticks = registry.ticks().list(schedule.as_deref(), limit).await?;
                if let Some(name) = &schedule
                    && ticks.is_empty()
                {
                    // A schedule with no ticks must at least be one the
                    // active release has: a misspelt name is not "no ticks".
                    let release = hane_coordinator::load_active(&registry).await?;
                    let known: Vec<&str> = release
                        .as_ref()
                        .map(|r| r.schedules.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    if !known.contains(&name.as_str()) {
                        let known = if known.is_empty() {
                            " (it has no schedules)".to_owned()
                        } else {
                            format!(" (its schedules: {})", known.join(", "))
                        };
                        return Err(UsageError(format!(
                            "no schedule `{name}` has ticks or is in the active release{known}"
                        ))
                        .into());
                    }
                }
                if json {
                    let list: Vec<Value> = ticks.iter().map(tick_json).collect();
                    println!("{}", terminal_json(&list)?);
                } else if ticks.is_empty() {
                    eprintln!("no ticks handled yet: `hane serve` starts the runs of schedules");
                } else {
                    for tick in &ticks {
                        print_tick(tick);
                    }
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }))
}

/// A schedule as listed, with its next tick after `now`.
fn listing(schedule: &ScheduleManifest, now: u64) -> Value {
    let spec = &schedule.spec;
    let (kind, target) = match spec.target() {
        Some(ScheduleTarget::Agent(agent)) => ("agent", agent),
        Some(ScheduleTarget::Workflow(workflow)) => ("workflow", workflow),
        None => ("none", ""),
    };
    let cadence = spec.cadence().ok();
    let next = cadence.as_ref().and_then(|c| c.next_after(now));
    json!({
        "name": schedule.metadata.name,
        "cron": spec.cron,
        "timeZone": spec.time_zone,
        kind: target,
        "missed": spec.missed.as_str(),
        "shadow": spec.shadow,
        "input": spec.input,
        "nextTickMs": next,
        "nextTick": next.map(time),
        "nextTickLocal": cadence.as_ref().zip(next).map(|(c, t)| c.wall_clock(t)),
    })
}

fn print_schedule(schedule: &ScheduleManifest, item: &Value) {
    let spec = &schedule.spec;
    let target = match spec.target() {
        Some(ScheduleTarget::Agent(agent)) => format!("agent {agent}"),
        Some(ScheduleTarget::Workflow(workflow)) => format!("workflow {workflow}"),
        None => "nothing".to_owned(),
    };
    let next = match (item["nextTickLocal"].as_str(), item["nextTick"].as_str()) {
        (Some(local), Some(utc)) => format!("next {local} ({utc})"),
        _ => "no next tick".to_owned(),
    };
    println!(
        "{}  \"{}\" {}  {target}{}  missed: {}  {next}",
        schedule.metadata.name,
        terminal_line(&spec.cron),
        spec.time_zone,
        if spec.shadow { " (shadow)" } else { "" },
        spec.missed,
    );
}

fn tick_json(tick: &TickRow) -> Value {
    json!({
        "schedule": tick.schedule,
        "tickMs": tick.tick_ms,
        "tick": time(tick.tick_ms),
        "claimedAtMs": tick.claimed_at_ms,
        "claimedBy": tick.claimed_by,
        "outcome": tick.outcome.as_str(),
        "run": tick.run,
        "workflowCase": tick.workflow_case,
        "error": tick.error,
    })
}

fn print_tick(tick: &TickRow) {
    let what = match (&tick.run, &tick.workflow_case, &tick.error) {
        (Some(run), _, _) => run.clone(),
        (None, Some(case), _) => case.clone(),
        (None, None, Some(error)) => terminal_line(error).into_owned(),
        (None, None, None) => String::new(),
    };
    println!(
        "{}  {}  {:<8} {}  by {}",
        time(tick.tick_ms),
        tick.schedule,
        tick.outcome.as_str(),
        what,
        tick.claimed_by
    );
}
