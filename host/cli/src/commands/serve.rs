//! `hane serve`: the HTTP API (`/v1/agents/...`) over the embedded store,
//! and the runs the active release's schedules start.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use hane_delivery::ConfigError;

use crate::context::StoreArg;
use crate::context::stopped;
use crate::exit;
use crate::runtime::{ENVIRONMENT_HELP, open_runtime};

/// How long a stopping server waits for requests in progress (a start
/// with `wait: true` lasts as long as its run).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

#[derive(Args)]
#[command(after_long_help = ENVIRONMENT_HELP)]
pub struct ServeArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Where to listen: HOST:PORT (port 0 picks a free one).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    listen: String,
    /// Time from a request head's first byte to its last; a slower client
    /// is disconnected.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    header_timeout: Duration,
    /// Time a connection may wait without starting a request.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    idle_timeout: Duration,
    /// Time from a request's head to the end of its body (slower is 408).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    body_timeout: Duration,
    /// Connections served at once; one more is answered 503 and closed.
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Runs driven here at once; past it, a new run its agent's own driver
    /// drives waits queued for whichever `hane serve` on the store has
    /// room first [default: no limit].
    #[arg(long, value_name = "N", env = "HANE_MAX_RUNS",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_runs: Option<u32>,
}

impl ServeArgs {
    fn config(&self) -> hane_server::ServeConfig {
        hane_server::ServeConfig {
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            body_timeout: self.body_timeout,
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
        }
    }
}

/// How often `hane serve` looks for runs queued for any process, besides
/// whenever one of its own runs ends.
const QUEUE_LOOK: Duration = Duration::from_millis(250);

/// A duration such as `10s`, `500ms` or `2m`, more than zero.
fn duration(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("it must be more than zero".to_owned()),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e} (write it as `10s`, `500ms` or `2m`)")),
    }
}

/// No key could use the server.
#[derive(Debug)]
struct NoKeys;

impl std::fmt::Display for NoKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "no API key exists, so no request could be let in: create one with `hane keys create NAME --role operator` (with the same --store)",
        )
    }
}

impl std::error::Error for NoKeys {}

pub(crate) fn main(args: ServeArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "error: {}",
                crate::terminal::terminal_text(&format!("{e:#}"))
            );
            // Nothing a key could use, or a malformed setting: the command
            // as given cannot serve.
            let usage =
                e.downcast_ref::<NoKeys>().is_some() || e.downcast_ref::<ConfigError>().is_some();
            ExitCode::from(if usage { exit::USAGE } else { exit::FAILURE })
        }
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let path = args.store.path()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let served = runtime.block_on(async {
        let services = open_runtime(&path).await?;
        let agents = services.runs.clone();
        // Approved actions whose approver stopped before sending them go
        // out now, once each.
        let resuming = services.approvals.clone();
        tokio::spawn(async move {
            match resuming.resume_actions().await {
                Ok(recovered) if !recovered.resumed.is_empty() || !recovered.unknown.is_empty() => {
                    eprintln!(
                        "outbound actions: {} approved ones delivered, {} left mid-delivery now unknown",
                        recovered.resumed.len(),
                        recovered.unknown.len()
                    );
                }
                Ok(_) => {}
                Err(e) => eprintln!("outbound actions could not be resumed: {e}"),
            }
        });
        if agents.registry().api_keys().list().await?.is_empty() {
            return Err(NoKeys.into());
        }
        // Workflow cases a stopped process left running go on at their
        // step; a step's run is never started twice.
        match services.workflows.resume_cases().await {
            Ok(0) => {}
            Ok(n) => eprintln!("workflow cases: {n} left running go on"),
            Err(e) => eprintln!("workflow cases could not be resumed: {e}"),
        }
        // The registry names the store as it may be shown: a database by
        // server and name, never with its password.
        let store = agents.registry().path().display().to_string();
        match agents.registry().releases().active_number().await? {
            Some(n) => eprintln!("serving release {n} from {store}"),
            None => eprintln!(
                "no release is active in {store}: runs are refused until `hane release activate DIR`"
            ),
        }
        // Runs a dead process left live are ended here as soon as its
        // lease lapses; another process's lease is looked at twice in
        // each of this one's.
        let taking_over = tokio::spawn({
            let agents = agents.clone();
            async move {
                let mut ticks = tokio::time::interval(agents.lease().ttl() / 2);
                loop {
                    ticks.tick().await;
                    crate::runtime::take_over(&agents, true).await;
                }
            }
        });
        // Runs queued for any process start here while there is room.
        agents.queue().set_max_runs(args.max_runs.map(|n| n as usize));
        let queue = tokio::spawn({
            let agents = agents.clone();
            async move { agents.queue().serve_queue(QUEUE_LOOK).await }
        });
        let signalled = stopped()?;
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        eprintln!("listening on http://{}", listener.local_addr()?);
        // The CLI drivers' containers reach the Model Gateway and the MCP
        // server here.
        #[cfg(feature = "containers")]
        crate::runtime::server_address().set(listener.local_addr()?);
        // The release's schedules start their runs from here, beside the
        // server, until it stops.
        let (stop_schedules, schedules_stopping) = tokio::sync::oneshot::channel::<()>();
        let scheduler = tokio::spawn(
            hane_coordinator::schedule::Scheduler::new(&services).run(async {
                let _ = schedules_stopping.await;
            }),
        );
        let (stop, stopping) = tokio::sync::oneshot::channel::<()>();
        let lease = agents.lease().clone();
        let server = hane_server::serve_with(listener, services, args.config(), async {
            let _ = stopping.await;
        });
        tokio::pin!(server);
        let served: anyhow::Result<()> = tokio::select! {
            served = &mut server => served.map_err(Into::into),
            () = lease.lost() => Err(anyhow::anyhow!(
                "this process's lease on the store lapsed before it could be renewed (the store was unreachable or the process was stopped for longer than {} s): another process may take over its runs, so it stops serving",
                lease.ttl().as_secs_f64()
            )),
            signal = signalled => match signal {
                Ok(()) => {
                    eprintln!(
                        "stopping: waiting up to {} s for requests in progress",
                        SHUTDOWN_GRACE.as_secs()
                    );
                    let _ = stop.send(());
                    match tokio::time::timeout(SHUTDOWN_GRACE, server).await {
                        Ok(served) => served.map_err(Into::into),
                        Err(_) => Ok(()),
                    }
                }
                Err(e) => Err(e),
            },
        };
        // A pass in progress finishes, so no tick it claimed is left
        // without its outcome.
        let _ = stop_schedules.send(());
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, scheduler).await;
        taking_over.abort();
        queue.abort();
        // What this process still runs is taken over at once by another,
        // not when its lease would lapse.
        if !lease.lapsed()
            && let Err(e) = lease.release().await
        {
            eprintln!("the lease could not be given up (it lapses by itself): {e}");
        }
        served?;
        Ok(())
    });
    // A run still going on is not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    served
}
