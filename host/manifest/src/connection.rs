//! The `Connection` manifest (`platform/v1alpha1`): a customer API that
//! agents may use, described by its OpenAPI document, and the
//! `ToolExposure` manifest (`agents/v1alpha1`), which offers one operation
//! of a connection (or of the release) to agents as a tool of its own.
//!
//! A connection names its credential; the secret itself is never in a
//! release: the host reads `HANE_CREDENTIAL_<NAME>` from its environment
//! and sends it only to the connection's own origin.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::agent::{check_dns_name, check_tool_name, is_host_tool, not_blank};
use crate::manifest::Source;
use crate::{AGENTS_API_VERSION, ManifestError, Metadata, PLATFORM_API_VERSION};
use hane_core::{ByteSize, Duration, Impact};

/// The default of a connection's `timeout`: one request, connecting and
/// reading the whole answer.
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::seconds(10);

/// The default of a connection's `maxResponseBytes`.
pub const DEFAULT_MAX_RESPONSE_BYTES: ByteSize = ByteSize::mebibytes(1);

/// The most a connection's `maxResponseBytes` may be.
pub const MAX_RESPONSE_BYTES_LIMIT: ByteSize = ByteSize::mebibytes(16);

/// The longest a connection's `timeout` may be.
pub const MAX_CONNECTION_TIMEOUT: Duration = Duration::seconds(300);

/// The most bytes a connection's `tls.caFile` may hold (256 KiB): a
/// bundle of a few hundred certificates.
pub const MAX_CONNECTION_CA_BYTES: u64 = 256 * 1024;

/// A `Connection` manifest.
///
/// # Examples
///
/// ```
/// use hane_manifest::ConnectionManifest;
///
/// let connection = ConnectionManifest::from_yaml("maintenance.yaml", r#"
/// apiVersion: platform/v1alpha1
/// kind: Connection
/// metadata:
///   name: fleet-maintenance
/// spec:
///   baseUrl: https://maintenance.example.com/api
///   openapi: fleet-maintenance.openapi.json
///   credential: fleet-maintenance
///   allow: [getServiceHistory, bookServiceSlot]
/// "#).unwrap();
/// assert_eq!(connection.spec.allow.len(), 2);
/// assert_eq!(connection.spec.timeout.to_string(), "10s");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionManifest {
    /// Must be `platform/v1alpha1`.
    pub api_version: String,
    /// Must be `Connection`.
    pub kind: String,
    /// The name: lowercase letters, digits and `-`, starting with a letter.
    pub metadata: Metadata,
    /// The API.
    pub spec: ConnectionSpec,
}

/// `spec` of a `Connection`.
///
/// | YAML | meaning | default |
/// |---|---|---|
/// | `baseUrl` | `http(s)://…` up to the API's paths; requests never leave its scheme, host and port | required |
/// | `openapi` | the API's OpenAPI 3.0 or 3.1 document (JSON or YAML), relative to the manifest; stored in the release | required |
/// | `credential` | the credential's name; the host reads `HANE_CREDENTIAL_<NAME>` | none: nothing is sent |
/// | `allow` | the operations agents may use at all: `operationId`s, or `METHOD /path` as the document writes it | required |
/// | `timeout` | one request (a read, or an approved write's delivery), such as `5s`; at most `300s` | `10s` |
/// | `maxResponseBytes` | the largest answer read, such as `256Ki`; at most `16Mi` | `1Mi` |
/// | `tls.caFile` | a PEM file of CA certificates trusted for this connection only, besides the platform's and Mozilla's roots, relative to the manifest, at most 256 KiB; stored in the release; only with an `https://` `baseUrl` | none: those roots only |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionSpec {
    /// Where the API is.
    pub base_url: String,
    /// The OpenAPI document's file.
    pub openapi: String,
    /// The credential's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// The operations agents may use.
    pub allow: Vec<String>,
    /// How long one request may take.
    #[serde(default = "default_timeout")]
    pub timeout: Duration,
    /// The largest answer read.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: ByteSize,
    /// How the API's TLS certificate is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ConnectionTls>,
}

/// `spec.tls` of a `Connection`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionTls {
    /// A PEM file of CA certificates trusted for this connection besides
    /// the platform's and Mozilla's roots (a customer's private CA),
    /// relative to the manifest.
    pub ca_file: String,
}

fn default_timeout() -> Duration {
    DEFAULT_CONNECTION_TIMEOUT
}

