//! What a container is: its root, mounts, environment, command, services and
//! limits, independent of the runtime that runs it.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::ContainerError;

/// Everything a runtime needs to start one container.
///
/// Nothing of hane's own process leaks in: the environment is exactly
/// [`env`](Self::env), the network is a namespace holding only `lo` with a
/// listener for each of [`services`](Self::services), and with
/// [`RootFs::HostReadOnly`] the paths of [`default_masked_paths`] are hidden.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    /// The root filesystem, always read-only.
    pub root: RootFs,
    /// Mounts applied in order after the root, `/proc`, `/dev`, `/tmp` and the
    /// default masks, so a later mount may cover an earlier one.
    pub mounts: Vec<Mount>,
    /// The only environment inside: nothing is inherited from hane. Two
    /// variables are added when it does not set them, the same for every
    /// runtime (bubblewrap always sets `PWD`, runc sets `HOME` from the
    /// root's `/etc/passwd`): `PWD` (the [`cwd`](Self::cwd)) and `HOME` (`/`).
    pub env: Vec<(String, String)>,
    /// The working directory inside the container.
    pub cwd: PathBuf,
    /// The argv; `command[0]` is a path inside the container (or a name looked
    /// up in the `PATH` of [`env`](Self::env)).
    pub command: Vec<OsString>,
    /// The host services reachable from inside, each at `127.0.0.1:port`.
    pub services: Vec<Service>,
    /// Memory, pids, wall clock and rlimits.
    pub limits: ContainerLimits,
}

/// The root filesystem of a container. Either way it is mounted read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootFs {
    /// The host's `/`, read-only, with [`default_masked_paths`] hidden.
    HostReadOnly,
    /// An unpacked root filesystem in this directory.
    Dir(PathBuf),
}

/// One mount inside the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub(crate) kind: MountKind,
    pub(crate) target: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MountKind {
    Bind { source: PathBuf, writable: bool },
    Tmpfs { size_bytes: u64 },
    Masked,
}

impl Mount {
    /// Binds the host path `source` at `target`, read-only unless `writable`.
    pub fn bind(source: impl Into<PathBuf>, target: impl Into<PathBuf>, writable: bool) -> Self {
        Mount {
            kind: MountKind::Bind {
                source: source.into(),
                writable,
            },
            target: target.into(),
        }
    }

    /// A fresh writable tmpfs of at most `size_bytes` at `target`.
    pub fn tmpfs(target: impl Into<PathBuf>, size_bytes: u64) -> Self {
        Mount {
            kind: MountKind::Tmpfs { size_bytes },
            target: target.into(),
        }
    }

    /// Hides `target`: a directory becomes an empty read-only one, a file an
    /// empty one (`/dev/null`). A path that does not exist is left alone.
    /// Use it for whatever else must not be seen, such as a store directory.
    pub fn masked(target: impl Into<PathBuf>) -> Self {
        Mount {
            kind: MountKind::Masked,
            target: target.into(),
        }
    }

    /// Where the mount appears inside the container.
    pub fn target(&self) -> &Path {
        &self.target
    }
}

/// A host service reachable from inside the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Service {
    /// Listened on at `127.0.0.1:port` inside the container.
    pub port: u16,
    /// Where hane forwards each accepted connection.
    pub host: SocketAddr,
}

/// Limits of one container; `None` leaves a limit unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerLimits {
    /// Memory of the whole tree (cgroup `memory.max` / `memory.limit_in_bytes`,
    /// swap included where the host has it).
    pub memory_bytes: Option<u64>,
    /// Processes and threads of the whole tree (cgroup `pids.max`).
    pub pids: Option<u64>,
    /// Wall clock from start; past it the tree is killed and
    /// [`Exit::WallClock`](crate::Exit::WallClock) reported.
    pub wall: Option<Duration>,
    /// `RLIMIT_NOFILE`, soft and hard. It cannot exceed hane's own hard limit.
    pub open_files: Option<u64>,
    /// `RLIMIT_AS` of each process, soft and hard.
    pub address_space: Option<u64>,
}

