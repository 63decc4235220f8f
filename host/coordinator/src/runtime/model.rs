//! The Model Gateway's calls: [`AgentRuntime::call_model`] admits a run's
//! model call at the gateway, sends it to the run's provider with retries
//! inside the run's time, counts what the upstream reported, and records
//! the LLM turn in the run's session.

use super::Replaying;
use hane_core::{LlmTurn, SessionEvent, credential::Secret};
use hane_manifest::ModelApi;
use hane_model::{AdapterConfig, Api, EventSink, ModelAdapter, ModelResponse, RetryPolicy};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::resume::Next;
use super::{AgentRuntime, LiveRun, lock};
use crate::drivers::ExternalDrivers;
use crate::drivers::{ModelCall, ModelCaller, ModelInfo};
use crate::gateway::RunToken;
use crate::gateway::model::ModelCallError;
use crate::release::{AgentModel, LoadedProvider, LoadedRelease};
use hane_core::BoxFuture;

/// How the runtime reaches model providers.
///
/// Defaults ([`ModelConfig::new`]): no credentials, no recording, the
/// adapters' retry policy ([`RetryPolicy::default`]).
#[derive(Debug, Clone, Default)]
pub struct ModelConfig {
    credentials: BTreeMap<String, Secret>,
    record: Option<PathBuf>,
    pub(crate) retry: RetryPolicy,
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
            if let Some(name) = key.strip_prefix(hane_core::credential::CREDENTIAL_ENV_PREFIX)
                && !name.is_empty()
                && !value.is_empty()
            {
                config.credentials.insert(
                    hane_core::credential::credential_key(name),
                    Secret::new(value),
                );
            }
        }
        config
    }

    /// The credentials' values, for what must never hold one (a
    /// conversation's memory is redacted with them).
    pub(crate) fn secret_values(&self) -> Vec<String> {
        self.credentials
            .values()
            .map(|s| s.expose().to_owned())
            .collect()
    }

    /// Adds the credential `name` (as a `ModelProvider`'s `credential`
    /// names it).
    pub fn credential(&mut self, name: &str, secret: Secret) -> &mut Self {
        self.credentials
            .insert(hane_core::credential::credential_key(name), secret);
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

/// A provider's adapter, or why it cannot be made.
type MadeAdapter = Result<Arc<dyn ModelAdapter>, ModelUnavailable>;

/// Why a run cannot have its model. Made once per provider and release
/// and told to every run that asks, so it keeps the words of what failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ModelUnavailable {
    /// The agent names a provider the release does not have.
    #[error("no ModelProvider `{0}`")]
    NoProvider(String),
    /// A `recorded` provider's recording does not read.
    #[error("{0}")]
    Recording(String),
    /// The provider's credential is not in the process's environment.
    #[error(
        "provider `{provider}` needs the credential `{credential}`: set {var} in the environment of the hane process"
    )]
    NoCredential {
        /// The provider.
        provider: String,
        /// The credential it names.
        credential: String,
        /// The variable that would hold it.
        var: String,
    },
    /// The adapter cannot be made from the provider's settings.
    #[error("provider `{provider}`: {reason}")]
    Adapter {
        /// The provider.
        provider: String,
        /// What the adapter said.
        reason: String,
    },
}

/// How this process reaches models: its [`ModelConfig`], and the
/// adapters of each release's providers (by release number and provider),
/// made once per process with its credentials.
#[derive(Default)]
pub(crate) struct Models {
    config: ModelConfig,
    made: Mutex<HashMap<(u64, String), MadeAdapter>>,
    external: Option<Arc<dyn ExternalDrivers>>,
}

impl Models {
    pub(crate) fn new(config: ModelConfig, external: Option<Arc<dyn ExternalDrivers>>) -> Self {
        Self {
            config,
            made: Mutex::default(),
            external,
        }
    }

    /// Credentials and retries.
    pub(crate) fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The adapter of `provider` in `release`, made on first use; an
    /// error says what is missing.
    pub(crate) fn adapter(
        &self,
        release: &LoadedRelease,
        provider: &LoadedProvider,
    ) -> Result<Arc<dyn ModelAdapter>, ModelUnavailable> {
        let key = (release.info.number, provider.manifest.metadata.name.clone());
        let mut made = lock(&self.made);
        made.entry(key)
            .or_insert_with(|| make_adapter(&self.config, provider))
            .clone()
    }

