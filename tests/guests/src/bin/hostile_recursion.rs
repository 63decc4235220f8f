//! Recurses without bound; the host's stack limit must stop it.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.recursion",
    impact: Read,
    description: "Never returns: recurses until the stack overflows.",
    run: recurse,
}

#[derive(Default, Deserialize, JsonSchema)]
#[serde(default)]
struct Input {}

#[derive(Serialize, JsonSchema)]
struct Output {
    depth: u64,
}

fn recurse(_input: Input) -> Result<Output, Error> {
    Ok(Output { depth: descend(0) })
}

/// The frame holds an array and uses the callee's result, so the compiler can
/// neither turn this into a loop nor shrink the frame away.
#[expect(
    unconditional_recursion,
    reason = "the stack limit is what is under test"
)]
fn descend(depth: u64) -> u64 {
    let mut frame = [0u8; 256];
    frame[(depth % 256) as usize] = depth as u8;
    let frame = std::hint::black_box(frame);
    let below = descend(std::hint::black_box(depth + 1));
    below.wrapping_add(u64::from(frame[(below % 256) as usize]))
}

fn main() {}
