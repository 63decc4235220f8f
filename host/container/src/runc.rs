//! The OCI runtime: runc, from a `config.json` written with `oci-spec`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use oci_spec::runtime::{
    LinuxBuilder, LinuxCapabilitiesBuilder, LinuxNamespaceBuilder, LinuxNamespaceType,
    Mount as OciMount, MountBuilder, PosixRlimitBuilder, PosixRlimitType, ProcessBuilder,
    RootBuilder, Spec, SpecBuilder, UserBuilder,
};

use crate::cgroup::Cgroup;
use crate::container::{Container, RuncState};
use crate::netns::{self, NetNamespace};
use crate::spec::{MountKind, masked_is_dir};
use crate::{BoxFuture, ContainerError, ContainerSpec, RootFs, Runtime, default_masked_paths};

const NAME: &str = "runc";

/// Host paths not bound into a [`RootFs::HostReadOnly`] root: each gets a
/// fresh mount of its own (or, for `/sys`, none).
const NOT_BOUND: &[&str] = &["proc", "dev", "sys", "tmp"];

/// Runs containers with runc.
///
/// runc gets a bundle per container under its state directory: a
/// `config.json` with new pid, mount, ipc, uts and cgroup namespaces, the
/// network namespace hane made (only `lo`, with the services' listeners),
/// no capabilities, `noNewPrivileges`, and `linux.cgroupsPath` inside the
/// container's cgroup under hane's own. runc cannot pivot into the host's
/// `/` itself, so [`RootFs::HostReadOnly`] is a root of read-only recursive
/// binds of the host's top-level entries, on a directory of mount points
/// made once under `state_dir/roots` and shared by every container.
#[derive(Debug, Clone)]
pub struct Runc {
    runc: PathBuf,
    state_dir: PathBuf,
}

impl Runc {
    /// Uses the runc program at `runc`, with its state (`runc --root`) and
    /// the containers' bundles under `state_dir`, which is created if
    /// missing. runc wants an absolute state path that is not a symlink;
    /// it is made so here.
    ///
    /// # Errors
    ///
    /// [`ContainerError::Runtime`] when `state_dir` cannot be created.
    pub fn new(
        runc: impl Into<PathBuf>,
        state_dir: impl Into<PathBuf>,
    ) -> Result<Self, ContainerError> {
        let state_dir = state_dir.into();
        std::fs::create_dir_all(&state_dir)
            .map_err(ContainerError::runtime(NAME, "create the state directory"))?;
        let state_dir = state_dir
            .canonicalize()
            .map_err(ContainerError::runtime(NAME, "resolve the state directory"))?;
        Ok(Runc {
            runc: runc.into(),
            state_dir,
        })
    }

    /// Finds `runc` on PATH, with its state under the temporary directory
    /// (`hane-runc-UID`).
    ///
    /// # Errors
    ///
    /// [`ContainerError::RuntimeNotFound`] when it is not there.
    pub fn find() -> Result<Self, ContainerError> {
        let runc = crate::find_on_path("runc").ok_or(ContainerError::RuntimeNotFound {
            runtime: NAME,
            path: None,
        })?;
        let uid = rustix::process::getuid().as_raw();
        Runc::new(runc, std::env::temp_dir().join(format!("hane-runc-{uid}")))
    }

    /// The program this runtime runs.
    pub fn path(&self) -> &Path {
        &self.runc
    }

