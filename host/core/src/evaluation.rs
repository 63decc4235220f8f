//! Evaluations of an `EvalSuite`, as the store keeps them: for each case
//! the input, the result the shadow run returned, whether it matched what
//! the case expects and where it did not; and the comparison of two
//! evaluations of one suite, case by case.
//!
//! How a result is compared with a case's `expect` ([`compare_result`]):
//!
//! - every expected field must be present in the result; fields the case
//!   does not name are not compared;
//! - a map compares the same way inside: the expected keys must be there
//!   and match, others are ignored;
//! - an array must have the same length, each element compared by these
//!   rules in order;
//! - numbers compare by value (`1` matches `1.0`); strings, booleans and
//!   `null` must be equal (a missing field does not match `null`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{EvaluationId, JsonText, RunId, RunStatus};

/// Where a result differs from what a case expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Difference {
    /// JSON Pointer into the result, such as `/status` or `/items/0/id`.
    pub path: String,
    /// What the case expects there.
    pub expected: JsonText,
    /// What the result has there; `None` when it has nothing.
    #[schemars(description = "What the result has there; null when it has nothing (or null)")]
    pub found: Option<JsonText>,
}

/// How one case went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CaseOutcome {
    /// The run ended with a result matching every expected field.
    Passed,
    /// The result differs, or the run ended without one (its `error` says
    /// why).
    Failed,
}

impl CaseOutcome {
    /// Its name, as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            CaseOutcome::Passed => "passed",
            CaseOutcome::Failed => "failed",
        }
    }
}

impl std::fmt::Display for CaseOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One case of an evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// The agent's input.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub input: JsonText,
    /// The result fields expected.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub expect: JsonText,
    /// Passed or failed.
    pub outcome: CaseOutcome,
    /// The result the run returned, if it returned one.
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub result: Option<JsonText>,
    /// Where the result differs from `expect`; empty when it passed.
    pub differences: Vec<Difference>,
    /// Why the run ended without a result, or could not start.
    pub error: Option<String>,
    /// The shadow run, when it started.
    pub run: Option<RunId>,
    /// How the run ended.
    pub run_status: Option<RunStatus>,
    /// Model tokens the run used.
    pub tokens: u64,
    /// From the case's start to the run's end.
    pub duration_ms: u64,
}

/// One evaluation of a suite against one release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Evaluation {
    /// Its id.
    pub id: EvaluationId,
    /// The `EvalSuite`.
    pub suite: String,
    /// The agent evaluated.
    pub agent: String,
    /// The release whose definitions ran.
    #[schemars(range(min = 1))]
    pub release: u64,
    /// Evaluated before the release was active, to decide whether it may
    /// become active.
    pub candidate: bool,
    /// The suite's `passRate`.
    #[schemars(range(min = 0, max = 1))]
    pub pass_rate: f64,
    /// How many cases passed.
    pub passed: u32,
    /// Each case, in the suite's order.
    pub cases: Vec<CaseResult>,
    /// When it started, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// From its start to its last case's end.
    pub duration_ms: u64,
}

impl Evaluation {
    /// The share of cases that passed, from 0 to 1.
    pub fn rate(&self) -> f64 {
        if self.cases.is_empty() {
            return 0.0;
        }
        f64::from(self.passed) / self.cases.len() as f64
    }

    /// Whether enough cases passed for the suite's `passRate`.
    pub fn meets_pass_rate(&self) -> bool {
        // Counted, not divided: 2 of 3 meets 0.66 and 2/3.
        !self.cases.is_empty()
            && f64::from(self.passed) >= self.pass_rate * self.cases.len() as f64 - 1e-9
    }

    /// The cases that failed.
    pub fn failed(&self) -> impl Iterator<Item = &CaseResult> {
        self.cases
            .iter()
            .filter(|c| c.outcome == CaseOutcome::Failed)
    }

