//! Reading a bundle: every definition in a folder of YAML manifests,
//! checked one by one and against each other.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::manifest::{Header, Source};
use crate::{
    AGENTS_API_VERSION, AgentManifest, BudgetManifest, ConnectionManifest, Decider,
    DeciderPolicyManifest, EvalSuiteManifest, ManifestError, ModelProviderManifest,
    OPERATION_API_VERSION, OntologyManifest, OperationManifest, PLATFORM_API_VERSION,
    ScheduleManifest, ScheduleTarget, ToolExposureManifest, WorkflowManifest,
};
use hane_core::file::{FileCap, read_capped_text};
use hane_core::tool::SUBMIT_REVIEW;

/// How deep folders of a bundle may nest; a bound for symbolic links that
/// loop.
pub const MAX_BUNDLE_DEPTH: usize = 32;

/// The kinds this build reads, with their `apiVersion`.
const KINDS: [(&str, &str); 11] = [
    (AGENTS_API_VERSION, "Agent"),
    (AGENTS_API_VERSION, "EvalSuite"),
    (AGENTS_API_VERSION, "Workflow"),
    (AGENTS_API_VERSION, "DeciderPolicy"),
    (AGENTS_API_VERSION, "Schedule"),
    (AGENTS_API_VERSION, "ToolExposure"),
    (OPERATION_API_VERSION, "Operation"),
    (PLATFORM_API_VERSION, "Budget"),
    (PLATFORM_API_VERSION, "ModelProvider"),
    (PLATFORM_API_VERSION, "Connection"),
    (PLATFORM_API_VERSION, "Ontology"),
];

/// One definition of a bundle.
#[derive(Debug, Clone, PartialEq)]
pub enum Definition {
    /// An `Agent` manifest.
    Agent(AgentManifest),
    /// An `Operation` manifest, with relative paths as written: resolve
    /// them against [`SourcedDefinition::folder`].
    Operation(OperationManifest),
    /// An `EvalSuite` manifest.
    EvalSuite(EvalSuiteManifest),
    /// A `Workflow` manifest.
    Workflow(WorkflowManifest),
    /// A `DeciderPolicy` manifest.
    DeciderPolicy(DeciderPolicyManifest),
    /// A `Budget` manifest.
    Budget(BudgetManifest),
    /// A `ModelProvider` manifest, with its `recording` as written:
    /// resolve it against [`SourcedDefinition::folder`].
    ModelProvider(ModelProviderManifest),
    /// A `Schedule` manifest.
    Schedule(ScheduleManifest),
    /// A `Connection` manifest, with its `openapi` document as written:
    /// resolve it against [`SourcedDefinition::folder`].
    Connection(ConnectionManifest),
    /// A `ToolExposure` manifest.
    ToolExposure(ToolExposureManifest),
    /// An `Ontology` manifest.
    Ontology(OntologyManifest),
}

