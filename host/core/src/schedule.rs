//! What became of a schedule's ticks, as the store keeps them. The
//! schedules themselves are `hane_manifest::schedule::ScheduleManifest`s.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What became of one tick of a schedule, as the store keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TickOutcome {
    /// A process claimed it and has not said more: it is starting the run,
    /// or it stopped before it could. A claimed tick is never claimed again.
    Claimed,
    /// Its run started.
    Started,
    /// Its run was refused (the day's budget, an agent no longer in the
    /// release, an input it no longer takes); not retried.
    Refused,
    /// It passed while no process ran the schedule and was not run.
    Skipped,
}

impl TickOutcome {
    /// Every outcome, in order.
    pub const ALL: [TickOutcome; 4] = [
        TickOutcome::Claimed,
        TickOutcome::Started,
        TickOutcome::Refused,
        TickOutcome::Skipped,
    ];

    /// The outcome as stored and printed, such as `started`.
    pub fn as_str(self) -> &'static str {
        match self {
            TickOutcome::Claimed => "claimed",
            TickOutcome::Started => "started",
            TickOutcome::Refused => "refused",
            TickOutcome::Skipped => "skipped",
        }
    }
}

impl fmt::Display for TickOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tick outcome that is not one of [`TickOutcome::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tick outcome `{0}`: expected one of claimed, started, refused, skipped")]
pub struct UnknownTickOutcome(pub String);

impl FromStr for TickOutcome {
    type Err = UnknownTickOutcome;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TickOutcome::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == s)
            .ok_or_else(|| UnknownTickOutcome(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_outcomes_read_back_from_their_names() {
        for outcome in TickOutcome::ALL {
            assert_eq!(outcome.as_str().parse::<TickOutcome>(), Ok(outcome));
        }
        assert!("lost".parse::<TickOutcome>().is_err());
    }
}
