//! A real PostgreSQL server for the tests: Debian's `postgresql` package
//! (which `cargo xtask test` installs where it is missing), started once
//! per test process on a private port and data directory, with a fresh
//! database for each test.
//!
//! The server runs as the `postgres` user when the tests run as root
//! (PostgreSQL refuses root), and stops when the test process ends, even
//! by SIGKILL: it is started under a shell that waits on the test
//! process's end of a pipe and stops the server when it closes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tempfile::TempDir;

/// Where `cargo xtask test` says PostgreSQL's programs are (`initdb`,
/// `postgres`, `psql`); without it, the newest under
/// `/usr/lib/postgresql/*/bin`.
pub const BIN_ENV: &str = "HANE_TEST_POSTGRES";

/// A PostgreSQL server of this test process.
pub struct Server {
    _child: Mutex<Child>,
    _stdin: Mutex<ChildStdin>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    bin: PathBuf,
    // Removed by the server's shell when it stops; kept here for a
    // server that never started.
    _dir: TempDir,
}

/// A database of its own for one test, on this process's [`Server`].
#[derive(Debug, Clone)]
pub struct Database {
    /// Its name.
    pub name: String,
    /// Its address: `postgres://hane@127.0.0.1:PORT/NAME`.
    pub url: String,
}

/// The programs' folder: [`BIN_ENV`], or the newest installed version's.
pub fn bin() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os(BIN_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("postgres").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => Ok(bin),
        None => bail!(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres, and {BIN_ENV} is \
             not set): `cargo xtask test` installs Debian's postgresql package"
        ),
    }
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `program` from `bin`, as the `postgres` user when we are root.
fn command(bin: &Path, program: &str) -> Command {
    let path = bin.join(program);
    if running_as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(path);
        command
    } else {
        Command::new(path)
    }
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// How a server keeps its commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Nothing synced to disk: for tests, which never outlive the server.
    Off,
    /// PostgreSQL's defaults: every commit synced before it is
    /// acknowledged. For benchmarks.
    Full,
}

impl Server {
    fn start(durability: Durability) -> Result<Self> {
        let bin = bin()?;
        let dir = tempfile::Builder::new().prefix("hane-pg-").tempdir()?;
        let data = dir.path().join("data");
        if running_as_root() {
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(dir.path())
                .status()?;
            if !status.success() {
                bail!("chown postgres {} failed", dir.path().display());
            }
        }
        let out = command(&bin, "initdb")
            .args([
                "--auth=trust",
                "--username=hane",
                "--encoding=UTF8",
                "--no-sync",
            ])
            .arg("--pgdata")
            .arg(&data)
            .output()
            .context("running initdb")?;
        if !out.status.success() {
            bail!(
                "initdb failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            // The shell stops the server when our end of its stdin closes:
            // at this process's end, however it ends.
            let settings = match durability {
                Durability::Off => "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
                Durability::Full => "",
            };
            let script = format!(
                "{postgres} -D {data} -p {port} -k {socket} -h 127.0.0.1 {settings} \
                 -c max_connections=200 -c logging_collector=off >{log} 2>&1 & \
                 pid=$!; echo started; cat >/dev/null; kill -INT $pid; wait $pid; rm -rf {dir}",
                postgres = shell_quote(&bin.join("postgres")),
                data = shell_quote(&data),
                socket = shell_quote(dir.path()),
                log = shell_quote(&dir.path().join("server.log")),
                dir = shell_quote(dir.path()),
            );
            let mut child = if running_as_root() {
                Command::new("runuser")
                    .args(["-u", "postgres", "--", "sh", "-c", &script])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()?
            } else {
                Command::new("sh")
                    .args(["-c", &script])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()?
            };
            let stdin = child.stdin.take().expect("piped stdin");
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line)?;
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let ready = command(&bin, "pg_isready")
                    .args([
                        "-h",
                        "127.0.0.1",
                        "-p",
                        &port.to_string(),
                        "-U",
                        "hane",
                        "-q",
                    ])
                    .status()?;
                if ready.success() {
                    return Ok(Self {
                        _child: Mutex::new(child),
                        _stdin: Mutex::new(stdin),
                        port,
                        bin,
                        _dir: dir,
                    });
                }
                if child.try_wait()?.is_some() || Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            drop(stdin);
            let _ = child.wait();
            last = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
        }
        bail!("PostgreSQL did not start; its log:\n{last}")
    }

    /// Runs `sql` in database `db` with psql.
    pub fn psql(&self, db: &str, sql: &str) -> Result<String> {
        let out = command(&self.bin, "psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "hane",
            ])
            .args([
                "-d",
                db,
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ])
            .output()?;
        if !out.status.success() {
            bail!("psql `{sql}`: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A new, empty database.
    pub fn database(&self) -> Result<Database> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.psql("postgres", &format!("CREATE DATABASE {name}"))?;
        Ok(Database {
            url: format!("postgres://hane@127.0.0.1:{}/{name}", self.port),
            name,
        })
    }
}

fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// This test process's server, started on first use.
///
/// # Panics
///
/// When PostgreSQL is not installed or does not start, saying why.
pub fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| Server::start(Durability::Off).unwrap_or_else(|e| panic!("{e:#}")))
}

/// This process's server that syncs every commit, as PostgreSQL does by
/// default: what a benchmark of durable writes measures against.
///
/// # Panics
///
/// As [`server`].
pub fn durable_server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| Server::start(Durability::Full).unwrap_or_else(|e| panic!("{e:#}")))
}

/// A new, empty database on this process's server.
///
/// # Panics
///
/// As [`server`], or when the database cannot be made.
pub fn database() -> Database {
    server()
        .database()
        .unwrap_or_else(|e| panic!("making a test database: {e:#}"))
}