impl Definition {
    /// The manifest's `kind`, such as `Agent`.
    pub fn kind(&self) -> &'static str {
        match self {
            Definition::Agent(_) => "Agent",
            Definition::Operation(_) => "Operation",
            Definition::EvalSuite(_) => "EvalSuite",
            Definition::Workflow(_) => "Workflow",
            Definition::DeciderPolicy(_) => "DeciderPolicy",
            Definition::Budget(_) => "Budget",
            Definition::ModelProvider(_) => "ModelProvider",
            Definition::Schedule(_) => "Schedule",
            Definition::Connection(_) => "Connection",
            Definition::ToolExposure(_) => "ToolExposure",
            Definition::Ontology(_) => "Ontology",
        }
    }

    /// The definition's name.
    pub fn name(&self) -> &str {
        match self {
            Definition::Agent(m) => &m.metadata.name,
            Definition::Operation(m) => &m.metadata.name,
            Definition::EvalSuite(m) => &m.metadata.name,
            Definition::Workflow(m) => &m.metadata.name,
            Definition::DeciderPolicy(m) => &m.metadata.name,
            Definition::Budget(m) => &m.metadata.name,
            Definition::ModelProvider(m) => &m.metadata.name,
            Definition::Schedule(m) => &m.metadata.name,
            Definition::Connection(m) => &m.metadata.name,
            Definition::ToolExposure(m) => &m.metadata.name,
            Definition::Ontology(m) => &m.metadata.name,
        }
    }

    /// The agent, when this is one.
    pub fn as_agent(&self) -> Option<&AgentManifest> {
        match self {
            Definition::Agent(m) => Some(m),
            _ => None,
        }
    }

    /// The operation, when this is one.
    pub fn as_operation(&self) -> Option<&OperationManifest> {
        match self {
            Definition::Operation(m) => Some(m),
            _ => None,
        }
    }

    /// The evaluation suite, when this is one.
    pub fn as_eval_suite(&self) -> Option<&EvalSuiteManifest> {
        match self {
            Definition::EvalSuite(m) => Some(m),
            _ => None,
        }
    }

    /// The decider policy, when this is one.
    pub fn as_decider_policy(&self) -> Option<&DeciderPolicyManifest> {
        match self {
            Definition::DeciderPolicy(m) => Some(m),
            _ => None,
        }
    }

    /// The model provider, when this is one.
    pub fn as_model_provider(&self) -> Option<&ModelProviderManifest> {
        match self {
            Definition::ModelProvider(m) => Some(m),
            _ => None,
        }
    }

    /// The budget, when this is one.
    pub fn as_budget(&self) -> Option<&BudgetManifest> {
        match self {
            Definition::Budget(m) => Some(m),
            _ => None,
        }
    }

    /// The schedule, when this is one.
    pub fn as_schedule(&self) -> Option<&ScheduleManifest> {
        match self {
            Definition::Schedule(m) => Some(m),
            _ => None,
        }
    }

    /// The connection, when this is one.
    pub fn as_connection(&self) -> Option<&ConnectionManifest> {
        match self {
            Definition::Connection(m) => Some(m),
            _ => None,
        }
    }

    /// The tool exposure, when this is one.
    pub fn as_tool_exposure(&self) -> Option<&ToolExposureManifest> {
        match self {
            Definition::ToolExposure(m) => Some(m),
            _ => None,
        }
    }
}

/// A definition and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcedDefinition {
    /// The file, the bundle folder joined with the path within it.
    pub file: PathBuf,
    /// The 1-based line where the definition's document starts.
    pub line: usize,
    /// The definition.
    pub definition: Definition,
}

impl SourcedDefinition {
    /// The folder of the file, which relative paths in the definition are
    /// relative to.
    pub fn folder(&self) -> &Path {
        self.file.parent().unwrap_or(Path::new("."))
    }
}

/// Everything wrong with a bundle, one error per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", Lines(errors))]
pub struct BundleError {
    /// The errors, ordered by file and line.
    pub errors: Vec<ManifestError>,
}

struct Lines<'a>(&'a [ManifestError]);

impl fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// Reads every definition in `dir`: each `*.yaml` and `*.yml` file, in
/// every folder below, in name order. A file may hold several documents
/// separated by `---`. Hidden files and folders and the top-level `ledger`
/// folder (a ledger's data, not definitions) are skipped.
///
/// Each definition is checked on its own, then against the others: names
/// are unique within a kind; an `EvalSuite`'s agent, and a `Schedule`'s,
/// is an `Agent` of the bundle; a tool exposure's operation is an `Operation` of the bundle; an
/// agent's `approval.decider` is a `DeciderPolicy` of the bundle; an agent
/// a `DeciderPolicy` names as a decider is an `Agent` of the bundle that
/// lists [`SUBMIT_REVIEW`] in its tools; there is at most one `Budget`
/// per project and environment; an agent's `model` is served by a
/// `ModelProvider` of the bundle, and an `llm` agent has a model (its own
/// or the bundle's default, see [`resolve_model`]). Whether each agent's tools exist is for
/// the caller to check, since it also knows the built-in tools; see
/// [`AgentSpec::operation_for`](crate::AgentSpec::operation_for).
///
/// # Errors
///
/// Every problem found, not just the first: unreadable files, malformed
/// or invalid documents, unknown kinds, duplicate names and broken
/// references.
pub fn read_bundle_dir(dir: &Path) -> Result<Vec<SourcedDefinition>, BundleError> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    collect_files(dir, 0, &mut files, &mut errors);
    let order: BTreeMap<String, usize> = files
        .iter()
        .enumerate()
        .map(|(i, path)| (path.display().to_string(), i))
        .collect();
    let mut documents = Vec::new();
    for path in files {
        let file = path.display().to_string();
        let text = read_capped_text(&path, FileCap::MANIFEST).map_err(|e| e.problem.to_string());
        match text {
            Ok(text) => {
                documents.extend(split_documents(&text).into_iter().map(|(offset, text)| {
                    Document {
                        path: path.clone(),
                        file: file.clone(),
                        offset,
                        text: text.to_owned(),
                    }
                }))
            }
            Err(message) => errors.push(ManifestError {
                file,
                line: None,
                field: String::new(),
                message,
            }),
        }
    }

    let mut read = Vec::new();
    // The kinds and names of documents that do not read: references to
    // them are not errors too, so one typo is reported once.
    let mut broken = BTreeSet::new();
    for document in documents {
        match document.definition() {
            Ok(Some(definition)) => read.push((document, definition)),
            Ok(None) => {}
            Err(e) => {
                broken.extend(document.declared());
                errors.push(e.shifted(document.offset));
            }
        }
    }
    cross_check(&read, &broken, &mut errors);
    // Folder errors first, then by file and line.
    errors.sort_by_key(|e| (order.get(&e.file).copied(), e.line));
    if errors.is_empty() {
        Ok(read
            .into_iter()
            .map(|(document, definition)| SourcedDefinition {
                file: document.path,
                line: document.offset + 1,
                definition,
            })
            .collect())
    } else {
        Err(BundleError { errors })
    }
}

