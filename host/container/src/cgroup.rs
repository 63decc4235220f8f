//! One cgroup per container, created under hane's own cgroup, on cgroup v1
//! (one directory per controller hierarchy) or v2 (one directory).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use crate::{ContainerError, ContainerLimits};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// How long dropping a container waits for its processes to be gone before
/// it gives up removing the cgroup directories.
const REMOVE_WITHIN: Duration = Duration::from_secs(5);

/// A cgroup hierarchy hane's process is in.
#[derive(Debug, Clone)]
struct Hierarchy {
    /// Controllers bound to it (`memory`, `pids`, `name=systemd`); empty for v2.
    controllers: Vec<String>,
    /// hane's own cgroup directory in it.
    own: PathBuf,
}

#[derive(Debug)]
pub(crate) struct Cgroup {
    name: String,
    /// The directories hane created and limits are written in: the memory
    /// and pids hierarchies' on v1, the one on v2.
    dirs: Vec<PathBuf>,
    memory: Option<PathBuf>,
    v2: bool,
    /// hane's own cgroup in every v1 hierarchy: runc creates the container's
    /// cgroup in each of them, and what it leaves is removed with the rest.
    others: Vec<PathBuf>,
}

fn hierarchies() -> io::Result<(Vec<Hierarchy>, Option<Hierarchy>)> {
    let own = fs::read_to_string("/proc/self/cgroup")?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
    Ok(parse_hierarchies(&own, &mountinfo))
}

/// hane's cgroup directory in each v1 hierarchy and in the v2 one, from
/// `/proc/self/cgroup` and `/proc/self/mountinfo`.
fn parse_hierarchies(own: &str, mountinfo: &str) -> (Vec<Hierarchy>, Option<Hierarchy>) {
    // (fstype, super options, mount root, mount point)
    let mounts: Vec<(&str, Vec<&str>, &str, &str)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            Some((
                *right.first()?,
                right.get(2)?.split(',').collect(),
                *left.get(3)?,
                *left.get(4)?,
            ))
        })
        .filter(|(fstype, ..)| *fstype == "cgroup" || *fstype == "cgroup2")
        .collect();
    let dir = |mount_root: &str, point: &str, path: &str| {
        let rel = path.strip_prefix(mount_root).unwrap_or(path);
        Path::new(point).join(rel.trim_start_matches('/'))
    };
    let mut v1 = Vec::new();
    let mut v2 = None;
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            if let Some((_, _, root, point)) = mounts.iter().find(|m| m.0 == "cgroup2") {
                v2 = Some(Hierarchy {
                    controllers: Vec::new(),
                    own: dir(root, point, path),
                });
            }
            continue;
        }
        let controllers: Vec<String> = controllers.split(',').map(str::to_owned).collect();
        if let Some((_, _, root, point)) = mounts.iter().find(|(fstype, opts, ..)| {
            *fstype == "cgroup" && controllers.iter().all(|c| opts.contains(&c.as_str()))
        }) {
            v1.push(Hierarchy {
                controllers,
                own: dir(root, point, path),
            });
        }
    }
    (v1, v2)
}

fn write(path: &Path, value: &str, step: &'static str) -> Result<(), ContainerError> {
    fs::write(path, value).map_err(ContainerError::cgroup(step, path))
}

