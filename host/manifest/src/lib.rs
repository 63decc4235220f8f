//! What a hane release is written in: the YAML manifests of operations
//! (`operations/v1alpha1`), agents, evaluation suites, workflows,
//! schedules and decider policies (`agents/v1alpha1`), model providers and
//! budgets (`platform/v1alpha1`), the bundles that hold them, and the
//! checks each passes before a release is activated. An error names the
//! file, the line and the field at fault.
//!
//! The types these manifests produce at run time (ids, events, runs,
//! actions) are `hane-core`'s. The root re-exports each kind of manifest;
//! the details are in their modules.
//!
//! # Examples
//!
//! ```
//! use hane_core::{ByteSize, Limits};
//! use hane_manifest::OperationManifest;
//!
//! let manifest = OperationManifest::from_yaml("op.yaml", r#"
//! apiVersion: operations/v1alpha1
//! kind: Operation
//! metadata:
//!   name: documents.search
//! spec:
//!   component: builtin:documents.search
//!   capabilities:
//!     files:
//!       - host: examples/documents
//!         guest: /documents
//!   limits:
//!     memory: 32Mi
//!     timeout: 2s
//! "#).unwrap();
//! let limits = manifest.spec.limits.apply_to(Limits::default());
//! assert_eq!(limits.memory, ByteSize::mebibytes(32));
//! ```

pub mod agent;
pub mod budget;
pub mod bundle;
pub mod connection;
pub mod decider;
mod manifest;
pub mod ontology;
pub mod openapi;
pub mod provider;
pub mod schedule;
pub mod script;
pub mod workflow;

pub use agent::{
    AGENTS_API_VERSION, AgentLimits, AgentManifest, AgentSpec, Approval, CliProfile, Driver,
    DriverUnavailable, EvalCase, EvalSuiteManifest, EvalSuiteSpec, Handover, MAX_EVAL_CASES,
};
pub use budget::{BudgetManifest, BudgetSpec, PLATFORM_API_VERSION};
pub use bundle::{
    BundleError, Definition, MAX_BUNDLE_DEPTH, SourcedDefinition, UnresolvedModel, read_bundle_dir,
    resolve_model,
};
pub use connection::{ConnectionManifest, ConnectionSpec, ToolExposureManifest, ToolExposureSpec};
pub use decider::{
    Decider, DeciderPolicyManifest, DeciderPolicySpec, DeciderRule, PolicyVerdict, glob_matches,
};
pub use manifest::{
    ManifestError, Metadata, OPERATION_API_VERSION, OperationManifest, OperationSpec,
};
pub use ontology::OntologyManifest;
pub use provider::{
    DEFAULT_MODEL_TIMEOUT, ModelApi, ModelProviderManifest, ModelProviderSpec, ProviderModel,
};
pub use schedule::{
    Cadence, CadenceError, DEFAULT_TIME_ZONE, Missed, ScheduleManifest, ScheduleSpec,
    ScheduleTarget,
};
pub use script::{Scope, ScriptStep};
pub use workflow::{MAX_WORKFLOW_STEPS, TaskStep, WorkflowManifest, WorkflowSpec, WorkflowStep};
