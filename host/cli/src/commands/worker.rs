//! `hane worker`: runs operations sent by a coordinator in another process.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::context::stopped;
use crate::runtime::secret_from_env;
use anyhow::Context as _;
use clap::Args;
use clap::builder::TypedValueParser as _;
use hane_manager::{
    LocalConfig, LocalOperationManager, Worker, WorkerAddr, WorkerListener, WorkerSecret,
};
use hane_sandbox::Sandbox;

/// How long a stopping worker waits for work on blocking threads.
const SHUTDOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Args)]
pub struct WorkerArgs {
    /// Where to listen: tcp://HOST:PORT, HOST:PORT (port 0 picks a free
    /// one) or unix:/PATH.
    #[arg(long, value_name = "ADDR")]
    listen: WorkerAddr,
    /// A file holding the secret clients must prove they share; without
    /// it the secret comes from $HANE_WORKER_SECRET.
    #[arg(long, value_name = "PATH")]
    secret_file: Option<PathBuf>,
    /// Operations run at once [default: the number of CPUs].
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
    /// Connections served at once before their handshake is over, a
    /// quarter of them from one address; one more closes the oldest of its
    /// address's, or of the address holding the most (each has 10 s to
    /// authenticate).
    #[arg(long, value_name = "N", default_value_t = hane_manager::DEFAULT_MAX_UNAUTHENTICATED,
          value_parser = clap::value_parser!(u16).range(1..).map(usize::from))]
    max_unauthenticated: usize,
}

pub fn main(args: WorkerArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "error: {}",
                crate::terminal::terminal_text(&format!("{e:#}"))
            );
            ExitCode::FAILURE
        }
    }
}

fn secret(args: &WorkerArgs) -> anyhow::Result<WorkerSecret> {
    if let Some(file) = &args.secret_file {
        return Ok(WorkerSecret::from_file(file)?);
    }
    secret_from_env(
        "the worker needs a shared secret to authenticate its clients: pass --secret-file PATH or set $HANE_WORKER_SECRET",
    )
}

fn serve(args: WorkerArgs) -> anyhow::Result<()> {
    let secret = secret(&args)?;
    let concurrency = args
        .concurrency
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
        .max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let served = runtime.block_on(async {
        let mut config = crate::runtime::sandbox_config();
        // Loading a component instantiates it once to describe it, beside
        // the calls running.
        let instances = concurrency.saturating_mul(2).max(8);
        config.max_instances(u32::try_from(instances).unwrap_or(u32::MAX));
        let sandbox = Sandbox::new(&config)?;
        let manager = LocalOperationManager::new(
            sandbox,
            crate::runtime::builtins(),
            LocalConfig::new().concurrency(concurrency),
        );
        let stop = stopped()?;
        let listener = WorkerListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let mut stdout = std::io::stdout();
        writeln!(stdout, "listening on {}", listener.local_addr())?;
        stdout.flush()?;
        let worker = Worker::new(manager, secret).max_unauthenticated(args.max_unauthenticated);
        tokio::select! {
            () = worker.serve(listener) => {}
            stop = stop => stop?,
        }
        Ok(())
    });
    // A component still compiling on a blocking thread is not waited for.
    runtime.shutdown_timeout(SHUTDOWN_TIMEOUT);
    served
}
