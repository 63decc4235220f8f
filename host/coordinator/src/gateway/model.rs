//! The Model Gateway's admission and accounting: which model call of a run
//! may go out, with how many output tokens, and what it used.
//!
//! A run's model calls share its gate with its tool calls: a cancelled run's
//! next model call is refused at once, and so is one past `maxSeconds`.
//! Each call is admitted only when what the run has left of
//! `maxModelTokens` covers the request's estimated input and at least one
//! output token; its output cap is then lowered to what is left. After the
//! call, the usage the upstream reported is counted; a run with nothing
//! left is refused its next model call and ends `limit_exceeded`. A run's
//! `maxModelTokens` was reserved from the day's budget when it started, so
//! runs that were admitted cannot spend past the day's limit together.

use std::time::Instant;

use hane_core::{JsonText, LlmTurn, RunId};
use hane_model::{ModelAdapter, ModelError, ModelResponse, RetryPolicy};

use crate::drivers::{ModelCall, ModelInfo};

use super::{GatewayError, RunToken, Stop, TokenError, ToolGateway};

/// What a run used of its model budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ModelUse {
    /// Tokens counted, input and output.
    pub(crate) used: u64,
    /// Calls admitted.
    pub(crate) turns: u32,
}

/// A model call the gateway let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelAdmitted {
    /// The run.
    pub run: RunId,
    /// Which call of the run this is, from 1.
    pub turn: u32,
    /// The output cap the call gets: the model's cap, or what the run has
    /// left after the request's input if less.
    pub max_output_tokens: u64,
    /// When the run's time is up; retries stop before it.
    pub deadline: Instant,
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelCallError {
    /// The gateway refused it: the run ended, was cancelled or is out of a
    /// limit.
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// The provider failed, after the retries the run's time allowed.
    #[error("model `{model}` of provider `{provider}`: {error}")]
    Model {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// What went wrong.
        error: ModelError,
    },
    /// The run's model is not usable in this process; the message says
    /// why (a credential missing from the environment, a recording that
    /// does not read).
    #[error("{0}")]
    Unavailable(String),
}

impl From<TokenError> for ModelCallError {
    fn from(e: TokenError) -> Self {
        ModelCallError::Gateway(GatewayError::Token(e))
    }
}

impl ToolGateway {
    /// Admits a model call of the run `token` is for, whose input is
    /// about `input_tokens` and whose model produces at most
    /// `model_max_output` tokens.
    ///
    /// # Errors
    ///
    /// The token is bad, the run is not running or was stopped, it is past
    /// `maxSeconds`, or it has too little left of `maxModelTokens` for the
    /// request — which stops it as `limit_exceeded`.
    pub fn admit_model(
        &self,
        token: &RunToken,
        input_tokens: u64,
        model_max_output: u64,
    ) -> Result<ModelAdmitted, GatewayError> {
        let (run, gate) = self.open_gate(token)?;
        let limits = &gate.agent.manifest.spec.limits;
        let mut model = gate.model.lock().unwrap_or_else(|e| e.into_inner());
        let left = limits.max_model_tokens.saturating_sub(model.used);
        let exceeded = if Instant::now() >= gate.deadline {
            Some(format!(
                "maxSeconds: the run is past its {} s",
                limits.max_seconds
            ))
        } else if left <= input_tokens {
            Some(format!(
                "maxModelTokens: {} of {} used; the next request needs about {input_tokens} input tokens and {left} are left",
                model.used, limits.max_model_tokens
            ))
        } else {
            None
        };
        if let Some(message) = exceeded {
            drop(model);
            let mut stop = gate.stop.lock().unwrap_or_else(|e| e.into_inner());
            let why = stop.get_or_insert(Stop::LimitExceeded(message));
            return Err(match why {
                Stop::Cancelled => GatewayError::Cancelled(run),
                Stop::LimitExceeded(message) => GatewayError::LimitExceeded {
                    run,
                    message: message.clone(),
                },
            });
        }
        model.turns += 1;
        Ok(ModelAdmitted {
            run,
            turn: model.turns,
            max_output_tokens: model_max_output.min(left - input_tokens),
            deadline: gate.deadline,
        })
    }

    /// Counts `tokens` a model call of `run` used; returns the run's total.
    /// Counted even when the run was stopped meanwhile: the tokens were
    /// spent.
    pub fn count_model_tokens(&self, run: &RunId, tokens: u64) -> Option<u64> {
        let gate = self.gates().get(run).cloned()?;
        let mut model = gate.model.lock().unwrap_or_else(|e| e.into_inner());
        model.used = model.used.saturating_add(tokens);
        Some(model.used)
    }

    /// The model tokens `run` used so far.
    pub fn model_tokens_used(&self, run: &RunId) -> Option<u64> {
        let gate = self.gates().get(run).cloned()?;
        let model = gate.model.lock().unwrap_or_else(|e| e.into_inner());
        Some(model.used)
    }

    /// The Model Gateway's part of one model call of the run `token` is
    /// for: admits it ([`ToolGateway::admit_model`]), sets the model and
    /// caps the output by what the run has left, sends it to `adapter`
    /// with retries inside the run's time, and counts the usage the
    /// upstream reported. Returns the response and the LLM turn to record.
    ///
    /// # Errors
    ///
    /// The gateway refused the call, or the provider failed after its
    /// retries.
    pub async fn call_model(
        &self,
        token: &RunToken,
        model: &ModelInfo,
        adapter: &dyn ModelAdapter,
        retry: &RetryPolicy,
        call: ModelCall,
    ) -> Result<(ModelResponse, LlmTurn), ModelCallError> {
        let admitted = self
            .admit_model(token, call.input_tokens, model.max_output_tokens)
            .inspect_err(|e| tracing::warn!("model call refused: {e}"))?;
        let mut request = call.request;
        request.model.clone_from(&model.name);
        if request.temperature.is_none() {
            request.temperature = model.temperature;
        }
        let cap = request
            .max_output_tokens
            .map_or(admitted.max_output_tokens, |m| {
                m.min(admitted.max_output_tokens)
            });
        request.max_output_tokens = Some(cap);
        let digest = hane_core::canonical_sha256(
            &serde_json::to_value(&request).expect("a request is always JSON"),
        );
        let started = Instant::now();
        let sent =
            hane_model::send_with_retry(adapter, &request, None, admitted.deadline, retry).await;
        let latency = started.elapsed();
        let response = sent.map_err(|error| {
            tracing::warn!(turn = admitted.turn, "model call failed: {error}");
            ModelCallError::Model {
                provider: model.provider.clone(),
                model: model.name.clone(),
                error,
            }
        })?;
        let usage = response.usage;
        self.count_model_tokens(&admitted.run, usage.total());
        let latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        tracing::info!(
            turn = admitted.turn,
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            latency_ms,
            "model call answered"
        );
        let turn = LlmTurn {
            turn: admitted.turn,
            provider: model.provider.clone(),
            model: model.name.clone(),
            request_digest: digest,
            response: JsonText::from_value(
                &serde_json::to_value(&response).unwrap_or(serde_json::Value::Null),
            ),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cached_tokens: usage.cached_tokens,
            latency_ms,
            max_output_tokens: cap,
            context: JsonText::from_value(&call.context),
        };
        Ok((response, turn))
    }
}
