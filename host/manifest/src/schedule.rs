//! The `Schedule` manifest (`agents/v1alpha1`): a cron expression in a
//! time zone that starts runs of an agent (or a workflow) with a fixed
//! input; and [`Cadence`], the expression compiled, which says when its
//! ticks fall.
//!
//! A tick is an instant, in milliseconds since the Unix epoch: the time
//! the expression names, read on the zone's wall clock. The time zone
//! database decides what a wall-clock time that does not exist or happens
//! twice means (see [`Cadence`]).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, TimeZone as _, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::check_dns_name;
use crate::manifest::Source;
use crate::{AGENTS_API_VERSION, ManifestError, Metadata};
use hane_core::ErrorKind;

/// The time zone of a schedule that names none.
pub const DEFAULT_TIME_ZONE: &str = "UTC";

/// A `Schedule` manifest (`agents/v1alpha1`): when to start runs, of what,
/// with which input, and what to do about ticks that passed while no
/// process ran the schedule. Only `hane serve` starts them.
///
/// # Examples
///
/// ```
/// use hane_manifest::{Missed, ScheduleManifest, ScheduleTarget};
///
/// let schedule = ScheduleManifest::from_yaml("schedule.yaml", r#"
/// apiVersion: agents/v1alpha1
/// kind: Schedule
/// metadata:
///   name: morning-check
/// spec:
///   cron: "0 7 * * 1-5"
///   timeZone: Asia/Tokyo
///   agent: vehicle-check-scripted
///   input: { vehicle: "架空 300 あ 10-02" }
///   missed: runOnce
/// "#).unwrap();
/// assert_eq!(schedule.spec.target(), Some(ScheduleTarget::Agent("vehicle-check-scripted")));
/// assert_eq!(schedule.spec.missed, Missed::RunOnce);
/// // 2025-01-06 was a Monday: 07:00 in Tokyo is 22:00 UTC the day before.
/// let cadence = schedule.spec.cadence().unwrap();
/// let sunday_noon_utc = 1_736_078_400_000; // 2025-01-05T12:00:00Z
/// assert_eq!(cadence.next_after(sunday_noon_utc), Some(1_736_114_400_000)); // 2025-01-05T22:00:00Z
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleManifest {
    /// Must be `agents/v1alpha1`.
    pub api_version: String,
    /// Must be `Schedule`.
    pub kind: String,
    /// The name: lowercase letters, digits and `-`, starting with a letter.
    pub metadata: Metadata,
    /// When, what and with which input.
    pub spec: ScheduleSpec,
}

/// `spec` of a `Schedule` manifest.
///
/// | YAML | default |
/// |---|---|
/// | `cron` | required |
/// | `timeZone` | `UTC` |
/// | `agent` or `workflow` | exactly one is required |
/// | `input` | `{}` |
/// | `missed` | `skip` |
/// | `shadow` | `false` |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleSpec {
    /// A cron expression: 5 fields (minute, hour, day of month, month, day
    /// of week) or 6 with seconds first; names (`MON`, `JAN`), ranges,
    /// steps, lists, `L`, `W`, `#` and the `@daily` style nicknames as
    /// the `croner` crate reads them.
    pub cron: String,
    /// The IANA time zone the expression is read in, such as `Asia/Tokyo`.
    #[serde(default = "default_time_zone")]
    pub time_zone: String,
    /// The agent each tick runs; an `Agent` of the same release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The workflow each tick starts, instead of an agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The input of every run it starts, a map.
    #[serde(default = "empty_map")]
    pub input: Value,
    /// What happens to ticks that passed while no process ran the
    /// schedule.
    #[serde(default)]
    pub missed: Missed,
    /// Start shadow runs: handovers and outbound actions only recorded.
    #[serde(default)]
    pub shadow: bool,
}

fn default_time_zone() -> String {
    DEFAULT_TIME_ZONE.to_owned()
}

fn empty_map() -> Value {
    Value::Object(serde_json::Map::new())
}

/// What happens to the ticks of a schedule that passed while no process
/// ran it (every `hane serve` stopped, or the store busy for longer than a
/// tick's grace).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Missed {
    /// They are not run; only a tick noticed within its grace is.
    #[default]
    Skip,
    /// One run starts for the most recent of them, however many passed.
    RunOnce,
}

impl Missed {
    /// The value as written in a manifest: `skip` or `runOnce`.
    pub fn as_str(self) -> &'static str {
        match self {
            Missed::Skip => "skip",
            Missed::RunOnce => "runOnce",
        }
    }
}

