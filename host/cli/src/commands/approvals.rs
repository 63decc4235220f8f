//! `hane approvals list | show | approve | reject | reconcile | overrides`:
//! the outbound actions agents propose, decided by a person at a terminal,
//! and the decider overrides that send a tool's actions to people.
//!
//! What an agent, a model, a reviewer or a remote server wrote (recipients,
//! content, reasons, outcomes) is shown escaped ([`terminal_line`],
//! [`terminal_json`]): a recipient shows as the characters it holds, not
//! as what an escape sequence in it makes a terminal draw.
//!
//! These commands open only the execution ledger (the registry, the
//! delivery settings and the day's budget), never a sandbox, so they start
//! at once, beside a `hane serve` or `hane run` that waits for the
//! decision on the same store.

use std::path::Path;
use std::process::ExitCode;
use std::str::FromStr;

use anyhow::Context as _;
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use hane_coordinator::{ActionError, ExecutionLedger, load_active};
use hane_core::{ActionId, ActionRequest, ActionState, DeciderKind, Person, RunId};
use hane_delivery::ConfigError;

use crate::context::StoreArg;
use crate::exit;
use crate::output::time;
use crate::runtime::{ENVIRONMENT_HELP, delivery_from_env, scope_from_env};
use crate::terminal::{terminal_json, terminal_line, terminal_text};

#[derive(Args)]
#[command(after_long_help = ENVIRONMENT_HELP)]
pub struct ApprovalsArgs {
    #[command(flatten)]
    store: StoreArg,
    #[command(subcommand)]
    command: ApprovalsCommand,
}

#[derive(Subcommand)]
enum ApprovalsCommand {
    /// List actions, oldest first: those waiting for a decision unless
    /// --state says otherwise.
    List {
        /// Only actions in this state (pending, approved, rejected,
        /// executing, delivered, failed, unknown, shadowed), or `all`.
        #[arg(long, value_name = "STATE", default_value = "pending")]
        state: StateFilter,
        /// Only actions this run proposed.
        #[arg(long, value_name = "RUN")]
        run: Option<RunId>,
        /// Print JSON: a list of actions.
        #[arg(long)]
        json: bool,
    },
    /// Show one action: what would go out and its digest, who decides, the
    /// trail of decisions and the outcome.
    Show {
        /// The action's id (`act_…`).
        id: ActionId,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve an action and deliver it now, once. Exits 0 when it ends
    /// failed or unknown too, printing the outcome.
    Approve {
        /// The action's id (`act_…`).
        id: ActionId,
        /// The digest of the content you saw (from `show`): the action is
        /// approved only if it is still the action's.
        #[arg(long, value_name = "DIGEST")]
        digest: String,
        /// Why, kept in the action's trail.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Print the action as it ended, as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reject an action: nothing is sent, and the run goes on.
    Reject {
        /// The action's id (`act_…`).
        id: ActionId,
        /// The digest of the content you saw (from `show`).
        #[arg(long, value_name = "DIGEST")]
        digest: String,
        /// Why, kept in the action's trail.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Print the action as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Record what became of an `unknown` action, which may or may not
    /// have gone out and is never resent. Nothing is sent.
    Reconcile {
        /// The action's id (`act_…`).
        id: ActionId,
        /// What you found out.
        #[arg(
            long,
            value_name = "STATE",
            value_parser = PossibleValuesParser::new(["delivered", "failed"])
        )]
        state: String,
        /// How you know, such as where the message was seen.
        #[arg(long, value_name = "TEXT")]
        note: String,
        /// Print the action as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Decider overrides: a tool whose actions people decide, whatever the
    /// decider policies say, from its very next action on.
    Overrides {
        #[command(subcommand)]
        command: OverridesCommand,
    },
}

#[derive(Subcommand)]
enum OverridesCommand {
    /// List the overrides.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Send a tool's actions to people (replacing its override if it has
    /// one).
    Add {
        /// The outbound tool, such as `communication.send_email`.
        tool: String,
        /// Why, for the people who read the overrides.
        #[arg(long)]
        reason: String,
    },
    /// Let the decider policies decide a tool's actions again.
    Remove {
        /// The outbound tool.
        tool: String,
    },
}

/// `--state`: one state, or every one.
#[derive(Debug, Clone, Copy)]
struct StateFilter(Option<ActionState>);

impl FromStr for StateFilter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(Self(None));
        }
        s.parse()
            .map(|state| Self(Some(state)))
            .map_err(|e| format!("{e}, or all"))
    }
}

pub(crate) fn main(args: ApprovalsArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", terminal_text(&format!("{e:#}")));
            ExitCode::from(code(&e))
        }
    }
}

