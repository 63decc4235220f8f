//! Scripts for the `scripted` driver: the steps, the conditions that skip
//! them, and the `${PATH}` templates that feed the run's input and earlier
//! steps' outputs into a step's input.
//!
//! A step runs when its `when` holds (or has none), calls its tool with its
//! rendered `input`, and, when it has an `id`, keeps the tool's output under
//! `steps.ID` for later steps. A run ends at the first `submit_result` that
//! runs (or, for a review agent, the first `submit_review`).
//!
//! Templates only look values up; they never evaluate code.
//!
//! | text in `input` | becomes |
//! |---|---|
//! | `"${input.vehicle}"` (the whole string) | the value at the path, keeping its type |
//! | `"Vehicle ${input.vehicle} not found"` | the text with the value spliced in: strings as they are, other values as compact JSON |
//! | `"$${input.vehicle}"` | the literal text `${input.vehicle}` |
//!
//! A PATH is dotted text. It starts with `input` (the run's input) or
//! `steps.ID` (the output of the earlier step with that id); the rest walks
//! into that value, numeric segments indexing arrays:
//! `steps.find.records.0.model`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::manifest::FieldProblem;
use hane_core::tool::{SUBMIT_RESULT, SUBMIT_REVIEW};

/// The most bytes one rendered step input may hold (1 MiB), counted as
/// compact JSON. A template can name a large tool output many times; this
/// keeps that from growing memory without bound.
pub const MAX_RENDERED_BYTES: usize = 1 << 20;

/// One step of a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptStep {
    /// The name later steps use for this step's output (`steps.ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool to call.
    pub tool: String,
    /// The tool's input, a map whose strings may hold `${PATH}` templates;
    /// `{}` when absent.
    #[serde(default = "empty_object")]
    pub input: Value,
    /// When present, the step runs only if this holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// When a step runs. Written as a map with exactly one key:
///
/// ```yaml
/// when: { empty: steps.find.records }
/// when: { notEmpty: input.note }
/// when: { equals: { path: steps.check.status, value: ok } }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// The path is missing, or holds null, `""`, `[]` or `{}`.
    Empty(ValuePath),
    /// The opposite of [`Condition::Empty`].
    NotEmpty(ValuePath),
    /// The path holds `value` (numbers compare by value: `1` equals
    /// `1.0`). A missing path equals nothing.
    Equals {
        /// Where to look.
        path: ValuePath,
        /// What it must hold.
        value: Value,
    },
}

/// The YAML form of a [`Condition`]. serde_yaml_ng reads enums only from
/// YAML tags (`!empty x`), so the map form goes through this struct.
#[derive(Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    deny_unknown_fields,
    expecting = "a condition: a map with one of `empty`, `notEmpty` or `equals`"
)]
struct ConditionMap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    empty: Option<ValuePath>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    not_empty: Option<ValuePath>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    equals: Option<EqualsMap>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EqualsMap {
    path: ValuePath,
    value: Value,
}

impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match ConditionMap::deserialize(d)? {
            ConditionMap {
                empty: Some(path),
                not_empty: None,
                equals: None,
            } => Ok(Condition::Empty(path)),
            ConditionMap {
                empty: None,
                not_empty: Some(path),
                equals: None,
            } => Ok(Condition::NotEmpty(path)),
            ConditionMap {
                empty: None,
                not_empty: None,
                equals: Some(EqualsMap { path, value }),
            } => Ok(Condition::Equals { path, value }),
            _ => Err(serde::de::Error::custom(
                "expected exactly one of `empty`, `notEmpty` or `equals`",
            )),
        }
    }
}

impl Serialize for Condition {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (empty, not_empty, equals) = match self {
            Condition::Empty(path) => (Some(path.clone()), None, None),
            Condition::NotEmpty(path) => (None, Some(path.clone()), None),
            Condition::Equals { path, value } => (
                None,
                None,
                Some(EqualsMap {
                    path: path.clone(),
                    value: value.clone(),
                }),
            ),
        };
        ConditionMap {
            empty,
            not_empty,
            equals,
        }
        .serialize(s)
    }
}

