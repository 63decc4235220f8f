use std::path::PathBuf;

/// Why a container could not be started, waited for or cleaned up.
///
/// Each variant names what failed and where: the path, the runtime and the
/// step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContainerError {
    /// The runtime's program was not found.
    #[error("{runtime} not found{}; run `cargo xtask provision` or install it", .path.as_ref().map(|p| format!(" at {}", p.display())).unwrap_or_else(|| " on PATH".into()))]
    RuntimeNotFound {
        /// `bwrap` or `runc`.
        runtime: &'static str,
        /// The path tried, or `None` when PATH was searched.
        path: Option<PathBuf>,
    },
    /// The command does not exist inside the container.
    #[error("command {} not found in the container (root {})", .command.display(), .root.display())]
    CommandNotFound {
        /// `command[0]` as given.
        command: PathBuf,
        /// The root filesystem it was looked for in.
        root: PathBuf,
    },
    /// The root filesystem directory does not exist.
    #[error("root filesystem {} is not a directory", .path.display())]
    RootFs {
        /// The directory given as `RootFs::Dir`.
        path: PathBuf,
    },
    /// A bind mount's source does not exist on the host.
    #[error("mount source {} (for {}) does not exist", .source_path.display(), .target.display())]
    MountSource {
        /// The missing host path.
        source_path: PathBuf,
        /// Where it was to be mounted.
        target: PathBuf,
    },
    /// A field of the spec is unusable.
    #[error("invalid container spec: {field} {message}")]
    InvalidSpec {
        /// The field of `ContainerSpec`.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A cgroup operation failed.
    #[error("cgroup: {step} {}: {source}", .path.display())]
    Cgroup {
        /// What was being done (`create`, `write memory limit`, `move the child in`, ...).
        step: &'static str,
        /// The cgroup file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Setting up the network namespace or a service's listener failed.
    #[error("network namespace: {step}: {source}")]
    Network {
        /// What was being done (`unshare`, `bring lo up`, `listen on 127.0.0.1:PORT`, ...).
        step: String,
        /// The error.
        source: std::io::Error,
    },
    /// Starting or driving the runtime failed.
    #[error("{runtime}: {step}: {source}")]
    Runtime {
        /// `bwrap` or `runc`.
        runtime: &'static str,
        /// What was being done (`spawn`, `read child pid`, `write config.json`, ...).
        step: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The runtime refused or failed to start the container; `message` is
    /// what it said.
    #[error("{runtime} failed to start the container: {message}")]
    StartFailed {
        /// `bwrap` or `runc`.
        runtime: &'static str,
        /// The runtime's own message.
        message: String,
    },
    /// A limit cannot be applied on this host.
    #[error("limit {limit}: {message}")]
    Limit {
        /// Which limit (`open_files`, `address_space`, ...).
        limit: &'static str,
        /// Why.
        message: String,
    },
}

impl ContainerError {
    pub(crate) fn runtime(
        runtime: &'static str,
        step: &'static str,
    ) -> impl FnOnce(std::io::Error) -> Self {
        move |source| ContainerError::Runtime {
            runtime,
            step,
            source,
        }
    }

    pub(crate) fn cgroup(
        step: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| ContainerError::Cgroup { step, path, source }
    }
}
