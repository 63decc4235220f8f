//! Customer APIs as tools: the release's `Connection`s, each with its
//! OpenAPI document and the operations it allows, the tools that
//! `ToolExposure`s make of them, and [`Integrations`], the service that
//! answers `integration.describe` and `integration.read` (and the exposed
//! read tools) for the runs of the kernel.
//!
//! A read runs at once through `hane-delivery`, which holds the
//! connection's credential; anything else a connection allows is an
//! outbound action (`integration.execute`, or an exposed write tool): its
//! exact HTTP request is fixed into an `ActionRequest` by `approvals`,
//! decided, and delivered once.

mod service;

use std::collections::BTreeMap;
use std::sync::Arc;

use hane_core::approval::ConnectionTarget;
use hane_core::{Duration, Impact};
use hane_delivery::ApiAnswer;
use hane_manifest::connection::MAX_CONNECTION_CA_BYTES;
use hane_manifest::openapi::{ApiDocument, ApiOperation, MAX_OPENAPI_BYTES};
use hane_manifest::{ConnectionManifest, ManifestError};
use hane_sandbox::Schema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use service::Integrations;

use crate::release::SourceFile;

/// A `Connection` as a release stores it: the manifest, its OpenAPI
/// document's text and its CA certificates (`tls.caFile`), so the release
/// runs without the files it came from and a rollback brings them back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleasedConnection {
    /// The manifest.
    pub source: SourceFile,
    /// The OpenAPI document.
    pub openapi: String,
    /// The PEM text of its `tls.caFile`, if it has one.
    pub ca_certificates: Option<String>,
}

/// A connection of a loaded release: its document read, and each
/// operation it allows with its schemas compiled.
pub struct LoadedConnection {
    /// The manifest.
    pub manifest: ConnectionManifest,
    /// Its own CA certificates (PEM), trusted for its requests besides the
    /// platform's and Mozilla's roots.
    pub ca_certificates: Option<String>,
    /// The operations it allows, by [`ApiOperation::name`].
    pub allowed: BTreeMap<String, AllowedOperation>,
}

