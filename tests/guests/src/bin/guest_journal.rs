//! Appends a line to a journal file, then keeps busy: a `write` operation
//! whose effect can be counted, and that can be caught while running.

use std::io::Write;

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "test.journal",
    impact: Write,
    description: "Appends `line` to the file at `path`, then mixes a state `iterations` times.",
    run: journal,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    /// The journal file, in a read-write grant.
    path: String,
    /// The line to append.
    line: String,
    /// Work to do after writing.
    #[serde(default)]
    iterations: u64,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    written: String,
    state: u64,
}

fn journal(input: Input) -> Result<Output, Error> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&input.path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("open {}: {e}", input.path)))?;
    // One write, so a kill cannot leave the line without its newline.
    file.write_all(format!("{}\n", input.line).as_bytes())?;
    file.sync_all()?;
    let mut state = input.iterations;
    for i in 0..input.iterations {
        state ^= state << 13;
        state ^= state >> 7;
        state = (state ^ i).wrapping_mul(0x0000_0100_0000_01b3);
    }
    Ok(Output {
        written: input.line,
        state,
    })
}

fn main() {}
