//! What a call leaves behind: its [`Receipt`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// What an operation may do to the world outside its sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Impact {
    /// Reads only; safe to run again after a crash.
    Read,
    /// Changes state the host owns.
    Write,
    /// Reaches people or systems outside; approved first, executed once.
    Outbound,
}

impl fmt::Display for Impact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Impact::Read => "read",
            Impact::Write => "write",
            Impact::Outbound => "outbound",
        })
    }
}

/// How a call ended; one value per kind of error the sandbox tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// The guest returned output that matched its schema.
    Succeeded,
    /// The guest returned its own `error`.
    OperationError,
    /// The input did not match the input schema; the guest never ran.
    InvalidInput,
    /// The output was not JSON or did not match the output schema.
    InvalidOutput,
    /// The output or the log passed its byte limit.
    OutputTooLarge,
    /// The fuel limit ran out.
    FuelExhausted,
    /// Linear memory would have grown past the memory limit.
    MemoryLimit,
    /// The wall-clock limit passed.
    Timeout,
    /// The caller cancelled the call.
    Cancelled,
    /// The guest reached for a capability its policy does not grant.
    Denied,
    /// The outgoing request limit or response byte limit was passed.
    LimitExceeded,
    /// The guest trapped (a panic, stack overflow, or another wasm trap).
    Trap,
    /// The host could not run the call.
    HostError,
}

impl Outcome {
    /// The snake_case name used in JSON and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::OperationError => "operation_error",
            Outcome::InvalidInput => "invalid_input",
            Outcome::InvalidOutput => "invalid_output",
            Outcome::OutputTooLarge => "output_too_large",
            Outcome::FuelExhausted => "fuel_exhausted",
            Outcome::MemoryLimit => "memory_limit",
            Outcome::Timeout => "timeout",
            Outcome::Cancelled => "cancelled",
            Outcome::Denied => "denied",
            Outcome::LimitExceeded => "limit_exceeded",
            Outcome::Trap => "trap",
            Outcome::HostError => "host_error",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Calls the guest made into capabilities the host meters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostCalls {
    /// Calls of the `log` import.
    pub log: u32,
    /// Outgoing HTTP requests sent.
    pub http_requests: u32,
    /// Attempts the policy refused (HTTP, sockets, name lookups, writes
    /// under read-only folders and paths leaving granted ones, ledger
    /// collections and document sets, action tools).
    pub denied: u32,
    /// Calls of the `records` import.
    pub records: u32,
    /// Calls of the `documents` import.
    pub documents: u32,
}

/// The record of one call: what ran, how it ended and what it consumed.
/// Receipts are kept beside the output in session history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The operation's name from its descriptor.
    pub operation: String,
    /// The operation's version from its descriptor.
    pub version: String,
    /// `sha256:` digest of the component's bytes.
    pub digest: String,
    /// How the call ended.
    pub outcome: Outcome,
    /// Fuel burned by the guest (zero when fuel metering is off).
    pub fuel_consumed: u64,
    /// Wall time from the call's start (input validation) to its end, in
    /// microseconds.
    pub wall_time_us: u64,
    /// The largest total linear memory the guest reached, in bytes.
    pub peak_memory_bytes: u64,
    /// Metered host calls.
    pub host_calls: HostCalls,
    /// Bytes of output returned (before validation).
    pub output_bytes: u64,
    /// Bytes of log messages kept.
    pub log_bytes: u64,
}
