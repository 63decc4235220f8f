//! Reads environment variables; the host must pass none of its own.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.env",
    impact: Read,
    description: "Returns the environment variable `key` and the names of all visible variables.",
    run: env,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    key: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    value: String,
    keys: Vec<String>,
}

fn env(input: Input) -> Result<Output, Error> {
    let key = input.key;
    let value = std::env::var(&key).map_err(|_| Error::NotFound(format!("{key} is not set")))?;
    let keys = std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    Ok(Output { value, keys })
}

fn main() {}
