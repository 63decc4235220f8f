//! What every command shares to do its work: the store flag, the async
//! runtime, how a failure becomes an exit code, `--input`, the default
//! paths, the in-process server a CLI driver needs, and the stop signal.
//! Commands use this layer and [`crate::output`]; none uses another.

use crate::exit;
use crate::input::input_text;
use crate::terminal::terminal_text;
use anyhow::Context as _;
use clap::Args;
use hane_coordinator::ActivationError;
use hane_coordinator::RunError;
use hane_coordinator::Services;
use hane_coordinator::conversation::ConversationError;
use hane_store::StoreError;
use std::path::PathBuf;
use std::process::ExitCode;

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
    if e.downcast_ref::<UsageError>().is_some() {
        return exit::USAGE;
    }
    // A file named on the command line that cannot be read, or not within
    // its cap, is the caller's to fix.
    if e.downcast_ref::<hane_delivery::ConfigError>().is_some()
        || e.downcast_ref::<hane_core::file::ReadError>().is_some()
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

/// Reads `--input`: JSON, `@FILE` or `@-` (see [`input_text`]).
pub(crate) fn read_input(input: &str) -> anyhow::Result<serde_json::Value> {
    let text = input_text(input)?;
    serde_json::from_str(&text).context("--input is not JSON")
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
    if !cfg!(feature = "containers") {
        // This build runs no coding CLIs: the runtime refuses the run.
        return Ok(None);
    }
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
    #[cfg(feature = "containers")]
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

/// The store the CLI uses when none is named: `HANE_STORE`, else the
/// default path. An empty `HANE_STORE` counts as unset, as every `HANE_`
/// variable does: as a path it would name no file (SQLite takes the empty
/// path for a temporary database, dropped at exit).
pub fn default_store_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("HANE_STORE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    Some(default_data_dir()?.join("hane.db"))
}

/// `$XDG_DATA_HOME/hane`, else `~/.local/share/hane`.
pub(crate) fn default_data_dir() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share"))
        })?;
    Some(data.join("hane"))
}

/// Watches for SIGTERM and ctrl-c from now on: the future resolves on
/// either. Called before the listener is bound, so a SIGTERM sent as soon
/// as the address is in use is caught rather than killing the process.
pub(crate) fn stopped() -> anyhow::Result<impl Future<Output = anyhow::Result<()>>> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch for SIGTERM")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            ctrl_c = tokio::signal::ctrl_c() => ctrl_c.context("cannot watch for ctrl-c")?,
        }
        Ok(())
    })
}

/// What is wrong with a command's arguments, found only once it ran (a
/// schedule or profile that does not exist): exit 2, as clap's own.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(pub(crate) String);

#[cfg(test)]
mod tests {
    use super::*;

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
