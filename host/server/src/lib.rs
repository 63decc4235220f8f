//! hane's HTTP API: start agent runs, follow and cancel them, list the
//! tools of the active release, decide the outbound actions agents
//! propose, set decider overrides and read the day's budget, under
//! `/v1/agents/...` as in the platform spec.
//!
//! - Every route under `/v1/agents` needs an API key, sent as
//!   `Authorization: Bearer KEY`. Keys have a [`KeyRole`]: a `viewer` reads;
//!   an `approver` also approves, rejects and reconciles outbound actions;
//!   an `operator` does all that and starts and cancels runs and sets
//!   decider overrides. An approver or operator key made with groups
//!   decides only the actions assigned to one of them (403 for others).
//!   Only the SHA-256 of a key is stored ([`hash_key`]); [`create_key`]
//!   returns the secret once.
//! - An approval or rejection names the digest of the content the person
//!   saw (`{"digest": "sha256:…"}`); it is refused (409) when that is not
//!   the action's digest. It is recorded as by `key:NAME`, the key's name.
//! - The Model Gateway is served in three wire formats for the clients a
//!   run hands its token to (a coding CLI in a container, any OpenAI or
//!   Anthropic client): `POST /v1/chat/completions`, `POST /v1/responses`,
//!   `POST /v1/messages` (and `/v1/messages/count_tokens`), `GET
//!   /v1/models` and `HEAD /`. They take the run's token, as
//!   `Authorization: Bearer TOKEN` or `x-api-key: TOKEN`, not an API key;
//!   errors are in each format's own shape.
//! - The MCP server ([`mcp_router`]): `/mcp`, a run's tools for the
//!   holder of its token, every call through the Tool Gateway; and
//!   `/mcp/release`, the active release's operations for an operator's
//!   API key, each call run in the sandbox with its receipt.
//! - `GET /v1/openapi.json` ([`openapi`]) describes every route, and
//!   `GET /healthz` says the server is up; neither needs a key.
//! - Every error is `{"error": {"code", "message", "path"?}}`, where `path`
//!   is a JSON Pointer into the request body, such as `/input/vehicle`.
//! - A request is refused when it is ambiguous: two `Authorization`
//!   headers, or a body that gives one key twice (`400`).
//! - [`serve_with`] holds up under abusive clients ([`ServeConfig`]): a
//!   head's and a body's deadline, an idle timeout, capped heads and
//!   targets, and a cap on connections; each refusal is logged with the
//!   peer and answered in the error envelope.
//!
//! # Examples
//!
//! Serving a runtime's services on a port until told to stop:
//!
//! ```no_run
//! # async fn example(runtime: hane_coordinator::AgentRuntime) -> std::io::Result<()> {
//! let services = hane_coordinator::Services::new(runtime);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! // Elsewhere: `stop.send(())` ends it, after the requests in progress.
//! # drop(stop);
//! hane_server::serve(listener, services, async {
//!     let _ = stopped.await;
//! })
//! .await
//! # }
//! ```

mod actions;
mod conversations;
mod error;
mod evals;
mod json;
mod keys;
mod mcp;
mod model;
mod openapi;
mod reception;
mod route;
mod routes;
mod serve;
mod workflows;

pub use keys::{
    KEY_PREFIX, KeyError, KeyRole, MAX_GROUP_LEN, MAX_KEY_NAME_LEN, UnknownKeyRole, create_key,
    hash_key, key_groups,
};
pub use mcp::{
    DEFAULT_APPROVAL_WAIT, MAX_MCP_MESSAGE_BYTES, MCP_PATH, MCP_RELEASE_PATH, McpConfig,
    mcp_router, mcp_router_with,
};
pub use model::MAX_MODEL_BODY_BYTES;
pub use openapi::openapi;
pub use routes::{DEFAULT_LIST_LIMIT, MAX_BODY_BYTES, RUN_TOKEN_HEADER, router, served_routes};
pub use serve::{MAX_HEAD_BYTES, MAX_URI_BYTES, ServeConfig, serve, serve_with};
