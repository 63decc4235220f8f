//! `hane op run | inspect | compile | new`.

mod scaffold;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use hane_core::{
    ByteSize, Duration, Ledger, Limits, LimitsSpec, Outcome, Policy, Receipt,
    file::{FileCap, read_capped, read_capped_text},
    policy::{DirGrant, EnvGrant, HostPattern},
};
use hane_manifest::{OntologyManifest, OperationManifest};
use hane_sandbox::{ArtifactFit, Call, EngineKind, Grant, LoadError, Precompiler, Sandbox};

use crate::exit;
use crate::input::input_text;
use crate::output::receipt_line;
use crate::terminal::{terminal_json, terminal_line, terminal_text};

#[derive(Subcommand)]
pub enum OpCommand {
    /// Run an operation once: output JSON on stdout, receipt on stderr.
    ///
    /// Exit codes: 0 success; 2 usage or invalid input; 3 the operation
    /// returned its error; 4 a limit was exceeded (fuel, memory, time,
    /// output, requests); 5 denied or refused by policy; 1 anything else.
    Run(Box<RunArgs>),
    /// Show an operation's descriptor, digest and imports, and which
    /// imports need a grant.
    Inspect(InspectArgs),
    /// Compile components ahead of time into DIR, one artifact per
    /// component named by its digest and the engine's fingerprint (as the
    /// component cache names its files): point $HANE_CACHE_DIR at DIR
    /// (it may be read-only) and hane loads them without compiling.
    Compile(CompileArgs),
    /// Create a new operation crate that builds to a component.
    New(scaffold::NewArgs),
}

#[derive(Args)]
pub struct RunArgs {
    /// A component (.wasm), a built-in operation's name such as
    /// `documents.search`, or an Operation manifest (.yaml).
    component: String,
    /// Input JSON, or @FILE to read it from a file (@- for stdin).
    #[arg(long, short)]
    input: String,
    /// An Operation manifest whose capabilities and limits apply.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Grant a directory: HOST[:GUEST][:ro|:rw]; GUEST defaults to
    /// `/` + the directory's name, access to read-only.
    #[arg(long = "allow-dir", value_name = "HOST[:GUEST][:ro|:rw]")]
    allow_dir: Vec<DirGrant>,
    /// Allow outgoing HTTP to SCHEME://HOST[:PORT]; HOST may start with `*.`.
    #[arg(long = "allow-host", value_name = "PATTERN")]
    allow_host: Vec<HostPattern>,
    /// Grant an environment variable: KEY passes the host's value, KEY=VALUE sets one.
    #[arg(long, value_name = "KEY[=VALUE]")]
    env: Vec<EnvGrant>,
    /// A ledger folder (`records/`, `documents/`) the `records` and
    /// `documents` capabilities read.
    #[arg(long, value_name = "DIR")]
    ledger: Option<PathBuf>,
    /// An Ontology manifest over the `--ledger`, which `records` gives to
    /// the operation (as a release does); checked against the ledger's
    /// records first.
    #[arg(long, value_name = "FILE", requires = "ledger")]
    ontology: Option<PathBuf>,
    /// Grant reading the ledger collection NAME through `records`.
    #[arg(long = "allow-records", value_name = "NAME", value_parser = ledger_name)]
    allow_records: Vec<String>,
    /// Grant reading the ledger document set NAME through `documents`.
    #[arg(long = "allow-documents", value_name = "NAME", value_parser = ledger_name)]
    allow_documents: Vec<String>,
    /// Grant proposing actions of the outbound TOOL through `actions`, such
    /// as `communication.send_email`; only for an operation whose impact is
    /// `outbound`. Proposals are printed, never sent.
    #[arg(long = "allow-actions", value_name = "TOOL", value_parser = outbound_tool)]
    allow_actions: Vec<String>,
    /// Fuel units the guest may burn [default: 2000000000].
    #[arg(long)]
    fuel: Option<u64>,
    /// Memory limit, such as 64Mi [default: 64Mi].
    #[arg(long, value_name = "SIZE")]
    memory: Option<ByteSize>,
    /// Wall-clock limit, such as 5s or 250ms [default: 5s].
    #[arg(long, value_name = "DURATION")]
    timeout: Option<Duration>,
    /// The engine that runs the operation [default: $HANE_ENGINE, else
    /// cranelift].
    #[arg(long, value_name = "cranelift|pulley")]
    engine: Option<EngineKind>,
    /// Print one JSON object with output, error, receipt and logs on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CompileArgs {
    /// A component (.wasm), a built-in operation's name, an Operation
    /// manifest (.yaml), or a release directory (every component its
    /// Operation manifests name, `builtin:` ones too).
    component: String,
    /// The engine to compile for [default: $HANE_ENGINE, else cranelift].
    #[arg(long, value_name = "cranelift|pulley")]
    engine: Option<EngineKind>,
    /// The target to compile for, such as aarch64-unknown-linux-musl (no
    /// CPU features assumed) or pulley64 [default: this host, with this
    /// CPU's features].
    #[arg(long, value_name = "TRIPLE")]
    target: Option<String>,
    /// The directory to write the artifacts into (made if missing).
    #[arg(long, short, value_name = "DIR")]
    output: PathBuf,
}

