//! Evaluations: an `EvalSuite`'s cases run as shadow runs of its agent,
//! each result compared with what the case expects
//! ([`hane_core::evaluation::compare_result`]), the evaluation stored; two evaluations
//! of a suite compared case by case; and a release activated only when
//! its suites pass ([`Evaluations::activate_evaluated`]).

use crate::runtime::Releases;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use hane_core::{
    ErrorKind, Evaluation, EvaluationId, JsonText, RunStatus,
    evaluation::{CaseOutcome, CaseResult, EvaluationComparison, compare_result},
    now_ms,
};
use hane_manifest::{EvalCase, EvalSuiteManifest};
use hane_store::{EvaluationRow, Registry, ReleaseInfo, StoreError};
use serde_json::Value;

use crate::Listed;
use crate::release::{ActivationError, LoadedRelease, ReleaseLoadError};
use crate::runtime::{AgentRuntime, RunContext, RunError, StartRun};

/// The most cases of one evaluation running at once.
pub const MAX_CONCURRENT_CASES: usize = 8;

/// Why an evaluation could not run, be read or be compared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// No release, or it could not be read.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The release has no suite of this name.
    #[error("suite `{suite}` is not in release {release}{}", if .known.is_empty() { "; it has no EvalSuite".to_owned() } else { format!("; its suites are {}", .known.join(", ")) })]
    UnknownSuite {
        /// The name asked for.
        suite: String,
        /// The release.
        release: u64,
        /// Its suites.
        known: Vec<String>,
    },
    /// No evaluation has this id.
    #[error("evaluation `{0}` not found")]
    NotFound(String),
    /// The two evaluations are of different suites.
    #[error("{0}")]
    DifferentSuites(String),
    /// The candidate release has errors.
    #[error(transparent)]
    Activation(#[from] ActivationError),
    /// A candidate whose ledger differs from the active release's: the
    /// sandbox reads one ledger at a time, the active one's.
    #[error(
        "the ledger in {dir} differs from the active release {active}'s; operations read the active release's ledger, so this candidate cannot be evaluated before it is active: activate it without --eval and run `hane eval run` on it"
    )]
    LedgerChanged {
        /// The candidate's directory.
        dir: String,
        /// The active release.
        active: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored evaluation could not be read.
    #[error("{0}")]
    Corrupt(String),
}

impl EvalError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            EvalError::Run(e) => e.kind(),
            EvalError::UnknownSuite { .. } | EvalError::NotFound(_) => ErrorKind::NotFound,
            EvalError::DifferentSuites(_) => ErrorKind::Invalid,
            EvalError::Activation(ActivationError::Invalid(_)) => ErrorKind::Invalid,
            EvalError::LedgerChanged { .. } => ErrorKind::Conflict,
            EvalError::Activation(_) | EvalError::Store(_) | EvalError::Corrupt(_) => {
                ErrorKind::Internal
            }
        }
    }
}

impl From<ReleaseLoadError> for EvalError {
    fn from(e: ReleaseLoadError) -> Self {
        match e {
            ReleaseLoadError::Store(e) => EvalError::Store(e),
            e => EvalError::Corrupt(e.to_string()),
        }
    }
}

/// What a gated activation did ([`Evaluations::activate_evaluated`]).
#[derive(Debug, Clone)]
pub struct Gated {
    /// The release, stored; active when `activated`.
    pub release: ReleaseInfo,
    /// Each of its suites' evaluations, by suite name.
    pub evaluations: Vec<Evaluation>,
    /// Whether every suite met its `passRate` and the release became
    /// active.
    pub activated: bool,
}

/// Evaluations of a release's suites: each case a shadow run, its result
/// compared with what the case expects; and a release activated only when
/// its suites pass. A service over the run kernel: it starts and waits for
/// runs through [`AgentRuntime`] and keeps evaluations in the registry.
#[derive(Clone)]
pub struct Evaluations {
    runs: AgentRuntime,
    registry: Registry,
}

impl std::fmt::Debug for Evaluations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluations").finish_non_exhaustive()
    }
}

impl Evaluations {
    /// Evaluations over the runs of `runs`, kept in its registry.
    pub fn new(runs: &AgentRuntime) -> Self {
        Self {
            runs: runs.clone(),
            registry: runs.registry().clone(),
        }
    }