impl fmt::Display for Missed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a schedule starts at each tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScheduleTarget<'a> {
    /// A run of this agent.
    Agent(&'a str),
    /// A case of this workflow.
    Workflow(&'a str),
}

impl ScheduleSpec {
    /// What each tick starts: the agent, or else the workflow. `None` only
    /// for a spec that names neither, which
    /// [`ScheduleManifest::from_yaml`] refuses.
    pub fn target(&self) -> Option<ScheduleTarget<'_>> {
        match (&self.agent, &self.workflow) {
            (Some(agent), _) => Some(ScheduleTarget::Agent(agent)),
            (None, Some(workflow)) => Some(ScheduleTarget::Workflow(workflow)),
            (None, None) => None,
        }
    }

    /// The spec's `cron` and `timeZone` compiled.
    ///
    /// # Errors
    ///
    /// As [`Cadence::new`].
    pub fn cadence(&self) -> Result<Cadence, CadenceError> {
        Cadence::new(&self.cron, &self.time_zone)
    }
}

impl ScheduleManifest {
    /// Parses and validates a `Schedule` manifest; `file` names it in
    /// errors. The name, and the agent's or workflow's, are DNS labels, as
    /// for agents; whether the agent exists is checked with the rest of the
    /// bundle by [`read_bundle_dir`](crate::read_bundle_dir), and whether
    /// it takes the input when the release is activated.
    ///
    /// # Errors
    ///
    /// The first problem: malformed YAML, an unknown or missing field, a
    /// wrong type, a wrong `apiVersion` or `kind`, a cron expression that
    /// does not parse or matches no time, a time zone that is not an IANA
    /// name, both or neither of `agent` and `workflow`, an input that is
    /// not a map, or a `missed` other than `skip` or `runOnce`, naming the
    /// field and its line.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: Self = source.parse_manifest(AGENTS_API_VERSION, "Schedule")?;
        let fail = |field: &str, message: String| source.error(field, message);
        check_dns_name(&manifest.metadata.name)
            .map_err(|m| fail("metadata.name", m.to_string()))?;
        let spec = &manifest.spec;
        spec.cadence().map_err(|e| fail(e.field(), e.to_string()))?;
        match (&spec.agent, &spec.workflow) {
            (Some(agent), None) => {
                check_dns_name(agent).map_err(|m| fail("spec.agent", m.to_string()))?
            }
            (None, Some(workflow)) => {
                check_dns_name(workflow).map_err(|m| fail("spec.workflow", m.to_string()))?;
            }
            (Some(_), Some(_)) => {
                return Err(fail(
                    "spec.workflow",
                    "expected exactly one of `agent` or `workflow`, found both".to_owned(),
                ));
            }
            (None, None) => {
                return Err(fail(
                    "spec",
                    "expected exactly one of `agent` or `workflow`, found none".to_owned(),
                ));
            }
        }
        if !spec.input.is_object() {
            return Err(fail("spec.input", "must be a map".to_owned()));
        }
        Ok(manifest)
    }
}

/// Why a schedule's `cron` or `timeZone` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CadenceError {
    /// The expression does not parse.
    #[error(
        "`{cron}` is not a cron expression: {reason}; expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first"
    )]
    Cron {
        /// The expression.
        cron: String,
        /// What the parser said.
        reason: String,
    },
    /// The expression parses but names no time that exists, such as
    /// February 30th.
    #[error("`{cron}` matches no time: no tick falls within a year of any date")]
    Never {
        /// The expression.
        cron: String,
    },
    /// The time zone is not in the IANA database.
    #[error("`{zone}` is not an IANA time zone name such as `UTC` or `Asia/Tokyo`")]
    TimeZone {
        /// The name given.
        zone: String,
    },
}

impl CadenceError {
    /// What kind of failure this is: always [`ErrorKind::Invalid`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Invalid
    }

    /// The manifest field at fault: `spec.cron` or `spec.timeZone`.
    pub fn field(&self) -> &'static str {
        match self {
            CadenceError::Cron { .. } | CadenceError::Never { .. } => "spec.cron",
            CadenceError::TimeZone { .. } => "spec.timeZone",
        }
    }
}

