//! The smallest useful operation: the baseline for call overhead.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "test.echo",
    impact: Read,
    description: "Returns `message` and its length in bytes.",
    run: echo,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    message: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    message: String,
    length: u32,
}

fn echo(input: Input) -> Result<Output, Error> {
    let length = u32::try_from(input.message.len())
        .map_err(|_| Error::InvalidInput("message is too long".into()))?;
    Ok(Output {
        message: input.message,
        length,
    })
}

fn main() {}
