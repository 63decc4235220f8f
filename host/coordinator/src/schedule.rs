//! Schedules: the runs the active release's `Schedule`s start, once per
//! tick however many processes serve the store.
//!
//! A [`Scheduler`] (one per `hane serve`) wakes at the next tick of any
//! schedule, or every [`MAX_SLEEP`] to notice a new activation. At each
//! pass it works out, for each schedule, which ticks are due
//! ([`due`], pure) and claims each in the store
//! ([`TickTable::claim`](hane_store::registry::TickTable::claim)): the row's
//! key is the schedule and the tick's own time, so of all the processes
//! that see a tick due only the one whose claim took acts on it. The
//! winner starts the run ([`AgentRuntime::start`], which charges the day's
//! budget like any run) and records `started` with the run, or `refused`
//! with why; a refused tick is not retried. A process that stops between
//! its claim and its start leaves the tick `claimed`: a tick starts at
//! most once.
//!
//! Ticks after the last one handled that are not due now are *missed*:
//! they passed while no process ran the schedule. A tick is current while
//! it is at most [`GRACE`] old. With `missed: skip` only a current tick
//! runs; with `missed: runOnce` one run starts for the newest tick,
//! current or not. Ticks passed over without a run are not claimed one by
//! one: the newest of them is recorded as `skipped`, its error saying how
//! many passed from when. A schedule no process has handled a tick of
//! starts from when this process first saw it: nothing before is run or
//! recorded.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use hane_core::{now_ms, schedule::TickOutcome};
use hane_manifest::{Cadence, Missed, ScheduleManifest, ScheduleTarget};
use hane_store::TickEnd;
use tracing::{info, warn};

use crate::runtime::{AgentRuntime, RunError, StartRun};
use crate::{Services, Workflows};

/// How old a tick may be and still be current: run under `missed: skip`.
pub const GRACE: Duration = Duration::from_secs(60);

/// The longest a scheduler sleeps between passes: how long a newly
/// activated release may wait before its schedules are seen.
pub const MAX_SLEEP: Duration = Duration::from_secs(5);

/// The most ticks passed over that one `skipped` record counts exactly.
pub const MAX_COUNTED: usize = 1000;

/// What to do with one tick of a schedule, decided by [`due`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TickAction {
    /// Claim the tick and start its run.
    Start {
        /// The tick, in milliseconds since the Unix epoch.
        tick: u64,
    },
    /// Claim the tick and record it `skipped`: it and the `count - 1`
    /// unhandled ticks before it, from `first`, passed without a run.
    Skip {
        /// The newest tick passed over.
        tick: u64,
        /// The oldest tick passed over.
        first: u64,
        /// How many passed over, this one included; at most
        /// [`MAX_COUNTED`] + 1.
        count: usize,
        /// Whether more than [`MAX_COUNTED`] passed over, so that `count`
        /// is a lower bound.
        more: bool,
    },
}

/// What one pass at `now` does for a schedule whose ticks fall as
/// `cadence` says: `last_tick` is the newest tick any process handled
/// (`None` when none ever did), `since` when this process first saw the
/// schedule, `missed` what the schedule says about missed ticks. Every
/// time is in milliseconds since the Unix epoch.
///
/// The ticks due are those after `last_tick` (or at or after `since`)
/// and at or before `now`. Nothing is due: no action. Else the newest
/// starts when it is current (at most [`GRACE`] old) or when `missed` is
/// `runOnce`, and the unhandled ticks before it are passed over; with
/// `skip`, a newest tick that is not current is passed over too. Those
/// passed over are one [`TickAction::Skip`], for the newest of them,
/// first.
pub fn due(
    cadence: &Cadence,
    missed: Missed,
    last_tick: Option<u64>,
    since: u64,
    now: u64,
) -> Vec<TickAction> {
    let Some(latest) = cadence.latest_at_or_before(now) else {
        return Vec::new();
    };
    // Ticks after `after` are not handled yet.
    let after = last_tick.unwrap_or_else(|| since.saturating_sub(1));
    if latest <= after {
        return Vec::new();
    }
    let current = now - latest <= GRACE.as_millis() as u64;
    let passed_over = |newest: u64| {
        let earlier = cadence.ticks_between(after, newest, MAX_COUNTED + 1);
        let more = earlier.len() > MAX_COUNTED;
        TickAction::Skip {
            tick: newest,
            first: earlier.first().copied().unwrap_or(newest),
            count: earlier.len().min(MAX_COUNTED) + 1,
            more,
        }
    };
    if !current && missed == Missed::Skip {
        return vec![passed_over(latest)];
    }
    let mut actions = Vec::new();
    if let Some(before) = cadence
        .latest_at_or_before(latest - 1)
        .filter(|&before| before > after && before < latest)
    {
        actions.push(passed_over(before));
    }
    actions.push(TickAction::Start { tick: latest });
    actions
}

