//! The manifests of `agents/v1alpha1`: `Agent`, a definition with a
//! purpose, the tools it may use, limits and schemas, and `EvalSuite`, the
//! cases an agent is evaluated on.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::manifest::{FieldProblem, Source};
use crate::{ManifestError, Metadata};
use crate::{ScriptStep, script::check_script};
use hane_core::tool::CONTROL_TOOLS;
use hane_core::tool::OUTBOUND_TOOLS;
use hane_core::tool::REQUEST_HUMAN_HELP;
use hane_core::tool::SUBMIT_RESULT;

/// The `apiVersion` of agent and evaluation manifests.
pub const AGENTS_API_VERSION: &str = "agents/v1alpha1";

/// The most cases an `EvalSuite` may list.
pub const MAX_EVAL_CASES: usize = 50;

/// An `Agent` manifest (`agents/v1alpha1`).
///
/// # Examples
///
/// ```
/// use hane_manifest::{AgentManifest, Driver};
///
/// let agent = AgentManifest::from_yaml("agent.yaml", r#"
/// apiVersion: agents/v1alpha1
/// kind: Agent
/// metadata:
///   name: greeter
/// spec:
///   purpose: Greet someone
///   input: { type: object, properties: { name: { type: string } } }
///   output: { type: object, required: [status] }
///   driver: scripted
///   script:
///     - tool: submit_result
///       input: { status: done, greeting: "Hello, ${input.name}" }
/// "#).unwrap();
/// assert_eq!(agent.spec.driver, Driver::Scripted);
/// assert_eq!(agent.spec.limits.max_tool_calls, 20);
/// assert!(agent.spec.allows("submit_result"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentManifest {
    /// Must be `agents/v1alpha1`.
    pub api_version: String,
    /// Must be `Agent`.
    pub kind: String,
    /// The name: lowercase letters, digits and `-`, starting with a letter.
    pub metadata: Metadata,
    /// What the agent is and may do.
    pub spec: AgentSpec,
}

/// `spec` of an `Agent` manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentSpec {
    /// What the agent does; reception also uses it to pick an agent.
    pub purpose: String,
    /// Example requests, for reception.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// JSON Schema of the input, an object.
    pub input: Value,
    /// JSON Schema of the result returned with `submit_result`, an object
    /// that requires `status`.
    pub output: Value,
    /// How the agent runs.
    pub driver: Driver,
    /// Instructions for the model, for the drivers that use one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The model the drivers that use one call, as `MODEL` or
    /// `PROVIDER/MODEL` of a `ModelProvider` in the same release; the
    /// release's default model when absent. hane's extension to the
    /// agent manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The steps of the `scripted` driver; only for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub script: Vec<ScriptStep>,
    /// The tools the agent may call; the Tool Gateway checks every call
    /// against this list. [`SUBMIT_RESULT`] needs no entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Caps on one run.
    #[serde(default)]
    pub limits: AgentLimits,
    /// Who approves the agent's outbound actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// Who takes work the agent hands over; needed for
    /// [`REQUEST_HUMAN_HELP`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover: Option<Handover>,
    /// Workflows the agent may start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workflows: Vec<String>,
    /// The `Connection`s (customer APIs) the agent may use through
    /// `integration.describe`, `integration.read` and
    /// `integration.execute`, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<String>,
    /// The `ToolExposure`s whose tools the agent may call, by name; each
    /// exposure's tool is also listed in `tools`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_exposures: Vec<String>,
    /// The CLI version and sandbox image of a CLI driver; each driver's
    /// baseline pair when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli_profile: Option<CliProfile>,
    /// Whether runs skip outbound actions and handovers and only keep a
    /// record.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shadow: bool,
}

/// What runs an agent. Every driver calls tools through the same Tool
/// Gateway and returns its result with `submit_result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// Calls tools in the order of the `script`; uses no model.
    Scripted,
    /// Lets a model choose the tools.
    Llm,
    /// The open-source opencode harness in a sandbox container.
    Opencode,
    /// Codex CLI on a developer's machine, with only hane's tools.
    Codex,
    /// Claude Code on a developer's machine, with only hane's tools.
    Claude,
}

impl Driver {
    /// Every driver, in the order the manifest documentation lists them.
    pub const ALL: [Driver; 5] = [
        Driver::Scripted,
        Driver::Llm,
        Driver::Opencode,
        Driver::Codex,
        Driver::Claude,
    ];