    /// Compares `self` (the earlier) with `later`, case by case, matched
    /// by name.
    ///
    /// # Errors
    ///
    /// [`DifferentSuites`]: the two are evaluations of different suites.
    pub fn compare(&self, later: &Evaluation) -> Result<EvaluationComparison, DifferentSuites> {
        if self.suite != later.suite {
            return Err(DifferentSuites {
                earlier: self.id.clone(),
                earlier_suite: self.suite.clone(),
                later: later.id.clone(),
                later_suite: later.suite.clone(),
            });
        }
        let mut cases = Vec::new();
        for a in &self.cases {
            let b = later.cases.iter().find(|b| b.name == a.name);
            let change = match (a.outcome, b.map(|b| b.outcome)) {
                (_, None) => CaseChange::Removed,
                (CaseOutcome::Passed, Some(CaseOutcome::Failed)) => CaseChange::Regressed,
                (CaseOutcome::Failed, Some(CaseOutcome::Passed)) => CaseChange::Fixed,
                (CaseOutcome::Failed, Some(CaseOutcome::Failed)) => CaseChange::StillFailing,
                (CaseOutcome::Passed, Some(CaseOutcome::Passed)) => CaseChange::Unchanged,
            };
            cases.push(CaseComparison {
                name: a.name.clone(),
                change,
                differences: b.map(|b| b.differences.clone()).unwrap_or_default(),
                error: b.and_then(|b| b.error.clone()),
            });
        }
        for b in &later.cases {
            if !self.cases.iter().any(|a| a.name == b.name) {
                cases.push(CaseComparison {
                    name: b.name.clone(),
                    change: CaseChange::Added,
                    differences: b.differences.clone(),
                    error: b.error.clone(),
                });
            }
        }
        Ok(EvaluationComparison {
            suite: self.suite.clone(),
            a: self.id.clone(),
            b: later.id.clone(),
            a_release: self.release,
            b_release: later.release,
            a_passed: self.passed,
            b_passed: later.passed,
            cases,
        })
    }
}

/// Two evaluations that do not compare: they are of different suites.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{earlier} evaluates suite `{earlier_suite}` and {later} suite `{later_suite}`: only evaluations of one suite compare"
)]
pub struct DifferentSuites {
    /// The earlier evaluation.
    pub earlier: EvaluationId,
    /// Its suite.
    pub earlier_suite: String,
    /// The later evaluation.
    pub later: EvaluationId,
    /// Its suite.
    pub later_suite: String,
}

/// What became of a case from one evaluation to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CaseChange {
    /// Passed before, fails now.
    Regressed,
    /// Failed before, passes now.
    Fixed,
    /// Failed both times.
    StillFailing,
    /// Passed both times.
    Unchanged,
    /// Only in the later evaluation.
    Added,
    /// Only in the earlier one.
    Removed,
}

impl CaseChange {
    /// Its name, as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            CaseChange::Regressed => "regressed",
            CaseChange::Fixed => "fixed",
            CaseChange::StillFailing => "still_failing",
            CaseChange::Unchanged => "unchanged",
            CaseChange::Added => "added",
            CaseChange::Removed => "removed",
        }
    }
}

impl std::fmt::Display for CaseChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One case of a comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CaseComparison {
    /// The case's name.
    pub name: String,
    /// What became of it.
    pub change: CaseChange,
    /// Where the later result differs from what the case expects.
    pub differences: Vec<Difference>,
    /// Why the later run ended without a result.
    pub error: Option<String>,
}

/// Two evaluations of one suite compared case by case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct EvaluationComparison {
    /// The suite.
    pub suite: String,
    /// The earlier evaluation.
    pub a: EvaluationId,
    /// The later one.
    pub b: EvaluationId,
    /// The release `a` evaluated.
    #[schemars(range(min = 1))]
    pub a_release: u64,
    /// The release `b` evaluated.
    #[schemars(range(min = 1))]
    pub b_release: u64,
    /// Cases that passed in `a`.
    pub a_passed: u32,
    /// Cases that passed in `b`.
    pub b_passed: u32,
    /// Each case: `a`'s in order, then those only `b` has.
    pub cases: Vec<CaseComparison>,
}

