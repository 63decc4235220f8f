//! hane's shared vocabulary: the limits a call runs under, the policy that
//! grants it capabilities, the receipt it leaves, and the text forms people
//! write them in (`64Mi`, `5s`, `https://*.example.com`).
//!
//! It also holds what sessions are made of: [`Input`]s with the caller's
//! ids, [`SessionEvent`]s, and [`Operation`]s, the serializable work a tool
//! call produces. Enums here are externally tagged because postcard, the
//! stored and wire format, is not self-describing.
//!
//! This crate has no runtime dependencies (no tokio, no wasmtime) so every
//! other part of hane — the sandbox, the store, the coordinator, the CLI —
//! can share these types and their serialized forms. Everything hane stores
//! goes through [`seal`] and [`open`], a version envelope that refuses an
//! item of an unknown version instead of misreading it.
//!
//! # Examples
//!
//! ```
//! use hane_core::{ByteSize, Limits, LimitsSpec, OperationManifest};
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

mod action;
mod address;
mod agent;
mod approval;
mod budget;
mod bundle;
mod conversation;
mod credential;
mod decider;
mod envelope;
mod error_kind;
mod evaluation;
mod event;
mod file;
mod ids;
mod input;
mod json;
pub mod ledger;
mod lifecycle;
mod manifest;
mod operation;
mod policy;
mod provider;
mod quantity;
mod receipt;
mod reception;
mod run;
mod schedule;
mod script;
mod tool;
mod v1;
mod v2;
mod v3;
mod workflow;

pub use action::ProposedAction;
pub use address::{
    AddressError, AddressKind, AddressProblem, MAX_API_PATH_BYTES, MAX_DOMAIN_BYTES,
    MAX_LABEL_BYTES, MAX_LOCAL_PART_BYTES, MAX_PHONE_DIGITS, MIN_PHONE_DIGITS, check_api_path,
    check_email_address, check_phone_number, check_recipient,
};
pub use agent::{
    AGENTS_API_VERSION, AgentLimits, AgentManifest, AgentSpec, Approval, CONTROL_TOOLS, CliProfile,
    Connection, Driver, DriverUnavailable, EvalCase, EvalSuiteManifest, EvalSuiteSpec, Handover,
    MAX_EVAL_CASES, OUTBOUND_TOOLS, REQUEST_HUMAN_HELP, SUBMIT_RESULT, SUBMIT_REVIEW, ToolExposure,
};
pub use approval::{
    ActionOutcome, ActionRequest, ActionState, Attempt, ConnectionTarget, DeciderKind, Decision,
    Person, UnknownActionState, Verdict, canonical_sha256, digest,
};
pub use budget::{BudgetManifest, BudgetSpec, PLATFORM_API_VERSION};
pub use bundle::{
    BundleError, Definition, MAX_BUNDLE_DEPTH, MAX_MANIFEST_BYTES, SourcedDefinition,
    UnresolvedModel, read_bundle_dir, resolve_model,
};
pub use conversation::{Conversation, ConversationEntry};
pub use credential::{CREDENTIAL_ENV_PREFIX, Secret, credential_env_var, credential_key};
pub use decider::{
    Decider, DeciderPolicyManifest, DeciderPolicySpec, DeciderRule, PolicyVerdict, glob_matches,
};
pub use envelope::{EnvelopeError, Versioned, open, seal};
pub use error_kind::ErrorKind;
pub use evaluation::{
    CaseChange, CaseComparison, CaseOutcome, CaseResult, Difference, DifferentSuites, Evaluation,
    EvaluationComparison, compare_result,
};
pub use event::{CliOutput, LlmTurn, Recorded, SessionEvent, ToolCall, ToolCallStatus};
pub use file::{
    FileCap, MAX_COMPONENT_BYTES, MAX_INPUT_BYTES, ReadError, ReadProblem, read_capped,
    read_capped_from, read_capped_text, read_capped_text_from,
};
pub use ids::{
    ActionId, ConversationId, EvaluationId, IdError, InputId, MAX_INPUT_ID_LEN, OperationId,
    ReceptionId, RunId, SessionId, TaskId, ToolCallId, WorkflowCaseId, now_ms,
};
pub use input::{Control, Input, InputKind};
pub use json::JsonText;
pub use ledger::{Ledger, LedgerError, QueryError};
pub use lifecycle::{IllegalTransition, Lifecycle, UnknownState};
pub use manifest::{
    ManifestError, Metadata, OPERATION_API_VERSION, OperationManifest, OperationSpec,
};
pub use operation::{
    GuestErrorKind, LogLine, Operation, OperationFailure, OperationKind, OperationOutput,
    OperationState, UnknownOperationState, WasmCall,
};
pub use policy::{Access, DirGrant, EnvGrant, HostPattern, Policy, PolicyError, Scheme};
pub use provider::{
    DEFAULT_MODEL_TIMEOUT, ModelApi, ModelProviderManifest, ModelProviderSpec, ProviderModel,
};
pub use quantity::{ByteSize, Duration, Limits, LimitsSpec, QuantityError};
pub use receipt::{HostCalls, Impact, Outcome, Receipt};
pub use reception::{Reception, ReceptionCandidate, ReceptionModelCall, ReceptionStatus};
pub use run::{
    AgentRun, RunStatus, Task, TaskState, ToolCallEnd, ToolCallSummary, UnknownRunStatus,
};
pub use schedule::{
    Cadence, CadenceError, DEFAULT_TIME_ZONE, Missed, ScheduleManifest, ScheduleSpec,
    ScheduleTarget, TickOutcome, UnknownTickOutcome,
};
pub use script::{
    Condition, MAX_RENDERED_BYTES, Scope, ScriptError, ScriptStep, TemplateError, ValuePath,
    check_script,
};
pub use tool::{ControlTool, ToolDefinition};
pub use workflow::{
    CaseStatus, CaseStep, CaseTask, MAX_WORKFLOW_STEPS, StepKind, StepStatus, TaskStep,
    WorkflowCase, WorkflowManifest, WorkflowSpec, WorkflowStep,
};

/// A boxed future that can be sent between threads: what the object-safe
/// async traits of hane's crates (model adapters, drivers, container
/// runtimes) return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;