#[derive(Args)]
pub struct InspectArgs {
    /// A component (.wasm), a built-in operation's name, or an Operation manifest (.yaml).
    component: String,
    /// The engine that loads the component [default: $HANE_ENGINE, else
    /// cranelift].
    #[arg(long, value_name = "cranelift|pulley")]
    engine: Option<EngineKind>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The ontology of the manifest `file`, checked against `ledger`.
fn ontology(file: &Path, ledger: &Ledger) -> Result<hane_core::ontology::Ontology, Failure> {
    let name = file.display().to_string();
    let text = read_capped_text(file, FileCap::MANIFEST).map_err(Failure::usage)?;
    let manifest = OntologyManifest::from_yaml(&name, &text).map_err(Failure::usage)?;
    let ontology = manifest.ontology();
    let problems = ontology.check(ledger);
    if problems.is_empty() {
        return Ok(ontology);
    }
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("  {name}: spec.{}: {}", p.field, p.message))
        .collect();
    Err(Failure::usage(anyhow::anyhow!(
        "the ledger does not meet the ontology:\n{}",
        lines.join("\n")
    )))
}

pub fn main(cmd: OpCommand) -> ExitCode {
    let result = match cmd {
        OpCommand::Run(args) => run(*args),
        OpCommand::Inspect(args) => inspect(args),
        OpCommand::Compile(args) => compile(args),
        OpCommand::New(args) => scaffold::new(args).map_err(|e| Failure::new(exit::FAILURE, e)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.reported {
                eprintln!("error: {}", terminal_text(&format!("{:#}", f.error)));
            }
            ExitCode::from(f.code)
        }
    }
}

/// An error with the exit code it maps to.
struct Failure {
    code: u8,
    error: anyhow::Error,
    /// Already printed (as part of `--json` output or the receipt).
    reported: bool,
}

impl Failure {
    fn new(code: u8, error: impl Into<anyhow::Error>) -> Self {
        Self {
            code,
            error: error.into(),
            reported: false,
        }
    }

    fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self::new(exit::USAGE, error)
    }
}

/// A component with the policy and limits its source carries. A
/// built-in's bytes are the binary's own, not a copy, and its digest was
/// computed when hane was built.
struct Source {
    name: String,
    bytes: Cow<'static, [u8]>,
    digest: Option<&'static str>,
    policy: Policy,
    limits: LimitsSpec,
}

