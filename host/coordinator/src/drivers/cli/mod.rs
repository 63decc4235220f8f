//! The CLI drivers (`codex`, `claude`, `opencode`): a run whose driver is
//! a coding CLI is an attached run whose token holder is that CLI,
//! started headless in a container.
//!
//! For each run the driver writes the CLI's configuration into a
//! per-run directory (a temporary directory removed when the run ends;
//! nothing of the host's `HOME`), and starts the CLI in a container
//! ([`hane_container::Runtime`]) whose network holds only loopback and
//! one [`Service`]: `127.0.0.1:`[`SERVICE_PORT`] inside, forwarded to
//! hane's HTTP server, which serves both the Model Gateway (`/v1/...`)
//! and the run's MCP server (`/mcp`). The run's token is the CLI's API
//! key and bearer; every built-in tool of the CLI is off, so the only
//! tools it has are the run's, through MCP and the Tool Gateway. The
//! prompt goes on stdin, which is then closed.
//!
//! The run ends when the CLI's `submit_result` is accepted (the
//! container is then stopped, after at most [`SETTLE`] for the CLI to
//! exit on its own), when it is cancelled (the container is
//! killed at once), or when `maxSeconds` pass; a CLI that exits without
//! a result fails the run with its own last error, or its stderr's tail.
//! The CLI's stdout (its JSON event stream) and the tail of its stderr
//! are kept, capped ([`MAX_EVENT_BYTES`], [`MAX_STDERR_BYTES`]), as the
//! run's [`hane_core::CliOutput`] session event.

mod claude;
mod codex;
mod opencode;
mod transcript;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use hane_container::{ContainerSpec, Exit, Limits, Mount, RootFs, Service};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

pub(crate) use transcript::CliTranscript;

use super::{BoxFuture, RunEnd, UNTRUSTED_NOTE};
use crate::gateway::RunToken;
use crate::release::LoadedAgent;

/// The port inside the container at which hane's HTTP server (Model
/// Gateway and MCP server) is reached.
pub const SERVICE_PORT: u16 = 4000;

/// The most bytes of a CLI's stdout kept in the run's record; the rest
/// is counted, not kept.
pub const MAX_EVENT_BYTES: usize = 256 * 1024;

/// The most bytes of one line of a CLI's stdout kept; a longer line is
/// cut, and still counts whole against [`MAX_EVENT_BYTES`].
pub const MAX_LINE_BYTES: usize = 16 * 1024;

/// How much of the end of a CLI's stderr is kept.
pub const MAX_STDERR_BYTES: usize = 8 * 1024;

/// The memory a CLI's container may use.
pub const CLI_MEMORY_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// The processes and threads a CLI's container may have.
pub const CLI_PIDS: u64 = 512;

/// How long, after the CLI exits, a result it submitted just before may
/// take to be accepted before the run fails for having none.
const RESULT_GRACE: Duration = Duration::from_millis(500);

/// How long a CLI whose result was accepted may take to exit on its own
/// (writing out its events) before its container is stopped.
const SETTLE: Duration = Duration::from_secs(2);

/// Where the per-run directory appears inside the container (the CLI's
/// `HOME`; under the container's own `/tmp`, which is writable, so the
/// mount point can be made on a read-only root).
const RUN_DIR: &str = "/tmp/hane/run";

/// The address of hane's HTTP server, which the containers' service
/// forwards to. Set after the runtime is built (the server starts after
/// it); clones share it.
#[derive(Debug, Clone, Default)]
pub struct ServerAddress(Arc<RwLock<Option<SocketAddr>>>);

impl ServerAddress {
    /// Sets the address.
    pub fn set(&self, address: SocketAddr) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(address);
    }

    /// The address, once set.
    pub fn get(&self) -> Option<SocketAddr> {
        *self.0.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where the CLI drivers find their CLIs, which container runtime runs
/// them, and where hane's HTTP server listens.
///
/// | setting | default |
/// |---|---|
/// | `clis` | none: CLI runs are refused, saying to set it |
/// | `container` | none: CLI runs are refused, saying to set it |
/// | `server` | unset: CLI runs are refused until hane's HTTP server is listening |
#[derive(Clone, Default)]
pub struct CliConfig {
    clis: Option<PathBuf>,
    container: Option<Arc<dyn hane_container::Runtime>>,
    server: ServerAddress,
}

impl std::fmt::Debug for CliConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliConfig")
            .field("clis", &self.clis)
            .field("container", &self.container.as_ref().map(|c| c.name()))
            .field("server", &self.server.get())
            .finish()
    }
}

