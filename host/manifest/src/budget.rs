//! The `Budget` manifest (`platform/v1alpha1`): daily limits on what the
//! agents of a project and environment may use.

use std::fmt;

use serde::de::{self, Unexpected, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::agent::{check_dns_name, not_blank};
use crate::manifest::Source;
use crate::{ManifestError, Metadata};

/// The `apiVersion` of platform manifests such as `Budget`.
pub const PLATFORM_API_VERSION: &str = "platform/v1alpha1";

/// A `Budget` manifest (`platform/v1alpha1`): limits per UTC day for one
/// project and environment. A bundle holds at most one per pair.
///
/// # Examples
///
/// ```
/// use hane_manifest::BudgetManifest;
///
/// let budget = BudgetManifest::from_yaml("budget.yaml", r#"
/// apiVersion: platform/v1alpha1
/// kind: Budget
/// metadata:
///   name: daily-budget
/// spec:
///   agentRunsPerDay: 200
/// "#).unwrap();
/// assert_eq!(budget.spec.project, "default");
/// assert_eq!(budget.spec.agent_runs_per_day, Some(200));
/// assert_eq!(budget.spec.model_tokens_per_day, None);
/// assert_eq!(budget.spec.alert_at_percent, 80);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetManifest {
    /// Must be `platform/v1alpha1`.
    pub api_version: String,
    /// Must be `Budget`.
    pub kind: String,
    /// The name: lowercase letters, digits and `-`, starting with a letter.
    pub metadata: Metadata,
    /// The project, the environment and the limits.
    pub spec: BudgetSpec,
}

/// `spec` of a `Budget` manifest. Each limit counts per UTC day; an absent
/// limit means no limit, a present one is at least 1.
///
/// | YAML | default |
/// |---|---|
/// | `project` | `default` |
/// | `environment` | `default` |
/// | `agentRunsPerDay` | no limit |
/// | `externalActionsPerDay` | no limit |
/// | `modelTokensPerDay` | no limit |
/// | `alertAtPercent` | 80 |
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetSpec {
    /// The project the limits apply to.
    #[serde(default = "default_scope")]
    pub project: String,
    /// The environment of the project the limits apply to.
    #[serde(default = "default_scope")]
    pub environment: String,
    /// Agent runs started.
    #[serde(
        default,
        deserialize_with = "limit",
        skip_serializing_if = "Option::is_none"
    )]
    pub agent_runs_per_day: Option<u64>,
    /// Outbound actions carried out (e-mails, messages, calls,
    /// integration calls).
    #[serde(
        default,
        deserialize_with = "limit",
        skip_serializing_if = "Option::is_none"
    )]
    pub external_actions_per_day: Option<u64>,
    /// Model tokens, input and output together.
    #[serde(
        default,
        deserialize_with = "limit",
        skip_serializing_if = "Option::is_none"
    )]
    pub model_tokens_per_day: Option<u64>,
    /// The share of a limit, from 1 to 100 percent, whose use raises an
    /// alert.
    #[serde(default = "default_alert_at_percent", deserialize_with = "percent")]
    pub alert_at_percent: u8,
}

fn default_scope() -> String {
    "default".to_owned()
}

fn default_alert_at_percent() -> u8 {
    80
}

impl BudgetManifest {
    /// Parses and validates a `Budget` manifest; `file` names it in
    /// errors. The name is a DNS label, as for agents; the project and
    /// environment are not blank.
    ///
    /// # Errors
    ///
    /// The first problem: malformed YAML, an unknown or missing field, a
    /// wrong type, a wrong `apiVersion` or `kind`, a limit that is not a
    /// whole number of at least 1, or `alertAtPercent` outside 1 to 100,
    /// naming the field and its line.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: Self = source.parse_manifest(PLATFORM_API_VERSION, "Budget")?;
        let fail = |field: &str, message: String| source.error(field, message);
        check_dns_name(&manifest.metadata.name)
            .map_err(|m| fail("metadata.name", m.to_string()))?;
        not_blank(&manifest.spec.project).map_err(|m| fail("spec.project", m.to_string()))?;
        not_blank(&manifest.spec.environment)
            .map_err(|m| fail("spec.environment", m.to_string()))?;
        Ok(manifest)
    }
}

/// Reads a present limit: a whole number of at least 1.
fn limit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_any(Whole {
        min: 1,
        max: u64::MAX,
        expected: "a whole number of at least 1; leave the field out for no limit",
    })
    .map(Some)
}

/// Reads `alertAtPercent`: a whole number from 1 to 100.
fn percent<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let percent = d.deserialize_any(Whole {
        min: 1,
        max: 100,
        expected: "a whole percentage from 1 to 100",
    })?;
    Ok(u8::try_from(percent).expect("at most 100"))
}

/// A whole number from `min` to `max`, refused with `expected` otherwise:
/// serde's own message for a `u64` would not say that zero and negative
/// numbers are what is wrong.
struct Whole {
    min: u64,
    max: u64,
    expected: &'static str,
}

impl Visitor<'_> for Whole {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expected)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        if (self.min..=self.max).contains(&v) {
            Ok(v)
        } else {
            Err(E::invalid_value(Unexpected::Unsigned(v), &self))
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: &str = "\
apiVersion: platform/v1alpha1
kind: Budget
metadata:
  name: daily-budget
spec:
  project: fleet
  environment: production
  agentRunsPerDay: 200
  externalActionsPerDay: 50
  modelTokensPerDay: 200000
  alertAtPercent: 90
";

    #[test]
    fn a_full_budget_parses_and_round_trips() {
        let budget = BudgetManifest::from_yaml("b.yaml", BUDGET).unwrap();
        let spec = &budget.spec;
        assert_eq!(
            (spec.project.as_str(), spec.environment.as_str()),
            ("fleet", "production")
        );
        assert_eq!(spec.agent_runs_per_day, Some(200));
        assert_eq!(spec.external_actions_per_day, Some(50));
        assert_eq!(spec.model_tokens_per_day, Some(200_000));
        assert_eq!(spec.alert_at_percent, 90);
        let json = serde_json::to_string(&budget).unwrap();
        assert_eq!(BudgetManifest::from_yaml("b.json", &json).unwrap(), budget);
    }

    #[test]
    fn limits_are_whole_numbers_of_at_least_one() {
        let error = |from: &str, to: &str| {
            BudgetManifest::from_yaml("b.yaml", &BUDGET.replace(from, to))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            error("PerDay: 50", "PerDay: 0"),
            "b.yaml:9: spec.externalActionsPerDay: invalid value: integer `0`, expected a whole number of at least 1; leave the field out for no limit"
        );
        assert_eq!(
            error("200000", "-1"),
            "b.yaml:10: spec.modelTokensPerDay: invalid value: integer `-1`, expected a whole number of at least 1; leave the field out for no limit"
        );
        assert_eq!(
            error("PerDay: 200\n", "PerDay: 2.5\n"),
            "b.yaml:8: spec.agentRunsPerDay: invalid type: floating point `2.5`, expected a whole number of at least 1; leave the field out for no limit"
        );
        assert_eq!(
            error("Percent: 90", "Percent: 101"),
            "b.yaml:11: spec.alertAtPercent: invalid value: integer `101`, expected a whole percentage from 1 to 100"
        );
        assert_eq!(
            error("project: fleet", "project: \" \""),
            "b.yaml:6: spec.project: must not be empty"
        );
        assert_eq!(
            error("kind: Budget", "kind: Quota"),
            "b.yaml:2: kind: expected `Budget`, found `Quota`"
        );
    }
}