impl EvaluationComparison {
    /// The cases that regressed.
    pub fn regressed(&self) -> impl Iterator<Item = &CaseComparison> {
        self.cases
            .iter()
            .filter(|c| c.change == CaseChange::Regressed)
    }
}

/// Where `result` differs from `expect` (see the module's rules); empty
/// when it matches. Without a result, every expected field is missing.
pub fn compare_result(expect: &Value, result: Option<&Value>) -> Vec<Difference> {
    let mut differences = Vec::new();
    match (expect, result) {
        (Value::Object(fields), None) => {
            for (key, expected) in fields {
                differences.push(Difference {
                    path: format!("/{}", escape(key)),
                    expected: JsonText::from_value(expected),
                    found: None,
                });
            }
        }
        (_, None) => differences.push(Difference {
            path: String::new(),
            expected: JsonText::from_value(expect),
            found: None,
        }),
        (_, Some(found)) => walk(String::new(), expect, found, &mut differences),
    }
    differences
}

fn walk(path: String, expected: &Value, found: &Value, out: &mut Vec<Difference>) {
    let differ = |path: String, found: Option<&Value>, out: &mut Vec<Difference>| {
        out.push(Difference {
            path,
            expected: JsonText::from_value(expected),
            found: found.map(JsonText::from_value),
        });
    };
    match (expected, found) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, expected) in want {
                let path = format!("{path}/{}", escape(key));
                match have.get(key) {
                    Some(found) => walk(path, expected, found, out),
                    None => out.push(Difference {
                        path,
                        expected: JsonText::from_value(expected),
                        found: None,
                    }),
                }
            }
        }
        (Value::Array(want), Value::Array(have)) if want.len() == have.len() => {
            for (i, (expected, found)) in want.iter().zip(have).enumerate() {
                walk(format!("{path}/{i}"), expected, found, out);
            }
        }
        (Value::Number(want), Value::Number(have)) => {
            let equal = match (want.as_i64(), have.as_i64(), want.as_u64(), have.as_u64()) {
                (Some(a), Some(b), _, _) => a == b,
                (_, _, Some(a), Some(b)) => a == b,
                _ => want.as_f64() == have.as_f64(),
            };
            if !equal {
                differ(path, Some(found), out);
            }
        }
        (want, have) if want == have => {}
        _ => differ(path, Some(found), out),
    }
}

