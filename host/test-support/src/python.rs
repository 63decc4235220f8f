//! What the test servers written in Python share: the interpreter `cargo
//! xtask` provisions, a check that it has a package, and starting a server
//! that announces itself on its first line of output.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The command that provisions the interpreter and what the tests need.
pub(crate) const PROVISION: &str =
    "cargo xtask test (or `cargo xtask provision`, then plain cargo test)";

/// The provisioned interpreter: `HANE_TEST_PYTHON`, else where `cargo xtask`
/// makes it in the workspace's target directory.
pub(crate) fn interpreter() -> PathBuf {
    match std::env::var_os("HANE_TEST_PYTHON").filter(|p| !p.is_empty()) {
        Some(python) => PathBuf::from(python),
        None => crate::repository().join("target/test-env/venv/bin/python3"),
    }
}

/// Checks that the provisioned interpreter runs and imports `package`;
/// `tests` names who needs it, such as `the SMTP tests`.
pub(crate) fn require(package: &str, tests: &str) -> Result<PathBuf> {
    let python = interpreter();
    let probe = Command::new(&python)
        .args(["-c", &format!("import {package}")])
        .output()
        .with_context(|| {
            format!(
                "{tests} need the Python that {PROVISION} provisions; cannot run {}",
                python.display()
            )
        })?;
    if !probe.status.success() {
        bail!(
            "{tests} need {package} in {}, which {PROVISION} installs:\n{}",
            python.display(),
            String::from_utf8_lossy(&probe.stderr)
        );
    }
    Ok(python)
}

/// A server process started by [`spawn`], with the first line it printed
/// (empty when it printed none within the time given).
pub(crate) struct Started {
    pub(crate) child: Child,
    /// Kept open: the servers exit when it closes.
    pub(crate) stdin: ChildStdin,
    pub(crate) line: String,
}

/// Spawns `command` with its stdin and stdout piped and waits at most
/// `timeout` for the first line it prints, where it says where it listens.
pub(crate) fn spawn(command: &mut Command, timeout: Duration) -> Result<Started> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", command.get_program().display()))?;
    let stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(timeout).unwrap_or_default();
    Ok(Started { child, stdin, line })
}