impl CliConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The `node_modules` directory the CLIs' npm packages are installed
    /// in (`@openai/codex`, `@anthropic-ai/claude-code`, `opencode-ai` and
    /// their platform packages).
    pub fn clis(&mut self, node_modules: impl Into<PathBuf>) -> &mut Self {
        self.clis = Some(node_modules.into());
        self
    }

    /// The container runtime the CLIs run in.
    pub fn container(&mut self, runtime: Arc<dyn hane_container::Runtime>) -> &mut Self {
        self.container = Some(runtime);
        self
    }

    /// The handle through which hane's HTTP server address is set; the
    /// runtime keeps a clone.
    pub fn server(&self) -> &ServerAddress {
        &self.server
    }

    /// What a run of `agent` needs, or what is missing, in words.
    pub(crate) fn prepare(&self, cli: Cli, agent: &LoadedAgent) -> Result<Prepared, String> {
        let Some(clis) = &self.clis else {
            return Err(format!(
                "no directory of installed CLIs is configured (set HANE_CLIS to the node_modules holding {})",
                cli.package()
            ));
        };
        let binary = clis.join(cli.binary());
        if !binary.is_file() {
            return Err(format!(
                "{} is not installed in {}: {} is missing (npm install {})",
                cli.package(),
                clis.display(),
                binary.display(),
                cli.package()
            ));
        }
        let version = installed_version(clis, cli)?;
        if let Some(profile) = &agent.manifest.spec.cli_profile
            && profile.cli_version != version
        {
            return Err(format!(
                "its cliProfile pins {} {} but {} {version} is installed in {}",
                cli.package(),
                profile.cli_version,
                cli.package(),
                clis.display()
            ));
        }
        let Some(container) = self.container.clone() else {
            return Err(
                "no container runtime is configured (bubblewrap or runc; set HANE_CONTAINER_RUNTIME or install bwrap)"
                    .to_owned(),
            );
        };
        let Some(server) = self.server.get() else {
            return Err("hane's HTTP server is not listening, and the CLI reaches its model and tools only through it".to_owned());
        };
        Ok(Prepared {
            cli,
            clis: clis.clone(),
            version,
            container,
            server,
        })
    }
}

/// The installed version of `cli`'s npm package.
fn installed_version(clis: &Path, cli: Cli) -> Result<String, String> {
    let manifest = clis.join(cli.package()).join("package.json");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not JSON: {e}", manifest.display()))?;
    value["version"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{} has no version", manifest.display()))
}

/// One of the CLIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cli {
    Codex,
    Claude,
    Opencode,
}

impl Cli {
    /// The CLI of `driver`, when it is a CLI driver.
    pub(crate) fn of(driver: hane_core::Driver) -> Option<Cli> {
        match driver {
            hane_core::Driver::Codex => Some(Cli::Codex),
            hane_core::Driver::Claude => Some(Cli::Claude),
            hane_core::Driver::Opencode => Some(Cli::Opencode),
            hane_core::Driver::Scripted | hane_core::Driver::Llm => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Cli::Codex => "codex",
            Cli::Claude => "claude",
            Cli::Opencode => "opencode",
        }
    }

    /// The npm package whose version is the CLI's.
    fn package(self) -> &'static str {
        match self {
            Cli::Codex => "@openai/codex",
            Cli::Claude => "@anthropic-ai/claude-code",
            Cli::Opencode => "opencode-ai",
        }
    }

    /// The native binary, relative to `node_modules` (the node launchers
    /// are skipped).
    fn binary(self) -> &'static str {
        match self {
            Cli::Codex => "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
            Cli::Claude => "@anthropic-ai/claude-code-linux-x64/claude",
            Cli::Opencode => "opencode-linux-x64/bin/opencode",
        }
    }

    /// Writes the CLI's configuration into `dir` (the per-run directory,
    /// at [`RUN_DIR`] inside) and returns how to start it.
    fn launch(self, setup: &Setup<'_>, dir: &Path) -> std::io::Result<Launch> {
        match self {
            Cli::Codex => codex::launch(setup, dir),
            Cli::Claude => claude::launch(setup, dir),
            Cli::Opencode => opencode::launch(setup, dir),
        }
    }

    /// The error an event of the CLI's stdout reports, if it is one.
    fn error_of(self, event: &Value) -> Option<String> {
        match self {
            Cli::Codex => codex::error_of(event),
            Cli::Claude => claude::error_of(event),
            Cli::Opencode => opencode::error_of(event),
        }
    }
}

