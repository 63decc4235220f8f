//! The Model Gateway's admission and accounting: which model call of a run
//! may go out, with how many output tokens, and what it used.
//!
//! A run's model calls share its gate with its tool calls: a cancelled run's
//! next model call is refused at once, and so is one past `maxSeconds`.
//! Each call is admitted only when what the run has left of
//! `maxModelTokens` covers the request's estimated input and at least one
//! output token; its output cap is then lowered to what is left. After the
//! call, the usage the upstream reported is counted; a run with nothing
//! left is refused its next model call and ends `limit_exceeded`. Calls in
//! flight at once each hold their input and output cap until they end, so
//! concurrent calls of one run cannot spend past its limit together. A run's
//! `maxModelTokens` was reserved from the day's budget when it started, so
//! runs that were admitted cannot spend past the day's limit together.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hane_core::{JsonText, LlmTurn, RunId};
use hane_model::{EventSink, ModelAdapter, ModelError, ModelResponse, RetryPolicy, StreamEvent};

use crate::drivers::{ModelCall, ModelInfo};

use super::{Gate, GatewayError, RunToken, Stop, TokenError, ToolGateway};

/// What a run used of its model budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ModelUse {
    /// Tokens counted, input and output.
    pub(crate) used: u64,
    /// Tokens held for the calls in flight: each call's input and output
    /// cap, until it ends and what it used is counted instead.
    pub(crate) reserved: u64,
    /// Calls admitted.
    pub(crate) turns: u32,
    /// Calls admitted that have not ended.
    pub(crate) in_flight: u32,
}

/// What a provider's count of a request's input may exceed the estimate
/// by: its own tokenizer and framing (a chat template's markers, a tool
/// section) differ from hane's count, by up to about a quarter with the
/// `estimate` tokenizer. A call is admitted, and holds, its estimate plus
/// this, so that output capped by the rest cannot take the run past its
/// limit.
pub fn input_slack(input_tokens: u64) -> u64 {
    input_tokens / 4 + 16
}

/// A model call the gateway let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelAdmitted {
    /// The run.
    pub run: RunId,
    /// Which call of the run this is, from 1.
    pub turn: u32,
    /// The output cap the call gets: the model's cap, or what the run has
    /// left after the request's input (with [`input_slack`]) if less.
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
        /// What went wrong (boxed: a recording mismatch is large, and
        /// most results are not errors).
        error: Box<ModelError>,
    },
    /// The run's model is not usable in this process; the message says
    /// why (a credential missing from the environment, a recording that
    /// does not read).
    #[error("{0}")]
    Unavailable(String),
    /// What the run has left of `maxModelTokens` is held by its model
    /// calls in flight; the call may succeed once they end.
    #[error("{0}")]
    TokensHeld(String),
}

impl From<TokenError> for ModelCallError {
    fn from(e: TokenError) -> Self {
        ModelCallError::Gateway(GatewayError::Token(e))
    }
}

