//! Releases: a directory of manifests, components and a ledger, checked
//! as a whole and activated atomically as a new numbered release.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hane_core::{
    Impact, Ledger, Limits, Policy,
    file::{FileCap, read_capped, read_capped_text},
    policy::{DirGrant, EnvGrant, HostPattern},
};
use hane_manager::Components;
use hane_manifest::{
    AgentManifest, BudgetManifest, DeciderPolicyManifest, DeciderPolicySpec, Definition,
    EvalSuiteManifest, ManifestError, ModelApi, ModelProviderManifest, OntologyManifest,
    OperationManifest, ProviderModel, ScheduleManifest, ScheduleTarget, ToolExposureManifest,
    WorkflowManifest,
};
use hane_sandbox::{Sandbox, Schema, describe_violations};
use hane_store::{NewRelease, Registry, ReleaseInfo, StoreError};
use hane_stored::Versioned;
use serde::{Deserialize, Serialize};

use crate::budget::{ActiveBudget, BudgetScope};
use crate::drivers::{ExternalDrivers, NoExternalDrivers};
use crate::integrations::{self, LoadedConnection, ReleasedConnection};
use crate::tools::{ReleasedOperation, Tool, ToolRegistry};
use hane_core::ToolDefinition;

/// A manifest as activated, written as JSON; agents and suites are parsed
/// again from it when the release is loaded, by the same parser that
/// checked them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceFile {
    /// The file, relative to the release's directory.
    pub file: String,
    /// The manifest as JSON (which is YAML).
    pub text: String,
}

/// What a release stores: enough to run it without the files it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseBody {
    /// The agents.
    pub agents: Vec<SourceFile>,
    /// The evaluation suites.
    pub eval_suites: Vec<SourceFile>,
    /// The operations, resolved: component digests, absolute paths.
    pub operations: Vec<ReleasedOperation>,
    /// The ledger the operations read.
    pub ledger: Ledger,
    /// The DeciderPolicies.
    pub decider_policies: Vec<SourceFile>,
    /// The Budgets.
    pub budgets: Vec<SourceFile>,
    /// The ModelProviders, each with its recording when it replays one.
    pub model_providers: Vec<ReleasedProvider>,
    /// The Workflows.
    pub workflows: Vec<SourceFile>,
    /// The Schedules.
    pub schedules: Vec<SourceFile>,
    /// The Connections, each with its OpenAPI document.
    pub connections: Vec<ReleasedConnection>,
    /// The ToolExposures.
    pub tool_exposures: Vec<SourceFile>,
}

/// A release body as version 6 stored it: its connections without CA
/// certificates.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct ReleaseBodyV6 {
    agents: Vec<SourceFile>,
    eval_suites: Vec<SourceFile>,
    operations: Vec<ReleasedOperation>,
    ledger: Ledger,
    decider_policies: Vec<SourceFile>,
    budgets: Vec<SourceFile>,
    model_providers: Vec<ReleasedProvider>,
    workflows: Vec<SourceFile>,
    schedules: Vec<SourceFile>,
    connections: Vec<ReleasedConnectionV1>,
    tool_exposures: Vec<SourceFile>,
}

/// A connection as release versions 5 and 6 stored it: the manifest and
/// its OpenAPI document, without CA certificates.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct ReleasedConnectionV1 {
    source: SourceFile,
    openapi: String,
}

impl From<ReleasedConnectionV1> for ReleasedConnection {
    fn from(old: ReleasedConnectionV1) -> Self {
        ReleasedConnection {
            source: old.source,
            openapi: old.openapi,
            ca_certificates: None,
        }
    }
}

/// A release body as version 5 stored it: its ledger without an ontology.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct ReleaseBodyV5 {
    agents: Vec<SourceFile>,
    eval_suites: Vec<SourceFile>,
    operations: Vec<ReleasedOperation>,
    ledger: LedgerV1,
    decider_policies: Vec<SourceFile>,
    budgets: Vec<SourceFile>,
    model_providers: Vec<ReleasedProvider>,
    workflows: Vec<SourceFile>,
    schedules: Vec<SourceFile>,
    connections: Vec<ReleasedConnectionV1>,
    tool_exposures: Vec<SourceFile>,
}

/// A ledger as release versions 1 to 5 stored it: collections and document
/// sets, without an ontology.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct LedgerV1 {
    collections: BTreeMap<String, Vec<hane_core::ledger::Record>>,
    document_sets: BTreeMap<String, hane_core::ledger::DocumentSet>,
}