    /// The name written in manifests, such as `scripted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::Scripted => "scripted",
            Driver::Llm => "llm",
            Driver::Opencode => "opencode",
            Driver::Codex => "codex",
            Driver::Claude => "claude",
        }
    }

    /// Whether the driver runs a CLI harness (`opencode`, `codex`,
    /// `claude`), which `cliProfile` configures.
    pub fn is_cli(self) -> bool {
        matches!(self, Driver::Opencode | Driver::Codex | Driver::Claude)
    }

    /// Whether runs use a model, and so reserve `maxModelTokens` from the
    /// daily budget.
    pub fn uses_model(self) -> bool {
        self != Driver::Scripted
    }

    /// Whether this build can run the driver: every driver, since the
    /// CLI drivers came. A CLI driver's run still needs its CLI and a
    /// container runtime configured in the host; a run without them is
    /// refused when it starts, naming what is missing.
    pub fn is_available_in_this_build(self) -> bool {
        match self {
            Driver::Scripted | Driver::Llm | Driver::Opencode | Driver::Codex | Driver::Claude => {
                true
            }
        }
    }

    /// `Ok` when this build can run the driver.
    ///
    /// # Errors
    ///
    /// [`DriverUnavailable`], saying what the driver comes with.
    pub fn check_available(self) -> Result<(), DriverUnavailable> {
        if self.is_available_in_this_build() {
            Ok(())
        } else {
            Err(DriverUnavailable(self))
        }
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run was asked of a driver this build does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("driver `{0}` is not available in this build; it comes with the CLI drivers")]
pub struct DriverUnavailable(pub Driver);

/// Caps on one run of an agent. Absent fields take their defaults; none
/// may be zero.
///
/// | YAML | default |
/// |---|---|
/// | `maxToolCalls` | 20 |
/// | `maxSeconds` | 300 |
/// | `maxModelTokens` | 50,000 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AgentLimits {
    /// Tool calls, `submit_result` included.
    pub max_tool_calls: u32,
    /// Wall-clock seconds from start to result.
    pub max_seconds: u64,
    /// Model tokens, input and output together.
    pub max_model_tokens: u64,
}

impl Default for AgentLimits {
    fn default() -> Self {
        Self {
            max_tool_calls: 20,
            max_seconds: 300,
            max_model_tokens: 50_000,
        }
    }
}

impl AgentLimits {
    /// [`AgentLimits::max_seconds`] as a duration.
    pub fn max_duration(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.max_seconds)
    }
}

/// `approval`: who may approve the agent's outbound actions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Approval {
    /// The name of the `DeciderPolicy` of the bundle that decides who
    /// approves each action; a person decides every action when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decider: Option<String>,
    /// Where approval tasks for people are assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment: Option<String>,
}

/// `handover`: who takes work the agent hands over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Handover {
    /// Where handover tasks are assigned, such as `fleet-desk`.
    pub assignment: String,
}

/// `cliProfile`: the pair of CLI version and sandbox image a CLI driver
/// runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CliProfile {
    /// The CLI's version, such as `0.4.2`.
    pub cli_version: String,
    /// The digest of the root-filesystem image the CLI runs in
    /// (`sha256:` and 64 lowercase hex digits), as `hane image build`
    /// prints it.
    pub image: String,
}

/// An image is named by its digest, so that what a release runs is fixed
/// by the release: `sha256:` and 64 lowercase hex digits.
fn check_image_digest(image: &str) -> Result<(), FieldProblem> {
    let digits = image.strip_prefix("sha256:").unwrap_or_default();
    if digits.len() == 64
        && digits
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        Ok(())
    } else {
        Err(FieldProblem::ImageDigest(image.to_owned()))
    }
}

impl AgentManifest {
    /// Parses and validates an `Agent` manifest; `file` names it in errors.
    ///
    /// Beyond the fields' types, it checks that:
    /// - the name is a DNS label (`a-z`, `0-9`, `-`, starting with a
    ///   letter, at most 63 characters);
    /// - `input` and `output` are JSON Schemas with `type: object`, and
    ///   `output` lists `status` in `required`;
    /// - `driver: scripted` has a script, no other driver has one, and
    ///   `cliProfile` goes with a CLI driver, its `image` a digest
    ///   (`sha256:` and 64 lowercase hex digits);
    /// - tool names are `a-z`, `0-9`, `_` and `.`, listed once;
    ///   `request_human_help` comes with `handover`;
    /// - the script passes [`check_script`] and calls only tools the agent
    ///   [`allows`](AgentSpec::allows);
    /// - no limit is zero, connections have distinct names and http(s)
    ///   URLs, and each exposed tool is listed in `tools`.
    ///
    /// # Errors
    ///
    /// The first problem: malformed YAML, an unknown or missing field, a
    /// wrong type, a wrong `apiVersion` or `kind`, or a broken rule above,
    /// naming the field and its line.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: Self = source.parse_manifest(AGENTS_API_VERSION, "Agent")?;
        check_dns_name(&manifest.metadata.name).map_err(|m| source.error("metadata.name", m))?;
        manifest.spec.check(&source)?;
        Ok(manifest)
    }
}