/// Starts the runs of the active release's schedules from one process:
/// see the [module](self).
#[derive(Debug)]
pub struct Scheduler {
    runtime: AgentRuntime,
    workflows: Workflows,
    id: String,
    /// When this process first saw each schedule of the active release.
    since: BTreeMap<String, u64>,
}

impl Scheduler {
    /// A scheduler for the store of `services`' runtime; its claims carry
    /// the runtime's lease holder as their id. It starts runs through the
    /// runtime and workflow cases through the workflows service.
    pub fn new(services: &Services) -> Self {
        let runtime = services.runs.clone();
        let id = runtime.lease().holder().to_owned();
        Self {
            workflows: services.workflows.clone(),
            runtime,
            id,
            since: BTreeMap::new(),
        }
    }

    /// The id this scheduler's claims carry (`claimed_by`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Passes until `stop` completes: one now, then one at each schedule's
    /// next tick, at least every [`MAX_SLEEP`]. A pass in progress when
    /// `stop` completes ends first, so no tick is left claimed by a
    /// stopped scheduler that was still running.
    pub async fn run(mut self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        info!(scheduler = %self.id, "scheduler started");
        loop {
            let next = self.pass(now_ms()).await;
            let now = now_ms();
            let max = now + MAX_SLEEP.as_millis() as u64;
            let wake = next.map_or(max, |next| next.min(max));
            let sleep = tokio::time::sleep(Duration::from_millis(wake.saturating_sub(now)));
            tokio::select! {
                () = &mut stop => break,
                () = sleep => {}
            }
        }
        info!(scheduler = %self.id, "scheduler stopped");
    }

    /// Handles what is due at `now` for every schedule of the active
    /// release, and returns when the next tick of any of them falls
    /// (`None` without a release or a schedule). Nothing here fails: what
    /// goes wrong is logged, and the next pass tries again.
    pub async fn pass(&mut self, now: u64) -> Option<u64> {
        let release = match self.runtime.release().await {
            Ok(release) => release,
            Err(RunError::NoRelease) => {
                self.since.clear();
                return None;
            }
            Err(e) => {
                warn!(error = %e, "schedules: the active release could not be read");
                return None;
            }
        };
        self.since
            .retain(|name, _| release.schedules.contains_key(name));
        let mut next: Option<u64> = None;
        for (name, schedule) in &release.schedules {
            let cadence = match schedule.spec.cadence() {
                Ok(cadence) => cadence,
                Err(e) => {
                    // Checked at activation; a stored release is read with
                    // the same parser, so this is a newer build's release.
                    warn!(schedule = %name, error = %e, "schedule skipped");
                    continue;
                }
            };
            let since = *self.since.entry(name.clone()).or_insert(now);
            match self.runtime.registry().ticks().last(name).await {
                Ok(last_tick) => {
                    for action in due(&cadence, schedule.spec.missed, last_tick, since, now) {
                        self.act(name, schedule, &cadence, action).await;
                    }
                }
                Err(e) => warn!(schedule = %name, error = %e, "schedule's last tick not read"),
            }
            if let Some(tick) = cadence.next_after(now) {
                next = Some(next.map_or(tick, |n| n.min(tick)));
            }
        }
        next
    }