impl From<LedgerV1> for Ledger {
    fn from(old: LedgerV1) -> Self {
        Ledger {
            collections: old
                .collections
                .into_iter()
                .map(|(name, records)| (name, hane_core::ledger::Collection::new(records)))
                .collect(),
            document_sets: old.document_sets,
            ontology: None,
        }
    }
}

/// A release body as version 4 stored it: without connections and tool
/// exposures.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct ReleaseBodyV4 {
    agents: Vec<SourceFile>,
    eval_suites: Vec<SourceFile>,
    operations: Vec<ReleasedOperation>,
    ledger: LedgerV1,
    decider_policies: Vec<SourceFile>,
    budgets: Vec<SourceFile>,
    model_providers: Vec<ReleasedProvider>,
    workflows: Vec<SourceFile>,
    schedules: Vec<SourceFile>,
}

/// A `ModelProvider` as a release stores it: the manifest, and the
/// recording a `recorded` provider replays, so that the release runs
/// without the files it came from and a rollback brings the recording back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleasedProvider {
    /// The manifest.
    pub source: SourceFile,
    /// The recording's text.
    pub recording: Option<String>,
}

/// A release body as version 3 stored it: without workflows and
/// schedules.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct ReleaseBodyV3 {
    agents: Vec<SourceFile>,
    eval_suites: Vec<SourceFile>,
    operations: Vec<ReleasedOperation>,
    ledger: LedgerV1,
    decider_policies: Vec<SourceFile>,
    budgets: Vec<SourceFile>,
    model_providers: Vec<ReleasedProvider>,
}

/// A release body as version 2 stored it: without model providers.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct ReleaseBodyV2 {
    agents: Vec<SourceFile>,
    eval_suites: Vec<SourceFile>,
    operations: Vec<ReleasedOperation>,
    ledger: LedgerV1,
    decider_policies: Vec<SourceFile>,
    budgets: Vec<SourceFile>,
}