/// How a command failed, for its exit code. A refusal (no such action, a
/// stale digest, decided already) is a usage error, as a run that is not
/// found or already ended is for `hane runs` and `hane run`.
fn code(e: &anyhow::Error) -> u8 {
    if let Some(e) = e.downcast_ref::<ActionError>() {
        return exit::of_kind(e.kind());
    }
    if e.downcast_ref::<ConfigError>().is_some() || e.downcast_ref::<NoOverride>().is_some() {
        return exit::USAGE;
    }
    exit::FAILURE
}

/// Who decides from this terminal: `cli:$USER`, or `cli`.
fn decider() -> String {
    match std::env::var("USER") {
        Ok(user) if !user.is_empty() => format!("cli:{user}"),
        _ => "cli".to_owned(),
    }
}

/// The ledger over the store at `path`, delivering with the settings in
/// the environment, under the active release's budget for the project
/// and environment there.
async fn open_ledger(path: &Path) -> anyhow::Result<ExecutionLedger> {
    let delivery = delivery_from_env()?;
    let registry = crate::runtime::open_registry(path)?;
    let scope = scope_from_env();
    let budget = load_active(&registry)
        .await
        .context("reading the active release's budget")?
        .and_then(|release| release.budget_for(&scope));
    let lease =
        hane_coordinator::Lease::acquire(&registry, hane_coordinator::lease::lease_from_env()?)?;
    let ledger = ExecutionLedger::new(registry, delivery, scope, lease);
    ledger.set_budget(budget);
    Ok(ledger)
}

fn run(args: ApprovalsArgs) -> anyhow::Result<()> {
    let path = args.store.path()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let ledger = open_ledger(&path).await?;
        match args.command {
            ApprovalsCommand::List { state, run, json } => {
                let listed = ledger.list(state.0, run.as_ref()).await?;
                let actions = &listed.items;
                if json {
                    let list: Vec<_> = actions.iter().map(ActionRequest::to_json).collect();
                    println!("{}", terminal_json(&list)?);
                } else if actions.is_empty() && listed.skipped.is_empty() {
                    match state.0 {
                        Some(state) => eprintln!("no {state} actions"),
                        None => eprintln!("no actions"),
                    }
                } else {
                    for action in actions {
                        println!(
                            "{}  {}  {:<9}  {}  to {}  ({})",
                            action.id,
                            time(action.created_at_ms),
                            action.state,
                            action.tool,
                            terminal_line(&action.recipient),
                            terminal_line(&who_decides(action))
                        );
                    }
                }
                crate::output::note_skipped(("action", "actions"), &listed.skipped);
            }
            ApprovalsCommand::Show { id, json } => {
                print_action(&ledger.get(id.as_str()).await?, json)?;
            }
            ApprovalsCommand::Approve {
                id,
                digest,
                reason,
                json,
            } => {
                // An action a stopped process left mid-delivery is
                // reported as unknown rather than shown as executing.
                ledger.recover(false).await?;
                let action = ledger
                    .approve(id.as_str(), &digest, Person::anyone(decider()), reason)
                    .await?;
                if !json {
                    println!("approved {id}; it ended {}", action.state);
                }
                print_action(&action, json)?;
            }
            ApprovalsCommand::Reject {
                id,
                digest,
                reason,
                json,
            } => {
                ledger.recover(false).await?;
                let action = ledger
                    .reject(id.as_str(), &digest, Person::anyone(decider()), reason)
                    .await?;
                if !json {
                    println!("rejected {id}: nothing was sent");
                }
                print_action(&action, json)?;
            }
            ApprovalsCommand::Reconcile {
                id,
                state,
                note,
                json,
            } => {
                ledger.recover(false).await?;
                let action = ledger
                    .reconcile(id.as_str(), &state, Person::anyone(decider()), &note)
                    .await?;
                if !json {
                    println!("reconciled {id} as {}", action.state);
                }
                print_action(&action, json)?;
            }
            ApprovalsCommand::Overrides { command } => overrides(&ledger, command).await?,
        }
        Ok(())
    })
}

async fn overrides(ledger: &ExecutionLedger, command: OverridesCommand) -> anyhow::Result<()> {
    match command {
        OverridesCommand::List { json } => {
            let rows = ledger.overrides().await?;
            if json {
                let list: Vec<_> = rows
                    .iter()
                    .map(|o| {
                        serde_json::json!({
                            "tool": o.tool,
                            "reason": o.reason,
                            "createdBy": o.created_by,
                            "createdAtMs": o.created_at_ms,
                        })
                    })
                    .collect();
                println!("{}", terminal_json(&list)?);
            } else if rows.is_empty() {
                eprintln!("no overrides: the decider policies decide");
            } else {
                for o in &rows {
                    println!(
                        "{}  people decide since {} (by {}): {}",
                        terminal_line(&o.tool),
                        time(o.created_at_ms),
                        terminal_line(&o.created_by),
                        terminal_line(&o.reason)
                    );
                }
            }
        }
        OverridesCommand::Add { tool, reason } => {
            ledger.add_override(&tool, &reason, &decider()).await?;
            println!("people decide every action of {tool} from now on");
        }
        OverridesCommand::Remove { tool } => {
            if !ledger.remove_override(&tool).await? {
                anyhow::bail!(NoOverride(tool));
            }
            println!("the decider policies decide {tool} again");
        }
    }
    Ok(())
}

