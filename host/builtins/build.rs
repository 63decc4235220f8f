//! Compiles the guest workspaces (`operations/`, and `tests/guests/` with the
//! `test-programs` feature) to wasm32-wasip2 components, the way wasmtime's
//! test-programs are built, so `cargo build` from a fresh clone needs no
//! extra step: a toolchain without the target gets it through rustup here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .join("../..")
        .canonicalize()
        .expect("repository root");
    let out_dir = PathBuf::from(env("OUT_DIR"));
    let target_dir = guest_target_dir(&out_dir);
    ensure_target(&target_dir);

    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!(
        "cargo:rerun-if-changed={}",
        root.join("guest-sdk").display()
    );

    let mut code = String::new();
    let ops = build_workspace(&root.join("operations"), &target_dir);
    code.push_str("/// Every built-in operation: its name and component bytes.\n");
    code.push_str("pub static BUILTINS: &[Builtin] = &[\n");
    for (file, path) in &ops {
        let name = file.replacen('_', ".", 1);
        // The digest of the very file `include_bytes!` embeds, so that no
        // process has to hash the built-ins (4.8 MB) to know them.
        let bytes = std::fs::read(path).expect("read a built component");
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        writeln!(
            code,
            "    Builtin {{ name: {name:?}, bytes: include_bytes!({:?}), digest: {digest:?} }},",
            path.display()
        )
        .unwrap();
    }
    code.push_str("];\n");

    if std::env::var_os("CARGO_FEATURE_TEST_PROGRAMS").is_some() {
        let programs = build_workspace(&root.join("tests/guests"), &target_dir);
        code.push_str("/// Paths of the guest programs under `tests/guests`, built for tests.\n");
        code.push_str("pub mod test_programs {\n");
        for (file, path) in &programs {
            writeln!(
                code,
                "    /// `tests/guests/src/bin/{file}.rs` as a component.\n    pub const {}: &str = {:?};",
                file.to_uppercase(),
                path.display()
            )
            .unwrap();
        }
        code.push_str(
            "    /// Every program, by file name.\n    pub const ALL: &[(&str, &str)] = &[\n",
        );
        for (file, _) in &programs {
            writeln!(code, "        ({file:?}, {}),", file.to_uppercase()).unwrap();
        }
        code.push_str("    ];\n}\n");
        // As wasmtime's test-programs do: `foreach_test_program!(m)` calls
        // `m!(name)` for every program, so a test crate can refuse to
        // compile while a program has no test.
        code.push_str(
            "/// Calls `$mac!(name)` for every program under `tests/guests`.\n#[macro_export]\nmacro_rules! foreach_test_program {\n    ($mac:ident) => {\n",
        );
        for (file, _) in &programs {
            writeln!(code, "        $mac!({file});").unwrap();
        }
        code.push_str("    };\n}\n");
    }
    std::fs::write(out_dir.join("components.rs"), code).expect("write components.rs");
}

/// Makes sure the toolchain building this crate can build for [`TARGET`]:
/// when its standard library for the target is missing, adds it with
/// `rustup target add` for the toolchain in use (the one
/// `rust-toolchain.toml` pins), saying so in one line. Under a lock, since
/// cargo may run this script twice at once (with and without features).
fn ensure_target(target_dir: &Path) {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {rustc}: {e}"));
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    let installed = || {
        sysroot
            .join("lib/rustlib")
            .join(TARGET)
            .join("lib")
            .is_dir()
    };
    if installed() {
        return;
    }
    std::fs::create_dir_all(target_dir).expect("create the guests' target dir");
    let lock = std::fs::File::create(target_dir.join(".target-install.lock"))
        .expect("create the target install lock");
    lock.lock().expect("lock the target install lock");
    if installed() {
        return;
    }
    let missing = format!(
        "the guests build for {TARGET}, and the toolchain at {} lacks that target",
        sysroot.display()
    );
    let Some(toolchain) = std::env::var("RUSTUP_TOOLCHAIN")
        .ok()
        .filter(|t| !t.is_empty())
    else {
        panic!(
            "{missing}; this toolchain was not installed by rustup, so nothing can add it here: \
             install Rust through rustup (https://rustup.rs), which reads the pinned toolchain \
             from rust-toolchain.toml, or add the {TARGET} standard library to this toolchain"
        );
    };
    println!(
        "cargo:warning=installing the {TARGET} target for toolchain {toolchain}: rustup target add {TARGET} --toolchain {toolchain}"
    );
    let rustup = std::env::var("RUSTUP").unwrap_or_else(|_| "rustup".into());
    let status = Command::new(&rustup)
        .args(["target", "add", TARGET, "--toolchain", &toolchain])
        .stdout(std::process::Stdio::null())
        .status();
    match status {
        Ok(status) if status.success() && installed() => {}
        Ok(status) => panic!(
            "{missing}; `{rustup} target add {TARGET} --toolchain {toolchain}` failed ({status})"
        ),
        Err(e) => panic!(
            "{missing}; rustup, which would add it, cannot run ({rustup}: {e}): install rustup \
             (https://rustup.rs) or run `rustup target add {TARGET} --toolchain {toolchain}`"
        ),
    }
}

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("cargo sets {key}"))
}

/// One guest target directory for every host profile, beside the host's
/// own (`target/guests`), so guests compile once.
fn guest_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .find(|p| p.join("CACHEDIR.TAG").exists())
        .map(|t| t.join("guests"))
        .unwrap_or_else(|| out_dir.join("guests"))
}

/// Builds every binary and cdylib of the workspace at `dir` and returns
/// (file stem, component path) pairs, sorted.
fn build_workspace(dir: &Path, target_dir: &Path) -> Vec<(String, PathBuf)> {
    let manifest = dir.join("Cargo.toml");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.arg("build")
        .arg("--release")
        .arg("--target")
        .arg(TARGET)
        .arg("--manifest-path")
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(dir);
    // The host build's flags and wrappers (clippy, coverage, sanitizers) are
    // not meant for guests.
    for key in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CLIPPY_ARGS",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(key);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo: {e}"));
    assert!(
        status.success(),
        "building the guest workspace {} for {TARGET} failed; cargo's errors are above",
        dir.display()
    );

    let out = target_dir.join(TARGET).join("release");
    // The whole folder, so that a new program (in no dep-info file yet) is
    // built too; build output goes elsewhere, so nothing here churns.
    println!("cargo:rerun-if-changed={}", dir.display());
    println!("cargo:rerun-if-changed={}", manifest.display());
    println!(
        "cargo:rerun-if-changed={}",
        dir.join("Cargo.lock").display()
    );
    let mut components = Vec::new();
    for entry in std::fs::read_dir(&out).expect("guest output dir") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "wasm") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let dep_file = path.with_extension("d");
            // Only this workspace's artifacts: their dep-info names sources
            // under `dir`.
            let Ok(deps) = std::fs::read_to_string(&dep_file) else {
                continue;
            };
            if !deps.contains(&*dir.to_string_lossy()) {
                continue;
            }
            for source in dep_sources(&deps) {
                println!("cargo:rerun-if-changed={source}");
            }
            components.push((stem, path));
        }
    }
    components.sort();
    components
}

/// The source files of a Makefile-style dep-info file.
fn dep_sources(deps: &str) -> Vec<String> {
    let Some((_, sources)) = deps.split_once(": ") else {
        return Vec::new();
    };
    sources
        .replace("\\ ", "\u{0}")
        .split_whitespace()
        .map(|s| s.replace('\u{0}', " "))
        .filter(|s| !s.contains("/.cargo/registry/"))
        .collect()
}