/// A release body as version 1 stored it: without decider policies and
/// budgets, and with policies that had no `actions` grant.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct ReleaseBodyV1 {
    agents: Vec<SourceFile>,
    eval_suites: Vec<SourceFile>,
    operations: Vec<ReleasedOperationV1>,
    ledger: LedgerV1,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct ReleasedOperationV1 {
    name: String,
    digest: String,
    policy: PolicyV1,
    limits: Limits,
    version: String,
    description: String,
    input_schema: String,
    output_schema: String,
    impact: Impact,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct PolicyV1 {
    files: Vec<DirGrant>,
    env: Vec<EnvGrant>,
    http: Vec<HostPattern>,
    records: Vec<String>,
    documents: Vec<String>,
}

impl From<ReleasedOperationV1> for ReleasedOperation {
    fn from(old: ReleasedOperationV1) -> Self {
        let p = old.policy;
        ReleasedOperation {
            name: old.name,
            digest: old.digest,
            policy: Policy {
                files: p.files,
                env: p.env,
                http: p.http,
                records: p.records,
                documents: p.documents,
                actions: Vec::new(),
            },
            limits: old.limits,
            version: old.version,
            description: old.description,
            input_schema: old.input_schema,
            output_schema: old.output_schema,
            impact: old.impact,
        }
    }
}

/// Version 2 added decider policies and budgets, version 3 model
/// providers, version 4 workflows and schedules, version 5 connections and
/// tool exposures, version 6 the ledger's ontology, version 7 the
/// connections' CA certificates.
impl Versioned for ReleaseBody {
    const KIND: &'static str = "release";
    const VERSION: u16 = 7;
    const READS: &'static [u16] = &[1, 2, 3, 4, 5, 6, 7];

    fn upgrade(version: u16, payload: &[u8]) -> Result<Self, postcard::Error> {
        if version == 6 {
            let v6: ReleaseBodyV6 = postcard::from_bytes(payload)?;
            return Ok(ReleaseBody {
                agents: v6.agents,
                eval_suites: v6.eval_suites,
                operations: v6.operations,
                ledger: v6.ledger,
                decider_policies: v6.decider_policies,
                budgets: v6.budgets,
                model_providers: v6.model_providers,
                workflows: v6.workflows,
                schedules: v6.schedules,
                connections: v6.connections.into_iter().map(Into::into).collect(),
                tool_exposures: v6.tool_exposures,
            });
        }
        if version == 5 {
            let v5: ReleaseBodyV5 = postcard::from_bytes(payload)?;
            return Ok(ReleaseBody {
                agents: v5.agents,
                eval_suites: v5.eval_suites,
                operations: v5.operations,
                ledger: v5.ledger.into(),
                decider_policies: v5.decider_policies,
                budgets: v5.budgets,
                model_providers: v5.model_providers,
                workflows: v5.workflows,
                schedules: v5.schedules,
                connections: v5.connections.into_iter().map(Into::into).collect(),
                tool_exposures: v5.tool_exposures,
            });
        }
        if version == 4 {
            let v4: ReleaseBodyV4 = postcard::from_bytes(payload)?;
            return Ok(ReleaseBody {
                agents: v4.agents,
                eval_suites: v4.eval_suites,
                operations: v4.operations,
                ledger: v4.ledger.into(),
                decider_policies: v4.decider_policies,
                budgets: v4.budgets,
                model_providers: v4.model_providers,
                workflows: v4.workflows,
                schedules: v4.schedules,
                connections: Vec::new(),
                tool_exposures: Vec::new(),
            });
        }
        if version == 3 {
            let v3: ReleaseBodyV3 = postcard::from_bytes(payload)?;
            return Ok(ReleaseBody {
                agents: v3.agents,
                eval_suites: v3.eval_suites,
                operations: v3.operations,
                ledger: v3.ledger.into(),
                decider_policies: v3.decider_policies,
                budgets: v3.budgets,
                model_providers: v3.model_providers,
                workflows: Vec::new(),
                schedules: Vec::new(),
                connections: Vec::new(),
                tool_exposures: Vec::new(),
            });
        }
        if version == 1 {
            let v1: ReleaseBodyV1 = postcard::from_bytes(payload)?;
            return Ok(ReleaseBody {
                agents: v1.agents,
                eval_suites: v1.eval_suites,
                operations: v1.operations.into_iter().map(Into::into).collect(),
                ledger: v1.ledger.into(),
                decider_policies: Vec::new(),
                budgets: Vec::new(),
                model_providers: Vec::new(),
                workflows: Vec::new(),
                schedules: Vec::new(),
                connections: Vec::new(),
                tool_exposures: Vec::new(),
            });
        }
        let v2: ReleaseBodyV2 = postcard::from_bytes(payload)?;
        Ok(ReleaseBody {
            agents: v2.agents,
            eval_suites: v2.eval_suites,
            operations: v2.operations,
            ledger: v2.ledger.into(),
            decider_policies: v2.decider_policies,
            budgets: v2.budgets,
            model_providers: Vec::new(),
            workflows: Vec::new(),
            schedules: Vec::new(),
            connections: Vec::new(),
            tool_exposures: Vec::new(),
        })
    }
}

/// Why a release was not activated; nothing changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActivationError {
    /// The bundle has errors, each naming its file, line and field.
    #[error("the release has {} error{}:\n{}", .0.len(), if .0.len() == 1 { "" } else { "s" }, Lines(.0))]
    Invalid(Vec<ManifestError>),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The release was stored but could not be made the one runs use.
    #[error(transparent)]
    Load(#[from] ReleaseLoadError),
}

/// Errors one to a line.
struct Lines<'a>(&'a [ManifestError]);

impl std::fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// An agent of a loaded release, with its schemas compiled and its tools
/// resolved.
pub struct LoadedAgent {
    /// The manifest.
    pub manifest: AgentManifest,
    /// Its input schema.
    pub input: Schema,
    /// Its output schema.
    pub output: Schema,
    /// The tools it may call, by name: those in its `tools` and
    /// `submit_result`.
    pub tools: BTreeMap<String, Tool>,
    /// Its model, resolved from `spec.model` or the release's default,
    /// when it names one or its driver uses one.
    pub model: Option<AgentModel>,
}

impl LoadedAgent {
    /// Whether it reviews actions: it may call `submit_review`.
    pub fn reviews(&self) -> bool {
        self.tools
            .contains_key(hane_core::ControlTool::SubmitReview.name())
    }
}

/// The model an agent calls: the provider's name and the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentModel {
    /// The `ModelProvider`.
    pub provider: String,
    /// The model.
    pub model: ProviderModel,
}

/// A `ModelProvider` of a loaded release.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedProvider {
    /// The manifest.
    pub manifest: ModelProviderManifest,
    /// The recording a `recorded` provider replays.
    pub recording: Option<String>,
}

impl std::fmt::Debug for LoadedAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedAgent")
            .field("name", &self.manifest.metadata.name)
            .finish_non_exhaustive()
    }
}

/// A workflow of a loaded release, with its input schema compiled.
#[derive(Debug)]
pub struct LoadedWorkflow {
    /// The manifest.
    pub manifest: WorkflowManifest,
    /// The schema a case's input must match.
    pub input: Schema,
}

