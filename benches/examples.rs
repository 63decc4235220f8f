//! The repository's `examples/` release, copied in part for a benchmark.

use std::path::{Path, PathBuf};

/// `examples/`.
pub fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Copies the files of each folder `subs` of `examples/` (not their
/// subfolders) to the same place under `release`.
pub fn copy_examples(release: &Path, subs: &[&str]) {
    for sub in subs {
        let to = release.join(sub);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(examples().join(sub)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
            }
        }
    }
}

/// The folders of `examples/` a benchmark's release copies: everything
/// but `budgets/` (whose 200 runs a day would stop a benchmark), `evals/`
/// and `workflows/`.
#[allow(
    dead_code,
    reason = "the benchmarks that copy other folders include this module too"
)]
pub const UNBUDGETED: &[&str] = &[
    "agents",
    "policies",
    "providers",
    "recordings",
    "tools",
    "ledger/records",
    "ledger/documents/leases",
    "documents",
    // service-booker's connection and exposures, and the document the
    // connection names.
    "integrations",
    "services/fleet-maintenance",
];
