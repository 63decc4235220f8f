//! Every behaviour of a container, against the real bubblewrap and runc;
//! each test runs once per runtime.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hane_container::{
    Bubblewrap, Container, ContainerError, ContainerLimits, ContainerSpec, Exit, Mount, RootFs,
    Runc, Runtime, Service,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn bwrap() -> Bubblewrap {
    match std::env::var_os("HANE_TEST_BWRAP") {
        Some(path) => Bubblewrap::new(path),
        None => Bubblewrap::find()
            .unwrap_or_else(|e| panic!("{e} (or set HANE_TEST_BWRAP to its path)")),
    }
}

fn runc() -> Runc {
    let path = std::env::var_os("HANE_TEST_RUNC")
        .map(PathBuf::from)
        .or_else(|| Runc::find().ok().map(|r| r.path().to_path_buf()))
        .unwrap_or_else(|| {
            panic!(
                "runc not found: set HANE_TEST_RUNC or run `cargo xtask provision` to install runc"
            )
        });
    Runc::new(path, std::env::temp_dir().join("hane-container-tests-runc")).expect("runc state dir")
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn bwrap() {
                super::$name(&super::bwrap()).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn runc() {
                super::$name(&super::runc()).await
            }
        }
    )*};
}

both!(
    echo_through_stdin_and_stdout,
    environment_is_exactly_the_specs,
    isolation,
    service_reaches_the_host_listener,
    nothing_else_is_reachable,
    masked_paths_are_not_readable,
    memory_limit_kills_an_allocator,
    pids_limit_stops_a_fork_storm,
    wall_clock_ends_the_tree,
    kill_ends_the_tree_at_once,
    drop_leaves_no_process_and_no_cgroup,
    missing_command_is_named,
    runtime_failures_are_named,
    open_files_limit,
    root_directory,
    many_at_once,
);

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn spec(command: &[&str]) -> ContainerSpec {
    ContainerSpec {
        root: RootFs::HostReadOnly,
        mounts: Vec::new(),
        env: vec![("PATH".into(), PATH.into())],
        cwd: "/".into(),
        command: command.iter().map(Into::into).collect(),
        services: Vec::new(),
        limits: ContainerLimits {
            wall: Some(Duration::from_secs(60)),
            ..ContainerLimits::default()
        },
    }
}

fn sh(script: &str) -> ContainerSpec {
    spec(&["/bin/sh", "-c", script])
}

struct Output {
    exit: Exit,
    stdout: String,
    stderr: String,
}

async fn output(container: &mut Container) -> Output {
    drop(container.stdin());
    let mut stdout = container.stdout().expect("stdout");
    let mut stderr = container.stderr().expect("stderr");
    let (mut out, mut err) = (String::new(), String::new());
    let (a, b) = tokio::join!(
        stdout.read_to_string(&mut out),
        stderr.read_to_string(&mut err)
    );
    a.expect("read stdout");
    b.expect("read stderr");
    let exit = container.wait().await.expect("wait");
    Output {
        exit,
        stdout: out,
        stderr: err,
    }
}

async fn run(runtime: &dyn Runtime, spec: ContainerSpec) -> Output {
    let mut container = runtime.start(spec).await.expect("start");
    output(&mut container).await
}

async fn echo_through_stdin_and_stdout(runtime: &dyn Runtime) {
    let mut container = runtime.start(spec(&["/bin/cat"])).await.expect("start");
    let mut stdin = container.stdin().expect("stdin");
    stdin.write_all(b"hello from the host\n").await.unwrap();
    drop(stdin);
    let out = output(&mut container).await;
    assert_eq!(
        out.stdout, "hello from the host\n",
        "stderr: {}",
        out.stderr
    );
    assert_eq!(out.exit, Exit::Code(0));
    // A second wait reports the same exit.
    assert_eq!(container.wait().await.unwrap(), Exit::Code(0));
}

