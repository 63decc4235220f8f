//! [`RunError`]: why a run could not be started, read or cancelled.

use super::*;

/// Why a run could not be started, read or cancelled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// No release was activated yet.
    #[error("no release is active: activate one with `hane release activate DIR`")]
    NoRelease,
    /// The active release has no agent of this name.
    #[error("agent `{agent}` is not in the active release {release}{}", if .known.is_empty() { String::new() } else { format!("; its agents are {}", .known.join(", ")) })]
    UnknownAgent {
        /// The name asked for.
        agent: String,
        /// The release.
        release: u64,
        /// Its agents.
        known: Vec<String>,
    },
    /// The input does not match the agent's input schema.
    #[error("invalid input for agent `{agent}`: {message}")]
    InvalidInput {
        /// The agent.
        agent: String,
        /// JSON Pointer into the input, such as `/vehicle`; empty for the
        /// input itself.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The agent's driver cannot run in this host: a CLI driver whose
    /// CLI, container runtime or HTTP server is missing, or whose
    /// installed CLI is not the version its `cliProfile` pins.
    #[error("agent `{agent}` uses driver `{driver}`, which this host cannot run: {reason}")]
    DriverUnavailable {
        /// The agent.
        agent: String,
        /// Its driver.
        driver: String,
        /// What is missing or wrong.
        reason: String,
    },
    /// The agent's model cannot be reached from this process.
    #[error("agent `{agent}` cannot call its model: {message}")]
    ModelUnavailable {
        /// The agent.
        agent: String,
        /// Why, such as a credential missing from the environment.
        message: String,
    },
    /// A connection the agent uses names a credential this host does not
    /// hold.
    #[error(
        "agent `{agent}` uses connection `{connection}`, whose credential `{credential}` is not set on this host: set {var}"
    )]
    ConnectionUnavailable {
        /// The agent.
        agent: String,
        /// The connection.
        connection: String,
        /// The credential's name.
        credential: String,
        /// The environment variable that holds it.
        var: String,
    },
    /// The day's budget does not allow the run.
    #[error(transparent)]
    Budget(#[from] BudgetExceeded),
    /// No run has this id.
    #[error("run `{0}` not found")]
    NotFound(String),
    /// The run already ended.
    #[error("run `{run}` already ended as {status}")]
    Finished {
        /// The run.
        run: RunId,
        /// How it ended.
        status: RunStatus,
    },
    /// An attached run ended before its gate opened.
    #[error("run `{run}` ended as {status} before it could be attached: {error}")]
    EndedAtStart {
        /// The run.
        run: RunId,
        /// How it ended.
        status: RunStatus,
        /// Why.
        error: String,
    },
    /// The run has not ended, but no driver in this process runs it: another
    /// hane process started it, or the process that did stopped.
    #[error(
        "run `{run}` is {status} in the store but not driven by this process: another hane process runs it, or the one that did has stopped"
    )]
    NotHere {
        /// The run.
        run: RunId,
        /// Its stored status.
        status: RunStatus,
    },
    /// This process's lease on the store lapsed: another may be taking
    /// its runs over, so it starts none.
    #[error(
        "this process's lease on the store lapsed, so another may take what it runs for dead: it starts no run; restart it"
    )]
    LeaseLapsed,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The coordinator failed.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    /// A stored item could not be read.
    #[error("{0}")]
    Corrupt(String),
}

impl RunError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            RunError::UnknownAgent { .. } | RunError::NotFound(_) => ErrorKind::NotFound,
            RunError::InvalidInput { .. } | RunError::DriverUnavailable { .. } => {
                ErrorKind::Invalid
            }
            RunError::NoRelease
            | RunError::Finished { .. }
            | RunError::NotHere { .. }
            | RunError::EndedAtStart { .. }
            | RunError::ModelUnavailable { .. }
            | RunError::ConnectionUnavailable { .. } => ErrorKind::Conflict,
            RunError::Budget(_) => ErrorKind::LimitExceeded,
            RunError::Store(_)
            | RunError::Coordinator(_)
            | RunError::Corrupt(_)
            | RunError::LeaseLapsed => ErrorKind::Internal,
        }
    }
}
