//! A started container: its stdio, its exit, and the guarantee that its
//! whole tree ends with it.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::ContainerError;
use crate::cgroup::Cgroup;
use crate::netns::NetNamespace;

/// How a container ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command exited with this code.
    Code(i32),
    /// The command was killed by this signal. Both runtimes report a
    /// command killed by signal N as exit code 128 + N, so a code from 129
    /// to 192 is reported here.
    Signal(i32),
    /// The kernel's OOM killer killed a process of the container: the memory
    /// limit was reached.
    OutOfMemory,
    /// The wall-clock limit passed and hane killed the tree.
    WallClock,
}

impl Exit {
    fn of(status: ExitStatus) -> Exit {
        match (status.code(), status.signal()) {
            (Some(code @ 129..=192), _) => Exit::Signal(code - 128),
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Code(-1),
        }
    }

    /// Whether the command exited with code 0.
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }
}

/// What the runc runtime leaves to remove when a container is dropped.
#[derive(Debug)]
pub(crate) struct RuncState {
    pub(crate) runc: PathBuf,
    pub(crate) root: PathBuf,
    pub(crate) id: String,
    pub(crate) bundle: PathBuf,
    pub(crate) log: PathBuf,
}

impl RuncState {
    /// What runc logged as an error, if anything: it failed to start the
    /// container rather than the command exiting.
    fn start_error(&self) -> Option<String> {
        let log = std::fs::read_to_string(&self.log).ok()?;
        log.lines()
            .rev()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|entry| entry["level"] == "error" || entry["level"] == "fatal")
            .find_map(|entry| entry["msg"].as_str().map(str::to_owned))
    }

    /// Deletes the container's runc state if `runc run` left it (it
    /// deletes it itself when it sees its container end), and the bundle.
    fn delete(&self) {
        if self.root.join(&self.id).exists() {
            self.force_delete();
        }
        let _ = std::fs::remove_dir_all(&self.bundle);
    }

    fn force_delete(&self) {
        let _ = std::process::Command::new(&self.runc)
            .env_clear()
            .arg("--root")
            .arg(&self.root)
            .args(["delete", "--force", &self.id])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// A running (or ended) container.
///
/// Dropping it kills the whole tree, stops its service forwarders, and
/// removes its cgroups and runtime state; it never leaves a process or a
/// cgroup behind. The drop blocks until the processes are gone (well under
/// a millisecond after [`wait`](Self::wait) returned; up to a few
/// milliseconds for a running tree) and, for runc when `runc run` did not
/// clean up itself, for one `runc delete`.
#[derive(Debug)]
pub struct Container {
    pub(crate) runtime: &'static str,
    pub(crate) child: Child,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) stdout: Option<ChildStdout>,
    pub(crate) stderr: Option<ChildStderr>,
    pub(crate) forwarders: Vec<AbortHandle>,
    pub(crate) deadline: Option<Instant>,
    pub(crate) exit: Option<Exit>,
    pub(crate) runc: Option<RuncState>,
    // Dropped after `drop` has killed the tree: the cgroup removes its
    // directories, the namespace goes with its last descriptor.
    pub(crate) cgroup: Cgroup,
    pub(crate) _netns: Option<NetNamespace>,
    pub(crate) killed: bool,
}

impl Container {
    /// The runtime that runs it (`bwrap` or `runc`).
    pub fn runtime(&self) -> &'static str {
        self.runtime
    }

    /// The command's stdin (once; later calls return `None`).
    pub fn stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The command's stdout (once).
    pub fn stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The command's stderr (once). With runc, runc's own messages go to
    /// its log, not here.
    pub fn stderr(&mut self) -> Option<ChildStderr> {
        self.stderr.take()
    }

    /// The ids of the container's processes as the host sees them (its
    /// cgroup's members).
    pub fn pids(&self) -> Vec<u32> {
        self.cgroup.procs()
    }

    /// The container's cgroup directories on the host.
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        self.cgroup.dirs().to_vec()
    }

    /// Waits for the container to end and says how, ending the rest of its
    /// tree with it: when it returns, no process of the container runs. Past the wall-clock limit it kills the tree and
    /// returns [`Exit::WallClock`]. Calling it again returns the same exit.
    ///
    /// # Errors
    ///
    /// [`ContainerError::StartFailed`] when the runtime failed to start the
    /// command, [`ContainerError::Runtime`] when waiting failed.
    pub async fn wait(&mut self) -> Result<Exit, ContainerError> {
        if let Some(exit) = self.exit {
            return Ok(exit);
        }
        let mut wall = false;
        let status = match self.deadline {
            Some(deadline) => {
                tokio::select! {
                    status = self.child.wait() => status,
                    () = tokio::time::sleep_until(deadline) => {
                        wall = true;
                        self.kill();
                        self.child.wait().await
                    }
                }
            }
            None => self.child.wait().await,
        }
        .map_err(ContainerError::runtime(self.runtime, "wait"))?;
        // The tree ends with its runtime's process, whatever is left of it;
        // `wait` returns once none of it runs.
        let until = Instant::now() + std::time::Duration::from_secs(5);
        loop {
            self.cgroup.kill_all();
            if self.cgroup.procs().is_empty() || Instant::now() > until {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let exit = if wall {
            Exit::WallClock
        } else if self
            .cgroup
            .oom_killed(!self.killed && Exit::of(status) == Exit::Signal(9))
        {
            Exit::OutOfMemory
        } else {
            Exit::of(status)
        };
        if !wall
            && exit != Exit::Code(0)
            && let Some(message) = self.runc.as_ref().and_then(RuncState::start_error)
        {
            return Err(ContainerError::StartFailed {
                runtime: self.runtime,
                message,
            });
        }
        tracing::debug!(runtime = self.runtime, ?exit, "container ended");
        self.exit = Some(exit);
        Ok(exit)
    }

    /// Kills the whole tree at once (every process of its cgroup, and the
    /// runtime's process). Idempotent; [`wait`](Self::wait) then reports how
    /// it ended.
    pub fn kill(&mut self) {
        self.killed = true;
        self.cgroup.kill_all();
        let _ = self.child.start_kill();
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        for forwarder in &self.forwarders {
            forwarder.abort();
        }
        self.kill();
        if let Some(runc) = &self.runc {
            runc.delete();
        }
    }
}