/// What [`CliConfig::prepare`] found for one run.
pub(crate) struct Prepared {
    cli: Cli,
    clis: PathBuf,
    version: String,
    container: Arc<dyn hane_container::Runtime>,
    server: SocketAddr,
}

/// What a CLI's configuration is written from.
pub(crate) struct Setup<'a> {
    /// The model's name, as the run's release defines it.
    pub(crate) model: &'a str,
    /// The model's context window and output cap.
    pub(crate) context_window: u64,
    pub(crate) max_output_tokens: u64,
    /// The system prompt: hane's note on untrusted tool output.
    pub(crate) system: &'a str,
    /// The run's token, for a CLI that takes its key only as a value.
    pub(crate) token: &'a str,
}

impl Setup<'_> {
    /// hane's HTTP server as the CLI reaches it inside the container.
    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{SERVICE_PORT}")
    }

    /// The per-run directory inside the container.
    fn run_dir(&self) -> &'static str {
        RUN_DIR
    }
}

/// How to start a CLI: its arguments after the binary, and its
/// environment beyond the common part.
struct Launch {
    args: Vec<OsString>,
    env: Vec<(String, String)>,
}

/// The environment variable inside the container that holds the run's
/// token; the CLIs' configurations name it.
const TOKEN_VAR: &str = "HANE_RUN_TOKEN";

/// The prompt a CLI gets on stdin: the agent's instructions, then the
/// run's input as the `llm` driver gives it.
pub(crate) fn prompt(agent: &LoadedAgent, input: &Value) -> String {
    let task = serde_json::to_string_pretty(input).unwrap_or_else(|_| input.to_string());
    let instructions = agent
        .manifest
        .spec
        .instructions
        .as_deref()
        .unwrap_or_default()
        .trim();
    format!("{instructions}\n\nThe task's input, as JSON:\n{task}")
}

/// One run of a CLI driver, as the runtime hands it over.
pub(crate) struct CliRun<'a> {
    pub(crate) prepared: Prepared,
    pub(crate) agent: &'a LoadedAgent,
    pub(crate) token: &'a RunToken,
    pub(crate) input: Value,
    pub(crate) model: &'a super::ModelInfo,
    /// Ends when the run ends on hane's side: `Ok` once `submit_result`
    /// accepted a result, else the gateway's stop (cancel, a limit,
    /// `maxSeconds`).
    pub(crate) ended: BoxFuture<'a, Result<(), RunEnd>>,
}

/// Drives one run of a CLI: returns how it ended and what the CLI
/// printed. The container is gone when this returns.
pub(crate) async fn drive(run: CliRun<'_>) -> (Result<(), RunEnd>, hane_core::CliOutput) {
    let cli = run.prepared.cli;
    let mut output = hane_core::CliOutput {
        driver: cli.name().to_owned(),
        version: run.prepared.version.clone(),
        events: Vec::new(),
        events_omitted_bytes: 0,
        stderr_tail: String::new(),
        exit: "not started".to_owned(),
    };
    let ended = drive_container(run, &mut output).await;
    (ended, output)
}