fn resolve(component: &str) -> Result<Source, Failure> {
    let path = Path::new(component);
    let is_manifest = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
    if is_manifest {
        let manifest = OperationManifest::from_file(path).map_err(Failure::usage)?;
        let mut source = match manifest.component_path() {
            Some(p) => resolve(&p.to_string_lossy())?,
            None => resolve(&manifest.spec.component)?,
        };
        source.policy = manifest.spec.capabilities;
        source.limits = manifest.spec.limits;
        return Ok(source);
    }
    let builtin = component.strip_prefix("builtin:").unwrap_or(component);
    if !path.exists() {
        // Straight from the binary: the runtime's component store would
        // hash every built-in first.
        if let Some(found) = hane_builtins::builtin(builtin) {
            return Ok(Source {
                name: builtin.to_owned(),
                bytes: Cow::Borrowed(found.bytes),
                digest: Some(found.digest),
                policy: Policy::default(),
                limits: LimitsSpec::default(),
            });
        }
        return Err(Failure::usage(anyhow::anyhow!(
            "`{component}` is neither a file nor a built-in operation (built-in: {})",
            hane_builtins::names().collect::<Vec<_>>().join(", ")
        )));
    }
    let bytes = read_capped(path, FileCap::COMPONENT).map_err(Failure::usage)?;
    if hane_sandbox::is_compiled_artifact(&bytes) {
        return Err(Failure::usage(anyhow::anyhow!(
            "`{component}` is a compiled artifact, not a component{}: pass the component (.wasm, a built-in name or an Operation manifest) and point $HANE_CACHE_DIR at the directory of compiled artifacts (`hane op compile -o DIR`)",
            artifact_fit(path)
        )));
    }
    Ok(Source {
        name: component.to_owned(),
        bytes: Cow::Owned(bytes),
        digest: None,
        policy: Policy::default(),
        limits: LimitsSpec::default(),
    })
}

fn sandbox(engine: Option<EngineKind>) -> Result<Sandbox, Failure> {
    let mut config = crate::runtime::sandbox_config();
    // One call (or a description) per process: no pool to reserve, and
    // file operations on the thread that runs the call.
    config
        .max_instances(4)
        .pooled(false)
        .files_on_calling_thread(true);
    if let Some(engine) = engine {
        config.engine(engine);
    }
    Sandbox::new(&config).map_err(|e| Failure::new(exit::FAILURE, e))
}

/// What the name of the artifact at `path` says about whom it is for,
/// for the message refusing it: ` (compiled for ...)`, or nothing.
fn artifact_fit(path: &Path) -> String {
    let Ok(here) = sandbox(None) else {
        return String::new();
    };
    let engine = here.engine();
    match here.artifact_fits(path) {
        ArtifactFit::ThisEngine => format!(" (compiled for this host's {engine} engine)"),
        ArtifactFit::Unnamed | ArtifactFit::Unknown => String::new(),
        ArtifactFit::Other => {
            let other = EngineKind::ALL.into_iter().find(|&e| {
                e != engine
                    && sandbox(Some(e))
                        .is_ok_and(|s| s.artifact_fits(path) == ArtifactFit::ThisEngine)
            });
            match other {
                Some(other) => format!(" (compiled for this host's {other} engine, not {engine})"),
                None => format!(
                    " (compiled for another target, wasmtime version or engine settings than this host's {engine} engine)"
                ),
            }
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(exit::FAILURE, e))
}

fn load_error_code(e: &LoadError) -> u8 {
    match e {
        LoadError::NotGranted { .. }
        | LoadError::UnknownImport { .. }
        | LoadError::ActionsNotOutbound { .. } => exit::DENIED,
        LoadError::Read { .. } | LoadError::Policy(_) => exit::USAGE,
        _ => exit::FAILURE,
    }
}

/// The exit code of a call that ended with `outcome`.
pub fn outcome_code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Succeeded => 0,
        Outcome::InvalidInput => exit::USAGE,
        Outcome::OperationError => exit::OPERATION_ERROR,
        Outcome::FuelExhausted
        | Outcome::MemoryLimit
        | Outcome::Timeout
        | Outcome::OutputTooLarge
        | Outcome::LimitExceeded => exit::LIMIT,
        Outcome::Denied => exit::DENIED,
        _ => exit::FAILURE,
    }
}

fn read_input(input: &str) -> Result<String, Failure> {
    input_text(input).map_err(Failure::usage)
}

/// A collection or document set name, checked as the policy checks it.
fn ledger_name(name: &str) -> Result<String, String> {
    if hane_core::ledger::is_valid_name(name) {
        Ok(name.to_owned())
    } else {
        Err("names are 1 to 64 of a-z, 0-9, `_` and `-`, such as `vehicles`".to_owned())
    }
}