    async fn run(&self, spec: ContainerSpec) -> Result<Container, ContainerError> {
        spec.validate()?;
        if !self.runc.is_file() {
            return Err(ContainerError::RuntimeNotFound {
                runtime: NAME,
                path: Some(self.runc.clone()),
            });
        }
        let cgroup = Cgroup::create(&spec.limits)?;
        let netns = NetNamespace::create()?;
        let listeners = netns.listen(&spec.services)?;
        let deadline = spec
            .limits
            .wall
            .map(|wall| tokio::time::Instant::now() + wall);
        let id = cgroup.name().to_owned();
        let bundle = self.state_dir.join("bundles").join(&id);
        let state = RuncState {
            runc: self.runc.clone(),
            root: self.state_dir.join("state"),
            id: id.clone(),
            log: bundle.join("runc.log"),
            bundle: bundle.clone(),
        };
        // Removes the bundle if a step below fails.
        let cleanup = BundleGuard(Some(bundle.clone()));
        std::fs::create_dir_all(&bundle)
            .map_err(ContainerError::runtime(NAME, "create the bundle"))?;
        let config = config(&spec, &self.state_dir.join("roots"), &netns, &cgroup)?;
        config
            .save(bundle.join("config.json"))
            .map_err(|e| ContainerError::Runtime {
                runtime: NAME,
                step: "write config.json",
                source: std::io::Error::other(e),
            })?;
        let mut child = {
            let _spawning = crate::SPAWN.lock().unwrap_or_else(|e| e.into_inner());
            let mut command = tokio::process::Command::new(&self.runc);
            command
                .env_clear()
                .arg("--root")
                .arg(&state.root)
                .arg("--log")
                .arg(&state.log)
                .args(["--log-format", "json", "run", "--bundle"])
                .arg(&bundle)
                .arg(&id)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let handle = tokio::runtime::Handle::current();
            crate::on_lasting_thread(move || {
                let _runtime = handle.enter();
                command.spawn()
            })
            .map_err(ContainerError::runtime(NAME, "spawn"))?
        };
        std::mem::forget(cleanup);
        let container = Container {
            runtime: NAME,
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child,
            forwarders: netns::forward(listeners)?,
            deadline,
            exit: None,
            runc: Some(state),
            killed: false,
            cgroup,
            _netns: Some(netns),
        };
        tracing::debug!(id, cgroup = ?container.cgroup.dirs(), "runc container started");
        Ok(container)
    }
}

struct BundleGuard(Option<PathBuf>);

impl Drop for BundleGuard {
    fn drop(&mut self) {
        if let Some(bundle) = self.0.take() {
            let _ = std::fs::remove_dir_all(bundle);
        }
    }
}

fn oci_error(step: &'static str) -> impl FnOnce(oci_spec::OciSpecError) -> ContainerError {
    move |e| ContainerError::Runtime {
        runtime: NAME,
        step,
        source: std::io::Error::other(e),
    }
}

fn mount(
    destination: impl Into<PathBuf>,
    typ: &str,
    source: impl Into<PathBuf>,
    options: &[&str],
) -> Result<OciMount, ContainerError> {
    MountBuilder::default()
        .destination(destination.into())
        .typ(typ)
        .source(source.into())
        .options(options.iter().map(|o| (*o).to_owned()).collect::<Vec<_>>())
        .build()
        .map_err(oci_error("build a mount"))
}

fn masked_mount(host: &Path, target: &Path) -> Result<Option<OciMount>, ContainerError> {
    Ok(match masked_is_dir(host) {
        Some(true) => Some(mount(
            target,
            "tmpfs",
            "tmpfs",
            &["nosuid", "nodev", "mode=755"],
        )?),
        Some(false) => Some(mount(target, "bind", "/dev/null", &["bind", "ro"])?),
        None => None,
    })
}

