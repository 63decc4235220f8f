//! Prints to stdout without restraint; the host's capture cap must hold.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.print_flood",
    impact: Read,
    description: "Prints `lines` lines of 1 KiB to stdout.",
    run: flood,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    lines: u64,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    printed: u64,
}

fn flood(input: Input) -> Result<Output, Error> {
    let line = "p".repeat(1023);
    for _ in 0..input.lines {
        println!("{line}");
    }
    Ok(Output {
        printed: input.lines,
    })
}

fn main() {}
