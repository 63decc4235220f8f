//! CPU-bound integer work, for measuring the cost of fuel metering.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "test.spin",
    impact: Read,
    description: "Mixes a 64-bit state `iterations` times and returns it.",
    run: spin,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    iterations: u64,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    result: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn spin(input: Input) -> Result<Output, Error> {
    // The iteration count comes from the input and the result goes to the
    // output, so the loop can be neither folded nor dropped.
    let mut state = FNV_OFFSET ^ input.iterations;
    for i in 0..input.iterations {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state = (state ^ i).wrapping_mul(FNV_PRIME);
    }
    Ok(Output { result: state })
}

fn main() {}