/// A release ready to run.
#[derive(Debug)]
pub struct LoadedRelease {
    /// Its number.
    pub info: ReleaseInfo,
    /// Its agents by name.
    pub agents: BTreeMap<String, Arc<LoadedAgent>>,
    /// Its evaluation suites by name.
    pub eval_suites: BTreeMap<String, EvalSuiteManifest>,
    /// Its workflows by name.
    pub workflows: BTreeMap<String, Arc<LoadedWorkflow>>,
    /// Every tool the release offers, by name.
    pub tools: BTreeMap<String, ToolDefinition>,
    /// The components it runs, by digest.
    pub digests: Vec<String>,
    /// Its ledger.
    pub ledger: Arc<Ledger>,
    /// Its DeciderPolicies by name.
    pub decider_policies: BTreeMap<String, DeciderPolicySpec>,
    /// Its Budgets.
    pub budgets: Vec<ActiveBudget>,
    /// Its ModelProviders by name.
    pub providers: BTreeMap<String, Arc<LoadedProvider>>,
    /// Its Schedules by name; only `hane serve` starts their runs.
    pub schedules: BTreeMap<String, ScheduleManifest>,
    /// Its Connections by name.
    pub connections: BTreeMap<String, Arc<LoadedConnection>>,
}

impl LoadedRelease {
    /// The release's Budget for `scope`, if it has one.
    pub fn budget_for(&self, scope: &BudgetScope) -> Option<ActiveBudget> {
        self.budgets
            .iter()
            .find(|b| scope.matches(&b.spec))
            .cloned()
    }
}

/// Checks the release in `dir` and activates it. Every manifest is
/// parsed and checked, every component (a file, or `builtin:NAME` from
/// `components`) loaded in `sandbox` under its
/// policy (so an import without its grant is refused now, not at the
/// first call), the ledger read, and every agent's schemas and tools
/// checked, and what every agent's `cliProfile` names checked by
/// `external`; then the release is stored and made active in one
/// transaction.
///
/// # Errors
///
/// All the problems found, each naming its file; or the store failed.
/// Either way the active release is unchanged.
pub async fn activate_dir(
    dir: &Path,
    sandbox: &Sandbox,
    builtins: &Components,
    registry: &Registry,
    external: Option<&dyn ExternalDrivers>,
) -> Result<(ReleaseInfo, LoadedRelease), ActivationError> {
    let (new, loaded) = prepare_dir(dir, sandbox, builtins, external).await?;
    let info = registry.releases().activate(new).await?;
    let loaded = LoadedRelease {
        info: info.clone(),
        ..loaded
    };
    Ok((info, loaded))
}

