//! The default runtime: bubblewrap, no daemon.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use rustix::io::{FdFlags, fcntl_setfd};
use tokio::io::AsyncReadExt;

use crate::cgroup::Cgroup;
use crate::container::Container;
use crate::netns::{self, NetNamespace};
use crate::spec::{MountKind, masked_is_dir};
use crate::{BoxFuture, ContainerError, ContainerSpec, RootFs, Runtime, default_masked_paths};

const NAME: &str = "bwrap";

/// Runs containers with bubblewrap.
///
/// Each container gets new pid, mount, ipc, uts, cgroup and network
/// namespaces (bubblewrap brings `lo` up; hane binds the services'
/// listeners in it); bubblewrap drops every capability, dies with hane
/// (`--die-with-parent`) and starts the command in a new session. The
/// command starts only once it is in its cgroup, its rlimits are set and
/// the listeners exist (`--info-fd`, `--block-fd`).
#[derive(Debug, Clone)]
pub struct Bubblewrap {
    bwrap: PathBuf,
}

impl Bubblewrap {
    /// Uses the bubblewrap program at `bwrap`.
    pub fn new(bwrap: impl Into<PathBuf>) -> Self {
        Bubblewrap {
            bwrap: bwrap.into(),
        }
    }

    /// Finds `bwrap` on PATH.
    ///
    /// # Errors
    ///
    /// [`ContainerError::RuntimeNotFound`] when it is not there.
    pub fn find() -> Result<Self, ContainerError> {
        crate::find_on_path("bwrap")
            .map(Bubblewrap::new)
            .ok_or(ContainerError::RuntimeNotFound {
                runtime: NAME,
                path: None,
            })
    }

    /// The program this runtime runs.
    pub fn path(&self) -> &Path {
        &self.bwrap
    }