/// One YAML document of a file.
struct Document {
    path: PathBuf,
    file: String,
    /// Lines of the file before the document.
    offset: usize,
    text: String,
}

impl Document {
    fn source(&self) -> Source<'_> {
        Source::new(&self.file, &self.text)
    }

    /// The kind and name a document says it has, read loosely: for one
    /// that does not read as its kind.
    fn declared(&self) -> Option<(String, String)> {
        #[derive(serde::Deserialize)]
        struct Declared {
            kind: String,
            metadata: DeclaredMetadata,
        }
        #[derive(serde::Deserialize)]
        struct DeclaredMetadata {
            name: String,
        }
        let declared: Declared = self.source().parse().ok()?;
        Some((declared.kind, declared.metadata.name))
    }

    /// An error about `field` of this document, with the line in the file.
    fn error(&self, field: &str, message: impl fmt::Display) -> ManifestError {
        self.source().error(field, message).shifted(self.offset)
    }

    /// `FILE:LINE` of the document's name, for errors about another
    /// document that clashes with this one.
    fn place(&self) -> String {
        match self.error("metadata.name", "").line {
            Some(line) => format!("{}:{line}", self.file),
            None => self.file.clone(),
        }
    }

    /// Reads the document by its `apiVersion` and `kind`; `None` for an
    /// empty document.
    fn definition(&self) -> Result<Option<Definition>, ManifestError> {
        let source = self.source();
        let Some(header) = source.parse::<Option<Header>>()? else {
            return Ok(None);
        };
        let (file, text) = (self.file.as_str(), self.text.as_str());
        let definition = match (header.api_version.as_str(), header.kind.as_str()) {
            (AGENTS_API_VERSION, "Agent") => {
                Definition::Agent(AgentManifest::from_yaml(file, text)?)
            }
            (AGENTS_API_VERSION, "EvalSuite") => {
                Definition::EvalSuite(EvalSuiteManifest::from_yaml(file, text)?)
            }
            (AGENTS_API_VERSION, "Workflow") => {
                Definition::Workflow(WorkflowManifest::from_yaml(file, text)?)
            }
            (AGENTS_API_VERSION, "DeciderPolicy") => {
                Definition::DeciderPolicy(DeciderPolicyManifest::from_yaml(file, text)?)
            }
            (AGENTS_API_VERSION, "Schedule") => {
                Definition::Schedule(ScheduleManifest::from_yaml(file, text)?)
            }
            (OPERATION_API_VERSION, "Operation") => {
                Definition::Operation(OperationManifest::from_yaml(file, text)?)
            }
            (PLATFORM_API_VERSION, "Budget") => {
                Definition::Budget(BudgetManifest::from_yaml(file, text)?)
            }
            (PLATFORM_API_VERSION, "ModelProvider") => {
                Definition::ModelProvider(ModelProviderManifest::from_yaml(file, text)?)
            }
            (PLATFORM_API_VERSION, "Connection") => {
                Definition::Connection(ConnectionManifest::from_yaml(file, text)?)
            }
            (AGENTS_API_VERSION, "ToolExposure") => {
                Definition::ToolExposure(ToolExposureManifest::from_yaml(file, text)?)
            }
            (PLATFORM_API_VERSION, "Ontology") => {
                Definition::Ontology(OntologyManifest::from_yaml(file, text)?)
            }
            (api_version, kind) => {
                return Err(match KINDS.iter().find(|(_, k)| *k == kind) {
                    Some((expected, _)) => source.error(
                        "apiVersion",
                        format!("expected `{expected}` for kind `{kind}`, found `{api_version}`"),
                    ),
                    None => source.error(
                        "kind",
                        format!(
                            "unknown kind `{kind}` (apiVersion `{api_version}`); this build knows {}",
                            known_kinds()
                        ),
                    ),
                });
            }
        };
        Ok(Some(definition))
    }
}