/// An outbound tool, checked as the policy checks it.
fn outbound_tool(tool: &str) -> Result<String, String> {
    if hane_core::tool::OUTBOUND_TOOLS.contains(&tool) {
        Ok(tool.to_owned())
    } else {
        Err(format!(
            "expected one of {}",
            hane_core::tool::OUTBOUND_TOOLS.join(", ")
        ))
    }
}

fn run(args: RunArgs) -> Result<(), Failure> {
    // Begun in `main` already, unless options came before `op run`.
    hane_sandbox::Schema::warm_up();
    let input = read_input(&args.input)?;
    let mut source = resolve(&args.component)?;
    if let Some(file) = &args.policy {
        let manifest = OperationManifest::from_file(file).map_err(Failure::usage)?;
        source.policy.merge(manifest.spec.capabilities);
        source.limits = source.limits.overridden_by(&manifest.spec.limits);
    }
    source.policy.merge(Policy {
        files: args.allow_dir,
        env: args.env,
        http: args.allow_host,
        records: args.allow_records,
        documents: args.allow_documents,
        actions: args.allow_actions,
    });
    let flags = LimitsSpec {
        fuel: args.fuel,
        memory: args.memory,
        timeout: args.timeout,
        ..LimitsSpec::default()
    };
    let limits = source
        .limits
        .overridden_by(&flags)
        .apply_to(Limits::default());
    if let Some(missing) = source.policy.files.iter().find(|g| !g.host.is_dir()) {
        return Err(Failure::usage(anyhow::anyhow!(
            "granted directory `{}` does not exist or is not a directory",
            missing.host.display()
        )));
    }

    let ledger = match &args.ledger {
        Some(dir) => {
            let mut ledger = Ledger::load_dir(dir).map_err(Failure::usage)?;
            if let Some(file) = &args.ontology {
                ledger.ontology = Some(ontology(file, &ledger)?);
            }
            Some(ledger)
        }
        None => None,
    };

    let ledger = ledger.map(Arc::new);
    let rt = runtime()?;
    // On the worker $HANE_WORKER names, as every command that runs
    // operations; else in a sandbox here.
    if let Some(ran) = rt.block_on(on_worker(&source, &input, &limits, ledger.as_ref()))? {
        return report(ran, args.json);
    }
    let sandbox = sandbox(args.engine)?;
    if let Some(ledger) = ledger {
        sandbox.set_ledger(ledger);
    }
    let call = rt.block_on(async {
        let digest = source.digest.map_or_else(
            || hane_sandbox::component_digest(&source.bytes),
            str::to_owned,
        );
        let op = sandbox
            .load_with_digest(&source.name, &source.bytes, &digest, &source.policy)
            .await
            .map_err(|e| Failure::new(load_error_code(&e), e))?;
        Ok::<Call, Failure>(op.call(&input, &limits).await)
    })?;
    let reported = report(Ran::from(call).on(sandbox.engine()), args.json);
    // Nothing is left to wait for: a blocking thread still in a file
    // operation the call gave up on must not hold the process at exit.
    rt.shutdown_background();
    reported
}

/// The call run on the worker `$HANE_WORKER` names, which is sent the
/// component (and the ledger, if any); `None` when it names none.
async fn on_worker(
    source: &Source,
    input: &str,
    limits: &Limits,
    ledger: Option<&Arc<Ledger>>,
) -> Result<Option<Ran>, Failure> {
    use hane_manager::OperationManager as _;
    // Most runs have no worker: they skip hashing and copying the
    // component here (the sandbox hashes it once).
    if !crate::runtime::worker_named() {
        return Ok(None);
    }
    let components = hane_manager::Components::new();
    let digest = components.insert(source.bytes.to_vec());
    let Some(worker) = crate::runtime::worker_from_env(&components)
        .await
        .map_err(Failure::usage)?
    else {
        return Ok(None);
    };
    let input = hane_core::JsonText::parse(input)
        .map_err(|e| Failure::usage(anyhow::anyhow!("invalid input: not JSON: {e}")))?;
    if let Some(ledger) = ledger {
        worker.set_ledger(ledger);
    }
    // The worker has its own working directory: folders go as absolute
    // paths.
    let mut policy = source.policy.clone();
    for grant in &mut policy.files {
        grant.host = std::path::absolute(&grant.host).map_err(Failure::usage)?;
    }
    // A one-off call: never run again on its own, whatever it does.
    let operation = hane_core::Operation::wasm(
        hane_core::SessionId::new(),
        hane_core::ToolCallId::new(),
        hane_core::Impact::Write,
        hane_core::WasmCall {
            name: source.name.clone(),
            component: digest,
            policy,
            limits: *limits,
            input,
        },
    );
    Ok(Some(Ran::from(worker.submit(operation).ending().await)))
}