impl AgentSpec {
    /// Whether the agent may call `tool`: it is in `tools`, or it is
    /// [`SUBMIT_RESULT`].
    pub fn allows(&self, tool: &str) -> bool {
        tool == SUBMIT_RESULT || self.tools.iter().any(|t| t == tool)
    }

    /// The operation that serves `tool` when it is neither a tool the
    /// runtime serves itself (one of the [`CONTROL_TOOLS`] or
    /// [`OUTBOUND_TOOLS`]) nor a tool of one of the agent's
    /// `toolExposures`, which the release resolves: the operation of the
    /// same name.
    pub fn operation_for<'a>(&self, tool: &'a str) -> Option<&'a str> {
        (!is_host_tool(tool)).then_some(tool)
    }

    /// The rules serde cannot express, each error naming its field.
    fn check(&self, source: &Source<'_>) -> Result<(), ManifestError> {
        self.check_schemas(source)?;
        self.check_driver(source)?;
        self.check_tools(source)?;
        self.check_limits_and_people(source)?;
        self.check_connections(source)
    }

    /// The purpose, and input and output schemas for objects; a result has a status.
    fn check_schemas(&self, source: &Source<'_>) -> Result<(), ManifestError> {
        let fail = |field: &str, message: String| source.error(field, message);
        not_blank(&self.purpose).map_err(|m| fail("spec.purpose", m.to_string()))?;
        for (i, example) in self.examples.iter().enumerate() {
            not_blank(example).map_err(|m| fail(&format!("spec.examples[{i}]"), m.to_string()))?;
        }
        check_object_schema(&self.input, "spec.input").map_err(|(f, m)| fail(&f, m))?;
        check_object_schema(&self.output, "spec.output").map_err(|(f, m)| fail(&f, m))?;
        let lists_status = self
            .output
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|required| required.iter().any(|r| r == "status"));
        if !lists_status {
            let field = if self.output.get("required").is_some() {
                "spec.output.required"
            } else {
                "spec.output"
            };
            return Err(fail(
                field,
                "must list `status` in `required`: every result has a status".to_owned(),
            ));
        }
        Ok(())
    }

    /// A script for the scripted driver only; a CLI profile for CLI drivers only.
    fn check_driver(&self, source: &Source<'_>) -> Result<(), ManifestError> {
        let fail = |field: &str, message: String| source.error(field, message);
        match (self.driver, self.script.is_empty()) {
            (Driver::Scripted, true) => {
                return Err(fail(
                    "spec.driver",
                    "driver `scripted` needs a `script`, the steps it runs".to_owned(),
                ));
            }
            (driver, false) if driver != Driver::Scripted => {
                return Err(fail(
                    "spec.script",
                    format!(
                        "only driver `scripted` runs a script; driver `{driver}` follows `instructions`"
                    ),
                ));
            }
            _ => {}
        }
        if let Some(profile) = &self.cli_profile {
            if !self.driver.is_cli() {
                return Err(fail(
                    "spec.cliProfile",
                    format!(
                        "only the CLI drivers `opencode`, `codex` and `claude` take a profile, not `{}`",
                        self.driver
                    ),
                ));
            }
            not_blank(&profile.cli_version)
                .map_err(|m| fail("spec.cliProfile.cliVersion", m.to_string()))?;
            check_image_digest(&profile.image)
                .map_err(|m| fail("spec.cliProfile.image", m.to_string()))?;
        }
        Ok(())
    }

    /// Tool names, the script, and the tool exposures.
    fn check_tools(&self, source: &Source<'_>) -> Result<(), ManifestError> {
        let fail = |field: &str, message: String| source.error(field, message);
        let mut seen = BTreeMap::new();
        for (i, tool) in self.tools.iter().enumerate() {
            let field = format!("spec.tools[{i}]");
            check_tool_name(tool).map_err(|m| fail(&field, m.to_string()))?;
            if let Some(j) = seen.insert(tool.as_str(), i) {
                return Err(fail(
                    &field,
                    format!("`{tool}` is already listed as spec.tools[{j}]"),
                ));
            }
            if tool == REQUEST_HUMAN_HELP && self.handover.is_none() {
                return Err(fail(
                    &field,
                    format!(
                        "`{REQUEST_HUMAN_HELP}` needs `spec.handover`, saying who takes the work"
                    ),
                ));
            }
        }

        check_script(&self.script).map_err(|e| {
            let field = if e.field.is_empty() {
                format!("spec.script[{}]", e.step)
            } else {
                format!("spec.script[{}].{}", e.step, e.field)
            };
            fail(&field, e.message)
        })?;
        for (i, step) in self.script.iter().enumerate() {
            if !self.allows(&step.tool) {
                return Err(fail(
                    &format!("spec.script[{i}].tool"),
                    format!("`{}` is not in spec.tools", step.tool),
                ));
            }
        }

        check_names(
            &self.tool_exposures,
            "spec.toolExposures",
            "ToolExposure",
            source,
        )?;
        Ok(())
    }

    /// Limits above zero, and the assignments and workflows named.
    fn check_limits_and_people(&self, source: &Source<'_>) -> Result<(), ManifestError> {
        let fail = |field: &str, message: String| source.error(field, message);
        let limits = [
            ("maxToolCalls", u64::from(self.limits.max_tool_calls)),
            ("maxSeconds", self.limits.max_seconds),
            ("maxModelTokens", self.limits.max_model_tokens),
        ];
        for (name, value) in limits {
            if value == 0 {
                return Err(fail(
                    &format!("spec.limits.{name}"),
                    "must be at least 1".to_owned(),
                ));
            }
        }

        if let Some(approval) = &self.approval {
            for (value, field) in [
                (&approval.decider, "spec.approval.decider"),
                (&approval.assignment, "spec.approval.assignment"),
            ] {
                if let Some(value) = value {
                    not_blank(value).map_err(|m| fail(field, m.to_string()))?;
                }
            }
        }
        if let Some(handover) = &self.handover {
            not_blank(&handover.assignment)
                .map_err(|m| fail("spec.handover.assignment", m.to_string()))?;
        }

        let mut seen = BTreeMap::new();
        for (i, workflow) in self.workflows.iter().enumerate() {
            let field = format!("spec.workflows[{i}]");
            not_blank(workflow).map_err(|m| fail(&field, m.to_string()))?;
            if let Some(j) = seen.insert(workflow.as_str(), i) {
                return Err(fail(
                    &field,
                    format!("`{workflow}` is already listed as spec.workflows[{j}]"),
                ));
            }
        }
        Ok(())
    }

    /// Distinct names of connections.
    fn check_connections(&self, source: &Source<'_>) -> Result<(), ManifestError> {
        check_names(&self.connections, "spec.connections", "Connection", source)
    }
}

