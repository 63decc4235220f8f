//! `hane release`, `hane run`, `hane runs` and `hane demo`: activate
//! agents and run them against the embedded store, with no server.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use hane_coordinator::AgentRuntime;
use hane_coordinator::conversation::ConversationError;
use hane_coordinator::reception::ReceptionRequest;

use crate::terminal::{terminal_json, terminal_line, terminal_text};
use hane_coordinator::{ActivationError, ModelConfig, RunError, Services, StartRun};
use hane_core::RunId;
use hane_core::{ActionState, Person};
use hane_core::{AgentRun, LlmTurn, ReceptionStatus, RunStatus, Task};
use hane_store::{RunQuery, StoreError};

use crate::exit;
use crate::input::input_text;
use crate::session::default_store_path;
use crate::store::note_skipped;

/// The store flag every command here shares.
#[derive(Args)]
pub struct StoreArg {
    /// The store: a SQLite file, or a PostgreSQL database that several
    /// processes share (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE)
    /// [default: $HANE_STORE, else $XDG_DATA_HOME/hane/hane.db, else
    /// ~/.local/share/hane/hane.db].
    #[arg(long, global = true, value_name = "FILE|URL")]
    store: Option<PathBuf>,
}

impl StoreArg {
    /// The store's path, its directory made if missing (for a new store);
    /// or its PostgreSQL address.
    pub(crate) fn path(&self) -> anyhow::Result<PathBuf> {
        let path = self.named()?;
        if hane_store::postgres_url(&path).is_some() {
            return Ok(path);
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        Ok(path)
    }

    /// The store's path: `--store`, else `HANE_STORE`, else the default.
    pub(crate) fn named(&self) -> anyhow::Result<PathBuf> {
        self.store
            .clone()
            .or_else(default_store_path)
            .context("no store: pass --store FILE or set HANE_STORE")
    }
}

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

#[derive(Args)]
pub struct DemoArgs {
    #[command(flatten)]
    store: StoreArg,
    /// The release to activate.
    #[arg(long, default_value = "examples", value_name = "DIR")]
    examples: PathBuf,
}

/// How a command failed, for its exit code.
fn code(e: &anyhow::Error) -> u8 {
    if let Some(e) = e.downcast_ref::<RunError>() {
        return exit::of_kind(e.kind());
    }
    if let Some(e) = e.downcast_ref::<hane_coordinator::reception::ReceptionError>() {
        return exit::of_kind(e.kind());
    }
    if let Some(e) = e.downcast_ref::<ConversationError>() {
        return exit::of_kind(e.kind());
    }
    if let Some(e) = e.downcast_ref::<hane_coordinator::evaluation::EvalError>() {
        return exit::of_kind(e.kind());
    }
    if let Some(e) = e.downcast_ref::<hane_coordinator::workflow::WorkflowError>() {
        return exit::of_kind(e.kind());
    }
    if e.downcast_ref::<crate::schedules::UnknownSchedule>()
        .is_some()
    {
        return exit::USAGE;
    }
    // A file named on the command line that cannot be read, or not within
    // its cap, is the caller's to fix.
    if e.downcast_ref::<hane_delivery::ConfigError>().is_some()
        || e.downcast_ref::<hane_core::ReadError>().is_some()
    {
        return exit::USAGE;
    }
    if e.downcast_ref::<ActivationError>()
        .is_some_and(|e| matches!(e, ActivationError::Invalid(_)))
        || e.downcast_ref::<StoreError>()
            .is_some_and(|e| matches!(e, StoreError::ReleaseNotFound(_)))
    {
        return exit::USAGE;
    }
    exit::FAILURE
}

pub(crate) fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", terminal_text(&format!("{e:#}")));
            ExitCode::from(code(&e))
        }
    }
}

pub(crate) fn block_on<T>(f: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(f)
}

