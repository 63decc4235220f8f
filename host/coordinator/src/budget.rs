//! Budgets: daily (UTC) limits of runs, external actions and model tokens
//! for a project and environment, counted in the registry.
//!
//! Usage is counted whether or not the active release has a `Budget` for
//! the scope, so `GET /v1/agents/budget` always reports the day; limits
//! and alerts apply only when it has one.

use crate::release::LoadedRelease;
use hane_core::now_ms;
use hane_manifest::BudgetSpec;
use hane_store::RunRow;
use hane_store::{AlertRow, BudgetUsage, Registry, RegistryTx, StoreError, UsageDelta};
use serde::Serialize;

use crate::{AgentRuntime, RunError};

/// The day's budget as operators read it. A service over the run kernel:
/// the runtime charges runs, actions and model tokens as they happen;
/// this reports what they came to against the active release's Budget.
#[derive(Debug, Clone)]
pub struct Budgets {
    runs: AgentRuntime,
    registry: Registry,
    scope: BudgetScope,
}

impl Budgets {
    /// The budget of `runs`' project and environment.
    pub fn new(runs: &AgentRuntime) -> Self {
        Self {
            runs: runs.clone(),
            registry: runs.registry().clone(),
            scope: runs.actions().scope().clone(),
        }
    }

    /// Today's usage of the runtime's project and environment, with the
    /// active release's Budget for it.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn report(&self) -> Result<BudgetReport, RunError> {
        let scope = self.scope.clone();
        let budget = match self.runs.release().await {
            Ok(release) => release.budget_for(&scope),
            Err(RunError::NoRelease) => None,
            Err(e) => return Err(e),
        };
        let day = utc_day(now_ms());
        let (usage, alerts) = self.registry.usage().of_day(&day, &scope.key()).await?;
        Ok(BudgetReport::new(
            day,
            &scope,
            budget.as_ref(),
            usage,
            alerts,
        ))
    }
}

/// The project and environment a runtime counts against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetScope {
    /// The project, `default` unless configured.
    pub project: String,
    /// The environment, `default` unless configured.
    pub environment: String,
}

impl Default for BudgetScope {
    fn default() -> Self {
        Self {
            project: "default".to_owned(),
            environment: "default".to_owned(),
        }
    }
}

impl BudgetScope {
    /// The key usage is stored under: `PROJECT/ENVIRONMENT`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.project, self.environment)
    }

    /// True when `spec` is this scope's budget.
    pub fn matches(&self, spec: &BudgetSpec) -> bool {
        spec.project == self.project && spec.environment == self.environment
    }
}

/// The UTC day of `ms` (milliseconds since the Unix epoch), `YYYY-MM-DD`.
pub fn utc_day(ms: u64) -> String {
    let days = (ms / 86_400_000) as i64;
    // Days to civil date (proleptic Gregorian), after H. Hinnant's
    // `civil_from_days`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// A limit that a run or an action would cross; nothing was counted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the daily budget `{budget}` does not allow this: {limit} is {limit_value} for {day} (UTC), {used} used, {requested} more needed"
)]
pub struct BudgetExceeded {
    /// The Budget's name.
    pub budget: String,
    /// `agentRunsPerDay`, `externalActionsPerDay` or `modelTokensPerDay`.
    pub limit: &'static str,
    /// The limit.
    pub limit_value: u64,
    /// What is used (and, for tokens, reserved) today.
    pub used: u64,
    /// What was asked for.
    pub requested: u64,
    /// The UTC day.
    pub day: String,
}

/// Why a charge failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChargeError {
    #[error(transparent)]
    Exceeded(#[from] BudgetExceeded),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A budget with its name, as the active release defines it.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveBudget {
    /// The Budget's name.
    pub name: String,
    /// Its limits.
    pub spec: BudgetSpec,
}

