//! `hane`: run AI-agent tools as sandboxed WebAssembly operations.

mod commands;
mod context;
mod input;
mod output;
mod runtime;
mod terminal;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[cfg(feature = "containers")]
use commands::image;
use commands::{
    approvals, ask, chat, demo, eval, keys, mcp, op, release, run, schedules, serve, session,
    store, worker, workflow,
};

/// Exit codes that tell kinds of failure apart, the same in every command.
mod exit {
    use hane_core::ErrorKind;

    pub const FAILURE: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const OPERATION_ERROR: u8 = 3;
    pub const LIMIT: u8 = 4;
    pub const DENIED: u8 = 5;

    /// The exit code of a failure of `kind`: what the caller got wrong is
    /// a usage error, a limit a limit, a refusal a denial.
    pub fn of_kind(kind: ErrorKind) -> u8 {
        match kind {
            ErrorKind::NotFound | ErrorKind::Invalid | ErrorKind::Conflict => USAGE,
            ErrorKind::LimitExceeded => LIMIT,
            ErrorKind::Forbidden => DENIED,
            _ => FAILURE,
        }
    }
}

/// Runs untrusted tool code as WebAssembly components under fuel, memory,
/// time and capability limits.
#[derive(Parser)]
#[command(name = "hane", version, about, max_term_width = 100)]
struct Cli {
    /// Print what hane does as it does it, on stderr: -v runs, tool calls,
    /// operations and actions; -vv and -vvv more. RUST_LOG, when set,
    /// chooses instead (e.g. RUST_LOG=hane_coordinator=debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Work with operations: run, inspect, compile and create them.
    #[command(subcommand)]
    Op(op::OpCommand),
    /// Read and fork session histories: list, show, fork, export.
    Session(session::SessionArgs),
    /// Run operations sent by a coordinator in another process, over TCP
    /// or a Unix socket.
    Worker(worker::WorkerArgs),
    /// Activate, list and roll back releases of agents and operations.
    Release(release::ReleaseArgs),
    /// Run an agent of the active release and print the run.
    Run(run::RunArgs),
    /// Say what you need in free text: reception picks the agent of the
    /// active release and derives its input, then runs it (or, with
    /// --dry-run, says what it would start).
    Ask(ask::AskArgs),
    /// List and show agent runs.
    Runs(run::RunsArgs),
    /// Evaluate an agent on an EvalSuite of the active release (shadow
    /// runs, each result compared with what its case expects); show, list
    /// and compare evaluations.
    Eval(eval::EvalArgs),
    /// Start, show and list cases of the active release's workflows,
    /// complete a person's task of a case, and resume cases left running.
    Workflow(workflow::WorkflowArgs),
    /// Talk with an agent of the active release: each line is a message of
    /// a conversation kept in the store, its reply printed as it happens.
    Chat(chat::ChatArgs),
    /// Activate `examples/` and run the scripted vehicle check twice: for
    /// a vehicle in the example fleet ledger and for one that is not.
    Demo(demo::DemoArgs),
    /// Serve the HTTP API (/v1/agents/...) over the store, for API keys
    /// made with `hane keys create`, and start the runs of the active
    /// release's schedules.
    Serve(serve::ServeArgs),
    /// List the active release's schedules with their next ticks, and the
    /// ticks `hane serve` handled.
    Schedules(schedules::SchedulesArgs),
    /// Create, list and remove the API keys `hane serve` accepts.
    Keys(keys::KeysArgs),
    /// List, show and decide the outbound actions agents propose (emails,
    /// text messages, calls, customer API calls).
    Approvals(approvals::ApprovalsArgs),
    /// Serve a run's tools over MCP on stdin and stdout, relayed to a
    /// `hane serve` (for MCP clients that spawn their servers).
    Mcp(mcp::McpArgs),
    /// Build and list the root-filesystem images the CLI drivers run in,
    /// which an agent's spec.cliProfile.image names by digest.
    #[cfg(feature = "containers")]
    Image(image::ImageArgs),
    /// Check the store (its commits against its mark, SQLite's integrity
    /// check, every stored item read, each problem reported by table and
    /// id), and recover a damaged one as it is.
    Store(store::StoreArgs),
}

