//! A real SMTP server on loopback for the tests: `tests/smtp/server.py`,
//! on Python's aiosmtpd, writing each accepted message to a folder. The
//! interpreter is the one `cargo xtask test` provisions (a virtual
//! environment with `tests/requirements.txt`), passed as `HANE_TEST_PYTHON`
//! or found where it puts it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use hane_delivery::{SmtpConfig, SmtpTls};
use tempfile::TempDir;

/// The command that provisions the interpreter.
const PROVISION: &str = "cargo xtask test (or `cargo xtask provision`, then plain cargo test)";

/// The provisioned interpreter: `HANE_TEST_PYTHON`, else where `cargo xtask`
/// makes it in the workspace's target directory.
fn python() -> PathBuf {
    match std::env::var_os("HANE_TEST_PYTHON").filter(|p| !p.is_empty()) {
        Some(python) => PathBuf::from(python),
        None => crate::repository().join("target/test-env/venv/bin/python3"),
    }
}

/// `tests/smtp/server.py`, run as a child process for one test and killed
/// when dropped (it also exits when our end of its stdin closes).
pub struct SmtpServer {
    child: Child,
    _stdin: ChildStdin,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    dir: TempDir,
}

impl SmtpServer {
    /// Starts the server with `args` added (such as `--delay-ms 20`).
    ///
    /// # Panics
    ///
    /// When the provisioned Python or its aiosmtpd is missing, naming the
    /// command that provisions them.
    pub fn start(args: &[&str]) -> Self {
        Self::try_start(args).unwrap_or_else(|e| panic!("{e:#}"))
    }

    fn try_start(args: &[&str]) -> Result<Self> {
        let python = python();
        let probe = Command::new(&python)
            .args(["-c", "import aiosmtpd"])
            .output()
            .with_context(|| {
                format!(
                    "the SMTP tests need the Python that {PROVISION} provisions; cannot run {}",
                    python.display()
                )
            })?;
        if !probe.status.success() {
            bail!(
                "the SMTP tests need aiosmtpd in {}, which {PROVISION} installs:\n{}",
                python.display(),
                String::from_utf8_lossy(&probe.stderr)
            );
        }
        let dir = tempfile::tempdir()?;
        let stderr = std::fs::File::create(dir.path().join("server.log"))?;
        let script = crate::repository().join("tests/smtp/server.py");
        let mut child = Command::new(&python)
            .arg(script)
            .args(["--port", "0", "--exit-with-stdin", "--maildir"])
            .arg(dir.path().join("mail"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start {}", python.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut server = Self {
            child,
            _stdin: stdin,
            port: 0,
            dir,
        };
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        match line.trim().parse() {
            Ok(port) => server.port = port,
            Err(_) => bail!(
                "the SMTP test server did not print its port (got {line:?}); its log:\n{}",
                server.log()
            ),
        }
        Ok(server)
    }

    /// What the server wrote to its log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// The messages the server accepted, as text.
    pub fn messages(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.dir.path().join("mail")) else {
            return Vec::new();
        };
        let mut paths: Vec<PathBuf> = entries
            .map(|entry| entry.unwrap().path())
            .filter(|path| !path.file_name().unwrap().to_string_lossy().starts_with('.'))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|path| std::fs::read_to_string(path).unwrap())
            .collect()
    }

    /// An SMTP configuration for this server.
    pub fn config(&self, host: &str, tls: SmtpTls) -> SmtpConfig {
        SmtpConfig {
            port: self.port,
            ..SmtpConfig::new(host, tls, "Hane <hane@example.com>")
        }
    }
}

impl SmtpServer {
    /// The messages carrying `X-Hane-Action: action`.
    pub fn messages_of(&self, action: &str) -> usize {
        let header = format!("X-Hane-Action: {action}");
        self.messages()
            .iter()
            .filter(|m| m.lines().any(|l| l.trim_end() == header))
            .count()
    }

    /// `HANE_SMTP_URL` for this server, without TLS.
    pub fn url(&self) -> String {
        format!(
            "smtp://127.0.0.1:{}?tls=none&from=hane%40fleet.example",
            self.port
        )
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