/// The kinds this build reads, grouped by `apiVersion`, for errors.
fn known_kinds() -> String {
    let mut by_version: Vec<(&str, Vec<&str>)> = Vec::new();
    for (version, kind) in KINDS {
        match by_version.iter_mut().find(|(v, _)| *v == version) {
            Some((_, kinds)) => kinds.push(kind),
            None => by_version.push((version, vec![kind])),
        }
    }
    by_version
        .iter()
        .map(|(version, kinds)| {
            let kinds: Vec<String> = kinds.iter().map(|k| format!("`{k}`")).collect();
            let kinds = match kinds.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
                _ => kinds.concat(),
            };
            format!("{kinds} in {version}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Unique names within each kind, references that resolve, and one budget
/// per project and environment.
fn cross_check(read: &[(Document, Definition)], broken: &Broken, errors: &mut Vec<ManifestError>) {
    let (names, agents) = index(read, errors);
    check_references(read, &names, &agents, broken, errors);
    check_models(read, errors);
}

/// At most one default `ModelProvider`; each agent's model resolves.
fn check_models(read: &[(Document, Definition)], errors: &mut Vec<ManifestError>) {
    let providers: Vec<&ModelProviderManifest> = read
        .iter()
        .filter_map(|(_, d)| d.as_model_provider())
        .collect();
    let mut first_default: Option<&Document> = None;
    for (document, definition) in read {
        match definition {
            Definition::ModelProvider(p) if p.spec.default => match first_default {
                Some(first) => errors.push(document.error(
                    "spec.default",
                    format!(
                        "the default provider is already set in {}; a bundle has one default",
                        first.place()
                    ),
                )),
                None => first_default = Some(document),
            },
            Definition::Agent(agent) => {
                let wanted = agent.spec.model.as_deref();
                // The CLI drivers are checked for a model when they run
                // in this build.
                if wanted.is_none() && agent.spec.driver != crate::Driver::Llm {
                    continue;
                }
                if let Err(message) = resolve_model(wanted, &providers) {
                    let field = if wanted.is_some() {
                        "spec.model"
                    } else {
                        "spec.driver"
                    };
                    errors.push(document.error(field, message));
                }
            }
            _ => {}
        }
    }
}

/// The provider and model an agent's `spec.model` (`MODEL` or
/// `PROVIDER/MODEL`) names among `providers`; with no `spec.model`, the
/// default provider's first model (the provider with `default: true`, or
/// the only provider).
///
/// # Errors
///
/// What does not resolve, saying what is there instead.
pub fn resolve_model<'a>(
    wanted: Option<&str>,
    providers: &[&'a ModelProviderManifest],
) -> Result<(&'a ModelProviderManifest, &'a crate::ProviderModel), UnresolvedModel> {
    let served = || {
        let all: Vec<String> = providers
            .iter()
            .flat_map(|p| {
                p.spec
                    .models
                    .iter()
                    .map(move |m| format!("`{}/{}`", p.metadata.name, m.name))
            })
            .collect();
        if all.is_empty() {
            "the bundle has no ModelProvider".to_owned()
        } else {
            format!("the bundle's providers serve {}", all.join(", "))
        }
    };
    let Some(wanted) = wanted else {
        let default = providers
            .iter()
            .find(|p| p.spec.default)
            .or(match providers {
                [only] => Some(only),
                _ => None,
            });
        return match default {
            Some(p) => Ok((p, &p.spec.models[0])),
            None => Err(UnresolvedModel::NoDefault { served: served() }),
        };
    };
    let found: Vec<_> = match wanted.split_once('/') {
        Some((provider, model)) => providers
            .iter()
            .filter(|p| p.metadata.name == provider)
            .filter_map(|p| p.model(model).map(|m| (*p, m)))
            .collect(),
        None => providers
            .iter()
            .filter_map(|p| p.model(wanted).map(|m| (*p, m)))
            .collect(),
    };
    let wanted = wanted.to_owned();
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(UnresolvedModel::NotServed {
            wanted,
            served: served(),
        }),
        _ => Err(UnresolvedModel::Ambiguous {
            wanted,
            served: served(),
        }),
    }
}

/// Why an agent's model does not resolve among a bundle's providers
/// ([`resolve_model`]); each says what the providers serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnresolvedModel {
    /// No model is named, and no provider is the default.
    #[error(
        "the agent names no `model` and the bundle has no default provider (`default: true`); {served}"
    )]
    NoDefault {
        /// What the providers serve, in words.
        served: String,
    },
    /// No provider serves the model named.
    #[error("no ModelProvider serves `{wanted}`; {served}")]
    NotServed {
        /// The model named.
        wanted: String,
        /// What the providers serve, in words.
        served: String,
    },
    /// Several providers serve the model named.
    #[error("several providers serve `{wanted}`; name one as `PROVIDER/{wanted}`: {served}")]
    Ambiguous {
        /// The model named.
        wanted: String,
        /// What the providers serve, in words.
        served: String,
    },
}

