//! Reads any path through `std::fs`; only preopened grants may succeed.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.read_file",
    impact: Read,
    description: "Reads the file at `path` with std::fs, bypassing the SDK.",
    run: read_file,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    /// Path as the guest sees it.
    path: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    content: String,
}

fn read_file(input: Input) -> Result<Output, Error> {
    let content = std::fs::read_to_string(&input.path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("read {}: {e}", input.path)))?;
    Ok(Output { content })
}

fn main() {}