/// The bundle's `config.json`.
fn config(
    spec: &ContainerSpec,
    roots: &Path,
    netns: &NetNamespace,
    cgroup: &Cgroup,
) -> Result<Spec, ContainerError> {
    let mut mounts = Vec::new();
    let root = match &spec.root {
        RootFs::Dir(dir) => dir.clone(),
        RootFs::HostReadOnly => {
            let (skeleton, binds) = host_root(roots)?;
            for host in binds {
                mounts.push(mount(
                    &host,
                    "bind",
                    &host,
                    &["rbind", "rro", "nosuid", "nodev"],
                )?);
            }
            skeleton
        }
    };
    mounts.push(mount(
        "/proc",
        "proc",
        "proc",
        &["nosuid", "noexec", "nodev"],
    )?);
    mounts.push(mount(
        "/dev",
        "tmpfs",
        "tmpfs",
        &["nosuid", "strictatime", "mode=755", "size=65536k"],
    )?);
    mounts.push(mount(
        "/dev/pts",
        "devpts",
        "devpts",
        &[
            "nosuid",
            "noexec",
            "newinstance",
            "ptmxmode=0666",
            "mode=0620",
        ],
    )?);
    mounts.push(mount(
        "/dev/shm",
        "tmpfs",
        "shm",
        &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
    )?);
    mounts.push(mount(
        "/dev/mqueue",
        "mqueue",
        "mqueue",
        &["nosuid", "noexec", "nodev"],
    )?);
    mounts.push(mount(
        "/tmp",
        "tmpfs",
        "tmpfs",
        &["nosuid", "nodev", "mode=1777"],
    )?);
    if spec.root == RootFs::HostReadOnly {
        for path in default_masked_paths() {
            mounts.extend(masked_mount(&path, &path)?);
        }
    }
    for m in &spec.mounts {
        match &m.kind {
            MountKind::Bind { source, writable } => mounts.push(mount(
                &m.target,
                "bind",
                source,
                &["rbind", if *writable { "rw" } else { "rro" }],
            )?),
            MountKind::Tmpfs { size_bytes } => mounts.push(mount(
                &m.target,
                "tmpfs",
                "tmpfs",
                &[
                    "nosuid",
                    "nodev",
                    "mode=1777",
                    &format!("size={size_bytes}"),
                ],
            )?),
            MountKind::Masked => {
                if let Some(host) = spec.host_path_before(m) {
                    mounts.extend(masked_mount(&host, &m.target)?);
                }
            }
        }
    }

    let mut rlimits = Vec::new();
    let own_nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let nofile = spec
        .limits
        .open_files
        .or(own_nofile.maximum)
        .unwrap_or(1024);
    crate::check_rlimit("open_files", own_nofile, nofile)?;
    rlimits.push(
        PosixRlimitBuilder::default()
            .typ(PosixRlimitType::RlimitNofile)
            .soft(nofile)
            .hard(nofile)
            .build()
            .map_err(oci_error("build an rlimit"))?,
    );
    if let Some(bytes) = spec.limits.address_space {
        crate::check_rlimit(
            "address_space",
            rustix::process::getrlimit(rustix::process::Resource::As),
            bytes,
        )?;
        rlimits.push(
            PosixRlimitBuilder::default()
                .typ(PosixRlimitType::RlimitAs)
                .soft(bytes)
                .hard(bytes)
                .build()
                .map_err(oci_error("build an rlimit"))?,
        );
    }
    let none = HashSet::new();
    let process = ProcessBuilder::default()
        .terminal(false)
        .user(
            UserBuilder::default()
                .uid(0u32)
                .gid(0u32)
                .build()
                .map_err(oci_error("build the user"))?,
        )
        .args(
            spec.command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>(),
        )
        .env(
            spec.environment()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
        )
        .cwd(spec.cwd.clone())
        .capabilities(
            LinuxCapabilitiesBuilder::default()
                .bounding(none.clone())
                .effective(none.clone())
                .inheritable(none.clone())
                .permitted(none.clone())
                .ambient(none)
                .build()
                .map_err(oci_error("build the capabilities"))?,
        )
        .rlimits(rlimits)
        .no_new_privileges(true)
        .build()
        .map_err(oci_error("build the process"))?;
    let mut namespaces = Vec::new();
    for typ in [
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Mount,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Cgroup,
    ] {
        namespaces.push(
            LinuxNamespaceBuilder::default()
                .typ(typ)
                .build()
                .map_err(oci_error("build a namespace"))?,
        );
    }
    namespaces.push(
        LinuxNamespaceBuilder::default()
            .typ(LinuxNamespaceType::Network)
            .path(netns.path())
            .build()
            .map_err(oci_error("build a namespace"))?,
    );
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .cgroups_path(cgroup.runc_path())
        .masked_paths(strings(&[
            "/proc/acpi",
            "/proc/asound",
            "/proc/kcore",
            "/proc/keys",
            "/proc/latency_stats",
            "/proc/timer_list",
            "/proc/timer_stats",
            "/proc/sched_debug",
            "/proc/scsi",
        ]))
        .readonly_paths(strings(&[
            "/proc/bus",
            "/proc/fs",
            "/proc/irq",
            "/proc/sys",
            "/proc/sysrq-trigger",
        ]))
        .build()
        .map_err(oci_error("build the linux section"))?;
    SpecBuilder::default()
        .version("1.0.2")
        .hostname("hane")
        .root(
            RootBuilder::default()
                .path(root)
                .readonly(true)
                .build()
                .map_err(oci_error("build the root"))?,
        )
        .mounts(mounts)
        .process(process)
        .linux(linux)
        .build()
        .map_err(oci_error("build config.json"))
}

