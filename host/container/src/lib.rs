//! Containers for native tools: a [`ContainerSpec`] run by bubblewrap
//! ([`Bubblewrap`], the default: no daemon) or by an OCI runtime ([`Runc`]),
//! behind one [`Runtime`] trait.
//!
//! What every container gets, whichever runtime runs it:
//! - **network**: a namespace holding only `lo`. For each [`Service`] hane
//!   listens inside it on `127.0.0.1:port` and forwards every connection to
//!   the service's host address; no other host port (IPv4 or IPv6) and no
//!   outside address is reachable.
//! - **limits**: memory and pids through a cgroup created under hane's own
//!   (cgroup v1 or v2), the wall clock, `RLIMIT_NOFILE` and `RLIMIT_AS`.
//!   The whole tree ends with the container (a pid namespace, and every
//!   process of the cgroup is killed).
//! - **isolation**: new pid, mount, ipc, uts, cgroup and network
//!   namespaces, no capabilities, a fresh `/proc`, a minimal `/dev`, a
//!   tmpfs `/tmp`, a read-only root, exactly the spec's environment, no
//!   descriptor of hane's but the command's stdio, and
//!   under [`RootFs::HostReadOnly`] the host's secrets hidden
//!   ([`default_masked_paths`], plus any [`Mount::masked`]).
//!
//! hane creates the cgroups itself, under its own: it needs write access
//! there (root, or a delegated cgroup on v2). Without it a start fails with
//! [`ContainerError::Cgroup`] naming the directory.
//!
//! ```no_run
//! use hane_container::{Bubblewrap, ContainerLimits, ContainerSpec, Exit, RootFs, Runtime};
//! use tokio::io::AsyncReadExt;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Bubblewrap::find()?;
//! let mut container = runtime
//!     .start(ContainerSpec {
//!         root: RootFs::HostReadOnly,
//!         mounts: Vec::new(),
//!         env: vec![("PATH".into(), "/usr/bin:/bin".into())],
//!         cwd: "/".into(),
//!         command: vec!["/bin/echo".into(), "hello".into()],
//!         services: Vec::new(),
//!         limits: ContainerLimits::default(),
//!     })
//!     .await?;
//! let mut out = String::new();
//! container.stdout().unwrap().read_to_string(&mut out).await?;
//! assert_eq!(container.wait().await?, Exit::Code(0));
//! assert_eq!(out, "hello\n");
//! # Ok(())
//! # }
//! ```

mod bwrap;
mod cgroup;
mod container;
mod error;
mod image;
mod netns;
mod runc;
mod spec;
mod sys;

use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::sync::{Mutex, OnceLock};

pub use bwrap::Bubblewrap;
pub use container::{Container, Exit};
pub use error::ContainerError;
pub use image::{
    ImageDigest, ImageError, ImageRecipe, ImageStore, OciLayout, PROFILE_ANNOTATION, StoredImage,
    host_debian_mirror,
};
pub use runc::Runc;
pub use spec::{ContainerLimits, ContainerSpec, Mount, RootFs, Service, default_masked_paths};

pub use hane_core::BoxFuture;

/// A container runtime.
pub trait Runtime: Send + Sync {
    /// `bwrap` or `runc`.
    fn name(&self) -> &'static str;

    /// Starts `spec`; the command runs when the returned future resolves.
    ///
    /// # Errors
    ///
    /// A [`ContainerError`] naming what failed: the command not found in
    /// the container, a missing mount source, the cgroup, the network
    /// namespace, a limit, or the runtime itself.
    fn start(&self, spec: ContainerSpec) -> BoxFuture<'_, Result<Container, ContainerError>>;
}

/// The default runtime: bubblewrap when it is on PATH, else runc.
///
/// # Errors
///
/// [`ContainerError::RuntimeNotFound`] (for bubblewrap) when neither is
/// there.
pub fn find_runtime() -> Result<Box<dyn Runtime>, ContainerError> {
    match Bubblewrap::find() {
        Ok(bwrap) => Ok(Box::new(bwrap)),
        Err(error) => Runc::find()
            .map(|runc| Box::new(runc) as Box<dyn Runtime>)
            .map_err(|_| error),
    }
}

/// Held while a runtime is spawned with descriptors it must inherit, so
/// that no other container's runtime inherits them too.
pub(crate) static SPAWN: Mutex<()> = Mutex::new(());

type Job = Box<dyn FnOnce() + Send>;

/// Runs `f` on one thread that lives as long as hane. Runtimes are spawned
/// there: Linux's parent-death signal (`--die-with-parent`) fires when the
/// *thread* that forked a process ends, so a runtime spawned from a
/// short-lived thread would be killed with it.
pub(crate) fn on_lasting_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    static SPAWNER: OnceLock<Sender<Job>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("hane-container-spawner".into())
            .spawn(move || {
                for job in queue {
                    job();
                }
            })
            .expect("spawn the container spawner thread");
        jobs
    });
    let (done, result) = std::sync::mpsc::sync_channel(1);
    spawner
        .send(Box::new(move || {
            let _ = done.send(f());
        }))
        .expect("the spawner thread lives as long as the process");
    result.recv().expect("the spawner thread runs every job")
}

pub(crate) fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| PathBuf::from(dir).join(program))
        .find(|path| path.is_file())
}

/// Sets the rlimits of `limits` on a process that has not yet started the
/// command; what it starts inherits them.
pub(crate) fn set_rlimits(pid: u32, limits: &ContainerLimits) -> Result<(), ContainerError> {
    use rustix::process::{Pid, Resource, Rlimit, getrlimit, prlimit};
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return Ok(());
    };
    for (limit, resource, value) in [
        ("open_files", Resource::Nofile, limits.open_files),
        ("address_space", Resource::As, limits.address_space),
    ] {
        let Some(value) = value else { continue };
        check_rlimit(limit, getrlimit(resource), value)?;
        let new = Rlimit {
            current: Some(value),
            maximum: Some(value),
        };
        prlimit(Some(pid), resource, new).map_err(|e| ContainerError::Limit {
            limit,
            message: format!("setting it to {value}: {e}"),
        })?;
    }
    Ok(())
}

/// An rlimit cannot go above hane's own hard limit without
/// `CAP_SYS_RESOURCE`; say so rather than fail later.
pub(crate) fn check_rlimit(
    limit: &'static str,
    own: rustix::process::Rlimit,
    value: u64,
) -> Result<(), ContainerError> {
    match own.maximum {
        Some(hard) if value > hard => Err(ContainerError::Limit {
            limit,
            message: format!("{value} is above hane's hard limit {hard}"),
        }),
        _ => Ok(()),
    }
}