    /// Evaluates suite `suite` of the active release: each case a shadow
    /// run of the suite's agent (at most [`MAX_CONCURRENT_CASES`] at
    /// once), its result compared with the case's `expect`. `progress` is
    /// called with each case as it ends. The evaluation is stored.
    ///
    /// # Errors
    ///
    /// No release, no such suite, or the store failed. A case whose run
    /// fails or cannot start is a failed case, not an error.
    pub async fn evaluate(
        &self,
        suite: &str,
        progress: impl FnMut(&CaseResult) + Send,
    ) -> Result<Evaluation, EvalError> {
        let release = self.runs.release().await?;
        let Some(manifest) = release.eval_suites.get(suite).cloned() else {
            return Err(EvalError::UnknownSuite {
                suite: suite.to_owned(),
                release: release.info.number,
                known: release.eval_suites.keys().cloned().collect(),
            });
        };
        self.evaluate_in(release, &manifest, false, progress).await
    }

    /// Evaluates `suite` against `release`'s definitions and stores it.
    async fn evaluate_in(
        &self,
        release: Arc<LoadedRelease>,
        suite: &EvalSuiteManifest,
        candidate: bool,
        mut progress: impl FnMut(&CaseResult) + Send,
    ) -> Result<Evaluation, EvalError> {
        let started = Instant::now();
        let created_at_ms = now_ms();
        let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_CASES));
        let mut cases = tokio::task::JoinSet::new();
        for (i, case) in suite.spec.cases.iter().enumerate() {
            let evaluations = self.clone();
            let release = release.clone();
            let agent = suite.spec.agent.clone();
            let case = case.clone();
            let permits = permits.clone();
            cases.spawn(async move {
                let _permit = permits.acquire_owned().await;
                (i, evaluations.run_case(release, agent, case).await)
            });
        }
        let mut done: Vec<Option<CaseResult>> = vec![None; suite.spec.cases.len()];
        while let Some(joined) = cases.join_next().await {
            match joined {
                Ok((i, result)) => {
                    progress(&result);
                    done[i] = Some(result);
                }
                Err(e) => {
                    // A case's task does not panic (a run's panic ends the
                    // run `failed`); if it did, its case stays missing and
                    // is reported below.
                    tracing::error!("an evaluation case's task ended: {e}");
                }
            }
        }
        let cases: Vec<CaseResult> = done
            .into_iter()
            .zip(&suite.spec.cases)
            .map(|(result, case)| {
                result.unwrap_or_else(|| {
                    failed_case(case, "the case's task ended without a result".to_owned())
                })
            })
            .collect();
        let evaluation = Evaluation {
            id: EvaluationId::new(),
            suite: suite.metadata.name.clone(),
            agent: suite.spec.agent.clone(),
            release: release.info.number,
            candidate,
            pass_rate: suite.spec.pass_rate,
            passed: cases
                .iter()
                .filter(|c| c.outcome == CaseOutcome::Passed)
                .count() as u32,
            cases,
            created_at_ms,
            duration_ms: started.elapsed().as_millis() as u64,
        };
        self.registry
            .evaluations()
            .add(EvaluationRow {
                id: evaluation.id.to_string(),
                suite: evaluation.suite.clone(),
                release: evaluation.release,
                created_at_ms,
                body: hane_stored::seal(&evaluation),
            })
            .await?;
        Ok(evaluation)
    }

    /// Runs one case as a shadow run in `release` and compares its result.
    async fn run_case(
        &self,
        release: Arc<LoadedRelease>,
        agent: String,
        case: EvalCase,
    ) -> CaseResult {
        let started = Instant::now();
        let request = StartRun {
            agent,
            input: case.input.clone(),
            shadow: true,
        };
        let context = RunContext {
            release: Some(release),
            ..RunContext::default()
        };
        let run = match self.runs.start_in(request, context).await {
            Ok(run) => run,
            Err(e) => return failed_case(&case, format!("the run could not start: {e}")),
        };
        let run = match self.runs.wait(&run.id).await {
            Ok(run) => run,
            Err(e) => {
                let mut failed = failed_case(&case, format!("reading the run: {e}"));
                failed.run = Some(run.id);
                return failed;
            }
        };
        let result: Option<Value> = run.result.as_ref().and_then(|r| r.to_value().ok());
        let differences = compare_result(&case.expect, result.as_ref());
        let outcome = if result.is_some() && differences.is_empty() {
            CaseOutcome::Passed
        } else {
            CaseOutcome::Failed
        };
        let error = match (&run.result, run.status) {
            (None, status) => Some(match &run.error {
                Some(error) => format!("the run ended {status}: {error}"),
                None => format!("the run ended {status} without a result"),
            }),
            (Some(_), RunStatus::Succeeded) => None,
            (Some(_), status) => run.error.clone().map(|e| format!("ended {status}: {e}")),
        };
        CaseResult {
            name: case.name,
            input: JsonText::from_value(&case.input),
            expect: JsonText::from_value(&case.expect),
            outcome,
            result: run.result.clone(),
            differences,
            error,
            run: Some(run.id),
            run_status: Some(run.status),
            tokens: run.tokens_used,
            duration_ms: started.elapsed().as_millis() as u64,
        }
    }

    /// The evaluation with this id.
    ///
    /// # Errors
    ///
    /// [`EvalError::NotFound`], or the store failed.
    pub async fn get(&self, id: &str) -> Result<Evaluation, EvalError> {
        let row = match id.parse::<EvaluationId>() {
            Ok(id) => self.registry.evaluations().get(id.as_str()).await?,
            Err(_) => None,
        };
        let row = row.ok_or_else(|| EvalError::NotFound(id.to_owned()))?;
        open_evaluation(&row)
    }

    /// Evaluations, newest first, of `suite` or of every suite; at most
    /// `limit` (0: the store's cap). A stored evaluation that does not
    /// read is left out and named in [`Listed::skipped`].
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn list(
        &self,
        suite: Option<String>,
        limit: u32,
    ) -> Result<Listed<Evaluation>, EvalError> {
        let rows = self.registry.evaluations().list(suite, limit).await?;
        Ok(Listed::read(
            "evaluation",
            rows,
            |row| &row.id,
            |row| hane_stored::open(&row.body),
        ))
    }

    /// Compares evaluation `a` (the earlier) with `b`, case by case.
    ///
    /// # Errors
    ///
    /// Either is not found, they evaluate different suites, or the store
    /// failed.
    pub async fn compare(&self, a: &str, b: &str) -> Result<EvaluationComparison, EvalError> {
        let a = self.get(a).await?;
        let b = self.get(b).await?;
        a.compare(&b)
            .map_err(|e| EvalError::DifferentSuites(e.to_string()))
    }

    /// Checks the release in `dir` as [`AgentRuntime::activate`] does,
    /// stores it without making it active, and evaluates each of its
    /// suites against its own definitions; only when every suite meets its
    /// `passRate` does it become active. Otherwise the active release is
    /// unchanged, and the evaluations say which cases failed. A release
    /// without suites is activated as it is.
    ///
    /// `progress` is called with each suite's name, its number of cases and
    /// each case as it ends.
    ///
    /// # Errors
    ///
    /// The release has errors (nothing is stored), its ledger differs from
    /// the active release's, or the store failed.
    pub async fn activate_evaluated(
        &self,
        dir: &Path,
        mut progress: impl FnMut(&str, usize, &CaseResult) + Send,
    ) -> Result<Gated, EvalError> {
        let (new, loaded) = Releases::of(&self.runs).prepare_release(dir).await?;
        match self.runs.release().await {
            Ok(active) if active.ledger != loaded.ledger && !loaded.eval_suites.is_empty() => {
                return Err(EvalError::LedgerChanged {
                    dir: dir.display().to_string(),
                    active: active.info.number,
                });
            }
            Ok(_) | Err(RunError::NoRelease) => {}
            Err(e) => return Err(e.into()),
        }
        let info = self.registry.releases().store(new).await?;
        let candidate = Arc::new(LoadedRelease {
            info: info.clone(),
            ..loaded
        });
        Releases::of(&self.runs)
            .install_components(&candidate)
            .await?;
        let mut evaluations = Vec::new();
        for suite in candidate.eval_suites.values() {
            let name = suite.metadata.name.clone();
            let total = suite.spec.cases.len();
            let evaluation = self
                .evaluate_in(candidate.clone(), suite, true, |case| {
                    progress(&name, total, case)
                })
                .await?;
            evaluations.push(evaluation);
        }
        if !evaluations.iter().all(Evaluation::meets_pass_rate) {
            return Ok(Gated {
                release: info,
                evaluations,
                activated: false,
            });
        }
        let release = self
            .registry
            .releases()
            .activate_stored(info.number)
            .await?;
        self.runs.release().await?;
        Ok(Gated {
            release,
            evaluations,
            activated: true,
        })
    }
}

fn failed_case(case: &EvalCase, error: String) -> CaseResult {
    CaseResult {
        name: case.name.clone(),
        input: JsonText::from_value(&case.input),
        expect: JsonText::from_value(&case.expect),
        outcome: CaseOutcome::Failed,
        result: None,
        differences: compare_result(&case.expect, None),
        error: Some(error),
        run: None,
        run_status: None,
        tokens: 0,
        duration_ms: 0,
    }
}

fn open_evaluation(row: &EvaluationRow) -> Result<Evaluation, EvalError> {
    hane_stored::open(&row.body)
        .map_err(|e| EvalError::Corrupt(format!("evaluation `{}`: {e}", row.id)))
}