async fn environment_is_exactly_the_specs(runtime: &dyn Runtime) {
    // hane's own environment (cargo's here) must not appear inside.
    let mut full = spec(&["/usr/bin/env"]);
    full.env.push(("HANE_TEST_VALUE".into(), "a b=c".into()));
    full.env.push(("HOME".into(), "/tmp".into()));
    full.env.push(("PWD".into(), "/".into()));
    assert!(
        std::env::var_os("CARGO").is_some(),
        "cargo sets CARGO in the test's environment"
    );
    let out = run(runtime, full).await;
    assert_eq!(out.exit, Exit::Code(0), "stderr: {}", out.stderr);
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        vec![
            "HANE_TEST_VALUE=a b=c",
            "HOME=/tmp",
            &format!("PATH={PATH}"),
            "PWD=/"
        ]
    );
    // Without PWD and HOME, each runtime gets the same two.
    let mut bare = spec(&["/usr/bin/env"]);
    bare.cwd = "/usr".into();
    let out = run(runtime, bare).await;
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, vec!["HOME=/", &format!("PATH={PATH}"), "PWD=/usr"]);
}

async fn isolation(runtime: &dyn Runtime) {
    let out = run(
        runtime,
        sh("ls /proc | grep -c '^[0-9]'; \
            touch /etc/hane-write-test 2>/dev/null && echo root-writable || echo root-readonly; \
            echo scratch > /tmp/x && cat /tmp/x; ls /tmp | wc -l; \
            grep CapEff /proc/self/status; hostname; ls /dev | wc -l; echo $(ls /proc/self/fd)"),
    )
    .await;
    assert_eq!(out.exit, Exit::Code(0), "stderr: {}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let processes: u32 = lines[0].parse().unwrap();
    assert!(
        processes <= 4,
        "a fresh /proc shows only the container's processes, saw {processes}"
    );
    assert_eq!(lines[1], "root-readonly");
    assert_eq!(lines[2], "scratch");
    assert_eq!(lines[3], "1", "/tmp starts empty");
    assert_eq!(
        lines[4].split_whitespace().nth(1),
        Some("0000000000000000"),
        "no capabilities"
    );
    assert_eq!(lines[5], "hane");
    let devices: u32 = lines[6].parse().unwrap();
    assert!(devices < 20, "a minimal /dev, saw {devices} entries");
    // Only stdio is open (3 is `ls`'s own directory): no descriptor of
    // hane's leaks in.
    assert_eq!(lines[7], "0 1 2 3", "open descriptors");
}

/// A host service answering `pong:` and what it read.
async fn pong_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                let n = stream.read(&mut buf).await.unwrap_or(0);
                let mut reply = b"pong:".to_vec();
                reply.extend_from_slice(&buf[..n]);
                let _ = stream.write_all(&reply).await;
            });
        }
    });
    addr
}

const CONNECT: &str = r#"
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host.strip("[]"), int(port)))
        s.sendall(b"ping")
        print(target, "connected", s.recv(64).decode())
    except ConnectionRefusedError:
        print(target, "refused")
    except socket.timeout:
        print(target, "timeout")
    except OSError as e:
        print(target, "error", e.errno)
"#;

async fn service_reaches_the_host_listener(runtime: &dyn Runtime) {
    let host = pong_server().await;
    let mut spec = spec(&[
        "/usr/bin/python3",
        "-c",
        CONNECT,
        "127.0.0.1:8080",
        "127.0.0.1:8081",
    ]);
    spec.services = vec![Service { port: 8080, host }, Service { port: 8081, host }];
    let out = run(runtime, spec).await;
    assert_eq!(out.exit, Exit::Code(0), "stderr: {}", out.stderr);
    assert_eq!(
        out.stdout,
        "127.0.0.1:8080 connected pong:ping\n127.0.0.1:8081 connected pong:ping\n"
    );
}