impl Cgroup {
    /// Creates the container's cgroup with `limits` written in.
    pub(crate) fn create(limits: &ContainerLimits) -> Result<Cgroup, ContainerError> {
        let name = format!(
            "hane-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let (v1, v2) =
            hierarchies().map_err(ContainerError::cgroup("read", "/proc/self/cgroup"))?;
        let find = |c: &str| v1.iter().find(|h| h.controllers.iter().any(|x| x == c));
        let mut cgroup = Cgroup {
            name: name.clone(),
            dirs: Vec::new(),
            memory: None,
            v2: false,
            others: Vec::new(),
        };
        if let (Some(memory), Some(pids)) = (find("memory"), find("pids")) {
            let memory_dir = memory.own.join(&name);
            let pids_dir = pids.own.join(&name);
            fs::create_dir(&memory_dir).map_err(ContainerError::cgroup("create", &memory_dir))?;
            cgroup.dirs.push(memory_dir.clone());
            cgroup.memory = Some(memory_dir.clone());
            fs::create_dir(&pids_dir).map_err(ContainerError::cgroup("create", &pids_dir))?;
            cgroup.dirs.push(pids_dir.clone());
            cgroup.others = v1
                .iter()
                .map(|h| h.own.join(&name))
                .chain(v2.iter().map(|h| h.own.join(&name)))
                .filter(|d| *d != memory_dir && *d != pids_dir)
                .collect();
            if let Some(bytes) = limits.memory_bytes {
                let bytes = bytes.to_string();
                write(
                    &memory_dir.join("memory.limit_in_bytes"),
                    &bytes,
                    "write memory limit",
                )?;
                let memsw = memory_dir.join("memory.memsw.limit_in_bytes");
                if memsw.exists() {
                    write(&memsw, &bytes, "write memory+swap limit")?;
                }
            }
            if let Some(pids) = limits.pids {
                write(
                    &pids_dir.join("pids.max"),
                    &pids.to_string(),
                    "write pids limit",
                )?;
            }
        } else if let Some(unified) = v2 {
            cgroup.v2 = true;
            let control = unified.own.join("cgroup.subtree_control");
            let enabled =
                fs::read_to_string(&control).map_err(ContainerError::cgroup("read", &control))?;
            for controller in ["memory", "pids"] {
                if !enabled.split_whitespace().any(|c| c == controller) {
                    fs::write(&control, format!("+{controller}")).map_err(|source| {
                        ContainerError::Cgroup {
                            step: "enable a controller for child cgroups (hane's cgroup must be delegated and hold no processes of its own)",
                            path: control.clone(),
                            source,
                        }
                    })?;
                }
            }
            let dir = unified.own.join(&name);
            fs::create_dir(&dir).map_err(ContainerError::cgroup("create", &dir))?;
            cgroup.dirs.push(dir.clone());
            cgroup.memory = Some(dir.clone());
            if let Some(bytes) = limits.memory_bytes {
                write(
                    &dir.join("memory.max"),
                    &bytes.to_string(),
                    "write memory limit",
                )?;
                let swap = dir.join("memory.swap.max");
                if swap.exists() {
                    write(&swap, "0", "write swap limit")?;
                }
            }
            if let Some(pids) = limits.pids {
                write(&dir.join("pids.max"), &pids.to_string(), "write pids limit")?;
            }
        } else {
            return Err(ContainerError::Cgroup {
                step: "find the memory and pids controllers",
                path: PathBuf::from("/proc/self/cgroup"),
                source: io::Error::new(
                    io::ErrorKind::NotFound,
                    "neither cgroup v1 memory and pids hierarchies nor cgroup v2 is mounted",
                ),
            });
        }
        Ok(cgroup)
    }

    /// The path runc is given as `linux.cgroupsPath`: relative, so that on
    /// each hierarchy it lands under hane's own cgroup, inside this one.
    pub(crate) fn runc_path(&self) -> PathBuf {
        Path::new(&self.name).join("runc")
    }

    /// The cgroup's name, unique on this host while hane runs.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The cgroup's directories (for tests and tracing).
    pub(crate) fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Moves a process in.
    pub(crate) fn add(&self, pid: u32) -> Result<(), ContainerError> {
        for dir in &self.dirs {
            write(
                &dir.join("cgroup.procs"),
                &pid.to_string(),
                "move the child in",
            )?;
        }
        Ok(())
    }

    /// Every process in the cgroup and its descendants' cgroups.
    pub(crate) fn procs(&self) -> Vec<u32> {
        fn walk(dir: &Path, out: &mut Vec<u32>) {
            if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
                out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            }
            if let Ok(entries) = fs::read_dir(dir) {
                for entry in entries.flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        walk(&entry.path(), out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        for dir in &self.dirs {
            walk(dir, &mut out);
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Sends SIGKILL to every process in the cgroup, once.
    pub(crate) fn kill_all(&self) {
        if self.v2
            && let Some(dir) = self.dirs.first()
            && fs::write(dir.join("cgroup.kill"), "1").is_ok()
        {
            return;
        }
        for pid in self.procs() {
            if let Some(pid) = Pid::from_raw(pid as i32) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
    }

    /// Whether the kernel's OOM killer killed a process of this cgroup.
    ///
    /// v2 counts OOM kills in `memory.events` hierarchically. v1 counts them
    /// (`memory.oom_control`) only in the victim's own cgroup, which runc
    /// removes as its container ends; so on v1 a command killed by SIGKILL
    /// (`sigkilled`, and not by hane) in a cgroup whose peak usage reached
    /// its limit counts too (`memory.failcnt` is not kept for an ancestor's
    /// limit on recent kernels).
    pub(crate) fn oom_killed(&self, sigkilled: bool) -> bool {
        let Some(dir) = &self.memory else {
            return false;
        };
        let oom_kills = |file: &str| {
            fs::read_to_string(dir.join(file)).is_ok_and(|text| {
                text.lines().any(|line| {
                    line.strip_prefix("oom_kill ")
                        .is_some_and(|n| n.trim().parse::<u64>().is_ok_and(|n| n > 0))
                })
            })
        };
        if self.v2 {
            oom_kills("memory.events")
        } else {
            oom_kills("memory.oom_control") || (sigkilled && self.reached_memory_limit(dir))
        }
    }

    /// Whether a v1 memory cgroup's peak usage came within a huge page of
    /// its limit (the charge that failed may have been one).
    fn reached_memory_limit(&self, dir: &Path) -> bool {
        const SLACK: u64 = (2 << 20) + 4096;
        let read = |file: &str| {
            fs::read_to_string(dir.join(file))
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
        };
        match (
            read("memory.max_usage_in_bytes"),
            read("memory.limit_in_bytes"),
        ) {
            (Some(peak), Some(limit)) => peak + SLACK >= limit,
            _ => false,
        }
    }

    /// Kills what is left, waits for it to be gone, and removes every
    /// directory (its own and what runc left in the other hierarchies).
    pub(crate) fn remove(&mut self) {
        let deadline = Instant::now() + REMOVE_WITHIN;
        loop {
            self.kill_all();
            if self.procs().is_empty() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        for dir in self.dirs.iter().chain(&self.others) {
            remove_tree(dir, deadline);
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Removes a cgroup directory and its children, deepest first; a directory
/// whose last process is still exiting answers EBUSY for a moment.
fn remove_tree(dir: &Path, deadline: Instant) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path(), deadline);
            }
        }
    }
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) if Instant::now() > deadline => {
                tracing::warn!(cgroup = %dir.display(), error = %e, "cgroup directory not removed");
                return;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_CGROUP: &str =
        "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/a7b2\n1:cpu,cpuacct:/\n0::/\n";
    const HYBRID_MOUNTS: &str = "\
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
32 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
33 25 0:29 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
34 25 0:30 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
35 25 0:31 / /proc rw - proc proc rw
";

    #[test]
    fn hybrid_hierarchies() {
        let (v1, v2) = parse_hierarchies(HYBRID_CGROUP, HYBRID_MOUNTS);
        let own = |controller: &str| {
            v1.iter()
                .find(|h| h.controllers.iter().any(|c| c == controller))
                .map(|h| h.own.clone())
        };
        assert_eq!(
            own("memory"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/process_api/a7b2"))
        );
        assert_eq!(own("pids"), Some(PathBuf::from("/sys/fs/cgroup/pids")));
        assert_eq!(
            own("cpuacct"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"))
        );
        assert_eq!(
            own("name=systemd"),
            Some(PathBuf::from("/sys/fs/cgroup/systemd"))
        );
        assert_eq!(
            v2.map(|h| h.own),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn unified_hierarchy() {
        let own = "0::/user.slice/user-1000.slice/session-2.scope\n";
        let mounts = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let (v1, v2) = parse_hierarchies(own, mounts);
        assert!(v1.is_empty());
        assert_eq!(
            v2.map(|h| h.own),
            Some(PathBuf::from(
                "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope"
            ))
        );
    }

    #[test]
    fn a_cgroup_namespace_root_is_stripped() {
        // Inside a container whose cgroup mount's root is its own cgroup.
        let own = "0::/kubepods/pod1/c1\n";
        let mounts = "29 23 0:26 /kubepods/pod1/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let (_, v2) = parse_hierarchies(own, mounts);
        assert_eq!(v2.map(|h| h.own), Some(PathBuf::from("/sys/fs/cgroup")));
    }
}