/// A cron expression compiled in its time zone: when its ticks fall, in
/// milliseconds since the Unix epoch. Ticks fall on whole seconds.
///
/// The zone's clock changes are the time zone database's: a time the
/// clock skips (02:30 on the night it springs forward) is a tick at the
/// first instant after the gap (03:00) for an expression that names fixed
/// times, and no tick for one that repeats within the hour (`*/15 * * * *`);
/// a time the clock shows twice (01:30 on the night it falls back) is one
/// tick, the first, for fixed times, and two for repeating ones.
///
/// # Examples
///
/// ```
/// use hane_manifest::Cadence;
///
/// let every_two_seconds = Cadence::new("*/2 * * * * *", "UTC").unwrap();
/// assert_eq!(every_two_seconds.next_after(1_000), Some(2_000));
/// assert_eq!(every_two_seconds.next_after(2_000), Some(4_000));
/// assert_eq!(every_two_seconds.latest_at_or_before(5_999), Some(4_000));
/// assert_eq!(every_two_seconds.ticks_between(0, 10_000, 3), vec![2_000, 4_000, 6_000]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cadence {
    cron: Cron,
    zone: Tz,
}

impl Cadence {
    /// Compiles `cron` (5 fields, or 6 with seconds first) read in the IANA
    /// time zone `zone`.
    ///
    /// # Errors
    ///
    /// The expression does not parse or matches no time; the zone is not
    /// an IANA name.
    pub fn new(cron: &str, zone: &str) -> Result<Self, CadenceError> {
        let parser = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build();
        let compiled = parser.parse(cron).map_err(|e| CadenceError::Cron {
            cron: cron.to_owned(),
            reason: e.to_string().trim_end_matches('.').to_owned(),
        })?;
        let zone = Tz::from_str(zone).map_err(|_| CadenceError::TimeZone {
            zone: zone.to_owned(),
        })?;
        let cadence = Cadence {
            cron: compiled,
            zone,
        };
        // An expression such as `0 0 30 2 *` parses but never fires; the
        // search gives up after a year, so one from a fixed date tells.
        const Y2000: u64 = 946_684_800_000;
        if cadence.next_after(Y2000).is_none() {
            return Err(CadenceError::Never {
                cron: cron.to_owned(),
            });
        }
        Ok(cadence)
    }

    /// The first tick strictly after `ms`; `None` when the search finds
    /// none within its bound (about a year of wall-clock time).
    pub fn next_after(&self, ms: u64) -> Option<u64> {
        let at = self.at(ms)?;
        let next = self.cron.find_next_occurrence(&at, false).ok()?;
        to_ms(&next)
    }

    /// The last tick at or before `ms`; `None` when there is none within
    /// the search's bound, or before the epoch.
    pub fn latest_at_or_before(&self, ms: u64) -> Option<u64> {
        let at = self.at(ms)?;
        let previous = self.cron.find_previous_occurrence(&at, true).ok()?;
        to_ms(&previous)
    }

    /// The ticks strictly between `after` and `before`, oldest first, at
    /// most `cap` of them (the oldest).
    pub fn ticks_between(&self, after: u64, before: u64, cap: usize) -> Vec<u64> {
        let mut ticks = Vec::new();
        let mut at = after;
        while ticks.len() < cap {
            match self.next_after(at) {
                Some(next) if next < before => {
                    ticks.push(next);
                    at = next;
                }
                _ => break,
            }
        }
        ticks
    }

    /// `ms` on the zone's wall clock, such as `2025-03-09 03:00:00 EDT`.
    pub fn wall_clock(&self, ms: u64) -> String {
        match self.at(ms) {
            Some(at) => at.format("%Y-%m-%d %H:%M:%S %Z").to_string(),
            None => format!("{ms} ms"),
        }
    }

    /// The time zone's IANA name.
    pub fn zone(&self) -> &'static str {
        self.zone.name()
    }

    /// `ms` in the zone, on its whole second: ticks fall on whole seconds,
    /// so the fraction never changes which tick is next or last.
    fn at(&self, ms: u64) -> Option<DateTime<Tz>> {
        let seconds = i64::try_from(ms / 1000).ok()?;
        Utc.timestamp_opt(seconds, 0)
            .single()
            .map(|utc| utc.with_timezone(&self.zone))
    }
}

