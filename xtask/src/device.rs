//! The device binary in `cargo xtask test`: the aarch64 device build
//! (`cargo xtask dist --device aarch64-unknown-linux-musl`, so within its
//! size budget) runs beside the other suites at the lowest CPU priority,
//! its output in `target/device-build.log`; once they pass, the device
//! tests (`host/cli/tests/cli/device.rs`: the demo, every built-in
//! operation and the hostile guests, with cranelift and with Pulley) run
//! it under `qemu-aarch64-static` (or as it is on an aarch64 host).

use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::dist::{self, Build};
use crate::{Layout, TestEnv, run, scrub_run_env};

/// The device's target.
const TARGET: &str = "aarch64-unknown-linux-musl";

/// What the device tests read: the binary and the emulator.
const DEVICE_ENV: &str = "HANE_TEST_DEVICE";
pub(crate) const QEMU_ENV: &str = "HANE_TEST_QEMU";

/// The device build going on in the background; stopped if dropped
/// before [`DeviceBuild::test`].
pub(crate) struct DeviceBuild {
    child: Option<Child>,
    log: PathBuf,
}

/// Starts the device build: this program's `dist --device` under `nice`,
/// so the suites keep the processors they ask for.
pub(crate) fn start(layout: &Layout) -> Result<DeviceBuild, String> {
    let log = layout.target.join("device-build.log");
    let file =
        std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = file
        .try_clone()
        .map_err(|e| format!("cannot open {} twice: {e}", log.display()))?;
    let xtask = std::env::current_exe().map_err(|e| format!("cannot find xtask itself: {e}"))?;
    let mut command = Command::new("nice");
    command
        .args(["-n", "19"])
        .arg(xtask)
        .args(["dist", "--device", TARGET])
        .current_dir(&layout.root)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        // A group of its own, so that it can be stopped with every
        // process it started.
        .process_group(0);
    scrub_run_env(&mut command);
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start the device build: {e}"))?;
    println!(
        "xtask: building the device binary for {TARGET} beside the tests, at the lowest priority (its output: {})",
        log.display()
    );
    Ok(DeviceBuild {
        child: Some(child),
        log,
    })
}

impl DeviceBuild {
    /// Waits for the build, then runs the device tests with `env`.
    pub(crate) fn test(mut self, layout: &Layout, env: &TestEnv) -> Result<(), String> {
        let mut child = self.child.take().expect("waited for once");
        println!("xtask: waiting for the device build");
        let status = child
            .wait()
            .map_err(|e| format!("waiting for the device build: {e}"))?;
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        if !status.success() {
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(format!(
                "the device build failed ({status}); the end of {}:\n{}",
                self.log.display(),
                tail.join("\n")
            ));
        }
        if let Some(report) = log.lines().rev().find(|l| l.starts_with("xtask: dist: ")) {
            println!("{report}");
        }
        let binary = dist::binary(layout, TARGET, Build::Device);
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut command = Command::new(cargo);
        command
            .args(["test", "-p", "hane-cli", "--test", "cli", "--"])
            .args(["--ignored", "device::"])
            .current_dir(&layout.root)
            .env(DEVICE_ENV, &binary);
        scrub_run_env(&mut command);
        for (key, value) in &env.vars {
            command.env(key, value);
        }
        println!("xtask: testing the device binary {}", binary.display());
        run(&mut command, "the tests of the device binary")
    }
}

impl Drop for DeviceBuild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The whole group: xtask, cargo and the compilers. The build
            // picks up where it stopped next time.
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
        }
    }
}

/// `qemu-aarch64-static`, installed from Debian's `qemu-user-static`
/// when missing; none on an aarch64 host, which runs the binary itself.
pub(crate) fn qemu() -> Result<Option<PathBuf>, String> {
    if cfg!(target_arch = "aarch64") {
        println!("xtask: qemu: not needed, this host is aarch64");
        return Ok(None);
    }
    if let Some(qemu) = crate::on_path("qemu-aarch64-static") {
        println!("xtask: qemu: {} is installed", qemu.display());
        return Ok(Some(qemu));
    }
    println!("xtask: qemu: installing Debian's qemu-user-static with apt-get");
    crate::apt_install(
        &["qemu-user-static"],
        "installing qemu-user-static (the device tests run the aarch64 binary under it; apt-get needs root)",
    )?;
    crate::on_path("qemu-aarch64-static")
        .map(Some)
        .ok_or_else(|| {
            "apt-get installed qemu-user-static, but qemu-aarch64-static is still not on PATH"
                .to_owned()
        })
}
