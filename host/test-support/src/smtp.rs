//! A real SMTP server on loopback for the tests: `tests/smtp/server.py`,
//! on Python's aiosmtpd, writing each accepted message to a folder. The
//! interpreter is the one `cargo xtask test` provisions (a virtual
//! environment with `tests/requirements.txt`), passed as `HANE_TEST_PYTHON`
//! or found where it puts it.

use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command};
use std::time::Duration;

use anyhow::{Result, bail};
use hane_delivery::{SmtpConfig, SmtpTls};
use tempfile::TempDir;

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
        let python = crate::python::require("aiosmtpd", "the SMTP tests")?;
        let dir = tempfile::tempdir()?;
        let stderr = std::fs::File::create(dir.path().join("server.log"))?;
        let script = crate::repository().join("tests/smtp/server.py");
        let started = crate::python::spawn(
            Command::new(&python)
                .arg(script)
                .args(["--port", "0", "--exit-with-stdin", "--maildir"])
                .arg(dir.path().join("mail"))
                .args(args)
                .stderr(stderr),
            Duration::from_secs(30),
        )?;
        let line = started.line;
        let mut server = Self {
            child: started.child,
            _stdin: started.stdin,
            port: 0,
            dir,
        };
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

    /// How many messages the server accepted of each action, by the
    /// `X-Hane-Action` header every message hane sends carries.
    ///
    /// # Panics
    ///
    /// A message lacks the header.
    pub fn messages_by_action(&self) -> std::collections::HashMap<String, usize> {
        let mut counts = std::collections::HashMap::new();
        for message in self.messages() {
            let action = message
                .lines()
                .find_map(|l| l.trim_end().strip_prefix("X-Hane-Action: "))
                .expect("every message names its action")
                .to_owned();
            *counts.entry(action).or_default() += 1;
        }
        counts
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
