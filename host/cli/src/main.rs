//! `hane`: run AI-agent tools as sandboxed WebAssembly operations.

mod op;
mod scaffold;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Runs untrusted tool code as WebAssembly components under fuel, memory,
/// time and capability limits.
#[derive(Parser)]
#[command(name = "hane", version, about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Work with operations: run, inspect and create them.
    #[command(subcommand)]
    Op(op::OpCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Op(cmd) => op::main(cmd),
    }
}
