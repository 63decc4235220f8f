//! [`Lifecycle`]: a state machine written once. Runs, outbound actions,
//! tasks for people, workflow cases and operations each declare the
//! states they are created in and every transition they may make; the
//! store refuses anything else ([`IllegalTransition`]) before it writes.
//!
//! # Examples
//!
//! ```
//! use hane_core::{Lifecycle, RunStatus};
//!
//! assert!(RunStatus::Queued.can_become(RunStatus::Running));
//! let refused = RunStatus::Succeeded.check_transition(RunStatus::Running).unwrap_err();
//! assert_eq!(refused.to_string(), "a run cannot go from `succeeded` to `running`");
//! ```

use std::fmt;

/// A lifecycle: its states, the ones a new item starts in, and its
/// transitions, each declared once. A pair not in
/// [`Lifecycle::TRANSITIONS`] is illegal, a pair of one state with itself
/// included: a state is rewritten in place only where the table says so.
pub trait Lifecycle: Copy + Eq + fmt::Debug + 'static {
    /// What goes through it, as errors name it, such as `run`.
    const KIND: &'static str;
    /// Every state.
    const ALL: &'static [Self];
    /// The states a new item is created in.
    const INITIAL: &'static [Self];
    /// Every legal transition, `(from, to)`.
    const TRANSITIONS: &'static [(Self, Self)];

    /// The state's name, as stored and shown.
    fn name(self) -> &'static str;

    /// The state named `name`, if one is.
    fn named(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|state| state.name() == name)
    }

    /// Whether an item in this state may move to `to`.
    fn can_become(self, to: Self) -> bool {
        Self::TRANSITIONS.contains(&(self, to))
    }

    /// Whether a new item may be created in this state.
    fn is_initial(self) -> bool {
        Self::INITIAL.contains(&self)
    }

    /// Whether nothing moves an item on from this state.
    fn is_terminal(self) -> bool {
        !Self::TRANSITIONS.iter().any(|(from, _)| *from == self)
    }

    /// Refuses the move to `to` unless the table has it.
    ///
    /// # Errors
    ///
    /// [`IllegalTransition`] naming the pair.
    fn check_transition(self, to: Self) -> Result<(), IllegalTransition> {
        if self.can_become(to) {
            Ok(())
        } else {
            Err(IllegalTransition {
                kind: Self::KIND,
                from: Some(self.name()),
                to: to.name(),
            })
        }
    }

    /// Refuses to create an item in this state unless it is initial.
    ///
    /// # Errors
    ///
    /// [`IllegalTransition`] with no `from`.
    fn check_initial(self) -> Result<(), IllegalTransition> {
        if self.is_initial() {
            Ok(())
        } else {
            Err(IllegalTransition {
                kind: Self::KIND,
                from: None,
                to: self.name(),
            })
        }
    }
}

/// A transition a lifecycle's table does not have: nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct IllegalTransition {
    /// The lifecycle's [`Lifecycle::KIND`], such as `run`.
    pub kind: &'static str,
    /// The state it is in; `None` for a new item.
    pub from: Option<&'static str>,
    /// The state asked for.
    pub to: &'static str,
}

impl IllegalTransition {
    fn describe(&self) -> String {
        let (kind, to) = (self.kind, self.to);
        let a = article(kind);
        match self.from {
            Some(from) => format!("{a} {kind} cannot go from `{from}` to `{to}`"),
            None => format!("{a} {kind} is not created `{to}`"),
        }
    }
}

/// `an` before a vowel, else `a`.
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// A state's name that is not one of its lifecycle's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} state `{name}`: expected one of {expected}")]
pub struct UnknownState {
    /// The lifecycle's [`Lifecycle::KIND`].
    pub kind: &'static str,
    /// The name given.
    pub name: String,
    /// Its states' names, such as `open, done`.
    pub expected: String,
}

