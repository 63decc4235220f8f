//! Typed errors of loading and calling an operation.

use std::fmt;

use hane_core::{ByteSize, Duration, Outcome};

/// Why a component could not be loaded as an operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The component file could not be read: missing, not a regular
    /// file, or larger than [`MAX_COMPONENT_BYTES`](hane_core::file::MAX_COMPONENT_BYTES).
    #[error("{source}")]
    Read {
        /// The path given.
        path: String,
        /// What was wrong, naming the file.
        source: hane_core::file::ReadError,
    },
    /// The bytes are not a valid component, or compiling them failed.
    #[error("`{name}` is not a valid WebAssembly component: {message}")]
    Compile {
        /// The component's name or path.
        name: String,
        /// What the compiler said.
        message: String,
    },
    /// This build cannot compile (no `compiler` feature) and no artifact
    /// compiled ahead of time for this engine was found.
    #[error("`{name}` has no compiled artifact here: {message}")]
    NotCompiled {
        /// The component's name or path.
        name: String,
        /// Where hane looked and how to make one.
        message: String,
    },
    /// The component imports something no host capability provides.
    #[error(
        "component imports `{import}`, which hane does not provide (hane provides hane:operation@0.1.0 and WASI 0.2)"
    )]
    UnknownImport {
        /// The full import name.
        import: String,
    },
    /// The component imports a capability its policy does not grant.
    #[error("component imports `{import}`, but its policy grants no {grant}; add {hint}")]
    NotGranted {
        /// The full import name.
        import: String,
        /// The kind of grant that is missing.
        grant: &'static str,
        /// How to grant it.
        hint: &'static str,
    },
    /// The policy grants `actions` to an operation whose descriptor does
    /// not say its impact is `outbound`.
    #[error(
        "`{operation}` describes its impact as `{impact}`, but its policy grants actions; only an operation whose impact is `outbound` may propose actions"
    )]
    ActionsNotOutbound {
        /// The operation's name from its descriptor.
        operation: String,
        /// The impact it describes.
        impact: hane_core::Impact,
    },
    /// The policy's grants are malformed or collide.
    #[error("invalid policy: {0}")]
    Policy(#[from] hane_core::policy::PolicyError),
    /// The component does not export the `operation` world.
    #[error("component does not implement the hane:operation@0.1.0 `operation` world: {0}")]
    NotAnOperation(String),
    /// `describe` failed or returned something unusable.
    #[error("`describe` of the component failed: {0}")]
    Describe(String),
    /// A schema in the descriptor is not valid JSON Schema.
    #[error("the {which} schema of `{operation}` is invalid: {message}")]
    Schema {
        /// The operation's name.
        operation: String,
        /// `input` or `output`.
        which: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The component cache could not be written or read.
    #[error("component cache at `{path}`: {message}")]
    Cache {
        /// The cache file.
        path: String,
        /// What failed.
        message: String,
    },
}

/// A limit the guest reached, for [`CallError::LimitExceeded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `http_requests`.
    HttpRequests(u32),
    /// `response_bytes`.
    ResponseBytes(ByteSize),
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::HttpRequests(n) => write!(f, "outgoing request limit of {n}"),
            Limit::ResponseBytes(n) => write!(f, "response body limit of {}", bytes(*n)),
        }
    }
}

/// Which stream passed its byte limit, for [`CallError::OutputTooLarge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// The output JSON.
    Output,
    /// Log messages, stdout and stderr.
    Log,
}

impl fmt::Display for OutputStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputStream::Output => "output",
            OutputStream::Log => "log",
        })
    }
}

/// The guest's own `error`, from the WIT `error` variant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
pub enum GuestError {
    /// `invalid-input`.
    InvalidInput(String),
    /// `not-found`.
    NotFound(String),
    /// `denied`.
    Denied(String),
    /// `failed`.
    Failed(String),
}

impl GuestError {
    /// The error's kind.
    pub fn kind(&self) -> hane_core::operation::GuestErrorKind {
        use hane_core::operation::GuestErrorKind as Kind;
        match self {
            GuestError::InvalidInput(_) => Kind::InvalidInput,
            GuestError::NotFound(_) => Kind::NotFound,
            GuestError::Denied(_) => Kind::Denied,
            GuestError::Failed(_) => Kind::Failed,
        }
    }
}

impl fmt::Display for GuestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuestError::InvalidInput(m) => write!(f, "invalid input: {m}"),
            GuestError::NotFound(m) => write!(f, "not found: {m}"),
            GuestError::Denied(m) => write!(f, "denied: {m}"),
            GuestError::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