/// The host paths hidden by default under [`RootFs::HostReadOnly`].
///
/// Homes (`/root`, `/home`: credentials, shell histories, hane's default
/// store under `~/.local/share/hane`), runtime state (`/run`: sockets,
/// secrets of services), service state and logs (`/var/lib`, `/var/log`,
/// `/var/backups` with its copies of the password files, `/var/mail`,
/// `/var/spool`, `/var/tmp`, `/var/cache`), other mounted filesystems
/// (`/mnt`, `/media`), password and host key files (`/etc/shadow`,
/// `/etc/gshadow` and their backups, `/etc/sudoers*`, `/etc/ssh`), and the
/// store named by `HANE_STORE` (its directory) or the `hane` directory under
/// `XDG_DATA_HOME`, when hane's environment sets them.
pub fn default_masked_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = [
        "/root",
        "/home",
        "/run",
        "/var/lib",
        "/var/log",
        "/var/backups",
        "/var/mail",
        "/var/spool",
        "/var/tmp",
        "/var/cache",
        "/mnt",
        "/media",
        "/etc/shadow",
        "/etc/shadow-",
        "/etc/gshadow",
        "/etc/gshadow-",
        "/etc/sudoers",
        "/etc/sudoers.d",
        "/etc/ssh",
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect();
    if let Some(store) = std::env::var_os("HANE_STORE").map(PathBuf::from)
        && let Some(dir) = store.parent().filter(|d| d.is_absolute())
    {
        paths.push(dir.to_path_buf());
    }
    if let Some(data) = std::env::var_os("XDG_DATA_HOME").map(PathBuf::from)
        && data.is_absolute()
    {
        paths.push(data.join("hane"));
    }
    paths
}

/// A masked path as seen on the host, to choose between an empty directory
/// and an empty file; `None` when it does not exist (nothing to hide).
pub(crate) fn masked_is_dir(host_path: &Path) -> Option<bool> {
    std::fs::symlink_metadata(host_path)
        .ok()
        .map(|m| m.is_dir())
}

impl ContainerSpec {
    /// The host path holding `inside` (a path in the container), through the
    /// root or the bind mount that covers it; `None` when a tmpfs or a mask
    /// covers it.
    fn host_path(&self, inside: &Path) -> Option<PathBuf> {
        self.host_path_through(&self.mounts, inside)
    }

    /// Whether `inside` names a file in the container.
    fn is_file_inside(&self, inside: &Path) -> bool {
        self.resolve_inside(inside).is_some_and(|p| p.is_file())
    }

