//! Logs without restraint; the host's log-bytes cap must hold.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.log_flood",
    impact: Read,
    description: "Logs `messages` info lines of `size` bytes each.",
    run: flood,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    messages: u64,
    size: u32,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    logged: u64,
}

fn flood(input: Input) -> Result<Output, Error> {
    let message = "l".repeat(input.size as usize);
    for _ in 0..input.messages {
        hane_guest::log::info(&message);
    }
    Ok(Output {
        logged: input.messages,
    })
}

fn main() {}