/// Checks the release in `dir` as [`activate_dir`] does, and returns what
/// would be stored and what runs would use, storing nothing.
pub(crate) async fn prepare_dir(
    dir: &Path,
    sandbox: &Sandbox,
    builtins: &Components,
    external: Option<&dyn ExternalDrivers>,
) -> Result<(NewRelease, LoadedRelease), ActivationError> {
    let (body, components) = build(dir, sandbox, builtins, external).await?;
    let sealed = hane_stored::seal(&body);
    let providers = match body.model_providers.len() {
        0 => String::new(),
        1 => ", 1 model provider".to_owned(),
        n => format!(", {n} model providers"),
    };
    let workflows = match body.workflows.len() {
        0 => String::new(),
        n => format!(", {n} workflow{}", plural(n)),
    };
    let schedules = match body.schedules.len() {
        0 => String::new(),
        n => format!(", {n} schedule{}", plural(n)),
    };
    let connections = match (body.connections.len(), body.tool_exposures.len()) {
        (0, 0) => String::new(),
        (c, e) => format!(
            ", {c} connection{}, {e} tool exposure{}",
            plural(c),
            plural(e)
        ),
    };
    let ontology = match &body.ledger.ontology {
        None => String::new(),
        Some(o) => format!(
            ", an ontology of {} object type{}",
            o.object_types.len(),
            plural(o.object_types.len())
        ),
    };
    let summary = format!(
        "{} agent{}, {} operation{}{providers}{connections}, {} eval suite{}{workflows}{schedules}, {} collection{}, {} document set{}{ontology}",
        body.agents.len(),
        plural(body.agents.len()),
        body.operations.len(),
        plural(body.operations.len()),
        body.eval_suites.len(),
        plural(body.eval_suites.len()),
        body.ledger.collections.len(),
        plural(body.ledger.collections.len()),
        body.ledger.document_sets.len(),
        plural(body.ledger.document_sets.len()),
    );
    // Loading what will be stored checks the agents' schemas and tools
    // against the operations just loaded; it is also what runs use.
    let loaded = load_body(ReleaseInfo::default(), body).map_err(ActivationError::Invalid)?;
    let source = std::path::absolute(dir)
        .unwrap_or_else(|_| dir.to_owned())
        .display()
        .to_string();
    let new = NewRelease {
        source,
        summary,
        body: sealed,
        components,
    };
    Ok((new, loaded))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Reads and checks everything in `dir`.
async fn build(
    dir: &Path,
    sandbox: &Sandbox,
    builtins: &Components,
    external: Option<&dyn ExternalDrivers>,
) -> Result<(ReleaseBody, Vec<(String, Vec<u8>)>), ActivationError> {
    let definitions =
        hane_manifest::read_bundle_dir(dir).map_err(|e| ActivationError::Invalid(e.errors))?;
    let mut errors = Vec::new();
    let mut agents = Vec::new();
    let mut eval_suites = Vec::new();
    let mut workflows = Vec::new();
    let mut operations = Vec::new();
    let mut decider_policies = Vec::new();
    let mut budgets = Vec::new();
    let mut model_providers = Vec::new();
    let mut schedules = Vec::new();
    let mut connections = Vec::new();
    let mut tool_exposures = Vec::new();
    let mut ontology: Option<(String, OntologyManifest)> = None;
    let mut components: Vec<(String, Vec<u8>)> = Vec::new();
    let ledger_dir = dir.join("ledger");
    let mut ledger = if ledger_dir.is_dir() {
        match Ledger::load_dir(&ledger_dir) {
            Ok(ledger) => ledger,
            Err(e) => {
                errors.push(e.into());
                Ledger::default()
            }
        }
    } else {
        Ledger::default()
    };
    for sourced in definitions {
        let file = relative(dir, &sourced.file);
        match sourced.definition {
            // Stored as JSON, which the YAML parser reads back (and checks
            // again) when the release is loaded.
            Definition::Agent(manifest) => {
                // A release runs only what is there: the image a profile
                // names must be built before the release is active.
                if manifest.spec.cli_profile.is_some() {
                    let checked = match external {
                        Some(external) => external.check(&manifest).map_err(|e| e.to_string()),
                        None => Err(NoExternalDrivers.to_string()),
                    };
                    if let Err(message) = checked {
                        errors.push(ManifestError::new(&file, "spec.cliProfile.image", message));
                    }
                }
                agents.push(SourceFile {
                    file,
                    text: serde_json::to_string(&manifest).expect("a manifest serializes"),
                });
            }
            Definition::EvalSuite(manifest) => eval_suites.push(SourceFile {
                file,
                text: serde_json::to_string(&manifest).expect("a manifest serializes"),
            }),
            Definition::Workflow(manifest) => workflows.push(SourceFile {
                file,
                text: serde_json::to_string(&manifest).expect("a manifest serializes"),
            }),
            Definition::DeciderPolicy(manifest) => decider_policies.push(SourceFile {
                file,
                text: serde_json::to_string(&manifest).expect("a manifest serializes"),
            }),
            Definition::Budget(manifest) => budgets.push(SourceFile {
                file,
                text: serde_json::to_string(&manifest).expect("a manifest serializes"),
            }),
            Definition::Schedule(manifest) => schedules.push(SourceFile {
                file,
                text: serde_json::to_string(&manifest).expect("a manifest serializes"),
            }),
            Definition::ToolExposure(manifest) => tool_exposures.push(SourceFile {
                file,
                text: serde_json::to_string(&manifest).expect("a manifest serializes"),
            }),
            // A release has one ontology: the ledger's.
            Definition::Ontology(manifest) => match &ontology {
                Some((first, _)) => errors.push(ManifestError::new(
                    &file,
                    "kind",
                    format!(
                        "a release has one Ontology, and `{first}` defines it already; put every object type in one"
                    ),
                )),
                None => ontology = Some((file, manifest)),
            },
            Definition::Connection(manifest) => {
                let folder = sourced.file.parent().unwrap_or(Path::new("."));
                let openapi = integrations::read_openapi(&file, &manifest, folder);
                let ca_certificates = integrations::read_ca_file(&file, &manifest, folder);
                match (openapi, ca_certificates) {
                    (Ok(openapi), Ok(ca_certificates)) => connections.push(ReleasedConnection {
                        source: SourceFile {
                            file,
                            text: serde_json::to_string(&manifest).expect("a manifest serializes"),
                        },
                        openapi,
                        ca_certificates,
                    }),
                    (openapi, ca_certificates) => {
                        errors.extend(openapi.err());
                        errors.extend(ca_certificates.err());
                    }
                }
            }
            Definition::ModelProvider(manifest) => {
                let folder = sourced.file.parent().unwrap_or(Path::new("."));
                match provider_recording(&file, &manifest, folder) {
                    Ok(recording) => model_providers.push(ReleasedProvider {
                        source: SourceFile {
                            file,
                            text: serde_json::to_string(&manifest).expect("a manifest serializes"),
                        },
                        recording,
                    }),
                    Err(e) => errors.push(e),
                }
            }
            Definition::Operation(manifest) => {
                let operation =
                    release_operation(&sourced.file, &file, &manifest, sandbox, builtins, &ledger);
                match operation.await {
                    Ok((operation, bytes)) => {
                        if !components.iter().any(|(d, _)| *d == operation.digest) {
                            components.push((operation.digest.clone(), bytes));
                        }
                        operations.push(operation);
                    }
                    Err(e) => errors.push(e),
                }
            }
        }
    }
    if let Some((file, manifest)) = ontology {
        let checked = manifest.ontology();
        let problems = checked.check(&ledger);
        if problems.is_empty() {
            ledger.ontology = Some(checked);
        }
        errors.extend(
            problems
                .into_iter()
                .map(|p| ManifestError::new(&file, format!("spec.{}", p.field), p.message)),
        );
    }
    let body = ReleaseBody {
        agents,
        eval_suites,
        operations,
        ledger,
        decider_policies,
        budgets,
        model_providers,
        workflows,
        schedules,
        connections,
        tool_exposures,
    };
    if errors.is_empty() {
        Ok((body, components))
    } else {
        Err(ActivationError::Invalid(errors))
    }
}

/// The recording a `recorded` provider replays, read from beside its
/// manifest in `folder` and checked; `None` for other providers.
fn provider_recording(
    file: &str,
    manifest: &ModelProviderManifest,
    folder: &Path,
) -> Result<Option<String>, ManifestError> {
    let (ModelApi::Recorded, Some(recording)) = (manifest.spec.api, &manifest.spec.recording)
    else {
        return Ok(None);
    };
    let fail = |message: String| ManifestError::new(file, "spec.recording", message);
    let at = folder.join(recording);
    let text =
        read_capped_text(&at, hane_model::Recording::CAP).map_err(|e| fail(e.to_string()))?;
    hane_model::Recording::parse(&text, at.display().to_string())
        .map_err(|e| fail(e.to_string()))?;
    Ok(Some(text))
}

fn relative(dir: &Path, file: &Path) -> String {
    file.strip_prefix(dir).unwrap_or(file).display().to_string()
}

/// The bytes of the component an operation's `spec.component` names: a
/// built-in of this runtime (`builtin:NAME`) or a file beside the manifest
/// in `folder`.
fn component_bytes(
    file: &str,
    component: &str,
    folder: &Path,
    builtins: &Components,
) -> Result<Vec<u8>, ManifestError> {
    let fail = |message: String| ManifestError::new(file, "spec.component", message);
    match component.strip_prefix("builtin:") {
        Some(builtin) => builtins
            .builtin(builtin)
            .map(|b| b.to_vec())
            .ok_or_else(|| {
                let names = builtins.builtin_names();
                let known = if names.is_empty() {
                    "this runtime has none".to_owned()
                } else {
                    format!("built in are {}", names.join(", "))
                };
                fail(format!("no built-in operation `{builtin}`; {known}"))
            }),
        None => {
            let at = folder.join(component);
            read_capped(&at, FileCap::COMPONENT).map_err(|e| fail(e.to_string()))
        }
    }
}

async fn release_operation(
    path: &Path,
    file: &str,
    manifest: &OperationManifest,
    sandbox: &Sandbox,
    builtins: &Components,
    ledger: &Ledger,
) -> Result<(ReleasedOperation, Vec<u8>), ManifestError> {
    let fail = |field: &str, message: String| ManifestError::new(file, field, message);
    let name = &manifest.metadata.name;
    let folder = path.parent().unwrap_or(Path::new("."));
    let component = &manifest.spec.component;
    let bytes = component_bytes(file, component, folder, builtins)?;
    let policy = resolve_policy(&manifest.spec.capabilities, folder);
    for collection in &policy.records {
        if !ledger.collections.contains_key(collection) {
            return Err(fail(
                "spec.capabilities.records",
                format!(
                    "collection `{collection}` is not in the release's ledger (ledger/records/)"
                ),
            ));
        }
    }
    for set in &policy.documents {
        if !ledger.document_sets.contains_key(set) {
            return Err(fail(
                "spec.capabilities.documents",
                format!("document set `{set}` is not in the release's ledger (ledger/documents/)"),
            ));
        }
    }
    let loaded = sandbox
        .load(name, &bytes, &policy)
        .await
        .map_err(|e| fail("spec.component", e.to_string()))?;
    let descriptor = loaded.descriptor();
    if let Some(declared) = manifest.spec.impact
        && declared != descriptor.impact
    {
        return Err(fail(
            "spec.impact",
            format!(
                "the manifest says `{declared}` but the component describes itself as `{}`",
                descriptor.impact
            ),
        ));
    }
    let limits = manifest.spec.limits.apply_to(sandbox.default_limits());
    Ok((
        ReleasedOperation {
            name: name.clone(),
            digest: loaded.digest().to_owned(),
            policy,
            limits,
            version: descriptor.version.clone(),
            description: descriptor.description.clone(),
            input_schema: descriptor.input_schema.clone(),
            output_schema: descriptor.output_schema.clone(),
            impact: descriptor.impact,
        },
        bytes,
    ))
}

/// The policy with relative host directories made absolute, from the
/// manifest's folder.
fn resolve_policy(policy: &Policy, folder: &Path) -> Policy {
    let mut policy = policy.clone();
    for grant in &mut policy.files {
        if grant.host.is_relative() {
            let joined: PathBuf = folder.join(&grant.host);
            grant.host = std::path::absolute(&joined).unwrap_or(joined);
        }
    }
    policy
}

/// Reads the active release from `registry`, if there is one.
///
/// # Errors
///
/// The store failed or the stored release cannot be read.
pub async fn load_active(registry: &Registry) -> Result<Option<LoadedRelease>, ReleaseLoadError> {
    let Some((info, body)) = registry.releases().active().await? else {
        return Ok(None);
    };
    let release = info.number;
    let corrupt = |message: String| ReleaseLoadError::Corrupt { release, message };
    let body: ReleaseBody = hane_stored::open(&body).map_err(|e| corrupt(e.to_string()))?;
    load_body(info, body)
        .map(Some)
        .map_err(|errors| corrupt(Lines(&errors).to_string()))
}

/// Reads release `number` from `registry`, active or not.
///
/// # Errors
///
/// The store failed or the stored release cannot be read.
pub(crate) async fn load_numbered(
    registry: &Registry,
    number: u64,
) -> Result<Option<LoadedRelease>, ReleaseLoadError> {
    let Some((info, body)) = registry.releases().get(number).await? else {
        return Ok(None);
    };
    let corrupt = |message: String| ReleaseLoadError::Corrupt {
        release: number,
        message,
    };
    let body: ReleaseBody = hane_stored::open(&body).map_err(|e| corrupt(e.to_string()))?;
    load_body(info, body)
        .map(Some)
        .map_err(|errors| corrupt(Lines(&errors).to_string()))
}

/// Why the active release could not be loaded from the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReleaseLoadError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored release does not read, or no longer links.
    #[error("release {release}: {message}")]
    Corrupt {
        /// Its number.
        release: u64,
        /// What is wrong.
        message: String,
    },
}