/// The crates whose spans and events `-v` shows.
const HANE_CRATES: &[&str] = &[
    "hane",
    "hane_core",
    "hane_sandbox",
    "hane_store",
    "hane_delivery",
    "hane_manager",
    "hane_coordinator",
    "hane_server",
];

/// Prints the libraries' spans and events on stderr as plain text (no
/// terminal escapes): errors always (and the sandbox's warnings), more with
/// each `-v`, or what `RUST_LOG` says when it is set.
fn trace(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
        _ => {
            let level = match verbose {
                0 => "error",
                1 => "info",
                2 => "debug",
                _ => "trace",
            };
            // The sandbox's warnings (a component cache it cannot write,
            // a compiled component it passes over) are shown by default.
            let crates: Vec<String> = HANE_CRATES
                .iter()
                .map(|c| match (*c, verbose) {
                    ("hane_sandbox", 0) => format!("{c}=warn"),
                    _ => format!("{c}={level}"),
                })
                .collect();
            EnvFilter::new(format!("warn,{}", crates.join(",")))
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        // Its report of a failed write goes through `eprintln!`, which
        // panics when stderr is closed (`hane … 2>&1 | head`): a lost log
        // line must not stop a run.
        .log_internal_errors(false)
        .init();
}

// See the dependency's note in Cargo.toml.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Under an address-space limit (`RLIMIT_AS`), holds glibc's allocator to
/// two arenas. Each arena reserves 64 MiB of address space, and glibc
/// makes up to eight per core for threads that allocate at once: enough,
/// now and then, to take `hane run` past a 1 GiB limit (a component's
/// memory then cannot be mapped). Must run before any other thread starts.
#[cfg(target_env = "gnu")]
#[expect(
    unsafe_code,
    reason = "getrlimit and mallopt are C calls with no safe wrapper among the dependencies"
)]
fn fewer_arenas_under_an_address_space_limit() {
    // SAFETY: an all-zero rlimit is valid; getrlimit fills it in.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `limit` is a valid, writable rlimit.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) };
    if got == 0 && limit.rlim_cur != libc::RLIM_INFINITY {
        // SAFETY: called while this is the only thread; M_ARENA_MAX takes
        // any positive count.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
    }
}

fn main() -> ExitCode {
    #[cfg(target_env = "gnu")]
    fewer_arenas_under_an_address_space_limit();
    // `hane op run` needs the JSON Schema meta-schema's validator, which
    // takes longer to build than all the rest of its start-up: begun before
    // the arguments are parsed, on a thread of its own.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "op") && args.next().is_some_and(|a| a == "run") {
        hane_sandbox::Schema::warm_up();
    }
    let cli = Cli::parse();
    trace(cli.verbose);
    if let Err(e) = hane_sandbox::EngineKind::from_env() {
        eprintln!("error: ${}: {e}", hane_sandbox::ENGINE_ENV);
        return ExitCode::from(exit::USAGE);
    }
    if let Err(e) = runtime::max_instances_from_env() {
        eprintln!("error: {e}");
        return ExitCode::from(exit::USAGE);
    }
    match cli.command {
        Command::Op(cmd) => op::main(cmd),
        Command::Session(args) => session::main(args),
        Command::Worker(args) => worker::main(args),
        Command::Release(args) => release::main(args),
        Command::Run(args) => run::run(args),
        Command::Ask(args) => ask::main(args),
        Command::Runs(args) => run::runs(args),
        Command::Eval(args) => eval::main(args),
        Command::Workflow(args) => workflow::main(args),
        Command::Chat(args) => chat::main(args),
        Command::Demo(args) => demo::main(args),
        Command::Serve(args) => serve::main(args),
        Command::Schedules(args) => schedules::main(args),
        Command::Keys(args) => keys::main(args),
        Command::Approvals(args) => approvals::main(args),
        Command::Mcp(args) => mcp::main(args),
        #[cfg(feature = "containers")]
        Command::Image(args) => image::main(args),
        Command::Store(args) => store::main(args),
    }
}
