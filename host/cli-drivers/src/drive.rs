//! One run of a CLI: its configuration written into a per-run directory,
//! the CLI started in its container with the prompt on stdin, its stdout
//! and stderr kept within their caps, until hane ends the run or the CLI
//! exits.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hane_container::{ContainerLimits, ContainerSpec, Exit, Mount, RootFs, Service};
use hane_coordinator::{
    ExternalDriver, ExternalRun,
    drivers::{RunEnd, UNTRUSTED_NOTE},
    release::LoadedAgent,
};
use hane_core::BoxFuture;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

use crate::{
    CLI_MEMORY_BYTES, CLI_PIDS, Cli, MAX_EVENT_BYTES, MAX_LINE_BYTES, MAX_STDERR_BYTES,
    RESULT_GRACE, RUN_DIR, SERVICE_PORT, SETTLE,
};

/// What [`CliConfig`] found for one run, when it started.
pub(crate) struct Prepared {
    pub(crate) cli: Cli,
    pub(crate) source: CliSource,
    pub(crate) container: Arc<dyn hane_container::Runtime>,
    pub(crate) server: SocketAddr,
}

/// Where a run's CLI is: the container's root, and the `node_modules`
/// holding the CLI as the container sees it.
pub(crate) struct CliSource {
    pub(crate) root: RootFs,
    pub(crate) modules: PathBuf,
    /// A host directory bound read-only at its own path.
    pub(crate) bind: Option<PathBuf>,
    pub(crate) version: String,
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
    pub(crate) fn base_url(&self) -> String {
        format!("http://127.0.0.1:{SERVICE_PORT}")
    }

    /// The per-run directory inside the container.
    pub(crate) fn run_dir(&self) -> &'static str {
        RUN_DIR
    }
}

/// How to start a CLI: its arguments after the binary, and its
/// environment beyond the common part.
pub(crate) struct Launch {
    pub(crate) args: Vec<OsString>,
    pub(crate) env: Vec<(String, String)>,
}

/// The environment variable inside the container that holds the run's
/// token; the CLIs' configurations name it.
pub(crate) const TOKEN_VAR: &str = "HANE_RUN_TOKEN";

/// The prompt a CLI gets on stdin: the agent's instructions, then the
/// run's input as the `llm` driver gives it.
///
/// For a conversation's message, the conversation so far comes before the
/// input, as text: hane builds it from its own store, never from a CLI's
/// session files.
pub(crate) fn prompt(
    agent: &LoadedAgent,
    history: &[hane_model_types::Message],
    input: &Value,
) -> String {
    let task = serde_json::to_string_pretty(input).unwrap_or_else(|_| input.to_string());
    let instructions = agent
        .manifest
        .spec
        .instructions
        .as_deref()
        .unwrap_or_default()
        .trim();
    let mut earlier = String::new();
    for message in history {
        let who = match message.role {
            hane_model_types::Role::User => "The person",
            hane_model_types::Role::Assistant => "You",
        };
        let text: Vec<&str> = message
            .content
            .iter()
            .filter_map(|c| match c {
                hane_model_types::Content::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        earlier.push_str(&format!("{who}:\n{}\n\n", text.join("\n")));
    }
    if earlier.is_empty() {
        format!("{instructions}\n\nThe task's input, as JSON:\n{task}")
    } else {
        format!(
            "{instructions}\n\nThe conversation so far:\n\n{earlier}The task's input, as JSON:\n{task}"
        )
    }
}

impl ExternalDriver for Prepared {
    fn drive<'a>(
        self: Box<Self>,
        run: ExternalRun<'a>,
    ) -> BoxFuture<'a, (Result<(), RunEnd>, hane_core::CliOutput)> {
        Box::pin(drive(*self, run))
    }
}

/// Drives one run of a CLI: returns how it ended and what the CLI
/// printed. The container is gone when this returns.
async fn drive(
    prepared: Prepared,
    run: ExternalRun<'_>,
) -> (Result<(), RunEnd>, hane_core::CliOutput) {
    let mut output = hane_core::CliOutput {
        driver: prepared.cli.name().to_owned(),
        version: prepared.source.version.clone(),
        events: Vec::new(),
        events_omitted_bytes: 0,
        stderr_tail: String::new(),
        exit: "not started".to_owned(),
    };
    let ended = drive_container(prepared, run, &mut output).await;
    (ended, output)
}

async fn drive_container(
    prepared: Prepared,
    run: ExternalRun<'_>,
    output: &mut hane_core::CliOutput,
) -> Result<(), RunEnd> {
    let ExternalRun {
        agent,
        token,
        input,
        history,
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
    let source = prepared.source;
    let mut command = vec![OsString::from(source.modules.join(cli.binary()))];
    command.extend(launch.args);
    let mut mounts: Vec<Mount> = source
        .bind
        .iter()
        .map(|clis| Mount::bind(clis, clis, false))
        .collect();
    mounts.push(Mount::bind(dir.path(), RUN_DIR, true));
    let spec = ContainerSpec {
        root: source.root,
        mounts,
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
        limits: ContainerLimits {
            memory_bytes: Some(CLI_MEMORY_BYTES),
            pids: Some(CLI_PIDS),
            ..ContainerLimits::default()
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
    let prompt = prompt(agent, history, &input);
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
