//! The gateways: every tool call and every model call of every run passes
//! here first, with the run's [`RunToken`]. The Tool Gateway admits tool
//! calls ([`ToolGateway::admit`]); the Model Gateway ([`model`]) admits
//! model calls against the same gate, so a cancel or a limit stops both.

pub mod model;
mod token;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hane_core::RunId;

pub use token::{RunToken, RunTokenKey, TokenError};

use crate::release::LoadedAgent;
use crate::tools::Tool;

/// How long a run token stays valid beyond the run's `maxSeconds`.
pub const TOKEN_GRACE: Duration = Duration::from_secs(30);

/// Why the gateway stopped a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Someone cancelled it.
    Cancelled,
    /// It went over a limit; the message says which.
    LimitExceeded(String),
    /// The run cannot go on and ends `failed`; the message says why: this
    /// process's lease on the store lapsed (another process may be taking
    /// the run over), or a resumed run took another path than it had.
    Failed(String),
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The token is malformed, forged, altered or expired.
    #[error("{0}")]
    Token(#[from] TokenError),
    /// The token's run is not running (it ended, or never started here).
    #[error("run `{0}` is not running")]
    NotRunning(RunId),
    /// The run was cancelled.
    #[error("run `{0}` was cancelled")]
    Cancelled(RunId),
    /// The run went over a limit; it ends `limit_exceeded`.
    #[error("run `{run}` exceeded a limit: {message}")]
    LimitExceeded {
        /// The run.
        run: RunId,
        /// Which limit.
        message: String,
    },
    /// The tool is not in the agent's `tools`.
    #[error("tool `{tool}` is not allowed for agent `{agent}`: it may call {allowed}")]
    ToolNotAllowed {
        /// The tool asked for.
        tool: String,
        /// The agent.
        agent: String,
        /// What it may call, for the driver to correct itself.
        allowed: String,
    },
}

struct Gate {
    agent: Arc<LoadedAgent>,
    deadline: Instant,
    max_calls: u32,
    calls: AtomicU32,
    stop: Mutex<Option<Stop>>,
    /// Model tokens used and reserved so far, model calls admitted and in
    /// flight.
    model: Mutex<model::ModelUse>,
    /// Turns `true` when the run is stopped or its end is being recorded:
    /// model calls in flight end at once.
    ending: tokio::sync::watch::Sender<bool>,
    /// Changes when a model call in flight ends.
    settled: tokio::sync::watch::Sender<()>,
}

/// A call the gateway let through.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// The run it belongs to.
    pub run: RunId,
    /// The tool, as the agent's release defines it.
    pub tool: Tool,
    /// Which call of the run this is, from 1.
    pub number: u32,
}

impl GatewayError {
    /// The refusal of a call of `run`, stopped for `stop`.
    pub fn from_stop(run: RunId, stop: Stop) -> Self {
        match stop {
            Stop::Cancelled => GatewayError::Cancelled(run),
            Stop::LimitExceeded(message) => GatewayError::LimitExceeded { run, message },
            Stop::Failed(_) => GatewayError::NotRunning(run),
        }
    }
}

/// Checks every call: a valid [`RunToken`] for a running run, a tool in
/// the agent's `tools`, the run not stopped, its limits not exceeded.
/// Only what the agent's manifest in the active release says counts;
/// nothing a tool returned or a model wrote is consulted.
pub struct ToolGateway {
    key: RunTokenKey,
    runs: Mutex<HashMap<RunId, Arc<Gate>>>,
}

impl std::fmt::Debug for ToolGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolGateway").finish_non_exhaustive()
    }
}

impl ToolGateway {
    /// A gateway signing tokens with `key`.
    pub fn new(key: RunTokenKey) -> Self {
        Self {
            key,
            runs: Mutex::new(HashMap::new()),
        }
    }