async fn drive_container(run: CliRun<'_>, output: &mut hane_core::CliOutput) -> Result<(), RunEnd> {
    let CliRun {
        prepared,
        agent,
        token,
        input,
        model,
        mut ended,
    } = run;
    let cli = prepared.cli;
    let failed = |what: String| RunEnd::Failed(format!("{}: {what}", cli.name()));
    let dir = tempfile::Builder::new()
        .prefix("hane-cli-")
        .tempdir()
        .map_err(|e| failed(format!("cannot make the run's directory: {e}")))?;
    let setup = Setup {
        model: &model.name,
        context_window: model.context_window,
        max_output_tokens: model.max_output_tokens,
        system: UNTRUSTED_NOTE,
        token: token.as_str(),
    };
    let launch = cli
        .launch(&setup, dir.path())
        .map_err(|e| failed(format!("cannot write its configuration: {e}")))?;
    let mut env = vec![
        ("HOME".to_owned(), RUN_DIR.to_owned()),
        ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ("TMPDIR".to_owned(), "/tmp".to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        (TOKEN_VAR.to_owned(), token.as_str().to_owned()),
    ];
    env.extend(launch.env);
    // The packages appear read-only at their own path, so that whatever
    // they name of themselves resolves as on the host.
    let mut command = vec![OsString::from(prepared.clis.join(cli.binary()))];
    command.extend(launch.args);
    let spec = ContainerSpec {
        root: RootFs::HostReadOnly,
        mounts: vec![
            Mount::bind(&prepared.clis, &prepared.clis, false),
            Mount::bind(dir.path(), RUN_DIR, true),
        ],
        env,
        // The container's own `/tmp` (the run's directory under it cannot
        // be checked as a cwd by the container's spec: `/tmp` is a fresh
        // mount).
        cwd: PathBuf::from("/tmp"),
        command,
        services: vec![Service {
            port: SERVICE_PORT,
            host: prepared.server,
        }],
        limits: Limits {
            memory_bytes: Some(CLI_MEMORY_BYTES),
            pids: Some(CLI_PIDS),
            ..Limits::default()
        },
    };
    let runtime = prepared.container.name();
    let mut container = prepared
        .container
        .start(spec)
        .await
        .map_err(|e| failed(format!("cannot start it in {runtime}: {e}")))?;
    tracing::info!(cli = cli.name(), runtime, "CLI started");
    output.exit = "running".to_owned();
    let stdout = container.stdout();
    let stderr = container.stderr();
    let stdin = container.stdin();
    let prompt = prompt(agent, &input);
    // The prompt is written beside the rest: a CLI that does not read it
    // must not hold the run up.
    let feeding = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(prompt.as_bytes()).await;
            let _ = stdin.shutdown().await;
        }
    });
    let events = Arc::new(Mutex::new(Events::default()));
    let reading = {
        let events = events.clone();
        tokio::spawn(async move {
            if let Some(stdout) = stdout {
                read_events(stdout, cli, &events).await;
            }
        })
    };
    let tail = Arc::new(Mutex::new(Vec::new()));
    let reading_err = {
        let tail = tail.clone();
        tokio::spawn(async move {
            if let Some(stderr) = stderr {
                read_tail(stderr, &tail).await;
            }
        })
    };
    let result = tokio::select! {
        biased;
        end = &mut ended => {
            // A CLI that holds its events until it exits (opencode) gets a
            // moment to write them once its result is accepted.
            output.exit = match &end {
                Ok(()) => match tokio::time::timeout(SETTLE, container.wait()).await {
                    Ok(exit) => describe_exit(&exit),
                    Err(_) => "stopped by hane".to_owned(),
                },
                Err(_) => "stopped by hane".to_owned(),
            };
            end
        }
        exit = container.wait() => {
            output.exit = describe_exit(&exit);
            // A result submitted just before the CLI exited is still
            // being accepted.
            match tokio::time::timeout(RESULT_GRACE, &mut ended).await {
                Ok(end) => end,
                Err(_) => {
                    drain(&mut [&mut None, &mut Some(reading_err)]).await;
                    let error = events
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .last_error
                        .clone()
                        .or_else(|| last_line(&tail));
                    Err(failed(format!(
                        "it exited ({}) without a result{}",
                        output.exit,
                        error.map(|e| format!(": {e}")).unwrap_or_default()
                    )))
                }
            }
        }
    };
    container.kill();
    drop(container);
    feeding.abort();
    drain(&mut [&mut Some(reading), &mut None]).await;
    let events = std::mem::take(&mut *events.lock().unwrap_or_else(|e| e.into_inner()));
    output.events = events.lines;
    output.events_omitted_bytes = events.omitted;
    output.stderr_tail =
        String::from_utf8_lossy(&tail.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    drop(dir);
    result
}

