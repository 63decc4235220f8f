//! [`ErrorKind`]: what kind of failure an error is, across crates.

/// What kind of failure an error is, for callers that treat every error of
/// a kind alike, whichever part of hane raised it: the HTTP API maps a kind
/// to its status once, the CLI to its exit code once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Something named does not exist: an agent, a run, an action.
    NotFound,
    /// The request is wrong in itself: an input its schema refuses, a
    /// driver this build cannot run, a tool that is not outbound.
    Invalid,
    /// The state does not allow it now: no release is active, the run
    /// ended, the action was decided already or its digest is stale.
    Conflict,
    /// The caller may not do this.
    Forbidden,
    /// A limit or the day's budget does not allow it.
    LimitExceeded,
    /// A service the host called failed: the model of a reception or a
    /// conversation's message. Not the caller's fault, nor the host's.
    Upstream,
    /// The host failed: the store, or an item it could not read.
    Internal,
}

impl ErrorKind {
    /// The kind as written in JSON and logs, such as `not_found`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::LimitExceeded => "limit_exceeded",
            ErrorKind::Upstream => "upstream",
            ErrorKind::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
