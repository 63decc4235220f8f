//! `cargo xtask dist [--device] [TARGET…]`: static `hane` binaries for
//! Linux on x86_64 and aarch64 (musl), with SQLite and TLS inside,
//! stripped.
//!
//! Two builds, each with a size budget it fails beyond:
//!
//! | build | features | profile | budget |
//! |---|---|---|---|
//! | full (default) | all (`hane-cli`'s defaults) | `dist` | [`FULL_BUDGET`] |
//! | device (`--device`) | the compiler only, for its own architecture and Pulley: no PostgreSQL, no container runtimes or CLI drivers, token counts estimated, traps without guest function names | `device`: `dist` (fat LTO in one codegen unit) optimized for size (`z`), `panic = "abort"` | [`DEVICE_BUDGET`] |
//!
//! The C parts (SQLite, ring) need a C compiler for each target; zig is
//! one for all of them. Everything the build needs is installed by this
//! task, under `target/dist-env/`, from the package registries:
//!
//! | what | from | where |
//! |---|---|---|
//! | the targets' Rust standard libraries | `rustup target add` | the toolchain |
//! | zig | `ziglang` on PyPI, in a virtual environment | `target/dist-env/venv` |
//! | `cargo-zigbuild`, which builds with zig as the C compiler and linker | crates.io (`cargo install --locked`) | `target/dist-env/cargo-zigbuild` |
//!
//! Each binary is built with its profile (`dist`: the release profile
//! without debug information, symbols stripped, thin LTO) into
//! `target/TARGET/PROFILE/hane`, checked to be an ELF file for its machine
//! with no program interpreter (statically linked) and within its budget,
//! and reported with its size, SHA-256 and build time. `cargo xtask test`
//! builds the aarch64 device binary the same way (see `device.rs`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{Layout, run, scrub_run_env, sha256};

/// The targets built when none is named, with their ELF machine numbers.
pub(crate) const TARGETS: [(&str, u16); 2] = [
    ("x86_64-unknown-linux-musl", 0x3e),
    ("aarch64-unknown-linux-musl", 0xb7),
];

/// zig, from PyPI.
const ZIGLANG: &str = "ziglang==0.17.0";
/// cargo-zigbuild, from crates.io.
const ZIGBUILD_VERSION: &str = "0.24.1";

/// The device build's features: of `hane-cli`'s, only the compiler (so a
/// device compiles its own components where a JIT is allowed; it runs
/// ahead-of-time ones and Pulley either way).
const DEVICE_FEATURES: &str = "compiler";

/// The full build's budget: at most this many bytes (60 MB).
pub(crate) const FULL_BUDGET: u64 = 60_000_000;
/// The device build's budget: at most this many bytes (25 MB).
pub(crate) const DEVICE_BUDGET: u64 = 25_000_000;

/// Which binary to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Build {
    /// Every feature, the `dist` profile.
    Full,
    /// No optional feature, the `device` profile.
    Device,
}

impl Build {
    fn profile(self) -> &'static str {
        match self {
            Build::Full => "dist",
            Build::Device => "device",
        }
    }

    fn budget(self) -> u64 {
        match self {
            Build::Full => FULL_BUDGET,
            Build::Device => DEVICE_BUDGET,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Build::Full => "full",
            Build::Device => "device",
        }
    }
}

/// What the build tools are: zig's Python and cargo-zigbuild.
struct Tools {
    python: PathBuf,
    zigbuild: PathBuf,
}

/// Adds `targets`' standard libraries with rustup and installs zig and
/// cargo-zigbuild under `target/dist-env/` where they are missing.
fn tools(layout: &Layout, targets: &[&str]) -> Result<Tools, String> {
    let env_dir = layout.target.join("dist-env");
    std::fs::create_dir_all(&env_dir)
        .map_err(|e| format!("cannot create {}: {e}", env_dir.display()))?;
    println!(
        "xtask: dist: adding the Rust standard library for {}",
        targets.join(" and ")
    );
    run(
        Command::new("rustup").args(["target", "add"]).args(targets),
        "adding the targets with rustup",
    )?;
    let python = zig(&env_dir)?;
    let zigbuild = cargo_zigbuild(&env_dir)?;
    Ok(Tools { python, zigbuild })
}

/// Builds `build` of hane for `target` (an ELF `machine`) and checks it:
/// statically linked, within its budget. Returns the binary's path and
/// the report's line.
fn build(
    layout: &Layout,
    tools: &Tools,
    target: &str,
    machine: u16,
    build: Build,
) -> Result<String, String> {
    let profile = build.profile();
    println!(
        "xtask: dist: building the {} hane for {target} (the {profile} profile)",
        build.name()
    );
    let started = Instant::now();
    let mut command = Command::new(&tools.zigbuild);
    command
        .arg("zigbuild")
        .args(["--profile", profile, "--locked", "-p", "hane-cli"])
        .args(["--bin", "hane", "--target", target])
        .env("CARGO_ZIGBUILD_PYTHON_PATH", &tools.python)
        .current_dir(&layout.root);
    if build == Build::Device {
        command.args(["--no-default-features", "--features", DEVICE_FEATURES]);
    }
    scrub_run_env(&mut command);
    run(&mut command, &format!("building hane for {target}"))?;
    let seconds = started.elapsed().as_secs();
    let binary = binary(layout, target, build);
    let bytes =
        std::fs::read(&binary).map_err(|e| format!("cannot read {}: {e}", binary.display()))?;
    check_static(&bytes, machine).map_err(|e| format!("{}: {e}", binary.display()))?;
    let size = bytes.len() as u64;
    let budget = build.budget();
    let digest = sha256(&tools.python, &binary)?;
    let line = format!(
        "{target} {}  {}  {size} bytes ({:.1} MB, budget {:.0} MB)  sha256 {digest}  statically linked  built in {seconds} s",
        build.name(),
        binary.display(),
        size as f64 / 1e6,
        budget as f64 / 1e6,
    );
    if size > budget {
        return Err(format!(
            "the {} build is over its size budget: {line}",
            build.name()
        ));
    }
    Ok(line)
}

