//! Returns as much output as asked for; the host's output cap must hold.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.output",
    impact: Read,
    description: "Returns a string of `bytes` copies of `x`.",
    run: output,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    bytes: u64,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    data: String,
}

fn output(input: Input) -> Result<Output, Error> {
    let len = usize::try_from(input.bytes)
        .map_err(|_| Error::InvalidInput(format!("{} bytes is too many", input.bytes)))?;
    Ok(Output {
        data: "x".repeat(len),
    })
}

fn main() {}