/// What one call gave, run here or on a worker.
struct Ran {
    result: Result<String, Failed>,
    /// None when the call never reached a sandbox.
    receipt: Option<Receipt>,
    /// Level and message.
    logs: Vec<(String, String)>,
    proposals: Vec<hane_core::action::ProposedAction>,
    /// The engine that ran it, when it ran here.
    engine: Option<EngineKind>,
}

impl Ran {
    fn on(self, engine: EngineKind) -> Self {
        Ran {
            engine: Some(engine),
            ..self
        }
    }
}

/// A call that did not succeed.
struct Failed {
    outcome: Outcome,
    message: String,
}

impl From<Call> for Ran {
    fn from(call: Call) -> Self {
        Ran {
            result: call.result.map_err(|e| Failed {
                outcome: e.outcome(),
                message: e.to_string(),
            }),
            receipt: Some(call.receipt),
            logs: call
                .logs
                .into_iter()
                .map(|l| (l.level.to_owned(), l.message))
                .collect(),
            proposals: call.proposals,
            engine: None,
        }
    }
}

impl From<hane_manager::Ending> for Ran {
    fn from(ending: hane_manager::Ending) -> Self {
        let logs = |logs: Vec<hane_core::operation::LogLine>| {
            logs.into_iter().map(|l| (l.level, l.message)).collect()
        };
        match ending {
            hane_manager::Ending::Succeeded(done) => Ran {
                result: Ok(done.output.as_str().to_owned()),
                receipt: Some(done.receipt),
                logs: logs(done.logs),
                proposals: done.proposals,
                engine: None,
            },
            hane_manager::Ending::Failed(failure) => Ran {
                result: Err(Failed {
                    outcome: failure.outcome,
                    message: failure.message,
                }),
                receipt: failure.receipt,
                logs: logs(failure.logs),
                proposals: Vec::new(),
                engine: None,
            },
            hane_manager::Ending::Lost { reason } => Ran {
                result: Err(Failed {
                    outcome: Outcome::HostError,
                    message: format!("the worker went away while the call ran: {reason}"),
                }),
                receipt: None,
                logs: Vec::new(),
                proposals: Vec::new(),
                engine: None,
            },
        }
    }
}

/// How `op run` shows a proposal: the operation asked for it, and a
/// one-off run has no decider, so nothing goes out.
const NOT_SENT: &str = "proposed, not sent";