impl Condition {
    /// The path the condition looks at.
    pub fn path(&self) -> &ValuePath {
        match self {
            Condition::Empty(path) | Condition::NotEmpty(path) => path,
            Condition::Equals { path, .. } => path,
        }
    }

    /// The name of the condition's path field within `when`, for errors.
    pub(crate) fn field(&self) -> &'static str {
        match self {
            Condition::Empty(_) => "when.empty",
            Condition::NotEmpty(_) => "when.notEmpty",
            Condition::Equals { .. } => "when.equals.path",
        }
    }
}

/// A well-formed PATH: `input` or `steps.ID`, then dotted segments.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValuePath(String);

impl ValuePath {
    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The step id, for a path into a step's output (`steps.ID...`).
    pub fn step(&self) -> Option<&str> {
        let mut segments = self.0.split('.');
        (segments.next() == Some("steps")).then(|| segments.next().unwrap_or_default())
    }
}

impl FromStr for ValuePath {
    type Err = TemplateError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: &str| TemplateError::InvalidPath {
            path: s.to_owned(),
            reason: reason.to_owned(),
        };
        let mut segments = s.split('.');
        match segments.next() {
            Some("input") => {}
            Some("steps") => {
                let id = segments.next().unwrap_or_default();
                check_step_id(id).map_err(|reason| invalid(&reason.to_string()))?;
            }
            _ => return Err(invalid("it must start with `input` or `steps`")),
        }
        for segment in segments {
            if segment.is_empty() {
                return Err(invalid("it has an empty segment"));
            }
            if let Some(c) = segment
                .chars()
                .find(|c| c.is_whitespace() || matches!(c, '$' | '{' | '}'))
            {
                return Err(invalid(&format!("a segment holds `{c}`")));
            }
        }
        Ok(Self(s.to_owned()))
    }
}

impl fmt::Display for ValuePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for ValuePath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ValuePath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Step ids: a letter, then letters, digits, `_` or `-`; no dots, since
/// they are segments of paths.
pub(crate) fn check_step_id(id: &str) -> Result<(), FieldProblem> {
    let mut chars = id.chars();
    match chars.next() {
        None => Err(FieldProblem::NoStepId),
        Some(c) if !c.is_ascii_alphabetic() => Err(FieldProblem::StepIdStart(id.to_owned())),
        _ if chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') => Ok(()),
        _ => Err(FieldProblem::StepIdChars(id.to_owned())),
    }
}

/// A template or path that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// A `${` without its `}`.
    #[error("unterminated `${{` in `{text}`; write `$${{` for a literal `${{`")]
    Unterminated {
        /// The string holding it.
        text: String,
    },
    /// A path that is not well formed.
    #[error("invalid path `{path}`: {reason}")]
    InvalidPath {
        /// The path as written.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A path with no value in the scope.
    #[error("no value at `{path}`: {reason}")]
    Missing {
        /// The path as written.
        path: String,
        /// Where the lookup stopped, such as ``step `find` has not run``.
        reason: String,
    },
    /// The rendered input would exceed [`MAX_RENDERED_BYTES`].
    #[error("the rendered input is larger than {MAX_RENDERED_BYTES} bytes")]
    TooLarge,
}

/// A piece of a template string.
enum Piece<'a> {
    Text(&'a str),
    Value(ValuePath),
}

/// Splits a string into text and `${PATH}` pieces.
fn pieces(text: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        let after = &rest[i + 1..];
        if let Some(escaped) = after.strip_prefix("${") {
            // `$${` is a literal `${`.
            out.push(Piece::Text(&rest[..i]));
            out.push(Piece::Text("${"));
            rest = escaped;
        } else if let Some(inner) = after.strip_prefix('{') {
            let Some(end) = inner.find('}') else {
                return Err(TemplateError::Unterminated {
                    text: text.to_owned(),
                });
            };
            out.push(Piece::Text(&rest[..i]));
            out.push(Piece::Value(inner[..end].parse()?));
            rest = &inner[end + 1..];
        } else {
            out.push(Piece::Text(&rest[..=i]));
            rest = after;
        }
    }
    out.push(Piece::Text(rest));
    out.retain(|p| !matches!(p, Piece::Text("")));
    Ok(out)
}