/// `remove` of a tool that has no override.
#[derive(Debug)]
struct NoOverride(String);

impl std::fmt::Display for NoOverride {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` has no override", self.0)
    }
}

impl std::error::Error for NoOverride {}

/// Who decides `action`, in a few words.
fn who_decides(action: &ActionRequest) -> String {
    match action.decider {
        DeciderKind::Person => match &action.assignment {
            Some(group) => format!("a person of {group}"),
            None => "a person".to_owned(),
        },
        DeciderKind::Agent => format!(
            "review agent {}",
            action.reviewer.as_deref().unwrap_or("(unnamed)")
        ),
        DeciderKind::Policy => "a policy".to_owned(),
    }
}

fn print_action(action: &ActionRequest, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", terminal_json(&action.to_json())?);
        return Ok(());
    }
    // Continuation lines line up under the values.
    let indent = "\n             ";
    println!("action {}  {}", action.id, action.state);
    println!(
        "  run        {} (agent {})",
        action.run,
        terminal_line(&action.agent)
    );
    println!("  tool       {}", terminal_line(&action.tool));
    println!("  recipient  {}", terminal_line(&action.recipient));
    if let Some(connection) = &action.connection {
        println!(
            "  connection {} at {}{}",
            terminal_line(&connection.name),
            terminal_line(&connection.base_url),
            connection
                .credential
                .as_deref()
                .map(|c| format!(" with credential {}", terminal_line(c)))
                .unwrap_or_default()
        );
    }
    // Pretty JSON: its only raw newlines are its own, between lines.
    let content = match action.content.to_value() {
        Ok(value) => terminal_json(&value).unwrap_or_default(),
        Err(_) => terminal_line(action.content.as_str()).into_owned(),
    };
    println!("  content    {}", content.replace('\n', indent));
    println!("  digest     {}", action.digest);
    let mut decider = who_decides(action);
    if let Some(task) = &action.task {
        decider.push_str(&format!(", task {task}"));
    }
    if let Some(rule) = &action.rule {
        decider.push_str(&format!(", chosen by {rule}"));
    }
    if action.overridden {
        decider.push_str(", sent to people by a decider override");
    }
    println!("  decider    {}", terminal_line(&decider));
    for (i, decision) in action.trail.iter().enumerate() {
        println!(
            "  {}  {}  {:<6} {:<8} by {}{}",
            if i == 0 { "trail    " } else { "         " },
            time(decision.at_ms),
            decision.kind.as_str(),
            decision.verdict.as_str(),
            terminal_line(&decision.by),
            decision
                .reason
                .as_deref()
                .map(|r| format!(": {}", terminal_line(r)))
                .unwrap_or_default()
        );
    }
    for attempt in &action.attempts {
        println!(
            "  attempt    {}  by process {}",
            time(attempt.started_at_ms),
            terminal_line(&attempt.owner)
        );
    }
    if let Some(outcome) = &action.outcome {
        // A server's reply may span lines: each is indented under the
        // value, so none can pass for a line of this listing.
        println!(
            "  outcome    {}: {}",
            outcome.state,
            terminal_text(&outcome.detail).replace('\n', indent)
        );
        if let Some(by) = &outcome.reconciled_by {
            println!("             reconciled by {}", terminal_line(by));
        }
    }
    println!(
        "  approved   {}",
        terminal_line(&match action.approval() {
            Some(d) if action.human_approved() => format!("by a person ({})", d.by),
            Some(d) => format!("by {} {}, not a person", d.kind.as_str(), d.by),
            None => "no".to_owned(),
        })
    );
    match action.state {
        ActionState::Pending if action.decider == DeciderKind::Person => println!(
            "  decide     hane approvals approve|reject {} --digest {}",
            action.id, action.digest
        ),
        ActionState::Unknown => println!(
            "  reconcile  it may have gone out and is never resent: find out, then{indent}hane approvals reconcile {} --state delivered|failed --note TEXT",
            action.id
        ),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_filters() {
        assert_eq!(
            "pending".parse::<StateFilter>().unwrap().0,
            Some(ActionState::Pending)
        );
        assert_eq!("all".parse::<StateFilter>().unwrap().0, None);
        let e = "sent".parse::<StateFilter>().unwrap_err();
        assert!(e.contains("pending, approved"), "{e}");
        assert!(e.ends_with("or all"), "{e}");
    }
}