fn default_max_response_bytes() -> ByteSize {
    DEFAULT_MAX_RESPONSE_BYTES
}

impl ConnectionManifest {
    /// Parses and validates a `Connection` manifest; `file` names it in
    /// errors.
    ///
    /// # Errors
    ///
    /// The first problem, naming the field and its line: malformed YAML, an
    /// unknown or missing field, a name that is not a DNS label, a base URL
    /// that is not `http(s)://` with a host (or carries a query), a blank
    /// document or credential, an empty or repeated `allow` entry, a zero or too
    /// long timeout, a response cap of zero or over 16 MiB, a blank
    /// `tls.caFile` or one for an `http://` base URL.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: Self = source.parse_manifest(PLATFORM_API_VERSION, "Connection")?;
        let fail = |field: &str, message: String| source.error(field, message);
        check_dns_name(&manifest.metadata.name)
            .map_err(|m| fail("metadata.name", m.to_string()))?;
        let spec = &manifest.spec;
        check_base_url(&spec.base_url).map_err(|m| fail("spec.baseUrl", m))?;
        not_blank(&spec.openapi).map_err(|m| fail("spec.openapi", m.to_string()))?;
        if let Some(credential) = &spec.credential {
            not_blank(credential).map_err(|m| fail("spec.credential", m.to_string()))?;
        }
        if spec.allow.is_empty() {
            return Err(fail(
                "spec.allow",
                "lists no operation; name the operations agents may use, by operationId or as `METHOD /path`"
                    .to_owned(),
            ));
        }
        let mut seen = BTreeMap::new();
        for (i, selector) in spec.allow.iter().enumerate() {
            let field = format!("spec.allow[{i}]");
            not_blank(selector).map_err(|m| fail(&field, m.to_string()))?;
            if let Some(j) = seen.insert(selector.as_str(), i) {
                return Err(fail(
                    &field,
                    format!("`{selector}` is already allowed by spec.allow[{j}]"),
                ));
            }
        }
        if spec.timeout.0.is_zero() || spec.timeout > MAX_CONNECTION_TIMEOUT {
            return Err(fail(
                "spec.timeout",
                format!(
                    "must be more than zero and at most {MAX_CONNECTION_TIMEOUT}, found {}",
                    spec.timeout
                ),
            ));
        }
        if spec.max_response_bytes.bytes() == 0
            || spec.max_response_bytes > MAX_RESPONSE_BYTES_LIMIT
        {
            return Err(fail(
                "spec.maxResponseBytes",
                format!(
                    "must be more than zero and at most {MAX_RESPONSE_BYTES_LIMIT}, found {}",
                    spec.max_response_bytes
                ),
            ));
        }
        if let Some(tls) = &spec.tls {
            not_blank(&tls.ca_file).map_err(|m| fail("spec.tls.caFile", m.to_string()))?;
            if !spec.base_url.starts_with("https://") {
                return Err(fail(
                    "spec.tls",
                    format!(
                        "TLS settings need an https:// baseUrl, found `{}`",
                        spec.base_url
                    ),
                ));
            }
        }
        Ok(manifest)
    }
}

/// An `http://` or `https://` URL with a host and no query or fragment.
fn check_base_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => {
            if url.contains(['?', '#']) {
                Err(format!(
                    "a base URL carries no query or fragment, found `{url}`"
                ))
            } else if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
                Err(format!(
                    "a URL holds no spaces or control characters, found {url:?}"
                ))
            } else {
                Ok(())
            }
        }
        _ => Err(format!(
            "expected an http:// or https:// URL with a host, found `{url}`"
        )),
    }
}

/// A `ToolExposure` manifest: one operation offered to agents as the tool
/// `spec.tool`. An agent names the exposure in its `toolExposures` and the
/// tool in its `tools`.
///
/// With `spec.connection`, the operation is one of that connection's
/// allowed API operations (an `operationId`, or `METHOD /path`); its input
/// and output schemas come from the API's document. Without, it is an
/// `Operation` of the release, offered under another name.
///
/// # Examples
///
/// ```
/// use hane_core::Impact;
/// use hane_manifest::ToolExposureManifest;
///
/// let exposure = ToolExposureManifest::from_yaml("history.yaml", r#"
/// apiVersion: agents/v1alpha1
/// kind: ToolExposure
/// metadata:
///   name: service-history
/// spec:
///   tool: fleet.service_history
///   connection: fleet-maintenance
///   operation: getServiceHistory
///   impact: read
/// "#).unwrap();
/// assert_eq!(exposure.spec.impact, Some(Impact::Read));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolExposureManifest {
    /// Must be `agents/v1alpha1`.
    pub api_version: String,
    /// Must be `ToolExposure`.
    pub kind: String,
    /// The name: lowercase letters, digits and `-`, starting with a letter.
    pub metadata: Metadata,
    /// The tool.
    pub spec: ToolExposureSpec,
}