/// Names of definitions of `kind`, listed at `field`: each a DNS label,
/// none twice.
fn check_names(
    names: &[String],
    field: &str,
    kind: &str,
    source: &Source<'_>,
) -> Result<(), ManifestError> {
    let mut seen = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        let at = format!("{field}[{i}]");
        check_dns_name(name)
            .map_err(|m| source.error(&at, format!("{m}; name a {kind} of the release")))?;
        if let Some(j) = seen.insert(name.as_str(), i) {
            return Err(source.error(&at, format!("`{name}` is already listed as {field}[{j}]")));
        }
    }
    Ok(())
}

/// An `EvalSuite` manifest (`agents/v1alpha1`): inputs and the result
/// fields the agent is expected to return for them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvalSuiteManifest {
    /// Must be `agents/v1alpha1`.
    pub api_version: String,
    /// Must be `EvalSuite`.
    pub kind: String,
    /// The name: lowercase letters, digits and `-`, starting with a letter.
    pub metadata: Metadata,
    /// The agent and the cases.
    pub spec: EvalSuiteSpec,
}

/// `spec` of an `EvalSuite` manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvalSuiteSpec {
    /// The name of the agent evaluated; an `Agent` of the same bundle.
    pub agent: String,
    /// The share of cases that must pass, from 0 to 1; 1 when absent.
    #[serde(default = "one")]
    pub pass_rate: f64,
    /// One to [`MAX_EVAL_CASES`] cases with distinct names.
    pub cases: Vec<EvalCase>,
}

fn one() -> f64 {
    1.0
}

/// One case of an `EvalSuite`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvalCase {
    /// What the case is about, such as `Contract not in the ledger`.
    pub name: String,
    /// The agent's input, a map.
    pub input: Value,
    /// The result fields expected, a map; other fields of the result are
    /// not compared.
    pub expect: Value,
}