/// Parses `name` as a state of `S`.
pub(crate) fn parse<S: Lifecycle>(name: &str) -> Result<S, UnknownState> {
    S::named(name).ok_or_else(|| UnknownState {
        kind: S::KIND,
        name: name.to_owned(),
        expected: S::ALL
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::{ActionState, OperationState, RunStatus, TaskState, workflow::CaseStatus};

    /// What every table must be: its states are named apart and read
    /// back, it lists each pair once, and every state is reached from an
    /// initial one.
    fn well_formed<S: Lifecycle + std::hash::Hash>() {
        let names: HashSet<&str> = S::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names.len(), S::ALL.len(), "{}: names repeat", S::KIND);
        for state in S::ALL {
            assert_eq!(S::named(state.name()), Some(*state));
        }
        assert_eq!(S::named("no such state"), None);
        assert!(!S::INITIAL.is_empty(), "{}: no initial state", S::KIND);
        let pairs: HashSet<&(S, S)> = S::TRANSITIONS.iter().collect();
        assert_eq!(
            pairs.len(),
            S::TRANSITIONS.len(),
            "{}: pairs repeat",
            S::KIND
        );
        let mut reached: HashSet<S> = S::INITIAL.iter().copied().collect();
        loop {
            let more: Vec<S> = S::TRANSITIONS
                .iter()
                .filter(|(from, to)| reached.contains(from) && !reached.contains(to))
                .map(|(_, to)| *to)
                .collect();
            if more.is_empty() {
                break;
            }
            reached.extend(more);
        }
        assert_eq!(
            reached.len(),
            S::ALL.len(),
            "{}: unreachable states",
            S::KIND
        );
    }

    /// Every pair but the table's is refused, naming it.
    fn refuses_the_rest<S: Lifecycle>() {
        for &from in S::ALL {
            for &to in S::ALL {
                let legal = S::TRANSITIONS.contains(&(from, to));
                match from.check_transition(to) {
                    Ok(()) => assert!(legal, "{} {from:?} -> {to:?}", S::KIND),
                    Err(e) => {
                        assert!(!legal, "{} {from:?} -> {to:?}", S::KIND);
                        assert_eq!(
                            e,
                            IllegalTransition {
                                kind: S::KIND,
                                from: Some(from.name()),
                                to: to.name(),
                            }
                        );
                    }
                }
            }
            assert_eq!(from.check_initial().is_ok(), S::INITIAL.contains(&from));
        }
    }

    #[test]
    fn runs_are_queued_then_run_once_to_one_end() {
        use RunStatus::*;
        well_formed::<RunStatus>();
        refuses_the_rest::<RunStatus>();
        assert_eq!(RunStatus::INITIAL, [Queued]);
        assert_eq!(
            RunStatus::TRANSITIONS,
            [
                (Queued, Running),
                (Queued, Failed),
                (Queued, Cancelled),
                (Running, Running),
                (Running, Succeeded),
                (Running, Failed),
                (Running, Cancelled),
                (Running, LimitExceeded),
            ]
        );
        for status in RunStatus::ALL {
            assert_eq!(status.is_final(), status.is_terminal(), "{status}");
        }
    }

    #[test]
    fn actions_are_decided_then_sent_once_and_unknown_ones_reconciled() {
        use ActionState::*;
        well_formed::<ActionState>();
        refuses_the_rest::<ActionState>();
        assert_eq!(
            ActionState::INITIAL,
            [Pending, Approved, Rejected, Shadowed]
        );
        assert_eq!(
            ActionState::TRANSITIONS,
            [
                (Pending, Pending),
                (Pending, Approved),
                (Pending, Rejected),
                (Approved, Executing),
                (Approved, Failed),
                (Executing, Delivered),
                (Executing, Failed),
                (Executing, Unknown),
                (Unknown, Delivered),
                (Unknown, Failed),
                (Unknown, Unknown),
            ]
        );
        // What is sent is sent once: only a pending action is approved,
        // and only an approved one is claimed.
        for (from, to) in ActionState::TRANSITIONS {
            match to {
                Approved => assert_eq!(*from, Pending),
                Executing => assert_eq!(*from, Approved),
                _ => {}
            }
        }
        for state in [Delivered, Failed, Rejected, Shadowed] {
            assert!(state.is_terminal(), "{state}");
        }
    }

    #[test]
    fn tasks_are_opened_and_done() {
        use TaskState::*;
        well_formed::<TaskState>();
        refuses_the_rest::<TaskState>();
        assert_eq!(TaskState::INITIAL, [Open]);
        assert_eq!(TaskState::TRANSITIONS, [(Open, Done)]);
        assert_eq!("done".parse::<TaskState>(), Ok(Done));
        assert_eq!(
            "closed".parse::<TaskState>().unwrap_err().to_string(),
            "unknown task state `closed`: expected one of open, done"
        );
    }

    #[test]
    fn workflow_cases_run_wait_for_people_and_end() {
        use CaseStatus::*;
        well_formed::<CaseStatus>();
        refuses_the_rest::<CaseStatus>();
        assert_eq!(CaseStatus::INITIAL, [Running]);
        assert_eq!(
            CaseStatus::TRANSITIONS,
            [
                (Running, Running),
                (Running, Waiting),
                (Running, Succeeded),
                (Running, Failed),
                (Waiting, Running),
            ]
        );
        for status in CaseStatus::ALL {
            assert_eq!(status.is_final(), status.is_terminal(), "{status}");
        }
        assert_eq!("waiting".parse::<CaseStatus>(), Ok(Waiting));
        assert!("done".parse::<CaseStatus>().is_err());
    }

    #[test]
    fn operations_start_and_end_once_but_reads_run_again() {
        use OperationState::*;
        well_formed::<OperationState>();
        refuses_the_rest::<OperationState>();
        assert_eq!(OperationState::INITIAL, [Pending]);
        assert_eq!(
            OperationState::TRANSITIONS,
            [
                (Pending, Running),
                (Pending, Failed),
                (Running, Running),
                (Running, Succeeded),
                (Running, Failed),
                (Running, Unknown),
            ]
        );
        for state in OperationState::ALL {
            assert_eq!(state.is_final(), state.is_terminal(), "{state}");
        }
    }

    #[test]
    fn a_refusal_names_the_pair() {
        let refused = ActionState::Delivered
            .check_transition(ActionState::Executing)
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "an action cannot go from `delivered` to `executing`"
        );
        let created = RunStatus::Running.check_initial().unwrap_err();
        assert_eq!(created.to_string(), "a run is not created `running`");
    }
}
