//! `/mcp/release`: the active release's operations for any MCP client (as
//! Wassette offers its components), for an operator's API key. A call
//! runs the operation once in the sandbox under its release's policy and
//! limits, as `hane op run` does: no run, no session; its receipt (and
//! any action it proposed, which is never sent) is in the result's
//! `_meta` under `hane/receipt` and `hane/proposals`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use hane_coordinator::{AgentRuntime, ReleaseBody, ReleasedOperation, drivers::model_tool_name};
use hane_sandbox::{LoadError, LoadedOperation};
use hane_store::StoreError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, InitializeResult, ListToolsResult, MetaObject, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::{KeyCaller, annotations, caller, object_schema, schema_object};

/// What the server says of itself at `initialize`.
const INSTRUCTIONS: &str = "These are the operations of hane's active release. Each call runs the operation once in hane's sandbox, under its release's capabilities and limits; its receipt is in the result's _meta. Actions an operation proposes are reported, never sent.";

/// The release-scoped MCP server. Cheap to clone; clones share everything.
#[derive(Clone)]
pub(super) struct ReleaseTools {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: AgentRuntime,
    /// The operations of the release last seen active.
    current: Mutex<Option<Arc<ReleaseOperations>>>,
}

/// One release's operations by the name MCP lists them under, each
/// loaded in the sandbox on its first call.
struct ReleaseOperations {
    number: u64,
    operations: BTreeMap<String, ReleasedOperation>,
    loaded: tokio::sync::Mutex<BTreeMap<String, LoadedOperation>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn failed(message: String) -> ErrorData {
    ErrorData::internal_error(message, None)
}

impl ReleaseTools {
    pub(super) fn new(runtime: AgentRuntime) -> Self {
        Self {
            inner: Arc::new(Inner {
                runtime,
                current: Mutex::new(None),
            }),
        }
    }

    /// The active release's operations, read again when another release
    /// became active.
    async fn operations(&self) -> Result<Arc<ReleaseOperations>, ErrorData> {
        let runtime = &self.inner.runtime;
        // Also makes the active release's ledger the sandbox's.
        let release = runtime.release().await.map_err(|e| failed(e.to_string()))?;
        let number = release.info.number;
        if let Some(current) = lock(&self.inner.current).clone()
            && current.number == number
        {
            return Ok(current);
        }
        let (info, body) = runtime
            .registry()
            .releases()
            .active()
            .await
            .map_err(|e| failed(format!("reading the active release: {e}")))?
            .ok_or_else(|| failed("no release is active".to_owned()))?;
        let body: ReleaseBody = hane_stored::open(&body)
            .map_err(|e| failed(format!("release {}: {e}", info.number)))?;
        let operations = Arc::new(ReleaseOperations {
            number: info.number,
            operations: body
                .operations
                .into_iter()
                .map(|op| (model_tool_name(&op.name), op))
                .collect(),
            loaded: tokio::sync::Mutex::new(BTreeMap::new()),
        });
        *lock(&self.inner.current) = Some(operations.clone());
        Ok(operations)
    }

