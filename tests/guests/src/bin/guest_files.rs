//! Reads and optionally writes files, for testing read-only and read-write grants.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "test.files",
    impact: Write,
    description: "Optionally writes a file, then reads the file at `path` and lists the granted directories.",
    run: files,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    /// File to read.
    path: String,
    /// File to write before reading.
    #[serde(default)]
    write: Option<WriteRequest>,
}

#[derive(Deserialize, JsonSchema)]
struct WriteRequest {
    path: String,
    content: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    content: String,
    /// Guest paths of the directories the host granted.
    grants: Vec<String>,
}

fn files(input: Input) -> Result<Output, Error> {
    if let Some(write) = &input.write {
        std::fs::write(&write.path, &write.content)
            .map_err(|e| std::io::Error::new(e.kind(), format!("write {}: {e}", write.path)))?;
    }
    let content = hane_guest::fs::read_to_string(&input.path)?;
    let grants = hane_guest::fs::grants()
        .into_iter()
        .map(|grant| grant.guest_path)
        .collect();
    Ok(Output { content, grants })
}

fn main() {}