/// An error in a script, found before it runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("script[{step}]{}{field}: {message}", if field.is_empty() { "" } else { "." })]
pub struct ScriptError {
    /// The index of the step.
    pub step: usize,
    /// The field within the step, such as `when.empty` or
    /// `input.match.registration`; empty for the step itself.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Checks a script before it runs: step ids well formed and distinct,
/// every `${` closed, every path well formed, every `steps.ID` naming an
/// earlier step with that id, no step after an unconditional
/// `submit_result` or `submit_review` (which end a run), and a last step
/// that is one of those without `when`, so every run that gets there
/// returns a result or, for a review agent, a decision. An empty script
/// passes; whether one is needed is the agent's business.
///
/// # Errors
///
/// The first problem, naming the step and the field within it.
pub fn check_script(steps: &[ScriptStep]) -> Result<(), ScriptError> {
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    let all_ids: BTreeMap<&str, usize> = steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((s.id.as_deref()?, i)))
        .collect();
    for (i, step) in steps.iter().enumerate() {
        let fail = |field: &str, message: String| ScriptError {
            step: i,
            field: field.to_owned(),
            message,
        };
        if let Some(j) = steps[..i]
            .iter()
            .position(|s| ends_run(&s.tool) && s.when.is_none())
        {
            return Err(fail(
                "",
                format!(
                    "unreachable: step {j} always calls `{}`, which ends the run",
                    steps[j].tool
                ),
            ));
        }
        if step.tool.trim().is_empty() {
            return Err(fail("tool", "must not be empty".to_owned()));
        }
        let refers =
            |field: &str, path: &ValuePath| check_reference(i, field, path, &ids, &all_ids);
        if let Some(when) = &step.when {
            refers(when.field(), when.path())?;
        }
        if !step.input.is_object() {
            return Err(fail("input", "must be a map".to_owned()));
        }
        check_templates(i, &step.input, &refers)?;
        if let Some(id) = &step.id {
            check_step_id(id).map_err(|m| fail("id", m.to_string()))?;
            if let Some(j) = ids.insert(id, i) {
                return Err(fail("id", format!("step {j} already has id `{id}`")));
            }
        }
    }
    if let Some(last) = steps.last()
        && (!ends_run(&last.tool) || last.when.is_some())
    {
        return Err(ScriptError {
            step: steps.len() - 1,
            field: String::new(),
            message: format!(
                "a script must end with a `{SUBMIT_RESULT}` step (or, for a review agent, `{SUBMIT_REVIEW}`) without `when`, so every run returns a result"
            ),
        });
    }
    Ok(())
}

/// Checks that `path`, used in `field` of step `i`, names no step or one
/// of the steps before it (`earlier`, by id; `all` has every step's id).
pub(crate) fn check_reference(
    i: usize,
    field: &str,
    path: &ValuePath,
    earlier: &BTreeMap<&str, usize>,
    all: &BTreeMap<&str, usize>,
) -> Result<(), ScriptError> {
    let Some(id) = path.step() else {
        return Ok(());
    };
    if earlier.contains_key(id) {
        return Ok(());
    }
    let message = match all.get(id) {
        Some(&j) if j == i => {
            format!("`{path}` names this step; a step can use only the output of earlier steps")
        }
        Some(&j) => format!(
            "`{path}` names step {j}, which runs later; a step can use only the output of earlier steps"
        ),
        None => format!("`{path}`: no earlier step has id `{id}`"),
    };
    Err(ScriptError {
        step: i,
        field: field.to_owned(),
        message,
    })
}