/// A schema violation: where in the document and which schema rule.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SchemaViolation {
    /// JSON Pointer into the input or output, such as `/count`; empty for
    /// the document itself.
    pub instance_path: String,
    /// JSON Pointer into the schema, such as `/properties/count/maximum`.
    pub schema_path: String,
    /// What the rule says.
    pub message: String,
}

impl fmt::Display for SchemaViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.instance_path.is_empty() {
            "/"
        } else {
            &self.instance_path
        };
        write!(
            f,
            "at `{at}`: {} (schema `{}`)",
            self.message, self.schema_path
        )
    }
}

/// `4Ki (4096 bytes)`, or `1500 bytes` when no unit divides the size.
fn bytes(size: ByteSize) -> String {
    let text = size.to_string();
    if text.ends_with('i') {
        format!("{text} ({} bytes)", size.bytes())
    } else {
        format!("{text} bytes")
    }
}

/// Violations as one line, `; `-separated, as errors show them.
pub fn describe_violations(v: &[SchemaViolation]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why a call did not succeed. Each case is one [`Outcome`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The input did not match the input schema; the guest never ran.
    #[error("invalid input: {}", describe_violations(.0))]
    InvalidInput(Vec<SchemaViolation>),
    /// The input was not JSON; the guest never ran.
    #[error("invalid input: not JSON: {0}")]
    InputNotJson(String),
    /// The output was not JSON.
    #[error("invalid output: the operation returned text that is not JSON: {0}")]
    OutputNotJson(String),
    /// The output did not match the output schema.
    #[error("invalid output: {}", describe_violations(.0))]
    InvalidOutput(Vec<SchemaViolation>),
    /// The output or the log passed its byte limit.
    #[error("{stream} too large: more than the limit of {}", bytes(*.limit))]
    OutputTooLarge {
        /// Which stream.
        stream: OutputStream,
        /// The limit.
        limit: ByteSize,
    },
    /// The fuel limit ran out.
    #[error("fuel exhausted: the operation used all {limit} units of fuel")]
    FuelExhausted {
        /// The limit.
        limit: u64,
    },
    /// Linear memory would have grown past the memory limit.
    #[error(
        "memory limit: the operation asked for {requested} bytes of memory, above the limit of {limit}"
    )]
    MemoryLimit {
        /// The limit.
        limit: ByteSize,
        /// What the guest asked for in all.
        requested: u64,
    },
    /// The wall-clock limit passed.
    #[error("timeout: the operation ran longer than {limit}")]
    Timeout {
        /// The limit.
        limit: Duration,
    },
    /// The caller cancelled the call.
    #[error("cancelled")]
    Cancelled,
    /// The guest reached for something its policy does not grant, and failed.
    #[error("denied: {denial}")]
    Denied {
        /// The first refused attempt, such as `http request to https://x.com:443 is not on the allow-list`.
        denial: String,
        /// What the guest returned afterwards, if anything.
        guest: Option<String>,
    },
    /// The outgoing request or response byte limit was passed.
    #[error("limit exceeded: the {0}")]
    LimitExceeded(Limit),
    /// The guest trapped.
    #[error("trap: {}", match .panic { Some(p) => format!("the operation panicked: {p}"), None => .message.clone() })]
    Trap {
        /// The trap as wasmtime describes it, such as `wasm trap: call stack exhausted`.
        message: String,
        /// The guest's panic message, when it printed one.
        panic: Option<String>,
    },
    /// The guest returned its own error.
    #[error("operation error: {0}")]
    Operation(GuestError),
    /// The call could not be run by the host.
    #[error("host error: {0}")]
    Host(String),
}

impl CallError {
    /// The guest's own error kind, when the guest returned its `error`.
    pub fn guest_error(&self) -> Option<hane_core::operation::GuestErrorKind> {
        match self {
            CallError::Operation(error) => Some(error.kind()),
            _ => None,
        }
    }

    /// The outcome recorded in the receipt.
    pub fn outcome(&self) -> Outcome {
        match self {
            CallError::InvalidInput(_) | CallError::InputNotJson(_) => Outcome::InvalidInput,
            CallError::OutputNotJson(_) | CallError::InvalidOutput(_) => Outcome::InvalidOutput,
            CallError::OutputTooLarge { .. } => Outcome::OutputTooLarge,
            CallError::FuelExhausted { .. } => Outcome::FuelExhausted,
            CallError::MemoryLimit { .. } => Outcome::MemoryLimit,
            CallError::Timeout { .. } => Outcome::Timeout,
            CallError::Cancelled => Outcome::Cancelled,
            CallError::Denied { .. } => Outcome::Denied,
            CallError::LimitExceeded(_) => Outcome::LimitExceeded,
            CallError::Trap { .. } => Outcome::Trap,
            CallError::Operation(_) => Outcome::OperationError,
            CallError::Host(_) => Outcome::HostError,
        }
    }
}
