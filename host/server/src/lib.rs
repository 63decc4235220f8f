//! hane's HTTP API: start agent runs, follow and cancel them, and list the
//! tools of the active release, under `/v1/agents/...` as in the platform
//! spec.
//!
//! - Every route under `/v1/agents` needs an API key, sent as
//!   `Authorization: Bearer KEY`. Keys have a [`Role`]: a `viewer` reads,
//!   an `operator` also starts and cancels runs, an `approver` reads
//!   (approving comes in a later version). Only the SHA-256 of a key is
//!   stored ([`hash_key`]); [`create_key`] returns the secret once.
//! - `GET /v1/openapi.json` ([`openapi`]) describes every route, and
//!   `GET /healthz` says the server is up; neither needs a key.
//! - Every error is `{"error": {"code", "message", "path"?}}`, where `path`
//!   is a JSON Pointer into the request body, such as `/input/vehicle`.
//!
//! # Examples
//!
//! Serving a runtime on a port until told to stop:
//!
//! ```no_run
//! # async fn example(runtime: hane_coordinator::AgentRuntime) -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! // Elsewhere: `stop.send(())` ends it, after the requests in progress.
//! # drop(stop);
//! hane_server::serve(listener, runtime, async {
//!     let _ = stopped.await;
//! })
//! .await
//! # }
//! ```

mod error;
mod keys;
mod openapi;
mod routes;

pub use keys::{KEY_PREFIX, KeyError, MAX_KEY_NAME_LEN, Role, UnknownRole, create_key, hash_key};
pub use openapi::openapi;
pub use routes::{DEFAULT_LIST_LIMIT, MAX_BODY_BYTES, router, serve};
