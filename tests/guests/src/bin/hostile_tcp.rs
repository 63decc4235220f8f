//! Opens a raw TCP socket; the host grants no sockets, so this must fail.

use std::io::Write;

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

hane_guest::operation! {
    name: "hostile.tcp",
    impact: Outbound,
    description: "Connects to `addr` over TCP and writes `hello`.",
    run: connect,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    /// Such as `127.0.0.1:8080`.
    addr: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    connected: bool,
}

fn connect(input: Input) -> Result<Output, Error> {
    let addr = &input.addr;
    let mut stream = std::net::TcpStream::connect(addr)
        .map_err(|e| Error::Failed(format!("connect {addr}: {e}")))?;
    stream
        .write_all(b"hello")
        .map_err(|e| Error::Failed(format!("write {addr}: {e}")))?;
    Ok(Output { connected: true })
}

fn main() {}
