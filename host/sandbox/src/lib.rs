//! Runs hane operations — WebAssembly components targeting the
//! `hane:operation@0.1.0` world — under limits and a deny-by-default policy.
//!
//! One [`Sandbox`] per process owns the wasmtime engine (component model,
//! fuel, epoch interruption from a ticker thread, a pooling allocator and
//! copy-on-write memory images) and a disk cache of compiled components.
//! The engine compiles guests with cranelift, or for Pulley, wasmtime's
//! interpreter, where no JIT is allowed ([`EngineKind`]); a [`Precompiler`]
//! compiles components ahead of time, for this host or another target, into
//! files a read-only cache can serve.
//! [`Sandbox::load`] turns a component and its [`Policy`] into an
//! [`LoadedOperation`]; every [`LoadedOperation::call`] gets a fresh instance, validates
//! the input and output against the operation's JSON Schemas, and returns a
//! [`Call`] with the output or a typed [`CallError`], the [`Receipt`], the
//! guest's logs and the outbound actions it proposed.
//!
//! Besides WASI, the host provides hane's own capabilities: `log`; the
//! [`records`] and [`documents`] of a [`Ledger`] set with
//! [`Sandbox::set_ledger`], readable only in the collections and document
//! sets the call's policy grants; and [`actions`], through which an
//! operation whose impact is `outbound` proposes the actions its policy
//! grants, never sending any ([`Call::proposals`]).
//!
//! # Examples
//!
//! ```no_run
//! use hane_core::{Limits, Policy};
//! use hane_sandbox::{Sandbox, SandboxConfig};
//!
//! # async fn run() -> anyhow::Result<()> {
//! let sandbox = Sandbox::new(&SandboxConfig::new())?;
//! let policy = Policy {
//!     files: vec!["examples/documents:/documents".parse()?],
//!     ..Policy::default()
//! };
//! let op = sandbox
//!     .load_file("search.wasm".as_ref(), &policy)
//!     .await?;
//! let call = op.call(r#"{"query": "inspection"}"#, &Limits::default()).await;
//! println!("{:?} used {} fuel", call.result, call.receipt.fuel_consumed);
//! # Ok(())
//! # }
//! ```
//!
//! [`Ledger`]: hane_core::Ledger
//! [`Policy`]: hane_core::Policy
//! [`Receipt`]: hane_core::Receipt

pub mod actions;
pub mod documents;
mod error;
mod files;
mod imports;
mod operation;
mod precompile;
pub mod records;
mod sandbox;
mod schema;
mod state;

pub use error::{
    CallError, GuestError, Limit, LoadError, OutputStream, SchemaViolation, describe_violations,
};
pub use imports::{Grant, Import};
pub use operation::{Call, CancelToken, Descriptor, LoadedOperation};
pub use precompile::{Artifact, Precompiler, UnsupportedTarget};
pub use sandbox::{
    ArtifactFit, ENGINE_ENV, EngineKind, Inspection, Sandbox, SandboxConfig, StartError,
    UnknownEngine, component_digest, default_cache_dir, is_compiled_artifact,
};
pub use schema::{Schema, SchemaError};
pub use state::LogRecord;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "operation",
        imports: { default: trappable },
        exports: { default: async },
    });
}