/// The kinds and names of the documents that did not read.
type Broken = BTreeSet<(String, String)>;

/// Each definition's document, by kind and name.
type ByKindAndName<'a> = BTreeMap<(&'a str, &'a str), &'a Document>;

/// Every definition's document by kind and name, and the agents by name;
/// a name defined twice, or a second Budget for a project and environment,
/// is pushed to `errors`.
fn index<'a>(
    read: &'a [(Document, Definition)],
    errors: &mut Vec<ManifestError>,
) -> (ByKindAndName<'a>, BTreeMap<&'a str, &'a AgentManifest>) {
    let mut names: BTreeMap<(&str, &str), &Document> = BTreeMap::new();
    let mut agents: BTreeMap<&str, &AgentManifest> = BTreeMap::new();
    let mut budgets: BTreeMap<(&str, &str), (&Document, &str)> = BTreeMap::new();
    for (document, definition) in read {
        let key = (definition.kind(), definition.name());
        if let Some(first) = names.get(&key) {
            errors.push(document.error(
                "metadata.name",
                format!(
                    "{} `{}` is already defined in {}",
                    key.0,
                    key.1,
                    first.place()
                ),
            ));
        } else {
            names.insert(key, document);
            if let Definition::Agent(agent) = definition {
                agents.insert(key.1, agent);
            }
        }
        if let Definition::Budget(budget) = definition {
            let (project, environment) = (&budget.spec.project, &budget.spec.environment);
            if let Some((first, name)) = budgets.get(&(project, environment)) {
                errors.push(document.error(
                    "spec",
                    format!(
                        "Budget `{name}` in {} already sets the limits of project `{project}`, environment `{environment}`; a bundle has one Budget per project and environment",
                        first.place()
                    ),
                ));
            } else {
                budgets.insert((project, environment), (document, &budget.metadata.name));
            }
        }
    }
    (names, agents)
}

