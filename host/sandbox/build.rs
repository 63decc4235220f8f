//! Records the target triple the sandbox is built for, which names the
//! portable compilations (no CPU features inferred) this host can load.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    println!("cargo:rustc-env=HANE_SANDBOX_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");
}
