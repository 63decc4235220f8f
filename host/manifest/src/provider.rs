//! The `ModelProvider` manifest (`platform/v1alpha1`): where the models a
//! release's agents use are served, through which API, with which
//! credential, and how large their windows are.
//!
//! Providers are definitions like any other, so a change of provider, key
//! name or model is activated, and rolled back, with its release. The
//! credential itself never is: the manifest names it, and the host reads
//! `HANE_CREDENTIAL_<NAME>` from its environment.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::agent::{check_dns_name, not_blank};
use crate::manifest::{FieldProblem, Source};
use crate::{ManifestError, Metadata, PLATFORM_API_VERSION};
use hane_core::Duration;

/// The default of `spec.timeout`: a whole model call, retries included in
/// neither.
pub const DEFAULT_MODEL_TIMEOUT: Duration = Duration::seconds(120);

/// A `ModelProvider` manifest.
///
/// # Examples
///
/// ```
/// use hane_manifest::{ModelApi, ModelProviderManifest};
///
/// let provider = ModelProviderManifest::from_yaml("provider.yaml", r#"
/// apiVersion: platform/v1alpha1
/// kind: ModelProvider
/// metadata:
///   name: openai
/// spec:
///   api: responses
///   baseUrl: https://api.openai.com/v1
///   credential: openai
///   models:
///     - name: gpt-4.1-mini
///       contextWindow: 1047576
///       maxOutputTokens: 32768
/// "#).unwrap();
/// assert_eq!(provider.spec.api, ModelApi::Responses);
/// assert_eq!(provider.spec.models[0].context_window, 1_047_576);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelProviderManifest {
    /// Must be `platform/v1alpha1`.
    pub api_version: String,
    /// Must be `ModelProvider`.
    pub kind: String,
    /// The name: lowercase letters, digits and `-`, starting with a letter.
    pub metadata: Metadata,
    /// The provider.
    pub spec: ModelProviderSpec,
}

/// The API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelApi {
    /// OpenAI Chat Completions, which most OpenAI-compatible servers
    /// (llama.cpp, vLLM, Ollama, LiteLLM) also serve.
    ChatCompletions,
    /// OpenAI Responses.
    Responses,
    /// Anthropic Messages.
    AnthropicMessages,
    /// Responses replayed from a recording file; no server.
    Recorded,
}

impl ModelApi {
    /// The name as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelApi::ChatCompletions => "chat-completions",
            ModelApi::Responses => "responses",
            ModelApi::AnthropicMessages => "anthropic-messages",
            ModelApi::Recorded => "recorded",
        }
    }
}

impl std::fmt::Display for ModelApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `spec` of a `ModelProvider`.
///
/// | YAML | meaning | default |
/// |---|---|---|
/// | `api` | `chat-completions`, `responses`, `anthropic-messages` or `recorded` | required |
/// | `baseUrl` | `http(s)://…` up to the API's paths, such as `https://api.openai.com/v1`; not for `recorded` | required |
/// | `credential` | the credential's name; the host reads `HANE_CREDENTIAL_<NAME>` | none: no key is sent |
/// | `recording` | for `recorded`: the recording file, relative to the manifest; stored in the release | required for `recorded` |
/// | `stream` | stream answers from the upstream (SSE) | `true` |
/// | `timeout` | one model call, such as `60s` | `120s` |
/// | `temperature` | sampling temperature of every request, 0 to 2 | the provider's |
/// | `default` | the release's default provider (its first model is the default model) | `false` |
/// | `models` | the models it serves, at least one | required |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelProviderSpec {
    /// The API.
    pub api: ModelApi,
    /// Where it is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The credential's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// The recording file of a `recorded` provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<String>,
    /// Whether answers stream from the upstream.
    #[serde(default = "yes", skip_serializing_if = "Clone::clone")]
    pub stream: bool,
    /// How long one model call may take.
    #[serde(default = "default_timeout")]
    pub timeout: Duration,
    /// The sampling temperature of every request; the provider's default
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Whether this is the release's default provider.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default: bool,
    /// The models it serves.
    pub models: Vec<ProviderModel>,
}

fn yes() -> bool {
    true
}

fn default_timeout() -> Duration {
    DEFAULT_MODEL_TIMEOUT
}

/// A model a provider serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderModel {
    /// Its name, as the provider knows it.
    pub name: String,
    /// Its context window, in tokens, input and output together.
    pub context_window: u64,
    /// The most output tokens it produces for one request.
    pub max_output_tokens: u64,
}