    /// Runs the operation listed as `name` once with `input`.
    async fn call(
        &self,
        key: &KeyCaller,
        name: &str,
        input: &Value,
    ) -> Result<CallToolResult, ErrorData> {
        let release = self.operations().await?;
        let Some(released) = release.operations.get(name) else {
            let known: Vec<&str> = release.operations.keys().map(String::as_str).collect();
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "release {} has no operation `{name}`; it has {}",
                release.number,
                known.join(", ")
            ))]));
        };
        let operation = match self.load(&release, name, released).await {
            Ok(operation) => operation,
            Err(e) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(
                    e.to_string(),
                )]));
            }
        };
        let call = operation.call(&input.to_string(), &released.limits).await;
        let receipt = &call.receipt;
        tracing::info!(
            key = %key.key,
            operation = %receipt.operation,
            outcome = %receipt.outcome,
            wall_time_us = receipt.wall_time_us,
            fuel = receipt.fuel_consumed,
            "MCP release call"
        );
        let mut meta = MetaObject::new();
        meta.insert("hane/receipt".to_owned(), json!(call.receipt));
        if !call.proposals.is_empty() {
            let proposals: Vec<Value> = call
                .proposals
                .iter()
                .map(|p| {
                    json!({
                        "id": p.id,
                        "tool": p.tool,
                        "recipient": p.recipient,
                        "content": p.content,
                        "status": "proposed, not sent",
                    })
                })
                .collect();
            meta.insert("hane/proposals".to_owned(), json!(proposals));
        }
        let result = match call.result {
            Ok(output) => match serde_json::from_str::<Value>(&output) {
                Ok(value) if value.is_object() => CallToolResult::structured(value),
                _ => CallToolResult::success(vec![ContentBlock::text(output)]),
            },
            Err(e) => {
                CallToolResult::error(vec![ContentBlock::text(format!("{}: {e}", e.outcome()))])
            }
        };
        Ok(result.with_meta(Some(meta)))
    }

    /// `released`, loaded in the sandbox under its release's policy, once.
    async fn load(
        &self,
        release: &ReleaseOperations,
        name: &str,
        released: &ReleasedOperation,
    ) -> Result<LoadedOperation, OperationLoadError> {
        let mut loaded = release.loaded.lock().await;
        if let Some(operation) = loaded.get(name) {
            return Ok(operation.clone());
        }
        let runtime = &self.inner.runtime;
        let bytes = runtime
            .registry()
            .releases()
            .component(&released.digest)
            .await
            .map_err(|source| OperationLoadError::Read {
                digest: released.digest.clone(),
                source,
            })?
            .ok_or_else(|| OperationLoadError::Missing {
                digest: released.digest.clone(),
            })?;
        let operation = runtime
            .sandbox()
            .load(&released.name, &bytes, &released.policy)
            .await
            .map_err(|source| OperationLoadError::Load {
                name: released.name.clone(),
                source,
            })?;
        loaded.insert(name.to_owned(), operation.clone());
        Ok(operation)
    }
}

/// Why [`ReleaseTools::load`] could not load an operation; the call's
/// result is an error with this text.
#[derive(Debug, thiserror::Error)]
enum OperationLoadError {
    #[error("reading component {digest}: {source}")]
    Read {
        digest: String,
        #[source]
        source: StoreError,
    },
    #[error("component {digest} is missing from the store")]
    Missing { digest: String },
    #[error("loading operation `{name}`: {source}")]
    Load {
        name: String,
        #[source]
        source: LoadError,
    },
}

/// The operations as MCP lists them.
fn tools(release: &ReleaseOperations) -> Result<Vec<rmcp::model::Tool>, ErrorData> {
    release
        .operations
        .iter()
        .map(|(name, op)| {
            let parse = |text: &str, which: &str| {
                serde_json::from_str::<Value>(text)
                    .map_err(|e| failed(format!("operation `{}`'s {which} schema: {e}", op.name)))
            };
            let input = parse(&op.input_schema, "input")?;
            let output = parse(&op.output_schema, "output")?;
            let mut tool = rmcp::model::Tool::new(
                name.clone(),
                op.description.clone(),
                Arc::new(schema_object(&input)),
            )
            .with_annotations(annotations(&op.impact.to_string()));
            if let Some(output) = object_schema(&output) {
                tool = tool.with_raw_output_schema(Arc::new(output));
            }
            Ok(tool)
        })
        .collect()
}

impl ServerHandler for ReleaseTools {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "hane-release",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let _: KeyCaller = caller(&context)?;
        let release = self.operations().await?;
        Ok(ListToolsResult::with_all_items(tools(&release)?))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let key: KeyCaller = caller(&context)?;
        let input = Value::Object(request.arguments.unwrap_or_default());
        Ok(self.call(&key, &request.name, &input).await?.into())
    }
}
