//! The device binary: `hane` for aarch64 Linux (musl, static), built with
//! the device features and profile, run under qemu's user-mode emulation
//! (`qemu-aarch64-static`) on an x86_64 host, or as it is on an aarch64
//! one. Its components are compiled ahead of time by this host's `hane op
//! compile --target aarch64-unknown-linux-musl` (cranelift) and
//! `--engine pulley` (Pulley's bytecode, the same for every 64-bit
//! little-endian host), so the device compiles nothing: each test checks
//! that the cache it reads gained no artifact.
//!
//! `cargo xtask test` builds the device binary beside the other suites,
//! then runs these with `HANE_TEST_DEVICE` (the binary) and
//! `HANE_TEST_QEMU` (the emulator, unset on an aarch64 host); a plain
//! `cargo test` skips them (`#[ignore]`), having no device binary.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hane_builtins::test_programs;

use hane_test_support::file_names;

use crate::common::{ok, text};

/// The device's target triple.
const TARGET: &str = "aarch64-unknown-linux-musl";

const ENGINES: [&str; 2] = ["cranelift", "pulley"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The device binary and how to run it.
struct Device {
    binary: PathBuf,
    qemu: Option<PathBuf>,
}

impl Device {
    /// The binary, under the emulator if there is one.
    fn command(&self) -> Command {
        match &self.qemu {
            Some(qemu) => {
                let mut command = Command::new(qemu);
                command.arg(&self.binary);
                command
            }
            None => Command::new(&self.binary),
        }
    }

    fn from_env() -> Self {
        let binary = std::env::var_os("HANE_TEST_DEVICE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .expect(
                "HANE_TEST_DEVICE names no device binary: `cargo xtask test` builds one and runs these tests",
            );
        let qemu = std::env::var_os("HANE_TEST_QEMU")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        Self { binary, qemu }
    }

    /// `hane` on the device with `engine`, reading compiled components
    /// from `cache` (only) and keeping its store in `store`.
    fn command_in(&self, cache: &Path, store: &Path, engine: &str) -> Command {
        let mut command = self.command();
        command
            .current_dir(repo())
            .env("HANE_CACHE_DIR", cache)
            .env("HANE_ENGINE", engine)
            .env("HANE_STORE", store.join("hane.db"))
            .env("XDG_DATA_HOME", store)
            // A pool of 8 instances: qemu's user-mode emulation takes about
            // half a minute to reserve the default pool's 2 TB of address
            // space, holding every thread of the process meanwhile (its
            // lease's too, which then lapses). A device whose address space
            // is small sizes its pool the same way.
            .env("HANE_MAX_INSTANCES", "8")
            .env_remove("RUST_LOG");
        command
    }

    /// `hane ARGS` on the device, as [`Device::command_in`].
    fn hane(&self, cache: &Path, store: &Path, engine: &str, args: &[&str]) -> Output {
        self.command_in(cache, store, engine)
            .args(args)
            .output()
            .expect("run the device binary")
    }
}

/// This host's `hane op compile COMPONENT --target … -o cache` for
/// `engine`.
fn precompile(cache: &Path, engine: &str, component: &str) {
    let target = if engine == "pulley" {
        "pulley64"
    } else {
        TARGET
    };
    let out = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["op", "compile", component, "--engine", engine])
        .args(["--target", target, "-o"])
        .arg(cache)
        .current_dir(repo())
        .output()
        .expect("run hane op compile");
    ok(&out);
}

/// For `engine`: compiles `components` on this host for the device into a
/// cache of their own, runs `body` with that cache and a store of its own,
/// and checks that the device compiled nothing into the cache.
fn precompiled(engine: &str, components: &[&str], body: impl FnOnce(&Path, &Path)) {
    let cache = tempfile::tempdir().unwrap();
    for component in components {
        precompile(cache.path(), engine, component);
    }
    let before = file_names(cache.path());
    let store = tempfile::tempdir().unwrap();
    body(cache.path(), store.path());
    assert_eq!(
        file_names(cache.path()),
        before,
        "{engine}: the device compiled a component"
    );
}

#[test]
#[ignore = "needs the device binary (HANE_TEST_DEVICE), which `cargo xtask test` builds"]
fn the_device_binary_runs_the_demo_with_both_engines() {
    let device = Device::from_env();
    for engine in ENGINES {
        precompiled(engine, &["examples"], |cache, store| {
            let out = device.hane(cache, store, engine, &["demo"]);
            let stdout = ok(&out);
            for expected in [
                "vehicle-check-scripted",
                "vehicle-check-llm",
                "inspection-reminder",
                "rejected",
            ] {
                assert!(
                    stdout.contains(expected),
                    "{engine}: the demo's output lacks `{expected}`:\n{stdout}"
                );
            }
        });
    }
}

