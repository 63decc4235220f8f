//! The Model Gateway's calls: [`AgentRuntime::call_model`] admits a run's
//! model call at the gateway, sends it to the run's provider with retries
//! inside the run's time, counts what the upstream reported, and records
//! the LLM turn in the run's session.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hane_core::{JsonText, LlmTurn, ModelApi, Secret, SessionEvent};
use hane_model::{AdapterConfig, Api, ModelAdapter, ModelResponse, RetryPolicy};

use super::{AgentRuntime, LiveRun, lock};
use crate::drivers::{BoxFuture, ModelCall, ModelCaller, ModelInfo};
use crate::gateway::RunToken;
use crate::gateway::model::ModelCallError;
use crate::release::{AgentModel, LoadedProvider, LoadedRelease};

/// How the runtime reaches model providers.
///
/// Defaults ([`ModelConfig::new`]): no credentials, no recording, the
/// adapters' retry policy ([`RetryPolicy::default`]).
#[derive(Debug, Clone, Default)]
pub struct ModelConfig {
    credentials: BTreeMap<String, Secret>,
    record: Option<PathBuf>,
    retry: RetryPolicy,
}

impl ModelConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The credentials in `vars` (`HANE_CREDENTIAL_<NAME>`, as the host's
    /// environment has them).
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut config = Self::new();
        for (key, value) in vars {
            if let Some(name) = key.strip_prefix(hane_core::CREDENTIAL_ENV_PREFIX)
                && !name.is_empty()
                && !value.is_empty()
            {
                config
                    .credentials
                    .insert(hane_core::credential_key(name), Secret::new(value));
            }
        }
        config
    }

    /// Adds the credential `name` (as a `ModelProvider`'s `credential`
    /// names it).
    pub fn credential(&mut self, name: &str, secret: Secret) -> &mut Self {
        self.credentials
            .insert(hane_core::credential_key(name), secret);
        self
    }

    /// Records every model call's request and response to `file`, for
    /// replaying with a `recorded` provider.
    pub fn record(&mut self, file: PathBuf) -> &mut Self {
        self.record = Some(file);
        self
    }

    /// How failed calls are retried.
    pub fn retry(&mut self, policy: RetryPolicy) -> &mut Self {
        self.retry = policy;
        self
    }
}

/// The adapters of each release's providers, made once per process.
#[derive(Default)]
pub(crate) struct Adapters {
    made: Mutex<HashMap<(u64, String), Result<Arc<dyn ModelAdapter>, String>>>,
}

impl Adapters {
    /// The adapter of `provider` in `release`, made on first use.
    fn get(
        &self,
        config: &ModelConfig,
        release: &LoadedRelease,
        provider: &LoadedProvider,
    ) -> Result<Arc<dyn ModelAdapter>, String> {
        let key = (release.info.number, provider.manifest.metadata.name.clone());
        let mut made = lock(&self.made);
        made.entry(key)
            .or_insert_with(|| make_adapter(config, provider))
            .clone()
    }
}

/// The adapter `provider` describes, with its credential from `config`,
/// wrapped in a recorder when `config` records.
fn make_adapter(
    config: &ModelConfig,
    provider: &LoadedProvider,
) -> Result<Arc<dyn ModelAdapter>, String> {
    let spec = &provider.manifest.spec;
    let name = &provider.manifest.metadata.name;
    let api = match spec.api {
        ModelApi::ChatCompletions => Api::ChatCompletions,
        ModelApi::Responses => Api::Responses,
        ModelApi::AnthropicMessages => Api::AnthropicMessages,
        ModelApi::Recorded => {
            let text = provider.recording.as_deref().unwrap_or_default();
            let origin = format!("of provider `{name}`");
            let recorded = hane_model::Recording::parse(text, &origin)
                .map(|recording| hane_model::Recorded::new(recording, &origin))
                .map_err(|e| e.to_string())?;
            return Ok(Arc::new(recorded));
        }
    };
    let mut adapter = AdapterConfig::new(api, spec.base_url.clone().unwrap_or_default());
    adapter.stream = spec.stream;
    adapter.timeout = spec.timeout.into();
    if let Some(credential) = &spec.credential {
        let var = hane_core::credential_env_var(credential);
        let key = hane_core::credential_key(credential);
        let secret = config.credentials.get(&key).ok_or_else(|| {
            format!(
                "provider `{name}` needs the credential `{credential}`: set {var} in the environment of the hane process"
            )
        })?;
        adapter.credential = Some(secret.clone());
    }
    let adapter = hane_model::adapter(adapter).map_err(|e| format!("provider `{name}`: {e}"))?;
    match &config.record {
        Some(file) => Ok(Arc::new(hane_model::Recorder::new(adapter, file.clone()))),
        None => Ok(adapter),
    }
}

/// A run's model: what the driver is told, and the adapter calls go to.
pub(crate) struct RunModel {
    pub(crate) info: ModelInfo,
    pub(crate) adapter: Arc<dyn ModelAdapter>,
}