impl ModelProviderManifest {
    /// Parses and validates a `ModelProvider`; `file` names it in errors.
    ///
    /// # Errors
    ///
    /// The first problem, naming its field and line: malformed YAML, an
    /// unknown or missing field, an unknown `api`, a `baseUrl` that is not
    /// `http://` or `https://` (or one given to a `recorded` provider), a
    /// `recorded` provider without a `recording` (or a recording given to
    /// another), a credential name that is not letters, digits, `-`, `_`
    /// and `.`, no models, a model named twice, or a window or output cap
    /// of zero or an output cap not below the window.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: Self = source.parse_manifest(PLATFORM_API_VERSION, "ModelProvider")?;
        let fail = |field: &str, message: String| source.error(field, message);
        check_dns_name(&manifest.metadata.name)
            .map_err(|m| fail("metadata.name", m.to_string()))?;
        let spec = &manifest.spec;
        match (spec.api, &spec.base_url, &spec.recording) {
            (ModelApi::Recorded, Some(_), _) => {
                return Err(fail(
                    "spec.baseUrl",
                    "a `recorded` provider replays a file and has no server".to_owned(),
                ));
            }
            (ModelApi::Recorded, None, None) => {
                return Err(fail(
                    "spec.recording",
                    "a `recorded` provider needs the recording file it replays".to_owned(),
                ));
            }
            (ModelApi::Recorded, None, Some(recording)) => {
                not_blank(recording).map_err(|m| fail("spec.recording", m.to_string()))?;
            }
            (api, _, Some(_)) => {
                return Err(fail(
                    "spec.recording",
                    format!("only a `recorded` provider replays a recording, not `{api}`"),
                ));
            }
            (api, None, None) => {
                return Err(fail(
                    "spec.baseUrl",
                    format!("an `{api}` provider needs the URL it is served at"),
                ));
            }
            (_, Some(url), None) => {
                check_base_url(url).map_err(|m| fail("spec.baseUrl", m.to_string()))?
            }
        }
        if let Some(credential) = &spec.credential {
            check_credential_name(credential)
                .map_err(|m| fail("spec.credential", m.to_string()))?;
        }
        if spec.timeout.0.is_zero() {
            return Err(fail("spec.timeout", "must be more than 0s".to_owned()));
        }
        if let Some(t) = spec.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(fail(
                "spec.temperature",
                format!("expected a temperature from 0 to 2, found {t}"),
            ));
        }
        if spec.models.is_empty() {
            return Err(fail(
                "spec.models",
                "must list at least one model".to_owned(),
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, model) in spec.models.iter().enumerate() {
            let at = |field: &str| format!("spec.models[{i}].{field}");
            not_blank(&model.name).map_err(|m| fail(&at("name"), m.to_string()))?;
            if !seen.insert(model.name.as_str()) {
                return Err(fail(
                    &at("name"),
                    format!("model `{}` is listed twice", model.name),
                ));
            }
            if model.context_window == 0 {
                return Err(fail(&at("contextWindow"), "must be at least 1".to_owned()));
            }
            if model.max_output_tokens == 0 || model.max_output_tokens >= model.context_window {
                return Err(fail(
                    &at("maxOutputTokens"),
                    format!(
                        "must be at least 1 and below the context window ({})",
                        model.context_window
                    ),
                ));
            }
        }
        Ok(manifest)
    }

    /// The model named `name`, if the provider serves it.
    pub fn model(&self, name: &str) -> Option<&ProviderModel> {
        self.spec.models.iter().find(|m| m.name == name)
    }
}

/// `http://` or `https://`, a host, no query or fragment.
fn check_base_url(url: &str) -> Result<(), FieldProblem> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| FieldProblem::UrlScheme(url.to_owned()))?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.contains('@') {
        return Err(FieldProblem::UrlHost(url.to_owned()));
    }
    if url.contains(['?', '#', ' ']) {
        return Err(FieldProblem::UrlExtras(url.to_owned()));
    }
    Ok(())
}

/// Credential names: what `HANE_CREDENTIAL_<NAME>` can be made of.
fn check_credential_name(name: &str) -> Result<(), FieldProblem> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(())
    } else {
        Err(FieldProblem::CredentialName(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: &str = "\
apiVersion: platform/v1alpha1
kind: ModelProvider
metadata:
  name: local
spec:
  api: chat-completions
  baseUrl: http://127.0.0.1:8080/v1
  credential: local-llama
  default: true
  models:
    - name: smollm2
      contextWindow: 4096
      maxOutputTokens: 512
";

    fn error(from: &str, to: &str) -> String {
        ModelProviderManifest::from_yaml("p.yaml", &LOCAL.replace(from, to))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_provider_parses_with_its_defaults_and_round_trips() {
        let p = ModelProviderManifest::from_yaml("p.yaml", LOCAL).unwrap();
        assert!(p.spec.stream && p.spec.default);
        assert_eq!(p.spec.timeout, DEFAULT_MODEL_TIMEOUT);
        assert_eq!(p.model("smollm2").unwrap().max_output_tokens, 512);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(
            ModelProviderManifest::from_yaml("p.json", &json).unwrap(),
            p
        );
    }

    #[test]
    fn each_mistake_names_its_field_and_line() {
        assert_eq!(
            error("api: chat-completions", "api: grpc"),
            "p.yaml:6: spec.api: unknown variant `grpc`, expected one of `chat-completions`, `responses`, `anthropic-messages`, `recorded`"
        );
        assert_eq!(
            error("http://127.0.0.1:8080/v1", "ftp://x"),
            "p.yaml:7: spec.baseUrl: expected a URL starting with `http://` or `https://`, found `ftp://x`"
        );
        assert_eq!(
            error("api: chat-completions", "api: recorded"),
            "p.yaml:7: spec.baseUrl: a `recorded` provider replays a file and has no server"
        );
        assert_eq!(
            error(
                "  baseUrl: http://127.0.0.1:8080/v1\n",
                "  recording: r.json\n"
            ),
            "p.yaml:7: spec.recording: only a `recorded` provider replays a recording, not `chat-completions`"
        );
        assert_eq!(
            error("local-llama", "local llama"),
            "p.yaml:8: spec.credential: expected a credential name of letters, digits, `-`, `_` and `.` (at most 64), found `local llama`"
        );
        assert_eq!(
            error("maxOutputTokens: 512", "maxOutputTokens: 4096"),
            "p.yaml:13: spec.models[0].maxOutputTokens: must be at least 1 and below the context window (4096)"
        );
        assert_eq!(
            error("  default: true\n", "  default: true\n  temperature: 2.5\n"),
            "p.yaml:10: spec.temperature: expected a temperature from 0 to 2, found 2.5"
        );
        assert!(error("  models:", "  modles:").contains("unknown field `modles`"));
    }
}