impl ToolGateway {
    /// Admits a model call of the run `token` is for, whose input is
    /// about `input_tokens` and whose model produces at most
    /// `model_max_output` tokens, and holds its input and output cap from
    /// what the run has left until [`InFlight`] ends.
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
    ) -> Result<(ModelAdmitted, InFlight), GatewayError> {
        let (run, gate) = self.open_gate(token)?;
        let limits = &gate.agent.manifest.spec.limits;
        let mut model = gate.model.lock().unwrap_or_else(|e| e.into_inner());
        let left = limits
            .max_model_tokens
            .saturating_sub(model.used)
            .saturating_sub(model.reserved);
        let exceeded = if Instant::now() >= gate.deadline {
            Some(format!(
                "maxSeconds: the run is past its {} s",
                limits.max_seconds
            ))
        } else if left <= input_tokens + input_slack(input_tokens) {
            // With calls in flight, what they hold may come back: refuse
            // this call without stopping the run.
            if model.in_flight > 0 {
                return Err(GatewayError::LimitExceeded {
                    run,
                    message: format!(
                        "maxModelTokens: {} of {} used and {} held by {} model calls in flight; the next request needs about {input_tokens} input tokens and {left} are left",
                        model.used, limits.max_model_tokens, model.reserved, model.in_flight
                    ),
                });
            }
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
            let why = stop.get_or_insert(Stop::LimitExceeded(message)).clone();
            drop(stop);
            gate.ending.send_replace(true);
            return Err(GatewayError::from_stop(run, why));
        }
        let input = input_tokens + input_slack(input_tokens);
        let cap = model_max_output.min(left - input);
        let held = input + cap;
        model.turns += 1;
        model.in_flight += 1;
        model.reserved += held;
        let admitted = ModelAdmitted {
            run,
            turn: model.turns,
            max_output_tokens: cap,
            deadline: gate.deadline,
        };
        drop(model);
        Ok((
            admitted,
            InFlight {
                gate,
                held,
                input_tokens,
                streamed: AtomicU64::new(0),
                ended: false,
            },
        ))
    }

    /// Counts a model call of `run` answered from its session, not sent
    /// (a resumed run's turn it had before): its turn and `tokens`, as if
    /// it had been made now; returns the run's total.
    pub fn count_replayed_model_call(&self, run: &RunId, tokens: u64) -> Option<u64> {
        let gate = self.gates().get(run).cloned()?;
        let mut model = gate.model.lock().unwrap_or_else(|e| e.into_inner());
        model.turns += 1;
        model.used = model.used.saturating_add(tokens);
        Some(model.used)
    }

    /// Counts `tokens` a model call of `run` used outside a hold; returns
    /// the run's total. Counted even when the run was stopped meanwhile:
    /// the tokens were spent.
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

    /// Ends the model calls of `run` still in flight (each is cancelled
    /// upstream and what it used so far is counted) and waits until they
    /// have; returns the run's model tokens used. For when the run's end
    /// is recorded: nothing a run spent is left uncounted.
    pub async fn end_model_calls(&self, run: &RunId) -> Option<u64> {
        let gate = self.gates().get(run).cloned()?;
        gate.ending.send_replace(true);
        let mut settled = gate.settled.subscribe();
        loop {
            {
                let model = gate.model.lock().unwrap_or_else(|e| e.into_inner());
                if model.in_flight == 0 {
                    return Some(model.used);
                }
            }
            if settled.changed().await.is_err() {
                return None;
            }
        }
    }

    /// The Model Gateway's part of one model call of the run `token` is
    /// for: admits it, sets the model and caps the output by what the run
    /// has left, sends it to `adapter` with retries inside the run's time
    /// (passing each piece of the answer to `events` as it arrives), and
    /// counts the usage the upstream reported. Returns the response and
    /// the LLM turn to record.
    ///
    /// The call ends at once, cancelled upstream, when the run is stopped
    /// or its end is recorded. A call that ends without an answer —
    /// failed after it streamed, ended so, or dropped by its caller —
    /// still counts its input and the output streamed so far.
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
        events: Option<EventSink<'_>>,
    ) -> Result<(ModelResponse, LlmTurn), ModelCallError> {
        let (admitted, mut flight) = self
            .admit_model(token, call.input_tokens, model.max_output_tokens)
            .map_err(|e| {
                tracing::warn!("model call refused: {e}");
                match e {
                    GatewayError::LimitExceeded { message, .. }
                        if message.contains("model calls in flight") =>
                    {
                        ModelCallError::TokensHeld(message)
                    }
                    e => ModelCallError::Gateway(e),
                }
            })?;
        let (request, cap, digest) = sent_request(call.request, model, admitted.max_output_tokens);
        let tokenizer = hane_context::Tokenizer::for_model(&model.name);
        let counting = |event: StreamEvent| {
            let text = match &event {
                StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
                StreamEvent::ToolCallDelta { json, .. } => Some(json.as_str()),
                _ => None,
            };
            if let Some(text) = text {
                flight
                    .streamed
                    .fetch_add(tokenizer.count(text), Ordering::Relaxed);
            }
            if let Some(events) = events {
                events(event);
            }
        };
        let sink: Option<EventSink<'_>> = events.map(|_| &counting as EventSink<'_>);
        let mut ending = flight.gate.ending.subscribe();
        let started = Instant::now();
        let sent = tokio::select! {
            sent = hane_model::send_with_retry(adapter, &request, sink, admitted.deadline, retry) => sent,
            _ = ending.wait_for(|ending| *ending) => Err(ModelError::Cancelled),
        };
        let latency = started.elapsed();
        let response = match sent {
            Ok(response) => response,
            Err(error) => {
                tracing::warn!(turn = admitted.turn, "model call failed: {error}");
                // An upstream that refused the request at once used
                // nothing; one that answered in part, or was cut off, used
                // its input and what it streamed.
                let streamed = flight.streamed.load(Ordering::Relaxed);
                let partial = streamed > 0 || matches!(error, ModelError::Cancelled);
                flight.end(if partial {
                    flight.input_tokens + streamed
                } else {
                    0
                });
                return Err(ModelCallError::Model {
                    provider: model.provider.clone(),
                    model: model.name.clone(),
                    error: Box::new(error),
                });
            }
        };
        let usage = response.usage;
        flight.end(usage.total());
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

/// A model call between its admission and its end: what it holds of the
/// run's `maxModelTokens`. Dropped without [`InFlight::end`] (its caller
/// went away), it counts the call's input and what streamed so far.
pub struct InFlight {
    gate: Arc<Gate>,
    /// Tokens held: the input and the output cap.
    held: u64,
    input_tokens: u64,
    /// Output tokens streamed so far, as counted here.
    streamed: AtomicU64,
    ended: bool,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("held", &self.held)
            .field("input_tokens", &self.input_tokens)
            .field("streamed", &self.streamed)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl InFlight {
    /// Ends the call, counting `used` tokens instead of what it held.
    pub fn end(&mut self, used: u64) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        {
            let mut model = self.gate.model.lock().unwrap_or_else(|e| e.into_inner());
            model.reserved = model.reserved.saturating_sub(self.held);
            model.used = model.used.saturating_add(used);
            model.in_flight = model.in_flight.saturating_sub(1);
        }
        self.gate.settled.send_replace(());
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.ended {
            let used = self.input_tokens + self.streamed.load(Ordering::Relaxed);
            tracing::warn!(
                tokens = used,
                "a model call ended before its answer (its caller went away); counted its input and what streamed"
            );
            self.end(used);
        }
    }
}

/// `request` as the gateway sends it to `model` with its output capped at
/// `cap` (or its own cap, if lower): the request, its cap, and the SHA-256
/// of its canonical JSON that its LLM turn records.
pub(crate) fn sent_request(
    mut request: hane_model::ModelRequest,
    model: &ModelInfo,
    cap: u64,
) -> (hane_model::ModelRequest, u64, String) {
    request.model.clone_from(&model.name);
    if request.temperature.is_none() {
        request.temperature = model.temperature;
    }
    let cap = request.max_output_tokens.map_or(cap, |m| m.min(cap));
    request.max_output_tokens = Some(cap);
    let digest = hane_core::approval::canonical_sha256(
        &serde_json::to_value(&request).expect("a request is always JSON"),
    );
    (request, cap, digest)
}