    fn gates(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Arc<Gate>>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens the gate for `run` of `agent` and returns its token, valid
    /// for the run's `maxSeconds` and [`TOKEN_GRACE`].
    pub fn open(&self, run: &RunId, agent: Arc<LoadedAgent>) -> RunToken {
        let limits = &agent.manifest.spec.limits;
        let max_seconds = Duration::from_secs(limits.max_seconds);
        let gate = Gate {
            deadline: Instant::now() + max_seconds,
            max_calls: limits.max_tool_calls,
            calls: AtomicU32::new(0),
            stop: Mutex::new(None),
            model: Mutex::new(model::ModelUse::default()),
            ending: tokio::sync::watch::Sender::new(false),
            settled: tokio::sync::watch::Sender::new(()),
            agent,
        };
        self.gates().insert(run.clone(), Arc::new(gate));
        self.key.issue(run, max_seconds + TOKEN_GRACE)
    }

    /// The open gate of the run `token` is for, when it is not stopped.
    fn open_gate(&self, token: &RunToken) -> Result<(RunId, Arc<Gate>), GatewayError> {
        let run = self.key.verify(token)?;
        let gate = self
            .gates()
            .get(&run)
            .cloned()
            .ok_or_else(|| GatewayError::NotRunning(run.clone()))?;
        let stop = gate.stop.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match stop {
            Some(stop) => Err(GatewayError::from_stop(run, stop)),
            None => Ok((run, gate)),
        }
    }

    /// Checks a call of `tool` with `token`.
    ///
    /// # Errors
    ///
    /// The token is bad, the run is not running or was stopped, the tool
    /// is not allowed, or the call would exceed a limit — which stops the
    /// run as `limit_exceeded`.
    pub fn admit(&self, token: &RunToken, tool: &str) -> Result<Admitted, GatewayError> {
        let run = self.key.verify(token)?;
        let gate = self
            .gates()
            .get(&run)
            .cloned()
            .ok_or_else(|| GatewayError::NotRunning(run.clone()))?;
        let mut stop = gate.stop.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stopped) = &*stop {
            return Err(GatewayError::from_stop(run, stopped.clone()));
        }
        let Some(found) = gate.agent.tools.get(tool) else {
            return Err(GatewayError::ToolNotAllowed {
                tool: tool.to_owned(),
                agent: gate.agent.manifest.metadata.name.clone(),
                allowed: gate
                    .agent
                    .tools
                    .keys()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let exceeded = if Instant::now() >= gate.deadline {
            Some(format!(
                "maxSeconds: the run is past its {} s",
                gate.agent.manifest.spec.limits.max_seconds
            ))
        } else {
            let made = gate.calls.load(Ordering::Relaxed);
            (made >= gate.max_calls).then(|| {
                format!(
                    "maxToolCalls: call {} of at most {}",
                    made + 1,
                    gate.max_calls
                )
            })
        };
        if let Some(message) = exceeded {
            *stop = Some(Stop::LimitExceeded(message.clone()));
            return Err(GatewayError::LimitExceeded { run, message });
        }
        let number = gate.calls.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(Admitted {
            run,
            tool: found.clone(),
            number,
        })
    }

    /// Stops `run`: its next call is refused, whatever its token says. The
    /// first stop wins. Returns false when the run is not open here.
    pub fn stop(&self, run: &RunId, why: Stop) -> bool {
        let Some(gate) = self.gates().get(run).cloned() else {
            return false;
        };
        let mut stop = gate.stop.lock().unwrap_or_else(|e| e.into_inner());
        stop.get_or_insert(why);
        drop(stop);
        gate.ending.send_replace(true);
        true
    }

    /// Waits until `run` is stopped (cancelled or over a limit), and says
    /// why; at once when it already is, or when it has no gate (it ended).
    pub async fn wait_stopped(&self, run: &RunId) -> Option<Stop> {
        let gate = self.gates().get(run).cloned()?;
        let mut ending = gate.ending.subscribe();
        let _ = ending.wait_for(|ending| *ending).await;
        gate.stop.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Why `run` was stopped, if it was.
    pub fn stopped(&self, run: &RunId) -> Option<Stop> {
        let gate = self.gates().get(run).cloned()?;
        let stop = gate.stop.lock().unwrap_or_else(|e| e.into_inner());
        stop.clone()
    }

    /// Closes the gate of an ended run; its token admits nothing more.
    pub fn close(&self, run: &RunId) {
        self.gates().remove(run);
    }

    /// The token key, for checking tokens elsewhere (the MCP server).
    pub fn key(&self) -> &RunTokenKey {
        &self.key
    }
}