    /// The host path `inside` names in the container, following symlinks
    /// as the container sees them (a root's `/bin -> usr/bin` into a bound
    /// `/usr`); `None` when it is not there or under a tmpfs or a mask,
    /// which hold nothing hane knows of.
    fn resolve_inside(&self, inside: &Path) -> Option<PathBuf> {
        const MAX_SYMLINKS: u32 = 40;
        let mut todo: Vec<OsString> = Vec::new();
        let push = |todo: &mut Vec<OsString>, path: &Path| {
            for part in path.components().rev() {
                match part {
                    std::path::Component::Normal(name) => todo.push(name.to_owned()),
                    std::path::Component::ParentDir => todo.push("..".into()),
                    _ => {}
                }
            }
        };
        push(&mut todo, inside);
        let mut current = PathBuf::from("/");
        let mut symlinks = 0;
        while let Some(part) = todo.pop() {
            if part == ".." {
                current.pop();
                continue;
            }
            let next = current.join(&part);
            let Some(host) = self.host_path(&next) else {
                // A fresh mount (a tmpfs, a mask, `/tmp`) holds only the
                // mount points of the binds below it: go on toward one.
                let toward_a_bind = self.mounts.iter().any(|m| {
                    matches!(m.kind, MountKind::Bind { .. }) && m.target.starts_with(&next)
                });
                if toward_a_bind {
                    current = next;
                    continue;
                }
                return None;
            };
            match std::fs::symlink_metadata(&host) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    symlinks += 1;
                    let target = std::fs::read_link(&host).ok()?;
                    if symlinks > MAX_SYMLINKS {
                        return None;
                    }
                    if target.is_absolute() {
                        current = PathBuf::from("/");
                    }
                    push(&mut todo, &target);
                }
                Ok(_) => current = next,
                Err(_) => return None,
            }
        }
        self.host_path(&current)
    }

    /// The host path a masked mount hides, as the mounts before it leave it.
    pub(crate) fn host_path_before(&self, masked: &Mount) -> Option<PathBuf> {
        let index = self
            .mounts
            .iter()
            .position(|m| std::ptr::eq(m, masked))
            .unwrap_or(self.mounts.len());
        self.host_path_through(&self.mounts[..index], &masked.target)
    }

    fn host_path_through(&self, mounts: &[Mount], inside: &Path) -> Option<PathBuf> {
        self.cover(mounts, inside).map(|(path, _)| path)
    }

    /// The host path holding `inside` through `mounts` and the root, and
    /// whether the mount that holds it is writable; `None` under a fresh
    /// mount (a tmpfs, a mask, `/proc`, `/dev`, `/tmp`).
    fn cover(&self, mounts: &[Mount], inside: &Path) -> Option<(PathBuf, bool)> {
        for mount in mounts.iter().rev() {
            if let Ok(rest) = inside.strip_prefix(&mount.target) {
                return match &mount.kind {
                    MountKind::Bind { source, writable } => Some((source.join(rest), *writable)),
                    MountKind::Tmpfs { .. } | MountKind::Masked => None,
                };
            }
        }
        if ["/proc", "/dev", "/tmp"]
            .iter()
            .any(|fresh| inside.starts_with(fresh))
        {
            return None;
        }
        let rest = inside.strip_prefix("/").unwrap_or(inside);
        match &self.root {
            RootFs::HostReadOnly => {
                if default_masked_paths()
                    .iter()
                    .any(|masked| inside.starts_with(masked))
                {
                    return None;
                }
                Some((Path::new("/").join(rest), false))
            }
            RootFs::Dir(dir) => Some((dir.join(rest), false)),
        }
    }

    /// The environment the command gets: [`env`](Self::env) with `PWD` and
    /// `HOME` when it sets none.
    pub fn environment(&self) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        if !env.iter().any(|(k, _)| k == "PWD") {
            env.push(("PWD".into(), self.cwd.to_string_lossy().into_owned()));
        }
        if !env.iter().any(|(k, _)| k == "HOME") {
            env.push(("HOME".into(), "/".into()));
        }
        env
    }

    /// Checks what can be checked before a runtime starts: the command is
    /// there, the root and bind sources exist, the paths are absolute.
    pub(crate) fn validate(&self) -> Result<(), ContainerError> {
        if let RootFs::Dir(dir) = &self.root
            && !dir.is_dir()
        {
            return Err(ContainerError::RootFs { path: dir.clone() });
        }
        for (index, mount) in self.mounts.iter().enumerate() {
            if !mount.target.is_absolute() {
                return Err(ContainerError::InvalidSpec {
                    field: "mounts",
                    message: format!("target {} is not absolute", mount.target.display()),
                });
            }
            if let MountKind::Bind { source, .. } = &mount.kind
                && !source.exists()
            {
                return Err(ContainerError::MountSource {
                    source_path: source.clone(),
                    target: mount.target.clone(),
                });
            }
            // A runtime cannot create a mount point in a read-only root.
            if !matches!(mount.kind, MountKind::Masked)
                && let Some((host, writable)) = self.cover(&self.mounts[..index], &mount.target)
                && !writable
                && std::fs::symlink_metadata(&host).is_err()
            {
                return Err(ContainerError::InvalidSpec {
                    field: "mounts",
                    message: format!(
                        "target {} does not exist in the read-only root and no tmpfs or writable mount holds it",
                        mount.target.display()
                    ),
                });
            }
        }
        if !self.cwd.is_absolute() {
            return Err(ContainerError::InvalidSpec {
                field: "cwd",
                message: format!("{} is not absolute", self.cwd.display()),
            });
        }
        // A cwd under a tmpfs or a mask cannot be checked from here.
        if self.host_path(&self.cwd).is_some()
            && !self.resolve_inside(&self.cwd).is_some_and(|p| p.is_dir())
        {
            return Err(ContainerError::InvalidSpec {
                field: "cwd",
                message: format!("{} is not a directory in the container", self.cwd.display()),
            });
        }
        let Some(program) = self.command.first() else {
            return Err(ContainerError::InvalidSpec {
                field: "command",
                message: "is empty".into(),
            });
        };
        let program = Path::new(program);
        let found = if program.is_absolute() {
            self.is_file_inside(program)
        } else {
            let path = self
                .env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.as_str())
                .unwrap_or("");
            path.split(':')
                .filter(|d| d.starts_with('/'))
                .any(|dir| self.is_file_inside(&Path::new(dir).join(program)))
        };
        if !found {
            return Err(ContainerError::CommandNotFound {
                command: program.to_path_buf(),
                root: match &self.root {
                    RootFs::HostReadOnly => PathBuf::from("/"),
                    RootFs::Dir(dir) => dir.clone(),
                },
            });
        }
        for service in &self.services {
            if self
                .services
                .iter()
                .filter(|s| s.port == service.port)
                .count()
                > 1
            {
                return Err(ContainerError::InvalidSpec {
                    field: "services",
                    message: format!("port {} is listed twice", service.port),
                });
            }
        }
        Ok(())
    }
}