    /// The model `agent_model` names in `release`, ready to call by a run
    /// of `agent`. An external driver's run calls a `recorded` provider
    /// through what [`ExternalDrivers::recorded`] puts in front of it.
    pub(crate) fn for_run(
        &self,
        release: &LoadedRelease,
        agent_model: &AgentModel,
        agent: &crate::release::LoadedAgent,
    ) -> Result<RunModel, ModelUnavailable> {
        let provider = release
            .providers
            .get(&agent_model.provider)
            .ok_or_else(|| ModelUnavailable::NoProvider(agent_model.provider.clone()))?;
        let adapter = self.adapter(release, provider)?;
        let spec = &agent.manifest.spec;
        let adapter = match &self.external {
            Some(external)
                if spec.driver.is_cli() && provider.manifest.spec.api == ModelApi::Recorded =>
            {
                external.recorded(agent, adapter)
            }
            _ => adapter,
        };
        Ok(RunModel {
            info: ModelInfo {
                provider: agent_model.provider.clone(),
                name: agent_model.model.name.clone(),
                context_window: agent_model.model.context_window,
                max_output_tokens: agent_model.model.max_output_tokens,
                temperature: provider.manifest.spec.temperature,
            },
            adapter,
        })
    }
}

/// The adapter `provider` describes, with its credential from `config`,
/// wrapped in a recorder when `config` records.
fn make_adapter(
    config: &ModelConfig,
    provider: &LoadedProvider,
) -> Result<Arc<dyn ModelAdapter>, ModelUnavailable> {
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
                .map(|recording| hane_model::ReplayAdapter::new(recording, &origin))
                .map_err(|e| ModelUnavailable::Recording(e.to_string()))?;
            return Ok(Arc::new(recorded));
        }
    };
    let mut adapter = AdapterConfig::new(api, spec.base_url.clone().unwrap_or_default());
    adapter.stream = spec.stream;
    adapter.timeout = spec.timeout.into();
    if let Some(credential) = &spec.credential {
        let var = hane_core::credential::credential_env_var(credential);
        let key = hane_core::credential::credential_key(credential);
        let secret =
            config
                .credentials
                .get(&key)
                .ok_or_else(|| ModelUnavailable::NoCredential {
                    provider: name.clone(),
                    credential: credential.clone(),
                    var,
                })?;
        adapter.credential = Some(secret.clone());
    }
    let adapter = hane_model::adapter(adapter).map_err(|e| ModelUnavailable::Adapter {
        provider: name.clone(),
        reason: e.to_string(),
    })?;
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
    /// The model of the run `token` is for, as its release defines it.
    ///
    /// # Errors
    ///
    /// The token is bad, the run is not running in this process or was
    /// stopped, or it has no model.
    pub fn run_model_info(&self, token: &RunToken) -> Result<ModelInfo, ModelCallError> {
        let run = self.inner.gateway.key().verify(token)?;
        if let Some(stop) = self.inner.gateway.stopped(&run) {
            return Err(crate::gateway::GatewayError::from_stop(run, stop).into());
        }
        let live = lock(&self.inner.live).get(&run).cloned();
        let Some(live) = live else {
            return Err(crate::gateway::GatewayError::NotRunning(run).into());
        };
        match &live.model {
            Some(model) => Ok(model.info.clone()),
            None => Err(ModelCallError::Unavailable(format!(
                "run `{run}` has no model: its agent `{}` names none",
                live.agent.manifest.metadata.name
            ))),
        }
    }

    /// Sends one model call of the run `token` is for through the Model
    /// Gateway: admitted against the run's gate (open, within its time,
    /// with enough of `maxModelTokens` left for the request's input), its
    /// output capped by what is left, retried within the run's time when
    /// the provider fails in a way that may pass, counted, and recorded
    /// as an LLM turn of the run's session. Each piece of the answer goes
    /// to `events` as it arrives, when given.
    ///
    /// A call its caller drops (a client that went away) is cancelled
    /// upstream; its input and what streamed are counted, and no turn is
    /// recorded.
    ///
    /// # Errors
    ///
    /// [`ModelCallError`]: the gateway refused the call, the run has no
    /// model, or the provider failed.
    #[tracing::instrument(name = "model_call", skip_all, fields(run))]
    pub async fn call_model(
        &self,
        token: &RunToken,
        call: ModelCall,
        events: Option<EventSink<'_>>,
    ) -> Result<ModelResponse, ModelCallError> {
        let run = self.inner.gateway.key().verify(token)?;
        tracing::Span::current().record("run", tracing::field::display(&run));
        let live = lock(&self.inner.live).get(&run).cloned();
        let Some(live) = live else {
            return Err(crate::gateway::GatewayError::NotRunning(run).into());
        };
        let Some(model) = live.model.clone() else {
            return Err(ModelCallError::Unavailable(format!(
                "run `{run}` has no model"
            )));
        };
        // A resumed run's turn it had is answered as it was, not sent.
        let digest =
            |cap| crate::gateway::model::sent_request(call.request.clone(), &model.info, cap).2;
        match live.replayed(|r| r.turn(digest)) {
            Next::Live => {}
            Next::Diverged(message) => {
                return Err(Replaying::of(self).diverged(&run, &message).into());
            }
            Next::Had(turn) => {
                let response: ModelResponse = serde_json::from_str(turn.response.as_str())
                    .map_err(|e| {
                        ModelCallError::Unavailable(format!(
                            "the run's recorded model turn {} does not read: {e}",
                            turn.turn
                        ))
                    })?;
                let used = self
                    .inner
                    .gateway
                    .count_replayed_model_call(&run, turn.input_tokens + turn.output_tokens)
                    .unwrap_or(turn.input_tokens + turn.output_tokens);
                live.amend(|r| r.tokens_used = used);
                return Ok(response);
            }
        }
        let (response, turn) = self
            .inner
            .gateway
            .call_model(
                token,
                &model.info,
                model.adapter.as_ref(),
                &self.inner.models.config().retry,
                call,
                events,
            )
            .await?;
        let used = self
            .inner
            .gateway
            .model_tokens_used(&run)
            .unwrap_or_else(|| live.tokens_used());
        live.amend(|r| r.tokens_used = used);
        record_turn(&live, turn);
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
        Ok(self
            .session_events(id)
            .await?
            .into_iter()
            .filter_map(|recorded| match recorded.event {
                SessionEvent::LlmTurn(turn) => Some(*turn),
                _ => None,
            })
            .collect())
    }
}