async fn nothing_else_is_reachable(runtime: &dyn Runtime) {
    let service = pong_server().await;
    // Host listeners the container must not reach, checked reachable from
    // the host first.
    let v4_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let v6_listener = std::net::TcpListener::bind("[::1]:0").unwrap();
    let (v4, v6) = (
        v4_listener.local_addr().unwrap(),
        v6_listener.local_addr().unwrap(),
    );
    for addr in [v4, v6, service] {
        std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("host reaches {addr}: {e}"));
    }
    let targets = [
        "127.0.0.1:9000".to_owned(),
        v4.to_string(),
        v6.to_string(),
        format!("127.0.0.1:{}", service.port()),
        "192.0.2.1:80".to_owned(),
        "1.1.1.1:443".to_owned(),
        "[2606:4700:4700::1111]:443".to_owned(),
    ];
    let mut command = vec!["/usr/bin/python3", "-c", CONNECT];
    command.extend(targets.iter().map(String::as_str));
    let mut spec = spec(&command);
    spec.services = vec![Service {
        port: 9000,
        host: service,
    }];
    let out = run(runtime, spec).await;
    assert_eq!(out.exit, Exit::Code(0), "stderr: {}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), targets.len(), "{}", out.stdout);
    assert_eq!(
        lines[0], "127.0.0.1:9000 connected pong:ping",
        "the one service is reachable"
    );
    for line in &lines[1..] {
        assert!(!line.contains("connected"), "reached from inside: {line}");
    }
    // Loopback ports with nothing listening inside are refused at once.
    for line in &lines[1..4] {
        assert!(line.ends_with("refused"), "{line}");
    }
    // No route outside: ENETUNREACH (101), not a timeout.
    for line in &lines[4..] {
        assert!(line.ends_with("error 101"), "{line}");
    }
}

async fn masked_paths_are_not_readable(runtime: &dyn Runtime) {
    let secret = "hane-test-secret-7f3a";
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let store = tempfile::tempdir_in(base).unwrap();
    let visible = tempfile::tempdir_in(base).unwrap();
    std::fs::write(store.path().join("hane.db"), secret).unwrap();
    std::fs::write(visible.path().join("file"), "visible").unwrap();
    let home_secret = PathBuf::from(format!("/root/hane-container-test-{}", std::process::id()));
    std::fs::write(&home_secret, secret).unwrap();
    let script = format!(
        "cat {store}/hane.db {home} /etc/shadow 2>/dev/null; ls -A {store} /root /home /run /var/lib | wc -l; cat {visible}/file",
        store = "/tmp/store",
        home = home_secret.display(),
        visible = "/tmp/visible",
    );
    // Both bound in at fixed places (the target directory may itself be
    // under /tmp, which is fresh inside), the store's then masked.
    let mut spec = sh(&script);
    spec.mounts
        .push(Mount::bind(store.path(), "/tmp/store", false));
    spec.mounts
        .push(Mount::bind(visible.path(), "/tmp/visible", false));
    spec.mounts.push(Mount::masked("/tmp/store"));
    let out = run(runtime, spec).await;
    let _ = std::fs::remove_file(&home_secret);
    assert!(
        !out.stdout.contains(secret),
        "a secret leaked: {}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("root:"),
        "/etc/shadow leaked: {}",
        out.stdout
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    // `ls` of five empty directories prints their five headers and four blank lines.
    assert_eq!(lines, vec!["9", "visible"], "stderr: {}", out.stderr);
}

async fn memory_limit_kills_an_allocator(runtime: &dyn Runtime) {
    let mut spec = spec(&[
        "/usr/bin/python3",
        "-c",
        "chunks = []\nwhile True: chunks.append(bytearray(8 << 20))",
    ]);
    spec.limits.memory_bytes = Some(64 << 20);
    let out = run(runtime, spec).await;
    assert_eq!(out.exit, Exit::OutOfMemory, "stderr: {}", out.stderr);
}

/// The number of processes in a cgroup and its children.
fn procs_under(dir: &Path) -> usize {
    let own = std::fs::read_to_string(dir.join("cgroup.procs")).map_or(0, |t| t.lines().count());
    let children = std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| procs_under(&e.path()))
            .sum()
    });
    own + children
}