    /// Claims the tick of `action` and, when the claim took, does it.
    async fn act(
        &self,
        name: &str,
        schedule: &ScheduleManifest,
        cadence: &Cadence,
        action: TickAction,
    ) {
        let registry = self.runtime.registry();
        let tick = match action {
            TickAction::Start { tick } | TickAction::Skip { tick, .. } => tick,
        };
        match registry.ticks().claim(name, tick, &self.id).await {
            Ok(true) => {}
            // Another process has it.
            Ok(false) => return,
            Err(e) => {
                warn!(schedule = %name, tick, error = %e, "tick not claimed");
                return;
            }
        }
        let end = match action {
            TickAction::Start { .. } => match self.start(schedule).await {
                Ok(started) => {
                    info!(schedule = %name, tick, run = ?started.run, case = ?started.workflow_case, "schedule started");
                    started
                }
                Err(error) => {
                    warn!(schedule = %name, tick, %error, "schedule's start refused");
                    TickEnd {
                        error: Some(error.to_string()),
                        ..TickEnd::new(TickOutcome::Refused)
                    }
                }
            },
            TickAction::Skip {
                first, count, more, ..
            } => {
                let error = format!(
                    "{}{count} tick{} from {} to {} passed while no process ran the schedule; missed: {}",
                    if more { "more than " } else { "" },
                    if count == 1 && !more { "" } else { "s" },
                    cadence.wall_clock(first),
                    cadence.wall_clock(tick),
                    schedule.spec.missed,
                );
                warn!(schedule = %name, tick, %error, "ticks skipped");
                TickEnd {
                    error: Some(error),
                    ..TickEnd::new(TickOutcome::Skipped)
                }
            }
        };
        if let Err(e) = registry.ticks().finish(name, tick, end).await {
            warn!(schedule = %name, tick, error = %e, "tick's outcome not recorded");
        }
    }

    /// Starts what `schedule` targets: a run of its agent, or a case of
    /// its workflow (in the active release); what started, or why not.
    async fn start(&self, schedule: &ScheduleManifest) -> Result<TickEnd, StartRefused> {
        let spec = &schedule.spec;
        match spec.target() {
            Some(ScheduleTarget::Agent(agent)) => self
                .runtime
                .start(StartRun {
                    agent: agent.to_owned(),
                    input: spec.input.clone(),
                    shadow: spec.shadow,
                })
                .await
                .map(|run| TickEnd {
                    run: Some(run.id.to_string()),
                    ..TickEnd::new(TickOutcome::Started)
                })
                .map_err(StartRefused::Run),
            Some(ScheduleTarget::Workflow(workflow)) => self
                .workflows
                .start_case(workflow, spec.input.clone())
                .await
                .map(|case| TickEnd {
                    workflow_case: Some(case.id.to_string()),
                    ..TickEnd::new(TickOutcome::Started)
                })
                .map_err(StartRefused::Case),
            None => Err(StartRefused::NoTarget),
        }
    }
}

/// Why a tick started nothing.
#[derive(Debug, thiserror::Error)]
enum StartRefused {
    /// The run was refused.
    #[error(transparent)]
    Run(RunError),
    /// The workflow case was refused.
    #[error(transparent)]
    Case(crate::workflow::WorkflowError),
    /// The schedule names neither.
    #[error("the schedule names no agent or workflow")]
    NoTarget,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1000;
    const MINUTE: u64 = 60 * SECOND;
    const HOUR: u64 = 60 * MINUTE;
    /// 2025-06-01T00:00:00Z, a tick of every cadence below.
    const T0: u64 = 1_748_736_000_000;

    fn hourly() -> Cadence {
        Cadence::new("0 * * * *", "UTC").unwrap()
    }

    #[test]
    fn a_schedule_never_handled_starts_from_when_it_was_seen() {
        let cadence = hourly();
        // Seen at 00:30: 00:00 is before, nothing is due.
        let since = T0 + 30 * MINUTE;
        assert!(due(&cadence, Missed::RunOnce, None, since, since).is_empty());
        assert!(due(&cadence, Missed::Skip, None, since, T0 + 59 * MINUTE).is_empty());
        // 01:00 is, noticed at once or within the grace.
        assert_eq!(
            due(&cadence, Missed::Skip, None, since, T0 + HOUR + 2 * SECOND),
            [TickAction::Start { tick: T0 + HOUR }]
        );
        // A tick at the very moment the schedule was seen counts.
        assert_eq!(
            due(&cadence, Missed::Skip, None, T0 + HOUR, T0 + HOUR),
            [TickAction::Start { tick: T0 + HOUR }]
        );
    }

