//! Panics; the host must report a trap, not crash.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.panic",
    impact: Read,
    description: "Panics with `reason`.",
    run: explode,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    reason: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {}

fn explode(input: Input) -> Result<Output, Error> {
    panic!("hostile panic: {}", input.reason)
}

fn main() {}