impl AgentRuntime {
    /// The model `agent_model` names in `release`, ready to call.
    pub(crate) fn run_model(
        &self,
        release: &LoadedRelease,
        agent_model: &AgentModel,
    ) -> Result<RunModel, String> {
        let provider = release
            .providers
            .get(&agent_model.provider)
            .ok_or_else(|| format!("no ModelProvider `{}`", agent_model.provider))?;
        let adapter = self
            .inner
            .adapters
            .get(&self.inner.model_config, release, provider)?;
        Ok(RunModel {
            info: ModelInfo {
                provider: agent_model.provider.clone(),
                name: agent_model.model.name.clone(),
                context_window: agent_model.model.context_window,
                max_output_tokens: agent_model.model.max_output_tokens,
            },
            adapter,
        })
    }

    /// Sends one model call of the run `token` is for through the Model
    /// Gateway: admitted against the run's gate (open, within its time,
    /// with enough of `maxModelTokens` left for the request's input), its
    /// output capped by what is left, retried within the run's time when
    /// the provider fails in a way that may pass, counted, and recorded
    /// as an LLM turn of the run's session.
    ///
    /// # Errors
    ///
    /// [`ModelCallError`]: the gateway refused the call, the run has no
    /// model, or the provider failed.
    #[tracing::instrument(name = "model_call", skip_all, fields(run, turn))]
    pub async fn call_model(
        &self,
        token: &RunToken,
        call: ModelCall,
    ) -> Result<ModelResponse, ModelCallError> {
        let run = self.inner.gateway.key().verify(token)?;
        let live = lock(&self.inner.live).get(&run).cloned();
        let (live, model) = match live {
            Some(live) => match live.model.clone() {
                Some(model) => (live, model),
                None => {
                    return Err(ModelCallError::Unavailable(format!(
                        "run `{run}` has no model"
                    )));
                }
            },
            None => return Err(crate::gateway::GatewayError::NotRunning(run).into()),
        };
        let admitted = match self.inner.gateway.admit_model(
            token,
            call.input_tokens,
            model.info.max_output_tokens,
        ) {
            Ok(admitted) => admitted,
            Err(e) => {
                tracing::warn!("model call refused: {e}");
                return Err(e.into());
            }
        };
        let span = tracing::Span::current();
        span.record("run", tracing::field::display(&run));
        span.record("turn", admitted.turn);
        let mut request = call.request;
        request.model.clone_from(&model.info.name);
        request.max_output_tokens = Some(
            request
                .max_output_tokens
                .map_or(admitted.max_output_tokens, |m| {
                    m.min(admitted.max_output_tokens)
                }),
        );
        let digest = request.digest();
        let started = Instant::now();
        let sent = hane_model::send_with_retry(
            model.adapter.as_ref(),
            &request,
            None,
            admitted.deadline,
            &self.inner.model_config.retry,
        )
        .await;
        let latency = started.elapsed();
        let response = match sent {
            Ok(response) => response,
            Err(error) => {
                tracing::warn!("model call failed: {error}");
                return Err(ModelCallError::Model {
                    provider: model.info.provider.clone(),
                    model: model.info.name.clone(),
                    error,
                });
            }
        };
        let usage = response.usage;
        let used = self
            .inner
            .gateway
            .count_model_tokens(&run, usage.total())
            .unwrap_or_default();
        self.update(&live, |r| r.tokens_used = used);
        tracing::info!(
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            latency_ms = latency.as_millis() as u64,
            "model call answered"
        );
        record_turn(
            &live,
            LlmTurn {
                turn: admitted.turn,
                provider: model.info.provider.clone(),
                model: model.info.name.clone(),
                request_digest: digest,
                response: JsonText::from_value(
                    &serde_json::to_value(&response).unwrap_or(serde_json::Value::Null),
                ),
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cached_tokens: usage.cached_tokens,
                latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
                max_output_tokens: request.max_output_tokens.unwrap_or_default(),
                context: JsonText::from_value(&call.context),
            },
        );
        Ok(response)
    }
}

impl AgentRuntime {
    /// The LLM turns of run `id`, in order, as its session recorded them;
    /// none for a run that never called a model.
    ///
    /// # Errors
    ///
    /// No run has this id, or the store failed.
    pub async fn llm_turns(&self, id: &hane_core::RunId) -> Result<Vec<LlmTurn>, super::RunError> {
        let run = self.get(id).await?;
        let Some(session) = run.session else {
            return Ok(Vec::new());
        };
        let events = self
            .inner
            .coordinator
            .store()
            .read(&session, 0..u64::MAX)
            .await?;
        Ok(events
            .into_iter()
            .filter_map(|recorded| match recorded.event {
                SessionEvent::LlmTurn(turn) => Some(*turn),
                _ => None,
            })
            .collect())
    }
}

/// Queues `turn` in the run's journal, behind its earlier events.
fn record_turn(live: &LiveRun, turn: LlmTurn) {
    if let Some(journal) = live.journal.get() {
        journal.record(vec![SessionEvent::LlmTurn(Box::new(turn))]);
    }
}

/// The [`ModelCaller`] of one run.
pub(crate) struct RunModels<'a> {
    pub(crate) runtime: &'a AgentRuntime,
    pub(crate) token: &'a RunToken,
    pub(crate) info: ModelInfo,
}

impl ModelCaller for RunModels<'_> {
    fn model(&self) -> &ModelInfo {
        &self.info
    }

    fn call<'a>(&'a self, call: ModelCall) -> BoxFuture<'a, Result<ModelResponse, ModelCallError>> {
        Box::pin(self.runtime.call_model(self.token, call))
    }
}