    fn args(spec: &ContainerSpec, info_fd: i32, block_fd: i32) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut push = |items: &[&dyn AsRef<std::ffi::OsStr>]| {
            args.extend(items.iter().map(|i| i.as_ref().to_os_string()));
        };
        push(&[
            &"--die-with-parent",
            &"--cap-drop",
            &"ALL",
            &"--unshare-net",
            &"--new-session",
            &"--unshare-pid",
            &"--unshare-ipc",
            &"--unshare-uts",
            &"--unshare-cgroup-try",
            &"--hostname",
            &"hane",
        ]);
        match &spec.root {
            RootFs::HostReadOnly => push(&[&"--ro-bind", &"/", &"/"]),
            RootFs::Dir(dir) => push(&[&"--ro-bind", dir, &"/"]),
        }
        push(&[&"--proc", &"/proc", &"--dev", &"/dev", &"--tmpfs", &"/tmp"]);
        let mask =
            |push: &mut dyn FnMut(&[&dyn AsRef<std::ffi::OsStr>]), host: &Path, target: &Path| {
                match masked_is_dir(host) {
                    Some(true) => push(&[&"--tmpfs", &target]),
                    Some(false) => push(&[&"--ro-bind", &"/dev/null", &target]),
                    None => {}
                }
            };
        if spec.root == RootFs::HostReadOnly {
            for path in default_masked_paths() {
                mask(&mut push, &path, &path);
            }
        }
        for mount in &spec.mounts {
            match &mount.kind {
                MountKind::Bind { source, writable } => push(&[
                    if *writable { &"--bind" } else { &"--ro-bind" },
                    source,
                    &mount.target,
                ]),
                MountKind::Tmpfs { size_bytes } => push(&[
                    &"--size",
                    &size_bytes.to_string(),
                    &"--tmpfs",
                    &mount.target,
                ]),
                MountKind::Masked => {
                    if let Some(host) = spec.host_path_before(mount) {
                        mask(&mut push, &host, &mount.target);
                    }
                }
            }
        }
        push(&[
            &"--chdir",
            &spec.cwd,
            &"--info-fd",
            &info_fd.to_string(),
            &"--block-fd",
            &block_fd.to_string(),
            &"--",
        ]);
        args.extend(spec.command.iter().cloned());
        args
    }

    async fn run(&self, spec: ContainerSpec) -> Result<Container, ContainerError> {
        spec.validate()?;
        if !self.bwrap.is_file() {
            return Err(ContainerError::RuntimeNotFound {
                runtime: NAME,
                path: Some(self.bwrap.clone()),
            });
        }
        let cgroup = Cgroup::create(&spec.limits)?;
        let deadline = spec
            .limits
            .wall
            .map(|wall| tokio::time::Instant::now() + wall);
        let handle = tokio::runtime::Handle::current();

        let (mut child, info, block) = {
            // bubblewrap passes every inheritable descriptor on to the
            // command: only the child's ends of the two pipes may be, and
            // the lock keeps another container's runtime from inheriting
            // them too.
            let _spawning = crate::SPAWN.lock().unwrap_or_else(|e| e.into_inner());
            let pipe = |step| {
                rustix::pipe::pipe().map_err(|e| ContainerError::Runtime {
                    runtime: NAME,
                    step,
                    source: e.into(),
                })
            };
            crate::sys::close_on_exec_above_stderr().map_err(|e| ContainerError::Runtime {
                runtime: NAME,
                step: "mark hane's descriptors close-on-exec",
                source: e,
            })?;
            let (info_read, info_write) = pipe("create the info pipe")?;
            let (block_read, block_write) = pipe("create the block pipe")?;
            for ours in [&info_read, &block_write] {
                fcntl_setfd(ours, FdFlags::CLOEXEC).map_err(|e| ContainerError::Runtime {
                    runtime: NAME,
                    step: "create the pipes",
                    source: e.into(),
                })?;
            }
            let args = Self::args(&spec, info_write.as_raw_fd(), block_read.as_raw_fd());
            let mut command = tokio::process::Command::new(&self.bwrap);
            command
                .args(&args)
                .env_clear()
                .envs(spec.environment())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let child = crate::on_lasting_thread(move || {
                let _runtime = handle.enter();
                command.spawn()
            })
            .map_err(ContainerError::runtime(NAME, "spawn"))?;
            drop((info_write, block_read));
            (child, info_read, block_write)
        };
        let mut container = Container {
            runtime: NAME,
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child,
            forwarders: Vec::new(),
            deadline,
            exit: None,
            runc: None,
            killed: false,
            cgroup,
            _netns: None,
        };

        let info = tokio::task::spawn_blocking(move || read_info(info))
            .await
            .map_err(|e| ContainerError::Runtime {
                runtime: NAME,
                step: "read the child pid",
                source: std::io::Error::other(e),
            })?;
        let prepared = match info {
            Ok(pid) => Self::prepare(&mut container, pid, &spec, block),
            Err(error) => Err(ContainerError::StartFailed {
                runtime: NAME,
                message: error.to_string(),
            }),
        };
        match prepared {
            Ok(()) => Ok(container),
            Err(error) => Err(Self::why_it_stopped(&mut container).await.unwrap_or(error)),
        }
    }

    /// Moves the child into the cgroup, sets its rlimits, binds the
    /// services' listeners in its network namespace and releases it. The
    /// child waits on the block pipe before it forks the command, so
    /// everything the command starts is born in the cgroup and under the
    /// rlimits.
    fn prepare(
        container: &mut Container,
        pid: u32,
        spec: &ContainerSpec,
        block: OwnedFd,
    ) -> Result<(), ContainerError> {
        for pid in std::iter::once(pid).chain(descendants(pid)) {
            container.cgroup.add(pid)?;
            crate::set_rlimits(pid, &spec.limits)?;
        }
        let netns = NetNamespace::of_process(pid)?;
        container.forwarders = netns::forward(netns.listen(&spec.services)?)?;
        container._netns = Some(netns);
        let mut block = std::fs::File::from(block);
        block
            .write_all(b"1")
            .map_err(ContainerError::runtime(NAME, "release the child"))?;
        tracing::debug!(pid, cgroup = ?container.cgroup.dirs(), "bwrap container started");
        Ok(())
    }

    /// When bubblewrap itself stopped while the start was prepared (a mount
    /// it could not make, say), what it said.
    async fn why_it_stopped(container: &mut Container) -> Option<ContainerError> {
        let waited =
            tokio::time::timeout(std::time::Duration::from_secs(1), container.child.wait()).await;
        if !matches!(waited, Ok(Ok(status)) if !status.success()) {
            return None;
        }
        let mut message = String::new();
        let mut stderr = container.stderr.take()?;
        let _ = stderr.read_to_string(&mut message).await;
        let message = message.trim();
        (!message.is_empty()).then(|| ContainerError::StartFailed {
            runtime: NAME,
            message: message.to_owned(),
        })
    }
}

/// Reads bubblewrap's `--info-fd` JSON up to its end and returns
/// `child-pid`.
fn read_info(fd: OwnedFd) -> std::io::Result<u32> {
    let mut file = std::fs::File::from(fd);
    let mut text = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "bubblewrap ended before reporting its child",
            ));
        }
        text.extend_from_slice(&buf[..n]);
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&text) {
            return value["child-pid"]
                .as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| std::io::Error::other("no child-pid in bubblewrap's info"));
        }
    }
}

/// The descendants of `pid` now, from /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                    out.push(child);
                    stack.push(child);
                }
            }
        }
    }
    out
}

impl Runtime for Bubblewrap {
    fn name(&self) -> &'static str {
        NAME
    }

    fn start(&self, spec: ContainerSpec) -> BoxFuture<'_, Result<Container, ContainerError>> {
        Box::pin(self.run(spec))
    }
}