/// Checks every template in the strings of step `i`'s `input`: each parses,
/// and each value it splices in passes `refers`. The first error wins.
pub(crate) fn check_templates(
    i: usize,
    input: &Value,
    refers: &dyn Fn(&str, &ValuePath) -> Result<(), ScriptError>,
) -> Result<(), ScriptError> {
    let mut failure = None;
    each_string(input, &mut "input".to_owned(), &mut |field, text| {
        if failure.is_some() {
            return;
        }
        let result = pieces(text)
            .map_err(|e| ScriptError {
                step: i,
                field: field.to_owned(),
                message: e.to_string(),
            })
            .and_then(|pieces| {
                pieces.iter().try_for_each(|p| match p {
                    Piece::Value(path) => refers(field, path),
                    Piece::Text(_) => Ok(()),
                })
            });
        failure = result.err();
    });
    failure.map_or(Ok(()), Err)
}

/// Whether a successful call of `tool` ends the run: an agent's
/// `submit_result`, or a review agent's `submit_review`.
fn ends_run(tool: &str) -> bool {
    tool == SUBMIT_RESULT || tool == SUBMIT_REVIEW
}

/// Calls `f` with the field path (`input.match.registration`) and text of
/// every string in `value`; map keys are not templates.
fn each_string(value: &Value, field: &mut String, f: &mut dyn FnMut(&str, &str)) {
    let len = field.len();
    match value {
        Value::String(text) => f(field, text),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                field.push_str(&format!("[{i}]"));
                each_string(item, field, f);
                field.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                field.push('.');
                field.push_str(key);
                each_string(item, field, f);
                field.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// What a script's templates and conditions can see while it runs: the
/// run's input and the outputs of the steps that ran and have an id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scope {
    /// The run's input (`input`).
    pub input: Value,
    /// Outputs by step id (`steps.ID`).
    pub steps: BTreeMap<String, Value>,
}

impl Scope {
    /// A scope holding the run's input and no step outputs yet.
    pub fn new(input: Value) -> Self {
        Self {
            input,
            steps: BTreeMap::new(),
        }
    }

    /// Keeps a step's output for later steps, when the step has an id.
    pub fn record(&mut self, step: &ScriptStep, output: Value) {
        if let Some(id) = &step.id {
            self.steps.insert(id.clone(), output);
        }
    }

    /// The value at `path`.
    ///
    /// # Errors
    ///
    /// [`TemplateError::Missing`], saying where the lookup stopped.
    pub fn get(&self, path: &ValuePath) -> Result<&Value, TemplateError> {
        let missing = |reason: String| TemplateError::Missing {
            path: path.to_string(),
            reason,
        };
        let mut segments = path.as_str().split('.');
        let (mut value, mut at) = match segments.next() {
            Some("steps") => {
                let id = segments.next().unwrap_or_default();
                let value = self
                    .steps
                    .get(id)
                    .ok_or_else(|| missing(format!("step `{id}` has not run")))?;
                (value, format!("steps.{id}"))
            }
            _ => (&self.input, "input".to_owned()),
        };
        for segment in segments {
            let next = match value {
                Value::Object(map) => map
                    .get(segment)
                    .ok_or_else(|| missing(format!("`{at}` has no `{segment}`"))),
                Value::Array(items) => segment
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get(i))
                    .ok_or_else(|| {
                        missing(format!(
                            "`{at}` is an array of {} items, with no `{segment}`",
                            items.len()
                        ))
                    }),
                other => Err(missing(format!(
                    "`{at}` is {}, not a map or array",
                    kind(other)
                ))),
            };
            value = next?;
            at.push('.');
            at.push_str(segment);
        }
        Ok(value)
    }

    /// Renders a step's `input`: every `${PATH}` replaced as the module
    /// docs describe. Map keys are left as they are.
    ///
    /// # Errors
    ///
    /// A malformed template, a path with no value, or an input larger than
    /// [`MAX_RENDERED_BYTES`].
    pub fn render(&self, template: &Value) -> Result<Value, TemplateError> {
        let mut budget = Budget(MAX_RENDERED_BYTES);
        self.render_value(template, &mut budget)
    }

    fn render_value(&self, template: &Value, budget: &mut Budget) -> Result<Value, TemplateError> {
        Ok(match template {
            Value::String(text) => self.render_string(text, budget)?,
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.render_value(item, budget))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, item)| {
                        budget.spend(key.len())?;
                        Ok((key.clone(), self.render_value(item, budget)?))
                    })
                    .collect::<Result<_, TemplateError>>()?,
            ),
            other => {
                budget.spend_json(other)?;
                other.clone()
            }
        })
    }

    fn render_string(&self, text: &str, budget: &mut Budget) -> Result<Value, TemplateError> {
        let pieces = pieces(text)?;
        if let [Piece::Value(path)] = pieces.as_slice() {
            let value = self.get(path)?;
            budget.spend_json(value)?;
            return Ok(value.clone());
        }
        let mut out = String::new();
        for piece in &pieces {
            match piece {
                Piece::Text(text) => {
                    budget.spend(text.len())?;
                    out.push_str(text);
                }
                Piece::Value(path) => match self.get(path)? {
                    Value::String(s) => {
                        budget.spend(s.len())?;
                        out.push_str(s);
                    }
                    other => {
                        budget.spend_json(other)?;
                        out.push_str(&other.to_string());
                    }
                },
            }
        }
        Ok(Value::String(out))
    }

    /// Whether `condition` holds.
    pub fn holds(&self, condition: &Condition) -> bool {
        match condition {
            Condition::Empty(path) => is_empty(self.get(path)),
            Condition::NotEmpty(path) => !self.holds(&Condition::Empty(path.clone())),
            Condition::Equals { path, value } => self.get(path).is_ok_and(|v| same(v, value)),
        }
    }
}