/// Adds `delta` to `day`'s usage of `scope` inside `tx`, unless that
/// would cross a limit of `budget`; records an alert for each limit whose
/// usage reaches `alertAtPercent` (once per day and limit).
pub(crate) fn charge(
    tx: &RegistryTx<'_>,
    scope: &str,
    day: &str,
    budget: Option<&ActiveBudget>,
    delta: UsageDelta,
    now_ms: u64,
) -> Result<BudgetUsage, ChargeError> {
    let before = tx.usage(day, scope)?;
    if let Some(budget) = budget {
        for (limit, limit_value, used, requested) in checks(&budget.spec, &before, delta) {
            if requested > 0 && used.saturating_add(requested) > limit_value {
                return Err(BudgetExceeded {
                    budget: budget.name.clone(),
                    limit,
                    limit_value,
                    used,
                    requested,
                    day: day.to_owned(),
                }
                .into());
            }
        }
    }
    let after = tx.add_usage(day, scope, delta)?;
    if let Some(budget) = budget {
        let percent = u64::from(budget.spec.alert_at_percent);
        for (name, limit_value, used, _) in checks(&budget.spec, &after, UsageDelta::default()) {
            if u128::from(used) * 100 >= u128::from(limit_value) * u128::from(percent) {
                tx.record_alert(
                    day,
                    scope,
                    &AlertRow {
                        name: name.to_owned(),
                        used,
                        limit: limit_value,
                        at_ms: now_ms,
                    },
                )?;
            }
        }
    }
    Ok(after)
}

/// Each limit `spec` sets: its name, value, what `usage` counts against
/// it and what `delta` asks for.
fn checks(
    spec: &BudgetSpec,
    usage: &BudgetUsage,
    delta: UsageDelta,
) -> Vec<(&'static str, u64, u64, u64)> {
    let more = |n: i64| n.max(0) as u64;
    let mut out = Vec::new();
    if let Some(limit) = spec.agent_runs_per_day {
        out.push(("agentRunsPerDay", limit, usage.runs, more(delta.runs)));
    }
    if let Some(limit) = spec.external_actions_per_day {
        out.push((
            "externalActionsPerDay",
            limit,
            usage.actions,
            more(delta.actions),
        ));
    }
    if let Some(limit) = spec.model_tokens_per_day {
        out.push((
            "modelTokensPerDay",
            limit,
            usage.tokens_used.saturating_add(usage.tokens_reserved),
            more(delta.tokens_reserved).saturating_add(more(delta.tokens_used)),
        ));
    }
    out
}

/// Today's usage, as `GET /v1/agents/budget` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct BudgetReport {
    /// The UTC day.
    #[schemars(regex(pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"))]
    pub day: String,
    /// The project.
    pub project: String,
    /// The environment.
    pub environment: String,
    /// The active release's Budget for the scope, if it has one.
    pub budget: Option<String>,
    /// Its limits; `null` for none.
    pub limits: ReportLimits,
    /// What is counted today.
    pub usage: ReportUsage,
    /// Limits whose usage reached `alertAtPercent` today.
    pub alerts: Vec<ReportAlert>,
}

/// The limits of a [`BudgetReport`].
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    deny_unknown_fields,
    description = "The Budget's limits, each null when it sets none"
)]
pub struct ReportLimits {
    /// Runs per day.
    pub agent_runs_per_day: Option<u64>,
    /// Executed external actions per day.
    pub external_actions_per_day: Option<u64>,
    /// Model tokens per day, used and reserved.
    pub model_tokens_per_day: Option<u64>,
    /// When an alert is recorded.
    #[schemars(range(min = 1, max = 100))]
    pub alert_at_percent: Option<u8>,
}

/// The usage of a [`BudgetReport`].
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields, description = "What is counted today")]
pub struct ReportUsage {
    /// Runs started.
    pub agent_runs: u64,
    /// External actions executed (attempted).
    pub external_actions: u64,
    /// Model tokens used by runs that ended.
    pub model_tokens_used: u64,
    /// Model tokens reserved by runs still going.
    pub model_tokens_reserved: u64,
}

/// An alert of a [`BudgetReport`].
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    deny_unknown_fields,
    description = "A limit whose usage reached `alertAtPercent` today"
)]
pub struct ReportAlert {
    /// The limit.
    #[schemars(extend("enum" = ["agentRunsPerDay", "externalActionsPerDay", "modelTokensPerDay"]))]
    pub limit: String,
    /// Its value.
    pub limit_value: u64,
    /// The usage when it was recorded.
    pub used: u64,
    /// When.
    pub at_ms: u64,
}