/// Each reference from one definition to another (an EvalSuite's agent, a
/// Schedule's agent or workflow, an Agent's workflows, exposed operations
/// and decider, a DeciderPolicy's review agents, a Workflow's agents)
/// names a definition of the bundle; each that does not is pushed to
/// `errors`.
fn check_references(
    read: &[(Document, Definition)],
    names: &ByKindAndName<'_>,
    agents: &BTreeMap<&str, &AgentManifest>,
    broken: &Broken,
    errors: &mut Vec<ManifestError>,
) {
    let is_broken = |kind: &str, name: &str| broken.contains(&(kind.to_owned(), name.to_owned()));
    let has = |kind: &str, name: &str| names.contains_key(&(kind, name)) || is_broken(kind, name);
    let exposures: BTreeMap<&str, &ToolExposureManifest> = read
        .iter()
        .filter_map(|(_, d)| d.as_tool_exposure())
        .map(|e| (e.metadata.name.as_str(), e))
        .collect();
    // The first exposure of each tool name, and where it is.
    let mut tools: BTreeMap<&str, (&Document, &str)> = BTreeMap::new();
    for (document, definition) in read {
        if let Some(exposure) = definition.as_tool_exposure() {
            tools
                .entry(exposure.spec.tool.as_str())
                .or_insert((document, exposure.metadata.name.as_str()));
        }
    }
    for (document, definition) in read {
        match definition {
            Definition::EvalSuite(suite) if !has("Agent", &suite.spec.agent) => {
                errors.push(document.error(
                    "spec.agent",
                    format!("no Agent named `{}` in this bundle", suite.spec.agent),
                ));
            }
            Definition::Schedule(schedule) => match schedule.spec.target() {
                Some(ScheduleTarget::Agent(agent)) if !has("Agent", agent) => {
                    errors.push(document.error(
                        "spec.agent",
                        format!("no Agent named `{agent}` in this bundle"),
                    ));
                }
                Some(ScheduleTarget::Workflow(workflow)) if !has("Workflow", workflow) => {
                    errors.push(document.error(
                        "spec.workflow",
                        format!("no Workflow named `{workflow}` in this bundle"),
                    ));
                }
                _ => {}
            },
            Definition::Workflow(workflow) => {
                for (i, step) in workflow.spec.steps.iter().enumerate() {
                    let Some(agent) = &step.agent else { continue };
                    match agents.get(agent.as_str()) {
                        None if is_broken("Agent", agent) => {}
                        None => errors.push(document.error(
                            &format!("spec.steps[{i}].agent"),
                            format!("no Agent named `{agent}` in this bundle"),
                        )),
                        Some(manifest) if manifest.spec.allows(SUBMIT_REVIEW) => {
                            errors.push(document.error(
                                &format!("spec.steps[{i}].agent"),
                                format!(
                                    "Agent `{agent}` is a review agent (it lists `{SUBMIT_REVIEW}`): it decides actions, a workflow does not run it"
                                ),
                            ));
                        }
                        Some(_) => {}
                    }
                }
            }
            Definition::ToolExposure(exposure) => {
                let spec = &exposure.spec;
                match &spec.connection {
                    Some(connection) if !has("Connection", connection) => {
                        errors.push(document.error(
                            "spec.connection",
                            format!("no Connection named `{connection}` in this bundle"),
                        ));
                    }
                    None if !has("Operation", &spec.operation) => {
                        errors.push(document.error(
                            "spec.operation",
                            format!(
                                "no Operation named `{}` in this bundle; an API operation needs `connection`",
                                spec.operation
                            ),
                        ));
                    }
                    _ => {}
                }
                if has("Operation", &spec.tool) {
                    errors.push(document.error(
                        "spec.tool",
                        format!(
                            "`{}` is the name of an Operation of this bundle; an exposed tool needs a name of its own",
                            spec.tool
                        ),
                    ));
                }
                if let Some((first, other)) = tools.get(spec.tool.as_str())
                    && *other != exposure.metadata.name
                {
                    errors.push(document.error(
                        "spec.tool",
                        format!(
                            "the tool `{}` is already offered by ToolExposure `{other}` in {}",
                            spec.tool,
                            first.place()
                        ),
                    ));
                }
            }
            Definition::Agent(agent) => {
                for (i, workflow) in agent.spec.workflows.iter().enumerate() {
                    if !has("Workflow", workflow) {
                        errors.push(document.error(
                            &format!("spec.workflows[{i}]"),
                            format!("no Workflow named `{workflow}` in this bundle"),
                        ));
                    }
                }
                for (i, name) in agent.spec.tool_exposures.iter().enumerate() {
                    let field = format!("spec.toolExposures[{i}]");
                    match exposures.get(name.as_str()) {
                        None if is_broken("ToolExposure", name) => {}
                        None => errors.push(document.error(
                            &field,
                            format!("no ToolExposure named `{name}` in this bundle"),
                        )),
                        Some(exposure) if !agent.spec.tools.contains(&exposure.spec.tool) => {
                            errors.push(document.error(
                                &field,
                                format!(
                                    "ToolExposure `{name}` offers the tool `{}`, which is not in spec.tools, so the agent could not call it",
                                    exposure.spec.tool
                                ),
                            ));
                        }
                        Some(_) => {}
                    }
                }
                for (i, connection) in agent.spec.connections.iter().enumerate() {
                    if !has("Connection", connection) {
                        errors.push(document.error(
                            &format!("spec.connections[{i}]"),
                            format!("no Connection named `{connection}` in this bundle"),
                        ));
                    }
                }
                let decider = agent
                    .spec
                    .approval
                    .as_ref()
                    .and_then(|a| a.decider.as_ref());
                if let Some(decider) = decider.filter(|d| !has("DeciderPolicy", d)) {
                    errors.push(document.error(
                        "spec.approval.decider",
                        format!("no DeciderPolicy named `{decider}` in this bundle"),
                    ));
                }
            }
            Definition::DeciderPolicy(policy) => {
                for (field, decider) in policy.spec.deciders() {
                    let Decider::Agent(name) = decider else {
                        continue;
                    };
                    let field = format!("{field}.agent");
                    match agents.get(name.as_str()) {
                        None if is_broken("Agent", name) => {}
                        None => errors.push(
                            document
                                .error(&field, format!("no Agent named `{name}` in this bundle")),
                        ),
                        Some(agent) if !agent.spec.allows(SUBMIT_REVIEW) => {
                            errors.push(document.error(
                                &field,
                                format!(
                                    "Agent `{name}` does not list `{SUBMIT_REVIEW}` in its spec.tools, so it cannot return a decision"
                                ),
                            ));
                        }
                        Some(_) => {}
                    }
                }
            }
            _ => {}
        }
    }
}

