//! Fetches any URL; the host's outbound allow-list decides.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.http",
    impact: Outbound,
    description: "Fetches `url` with an HTTP GET.",
    run: fetch,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    url: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    status: u16,
    body: String,
}

fn fetch(input: Input) -> Result<Output, Error> {
    let response = hane_guest::http::get(&input.url)?;
    Ok(Output {
        status: response.status,
        body: String::from_utf8_lossy(&response.body).into_owned(),
    })
}

fn main() {}