/// Where [`build`] puts the binary of `build` for `target`.
pub(crate) fn binary(layout: &Layout, target: &str, build: Build) -> PathBuf {
    layout
        .target
        .join(target)
        .join(build.profile())
        .join("hane")
}

/// Builds the binaries `args` ask for: `--device` for the device build,
/// then target triples (both when none).
pub(crate) fn dist(args: &[OsString]) -> Result<(), String> {
    let layout = Layout::new();
    let (kind, args) = match args.first().and_then(|a| a.to_str()) {
        Some("--device") => (Build::Device, &args[1..]),
        _ => (Build::Full, args),
    };
    let targets = chosen(args)?;
    let names: Vec<&str> = targets.iter().map(|(t, _)| *t).collect();
    let tools = tools(&layout, &names)?;
    let mut built = Vec::new();
    for (target, machine) in targets {
        built.push(build(&layout, &tools, target, machine, kind)?);
    }
    for line in built {
        println!("xtask: dist: {line}");
    }
    Ok(())
}

/// The targets `args` name, or all of them.
fn chosen(args: &[OsString]) -> Result<Vec<(&'static str, u16)>, String> {
    if args.is_empty() {
        return Ok(TARGETS.to_vec());
    }
    args.iter()
        .map(|arg| {
            let arg = arg.to_string_lossy();
            TARGETS
                .iter()
                .find(|(t, _)| *t == arg)
                .copied()
                .ok_or_else(|| {
                    let known: Vec<&str> = TARGETS.iter().map(|(t, _)| *t).collect();
                    format!("dist builds {}, not `{arg}`", known.join(" and "))
                })
        })
        .collect()
}

/// A virtual environment with zig from PyPI; returns its Python, which
/// cargo-zigbuild runs as `python -m ziglang`.
fn zig(env_dir: &Path) -> Result<PathBuf, String> {
    let venv = env_dir.join("venv");
    let python = venv.join("bin/python3");
    let has_zig = || {
        Command::new(&python)
            .args(["-m", "ziglang", "version"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has_zig() {
        println!("xtask: dist: zig is installed in {}", venv.display());
        return Ok(python);
    }
    println!(
        "xtask: dist: installing {ZIGLANG} from PyPI into {}",
        venv.display()
    );
    run(
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&venv),
        "creating a Python virtual environment for zig (it needs Python 3 with its venv module; \
         on Debian: apt-get install python3-venv)",
    )?;
    run(
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            ZIGLANG,
        ]),
        "installing zig",
    )?;
    if has_zig() {
        Ok(python)
    } else {
        Err(format!(
            "{ZIGLANG} is installed, but `{} -m ziglang version` fails",
            python.display()
        ))
    }
}

/// cargo-zigbuild, built from crates.io once.
fn cargo_zigbuild(env_dir: &Path) -> Result<PathBuf, String> {
    crate::cargo_install(
        &crate::CargoInstall {
            label: "dist: cargo-zigbuild",
            krate: "cargo-zigbuild",
            version: ZIGBUILD_VERSION,
            flags: &[],
            root: env_dir.join("cargo-zigbuild"),
            build_dir: env_dir.join("cargo-zigbuild-build"),
            why: "building cargo-zigbuild",
        },
        |stdout| stdout.contains(ZIGBUILD_VERSION),
    )
}

/// Checks that `elf` is a 64-bit little-endian ELF executable for
/// `machine` with no program interpreter: the kernel runs it with no
/// dynamic loader, so it needs no C library on the device.
fn check_static(elf: &[u8], machine: u16) -> Result<(), String> {
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        elf.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("eight bytes")))
    };
    if elf.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err("not a 64-bit little-endian ELF file".to_owned());
    }
    let found = u16_at(0x12).ok_or("a truncated ELF header")?;
    if found != machine {
        return Err(format!(
            "built for ELF machine {found:#x}, not {machine:#x}"
        ));
    }
    let phoff = usize::try_from(u64_at(0x20).ok_or("a truncated ELF header")?)
        .map_err(|_| "a program header offset past memory")?;
    let phentsize = usize::from(u16_at(0x36).ok_or("a truncated ELF header")?);
    let phnum = usize::from(u16_at(0x38).ok_or("a truncated ELF header")?);
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        let kind = u32_at(phoff + i * phentsize).ok_or("a truncated program header table")?;
        if kind == PT_INTERP {
            return Err("it is dynamically linked: it names a program interpreter".to_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_binary_itself_is_dynamic_and_other_files_are_no_elf() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let machine = if cfg!(target_arch = "aarch64") {
            0xb7
        } else {
            0x3e
        };
        // Built for the host's glibc: it has an interpreter.
        let err = check_static(&me, machine).unwrap_err();
        assert!(err.contains("dynamically linked"), "{err}");
        let other = if machine == 0x3e { 0xb7 } else { 0x3e };
        assert!(
            check_static(&me, other)
                .unwrap_err()
                .contains("ELF machine")
        );
        assert!(
            check_static(b"#!/bin/sh\n", machine)
                .unwrap_err()
                .contains("not a 64-bit")
        );
        assert!(
            chosen(&["riscv64".into()])
                .unwrap_err()
                .contains("not `riscv64`")
        );
        assert_eq!(chosen(&[]).unwrap().len(), 2);
    }
}
