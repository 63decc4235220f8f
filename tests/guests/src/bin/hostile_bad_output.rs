//! Returns output that breaks its own schema; the host must reject it.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.bad_output",
    impact: Read,
    description: "Returns a `count` above the maximum its output schema allows.",
    run: bad_output,
}

#[derive(Default, Deserialize, JsonSchema)]
#[serde(default)]
struct Input {}

#[derive(Serialize, JsonSchema)]
struct Output {
    #[schemars(range(max = 10))]
    count: u32,
}

fn bad_output(_input: Input) -> Result<Output, Error> {
    Ok(Output { count: 42 })
}

fn main() {}