/// Waits a little for the readers to reach the end of their pipes (the
/// container is gone, so they end), then stops them.
async fn drain(tasks: &mut [&mut Option<tokio::task::JoinHandle<()>>]) {
    for task in tasks.iter_mut() {
        if let Some(task) = task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(1), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

fn describe_exit(exit: &Result<Exit, hane_container::ContainerError>) -> String {
    match exit {
        Ok(Exit::Code(code)) => format!("exit code {code}"),
        Ok(Exit::Signal(signal)) => format!("killed by signal {signal}"),
        Ok(Exit::OutOfMemory) => format!(
            "killed for using more than its {} MiB of memory",
            CLI_MEMORY_BYTES / 1024 / 1024
        ),
        Ok(Exit::WallClock) => "killed at its time limit".to_owned(),
        Err(e) => format!("lost: {e}"),
    }
}

/// What was kept of a CLI's stdout.
#[derive(Default)]
struct Events {
    lines: Vec<String>,
    kept: usize,
    omitted: u64,
    last_error: Option<String>,
}

impl Events {
    fn push(&mut self, cli: Cli, line: &[u8], whole: usize) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches('\r');
        if text.trim().is_empty() {
            return;
        }
        if let Ok(event) = serde_json::from_str::<Value>(text)
            && let Some(error) = cli.error_of(&event)
        {
            self.last_error = Some(cut(&error, 2000));
        }
        if self.kept + whole > MAX_EVENT_BYTES {
            self.omitted += whole as u64;
            return;
        }
        self.kept += whole;
        self.lines.push(text.to_owned());
    }
}

/// `text`, at most `max` bytes, cut at a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Reads `stdout` line by line into `events`: at most [`MAX_LINE_BYTES`]
/// of a line are held, whatever the CLI prints.
async fn read_events(mut stdout: impl AsyncRead + Unpin, cli: Cli, events: &Mutex<Events>) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::new();
    let mut whole = 0usize;
    loop {
        let n = match stdout.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for piece in buf[..n].split_inclusive(|b| *b == b'\n') {
            let (body, ends) = match piece.split_last() {
                Some((b'\n', body)) => (body, true),
                _ => (piece, false),
            };
            whole += body.len();
            let room = MAX_LINE_BYTES.saturating_sub(line.len());
            line.extend_from_slice(&body[..body.len().min(room)]);
            if ends {
                events
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(cli, &line, whole + 1);
                line.clear();
                whole = 0;
            }
        }
    }
    if !line.is_empty() {
        events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cli, &line, whole);
    }
}

/// Reads `stderr`, keeping its last [`MAX_STDERR_BYTES`].
async fn read_tail(mut stderr: impl AsyncRead + Unpin, tail: &Mutex<Vec<u8>>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > MAX_STDERR_BYTES {
            let extra = tail.len() - MAX_STDERR_BYTES;
            tail.drain(..extra);
        }
    }
}

/// The last non-empty line of stderr's tail.
fn last_line(tail: &Mutex<Vec<u8>>) -> Option<String> {
    let tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    let text = String::from_utf8_lossy(&tail);
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| cut(l, 2000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stdout_is_kept_in_lines_within_its_caps() {
        let mut text = String::new();
        text.push_str("{\"type\":\"error\",\"message\":\"boom\"}\n");
        text.push_str(&"x".repeat(MAX_LINE_BYTES * 2));
        text.push('\n');
        text.push_str("not json\n");
        let events = Mutex::new(Events::default());
        read_events(text.as_bytes(), Cli::Codex, &events).await;
        let events = events.into_inner().unwrap();
        assert_eq!(events.lines.len(), 3);
        assert_eq!(events.lines[1].len(), MAX_LINE_BYTES);
        assert_eq!(events.last_error.as_deref(), Some("boom"));

        let flood = "y".repeat(1000) + "\n";
        let events = Mutex::new(Events::default());
        read_events(flood.repeat(1000).as_bytes(), Cli::Codex, &events).await;
        let events = events.into_inner().unwrap();
        assert!(events.kept <= MAX_EVENT_BYTES);
        assert_eq!(events.kept as u64 + events.omitted, 1001 * 1000);
    }

    #[tokio::test]
    async fn stderr_keeps_its_tail() {
        let text = "a\n".repeat(MAX_STDERR_BYTES) + "the last words\n";
        let tail = Mutex::new(Vec::new());
        read_tail(text.as_bytes(), &tail).await;
        assert_eq!(tail.lock().unwrap().len(), MAX_STDERR_BYTES);
        assert_eq!(last_line(&tail).as_deref(), Some("the last words"));
    }
}