fn report(call: Ran, json: bool) -> Result<(), Failure> {
    if json {
        let output = call
            .result
            .as_ref()
            .ok()
            .map(|o| serde_json::from_str::<serde_json::Value>(o).unwrap_or_default());
        let error = call
            .result
            .as_ref()
            .err()
            .map(|e| serde_json::json!({ "outcome": e.outcome, "message": e.message }));
        let proposals: Vec<serde_json::Value> = call
            .proposals
            .iter()
            .map(|p| {
                serde_json::json!({
                    "id": p.id,
                    "tool": p.tool,
                    "recipient": p.recipient,
                    "content": p.content,
                    "status": NOT_SENT,
                })
            })
            .collect();
        let logs: Vec<serde_json::Value> = call
            .logs
            .iter()
            .map(|(level, message)| serde_json::json!({ "level": level, "message": message }))
            .collect();
        let doc = serde_json::json!({
            "output": output,
            "error": error,
            "proposals": proposals,
            "receipt": call.receipt,
            "engine": call.engine,
            "logs": logs,
        });
        println!("{}", terminal_json(&doc).unwrap_or_default());
    } else {
        // Logs, output, errors and proposals are the guest's words.
        for (level, message) in &call.logs {
            for line in message.lines() {
                eprintln!("[{level}] {}", terminal_line(line));
            }
        }
        match &call.result {
            Ok(output) => match serde_json::from_str::<serde_json::Value>(output) {
                Ok(v) => println!("{}", terminal_json(&v).unwrap_or_default()),
                Err(_) => println!("{}", terminal_text(output)),
            },
            Err(e) => eprintln!("error: {}", terminal_text(&e.message)),
        }
        for p in &call.proposals {
            eprintln!(
                "{} {NOT_SENT}: {} to {} {}",
                p.id,
                terminal_line(&p.tool),
                terminal_line(&p.recipient),
                terminal_line(p.content.as_str())
            );
        }
        if let Some(receipt) = &call.receipt {
            match call.engine {
                Some(engine) => eprintln!("{} on {engine}", receipt_line(receipt)),
                None => eprintln!("{}", receipt_line(receipt)),
            }
        }
    }
    match call.result {
        Err(e) => Err(Failure {
            code: outcome_code(e.outcome),
            error: anyhow::anyhow!(e.message),
            reported: true,
        }),
        Ok(_) => Ok(()),
    }
}

fn inspect(args: InspectArgs) -> Result<(), Failure> {
    let source = resolve(&args.component)?;
    let sandbox = sandbox(args.engine)?;
    let rt = runtime()?;
    let found = rt
        .block_on(sandbox.inspect(&source.name, &source.bytes))
        .map_err(|e| Failure::new(load_error_code(&e), e))?;
    if args.json {
        let schema = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap_or_default();
        let doc = serde_json::json!({
            "name": found.descriptor.name,
            "version": found.descriptor.version,
            "description": found.descriptor.description,
            "impact": found.descriptor.impact,
            "inputSchema": schema(&found.descriptor.input_schema),
            "outputSchema": schema(&found.descriptor.output_schema),
            "digest": found.digest,
            "imports": found.imports,
            "needsGrants": needs(&found.imports),
            "grants": source.policy,
            "engine": sandbox.engine(),
        });
        println!("{}", terminal_json(&doc).unwrap_or_default());
        return Ok(());
    }
    // The descriptor is the component's own account of itself.
    let d = &found.descriptor;
    println!(
        "{} {} ({})",
        terminal_line(&d.name),
        terminal_line(&d.version),
        d.impact
    );
    for line in d.description.lines() {
        println!("  {}", terminal_line(line));
    }
    println!("digest: {}", found.digest);
    println!(
        "input:  {}",
        terminal_line(&summarize_schema(&d.input_schema))
    );
    println!(
        "output: {}",
        terminal_line(&summarize_schema(&d.output_schema))
    );
    println!("imports:");
    let width = found
        .imports
        .iter()
        .map(|i| i.name.len())
        .max()
        .unwrap_or(0);
    for import in &found.imports {
        println!(
            "  {:width$}  {}",
            terminal_line(&import.name),
            import.grant.describe()
        );
    }
    let needs = needs(&found.imports);
    if needs.is_empty() {
        println!("needs grants: none");
    } else {
        println!("needs grants: {}", needs.join(", "));
    }
    let grants = grants(&source.policy);
    if !grants.is_empty() {
        println!("granted by the manifest:");
        for (kind, list) in grants {
            println!("  {kind:9}  {list}");
        }
    }
    Ok(())
}