/// The YAML files under `dir`, in name order, depth first.
fn collect_files(
    dir: &Path,
    depth: usize,
    files: &mut Vec<PathBuf>,
    errors: &mut Vec<ManifestError>,
) {
    let fail = |errors: &mut Vec<ManifestError>, path: &Path, message: String| {
        errors.push(ManifestError {
            file: path.display().to_string(),
            line: None,
            field: String::new(),
            message,
        });
    };
    if depth > MAX_BUNDLE_DEPTH {
        return fail(
            errors,
            dir,
            format!(
                "folders nest more than {MAX_BUNDLE_DEPTH} deep; is there a symbolic link loop?"
            ),
        );
    }
    let entries = match fs::read_dir(dir).and_then(|entries| entries.collect::<Result<Vec<_>, _>>())
    {
        Ok(entries) => entries,
        Err(e) => return fail(errors, dir, format!("cannot read folder: {e}")),
    };
    let mut entries: Vec<_> = entries
        .into_iter()
        .map(|e| (e.file_name(), e.path()))
        .collect();
    entries.sort();
    for (name, path) in entries {
        let name = name.to_string_lossy();
        if name.starts_with('.') || (depth == 0 && name == "ledger") {
            continue;
        }
        // Follows symbolic links; `MAX_BUNDLE_DEPTH` stops loops.
        match fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => collect_files(&path, depth + 1, files, errors),
            Ok(meta) if meta.is_file() && (name.ends_with(".yaml") || name.ends_with(".yml")) => {
                files.push(path);
            }
            Ok(_) => {}
            Err(e) => fail(errors, &path, format!("cannot read: {e}")),
        }
    }
}