/// A key as a JSON Pointer token: `~` as `~0`, `/` as `~1`.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(expect: Value, result: Value) -> Vec<String> {
        compare_result(&expect, Some(&result))
            .into_iter()
            .map(|d| d.path)
            .collect()
    }

    #[test]
    fn only_expected_fields_compare_and_maps_compare_inside() {
        assert!(paths(json!({"status": "ok"}), json!({"status": "ok", "extra": 1})).is_empty());
        assert_eq!(
            paths(json!({"status": "ok"}), json!({"status": "no"})),
            ["/status"]
        );
        assert_eq!(paths(json!({"a/b~": 1}), json!({})), ["/a~1b~0"]);
        assert!(
            paths(
                json!({"vehicle": {"model": "X"}}),
                json!({"vehicle": {"model": "X", "km": 3}})
            )
            .is_empty()
        );
        assert_eq!(
            paths(json!({"vehicle": {"model": "X"}}), json!({"vehicle": "X"})),
            ["/vehicle"]
        );
        // A missing field is not null.
        let missing = compare_result(&json!({"note": null}), Some(&json!({})));
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].found, None);
    }

    #[test]
    fn arrays_compare_by_length_then_element_and_numbers_by_value() {
        assert!(paths(json!({"n": 1}), json!({"n": 1.0})).is_empty());
        assert_eq!(paths(json!({"n": 1}), json!({"n": 2})), ["/n"]);
        assert_eq!(paths(json!({"n": 1}), json!({"n": "1"})), ["/n"]);
        assert!(
            paths(
                json!({"items": [{"id": 1}, {"id": 2}]}),
                json!({"items": [{"id": 1, "x": 0}, {"id": 2}]})
            )
            .is_empty()
        );
        assert_eq!(
            paths(json!({"items": [1, 2]}), json!({"items": [1, 2, 3]})),
            ["/items"]
        );
        assert_eq!(
            paths(json!({"items": [1, 2]}), json!({"items": [1, 3]})),
            ["/items/1"]
        );
        assert!(paths(json!({"big": u64::MAX}), json!({"big": u64::MAX})).is_empty());
        assert_eq!(
            paths(json!({"big": u64::MAX}), json!({"big": u64::MAX - 1})),
            ["/big"]
        );
    }

    #[test]
    fn no_result_misses_every_expected_field() {
        let d = compare_result(&json!({"status": "ok", "lessee": "K"}), None);
        let paths: Vec<_> = d.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["/lessee", "/status"]);
    }

    fn case(name: &str, outcome: CaseOutcome) -> CaseResult {
        CaseResult {
            name: name.to_owned(),
            input: JsonText::parse("{}").unwrap(),
            expect: JsonText::parse(r#"{"status":"ok"}"#).unwrap(),
            outcome,
            result: None,
            differences: Vec::new(),
            error: None,
            run: None,
            run_status: None,
            tokens: 0,
            duration_ms: 1,
        }
    }

    fn evaluation(release: u64, cases: Vec<CaseResult>) -> Evaluation {
        Evaluation {
            id: EvaluationId::new(),
            suite: "s".to_owned(),
            agent: "a".to_owned(),
            release,
            candidate: false,
            pass_rate: 1.0,
            passed: cases
                .iter()
                .filter(|c| c.outcome == CaseOutcome::Passed)
                .count() as u32,
            cases,
            created_at_ms: 5,
            duration_ms: 9,
        }
    }

    #[test]
    fn two_evaluations_compare_case_by_case() {
        use CaseOutcome::{Failed, Passed};
        let a = evaluation(
            1,
            vec![
                case("one", Passed),
                case("two", Failed),
                case("three", Failed),
                case("four", Passed),
                case("gone", Passed),
            ],
        );
        let b = evaluation(
            2,
            vec![
                case("one", Failed),
                case("two", Passed),
                case("three", Failed),
                case("four", Passed),
                case("new", Passed),
            ],
        );
        let c = a.compare(&b).unwrap();
        let changes: Vec<_> = c
            .cases
            .iter()
            .map(|c| (c.name.as_str(), c.change))
            .collect();
        assert_eq!(
            changes,
            [
                ("one", CaseChange::Regressed),
                ("two", CaseChange::Fixed),
                ("three", CaseChange::StillFailing),
                ("four", CaseChange::Unchanged),
                ("gone", CaseChange::Removed),
                ("new", CaseChange::Added),
            ]
        );
        assert_eq!(c.regressed().count(), 1);
        let mut other = b.clone();
        other.suite = "t".to_owned();
        let refused = a.compare(&other).unwrap_err();
        assert!(refused.to_string().contains("suite `t`"), "{refused}");
    }

    #[test]
    fn the_pass_rate_is_met_by_count() {
        use CaseOutcome::{Failed, Passed};
        let mut e = evaluation(
            1,
            vec![case("a", Passed), case("b", Passed), case("c", Failed)],
        );
        e.pass_rate = 2.0 / 3.0;
        assert!(e.meets_pass_rate());
        e.pass_rate = 0.67;
        assert!(!e.meets_pass_rate());
        e.pass_rate = 1.0;
        assert!(!e.meets_pass_rate());
        e.cases.pop();
        assert!(e.meets_pass_rate());
        assert_eq!(crate::round_trip(&e), e);
    }
}