fn compile(args: CompileArgs) -> Result<(), Failure> {
    let sources = if Path::new(&args.component).is_dir() {
        release_components(Path::new(&args.component))?
    } else {
        vec![resolve(&args.component)?]
    };
    let mut config = crate::runtime::sandbox_config();
    if let Some(engine) = args.engine {
        config.engine(engine);
    }
    let compiler = Precompiler::new(&config, args.target.as_deref()).map_err(Failure::usage)?;
    std::fs::create_dir_all(&args.output).map_err(|e| {
        Failure::usage(anyhow::anyhow!(
            "cannot make {}: {e}",
            args.output.display()
        ))
    })?;
    let mut done = std::collections::BTreeSet::new();
    for source in sources {
        let artifact = compiler
            .precompile(&source.name, &source.bytes)
            .map_err(|e| Failure::new(load_error_code(&e), e))?;
        if !done.insert(artifact.digest.clone()) {
            continue;
        }
        let path = args.output.join(&artifact.file_name);
        std::fs::write(&path, &artifact.bytes).map_err(|e| {
            Failure::new(
                exit::FAILURE,
                anyhow::anyhow!("cannot write {}: {e}", path.display()),
            )
        })?;
        println!(
            "{}  {}  {} {}  {}  {}",
            terminal_line(&source.name),
            artifact.digest,
            compiler.engine(),
            terminal_line(compiler.target()),
            ByteSize(artifact.bytes.len() as u64),
            path.display()
        );
    }
    Ok(())
}

/// Every component the Operation manifests of the release directory `dir`
/// name, `builtin:` ones too.
fn release_components(dir: &Path) -> Result<Vec<Source>, Failure> {
    let definitions = hane_manifest::read_bundle_dir(dir).map_err(Failure::usage)?;
    let mut sources = Vec::new();
    for sourced in &definitions {
        let Some(manifest) = sourced.definition.as_operation() else {
            continue;
        };
        let component = match manifest.component_path() {
            Some(path) => sourced.folder().join(path).display().to_string(),
            None => manifest.spec.component.clone(),
        };
        sources.push(resolve(&component)?);
    }
    if sources.is_empty() {
        return Err(Failure::usage(anyhow::anyhow!(
            "{} has no Operation manifests, so no components to compile",
            dir.display()
        )));
    }
    Ok(sources)
}

/// The grants worth giving this component, in a stable order.
fn needs(imports: &[hane_sandbox::Import]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (grant, name) in [
        (Grant::Files, "files"),
        (Grant::Env, "env"),
        (Grant::Http, "http"),
        (Grant::Records, "records"),
        (Grant::Documents, "documents"),
        (Grant::Actions, "actions"),
    ] {
        if imports.iter().any(|i| i.grant == grant) {
            out.push(name);
        }
    }
    out
}

/// What `policy` grants, kind by kind, for `hane op inspect`.
fn grants(policy: &Policy) -> Vec<(&'static str, String)> {
    fn list<T: std::fmt::Display>(items: &[T]) -> String {
        items
            .iter()
            .map(T::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
    let files: Vec<String> = policy
        .files
        .iter()
        .map(|g| format!("{}:{}:{}", g.host.display(), g.guest_path(), g.access))
        .collect();
    [
        ("files", list(&files)),
        ("env", list(&policy.env)),
        ("http", list(&policy.http)),
        ("records", list(&policy.records)),
        ("documents", list(&policy.documents)),
        ("actions", list(&policy.actions)),
    ]
    .into_iter()
    .filter(|(_, list)| !list.is_empty())
    .collect()
}

/// `{ query: string (required), limit: integer }` from an object schema.
fn summarize_schema(text: &str) -> String {
    let Ok(schema) = serde_json::from_str::<serde_json::Value>(text) else {
        return "(not JSON)".into();
    };
    let Some(props) = schema.get("properties").and_then(|p| p.as_object()) else {
        return schema
            .get("type")
            .map(|t| t.to_string())
            .unwrap_or_else(|| "any".into());
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let fields: Vec<String> = props
        .iter()
        .map(|(name, p)| {
            let ty = match p.get("type") {
                Some(serde_json::Value::String(t)) => t.clone(),
                Some(serde_json::Value::Array(ts)) => ts
                    .iter()
                    .filter_map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join("|"),
                _ => "any".into(),
            };
            let req = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{name}{req}: {ty}")
        })
        .collect();
    format!("{{ {} }}", fields.join(", "))
}