    #[test]
    fn the_current_tick_starts_once_after_the_last_one_handled() {
        let cadence = hourly();
        for missed in [Missed::Skip, Missed::RunOnce] {
            assert_eq!(
                due(&cadence, missed, Some(T0), T0, T0 + HOUR + 500),
                [TickAction::Start { tick: T0 + HOUR }]
            );
            // Handled: nothing more until the next.
            assert!(due(&cadence, missed, Some(T0 + HOUR), T0, T0 + HOUR + 500).is_empty());
            assert!(due(&cadence, missed, Some(T0 + HOUR), T0, T0 + 2 * HOUR - 1).is_empty());
        }
    }

    #[test]
    fn skip_runs_nothing_for_ticks_past_their_grace() {
        let cadence = hourly();
        // Last handled 00:00; the process comes back at 03:10: 01:00, 02:00
        // and 03:00 passed, the newest 10 minutes ago.
        assert_eq!(
            due(
                &cadence,
                Missed::Skip,
                Some(T0),
                T0,
                T0 + 3 * HOUR + 10 * MINUTE
            ),
            [TickAction::Skip {
                tick: T0 + 3 * HOUR,
                first: T0 + HOUR,
                count: 3,
                more: false,
            }]
        );
        // Back at 03:00:59, 03:00 is still current: it runs, the two
        // before are passed over.
        assert_eq!(
            due(
                &cadence,
                Missed::Skip,
                Some(T0),
                T0,
                T0 + 3 * HOUR + 59 * SECOND
            ),
            [
                TickAction::Skip {
                    tick: T0 + 2 * HOUR,
                    first: T0 + HOUR,
                    count: 2,
                    more: false,
                },
                TickAction::Start {
                    tick: T0 + 3 * HOUR
                },
            ]
        );
        // At exactly the grace it is current; a millisecond later not.
        let grace = GRACE.as_millis() as u64;
        assert_eq!(
            due(&cadence, Missed::Skip, Some(T0), T0, T0 + HOUR + grace),
            [TickAction::Start { tick: T0 + HOUR }]
        );
        assert!(matches!(
            due(&cadence, Missed::Skip, Some(T0), T0, T0 + HOUR + grace + 1)[..],
            [TickAction::Skip { count: 1, .. }]
        ));
    }

    #[test]
    fn run_once_starts_one_run_for_the_newest_missed_tick() {
        let cadence = hourly();
        assert_eq!(
            due(
                &cadence,
                Missed::RunOnce,
                Some(T0),
                T0,
                T0 + 3 * HOUR + 10 * MINUTE
            ),
            [
                TickAction::Skip {
                    tick: T0 + 2 * HOUR,
                    first: T0 + HOUR,
                    count: 2,
                    more: false,
                },
                TickAction::Start {
                    tick: T0 + 3 * HOUR
                },
            ]
        );
        // One missed tick: it runs, nothing is passed over.
        assert_eq!(
            due(
                &cadence,
                Missed::RunOnce,
                Some(T0),
                T0,
                T0 + HOUR + 10 * MINUTE
            ),
            [TickAction::Start { tick: T0 + HOUR }]
        );
    }

    #[test]
    fn ticks_passed_over_are_counted_up_to_a_cap() {
        let every_second = Cadence::new("* * * * * *", "UTC").unwrap();
        let now = T0 + 2 * HOUR;
        let actions = due(&every_second, Missed::RunOnce, Some(T0), T0, now);
        assert_eq!(
            actions,
            [
                TickAction::Skip {
                    tick: now - SECOND,
                    first: T0 + SECOND,
                    count: MAX_COUNTED + 1,
                    more: true,
                },
                TickAction::Start { tick: now },
            ]
        );
    }

    #[test]
    fn ticks_fall_in_the_schedules_zone_across_a_clock_change() {
        // 02:30 every day in New York; on 2025-03-09 it does not exist and
        // the tick is 03:00 EDT (07:00 UTC).
        let cadence = Cadence::new("30 2 * * *", "America/New_York").unwrap();
        let saturday = 1_741_437_000_000; // 2025-03-08T12:30:00Z
        let gap_tick = 1_741_503_600_000; // 2025-03-09T07:00:00Z
        assert_eq!(cadence.next_after(saturday), Some(gap_tick));
        let previous = cadence.latest_at_or_before(saturday).unwrap();
        assert_eq!(
            due(
                &cadence,
                Missed::Skip,
                Some(previous),
                0,
                gap_tick + 5 * SECOND
            ),
            [TickAction::Start { tick: gap_tick }]
        );
    }
}
