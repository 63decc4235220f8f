//! `hane session list | show | fork | export`: read and fork session
//! histories in the embedded store.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use hane_core::{InputKind, Recorded, SessionEvent, SessionId, ToolCallStatus};
use hane_store::{PostgresStore, SessionInfo, SessionStore, SqliteConfig, SqliteStore, StoreError};
use serde_json::json;

use crate::context::default_store_path;
use crate::exit;
use crate::output::receipt_line;
use crate::terminal::{terminal_json, terminal_line, terminal_text};

#[derive(Args)]
pub struct SessionArgs {
    /// The store: a SQLite file, or a PostgreSQL database
    /// (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE) [default:
    /// $HANE_STORE, else $XDG_DATA_HOME/hane/hane.db, else
    /// ~/.local/share/hane/hane.db].
    #[arg(long, global = true, value_name = "FILE|URL")]
    store: Option<PathBuf>,
    #[command(subcommand)]
    command: SessionCommand,
}

#[derive(Subcommand)]
enum SessionCommand {
    /// List sessions, oldest first.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's timeline, with the receipt of every operation.
    Show {
        /// The session's id.
        id: SessionId,
        /// Print the export's JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Fork a session: the new one shares the first SEQ events (no copy).
    /// Prints the new session's id.
    Fork {
        /// The session to fork.
        id: SessionId,
        /// How many events the fork shares: 0 to the session's length.
        #[arg(long, value_name = "SEQ")]
        at: u64,
    },
    /// Write a session's history as JSON for people and tools.
    Export {
        /// The session's id.
        id: SessionId,
        /// Write to this file instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

pub fn main(args: SessionArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", terminal_text(&format!("{e:#}")));
            // A wrong id or fork point is the caller's to fix, like any
            // other usage error.
            let usage = e.downcast_ref::<StoreError>().is_some_and(|e| {
                matches!(
                    e,
                    StoreError::SessionNotFound(_) | StoreError::ForkOutOfRange { .. }
                )
            });
            ExitCode::from(if usage { exit::USAGE } else { exit::FAILURE })
        }
    }
}

fn run(args: SessionArgs) -> anyhow::Result<()> {
    let path = args
        .store
        .or_else(default_store_path)
        .context("no store: pass --store FILE or set HANE_STORE")?;
    let database = hane_store::postgres_url(&path);
    if database.is_none() && !path.exists() {
        anyhow::bail!(
            "no store at {}: nothing has been recorded there yet",
            path.display()
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let store: Box<dyn SessionStore> = match database {
            Some(url) => Box::new(PostgresStore::open(url)?),
            None => Box::new(SqliteStore::open(&path, &SqliteConfig::new())?),
        };
        let store = &*store;
        match args.command {
            SessionCommand::List { json } => list(store, json).await,
            SessionCommand::Show { id, json: true } => {
                println!("{}", terminal_json(&export(store, &id).await?)?);
                Ok(())
            }
            SessionCommand::Show { id, json: false } => show(store, &id).await,
            SessionCommand::Fork { id, at } => {
                let fork = store.fork(&id, at).await?;
                eprintln!(
                    "forked {id} at event {at}: {} shares its first {at} events",
                    fork.id
                );
                println!("{}", fork.id);
                Ok(())
            }
            SessionCommand::Export { id, output } => {
                let text = terminal_json(&export(store, &id).await?)? + "\n";
                match output {
                    Some(file) => write_file(&file, &text),
                    None => {
                        print!("{text}");
                        Ok(())
                    }
                }
            }
        }
    })
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

fn info_json(info: &SessionInfo) -> serde_json::Value {
    json!({
        "id": info.id,
        "parent": info.parent.as_ref().map(|p| json!({"session": p.session, "at": p.at})),
        "createdAt": rfc3339(info.created_at_ms),
        "events": info.len,
    })
}

async fn list(store: &dyn SessionStore, json: bool) -> anyhow::Result<()> {
    let sessions = store.list_sessions().await?;
    if json {
        let all: Vec<_> = sessions.iter().map(info_json).collect();
        println!("{}", terminal_json(&all)?);
        return Ok(());
    }
    if sessions.is_empty() {
        eprintln!("no sessions");
        return Ok(());
    }
    println!(
        "{:<30}  {:>7}  {:<24}  forked from",
        "session", "events", "created"
    );
    for s in &sessions {
        let parent = s
            .parent
            .as_ref()
            .map(|p| format!("{} at {}", p.session, p.at))
            .unwrap_or_default();
        println!(
            "{:<30}  {:>7}  {:<24}  {parent}",
            s.id,
            s.len,
            rfc3339(s.created_at_ms)
        );
    }
    Ok(())
}

async fn export(store: &dyn SessionStore, id: &SessionId) -> anyhow::Result<serde_json::Value> {
    let info = store.session(id).await?;
    let events = store.read(id, 0..u64::MAX).await?;
    let events: Vec<_> = events
        .iter()
        .map(|r| json!({"seq": r.seq, "at": rfc3339(r.at_ms), "event": r.event}))
        .collect();
    Ok(json!({"session": info_json(&info), "events": events}))
}

/// At most `max` characters of `text`, marked when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

async fn show(store: &dyn SessionStore, id: &SessionId) -> anyhow::Result<()> {
    let info = store.session(id).await?;
    println!(
        "session {} · {} event{} · created {}",
        info.id,
        info.len,
        if info.len == 1 { "" } else { "s" },
        rfc3339(info.created_at_ms)
    );
    if let Some(parent) = &info.parent {
        println!(
            "forked from {} at event {}: events 0 to {} are shared with it",
            parent.session,
            parent.at,
            parent.at.saturating_sub(1)
        );
    }
    for recorded in store.read(id, 0..u64::MAX).await? {
        for (i, line) in timeline(&recorded).into_iter().enumerate() {
            // Inputs, tool calls, outputs and failures are what a caller,
            // a model or a guest wrote.
            let line = terminal_line(&line);
            if i == 0 {
                let time = rfc3339(recorded.at_ms);
                // HH:MM:SS.mmm of the RFC 3339 form.
                let clock = time.get(11..23).unwrap_or(&time);
                println!("{:>5}  {clock}  {line}", recorded.seq);
            } else {
                println!("{:>5}  {:12}  {line}", "", "");
            }
        }
    }
    Ok(())
}

/// The lines one event shows as.
fn timeline(recorded: &Recorded) -> Vec<String> {
    const WIDTH: usize = 100;
    match &recorded.event {
        SessionEvent::InputAccepted { input } => {
            let what = match &input.kind {
                InputKind::External { payload } => clip(payload.as_str(), WIDTH),
                InputKind::Control { command } => format!("{command:?}"),
                InputKind::Crash { operation, reason } => match operation {
                    Some(op) => format!("{op}: {reason}"),
                    None => reason.clone(),
                },
            };
            vec![format!(
                "input accepted    {} ({}) {what}",
                input.id,
                input.kind.name()
            )]
        }
        SessionEvent::InputHandled { input } => vec![format!("input handled     {input}")],
        SessionEvent::ModelTurn {
            model,
            input_tokens,
            output_tokens,
            ..
        } => vec![format!(
            "model turn        {model}: {input_tokens} tokens in, {output_tokens} out"
        )],
        SessionEvent::ToolCallRecorded {
            call,
            status,
            operations,
        } => {
            let mut lines = vec![format!(
                "tool call         {} {} {}",
                call.tool,
                call.id,
                clip(call.input.as_str(), WIDTH)
            )];
            match status {
                ToolCallStatus::Rejected { message } => {
                    lines.push(format!("  rejected: {message}"))
                }
                ToolCallStatus::Submitted { .. } => {
                    for op in operations {
                        lines.push(format!("  → {} {} ({})", op.id, op.summary(), op.impact));
                    }
                }
            }
            lines
        }
        SessionEvent::OperationStarted { operation, attempt } => {
            vec![format!("started           {operation} attempt {attempt}")]
        }
        SessionEvent::OperationCompleted { operation, result } => vec![
            format!(
                "succeeded         {operation} {}",
                clip(result.output.as_str(), WIDTH)
            ),
            format!("  {}", receipt_line(&result.receipt)),
        ],
        SessionEvent::OperationFailed { operation, failure } => {
            let mut lines = vec![format!("failed            {operation} {}", failure.message)];
            if let Some(receipt) = &failure.receipt {
                lines.push(format!("  {}", receipt_line(receipt)));
            }
            lines
        }
        SessionEvent::OperationUnknown { operation, reason } => {
            vec![format!("unknown           {operation} {reason}")]
        }
        SessionEvent::RunStateChanged { run, state } => {
            vec![format!("run               {run} {state}")]
        }
        SessionEvent::Forked { parent, at } => {
            vec![format!("forked            from {parent} at event {at}")]
        }
        SessionEvent::LlmTurn(turn) => vec![format!(
            "llm turn {:<8} {}/{} {} in + {} out tokens, {} ms, request {}",
            turn.turn,
            turn.provider,
            turn.model,
            turn.input_tokens,
            turn.output_tokens,
            turn.latency_ms,
            &turn.request_digest[..turn.request_digest.len().min(12)]
        )],
        SessionEvent::CliOutput(cli) => vec![format!(
            "cli output        {} {}: {} events, {}",
            cli.driver,
            cli.version,
            cli.events.len(),
            cli.exit
        )],
        SessionEvent::ActionProposed {
            action,
            tool,
            digest,
        } => vec![format!(
            "action proposed   {action} {tool} {}",
            &digest[..digest.len().min(19)]
        )],
        SessionEvent::TaskCreated {
            task,
            kind,
            assignment,
            title,
        } => vec![format!(
            "task created      {task} {kind} for {assignment}: {}",
            clip(title, WIDTH)
        )],
        other => vec![other.name().to_owned()],
    }
}
