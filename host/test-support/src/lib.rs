//! What hane's test binaries share, so that each piece is written once:
//!
//! - [`component_cache`]: one directory of compiled components for every
//!   test binary and every `hane` process a test starts, so a component
//!   compiles once per engine configuration, not once per binary;
//! - [`examples`]: the repository's `examples/` release;
//! - [`SmtpServer`]: a real SMTP server on loopback (`tests/smtp/server.py`
//!   on aiosmtpd, in the Python that `cargo xtask test` provisions);
//! - [`LlamaServer`]: a real language model over HTTP on loopback
//!   (`tests/llama/server.py`: llama.cpp's server on xllamacpp, with the
//!   model that `cargo xtask test` provisions), in [`llama`];
//! - [`serve`]: `hane serve` as a process, and [`request`] to it;
//! - [`postgres`]: a real PostgreSQL server per test process, and a fresh
//!   database on it per test.
//!
//! # Examples
//!
//! ```
//! let cache = hane_test_support::component_cache();
//! assert!(cache.ends_with("tmp/component-cache"));
//! assert!(hane_test_support::examples().join("agents").is_dir());
//! ```

mod clients;
pub mod fleet;
pub mod llama;
pub mod postgres;
mod python;
mod serve;
mod smtp;

use std::path::{Path, PathBuf};

pub use clients::model_client;
pub use llama::LlamaServer;
pub use serve::{request, serve, try_request};
pub use smtp::SmtpServer;

/// The repository's root.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The repository's `examples/` folder: six agents, their operations, a
/// decider policy, a budget and a ledger.
pub fn examples() -> PathBuf {
    repository().join("examples")
}

/// A copy of `examples/` in a new temporary directory, for a test to
/// change (a candidate release that differs from the examples).
pub fn examples_copy() -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("create a folder of the copy");
        for entry in std::fs::read_dir(from).expect("read a folder of examples/") {
            let entry = entry.expect("read a folder of examples/");
            let target = to.join(entry.file_name());
            if entry.file_type().expect("an entry's type").is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).expect("copy a file of examples/");
            }
        }
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    copy(&examples(), dir.path());
    dir
}

/// Replaces `from` with `to` in `file`, which must hold it.
pub fn replace_in(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).expect("read the file to change");
    assert!(text.contains(from), "{} lacks {from:?}", file.display());
    std::fs::write(file, text.replace(from, to)).expect("write the changed file");
}

/// The names of the files in `dir`, sorted.
///
/// # Panics
///
/// `dir` cannot be read.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the directory")
        .map(|e| {
            e.expect("read the directory")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// The directory every test binary keeps compiled components in:
/// `tmp/component-cache` in cargo's target directory (found from the
/// running test binary, which cargo puts below it), else below the
/// repository's `target/`.
pub fn component_cache() -> PathBuf {
    let target = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .find(|dir| dir.join("CACHEDIR.TAG").exists())
            .map(Path::to_owned)
    });
    target
        .unwrap_or_else(|| repository().join("target"))
        .join("tmp/component-cache")
}

/// A loopback port nothing listens on (bound, then let go), for an
/// adapter that must fail to connect.
///
/// # Panics
///
/// No port can be bound on loopback.
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a loopback port")
        .port()
}

/// An SMTP URL of [`closed_port`]: every email sent to it fails before
/// anything goes out.
pub fn unreachable_smtp_url() -> String {
    format!(
        "smtp://127.0.0.1:{}?tls=none&from=hane@example.com",
        closed_port()
    )
}