/// Parses and links a stored release.
use checks::{check_schedule, check_suite};

fn load_body(info: ReleaseInfo, body: ReleaseBody) -> Result<LoadedRelease, Vec<ManifestError>> {
    let mut errors = Vec::new();
    let mut connections = BTreeMap::new();
    for released in &body.connections {
        match integrations::load_connection(released) {
            Ok(loaded) => {
                connections.insert(loaded.name().to_owned(), Arc::new(loaded));
            }
            Err(e) => errors.extend(e),
        }
    }
    let mut exposures = Vec::new();
    for source in &body.tool_exposures {
        match ToolExposureManifest::from_yaml(&source.file, &source.text) {
            Ok(exposure) => exposures.push((source.file.clone(), exposure)),
            Err(e) => errors.push(e),
        }
    }
    let registry = ToolRegistry::new(&body.operations, &connections, &exposures, &mut errors);
    let mut providers = BTreeMap::new();
    for released in &body.model_providers {
        let source = &released.source;
        match ModelProviderManifest::from_yaml(&source.file, &source.text) {
            Ok(manifest) => {
                providers.insert(
                    manifest.metadata.name.clone(),
                    Arc::new(LoadedProvider {
                        manifest,
                        recording: released.recording.clone(),
                    }),
                );
            }
            Err(e) => errors.push(e),
        }
    }
    let manifests: Vec<&ModelProviderManifest> = providers.values().map(|p| &p.manifest).collect();
    let mut agents = BTreeMap::new();
    for source in &body.agents {
        if let Some(agent) = load_agent(source, &registry, &manifests, &mut errors) {
            agents.insert(agent.manifest.metadata.name.clone(), Arc::new(agent));
        }
    }
    let mut eval_suites = BTreeMap::new();
    for source in &body.eval_suites {
        match EvalSuiteManifest::from_yaml(&source.file, &source.text) {
            Ok(suite) => {
                check_suite(&source.file, &suite, &agents, &mut errors);
                eval_suites.insert(suite.metadata.name.clone(), suite);
            }
            Err(e) => errors.push(e),
        }
    }
    let mut workflows = BTreeMap::new();
    for source in &body.workflows {
        match WorkflowManifest::from_yaml(&source.file, &source.text) {
            Ok(manifest) => match Schema::from_value(&manifest.spec.input) {
                Ok(input) => {
                    workflows.insert(
                        manifest.metadata.name.clone(),
                        Arc::new(LoadedWorkflow { manifest, input }),
                    );
                }
                Err(e) => errors.push(ManifestError::new(
                    &source.file,
                    "spec.input",
                    format!("not a valid JSON Schema: {e}"),
                )),
            },
            Err(e) => errors.push(e),
        }
    }
    let mut decider_policies = BTreeMap::new();
    for source in &body.decider_policies {
        match DeciderPolicyManifest::from_yaml(&source.file, &source.text) {
            Ok(policy) => {
                decider_policies.insert(policy.metadata.name.clone(), policy.spec);
            }
            Err(e) => errors.push(e),
        }
    }
    let mut budgets = Vec::new();
    for source in &body.budgets {
        match BudgetManifest::from_yaml(&source.file, &source.text) {
            Ok(budget) => budgets.push(ActiveBudget {
                name: budget.metadata.name,
                spec: budget.spec,
            }),
            Err(e) => errors.push(e),
        }
    }
    let mut schedules = BTreeMap::new();
    for source in &body.schedules {
        match ScheduleManifest::from_yaml(&source.file, &source.text) {
            Ok(schedule) => {
                check_schedule(&source.file, &schedule, &agents, &workflows, &mut errors);
                schedules.insert(schedule.metadata.name.clone(), schedule);
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let tools = registry.into_definitions();
    let mut digests: Vec<String> = body.operations.iter().map(|o| o.digest.clone()).collect();
    digests.sort();
    digests.dedup();
    Ok(LoadedRelease {
        info,
        agents,
        eval_suites,
        workflows,
        tools,
        digests,
        ledger: Arc::new(body.ledger),
        decider_policies,
        budgets,
        providers,
        schedules,
        connections,
    })
}

/// Parses the agent in `source`, compiles its schemas and resolves its
/// tools in `registry`; `None` after pushing what is wrong to `errors`.
fn load_agent(
    source: &SourceFile,
    registry: &ToolRegistry<'_>,
    providers: &[&ModelProviderManifest],
    errors: &mut Vec<ManifestError>,
) -> Option<LoadedAgent> {
    let manifest = match AgentManifest::from_yaml(&source.file, &source.text) {
        Ok(m) => m,
        Err(e) => {
            errors.push(e);
            return None;
        }
    };
    let file = &source.file;
    let schema = |field: &str, value: &serde_json::Value| {
        Schema::from_value(value).map_err(|e| {
            ManifestError::new(
                file,
                format!("spec.{field}"),
                format!("not a valid JSON Schema: {e}"),
            )
        })
    };
    let (input, output) = match (
        schema("input", &manifest.spec.input),
        schema("output", &manifest.spec.output),
    ) {
        (Ok(i), Ok(o)) => (i, o),
        (i, o) => {
            errors.extend(i.err());
            errors.extend(o.err());
            return None;
        }
    };
    let tools = registry.agent_tools(file, &manifest.spec, errors);
    let spec = &manifest.spec;
    let model = if spec.model.is_none() && spec.driver != hane_manifest::Driver::Llm {
        // A CLI driver takes the release's default model when there is
        // one; without one its runs are refused when they start.
        spec.driver
            .is_cli()
            .then(|| hane_manifest::resolve_model(None, providers).ok())
            .flatten()
            .map(|(provider, model)| AgentModel {
                provider: provider.metadata.name.clone(),
                model: model.clone(),
            })
    } else {
        match hane_manifest::resolve_model(spec.model.as_deref(), providers) {
            Ok((provider, model)) => Some(AgentModel {
                provider: provider.metadata.name.clone(),
                model: model.clone(),
            }),
            Err(message) => {
                let field = if spec.model.is_some() {
                    "spec.model"
                } else {
                    "spec.driver"
                };
                errors.push(ManifestError::new(file, field, message.to_string()));
                return None;
            }
        }
    };
    Some(LoadedAgent {
        manifest,
        input,
        output,
        tools,
        model,
    })
}

mod checks;
#[cfg(test)]
mod tests;