fn is_empty(value: Result<&Value, TemplateError>) -> bool {
    match value {
        Err(_) | Ok(Value::Null) => true,
        Ok(Value::String(s)) => s.is_empty(),
        Ok(Value::Array(items)) => items.is_empty(),
        Ok(Value::Object(map)) => map.is_empty(),
        Ok(Value::Bool(_) | Value::Number(_)) => false,
    }
}

/// JSON equality, except that numbers compare by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a map",
    }
}

/// Bytes a rendering may still produce.
struct Budget(usize);

impl Budget {
    fn spend(&mut self, bytes: usize) -> Result<(), TemplateError> {
        self.0 = self.0.checked_sub(bytes).ok_or(TemplateError::TooLarge)?;
        Ok(())
    }

    /// Spends the compact JSON size of `value`, stopping as soon as the
    /// budget runs out rather than serializing all of it.
    fn spend_json(&mut self, value: &Value) -> Result<(), TemplateError> {
        serde_json::to_writer(&mut *self, value).map_err(|_| TemplateError::TooLarge)
    }
}

impl std::io::Write for Budget {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.spend(buf.len())
            .map_err(|_| std::io::Error::other("too large"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn scope() -> Scope {
        let mut scope = Scope::new(json!({ "vehicle": "架空 300 あ 10-02", "n": 3 }));
        scope.steps.insert(
            "find".to_owned(),
            json!({ "records": [{ "model": "Hiace", "mileage_km": 48210, "tags": ["a"] }] }),
        );
        scope
            .steps
            .insert("none".to_owned(), json!({ "records": [] }));
        scope
    }

    fn path(s: &str) -> ValuePath {
        s.parse().unwrap()
    }

    #[test]
    fn a_whole_string_template_keeps_the_type() {
        let out = scope()
            .render(&json!({
                "km": "${steps.find.records.0.mileage_km}",
                "record": "${steps.find.records.0}",
                "n": "${input.n}",
                "fixed": 7,
            }))
            .unwrap();
        assert_eq!(out["km"], json!(48210));
        assert_eq!(out["record"]["tags"], json!(["a"]));
        assert_eq!(out["n"], json!(3));
        assert_eq!(out["fixed"], json!(7));
    }

    #[test]
    fn templates_within_text_are_spliced_in_as_text() {
        let out = scope()
            .render(&json!({
                "reason": "Vehicle ${input.vehicle} is not in the fleet ledger",
                "detail": "km=${steps.find.records.0.mileage_km} tags=${steps.find.records.0.tags}",
                "list": ["${input.n} items", "$"],
            }))
            .unwrap();
        assert_eq!(
            out["reason"],
            json!("Vehicle 架空 300 あ 10-02 is not in the fleet ledger")
        );
        assert_eq!(out["detail"], json!("km=48210 tags=[\"a\"]"));
        assert_eq!(out["list"], json!(["3 items", "$"]));
    }

    #[test]
    fn a_doubled_dollar_escapes_a_template() {
        let out = scope()
            .render(&json!({ "a": "$${input.n}", "b": "cost: $5, ${input.n}$", "c": "$$x" }))
            .unwrap();
        assert_eq!(
            out,
            json!({ "a": "${input.n}", "b": "cost: $5, 3$", "c": "$$x" })
        );
    }

    #[test]
    fn a_missing_path_is_an_error_naming_the_path_and_the_step() {
        let scope = scope();
        let err = scope
            .render(&json!({ "m": "${steps.none.records.0.model}" }))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no value at `steps.none.records.0.model`: `steps.none.records` is an array of 0 items, with no `0`"
        );
        let err = scope.render(&json!("x ${steps.later.y}")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no value at `steps.later.y`: step `later` has not run"
        );
        let err = scope.render(&json!("${input.nope}")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no value at `input.nope`: `input` has no `nope`"
        );
        let err = scope.render(&json!("${input.n.x}")).unwrap_err();
        assert!(err.to_string().contains("`input.n` is a number"), "{err}");
    }

    #[test]
    fn malformed_templates_are_errors() {
        let err = scope().render(&json!("a ${input.n")).unwrap_err();
        assert!(matches!(err, TemplateError::Unterminated { .. }), "{err}");
        let err = scope().render(&json!("${output.n}")).unwrap_err();
        assert!(
            err.to_string()
                .contains("must start with `input` or `steps`")
        );
        let err = scope().render(&json!("${input..n}")).unwrap_err();
        assert!(err.to_string().contains("empty segment"));
        let err = scope().render(&json!("${steps}")).unwrap_err();
        assert!(err.to_string().contains("must follow `steps`"));
    }

    #[test]
    fn rendering_is_capped() {
        let mut scope = Scope::new(json!({ "big": "x".repeat(MAX_RENDERED_BYTES / 4) }));
        scope.steps.clear();
        assert!(scope.render(&json!(vec!["${input.big}"; 3])).is_ok());
        assert_eq!(
            scope.render(&json!(vec!["${input.big}"; 5])),
            Err(TemplateError::TooLarge)
        );
        assert_eq!(
            scope.render(&json!(vec!["a ${input.big}"; 5])),
            Err(TemplateError::TooLarge)
        );
    }

    #[test]
    fn conditions() {
        let scope = scope();
        let empty = |p: &str| scope.holds(&Condition::Empty(path(p)));
        assert!(empty("steps.none.records"));
        assert!(empty("steps.missing.records"));
        assert!(empty("input.nope"));
        assert!(!empty("steps.find.records"));
        assert!(!empty("input.n"));
        assert!(scope.holds(&Condition::NotEmpty(path("steps.find.records.0.model"))));
        assert!(!scope.holds(&Condition::NotEmpty(path("steps.none.records.0"))));
        let equals = |p: &str, value: Value| {
            scope.holds(&Condition::Equals {
                path: path(p),
                value,
            })
        };
        assert!(equals("steps.find.records.0.model", json!("Hiace")));
        assert!(equals("input.n", json!(3.0)));
        assert!(!equals("input.n", json!("3")));
        assert!(!equals("input.nope", json!(null)));
        assert!(equals("steps.find.records.0.tags", json!(["a"])));
    }

    #[test]
    fn conditions_read_from_yaml_maps() {
        let step: ScriptStep =
            serde_yaml_ng::from_str("tool: x\nwhen: { equals: { path: input.n, value: 3 } }\n")
                .unwrap();
        assert_eq!(
            step.when,
            Some(Condition::Equals {
                path: path("input.n"),
                value: json!(3)
            })
        );
        assert_eq!(step.input, json!({}));
        let text = serde_yaml_ng::to_string(&step).unwrap();
        assert_eq!(serde_yaml_ng::from_str::<ScriptStep>(&text).unwrap(), step);

        let step: ScriptStep =
            serde_yaml_ng::from_str("tool: x\nwhen: { notEmpty: steps.a.b }\n").unwrap();
        assert_eq!(step.when, Some(Condition::NotEmpty(path("steps.a.b"))));

        for bad in [
            "tool: x\nwhen: { empty: input.a, notEmpty: input.b }\n",
            "tool: x\nwhen: {}\n",
            "tool: x\nwhen: { full: input.a }\n",
            "tool: x\nwhen: { equals: { path: input.a } }\n",
            "tool: x\nwhen: { empty: inputs.a }\n",
        ] {
            assert!(serde_yaml_ng::from_str::<ScriptStep>(bad).is_err(), "{bad}");
        }
    }

    fn steps(yaml: &str) -> Vec<ScriptStep> {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn a_good_script_passes() {
        let script = steps(
            "
- id: find
  tool: data.find_record
  input: { match: { registration: '${input.vehicle}' } }
- when: { empty: steps.find.records }
  tool: submit_result
  input: { status: handed_over }
- tool: submit_result
  input: { status: found, model: '${steps.find.records.0.model}' }
",
        );
        check_script(&script).unwrap();
        check_script(&[]).unwrap();
    }

    #[test]
    fn script_errors_name_the_step_and_field() {
        let check = |yaml: &str| check_script(&steps(yaml)).unwrap_err().to_string();
        assert_eq!(
            check(
                "
- tool: a
  input: { x: ['${steps.later.y}'] }
- id: later
  tool: b
- tool: submit_result
"
            ),
            "script[0].input.x[0]: `steps.later.y` names step 1, which runs later; a step can use only the output of earlier steps"
        );
        assert_eq!(
            check("- id: a\n  tool: x\n  when: { empty: steps.a }\n- tool: submit_result\n"),
            "script[0].when.empty: `steps.a` names this step; a step can use only the output of earlier steps"
        );
        assert_eq!(
            check("- tool: x\n  input: { a: '${steps.who.b}' }\n- tool: submit_result\n"),
            "script[0].input.a: `steps.who.b`: no earlier step has id `who`"
        );
        assert!(
            check("- tool: x\n  input: { a: 'b ${input.c' }\n- tool: submit_result\n")
                .starts_with("script[0].input.a: unterminated `${`")
        );
        assert_eq!(
            check("- id: a\n  tool: x\n- id: a\n  tool: y\n- tool: submit_result\n"),
            "script[1].id: step 0 already has id `a`"
        );
        assert_eq!(
            check("- tool: submit_result\n- tool: x\n"),
            "script[1]: unreachable: step 0 always calls `submit_result`, which ends the run"
        );
        assert!(
            check("- tool: x\n").starts_with("script[0]: a script must end with a `submit_result`")
        );
        // A review agent's run ends with its decision instead.
        assert!(check_script(&steps("- tool: x\n- tool: submit_review\n")).is_ok());
        assert_eq!(
            check("- tool: submit_review\n- tool: submit_result\n"),
            "script[1]: unreachable: step 0 always calls `submit_review`, which ends the run"
        );
        assert_eq!(
            check("- tool: x\n- tool: submit_review\n  when: { empty: input.x }\n"),
            "script[1]: a script must end with a `submit_result` step (or, for a review agent, `submit_review`) without `when`, so every run returns a result"
        );
        assert_eq!(
            check("- tool: x\n  input: [1]\n- tool: submit_result\n"),
            "script[0].input: must be a map"
        );
        assert!(
            check("- id: 1a\n  tool: x\n- tool: submit_result\n")
                .starts_with("script[0].id: step id `1a` must start with a letter")
        );
    }
}