impl AgentRuntime {
    /// The events of run `id`'s session, in order; none for a run that has
    /// no session.
    async fn session_events(
        &self,
        id: &hane_core::RunId,
    ) -> Result<Vec<hane_core::Recorded>, super::RunError> {
        let run = self.get(id).await?;
        let Some(session) = run.session else {
            return Ok(Vec::new());
        };
        // A live run's journal may still hold what it was given last. A
        // write that failed ends the run failed; what the store holds is
        // still the session as recorded.
        let journal = lock(&self.inner.live)
            .get(id)
            .and_then(|live| live.journal.get().cloned());
        if let Some(journal) = journal {
            let _ = journal.flush().await;
        }
        Ok(self
            .inner
            .coordinator
            .store()
            .read(&session, 0..u64::MAX)
            .await?)
    }

    /// What the CLI of run `id` printed (its event stream and stderr's
    /// tail), for a run of a CLI driver that started its CLI.
    ///
    /// # Errors
    ///
    /// No run has this id, or the store failed.
    pub async fn cli_output(
        &self,
        id: &hane_core::RunId,
    ) -> Result<Option<hane_core::CliOutput>, super::RunError> {
        Ok(self
            .session_events(id)
            .await?
            .into_iter()
            .rev()
            .find_map(|recorded| match recorded.event {
                SessionEvent::CliOutput(output) => Some(*output),
                _ => None,
            }))
    }
}

/// Queues `turn` in the run's journal, behind its earlier events, to share
/// a commit with the turns and events that follow within the journal's
/// linger.
fn record_turn(live: &LiveRun, turn: LlmTurn) {
    if let Some(journal) = live.journal.get() {
        journal.record_later(vec![SessionEvent::LlmTurn(Box::new(turn))]);
    }
}

/// The [`ModelCaller`] of one run.
pub(crate) struct RunModels<'a> {
    pub(crate) runtime: &'a AgentRuntime,
    pub(crate) token: &'a RunToken,
    pub(crate) info: ModelInfo,
    /// The run, whose followers are told the model's text as it streams.
    pub(crate) live: &'a LiveRun,
}

impl ModelCaller for RunModels<'_> {
    fn model(&self) -> &ModelInfo {
        &self.info
    }

    fn call<'a>(&'a self, call: ModelCall) -> BoxFuture<'a, Result<ModelResponse, ModelCallError>> {
        Box::pin(async move {
            if self.live.events.is_none() {
                return self.runtime.call_model(self.token, call, None).await;
            }
            let text = |event: hane_model::StreamEvent| {
                if let hane_model::StreamEvent::TextDelta { text, .. } = event
                    && !text.is_empty()
                {
                    self.live.tell(|| super::RunEvent::Text(text));
                }
            };
            self.runtime.call_model(self.token, call, Some(&text)).await
        })
    }
}
