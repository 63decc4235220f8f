//! Allocates without bound; the host's memory limit must stop it.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.memory",
    impact: Read,
    description: "Never returns: allocates 1 MiB chunks until memory runs out.",
    run: hoard,
}

const CHUNK: usize = 1024 * 1024;

#[derive(Default, Deserialize, JsonSchema)]
#[serde(default)]
struct Input {}

#[derive(Serialize, JsonSchema)]
struct Output {
    chunks: u64,
}

fn hoard(_input: Input) -> Result<Output, Error> {
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        // Writing every page makes the memory real, not just reserved.
        let chunk = vec![0xA5u8; CHUNK];
        chunks.push(std::hint::black_box(chunk));
    }
}

fn main() {}
