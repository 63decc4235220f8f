//! [`Input`]: what a session is asked to act on.

use serde::{Deserialize, Serialize};

use crate::{InputId, JsonText, OperationId};

/// An event delivered to a session. Its id is the caller's and stays the
/// same across redeliveries; a session accepts each id once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    /// The caller's id for this input.
    pub id: InputId,
    /// What the input says.
    pub kind: InputKind,
}

/// The three kinds of input a session receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum InputKind {
    /// From outside: a caller's request, a message, a webhook.
    External {
        /// The request as JSON.
        payload: JsonText,
    },
    /// From the host: a command about the session itself.
    Control {
        /// What to do.
        command: Control,
    },
    /// From recovery: the host found work interrupted by a crash.
    Crash {
        /// The operation that was interrupted, when there was one.
        operation: Option<OperationId>,
        /// What recovery found.
        reason: String,
    },
}

/// Commands a host sends a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// Stop the session's work: cancel running operations and accept no
    /// more tool calls.
    Cancel {
        /// Why, for the record.
        reason: String,
    },
}

impl InputKind {
    /// `external`, `control` or `crash`.
    pub fn name(&self) -> &'static str {
        match self {
            InputKind::External { .. } => "external",
            InputKind::Control { .. } => "control",
            InputKind::Crash { .. } => "crash",
        }
    }
}