/// `spec` of a `ToolExposure`.
///
/// | YAML | meaning | default |
/// |---|---|---|
/// | `tool` | the tool's name, such as `fleet.service_history` | required |
/// | `connection` | the `Connection` whose operation it is | none: `operation` is an `Operation` of the release |
/// | `operation` | an `operationId` or `METHOD /path` of the connection; else an `Operation`'s name | required |
/// | `description` | what the tool does, for a model | the operation's summary and description |
/// | `impact` | `read`, `write` or `outbound`; only a `GET` or `HEAD` may be `read` | required with a connection |
/// | `timeout` | one call, such as `5s`; at most the connection's | the connection's or the operation's |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolExposureSpec {
    /// The tool name agents see.
    pub tool: String,
    /// The connection, for an API operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    /// The operation that serves it.
    pub operation: String,
    /// What the tool does, for a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What a call may do outside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact: Option<Impact>,
    /// How long one call may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
}

impl ToolExposureManifest {
    /// Parses and validates a `ToolExposure` manifest; `file` names it in
    /// errors.
    ///
    /// # Errors
    ///
    /// The first problem, naming the field and its line: malformed YAML, an
    /// unknown or missing field, a name that is not a DNS label, a tool
    /// name that is not lowercase letters, digits, `_` and `.`, or is one
    /// the runtime serves itself, a blank operation or description, an API
    /// operation without `impact`, an `impact` on a release operation
    /// (whose component declares its own), a zero timeout.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: Self = source.parse_manifest(AGENTS_API_VERSION, "ToolExposure")?;
        let fail = |field: &str, message: String| source.error(field, message);
        check_dns_name(&manifest.metadata.name)
            .map_err(|m| fail("metadata.name", m.to_string()))?;
        let spec = &manifest.spec;
        check_tool_name(&spec.tool).map_err(|m| fail("spec.tool", m.to_string()))?;
        if is_host_tool(&spec.tool) {
            return Err(fail(
                "spec.tool",
                format!(
                    "`{}` is served by the runtime and cannot be exposed",
                    spec.tool
                ),
            ));
        }
        not_blank(&spec.operation).map_err(|m| fail("spec.operation", m.to_string()))?;
        if let Some(description) = &spec.description {
            not_blank(description).map_err(|m| fail("spec.description", m.to_string()))?;
        }
        match (&spec.connection, spec.impact) {
            (Some(connection), None) => {
                check_dns_name(connection).map_err(|m| fail("spec.connection", m.to_string()))?;
                return Err(fail(
                    "spec.impact",
                    "an API operation needs an `impact`: `read` (only a GET or HEAD), `write` or `outbound`"
                        .to_owned(),
                ));
            }
            (Some(connection), Some(_)) => {
                check_dns_name(connection).map_err(|m| fail("spec.connection", m.to_string()))?;
            }
            (None, Some(_)) => {
                return Err(fail(
                    "spec.impact",
                    format!(
                        "`{}` is an Operation of the release, whose component declares its impact; `impact` is for a connection's operations",
                        spec.operation
                    ),
                ));
            }
            (None, None) => {}
        }
        if spec.timeout.is_some_and(|t| t.0.is_zero()) {
            return Err(fail("spec.timeout", "must be more than zero".to_owned()));
        }
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(spec: &str) -> Result<ConnectionManifest, ManifestError> {
        ConnectionManifest::from_yaml(
            "c.yaml",
            &format!(
                "apiVersion: platform/v1alpha1\nkind: Connection\nmetadata:\n  name: fleet-maintenance\nspec:\n{spec}"
            ),
        )
    }

    fn exposure(spec: &str) -> Result<ToolExposureManifest, ManifestError> {
        ToolExposureManifest::from_yaml(
            "e.yaml",
            &format!(
                "apiVersion: agents/v1alpha1\nkind: ToolExposure\nmetadata:\n  name: history\nspec:\n{spec}"
            ),
        )
    }

    const GOOD: &str =
        "  baseUrl: http://127.0.0.1:8080\n  openapi: api.json\n  allow: [getServiceHistory]\n";

