//! What a person names on the command line is read bounded: a device, a
//! FIFO or a file over its cap ends `hane` promptly with an error naming
//! it. Each `hane` here runs under a memory limit and a time limit, so a
//! read that does not stop fails the test instead of filling the machine.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::{failed, text};

/// The data segment `hane` may have (`RLIMIT_DATA`): far above what a run
/// needs, far below what reading `/dev/zero` whole would take. Not
/// `RLIMIT_AS`: wasmtime reserves many GiB of address space it never
/// touches.
const MEMORY_LIMIT: u64 = 1 << 30;

/// How long one `hane` may take here.
const TIME_LIMIT: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `hane ARGS` with `stdin`, under [`MEMORY_LIMIT`] and [`TIME_LIMIT`].
fn bounded(args: &[&str], stdin: Stdio) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hane"));
    command
        .args(args)
        .current_dir(repo())
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[expect(
        unsafe_code,
        reason = "pre_exec runs between fork and exec, where setrlimit is safe to call"
    )]
    unsafe {
        command.pre_exec(|| {
            let limit = rustix::process::Rlimit {
                current: Some(MEMORY_LIMIT),
                maximum: Some(MEMORY_LIMIT),
            };
            rustix::process::setrlimit(rustix::process::Resource::Data, limit)
                .map_err(std::io::Error::from)
        });
    }
    let child = command.spawn().expect("run hane");
    let pid = rustix::process::Pid::from_child(&child);
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || sender.send(child.wait_with_output()));
    match receiver.recv_timeout(TIME_LIMIT) {
        Ok(output) => output.expect("wait for hane"),
        Err(_) => {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            panic!("hane {args:?} did not end within {TIME_LIMIT:?}");
        }
    }
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success());
}

#[test]
fn the_memory_limit_leaves_room_for_an_ordinary_run() {
    // Otherwise the refusals below could pass for the wrong reason.
    let out = bounded(
        &[
            "op",
            "run",
            "documents.search",
            "--input",
            r#"{"query":"tyre tread depth"}"#,
            "--allow-dir",
            "examples/documents",
        ],
        Stdio::null(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("inspection-procedure.md"));
}

#[test]
fn a_device_named_as_input_or_component_is_refused_at_once() {
    let message = failed(
        &bounded(
            &["op", "run", "documents.search", "--input", "@/dev/zero"],
            Stdio::null(),
        ),
        2,
    );
    assert_eq!(
        message,
        "error: /dev/zero is a character device, not a regular file; inputs are read from regular files\n"
    );
    let message = failed(
        &bounded(&["op", "run", "/dev/zero", "--input", "{}"], Stdio::null()),
        2,
    );
    assert_eq!(
        message,
        "error: /dev/zero is a character device, not a regular file; components are read from regular files\n"
    );
    // An agent's input too.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hane.db");
    let message = failed(
        &bounded(
            &[
                "run",
                "notify",
                "--input",
                "@/dev/zero",
                "--store",
                store.to_str().unwrap(),
            ],
            Stdio::null(),
        ),
        2,
    );
    assert!(
        message.contains("/dev/zero is a character device, not a regular file"),
        "{message}"
    );
}

#[test]
fn stdin_is_read_only_when_asked_and_only_up_to_the_cap() {
    let zero = || Stdio::from(std::fs::File::open("/dev/zero").unwrap());
    let message = failed(
        &bounded(&["op", "run", "documents.search", "--input", "@-"], zero()),
        2,
    );
    assert_eq!(
        message,
        "error: stdin is larger than the 1 MiB cap on inputs\n"
    );
    // Without `@-`, stdin is not read at all: the inline input is used.
    let out = bounded(
        &[
            "op",
            "run",
            "documents.search",
            "--input",
            r#"{"query":"tyre"}"#,
            "--allow-dir",
            "examples/documents",
        ],
        zero(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// `hane op run` opens a guest's files on the thread that runs the call:
/// a FIFO in a granted folder is refused, never waited on.
#[test]
fn a_guest_opening_a_fifo_is_refused_and_hane_ends() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("notes.md"));
    let message = failed(
        &bounded(
            &[
                "op",
                "run",
                "documents.read_pages",
                "--input",
                r#"{"path":"notes.md"}"#,
                "--allow-dir",
                &dir.path().display().to_string(),
            ],
            Stdio::null(),
        ),
        5,
    );
    assert!(
        message.contains(
            "filesystem: opening `notes.md` was refused: it is a FIFO or a socket, not a regular file or folder"
        ),
        "{message}"
    );
}

#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("input.json");
    mkfifo(&fifo);
    let input = format!("@{}", fifo.display());
    let message = failed(
        &bounded(
            &["op", "run", "documents.search", "--input", &input],
            Stdio::null(),
        ),
        2,
    );
    assert_eq!(
        message,
        format!(
            "error: {} is a FIFO, not a regular file; inputs are read from regular files\n",
            fifo.display()
        )
    );
    // A policy manifest, and an operation manifest named as the component.
    let policy = dir.path().join("policy.yaml");
    mkfifo(&policy);
    let message = failed(
        &bounded(
            &[
                "op",
                "run",
                "documents.search",
                "--input",
                "{}",
                "--policy",
                policy.to_str().unwrap(),
            ],
            Stdio::null(),
        ),
        2,
    );
    assert!(
        message.contains("a FIFO, not a regular file; manifests are read from regular files"),
        "{message}"
    );
    let message = failed(
        &bounded(
            &["op", "run", policy.to_str().unwrap(), "--input", "{}"],
            Stdio::null(),
        ),
        2,
    );
    assert!(message.contains(&policy.display().to_string()), "{message}");
    assert!(message.contains("a FIFO, not a regular file"), "{message}");
}

#[test]
fn a_file_over_its_cap_is_refused_naming_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.json");
    // Valid JSON, one byte too long.
    let mut big = vec![b' '; 1 << 20];
    big[0] = b'{';
    big.push(b'}');
    std::fs::write(&file, &big).unwrap();
    let input = format!("@{}", file.display());
    let message = failed(
        &bounded(
            &["op", "run", "documents.search", "--input", &input],
            Stdio::null(),
        ),
        2,
    );
    assert_eq!(
        message,
        format!(
            "error: {} is larger than the 1 MiB cap on inputs\n",
            file.display()
        )
    );
    // At the cap it is read.
    big.pop();
    *big.last_mut().unwrap() = b'}';
    std::fs::write(&file, &big).unwrap();
    let out = bounded(
        &["op", "run", "documents.search", "--input", &input],
        Stdio::null(),
    );
    // It was read: what is wrong now is the input itself.
    let message = failed(&out, 2);
    assert!(message.contains("invalid input"), "{message}");
    assert!(!message.contains("cap"), "{message}");
}