/// Every built-in operation with an input it answers, and the grants it
/// needs; `http.get` fetches from `http` on loopback.
fn builtin_cases(http: &str) -> Vec<(&'static str, Vec<String>, &'static str)> {
    let ledger = |grant: &str, name: &str| {
        vec![
            "--ledger".to_owned(),
            "examples/ledger".to_owned(),
            grant.to_owned(),
            name.to_owned(),
        ]
    };
    let ontology = |tool: &str| {
        let mut args = vec![
            "--ledger",
            "examples/ledger",
            "--ontology",
            "examples/ontology/fleet.yaml",
            "--policy",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
        args.push(format!("examples/tools/{tool}.yaml"));
        args
    };
    let dir = |d: &str| vec!["--allow-dir".to_owned(), d.to_owned()];
    vec![
        (
            "data.find_record",
            ledger("--allow-records", "vehicles"),
            r#"{"collection": "vehicles", "match": {"registration": "架空 300 あ 10-02"}}"#,
        ),
        (
            "data.get_record",
            ledger("--allow-records", "vehicles"),
            r#"{"collection": "vehicles", "id": "V-001"}"#,
        ),
        (
            "documents.read_pages",
            dir("examples/documents"),
            r#"{"path": "/documents/leasing-terms.txt", "page": 2}"#,
        ),
        (
            "documents.read_summary",
            ledger("--allow-documents", "leases"),
            r#"{"set": "leases", "document": "c-1001"}"#,
        ),
        (
            "documents.search",
            dir("examples/documents"),
            r#"{"query": "brake fluid"}"#,
        ),
        (
            "http.get",
            vec!["--allow-host".to_owned(), http.to_owned()],
            // Its URL is set below.
            "",
        ),
        (
            "image.view",
            dir("examples/images"),
            r#"{"path": "/images/gradient-640x400.png", "max_dimension": 64}"#,
        ),
        (
            "ontology.knowledge",
            ontology("ontology.knowledge"),
            r#"{"type":"lease","id":"C-1001","question":"how many kilometres a year are included","limit":2}"#,
        ),
        (
            "ontology.query",
            ontology("ontology.query"),
            r#"{"type":"lease","where":{"months":{"gte":36}},"fields":["contract_no","lessee"],"follow":[{"link":"leased_vehicle","fields":["registration"]}]}"#,
        ),
    ]
}

/// An HTTP server on loopback answering every request with `body`, for
/// as long as the test runs.
fn http_server(body: &'static str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{}", addr.port())
}

#[test]
#[ignore = "needs the device binary (HANE_TEST_DEVICE), which `cargo xtask test` builds"]
fn the_device_binary_runs_every_built_in_operation_with_both_engines() {
    let device = Device::from_env();
    let http = http_server("hello from loopback");
    let names: Vec<&str> = hane_builtins::names().collect();
    let cases = builtin_cases(&http);
    let covered: Vec<&str> = cases.iter().map(|(name, _, _)| *name).collect();
    assert_eq!(covered, names, "every built-in operation has a case here");
    for engine in ENGINES {
        precompiled(engine, &names, |cache, store| {
            for (name, grants, input) in &cases {
                let input = match *name {
                    "http.get" => format!(r#"{{"url": "{http}/x"}}"#),
                    _ => (*input).to_owned(),
                };
                let mut args = vec!["op", "run", name, "--json", "--input", &input];
                args.extend(grants.iter().map(String::as_str));
                let out = device.hane(cache, store, engine, &args);
                let doc: serde_json::Value = serde_json::from_str(&ok(&out))
                    .unwrap_or_else(|e| panic!("{engine} {name}: not JSON ({e})"));
                assert!(
                    doc["error"].is_null() && !doc["output"].is_null(),
                    "{engine} {name}: {doc:#}"
                );
                assert_eq!(doc["engine"], engine, "{engine} {name}: {doc:#}");
                if *name == "http.get" {
                    assert_eq!(doc["output"]["status"], 200, "{doc:#}");
                }
            }
        });
    }
}

/// A hostile guest, its input, its flags, the exit code and the words
/// every host must stop it with.
struct Hostile {
    program: &'static str,
    input: &'static str,
    flags: &'static [&'static str],
    code: i32,
    says: &'static str,
}

const HOSTILE: &[Hostile] = &[
    Hostile {
        program: test_programs::HOSTILE_LOOP,
        input: "{}",
        flags: &["--fuel", "1000000"],
        code: 4,
        says: "fuel exhausted: the operation used all 1000000 units of fuel",
    },
    Hostile {
        program: test_programs::HOSTILE_LOOP,
        input: "{}",
        flags: &["--fuel", "100000000000000", "--timeout", "300ms"],
        code: 4,
        says: "timeout: the operation ran longer than 300ms",
    },
    Hostile {
        program: test_programs::HOSTILE_MEMORY,
        input: "{}",
        flags: &["--memory", "16Mi"],
        code: 4,
        says: "above the limit of 16Mi",
    },
    Hostile {
        program: test_programs::HOSTILE_RECURSION,
        input: "{}",
        flags: &[],
        code: 1,
        says: "trap: wasm trap",
    },
    Hostile {
        program: test_programs::HOSTILE_PANIC,
        input: r#"{"reason":"x"}"#,
        flags: &[],
        code: 1,
        says: "trap: the operation panicked: hostile panic: x",
    },
    Hostile {
        program: test_programs::HOSTILE_OUTPUT,
        input: r#"{"bytes": 4000000}"#,
        // Its 100 M of fuel take Pulley under qemu about 4.7 s, too near
        // the default 5 s: the limit meant here is the output's.
        flags: &["--timeout", "60s"],
        code: 4,
        says: "output too large: more than the limit of 1Mi",
    },
    Hostile {
        program: test_programs::HOSTILE_BAD_OUTPUT,
        input: "{}",
        flags: &[],
        code: 1,
        says: "invalid output: at `/count`: 42 is greater than the maximum of 10",
    },
    Hostile {
        program: test_programs::HOSTILE_READ_FILE,
        input: r#"{"path":"/etc/passwd"}"#,
        flags: &[],
        code: 3,
        says: "not found: read /etc/passwd: No such file or directory",
    },
    Hostile {
        program: test_programs::HOSTILE_TCP,
        input: r#"{"addr":"127.0.0.1:9"}"#,
        flags: &[],
        code: 5,
        says: "denied: raw socket tcp connect to 127.0.0.1:9 is not granted",
    },
    Hostile {
        program: test_programs::HOSTILE_ENV,
        input: r#"{"key":"PATH"}"#,
        flags: &[],
        code: 3,
        says: "not found: PATH is not set",
    },
    Hostile {
        program: test_programs::HOSTILE_HTTP,
        input: r#"{"url":"http://127.0.0.1:9/x"}"#,
        flags: &["--allow-host", "https://example.com"],
        code: 5,
        says: "denied: http request to http://127.0.0.1:9 is not on the allow-list",
    },
];

#[test]
#[ignore = "needs the device binary (HANE_TEST_DEVICE), which `cargo xtask test` builds"]
fn the_device_binary_contains_hostile_guests_as_this_host_does() {
    let device = Device::from_env();
    let programs: Vec<&str> = HOSTILE.iter().map(|case| case.program).collect();
    for engine in ENGINES {
        precompiled(engine, &programs, |cache, store| {
            for case in HOSTILE {
                let mut args = vec!["op", "run", case.program, "--input", case.input];
                args.extend(case.flags);
                let out = device.hane(cache, store, engine, &args);
                let name = Path::new(case.program)
                    .file_name()
                    .unwrap()
                    .to_string_lossy();
                let stderr = text(&out.stderr);
                assert_eq!(
                    out.status.code(),
                    Some(case.code),
                    "{engine} {name}: {stderr}"
                );
                assert!(
                    stderr.contains(case.says),
                    "{engine} {name}: stderr lacks `{}`:\n{stderr}",
                    case.says
                );
                // This host stops it the same way.
                let here = Command::new(env!("CARGO_BIN_EXE_hane"))
                    .args(&args)
                    .args(["--engine", engine])
                    .current_dir(repo())
                    .env("HANE_CACHE_DIR", hane_test_support::component_cache())
                    .output()
                    .unwrap();
                assert_eq!(
                    here.status.code(),
                    Some(case.code),
                    "{engine} {name} on this host: {}",
                    text(&here.stderr)
                );
            }
        });
    }
}

#[test]
#[ignore = "needs the device binary (HANE_TEST_DEVICE), which `cargo xtask test` builds"]
fn the_device_binary_refuses_a_postgresql_store_naming_why() {
    let device = Device::from_env();
    let cache = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let out = device
        .command_in(cache.path(), store.path(), "cranelift")
        .env("HANE_STORE", "postgres://hane:secret@127.0.0.1:9/hane")
        .args(["runs", "list"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "`postgres://hane:***@127.0.0.1:9/hane` is a PostgreSQL database, and this hane was built without PostgreSQL"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("secret"), "{stderr}");
}