/// The root directory for [`RootFs::HostReadOnly`]: the host's top-level
/// symlinks, and an empty mount point for each of its other entries, which
/// are bound over it read-only. It is made once for each listing of the
/// host's `/` (its name is the listing's hash) and shared by every
/// container: runc mounts in each container's own mount namespace.
/// Returns it and the host paths to bind.
fn host_root(roots: &Path) -> Result<(PathBuf, Vec<PathBuf>), ContainerError> {
    use std::hash::{Hash, Hasher};
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let io = ContainerError::runtime;
    // (name, symlink target, is a directory)
    let mut entries: Vec<(std::ffi::OsString, Option<PathBuf>, bool)> = Vec::new();
    for entry in std::fs::read_dir("/")
        .map_err(io(NAME, "list the host's /"))?
        .flatten()
    {
        let name = entry.file_name();
        if NOT_BOUND.iter().any(|n| name == **n) {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let target = if kind.is_symlink() {
            Some(std::fs::read_link(entry.path()).map_err(io(NAME, "read a symlink of /"))?)
        } else {
            None
        };
        entries.push((name, target, kind.is_dir()));
    }
    entries.sort();
    let mut hasher = std::hash::DefaultHasher::new();
    entries.hash(&mut hasher);
    let root = roots.join(format!("host-{:016x}", hasher.finish()));
    if !root.is_dir() {
        let building = roots.join(format!(
            ".building-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let build = || -> std::io::Result<()> {
            std::fs::create_dir_all(&building)?;
            for name in ["proc", "dev", "tmp"] {
                std::fs::create_dir(building.join(name))?;
            }
            for (name, target, is_dir) in &entries {
                let path = building.join(name);
                match (target, is_dir) {
                    (Some(target), _) => std::os::unix::fs::symlink(target, path)?,
                    (None, true) => std::fs::create_dir(path)?,
                    (None, false) => drop(std::fs::File::create(path)?),
                }
            }
            Ok(())
        };
        let built = build().and_then(|()| std::fs::rename(&building, &root));
        if built.is_err() {
            let _ = std::fs::remove_dir_all(&building);
        }
        // Another start may have made the same root meanwhile.
        if !root.is_dir() {
            built.map_err(io(NAME, "make the root directory for the host's /"))?;
        }
    }
    let binds = entries
        .into_iter()
        .filter(|(_, target, _)| target.is_none())
        .map(|(name, _, _)| Path::new("/").join(name))
        .collect();
    Ok((root, binds))
}

impl Runtime for Runc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn start(&self, spec: ContainerSpec) -> BoxFuture<'_, Result<Container, ContainerError>> {
        Box::pin(self.run(spec))
    }
}
