//! Spins forever; the host must stop it with fuel or epoch interruption.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.loop",
    impact: Read,
    description: "Never returns: loops forever.",
    run: spin,
}

#[derive(Default, Deserialize, JsonSchema)]
#[serde(default)]
struct Input {}

#[derive(Serialize, JsonSchema)]
struct Output {}

fn spin(_input: Input) -> Result<Output, Error> {
    let mut counter = 0u64;
    loop {
        // black_box keeps the loop from being proven side-effect free.
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

fn main() {}