impl std::fmt::Debug for LoadedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedConnection")
            .field("name", &self.manifest.metadata.name)
            .field("allowed", &self.allowed.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// One operation a connection allows.
pub struct AllowedOperation {
    /// The operation as its document describes it.
    pub operation: ApiOperation,
    /// Its input schema, compiled.
    pub input: Schema,
    /// Its success response's schema, compiled, when the document gives
    /// one.
    pub output: Option<Schema>,
}

impl LoadedConnection {
    /// The name.
    pub fn name(&self) -> &str {
        &self.manifest.metadata.name
    }

    /// The allowed operation `selector` names: its name, its operationId
    /// or `METHOD /path`.
    pub fn find(&self, selector: &str) -> Option<&AllowedOperation> {
        if let Some(found) = self.allowed.get(selector) {
            return Some(found);
        }
        self.allowed.values().find(|a| {
            let op = &a.operation;
            op.operation_id.as_deref() == Some(selector)
                || selector
                    .split_once(' ')
                    .is_some_and(|(m, p)| m.eq_ignore_ascii_case(&op.method) && p == op.path)
        })
    }

    /// What a model is told about the operations it allows.
    pub fn describe(&self, only: Option<&AllowedOperation>) -> Value {
        let operations: Vec<Value> = self
            .allowed
            .values()
            .filter(|a| only.is_none_or(|o| std::ptr::eq(o, *a)))
            .map(|a| {
                let op = &a.operation;
                json!({
                    "operation": op.name(),
                    "operationId": op.operation_id,
                    "method": op.method,
                    "path": op.path,
                    "summary": op.summary,
                    "description": op.description,
                    "reads": op.is_read(),
                    "inputSchema": op.input_schema,
                    "outputSchema": op.output_schema,
                })
            })
            .collect();
        json!({"connection": self.name(), "operations": operations})
    }
}

/// Reads the connection in `released`: its manifest, its document, and
/// each operation it allows, which must be in the document and usable as a
/// tool. Errors name the manifest's file, or the document and operation.
pub(crate) fn load_connection(
    released: &ReleasedConnection,
) -> Result<LoadedConnection, Vec<ManifestError>> {
    let file = &released.source.file;
    let manifest =
        ConnectionManifest::from_yaml(file, &released.source.text).map_err(|e| vec![e])?;
    let document_file = format!("{file}: {}", manifest.spec.openapi);
    let document = ApiDocument::parse(&document_file, &released.openapi)
        .map_err(|e| vec![ManifestError::new(file, "spec.openapi", e.to_string())])?;
    let mut errors = Vec::new();
    let mut allowed = BTreeMap::new();
    for (i, selector) in manifest.spec.allow.iter().enumerate() {
        let field = format!("spec.allow[{i}]");
        if let Some(unusable) = document.find_unusable(selector) {
            errors.push(ManifestError::new(
                file,
                &field,
                format!(
                    "operation `{}` of {} cannot be a tool: {}",
                    unusable.name(),
                    manifest.spec.openapi,
                    unusable.reason
                ),
            ));
            continue;
        }
        let Some(operation) = document.find(selector) else {
            let known: Vec<String> = document.operations.iter().map(ApiOperation::name).collect();
            errors.push(ManifestError::new(
                file,
                &field,
                format!(
                    "`{selector}` is not an operation of {}; it has {}",
                    manifest.spec.openapi,
                    known.join(", ")
                ),
            ));
            continue;
        };
        let name = operation.name();
        let operation = &without_host_headers(operation);
        let compile = |schema: &Value, which: &str| {
            Schema::from_value(schema).map_err(|e| {
                ManifestError::new(
                    file,
                    &field,
                    format!(
                        "the {which} schema of operation `{name}` is not valid JSON Schema: {e}"
                    ),
                )
            })
        };
        let input = match compile(&operation.input_schema, "input") {
            Ok(input) => input,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let output = match operation
            .output_schema
            .as_ref()
            .map(|s| compile(s, "output"))
        {
            Some(Err(e)) => {
                errors.push(e);
                continue;
            }
            Some(Ok(output)) => Some(output),
            None => None,
        };
        allowed.insert(
            name,
            AllowedOperation {
                operation: operation.clone(),
                input,
                output,
            },
        );
    }
    if errors.is_empty() {
        Ok(LoadedConnection {
            manifest,
            ca_certificates: released.ca_certificates.clone(),
            allowed,
        })
    } else {
        Err(errors)
    }
}

/// Headers the host sets itself, which a tool's input never carries: the
/// credential's, and the key that makes a delivery safe to retry.
const HOST_HEADERS: [&str; 2] = ["authorization", "idempotency-key"];

/// `operation` without the header parameters the host sets itself
/// ([`HOST_HEADERS`]): a document may declare them (an API that honours an
/// `Idempotency-Key` says so), but a model never chooses them.
fn without_host_headers(operation: &ApiOperation) -> ApiOperation {
    use hane_manifest::openapi::ApiParameterLocation;
    let mut operation = operation.clone();
    let host_owned: Vec<String> = operation
        .parameters
        .iter()
        .filter(|p| {
            p.location == ApiParameterLocation::Header
                && HOST_HEADERS.contains(&p.name.to_ascii_lowercase().as_str())
        })
        .map(|p| p.name.clone())
        .collect();
    if host_owned.is_empty() {
        return operation;
    }
    operation
        .parameters
        .retain(|p| !host_owned.contains(&p.name));
    if let Some(properties) = operation
        .input_schema
        .get_mut("properties")
        .and_then(Value::as_object_mut)
    {
        for name in &host_owned {
            properties.remove(name);
        }
    }
    if let Some(required) = operation
        .input_schema
        .get_mut("required")
        .and_then(Value::as_array_mut)
    {
        required.retain(|r| {
            r.as_str()
                .is_none_or(|r| !host_owned.iter().any(|h| h == r))
        });
    }
    operation
}

/// The document a connection names, read from beside its manifest in
/// `folder`, capped at [`MAX_OPENAPI_BYTES`].
pub(crate) fn read_openapi(
    file: &str,
    manifest: &ConnectionManifest,
    folder: &std::path::Path,
) -> Result<String, ManifestError> {
    let at = folder.join(&manifest.spec.openapi);
    hane_core::file::read_capped_text(
        &at,
        hane_core::file::FileCap::new(MAX_OPENAPI_BYTES, "OpenAPI documents"),
    )
    .map_err(|e| ManifestError::new(file, "spec.openapi", e.to_string()))
}

/// The CA certificates a connection's `tls.caFile` names, read from beside
/// its manifest in `folder`, capped at [`MAX_CONNECTION_CA_BYTES`], and
/// checked to be PEM certificates that can be roots; `None` without
/// `tls.caFile`.
pub(crate) fn read_ca_file(
    file: &str,
    manifest: &ConnectionManifest,
    folder: &std::path::Path,
) -> Result<Option<String>, ManifestError> {
    let Some(tls) = &manifest.spec.tls else {
        return Ok(None);
    };
    let fail = |message: String| ManifestError::new(file, "spec.tls.caFile", message);
    let at = folder.join(&tls.ca_file);
    let pem = hane_core::file::read_capped_text(
        &at,
        hane_core::file::FileCap::new(MAX_CONNECTION_CA_BYTES, "CA certificate files"),
    )
    .map_err(|e| fail(e.to_string()))?;
    hane_delivery::check_roots(&pem, &tls.ca_file).map_err(|e| fail(e.to_string()))?;
    Ok(Some(pem))
}

/// A customer API's answer body as a tool's result carries it: the JSON
/// its `Content-Type` declares, else its text; `null` when empty.
///
/// # Errors
///
/// The body is not the JSON its `Content-Type` declares.
pub(crate) fn answer_body(answer: &ApiAnswer) -> Result<Value, serde_json::Error> {
    let json = answer
        .content_type
        .as_deref()
        .is_some_and(|t| t.starts_with("application/json") || t.contains("+json"));
    Ok(if answer.body.is_empty() {
        Value::Null
    } else if json {
        serde_json::from_slice(&answer.body)?
    } else {
        Value::String(String::from_utf8_lossy(&answer.body).into_owned())
    })
}

/// How `body`, answered with `status`, departs from `schema`, the
/// operation's documented success response: one sentence per violation;
/// none for a status outside `2xx`, which that schema does not describe.
pub(crate) fn schema_violations(schema: &Schema, status: u16, body: &Value) -> Vec<String> {
    if !(200..300).contains(&status) {
        return Vec::new();
    }
    match schema.check(body) {
        Ok(()) => Vec::new(),
        Err(list) => list.iter().map(ToString::to_string).collect(),
    }
}

/// What a summary or detail adds for `violations`: nothing when there are
/// none.
pub(crate) fn violations_note(violations: &[String]) -> String {
    if violations.is_empty() {
        String::new()
    } else {
        format!(
            "; the body does not match the documented schema: {}",
            violations.join("; ")
        )
    }
}

/// How the answer to a delivered `integration.execute` action departs
/// from the success response its connection's document gave the
/// operation when it was proposed (`target.response_schema`); none when
/// the document gave none.
pub(crate) fn delivered_violations(target: &ConnectionTarget, answer: &ApiAnswer) -> Vec<String> {
    let Some(schema) = &target.response_schema else {
        return Vec::new();
    };
    let schema = match schema.to_value().map(|v| Schema::from_value(&v)) {
        Ok(Ok(schema)) => schema,
        Ok(Err(e)) => return vec![format!("the documented schema cannot be used: {e}")],
        Err(e) => return vec![format!("the documented schema is not JSON: {e}")],
    };
    match answer_body(answer) {
        Ok(body) => schema_violations(&schema, answer.status, &body),
        Err(e) => vec![format!("the body is not the JSON it declares: {e}")],
    }
}

/// Whether `agent` may use operation `operation` of connection
/// `connection`: it lists the connection in its `connections`, or one of
/// its tools exposes that operation.
pub(crate) fn may_use(
    agent: &crate::release::LoadedAgent,
    connection: &str,
    operation: &str,
) -> bool {
    agent
        .manifest
        .spec
        .connections
        .iter()
        .any(|c| c == connection)
        || agent.tools.values().any(|tool| match &tool.kind {
            crate::tools::ToolKind::Api(api) => {
                api.connection.name() == connection && api.operation == operation
            }
            _ => false,
        })
}

/// Refuses a run of `agent` when a connection it uses (one it lists, or
/// one its exposed tools call) names a credential `delivery` does not
/// hold: the run would fail at its first call instead.
pub(crate) fn check_credentials(
    agent: &crate::release::LoadedAgent,
    release: &crate::release::LoadedRelease,
    delivery: &hane_delivery::DeliveryConfig,
) -> Result<(), crate::RunError> {
    let exposed = agent.tools.values().filter_map(|tool| match &tool.kind {
        crate::tools::ToolKind::Api(api) => Some(api.connection.clone()),
        _ => None,
    });
    let listed = agent
        .manifest
        .spec
        .connections
        .iter()
        .filter_map(|name| release.connections.get(name).cloned());
    for connection in listed.chain(exposed) {
        if let Some(credential) = &connection.manifest.spec.credential
            && !delivery.holds_credential(credential)
        {
            return Err(crate::RunError::ConnectionUnavailable {
                agent: agent.manifest.metadata.name.clone(),
                connection: connection.name().to_owned(),
                credential: credential.clone(),
                var: hane_core::credential::credential_env_var(credential),
            });
        }
    }
    Ok(())
}

/// Why `agent` may not use connection `name`: it is not among the ones
/// it lists, which are named.
pub(crate) fn not_listed(agent: &hane_manifest::AgentManifest, name: &str) -> String {
    let known = &agent.spec.connections;
    format!(
        "connection `{name}` is not one of agent `{}`'s connections ({})",
        agent.metadata.name,
        if known.is_empty() {
            "it has none".to_owned()
        } else {
            known.join(", ")
        }
    )
}

/// A tool an exposure makes of one operation of a connection.
#[derive(Debug)]
pub struct ApiTool {
    /// The connection.
    pub connection: Arc<LoadedConnection>,
    /// The operation's name in it.
    pub operation: String,
    /// What a call may do: `read` runs at once, anything else is an
    /// outbound action.
    pub impact: Impact,
    /// How long one call may take.
    pub timeout: Duration,
}

impl ApiTool {
    /// The operation.
    pub fn allowed(&self) -> &AllowedOperation {
        self.connection
            .allowed
            .get(&self.operation)
            .expect("an exposed operation is one its connection allows")
    }

    /// The input of the generic integration tool this tool's call stands
    /// for: the connection, the operation and the call's input.
    pub fn generic_input(&self, input: &Value) -> Value {
        json!({
            "connection": self.connection.name(),
            "operation": self.operation,
            "input": input,
        })
    }
}
