//! The `hane` binary end to end: outputs, receipts and exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hane_builtins::test_programs;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn hane(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(args)
        .current_dir(repo())
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .output()
        .expect("run hane")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exit code")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout_json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn run_prints_output_on_stdout_and_the_receipt_on_stderr() {
    let out = hane(&[
        "op",
        "run",
        "documents.search",
        "--input",
        r#"{"query":"tyre tread depth"}"#,
        "--allow-dir",
        "examples/documents",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc = stdout_json(&out);
    assert_eq!(
        doc["results"][0]["path"],
        "/documents/inspection-procedure.md"
    );
    let err = stderr(&out);
    assert!(
        err.contains("receipt: documents.search 0.1.0 succeeded in "),
        "{err}"
    );
    assert!(err.contains("fuel "), "{err}");
}

#[test]
fn json_mode_prints_one_object() {
    let out = hane(&[
        "op",
        "run",
        "documents.read_pages",
        "--input",
        r#"{"path":"/documents/faq.md","lines":"1-2"}"#,
        "--allow-dir",
        "examples/documents",
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["output"]["start_line"], 1);
    assert_eq!(doc["error"], serde_json::Value::Null);
    assert_eq!(doc["receipt"]["outcome"], "succeeded");
    assert!(doc["receipt"]["fuelConsumed"].as_u64().unwrap() > 0);
}

#[test]
fn exit_codes_tell_failures_apart() {
    // 2: input that is not JSON, input that fails the schema, unknown component.
    let out = hane(&["op", "run", "documents.search", "--input", "{oops"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("invalid input: not JSON"));
    let out = hane(&[
        "op",
        "run",
        "documents.search",
        "--input",
        r#"{"query": 3}"#,
    ]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("at `/query`"), "{}", stderr(&out));
    let out = hane(&["op", "run", "nope.nothing", "--input", "{}"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("neither a file nor a built-in operation"));
    let out = hane(&[
        "op",
        "run",
        "documents.search",
        "--input",
        "{}",
        "--memory",
        "64MB",
    ]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("invalid size `64MB`"),
        "{}",
        stderr(&out)
    );

    // 3: the operation's own error.
    let out = hane(&[
        "op",
        "run",
        "documents.read_pages",
        "--input",
        r#"{"path":"/documents/missing.md"}"#,
        "--allow-dir",
        "examples/documents",
    ]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("operation error: not found"),
        "{}",
        stderr(&out)
    );

    // 4: a limit.
    let out = hane(&[
        "op",
        "run",
        test_programs::HOSTILE_LOOP,
        "--input",
        "{}",
        "--fuel",
        "1000000",
    ]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains("fuel exhausted: the operation used all 1000000 units of fuel"));
    let out = hane(&[
        "op",
        "run",
        test_programs::HOSTILE_LOOP,
        "--input",
        "{}",
        "--fuel",
        "100000000000000",
        "--timeout",
        "100ms",
    ]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains("timeout: the operation ran longer than 100ms"));
    let out = hane(&[
        "op",
        "run",
        test_programs::HOSTILE_MEMORY,
        "--input",
        "{}",
        "--memory",
        "16Mi",
    ]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("above the limit of 16Mi"),
        "{}",
        stderr(&out)
    );

    // 5: refused by policy at load, and denied at run time.
    let out = hane(&[
        "op",
        "run",
        "http.get",
        "--input",
        r#"{"url":"http://127.0.0.1:9/"}"#,
    ]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("policy grants no http hosts"),
        "{}",
        stderr(&out)
    );
    let out = hane(&[
        "op",
        "run",
        "http.get",
        "--input",
        r#"{"url":"http://127.0.0.1:9/"}"#,
        "--allow-host",
        "https://example.com",
    ]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("denied: http request to http://127.0.0.1:9 is not on the allow-list")
    );
    // A write under a folder granted read-only is a denial too, counted in
    // the receipt; nothing is written.
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("ok.txt"), "inside").unwrap();
    let grant = format!("{}:/granted:ro", folder.path().display());
    let out = hane(&[
        "op",
        "run",
        test_programs::GUEST_FILES,
        "--input",
        r#"{"path":"/granted/ok.txt","write":{"path":"/granted/new.txt","content":"x"}}"#,
        "--allow-dir",
        &grant,
        "--json",
    ]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["error"]["outcome"], "denied", "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("opening `new.txt` was refused"),
        "{doc}"
    );
    assert_eq!(doc["receipt"]["hostCalls"]["denied"], 1, "{doc}");
    assert!(!folder.path().join("new.txt").exists());

    // 1: anything else, such as a trap.
    let out = hane(&[
        "op",
        "run",
        test_programs::HOSTILE_PANIC,
        "--input",
        r#"{"reason":"x"}"#,
    ]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("trap: the operation panicked: hostile panic: x"));
}

#[test]
fn a_component_built_without_the_sdk_runs() {
    let out = hane(&[
        "op",
        "run",
        test_programs::RAW_REVERSE,
        "--input",
        r#"{"text":"hane"}"#,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["reversed"], "enah");
    assert!(
        stderr(&out).contains("[info] reversed 4 characters"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_policy_manifest_grants_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("search.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: operations/v1alpha1\nkind: Operation\nmetadata:\n  name: search\nspec:\n  component: builtin:documents.search\n  capabilities:\n    files:\n      - host: {}\n        guest: /docs\n  limits:\n    fuel: 1000\n",
            repo().join("examples/documents").display()
        ),
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    // The manifest's fuel limit applies ...
    let out = hane(&["op", "run", m, "--input", r#"{"query":"tyre"}"#]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    // ... until a flag overrides it; its directory grant applies too.
    let out = hane(&[
        "op",
        "run",
        m,
        "--input",
        r#"{"query":"tyre"}"#,
        "--fuel",
        "2000000000",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout_json(&out)["results"][0]["path"]
            .as_str()
            .unwrap()
            .starts_with("/docs/"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    std::fs::write(
        &manifest,
        "apiVersion: operations/v1alpha1\nkind: Operation\nmetadata:\n  name: search\nspec:\n  component: builtin:documents.search\n  limits:\n    fuell: 5\n",
    )
    .unwrap();
    let out = hane(&[
        "op",
        "run",
        "documents.search",
        "--policy",
        m,
        "--input",
        "{}",
    ]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("search.yaml:8: spec.limits.fuell: unknown field `fuell`"),
        "{err}"
    );
}

#[test]
fn inspect_lists_imports_and_grants() {
    let out = hane(&["op", "inspect", "http.get", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["name"], "http.get");
    assert!(doc["digest"].as_str().unwrap().starts_with("sha256:"));
    assert!(
        doc["needsGrants"]
            .as_array()
            .unwrap()
            .contains(&"http".into())
    );
    let imports = doc["imports"].as_array().unwrap();
    assert!(imports.iter().any(|i| {
        i["grant"] == "http"
            && i["name"]
                .as_str()
                .unwrap()
                .starts_with("wasi:http/outgoing-handler@")
    }));
    assert_eq!(doc["inputSchema"]["type"], "object");

    let out = hane(&["op", "inspect", "documents.search"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("documents.search 0.1.0 (read)"), "{text}");
    assert!(text.contains("files grant (--allow-dir)"), "{text}");
}

#[test]
fn run_reads_a_ledger_through_the_records_capability() {
    let out = hane(&[
        "op",
        "run",
        "data.find_record",
        "--input",
        r#"{"collection":"vehicles","match":{"registration":"架空 300 あ 10-02"}}"#,
        "--ledger",
        "examples/ledger",
        "--allow-records",
        "vehicles",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["records"][0]["id"], "V-001");
    assert_eq!(doc["records"][0]["model"], "Toyota Hiace Van");
    assert_eq!(doc["truncated"], false);
    let err = stderr(&out);
    assert!(
        err.contains("/ 1 records / 0 documents / 0 denied"),
        "{err}"
    );

    // The manifest grants the collections; the ledger comes from the flag.
    let out = hane(&[
        "op",
        "run",
        "examples/tools/data.get_record.yaml",
        "--input",
        r#"{"collection":"leases","id":"L-02"}"#,
        "--ledger",
        "examples/ledger",
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["output"]["record"]["lessee"], "Minato Catering");
    assert_eq!(doc["receipt"]["hostCalls"]["records"], 1);
}

#[test]
fn ledger_grants_and_ledgers_are_checked() {
    // Imports `records` with no collection granted: refused at load.
    let out = hane(&[
        "op",
        "run",
        "data.find_record",
        "--input",
        r#"{"collection":"vehicles","match":{"id":"V-001"}}"#,
        "--ledger",
        "examples/ledger",
    ]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "imports `hane:operation/records@0.1.0`, but its policy grants no collections"
        ),
        "{}",
        stderr(&out)
    );

    // A collection that is not granted: the guest is denied.
    let out = hane(&[
        "op",
        "run",
        "data.find_record",
        "--input",
        r#"{"collection":"leases","match":{"id":"L-01"}}"#,
        "--ledger",
        "examples/ledger",
        "--allow-records",
        "vehicles",
        "--json",
    ]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let doc = stdout_json(&out);
    assert_eq!(doc["error"]["outcome"], "denied");
    assert_eq!(doc["receipt"]["hostCalls"]["denied"], 1);

    let out = hane(&[
        "op",
        "run",
        "data.find_record",
        "--input",
        "{}",
        "--allow-records",
        "Vehicles",
    ]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("names are 1 to 64 of a-z"),
        "{}",
        stderr(&out)
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("records")).unwrap();
    std::fs::write(dir.path().join("records/v.csv"), "id,a\nV-1,\"x\"y\n").unwrap();
    let out = hane(&[
        "op",
        "run",
        "data.get_record",
        "--input",
        r#"{"collection":"v","id":"V-1"}"#,
        "--ledger",
        dir.path().to_str().unwrap(),
        "--allow-records",
        "v",
    ]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("v.csv:2: bad CSV quoting: text after a closing quote"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn inspect_shows_ledger_imports_and_the_manifest_grants() {
    let out = hane(&[
        "op",
        "inspect",
        "examples/tools/documents.read_summary.yaml",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("documents grant (--allow-documents)"),
        "{text}"
    );
    let needs = text
        .lines()
        .find(|l| l.starts_with("needs grants: "))
        .unwrap();
    assert!(needs.ends_with("documents"), "{text}");
    assert!(text.contains("granted by the manifest:"), "{text}");
    assert!(text.contains("documents  leases"), "{text}");

    let out = hane(&[
        "op",
        "inspect",
        "examples/tools/data.find_record.yaml",
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc = stdout_json(&out);
    let needs = doc["needsGrants"].as_array().unwrap();
    assert!(needs.contains(&"records".into()), "{needs:?}");
    assert!(!needs.contains(&"documents".into()), "{needs:?}");
    assert_eq!(
        doc["grants"]["records"],
        serde_json::json!(["vehicles", "leases", "drivers"])
    );
}

/// The author tutorial: new, test, build, inspect, run.
#[test]
fn a_new_operation_builds_tests_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let crate_dir = dir.path().join("demo");
    let out = hane(&["op", "new", "demo", "--path", crate_dir.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Guests share one target dir so dependencies compile once.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../guests");
    let cargo = |args: &[&str]| {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args(args)
            .current_dir(&crate_dir)
            .env("CARGO_TARGET_DIR", &target);
        for key in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
        ] {
            cmd.env_remove(key);
        }
        let out = cmd.output().expect("run cargo");
        assert!(
            out.status.success(),
            "cargo {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    cargo(&["test", "--quiet"]);
    cargo(&["build", "--release", "--target", "wasm32-wasip2"]);
    let wasm = target.join("wasm32-wasip2/release/demo.wasm");
    let wasm = wasm.to_str().unwrap();

    let out = hane(&["op", "inspect", wasm]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("demo 0.1.0 (read)"));
    let out = hane(&["op", "run", wasm, "--input", r#"{"text":"one two\nthree"}"#]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout_json(&out),
        serde_json::json!({"words": 3, "lines": 2, "characters": 13})
    );
    let out = hane(&["op", "run", wasm, "--input", r#"{"text":""}"#]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));

    let again = hane(&["op", "new", "demo", "--path", crate_dir.to_str().unwrap()]);
    assert_eq!(code(&again), 1);
    assert!(stderr(&again).contains("already exists"));
}

/// `hane` under `prlimit --as`, from the repository.
fn limited(limit: &str, store: &Path, args: &[&str]) -> Output {
    Command::new("prlimit")
        .arg(format!("--as={limit}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_hane"))
        .args(args)
        .current_dir(repo())
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("HANE_STORE", store)
        .output()
        .expect("run prlimit")
}

/// Under an address-space limit (RLIMIT_AS) too small for the pool of
/// instances, operations, releases and runs still work: memories are
/// allocated per instance, and memory limits still hold.
#[test]
fn operations_and_runs_work_under_a_small_address_space() {
    let dir = tempfile::tempdir().unwrap();
    for limit in ["4294967296", "1073741824"] {
        let store = dir.path().join(format!("{limit}.db"));
        let out = limited(
            limit,
            &store,
            &[
                "op",
                "run",
                "documents.search",
                "--input",
                r#"{"query": "brake fluid"}"#,
                "--allow-dir",
                "examples/documents",
            ],
        );
        assert_eq!(code(&out), 0, "under {limit}: {}", stderr(&out));
        let out = limited(
            limit,
            &store,
            &[
                "op",
                "run",
                test_programs::HOSTILE_MEMORY,
                "--input",
                "{}",
                "--memory",
                "16Mi",
            ],
        );
        assert_eq!(code(&out), 4, "under {limit}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("above the limit of 16Mi"),
            "{}",
            stderr(&out)
        );
        let out = limited(limit, &store, &["release", "activate", "examples"]);
        assert_eq!(code(&out), 0, "under {limit}: {}", stderr(&out));
        let out = limited(
            limit,
            &store,
            &[
                "run",
                "vehicle-check-scripted",
                "--input",
                r#"{"vehicle": "架空 300 あ 10-02"}"#,
                "--json",
            ],
        );
        assert_eq!(
            code(&out),
            0,
            "under {limit}: {}{}",
            stderr(&out),
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(stdout_json(&out)["status"], "succeeded");
    }
    // The demo, whole, under the smaller limit.
    let out = limited(
        "1073741824",
        &dir.path().join("demo.db"),
        &["demo", "--examples", "examples"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn an_ontology_is_given_to_the_operation_after_the_ledger_is_checked_against_it() {
    let query = r#"{"type":"lease","where":{"months":{"gte":36}},"fields":["contract_no"],"follow":[{"link":"leased_vehicle","fields":["registration"]}]}"#;
    let out = hane(&[
        "op",
        "run",
        "ontology.query",
        "--ledger",
        "examples/ledger",
        "--ontology",
        "examples/ontology/fleet.yaml",
        "--policy",
        "examples/tools/ontology.query.yaml",
        "--input",
        query,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout_json(&out)["objects"],
        serde_json::json!([
            {"contract_no": "C-1001", "leased_vehicle": {"registration": "架空 300 あ 10-02"}},
            {"contract_no": "C-1003", "leased_vehicle": {"registration": "架空 400 か 77-10"}}
        ])
    );

    // A ledger that contradicts the ontology is refused before anything
    // runs, naming the field and the record.
    let dir = tempfile::tempdir().unwrap();
    let wrong = std::fs::read_to_string(repo().join("examples/ontology/fleet.yaml"))
        .unwrap()
        .replace(
            "depot: { type: string, description: Where",
            "depot: { type: date, description: Where",
        );
    let file = dir.path().join("fleet.yaml");
    std::fs::write(&file, wrong).unwrap();
    let out = hane(&[
        "op",
        "run",
        "ontology.query",
        "--ledger",
        "examples/ledger",
        "--ontology",
        file.to_str().unwrap(),
        "--input",
        query,
    ]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("the ledger does not meet the ontology"),
        "{err}"
    );
    assert!(
        err.contains("spec.objectTypes.vehicle.properties.depot: 5 records of `vehicles` do not hold a date: record `V-001` has \"Shinagawa\""),
        "{err}"
    );

    // Without a ledger there is nothing to check it against.
    let out = hane(&[
        "op",
        "run",
        "ontology.query",
        "--ontology",
        "examples/ontology/fleet.yaml",
        "--input",
        query,
    ]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("--ledger"), "{}", stderr(&out));
}

/// `hane` from the repository with the component cache `cache` and the
/// sandbox's warnings on stderr.
fn hane_cached(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(args)
        .current_dir(repo())
        .env("HANE_CACHE_DIR", cache)
        .env_remove("RUST_LOG")
        .env_remove("HANE_ENGINE")
        .output()
        .expect("run hane")
}

/// The files of `dir` by name, with their inode numbers: a compilation
/// writes its artifact by rename, which a file's inode would show.
fn inodes(dir: &Path) -> std::collections::BTreeMap<String, u64> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().ino(),
            )
        })
        .collect()
}

const SEARCH: [&str; 6] = [
    "op",
    "run",
    "documents.search",
    "--input",
    r#"{"query":"tyre tread depth"}"#,
    "--allow-dir",
];

/// `hane op run documents.search` on the example documents, plus `extra`.
fn search(cache: &Path, extra: &[&str]) -> Output {
    let mut args = SEARCH.to_vec();
    args.push("examples/documents");
    args.extend_from_slice(extra);
    hane_cached(cache, &args)
}

#[test]
fn compiled_artifacts_of_a_release_load_without_compiling() {
    let dir = tempfile::tempdir().unwrap();
    // A release of two operations: a built-in and a component file beside
    // its manifest.
    let release = dir.path().join("release");
    std::fs::create_dir_all(release.join("tools")).unwrap();
    std::fs::copy(test_programs::GUEST_ECHO, release.join("tools/echo.wasm")).unwrap();
    for (name, component) in [
        ("documents.search", "builtin:documents.search"),
        ("test.echo", "echo.wasm"),
    ] {
        std::fs::write(
            release.join(format!("tools/{name}.yaml")),
            format!(
                "apiVersion: operations/v1alpha1\nkind: Operation\nmetadata:\n  name: {name}\nspec:\n  component: {component}\n"
            ),
        )
        .unwrap();
    }
    let out_dir = dir.path().join("artifacts");
    let out = hane_cached(
        &dir.path().join("unused"),
        &[
            "op",
            "compile",
            release.to_str().unwrap(),
            "-o",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = printed.lines().collect();
    let artifacts = inodes(&out_dir);
    // One line and one file per component.
    assert_eq!((lines.len(), artifacts.len()), (2, 2), "{printed}");
    let line = lines
        .iter()
        .find(|l| l.starts_with("documents.search "))
        .unwrap_or_else(|| panic!("{printed}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert!(fields[1].starts_with("sha256:"), "{line}");
    assert_eq!(fields[2], "cranelift", "{line}");
    let file = Path::new(fields[5]).file_name().unwrap().to_str().unwrap();
    assert!(
        file.starts_with(fields[1].trim_start_matches("sha256:")) && file.ends_with(".cwasm"),
        "{line}"
    );
    assert!(artifacts.contains_key(file), "{artifacts:?}");

    let run = search(&out_dir, &[]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(stderr(&run).contains(" on cranelift"), "{}", stderr(&run));
    assert_eq!(inodes(&out_dir), artifacts, "the run compiled");
}

#[test]
fn pulley_artifacts_load_under_engine_pulley() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("artifacts");
    let out = hane_cached(
        &dir.path().join("unused"),
        &[
            "op",
            "compile",
            "documents.search",
            "--engine",
            "pulley",
            "-o",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(" pulley pulley64 "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let artifacts = inodes(&out_dir);
    let run = search(&out_dir, &["--engine", "pulley", "--json"]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let doc = stdout_json(&run);
    assert_eq!(doc["engine"], "pulley");
    assert_eq!(doc["receipt"]["outcome"], "succeeded");
    assert_eq!(inodes(&out_dir), artifacts, "the run compiled");
}

#[test]
fn a_cache_that_cannot_be_written_compiles_in_memory_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    // Under a file, so it cannot be made even by root.
    std::fs::write(dir.path().join("file"), b"").unwrap();
    let cache = dir.path().join("file/cache");
    let run = search(&cache, &[]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let err = stderr(&run);
    assert_eq!(
        err.matches("cannot write compiled components to").count(),
        1,
        "{err}"
    );
    assert!(err.contains("compiling in memory instead"), "{err}");
}

#[test]
fn a_compiled_artifact_given_to_op_run_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let other = if cfg!(target_arch = "aarch64") {
        "x86_64-unknown-linux-musl"
    } else {
        "aarch64-unknown-linux-musl"
    };
    for (flags, says) in [
        (
            ["--target", other],
            "compiled for another target, wasmtime version or engine settings than this host's cranelift engine",
        ),
        (
            ["--engine", "pulley"],
            "compiled for this host's pulley engine, not cranelift",
        ),
    ] {
        let out_dir = dir.path().join(flags[1]);
        let mut args = vec![
            "op",
            "compile",
            test_programs::GUEST_ECHO,
            "-o",
            out_dir.to_str().unwrap(),
        ];
        args.extend(flags);
        let out = hane_cached(&dir.path().join("unused"), &args);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(flags[1]),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let artifact = std::fs::read_dir(&out_dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let run = hane_cached(
            &dir.path().join("unused"),
            &["op", "run", artifact.to_str().unwrap(), "--input", "{}"],
        );
        assert_eq!(code(&run), 2, "{}", stderr(&run));
        let err = stderr(&run);
        assert!(
            err.contains("is a compiled artifact, not a component"),
            "{err}"
        );
        assert!(err.contains(says), "{err}");
        assert!(
            err.contains("point $HANE_CACHE_DIR at the directory of compiled artifacts"),
            "{err}"
        );
        assert!(!err.contains("magic"), "{err}");
    }
}

#[test]
fn hane_engine_names_an_engine() {
    let out = Command::new(env!("CARGO_BIN_EXE_hane"))
        .args(["op", "inspect", "documents.search"])
        .current_dir(repo())
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env("HANE_ENGINE", "jit")
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(err.contains("HANE_ENGINE"), "{err}");
    assert!(err.contains("expected cranelift or pulley"), "{err}");
    let out = hane(&[
        "op",
        "inspect",
        "documents.search",
        "--engine",
        "pulley",
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["engine"], "pulley");
}

/// `HANE_MAX_INSTANCES` sizes the sandbox's pool: under an address-space
/// limit that cannot hold the default 256 slots, a pool of 2 still fits;
/// a value that is no number of instances is refused, naming it.
#[test]
fn max_instances_sizes_the_pool_and_is_checked() {
    let store = tempfile::tempdir().unwrap();
    let run = |instances: &str| {
        Command::new("bash")
            .args(["-c", "ulimit -v 40000000 && exec \"$0\" runs list"])
            .arg(env!("CARGO_BIN_EXE_hane"))
            .current_dir(repo())
            .env("HANE_STORE", store.path().join("hane.db"))
            .env("HANE_MAX_INSTANCES", instances)
            .output()
            .expect("run hane")
    };
    let default = run("");
    assert_eq!(code(&default), 0, "{}", stderr(&default));
    assert!(
        stderr(&default).contains("cannot hold the 2080Gi a pool of 256 instances reserves"),
        "{}",
        stderr(&default)
    );
    let two = run("2");
    assert_eq!(code(&two), 0, "{}", stderr(&two));
    assert!(!stderr(&two).contains("cannot hold"), "{}", stderr(&two));
    for bad in ["0", "many", "5000"] {
        let out = run(bad);
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "$HANE_MAX_INSTANCES=`{bad}` is not a number of instances: give a whole number from 1 to 4096"
            )),
            "{}",
            stderr(&out)
        );
    }
}