/// Splits a file into its YAML documents: each starts at a line that
/// begins with `---` (kept, so the document parses on its own) and the
/// first also at the top of the file. Returns each document with the
/// number of lines before it.
///
/// A line starting with `---` always ends a document in YAML, even inside
/// a block scalar, so this split agrees with the parser.
fn split_documents(text: &str) -> Vec<(usize, &str)> {
    let mut documents = Vec::new();
    let (mut start, mut start_line) = (0, 0);
    let mut offset = 0;
    for (line_no, line) in text.split_inclusive('\n').enumerate() {
        let is_marker = line
            .strip_prefix("---")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace));
        if is_marker && offset > 0 {
            documents.push((start_line, &text[start..offset]));
            (start, start_line) = (offset, line_no);
        }
        offset += line.len();
    }
    documents.push((start_line, &text[start..]));
    documents
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_split_at_markers_with_their_line_offsets() {
        let text = "# c\na: 1\n---\nb: 2\n--- # x\nc: |\n  ---x\n----\n---";
        assert_eq!(
            split_documents(text),
            vec![
                (0, "# c\na: 1\n"),
                (2, "---\nb: 2\n"),
                (4, "--- # x\nc: |\n  ---x\n----\n"),
                (8, "---"),
            ]
        );
        assert_eq!(split_documents("---\na: 1\n"), vec![(0, "---\na: 1\n")]);
        assert_eq!(split_documents(""), vec![(0, "")]);
    }

    #[test]
    fn a_document_that_does_not_read_is_reported_once_not_again_where_it_is_named() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("agent.yaml"),
            "apiVersion: agents/v1alpha1\nkind: Agent\nmetadata:\n  name: lease-qa\nspec:\n  purpose: x\n  input: { type: object }\n  output: { type: object }\n  driver: scripted\n  script: [{ tool: submit_result, input: {} }]\n  colour: blue\n",
        )
        .unwrap();
        fs::write(
            dir.path().join("eval.yaml"),
            "apiVersion: agents/v1alpha1\nkind: EvalSuite\nmetadata:\n  name: lease-qa-eval\nspec:\n  agent: lease-qa\n  cases: [{ name: one, input: {}, expect: { status: ok } }]\n---\napiVersion: agents/v1alpha1\nkind: EvalSuite\nmetadata:\n  name: other-eval\nspec:\n  agent: no-such-agent\n  cases: [{ name: one, input: {}, expect: { status: ok } }]\n",
        )
        .unwrap();
        let Err(BundleError { errors }) = read_bundle_dir(dir.path()) else {
            panic!("the bundle was read");
        };
        let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 2, "{said:#?}");
        assert!(said[0].contains("colour"), "{said:#?}");
        // A name that is nowhere is still an error.
        assert!(
            said[1].contains("no Agent named `no-such-agent`"),
            "{said:#?}"
        );
    }

    #[test]
    fn known_kinds_are_listed_by_api_version() {
        assert_eq!(
            known_kinds(),
            "`Agent`, `EvalSuite`, `Workflow`, `DeciderPolicy`, `Schedule` and `ToolExposure` in \
             agents/v1alpha1; `Operation` in operations/v1alpha1; `Budget`, `ModelProvider`, \
             `Connection` and `Ontology` in platform/v1alpha1"
        );
    }

    fn provider(name: &str, default: bool, models: &[&str]) -> ModelProviderManifest {
        let models: String = models
            .iter()
            .map(|m| format!("    - {{ name: {m}, contextWindow: 4096, maxOutputTokens: 256 }}\n"))
            .collect();
        ModelProviderManifest::from_yaml(
            "p.yaml",
            &format!(
                "apiVersion: platform/v1alpha1\nkind: ModelProvider\nmetadata:\n  name: {name}\nspec:\n  api: chat-completions\n  baseUrl: http://127.0.0.1:1/v1\n  default: {default}\n  models:\n{models}"
            ),
        )
        .unwrap()
    }

    #[test]
    fn models_resolve_by_name_by_provider_and_by_default() {
        let local = provider("local", false, &["small", "shared"]);
        let remote = provider("remote", true, &["large", "shared"]);
        let both = [&local, &remote];
        let names = |wanted: Option<&str>, providers: &[&ModelProviderManifest]| {
            resolve_model(wanted, providers)
                .map(|(p, m)| format!("{}/{}", p.metadata.name, m.name))
                .map_err(|e| e.to_string())
        };
        assert_eq!(names(Some("small"), &both).unwrap(), "local/small");
        assert_eq!(
            names(Some("remote/shared"), &both).unwrap(),
            "remote/shared"
        );
        assert_eq!(names(None, &both).unwrap(), "remote/large");
        // One provider is the default without saying so.
        assert_eq!(names(None, &[&local]).unwrap(), "local/small");
        assert_eq!(
            names(Some("shared"), &both).unwrap_err(),
            "several providers serve `shared`; name one as `PROVIDER/shared`: the bundle's providers serve `local/small`, `local/shared`, `remote/large`, `remote/shared`"
        );
        assert_eq!(
            names(Some("huge"), &[&local]).unwrap_err(),
            "no ModelProvider serves `huge`; the bundle's providers serve `local/small`, `local/shared`"
        );
        let no_default = provider("other", false, &["x"]);
        assert!(
            names(None, &[&local, &no_default])
                .unwrap_err()
                .starts_with("the agent names no `model` and the bundle has no default provider")
        );
        assert_eq!(
            names(None, &[]).unwrap_err(),
            "the agent names no `model` and the bundle has no default provider (`default: true`); the bundle has no ModelProvider"
        );
    }
}