pub fn release(args: ReleaseArgs) -> ExitCode {
    finish(block_on(async {
        let services = crate::runtime::open_runtime(&args.store.path()?).await?;
        let runtime = services.runs.clone();
        match args.command {
            ReleaseCommand::Activate { dir, eval, no_eval } if eval && !no_eval => {
                return crate::eval::activate_evaluated(&services.evaluations, &dir).await;
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

/// Reads `--input`: JSON, `@FILE` or `@-` (see [`input_text`]).
pub(crate) fn read_input(input: &str) -> anyhow::Result<serde_json::Value> {
    let text = input_text(input)?;
    serde_json::from_str(&text).context("--input is not JSON")
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

/// `line`, at most `max` characters.
pub(crate) fn cut_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

/// Stops the in-process server when dropped.
pub(crate) struct InProcessServer(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for InProcessServer {
    fn drop(&mut self) {
        if let Some(stop) = self.0.take() {
            let _ = stop.send(());
        }
    }
}

/// When `agent` of the active release has a CLI driver: hane's HTTP server
/// on `127.0.0.1:0` in this process, its address given to the runtime,
/// until the returned guard is dropped.
pub(crate) async fn serve_for_cli(
    services: &Services,
    agent: &str,
) -> anyhow::Result<Option<InProcessServer>> {
    let runtime = &services.runs;
    let is_cli = match runtime.release().await {
        Ok(release) => release
            .agents
            .get(agent)
            .is_some_and(|a| a.manifest.spec.driver.is_cli()),
        Err(_) => false,
    };
    if !is_cli {
        return Ok(None);
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("listening on 127.0.0.1 for the CLI driver")?;
    crate::runtime::server_address().set(listener.local_addr()?);
    let (stop, stopping) = tokio::sync::oneshot::channel::<()>();
    let server = hane_server::serve(listener, services.clone(), async {
        let _ = stopping.await;
    });
    tokio::spawn(async move {
        if let Err(e) = server.await {
            tracing::error!("the in-process server for the CLI driver stopped: {e}");
        }
    });
    Ok(Some(InProcessServer(Some(stop))))
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

pub fn demo(args: DemoArgs) -> ExitCode {
    finish(block_on(async {
        let path = args.store.path()?;
        let services = crate::runtime::open_runtime(&path).await?;
        let runtime = services.runs.clone();
        let info = runtime.activate(&args.examples).await.with_context(|| {
            format!(
                "activating {} (run `hane demo` from the repository's root, or pass --examples DIR)",
                args.examples.display()
            )
        })?;
        println!(
            "activated release {} from {}: {}\n",
            info.number,
            args.examples.display(),
            info.summary
        );
        let mut failed = false;
        for agent in ["vehicle-check-scripted", "vehicle-check-llm"] {
            for vehicle in ["架空 300 あ 10-02", "架空 999 ん 00-00"] {
                let run = runtime
                    .run_to_end(StartRun {
                        agent: agent.to_owned(),
                        input: serde_json::json!({ "vehicle": vehicle }),
                        shadow: false,
                    })
                    .await?;
                failed |= run.status != RunStatus::Succeeded;
                print_run(&runtime, &run, false).await?;
                println!();
            }
        }
        failed |= !demo_reception(&services).await?;
        print_model_budget(&services.budgets).await?;
        failed |= !demo_outbound(&runtime).await?;
        println!(
            "store: {}\nsee them again with `hane runs list`, `hane runs show RUN` and `hane approvals list`",
            runtime.registry().path().display()
        );
        Ok(if failed {
            ExitCode::from(exit::FAILURE)
        } else {
            ExitCode::SUCCESS
        })
    }))
}

/// The demo's reception: a request in free text started as a run of the
/// agent it is for (the example provider's recording holds the choice),
/// and one that no agent answers declined without asking the model. True
/// when both went so.
async fn demo_reception(services: &Services) -> anyhow::Result<bool> {
    let runtime = &services.runs;
    println!(
        "reception: a request in free text goes to the agent it is for, with an input derived from its words (`hane ask TEXT`):"
    );
    let reception = services
        .reception
        .receive(ReceptionRequest {
            text: "When does the inspection of 架空 300 あ 10-02 expire?".to_owned(),
            dry_run: false,
            agent: None,
        })
        .await?;
    crate::ask::print_reception(&reception);
    let found = match &reception.run {
        Some(run) => {
            let run = runtime.wait(run).await?;
            print_run(runtime, &run, false).await?;
            run.status == RunStatus::Succeeded
        }
        None => false,
    };
    println!();
    let declined = services
        .reception
        .receive(ReceptionRequest {
            text: "Bake me a chocolate cake".to_owned(),
            dry_run: false,
            agent: None,
        })
        .await?;
    crate::ask::print_reception(&declined);
    println!();
    Ok(found && declined.status == ReceptionStatus::Declined)
}

/// The demo's outbound action: an email proposed, shown with its digest
/// and decider, then rejected so that nothing leaves the machine. True
/// when the run ended as expected.
async fn demo_outbound(runtime: &AgentRuntime) -> anyhow::Result<bool> {
    println!(
        "inspection-reminder proposes an email to a depot outside fleet.example; its DeciderPolicy leaves that to a person of fleet-desk:"
    );
    let run = runtime
        .start(StartRun {
            agent: "inspection-reminder".to_owned(),
            input: serde_json::json!({"vehicle": "架空 500 さ 12-34", "to": "depot@elsewhere.example"}),
            shadow: false,
        })
        .await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let action = loop {
        let pending = runtime
            .actions()
            .list(Some(ActionState::Pending), Some(&run.id))
            .await?;
        if let Some(action) = pending.items.into_iter().next() {
            break action;
        }
        let now = runtime.get(&run.id).await?;
        if now.status.is_final() || std::time::Instant::now() > deadline {
            print_run(runtime, &now, false).await?;
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let content = action.content.to_value()?;
    println!(
        "  action  {} {} to {}",
        action.id,
        action.tool,
        terminal_line(&action.recipient)
    );
    println!(
        "  subject {}",
        terminal_line(content["subject"].as_str().unwrap_or_default())
    );
    println!("  digest  {}", action.digest);
    println!(
        "  decider {} of {} ({})",
        action.decider.as_str(),
        terminal_line(action.assignment.as_deref().unwrap_or("-")),
        terminal_line(action.rule.as_deref().unwrap_or("no rule"))
    );
    println!(
        "the demo rejects it, so nothing is sent; a person would approve it with\n  hane approvals approve {} --digest {}\n",
        action.id, action.digest
    );
    runtime
        .actions()
        .reject(
            action.id.as_str(),
            &action.digest,
            Person::anyone("cli:demo"),
            Some("the demo sends nothing".to_owned()),
        )
        .await?;
    let ended = runtime.wait(&run.id).await?;
    print_run(runtime, &ended, false).await?;
    println!();
    Ok(ended.status == RunStatus::Succeeded)
}

/// The day's model tokens: used, reserved by runs still going, and what
/// the Budget leaves.
async fn print_model_budget(budgets: &hane_coordinator::Budgets) -> anyhow::Result<()> {
    let report = budgets.report().await?;
    let usage = &report.usage;
    let left = report.limits.model_tokens_per_day.map_or_else(
        || "no daily limit".to_owned(),
        |limit| {
            let left = limit.saturating_sub(usage.model_tokens_used + usage.model_tokens_reserved);
            format!("{left} of {limit} left")
        },
    );
    println!(
        "model tokens on {} (UTC): {} used, {} reserved, {left}\n",
        report.day, usage.model_tokens_used, usage.model_tokens_reserved
    );
    Ok(())
}

fn result_status(run: &AgentRun) -> String {
    run.result
        .as_ref()
        .and_then(|r| r.to_value().ok())
        .and_then(|v| v.get("status").and_then(|s| s.as_str()).map(str::to_owned))
        .map(|s| format!("→ {s}"))
        .unwrap_or_default()
}

pub(crate) async fn print_run(
    runtime: &AgentRuntime,
    run: &AgentRun,
    json: bool,
) -> anyhow::Result<()> {
    let tasks = runtime.tasks(&run.id).await?;
    note_skipped(("task", "tasks"), &tasks.skipped);
    let tasks: Vec<Task> = tasks.items;
    let turns = runtime.llm_turns(&run.id).await?;
    let cli = runtime.cli_output(&run.id).await?;
    if json {
        let mut value = serde_json::to_value(run)?;
        value["taskDetails"] = serde_json::to_value(&tasks)?;
        value["llmTurns"] = serde_json::to_value(&turns)?;
        if let Some(cli) = &cli {
            value["cliOutput"] = serde_json::to_value(cli)?;
        }
        println!("{}", terminal_json(&value)?);
        return Ok(());
    }
    let elapsed = run.updated_at_ms.saturating_sub(run.created_at_ms);
    println!(
        "run {}  {}  {}  (release {}, {} tool call{}, {elapsed} ms{})",
        run.id,
        terminal_line(&run.agent),
        run.status,
        run.release,
        run.tool_calls.len(),
        if run.tool_calls.len() == 1 { "" } else { "s" },
        if run.shadow { ", shadow" } else { "" }
    );
    println!("  input   {}", terminal_line(run.input.as_str()));
    for (i, call) in run.tool_calls.iter().enumerate() {
        let detail = if call.detail.is_empty() {
            String::new()
        } else {
            format!("  {}", terminal_line(&call.detail))
        };
        println!(
            "  {:>2}. {:<24} {:<9} {:>8.2} ms{detail}",
            i + 1,
            terminal_line(&call.tool),
            call.status.as_str(),
            call.duration_us as f64 / 1000.0
        );
    }
    for turn in &turns {
        print_turn(turn);
    }
    if let Some(cli) = &cli {
        println!(
            "  cli     {} {}: {} event{}{}, {}",
            cli.driver,
            terminal_line(&cli.version),
            cli.events.len(),
            if cli.events.len() == 1 { "" } else { "s" },
            if cli.events_omitted_bytes > 0 {
                format!(" ({} bytes more not kept)", cli.events_omitted_bytes)
            } else {
                String::new()
            },
            cli.exit
        );
        for event in &cli.events {
            println!("          {}", cut_line(&terminal_line(event), 160));
        }
        if let Some(line) = cli.stderr_tail.lines().rev().find(|l| !l.trim().is_empty()) {
            println!("  stderr  {}", cut_line(&terminal_line(line), 160));
        }
    }
    if let Some(result) = &run.result {
        // Pretty JSON: its only raw newlines are its own, between lines.
        let pretty = match result.to_value() {
            Ok(value) => terminal_json(&value).unwrap_or_default(),
            Err(_) => terminal_line(result.as_str()).into_owned(),
        };
        println!("  result  {}", pretty.replace('\n', "\n          "));
    }
    if let Some(error) = &run.error {
        println!("  error   {}", terminal_text(error));
    }
    for task in &tasks {
        println!(
            "  task    {} {} for {}: {}",
            task.id,
            task.kind,
            terminal_line(&task.assignment),
            terminal_line(&task.title)
        );
    }
    if let Some(session) = &run.session {
        println!("  session {session}");
    }
    Ok(())
}

/// One LLM turn: the model, its usage and latency, what it asked for, and
/// what the context builder left out.
fn print_turn(turn: &LlmTurn) {
    let response: Option<hane_model::ModelResponse> = turn
        .response
        .to_value()
        .ok()
        .and_then(|v| serde_json::from_value(v).ok());
    let (stop, calls) = match &response {
        Some(r) => {
            let calls: Vec<String> = r
                .message()
                .tool_calls()
                .map(|(_, name, _)| name.replace('-', "."))
                .collect();
            (r.stop_reason.as_str(), calls)
        }
        None => ("?", Vec::new()),
    };
    let asked = if calls.is_empty() {
        "no tool call".to_owned()
    } else {
        format!("calls {}", calls.join(", "))
    };
    println!(
        "  model   turn {}  {}/{}  {} in + {} out tokens{}  {} ms  {stop}, {asked}",
        turn.turn,
        terminal_line(&turn.provider),
        terminal_line(&turn.model),
        turn.input_tokens,
        turn.output_tokens,
        if turn.cached_tokens > 0 {
            format!(" ({} cached)", turn.cached_tokens)
        } else {
            String::new()
        },
        turn.latency_ms,
        asked = terminal_line(&asked)
    );
    println!(
        "          context {}",
        terminal_line(&context_summary(&turn.context))
    );
}

/// The context report in a line: how many messages were kept of how
/// many, what was left out, and how tokens were counted.
fn context_summary(context: &hane_core::JsonText) -> String {
    let Ok(report) = context.to_value() else {
        return "(unreadable report)".to_owned();
    };
    // A call a client made over HTTP brought its own context.
    if let Some(format) = report["served"].as_str() {
        return format!(
            "sent by a client in the {format} format{}, about {} input tokens ({})",
            if report["stream"] == true {
                ", streamed"
            } else {
                ""
            },
            report["inputTokens"],
            report["tokenizer"].as_str().unwrap_or("?"),
        );
    }
    let items = report["items"].as_array().map_or(0, Vec::len);
    let left_out = if items == 0 {
        "nothing omitted, truncated or compacted".to_owned()
    } else {
        let mut parts = Vec::new();
        for item in report["items"].as_array().into_iter().flatten() {
            parts.push(format!(
                "message {} {} ({} → {} tokens: {})",
                item["message"],
                item["action"].as_str().unwrap_or("?"),
                item["tokensBefore"],
                item["tokensAfter"],
                item["reason"].as_str().unwrap_or_default()
            ));
        }
        parts.join("; ")
    };
    format!(
        "{} input tokens of a {}-token window ({}), {} messages kept; {left_out}",
        report["inputTokens"],
        report["window"],
        report["tokenizer"].as_str().unwrap_or("?"),
        report["kept"],
    )
}

/// `ms` since the Unix epoch as RFC 3339 to the second, as every listing
/// prints times.
pub(crate) fn time(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_turns_context_says_who_sent_it() {
        let served = hane_core::JsonText::from_value(&serde_json::json!({
            "served": "responses", "stream": true, "tokenizer": "estimate", "inputTokens": 42
        }));
        assert_eq!(
            context_summary(&served),
            "sent by a client in the responses format, streamed, about 42 input tokens (estimate)"
        );
    }

    #[test]
    fn input_is_json_or_a_file() {
        assert_eq!(read_input(r#"{"a":1}"#).unwrap()["a"], 1);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("in.json");
        std::fs::write(&file, r#"{"vehicle":"x"}"#).unwrap();
        assert_eq!(
            read_input(&format!("@{}", file.display())).unwrap()["vehicle"],
            "x"
        );
        assert!(read_input("not json").is_err());
    }
}