    #[test]
    fn a_connection_parses_with_its_defaults() {
        let c = connection(GOOD).unwrap();
        assert_eq!(c.spec.timeout, DEFAULT_CONNECTION_TIMEOUT);
        assert_eq!(c.spec.max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES);
        assert_eq!(c.spec.credential, None);
        let c = connection(&format!(
            "{GOOD}  credential: fleet\n  timeout: 2s\n  maxResponseBytes: 64Ki\n"
        ))
        .unwrap();
        assert_eq!(c.spec.credential.as_deref(), Some("fleet"));
        assert_eq!(c.spec.max_response_bytes, ByteSize::kibibytes(64));
        assert_eq!(c.spec.tls, None);
        let c = connection(
            "  baseUrl: https://fleet.example\n  openapi: api.json\n  allow: [a]\n  tls: { caFile: certs/fleet-ca.pem }\n",
        )
        .unwrap();
        assert_eq!(
            c.spec.tls,
            Some(ConnectionTls {
                ca_file: "certs/fleet-ca.pem".to_owned()
            })
        );
    }

    #[test]
    fn bad_connections_are_refused_naming_the_field() {
        let cases = [
            (
                "  baseUrl: ftp://x\n  openapi: a.json\n  allow: [a]\n",
                "spec.baseUrl",
                "expected an http:// or https:// URL",
            ),
            (
                "  baseUrl: http://x/api?key=1\n  openapi: a.json\n  allow: [a]\n",
                "spec.baseUrl",
                "no query",
            ),
            (
                "  baseUrl: http://x\n  openapi: a.json\n  allow: []\n",
                "spec.allow",
                "lists no operation",
            ),
            (
                "  baseUrl: http://x\n  openapi: a.json\n  allow: [a, a]\n",
                "spec.allow[1]",
                "already allowed by spec.allow[0]",
            ),
            (
                "  baseUrl: http://x\n  openapi: a.json\n  allow: [a]\n  timeout: 0s\n",
                "spec.timeout",
                "more than zero",
            ),
            (
                "  baseUrl: http://x\n  openapi: a.json\n  allow: [a]\n  maxResponseBytes: 17Mi\n",
                "spec.maxResponseBytes",
                "at most 16Mi",
            ),
            (
                "  baseUrl: http://x\n  openapi: a.json\n  allow: [a]\n  tls: { caFile: ca.pem }\n",
                "spec.tls",
                "need an https:// baseUrl",
            ),
            (
                "  baseUrl: https://x\n  openapi: a.json\n  allow: [a]\n  tls: { caFile: ' ' }\n",
                "spec.tls.caFile",
                "",
            ),
            (
                "  baseUrl: https://x\n  openapi: a.json\n  allow: [a]\n  tls: { caFile: a.pem, verify: false }\n",
                "spec.tls.verify",
                "unknown field `verify`",
            ),
            (
                "  baseUrl: http://x\n  openapi: a.json\n  allow: [a]\n  password: hunter2\n",
                "spec.password",
                "unknown field `password`",
            ),
        ];
        for (spec, field, message) in cases {
            let e = connection(spec).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.message.contains(message), "{e}");
            assert_eq!(e.file, "c.yaml");
        }
    }

    #[test]
    fn exposures_of_api_and_release_operations() {
        let api = exposure(
            "  tool: fleet.book\n  connection: fleet-maintenance\n  operation: POST /bookings\n  impact: outbound\n  timeout: 3s\n",
        )
        .unwrap();
        assert_eq!(api.spec.impact, Some(Impact::Outbound));
        let alias = exposure("  tool: fleet.lookup\n  operation: data.find_record\n").unwrap();
        assert_eq!(alias.spec.connection, None);
        let cases = [
            (
                "  tool: fleet.book\n  connection: fleet-maintenance\n  operation: bookServiceSlot\n",
                "spec.impact",
                "needs an `impact`",
            ),
            (
                "  tool: fleet.lookup\n  operation: data.find_record\n  impact: read\n",
                "spec.impact",
                "declares its impact",
            ),
            (
                "  tool: submit_result\n  operation: data.find_record\n",
                "spec.tool",
                "served by the runtime",
            ),
            ("  tool: Fleet-Book\n  operation: x\n", "spec.tool", ""),
            (
                "  tool: fleet.book\n  connection: Fleet\n  operation: x\n  impact: write\n",
                "spec.connection",
                "",
            ),
        ];
        for (spec, field, message) in cases {
            let e = exposure(spec).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.message.contains(message), "{e}");
        }
    }
}