impl EvalSuiteManifest {
    /// Parses and validates an `EvalSuite` manifest; `file` names it in
    /// errors. The suite's name and agent are DNS labels, as for agents.
    ///
    /// # Errors
    ///
    /// Malformed YAML, unknown or missing fields, wrong types, a wrong
    /// `apiVersion` or `kind`, a pass rate outside 0 to 1, no cases or more
    /// than [`MAX_EVAL_CASES`], and cases without a name of their own or
    /// whose input or expectation is not a map.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: Self = source.parse_manifest(AGENTS_API_VERSION, "EvalSuite")?;
        let fail = |field: &str, message: String| source.error(field, message);
        check_dns_name(&manifest.metadata.name)
            .map_err(|m| fail("metadata.name", m.to_string()))?;
        let spec = &manifest.spec;
        check_dns_name(&spec.agent).map_err(|m| fail("spec.agent", m.to_string()))?;
        if !(0.0..=1.0).contains(&spec.pass_rate) {
            return Err(fail(
                "spec.passRate",
                format!("expected a number from 0 to 1, found {}", spec.pass_rate),
            ));
        }
        if spec.cases.is_empty() || spec.cases.len() > MAX_EVAL_CASES {
            return Err(fail(
                "spec.cases",
                format!(
                    "expected 1 to {MAX_EVAL_CASES} cases, found {}",
                    spec.cases.len()
                ),
            ));
        }
        let mut seen = BTreeMap::new();
        for (i, case) in spec.cases.iter().enumerate() {
            let field = format!("spec.cases[{i}]");
            not_blank(&case.name).map_err(|m| fail(&format!("{field}.name"), m.to_string()))?;
            if let Some(j) = seen.insert(case.name.as_str(), i) {
                return Err(fail(
                    &format!("{field}.name"),
                    format!("`{}` is already the name of spec.cases[{j}]", case.name),
                ));
            }
            if !case.input.is_object() {
                return Err(fail(&format!("{field}.input"), "must be a map".to_owned()));
            }
            if case.expect.as_object().is_none_or(|m| m.is_empty()) {
                return Err(fail(
                    &format!("{field}.expect"),
                    "must be a map of at least one result field".to_owned(),
                ));
            }
        }
        Ok(manifest)
    }
}

/// Whether the runtime serves `tool` itself: one of the [`CONTROL_TOOLS`]
/// or [`OUTBOUND_TOOLS`].
pub(crate) fn is_host_tool(tool: &str) -> bool {
    CONTROL_TOOLS.contains(&tool) || OUTBOUND_TOOLS.contains(&tool)
}

/// DNS-label names for agents, suites, decider policies and budgets:
/// `a-z`, `0-9` and `-`, 1 to 63 characters, starting with a letter.
pub(crate) fn check_dns_name(name: &str) -> Result<(), FieldProblem> {
    let valid = (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if valid {
        Ok(())
    } else {
        Err(FieldProblem::DnsName(name.to_owned()))
    }
}

/// Tool names: `a-z`, `0-9`, `_` and `.`.
pub(crate) fn check_tool_name(name: &str) -> Result<(), FieldProblem> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.');
    if valid {
        Ok(())
    } else {
        Err(FieldProblem::ToolName(name.to_owned()))
    }
}

pub(crate) fn not_blank(value: &str) -> Result<(), FieldProblem> {
    if value.trim().is_empty() {
        Err(FieldProblem::Blank)
    } else {
        Ok(())
    }
}

/// An input or output schema: a JSON Schema for an object.
fn check_object_schema(schema: &Value, field: &str) -> Result<(), (String, String)> {
    let fail = |sub: &str, message: String| Err((format!("{field}{sub}"), message));
    let Some(map) = schema.as_object() else {
        return fail(
            "",
            "expected a JSON Schema map with `type: object`".to_owned(),
        );
    };
    match map.get("type") {
        None => return fail("", "expected `type: object`".to_owned()),
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => return fail(".type", format!("expected `object`, found {other}")),
    }
    if let Some(required) = map.get("required") {
        let names = required
            .as_array()
            .filter(|r| r.iter().all(Value::is_string));
        if names.is_none() {
            return fail(".required", "expected a list of property names".to_owned());
        }
    }
    if map.get("properties").is_some_and(|p| !p.is_object()) {
        return fail(
            ".properties",
            "expected a map of property schemas".to_owned(),
        );
    }
    Ok(())
}