fn to_ms(at: &DateTime<Tz>) -> Option<u64> {
    u64::try_from(at.timestamp_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEDULE: &str = "\
apiVersion: agents/v1alpha1
kind: Schedule
metadata:
  name: morning-check
spec:
  cron: \"30 6 * * MON-FRI\"
  timeZone: Asia/Tokyo
  agent: vehicle-check-scripted
  input:
    vehicle: KT-12
  shadow: true
";

    fn error(from: &str, to: &str) -> String {
        ScheduleManifest::from_yaml("s.yaml", &SCHEDULE.replace(from, to))
            .unwrap_err()
            .to_string()
    }

    /// Milliseconds since the epoch of a UTC time.
    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> u64 {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .unwrap()
            .timestamp_millis() as u64
    }

    #[test]
    fn a_schedule_parses_with_its_defaults_and_round_trips() {
        let schedule = ScheduleManifest::from_yaml("s.yaml", SCHEDULE).unwrap();
        let spec = &schedule.spec;
        assert_eq!(
            spec.target(),
            Some(ScheduleTarget::Agent("vehicle-check-scripted"))
        );
        assert_eq!(spec.input, serde_json::json!({"vehicle": "KT-12"}));
        assert_eq!(spec.missed, Missed::Skip);
        assert!(spec.shadow);
        let json = serde_json::to_string(&schedule).unwrap();
        assert_eq!(
            ScheduleManifest::from_yaml("s.json", &json).unwrap(),
            schedule
        );

        let minimal = ScheduleManifest::from_yaml(
            "m.yaml",
            "apiVersion: agents/v1alpha1\nkind: Schedule\nmetadata: { name: m }\nspec:\n  cron: '@hourly'\n  workflow: renewals\n  missed: runOnce\n",
        )
        .unwrap();
        assert_eq!(minimal.spec.time_zone, "UTC");
        assert_eq!(minimal.spec.input, serde_json::json!({}));
        assert_eq!(minimal.spec.missed, Missed::RunOnce);
        assert!(!minimal.spec.shadow);
        assert_eq!(
            minimal.spec.target(),
            Some(ScheduleTarget::Workflow("renewals"))
        );
    }

    #[test]
    fn a_bad_cron_expression_names_spec_cron_and_why() {
        assert_eq!(
            error("30 6 * * MON-FRI", "61 6 * * MON-FRI"),
            "s.yaml:6: spec.cron: `61 6 * * MON-FRI` is not a cron expression: Component error: Number out of bounds; expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first"
        );
        assert_eq!(
            error("30 6 * * MON-FRI", "30 6 * *"),
            "s.yaml:6: spec.cron: `30 6 * *` is not a cron expression: Invalid pattern: Pattern must have 5 or 6 fields when years are disallowed; expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first"
        );
        assert_eq!(
            error("30 6 * * MON-FRI", "0 0 30 2 *"),
            "s.yaml:6: spec.cron: `0 0 30 2 *` matches no time: no tick falls within a year of any date"
        );
    }

    #[test]
    fn a_bad_time_zone_is_refused() {
        assert_eq!(
            error("Asia/Tokyo", "Asia/Atlantis"),
            "s.yaml:7: spec.timeZone: `Asia/Atlantis` is not an IANA time zone name such as `UTC` or `Asia/Tokyo`"
        );
    }

    #[test]
    fn exactly_one_of_agent_and_workflow() {
        assert_eq!(
            error(
                "  agent: vehicle-check-scripted\n",
                "  agent: vehicle-check-scripted\n  workflow: renewals\n"
            ),
            "s.yaml:9: spec.workflow: expected exactly one of `agent` or `workflow`, found both"
        );
        assert_eq!(
            error("  agent: vehicle-check-scripted\n", ""),
            "s.yaml:5: spec: expected exactly one of `agent` or `workflow`, found none"
        );
        assert_eq!(
            error("agent: vehicle-check-scripted", "agent: Vehicle"),
            "s.yaml:8: spec.agent: expected 1 to 63 lowercase letters, digits and `-`, starting with a letter, found `Vehicle`"
        );
    }

    #[test]
    fn unknown_fields_and_values_are_refused() {
        assert_eq!(
            error("  shadow: true\n", "  shadow: true\n  retries: 3\n"),
            "s.yaml:12: spec.retries: unknown field `retries`, expected one of `cron`, `timeZone`, `agent`, `workflow`, `input`, `missed`, `shadow`"
        );
        let variant = error("  shadow: true\n", "  shadow: true\n  missed: backfill\n");
        assert!(
            variant.starts_with(
                "s.yaml:12: spec.missed: unknown variant `backfill`, expected `skip` or `runOnce`"
            ),
            "{variant}"
        );
        assert_eq!(
            error("  input:\n    vehicle: KT-12\n", "  input: [KT-12]\n"),
            "s.yaml:9: spec.input: must be a map"
        );
        assert_eq!(
            error("kind: Schedule", "kind: Cron"),
            "s.yaml:2: kind: expected `Schedule`, found `Cron`"
        );
    }

    #[test]
    fn ticks_follow_the_expression_in_its_zone() {
        // Weekdays at 06:30 in Tokyo (UTC+9): 21:30 UTC the day before.
        let cadence = Cadence::new("30 6 * * MON-FRI", "Asia/Tokyo").unwrap();
        let friday_noon = utc(2025, 1, 10, 12, 0, 0);
        // The next is Monday 06:30 in Tokyo, Sunday 21:30 UTC.
        assert_eq!(
            cadence.next_after(friday_noon),
            Some(utc(2025, 1, 12, 21, 30, 0))
        );
        assert_eq!(
            cadence.latest_at_or_before(friday_noon),
            Some(utc(2025, 1, 9, 21, 30, 0))
        );
        assert_eq!(
            cadence.wall_clock(utc(2025, 1, 12, 21, 30, 0)),
            "2025-01-13 06:30:00 JST"
        );
        // Strictly after, and a tick is its own latest.
        let tick = utc(2025, 1, 12, 21, 30, 0);
        assert_eq!(cadence.latest_at_or_before(tick), Some(tick));
        assert_eq!(cadence.next_after(tick), Some(utc(2025, 1, 13, 21, 30, 0)));
        // Milliseconds past a tick do not make it next.
        assert_eq!(
            cadence.latest_at_or_before(tick + 999),
            Some(tick),
            "the fraction of a second is ignored"
        );
        assert_eq!(
            cadence.next_after(tick + 999),
            Some(utc(2025, 1, 13, 21, 30, 0))
        );
    }

    #[test]
    fn ticks_between_are_strict_and_capped() {
        let cadence = Cadence::new("0 * * * *", "UTC").unwrap();
        let start = utc(2025, 6, 1, 0, 0, 0);
        let hour = 3_600_000;
        assert_eq!(
            cadence.ticks_between(start, start + 4 * hour, 10),
            vec![start + hour, start + 2 * hour, start + 3 * hour]
        );
        assert_eq!(
            cadence.ticks_between(start, start + 4 * hour, 2),
            vec![start + hour, start + 2 * hour]
        );
        assert!(cadence.ticks_between(start, start + hour, 10).is_empty());
    }

    #[test]
    fn a_fixed_time_in_the_spring_gap_runs_after_it_and_an_interval_skips_it() {
        // New York springs forward on 2025-03-09: 02:00 EST becomes 03:00 EDT.
        let daily = Cadence::new("30 2 * * *", "America/New_York").unwrap();
        let saturday = utc(2025, 3, 8, 17, 0, 0);
        let first = daily.next_after(saturday).unwrap();
        // 02:30 does not exist: the tick is 03:00 EDT, 07:00 UTC.
        assert_eq!(first, utc(2025, 3, 9, 7, 0, 0));
        assert_eq!(daily.wall_clock(first), "2025-03-09 03:00:00 EDT");
        // The next day is 02:30 EDT again, 06:30 UTC: 23.5 hours later.
        assert_eq!(daily.next_after(first), Some(utc(2025, 3, 10, 6, 30, 0)));

        let half_hourly = Cadence::new("*/30 * * * *", "America/New_York").unwrap();
        let before_gap = utc(2025, 3, 9, 6, 30, 0); // 01:30 EST
        assert_eq!(
            half_hourly.ticks_between(before_gap, utc(2025, 3, 9, 8, 0, 0), 10),
            // 03:00 EDT and 03:30 EDT: 02:00 and 02:30 never happen.
            vec![utc(2025, 3, 9, 7, 0, 0), utc(2025, 3, 9, 7, 30, 0)]
        );
    }

    #[test]
    fn a_fixed_time_in_the_autumn_overlap_runs_once_and_an_interval_twice() {
        // New York falls back on 2025-11-02: 01:00-02:00 happens twice,
        // first in EDT (UTC-4), then in EST (UTC-5).
        let daily = Cadence::new("30 1 * * *", "America/New_York").unwrap();
        let saturday = utc(2025, 11, 1, 17, 0, 0);
        let first = daily.next_after(saturday).unwrap();
        assert_eq!(first, utc(2025, 11, 2, 5, 30, 0)); // 01:30 EDT
        // Not again at 01:30 EST (06:30 UTC): the next is the day after.
        assert_eq!(daily.next_after(first), Some(utc(2025, 11, 3, 6, 30, 0)));

        let half_hourly = Cadence::new("*/30 * * * *", "America/New_York").unwrap();
        let midnight_edt = utc(2025, 11, 2, 4, 0, 0);
        assert_eq!(
            half_hourly.ticks_between(midnight_edt, utc(2025, 11, 2, 7, 0, 0), 10),
            vec![
                utc(2025, 11, 2, 4, 30, 0), // 00:30 EDT
                utc(2025, 11, 2, 5, 0, 0),  // 01:00 EDT
                utc(2025, 11, 2, 5, 30, 0), // 01:30 EDT
                utc(2025, 11, 2, 6, 0, 0),  // 01:00 EST
                utc(2025, 11, 2, 6, 30, 0), // 01:30 EST
            ]
        );
    }
}