/// Samples the number of the container's processes until it ends.
fn sleepers_at_most(container: &Container) -> tokio::task::JoinHandle<usize> {
    let dirs = container.cgroup_dirs();
    tokio::spawn(async move {
        let mut most = 0;
        loop {
            let count = dirs.iter().map(|d| procs_under(d)).max().unwrap_or(0);
            most = most.max(count);
            if !dirs[0].exists() || (count == 0 && most > 0) {
                return most;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
}

async fn pids_limit_stops_a_fork_storm(runtime: &dyn Runtime) {
    let mut spec = sh("while true; do sleep 100 & done");
    spec.limits.pids = Some(16);
    spec.limits.wall = Some(Duration::from_secs(20));
    let mut container = runtime.start(spec).await.expect("start");
    let mut stderr = container.stderr().expect("stderr");
    let mut err = String::new();
    let most = sleepers_at_most(&container);
    // The shell gives up at its first failed fork (dash exits 2).
    let (read, exit) = tokio::join!(stderr.read_to_string(&mut err), container.wait());
    read.unwrap();
    assert_eq!(exit.unwrap(), Exit::Code(2), "stderr: {err}");
    assert!(err.contains("fork"), "the shell could not fork: {err}");
    assert!(
        container.pids().is_empty(),
        "the sleeps end with the container"
    );
    let most = most.await.unwrap();
    assert!(
        (1..=16).contains(&most),
        "the cgroup held {most} processes at most"
    );
    // The host is unhurt: it still starts processes.
    assert!(
        std::process::Command::new("/bin/true")
            .status()
            .unwrap()
            .success()
    );
}

async fn wall_clock_ends_the_tree(runtime: &dyn Runtime) {
    let mut spec = sh("sleep 1000 & sleep 1000");
    spec.limits.wall = Some(Duration::from_millis(500));
    let started = Instant::now();
    let mut container = runtime.start(spec).await.expect("start");
    assert_eq!(container.wait().await.unwrap(), Exit::WallClock);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        wait_gone(&container, Duration::from_secs(2)).await,
        "left: {:?}",
        container.pids()
    );
}

/// Whether the container's cgroup empties within `within`.
async fn wait_gone(container: &Container, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if container.pids().is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    container.pids().is_empty()
}

/// Whether `pid` still runs a second on: a killed process leaves its
/// cgroup's list as it starts to exit, a moment before it is a zombie.
async fn still_alive(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(1);
    while alive(pid) {
        if Instant::now() > deadline {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

/// The host pids of the container's `sleep 1000` processes, once `count` run.
async fn sleepers(container: &Container, count: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids: Vec<u32> = container
            .pids()
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c == "sleep\x001000\x00")
            })
            .collect();
        if pids.len() >= count || Instant::now() > deadline {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn kill_ends_the_tree_at_once(runtime: &dyn Runtime) {
    let mut container = runtime
        .start(sh("sleep 1000 & sleep 1000"))
        .await
        .expect("start");
    let sleepers = sleepers(&container, 2).await;
    assert_eq!(sleepers.len(), 2, "both sleeps run");
    let killed = Instant::now();
    container.kill();
    container.kill();
    let exit = container.wait().await.unwrap();
    assert!(matches!(exit, Exit::Signal(9)), "{exit:?}");
    assert!(
        wait_gone(&container, Duration::from_secs(1)).await,
        "left: {:?}",
        container.pids()
    );
    assert!(killed.elapsed() < Duration::from_secs(2));
    for pid in sleepers {
        assert!(!still_alive(pid).await, "sleep {pid} survived the kill");
    }
}

/// Every cgroup directory with this name anywhere under /sys/fs/cgroup.
fn cgroup_dirs_named(name: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, name: &str, depth: u32, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                if entry.file_name() == name {
                    out.push(entry.path());
                }
                if depth > 0 {
                    walk(&entry.path(), name, depth - 1, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), name, 5, &mut out);
    out
}

async fn drop_leaves_no_process_and_no_cgroup(runtime: &dyn Runtime) {
    let container = runtime
        .start(sh("sleep 1000 & sleep 1000"))
        .await
        .expect("start");
    let sleepers = sleepers(&container, 2).await;
    assert_eq!(sleepers.len(), 2, "both sleeps run");
    let dirs = container.cgroup_dirs();
    let name = dirs[0].file_name().unwrap().to_str().unwrap().to_owned();
    assert!(!cgroup_dirs_named(&name).is_empty());
    for dir in &dirs {
        assert!(dir.is_dir(), "{} exists while it runs", dir.display());
    }
    drop(container);
    for pid in sleepers {
        assert!(!still_alive(pid).await, "sleep {pid} survived the drop");
    }
    assert_eq!(
        cgroup_dirs_named(&name),
        Vec::<PathBuf>::new(),
        "cgroups left behind"
    );
}

async fn missing_command_is_named(runtime: &dyn Runtime) {
    let error = runtime
        .start(spec(&["/usr/bin/hane-no-such-program"]))
        .await
        .expect_err("a missing command does not start");
    assert!(
        matches!(error, ContainerError::CommandNotFound { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("/usr/bin/hane-no-such-program"),
        "{error}"
    );
    let error = runtime
        .start(spec(&["hane-no-such-program"]))
        .await
        .expect_err("a missing command does not start");
    assert!(
        error.to_string().contains("hane-no-such-program"),
        "{error}"
    );
    // A name is looked up in the spec's PATH.
    let out = run(runtime, spec(&["true"])).await;
    assert_eq!(out.exit, Exit::Code(0), "stderr: {}", out.stderr);
}

async fn runtime_failures_are_named(runtime: &dyn Runtime) {
    // A mount point the read-only root cannot hold is refused before any
    // start, with the same error for both runtimes.
    let mut spec = sh("true");
    spec.mounts.push(Mount::bind(
        "/etc/hostname",
        "/usr/hane-no-such-dir/file",
        false,
    ));
    let error = runtime.start(spec).await.expect_err("no mount point");
    assert!(
        matches!(
            error,
            ContainerError::InvalidSpec {
                field: "mounts",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("/usr/hane-no-such-dir/file"),
        "{error}"
    );
    // Under a tmpfs, or a default mask's, it can be made.
    let mut spec = sh("cat /home/agent/hostname && ls -d /tmp/scratch/deeper");
    spec.mounts
        .push(Mount::bind("/etc/hostname", "/home/agent/hostname", false));
    spec.mounts.push(Mount::tmpfs("/tmp/scratch", 1 << 20));
    spec.mounts
        .push(Mount::tmpfs("/tmp/scratch/deeper", 1 << 20));
    spec.cwd = "/tmp".into();
    let out = run(runtime, spec).await;
    assert_eq!(out.exit, Exit::Code(0), "stderr: {}", out.stderr);
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap();
    assert_eq!(out.stdout, format!("{hostname}/tmp/scratch/deeper\n"));
    // A directory bound below a fresh mount can be the working directory.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::write(dir.path().join("config"), "bound").unwrap();
    let mut spec = sh("pwd && cat config");
    spec.mounts
        .push(Mount::bind(dir.path(), "/tmp/hane/run", false));
    spec.cwd = "/tmp/hane/run".into();
    let out = run(runtime, spec).await;
    assert_eq!(out.exit, Exit::Code(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "/tmp/hane/run\nbound");
    // A working directory that is not there is refused before any start.
    let mut spec = sh("true");
    spec.cwd = "/hane-no-such-dir".into();
    let error = runtime.start(spec).await.expect_err("no cwd");
    assert!(error.to_string().contains("/hane-no-such-dir"), "{error}");
}

async fn open_files_limit(runtime: &dyn Runtime) {
    let mut spec = sh("ulimit -n; ulimit -Hn");
    spec.limits.open_files = Some(64);
    let out = run(runtime, spec).await;
    assert_eq!(out.exit, Exit::Code(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "64\n64\n");
    let mut spec = sh("true");
    spec.limits.open_files = Some(u64::from(u32::MAX));
    let error = runtime.start(spec).await.expect_err("above the hard limit");
    assert!(
        matches!(
            error,
            ContainerError::Limit {
                limit: "open_files",
                ..
            }
        ),
        "{error:?}"
    );
}

/// A root of its own: empty mount points and merged-/usr symlinks, with the
/// host's /usr bound in read-only. Nothing else of the host is there.
async fn root_directory(runtime: &dyn Runtime) {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for dir in ["usr", "proc", "dev", "tmp"] {
        std::fs::create_dir(root.path().join(dir)).unwrap();
    }
    for link in ["bin", "lib", "lib64"] {
        std::os::unix::fs::symlink(format!("usr/{link}"), root.path().join(link)).unwrap();
    }
    let mut listing = sh("ls /; test -e /etc/passwd && echo host-etc || echo no-etc; /bin/echo hi");
    listing.root = RootFs::Dir(root.path().to_path_buf());
    listing.mounts.push(Mount::bind("/usr", "/usr", false));
    let out = run(runtime, listing).await;
    assert_eq!(out.exit, Exit::Code(0), "stderr: {}", out.stderr);
    assert_eq!(
        out.stdout,
        "bin\ndev\nlib\nlib64\nproc\ntmp\nusr\nno-etc\nhi\n"
    );
    // A command behind a symlink of the root is found through the bind.
    let mut missing = spec(&["/bin/hane-no-such-program"]);
    missing.root = RootFs::Dir(root.path().to_path_buf());
    missing.mounts.push(Mount::bind("/usr", "/usr", false));
    let error = runtime.start(missing).await.expect_err("not there");
    assert!(
        matches!(error, ContainerError::CommandNotFound { .. }),
        "{error:?}"
    );
    // A root that does not exist is named.
    let mut rootless = sh("true");
    rootless.root = RootFs::Dir(root.path().join("missing"));
    let error = runtime.start(rootless).await.expect_err("no root");
    assert!(error.to_string().contains("missing"), "{error}");
}

#[tokio::test]
async fn a_missing_runtime_is_named() {
    let error = Bubblewrap::new("/nonexistent/bwrap")
        .start(sh("true"))
        .await
        .expect_err("no bwrap");
    assert!(
        matches!(
            error,
            ContainerError::RuntimeNotFound {
                runtime: "bwrap",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("/nonexistent/bwrap"), "{error}");
    let state = tempfile::tempdir().unwrap();
    let error = Runc::new("/nonexistent/runc", state.path())
        .unwrap()
        .start(sh("true"))
        .await
        .expect_err("no runc");
    assert!(error.to_string().contains("/nonexistent/runc"), "{error}");
    assert!(
        error.to_string().contains("cargo xtask provision"),
        "{error}"
    );
}

/// Eight containers started together, each with its own service port and
/// answer: nothing is shared between them, and nothing is left after.
async fn many_at_once(runtime: &dyn Runtime) {
    let host = pong_server().await;
    let starts = (0..8u16).map(|i| {
        let mut spec = spec(&[
            "/usr/bin/python3",
            "-c",
            CONNECT,
            &format!("127.0.0.1:{}", 7000 + i),
        ]);
        spec.services = vec![Service {
            port: 7000 + i,
            host,
        }];
        async move {
            let mut container = runtime.start(spec).await.expect("start");
            let out = output(&mut container).await;
            (i, out, container.cgroup_dirs())
        }
    });
    let mut dirs = Vec::new();
    for (i, out, cgroup) in futures::future::join_all(starts).await {
        assert_eq!(out.exit, Exit::Code(0), "stderr: {}", out.stderr);
        assert_eq!(
            out.stdout,
            format!("127.0.0.1:{} connected pong:ping\n", 7000 + i)
        );
        dirs.extend(cgroup);
    }
    for dir in dirs {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}