impl BudgetReport {
    pub(crate) fn new(
        day: String,
        scope: &BudgetScope,
        budget: Option<&ActiveBudget>,
        usage: BudgetUsage,
        alerts: Vec<AlertRow>,
    ) -> Self {
        let spec = budget.map(|b| &b.spec);
        Self {
            day,
            project: scope.project.clone(),
            environment: scope.environment.clone(),
            budget: budget.map(|b| b.name.clone()),
            limits: ReportLimits {
                agent_runs_per_day: spec.and_then(|s| s.agent_runs_per_day),
                external_actions_per_day: spec.and_then(|s| s.external_actions_per_day),
                model_tokens_per_day: spec.and_then(|s| s.model_tokens_per_day),
                alert_at_percent: spec.map(|s| s.alert_at_percent),
            },
            usage: ReportUsage {
                agent_runs: usage.runs,
                external_actions: usage.actions,
                model_tokens_used: usage.tokens_used,
                model_tokens_reserved: usage.tokens_reserved,
            },
            alerts: alerts
                .into_iter()
                .map(|a| ReportAlert {
                    limit: a.name,
                    limit_value: a.limit,
                    used: a.used,
                    at_ms: a.at_ms,
                })
                .collect(),
        }
    }
}

/// A count as the store's signed integer, saturating.
fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn charge_error(e: ChargeError) -> RunError {
    match e {
        ChargeError::Exceeded(e) => RunError::Budget(e),
        ChargeError::Store(e) => RunError::Store(e),
    }
}

/// The day's budget as runs and model calls charge it: runs counted and
/// model tokens reserved before they start, and given back after.
pub(crate) struct DayBudget<'a> {
    pub(crate) kernel: &'a AgentRuntime,
}

impl<'a> DayBudget<'a> {
    pub(crate) fn of(kernel: &'a AgentRuntime) -> Self {
        Self { kernel }
    }

    /// Counts a run against today's budget and reserves `tokens` model
    /// tokens for it, storing `run` in the same transaction when given;
    /// returns the UTC day it counted on, where the reservation is given
    /// back when the run ends. Nothing is counted or stored when a limit
    /// would be crossed.
    pub(crate) async fn charge_run(
        &self,
        release: &LoadedRelease,
        tokens: u64,
        run: Option<RunRow>,
    ) -> Result<String, RunError> {
        self.charge_day(release, 1, tokens, run).await
    }

    /// Reserves `tokens` model tokens from today's budget for a model call
    /// that is not a run's (reception's choice); returns the UTC day, where
    /// [`AgentRuntime::give_back`] returns what it did not use. Nothing is
    /// reserved when the limit would be crossed.
    pub(crate) async fn charge_tokens(
        &self,
        release: &LoadedRelease,
        tokens: u64,
    ) -> Result<String, RunError> {
        self.charge_day(release, 0, tokens, None).await
    }

    async fn charge_day(
        &self,
        release: &LoadedRelease,
        runs: i64,
        tokens: u64,
        run: Option<RunRow>,
    ) -> Result<String, RunError> {
        let scope = self.kernel.inner.actions.scope().clone();
        let budget = release.budget_for(&scope);
        let now = now_ms();
        let day = utc_day(now);
        let key = scope.key();
        let charged_day = day.clone();
        let delta = UsageDelta {
            runs,
            tokens_reserved: signed(tokens),
            ..UsageDelta::default()
        };
        self.kernel
            .inner
            .registry
            .transact(move |tx| {
                charge(tx, &key, &charged_day, budget.as_ref(), delta, now)?;
                if let Some(run) = &run {
                    tx.insert_run(run)?;
                }
                Ok(())
            })
            .await
            .map_err(charge_error)?;
        Ok(day)
    }

    /// Returns a run's unused reservation and counts what it used; a run
    /// that never `started` is not counted either.
    pub(crate) async fn give_back(&self, day: &str, reserved: u64, used: u64, started: bool) {
        let key = self.kernel.inner.actions.scope().key();
        let day = day.to_owned();
        let delta = UsageDelta {
            runs: if started { 0 } else { -1 },
            tokens_reserved: -signed(reserved),
            tokens_used: signed(used),
            ..UsageDelta::default()
        };
        let given = self
            .kernel
            .inner
            .registry
            .transact(move |tx| tx.add_usage(&day, &key, delta))
            .await;
        if let Err(e) = given {
            tracing::error!("returning a run's token reservation: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_days_are_civil_dates() {
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(utc_day(86_399_999), "1970-01-01");
        assert_eq!(utc_day(86_400_000), "1970-01-02");
        // 2000-02-29T12:00:00Z and 2026-11-30T23:59:59.999Z.
        assert_eq!(utc_day(951_825_600_000), "2000-02-29");
        assert_eq!(utc_day(1_796_083_199_999), "2026-11-30");
        assert_eq!(utc_day(1_796_083_200_000), "2026-12-01");
    }
}
