//! A loaded operation and one call of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use hane_core::{Access, Impact, Ledger, Limits, Outcome, Policy, Receipt, receipt::HostCalls};
use serde_json::Value;
use wasmtime::component::{Component, ResourceTable};
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};
use wasmtime_wasi_http::WasiHttpCtx;

use crate::actions::ActionsCtxBuilder;
use crate::bindings::{self, OperationPre};
use crate::documents::DocumentsCtxBuilder;
use crate::error::{CallError, GuestError, LoadError, OutputStream};
use crate::imports::{self, Import};
use crate::records::RecordsCtxBuilder;
use crate::sandbox::Sandbox;
use crate::schema::Schema;
use crate::state::{CallState, HostTrap, HttpGate, Incidents, LogRecord, LogSink, MemoryLimiter};

/// What an operation says about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Descriptor {
    /// Dotted name such as `documents.search`.
    pub name: String,
    /// Semantic version.
    pub version: String,
    /// One paragraph for people and models.
    pub description: String,
    /// JSON Schema of the input, as text.
    pub input_schema: String,
    /// JSON Schema of the output, as text.
    pub output_schema: String,
    /// What it may do outside the sandbox.
    pub impact: Impact,
}

/// Cancels a call from another task; the call stops within about one epoch
/// tick, even while the guest is blocked in a host call.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<CancelInner>);

#[derive(Debug, Default)]
struct CancelInner {
    flag: AtomicBool,
    notify: tokio::sync::Notify,
}

impl CancelToken {
    /// A token that has not been cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every call using this token.
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    async fn cancelled(&self) {
        let notified = self.0.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.is_cancelled() {
            return;
        }
        notified.await;
    }
}

/// The result of one call: the output or the typed error, the receipt,
/// what the guest logged, and the outbound actions it proposed.
#[derive(Debug)]
pub struct Call {
    /// The output JSON text, validated against the output schema.
    pub result: Result<String, CallError>,
    /// What the call consumed and how it ended.
    pub receipt: Receipt,
    /// Log messages and printed text, in order, capped by the log limit.
    pub logs: Vec<LogRecord>,
    /// The outbound actions the guest proposed through the `actions`
    /// capability, in order, when `result` is `Ok`; empty otherwise, since
    /// the proposals of a call that failed (its own error, a trap, a limit,
    /// a timeout, cancellation, invalid output) are dropped. Nothing has
    /// been sent: the caller decides what becomes of them.
    pub proposals: Vec<hane_core::action::ProposedAction>,
}

struct OperationInner {
    sandbox: Sandbox,
    pre: OperationPre<CallState>,
    descriptor: Descriptor,
    digest: String,
    imports: Vec<Import>,
    /// Shared by every call's grants without a copy.
    policy: Arc<Policy>,
    input: Schema,
    output: Schema,
}

/// A component loaded under a policy, ready to be called any number of
/// times concurrently. Each call gets a fresh instance; nothing is shared
/// between calls.
#[derive(Clone)]
pub struct LoadedOperation {
    inner: Arc<OperationInner>,
}

impl std::fmt::Debug for LoadedOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedOperation")
            .field("descriptor", &self.inner.descriptor)
            .field("digest", &self.inner.digest)
            .finish_non_exhaustive()
    }
}

/// Bytes of stdout or stderr kept per call; the rest is refused to the
/// guest.
const STDIO_CAPTURE_BYTES: usize = 16 * 1024;

impl LoadedOperation {
    pub(crate) async fn new(
        sandbox: Sandbox,
        component: Component,
        digest: String,
        policy: &Policy,
    ) -> Result<Self, LoadError> {
        let (imports, pre) = prepare(&sandbox, &component)?;
        imports::check(&imports, policy)?;
        policy.validate().map_err(LoadError::Policy)?;
        let descriptor = describe(&sandbox, &pre).await?;
        if !policy.actions.is_empty() && descriptor.impact != Impact::Outbound {
            return Err(LoadError::ActionsNotOutbound {
                operation: descriptor.name,
                impact: descriptor.impact,
            });
        }
        let schema = |which: &'static str, text: &str| {
            Schema::compile(text).map_err(|e| LoadError::Schema {
                operation: descriptor.name.clone(),
                which,
                message: e.to_string(),
            })
        };
        let input = schema("input", &descriptor.input_schema)?;
        let output = schema("output", &descriptor.output_schema)?;
        Ok(Self {
            inner: Arc::new(OperationInner {
                sandbox,
                pre,
                descriptor,
                digest,
                imports,
                policy: Arc::new(policy.clone()),
                input,
                output,
            }),
        })
    }

    /// What the operation says about itself.
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.descriptor
    }

    /// `sha256:` digest of the component's bytes.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// The component's imports and the grant each needs.
    pub fn imports(&self) -> &[Import] {
        &self.inner.imports
    }

    /// The policy calls run under.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// Runs the operation once with `input` (JSON text) under `limits`.
    pub async fn call(&self, input: &str, limits: &Limits) -> Call {
        self.call_with(input, limits, &CancelToken::new()).await
    }

    /// The receipt of a call that has not run yet.
    fn blank_receipt(&self) -> Receipt {
        let inner = &*self.inner;
        Receipt {
            operation: inner.descriptor.name.clone(),
            version: inner.descriptor.version.clone(),
            digest: inner.digest.clone(),
            outcome: Outcome::Succeeded,
            fuel_consumed: 0,
            wall_time_us: 0,
            peak_memory_bytes: 0,
            host_calls: HostCalls::default(),
            output_bytes: 0,
            log_bytes: 0,
        }
    }

    /// Like [`LoadedOperation::call`], stopping early when `cancel` is cancelled.
    /// The call reads the sandbox's ledger ([`Sandbox::set_ledger`]) as it
    /// is when the call starts.
    ///
    /// [`Sandbox::set_ledger`]: crate::Sandbox::set_ledger
    pub async fn call_with(&self, input: &str, limits: &Limits, cancel: &CancelToken) -> Call {
        let ledger = self.inner.sandbox.ledger();
        self.call_reading(input, limits, cancel, ledger).await
    }

    /// Like [`LoadedOperation::call_with`], reading `ledger` instead of the
    /// sandbox's: a worker runs each client's operations on the ledger the
    /// client sent.
    pub async fn call_reading(
        &self,
        input: &str,
        limits: &Limits,
        cancel: &CancelToken,
        ledger: Arc<Ledger>,
    ) -> Call {
        let start = Instant::now();
        let inner = &*self.inner;
        let mut receipt = self.blank_receipt();
        let finish = |mut receipt: Receipt, result: Result<String, CallError>, logs| {
            receipt.outcome = match &result {
                Ok(_) => Outcome::Succeeded,
                Err(e) => e.outcome(),
            };
            receipt.wall_time_us = start.elapsed().as_micros() as u64;
            Call {
                result,
                receipt,
                logs,
                proposals: Vec::new(),
            }
        };

        let doc: Value = match serde_json::from_str(input) {
            Ok(doc) => doc,
            Err(e) => return finish(receipt, Err(CallError::InputNotJson(e.to_string())), vec![]),
        };
        if let Err(violations) = inner.input.check(&doc) {
            return finish(receipt, Err(CallError::InvalidInput(violations)), vec![]);
        }

        // The epoch ticker runs while the guest may: its deadline and
        // cancellation are checked at each tick.
        let _ticking = inner.sandbox.inner.ticker.hold();
        let (mut store, stdio) =
            match new_store(&inner.sandbox, limits, start, cancel, &inner.policy, ledger) {
                Ok(s) => s,
                Err(e) => return finish(receipt, Err(e), vec![]),
            };
        let deadline = tokio::time::Instant::from_std(start + limits.timeout.0);
        let ran = {
            let run = async {
                let op = inner.pre.instantiate_async(&mut store).await?;
                op.call_run(&mut store, input).await
            };
            tokio::select! {
                r = run => Ran::Finished(r),
                () = tokio::time::sleep_until(deadline) => Ran::TimedOut,
                () = cancel.cancelled() => Ran::Cancelled,
            }
        };

        let Harvest {
            incidents,
            logs,
            proposals,
            stdio_full,
            stderr,
        } = harvest(
            store,
            &stdio,
            limits,
            inner.sandbox.fuel_enabled(),
            &mut receipt,
        );

        let result = match ran {
            Ran::TimedOut => Err(CallError::Timeout {
                limit: limits.timeout,
            }),
            Ran::Cancelled => Err(CallError::Cancelled),
            Ran::Finished(Ok(Ok(output))) => {
                receipt.output_bytes = output.len() as u64;
                self.check_output(output, limits)
            }
            Ran::Finished(Ok(Err(guest))) => {
                let guest = guest_error(guest);
                Err(classify_incident(&incidents, Some(guest.to_string()))
                    .unwrap_or(CallError::Operation(guest)))
            }
            Ran::Finished(Err(trap)) => {
                Err(classify_trap(trap, limits, &incidents, stdio_full, &stderr))
            }
        };
        let mut call = finish(receipt, result, logs);
        // A call that failed proposed nothing the host should act on.
        if call.result.is_ok() {
            call.proposals = proposals;
        }
        call
    }

    fn check_output(&self, output: String, limits: &Limits) -> Result<String, CallError> {
        if output.len() as u64 > limits.output_bytes.bytes() {
            return Err(CallError::OutputTooLarge {
                stream: OutputStream::Output,
                limit: limits.output_bytes,
            });
        }
        let doc: Value =
            serde_json::from_str(&output).map_err(|e| CallError::OutputNotJson(e.to_string()))?;
        self.inner
            .output
            .check(&doc)
            .map_err(CallError::InvalidOutput)?;
        Ok(output)
    }
}

/// The component's imports, and its instance-pre once every import is known
/// to be provided.
pub(crate) fn prepare(
    sandbox: &Sandbox,
    component: &Component,
) -> Result<(Vec<Import>, OperationPre<CallState>), LoadError> {
    let imports = imports::of(&sandbox.inner.engine, component);
    imports::check_provided(&imports)?;
    let pre = sandbox
        .inner
        .linker
        .instantiate_pre(component)
        .map_err(|e| LoadError::NotAnOperation(format!("{e:#}")))?;
    let pre = OperationPre::new(pre).map_err(|e| LoadError::NotAnOperation(format!("{e:#}")))?;
    Ok((imports, pre))
}

pub(crate) async fn describe(
    sandbox: &Sandbox,
    pre: &OperationPre<CallState>,
) -> Result<Descriptor, LoadError> {
    let limits = sandbox.default_limits();
    let (mut store, _) = new_store(
        sandbox,
        &limits,
        Instant::now(),
        &CancelToken::new(),
        &Arc::new(Policy::default()),
        Arc::new(Ledger::default()),
    )
    .map_err(|e| LoadError::Describe(e.to_string()))?;
    let d = async {
        let op = pre.instantiate_async(&mut store).await?;
        op.call_describe(&mut store).await
    };
    let d = tokio::time::timeout(limits.timeout.0, d)
        .await
        .map_err(|_| LoadError::Describe(format!("took longer than {}", limits.timeout)))?
        .map_err(|e| LoadError::Describe(format!("{e:#}")))?;
    if d.name.trim().is_empty() {
        return Err(LoadError::Describe(
            "the descriptor has an empty name".into(),
        ));
    }
    Ok(Descriptor {
        name: d.name,
        version: d.version,
        description: d.description,
        input_schema: d.input_schema,
        output_schema: d.output_schema,
        impact: match d.impact {
            bindings::hane::operation::types::Impact::Read => Impact::Read,
            bindings::hane::operation::types::Impact::Write => Impact::Write,
            bindings::hane::operation::types::Impact::Outbound => Impact::Outbound,
        },
    })
}

/// What a call left in its store once the guest stopped.
struct Harvest {
    incidents: Arc<Incidents>,
    logs: Vec<LogRecord>,
    proposals: Vec<hane_core::action::ProposedAction>,
    /// Whether stdout or stderr filled its capture.
    stdio_full: bool,
    stderr: bytes::Bytes,
}

/// Takes the logs, proposals and captured output out of `store` and fills
/// `receipt`'s measurements from it; the store is dropped.
fn harvest(
    mut store: Store<CallState>,
    stdio: &Stdio,
    limits: &Limits,
    fuel_enabled: bool,
    receipt: &mut Receipt,
) -> Harvest {
    let state = store.data();
    let incidents = state.gate.incidents.clone();
    receipt.peak_memory_bytes = state.limiter.peak;
    receipt.log_bytes = state.log.bytes.min(limits.log_bytes.bytes());
    receipt.host_calls = HostCalls {
        log: state.log.calls,
        http_requests: incidents.http_requests(),
        denied: incidents.denied(),
        records: state.records.calls(),
        documents: state.documents.calls(),
    };
    let mut logs = std::mem::take(&mut store.data_mut().log.records);
    let proposals = store.data_mut().actions.take_proposals();
    if fuel_enabled {
        receipt.fuel_consumed = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
    }
    let stdout = stdio.stdout.contents();
    let stderr = stdio.stderr.contents();
    let stdio_full =
        stdout.len() >= stdio_capacity(limits) || stderr.len() >= stdio_capacity(limits);
    for (level, bytes) in [("stdout", &stdout), ("stderr", &stderr)] {
        if !bytes.is_empty() {
            logs.push(LogRecord {
                level,
                message: String::from_utf8_lossy(bytes).into_owned(),
            });
        }
    }

    Harvest {
        incidents,
        logs,
        proposals,
        stdio_full,
        stderr,
    }
}

fn new_store(
    sandbox: &Sandbox,
    limits: &Limits,
    start: Instant,
    cancel: &CancelToken,
    policy: &Arc<Policy>,
    ledger: Arc<Ledger>,
) -> Result<(Store<CallState>, Stdio), CallError> {
    let max_memory = sandbox.inner.config.max_memory;
    if limits.memory > max_memory {
        return Err(CallError::Host(format!(
            "the memory limit {} is above this sandbox's maximum of {max_memory}",
            limits.memory
        )));
    }
    let deadline = start + limits.timeout.0;
    let incidents = Arc::new(Incidents::default());
    let stdio = Stdio {
        stdout: MemoryOutputPipe::new(STDIO_CAPTURE_BYTES.min(limits.log_bytes.as_usize())),
        stderr: MemoryOutputPipe::new(STDIO_CAPTURE_BYTES.min(limits.log_bytes.as_usize())),
    };

    let wasi = wasi_ctx(
        &stdio,
        policy,
        &incidents,
        sandbox.inner.config.files_on_calling_thread,
    )?;

    // One snapshot of the ledger for the whole call.
    let records = RecordsCtxBuilder::new()
        .ledger(ledger.clone())
        .policy(policy.clone())
        .build(incidents.clone());
    let documents = DocumentsCtxBuilder::new()
        .ledger(ledger)
        .policy(policy.clone())
        .build(incidents.clone());
    let actions = ActionsCtxBuilder::new()
        .policy(policy.clone())
        .build(incidents.clone());
    let sandbox = &sandbox.inner;
    let state = CallState {
        wasi,
        table: ResourceTable::new(),
        http: WasiHttpCtx::new(),
        gate: HttpGate {
            policy: policy.clone(),
            max_requests: limits.http_requests,
            response_budget: Arc::new(AtomicU64::new(limits.response_bytes.bytes())),
            response_limit: limits.response_bytes,
            deadline,
            incidents,
        },
        limiter: MemoryLimiter::new(limits.memory),
        log: LogSink::new(limits.log_bytes),
        records,
        documents,
        actions,
    };
    let mut store = Store::new(&sandbox.engine, state);
    store.limiter(|s| &mut s.limiter);
    if sandbox.config.fuel {
        store
            .set_fuel(limits.fuel)
            .map_err(|e| CallError::Host(format!("{e:#}")))?;
    }
    store.set_epoch_deadline(1);
    let cancel = cancel.clone();
    store.epoch_deadline_callback(move |_| {
        if cancel.is_cancelled() {
            return Err(HostTrap::Cancelled.into());
        }
        if Instant::now() >= deadline {
            return Err(HostTrap::Timeout.into());
        }
        // Yielding lets other calls on the same thread make progress.
        Ok(UpdateDeadline::Yield(1))
    });
    Ok((store, stdio))
}

/// The WASI context of one call: its stdio captured in `stdio`, the
/// policy's environment variables and directories, and sockets whose every
/// address is refused and recorded in `incidents`; file operations on the
/// calling thread when `files_on_calling_thread`.
fn wasi_ctx(
    stdio: &Stdio,
    policy: &Policy,
    incidents: &Arc<Incidents>,
    files_on_calling_thread: bool,
) -> Result<WasiCtx, CallError> {
    let mut wasi = WasiCtxBuilder::new();
    wasi.allow_blocking_current_thread(files_on_calling_thread);
    wasi.stdout(stdio.stdout.clone())
        .stderr(stdio.stderr.clone())
        // TCP and UDP sockets can be created, but every address is
        // refused (and recorded) by the check below: raw sockets are
        // never granted.
        .allow_tcp(true)
        .allow_udp(true)
        .allow_ip_name_lookup(false);
    let socket_incidents = incidents.clone();
    wasi.socket_addr_check(move |addr, usage| {
        use wasmtime_wasi::sockets::SocketAddrUse as U;
        // The implicit bind to the wildcard address that precedes a
        // connect or send exposes nothing; refusing it would hide the
        // connect that follows, which is what gets refused and reported.
        let implicit_bind = matches!(usage, U::TcpBind | U::UdpBind)
            && addr.ip().is_unspecified()
            && addr.port() == 0;
        if implicit_bind {
            return Box::pin(async { true });
        }
        let what = format!("raw socket {} to {addr} is not granted", socket_use(usage));
        let remote = matches!(usage, U::TcpConnect | U::UdpSend);
        socket_incidents.deny(what, remote);
        Box::pin(async { false })
    });
    for grant in &policy.env {
        match &grant.value {
            Some(v) => {
                wasi.env(&grant.key, v);
            }
            None => {
                if let Ok(v) = std::env::var(&grant.key) {
                    wasi.env(&grant.key, v);
                }
            }
        }
    }
    for grant in &policy.files {
        let perms = match grant.access {
            Access::ReadOnly => FsPerms::ReadOnly,
            Access::ReadWrite => FsPerms::ReadWrite,
        };
        wasi.preopened_dir(&grant.host, grant.guest_path(), perms)
            .map_err(|e| {
                CallError::Host(format!(
                    "cannot open granted directory `{}`: {e:#}",
                    grant.host.display()
                ))
            })?;
    }

    Ok(wasi.build())
}

enum Ran {
    Finished(wasmtime::Result<Result<String, bindings::hane::operation::types::Error>>),
    TimedOut,
    Cancelled,
}

struct Stdio {
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

fn stdio_capacity(limits: &Limits) -> usize {
    STDIO_CAPTURE_BYTES.min(limits.log_bytes.as_usize())
}

fn socket_use(usage: wasmtime_wasi::sockets::SocketAddrUse) -> &'static str {
    use wasmtime_wasi::sockets::SocketAddrUse as U;
    match usage {
        U::TcpBind => "tcp bind",
        U::TcpConnect => "tcp connect",
        U::UdpBind => "udp bind",
        U::TcpListen => "tcp listen",
        U::TcpAccept => "tcp accept",
        U::UdpSend => "udp send",
        _ => "use",
    }
}

fn guest_error(e: bindings::hane::operation::types::Error) -> GuestError {
    use bindings::hane::operation::types::Error as E;
    match e {
        E::InvalidInput(m) => GuestError::InvalidInput(m),
        E::NotFound(m) => GuestError::NotFound(m),
        E::Denied(m) => GuestError::Denied(m),
        E::Failed(m) => GuestError::Failed(m),
    }
}

/// A limit or denial that explains why the call failed, if any.
fn classify_incident(incidents: &Incidents, guest: Option<String>) -> Option<CallError> {
    if let Some(limit) = incidents.limit() {
        return Some(CallError::LimitExceeded(limit));
    }
    incidents
        .first_denial()
        .map(|denial| CallError::Denied { denial, guest })
}

fn classify_trap(
    err: wasmtime::Error,
    limits: &Limits,
    incidents: &Incidents,
    stdio_full: bool,
    stderr: &[u8],
) -> CallError {
    if let Some(host) = err.downcast_ref::<HostTrap>() {
        return match *host {
            HostTrap::Memory { limit, requested } => CallError::MemoryLimit { limit, requested },
            HostTrap::Log(limit) => CallError::OutputTooLarge {
                stream: OutputStream::Log,
                limit,
            },
            HostTrap::Timeout => CallError::Timeout {
                limit: limits.timeout,
            },
            HostTrap::Cancelled => CallError::Cancelled,
        };
    }
    if let Some(Trap::OutOfFuel) = err.downcast_ref::<Trap>() {
        return CallError::FuelExhausted { limit: limits.fuel };
    }
    let panic = panic_message(stderr);
    // A guest whose printing failed because its stdout or stderr was full
    // usually panics about it; the cause is the flood, not the panic.
    if stdio_full {
        return CallError::OutputTooLarge {
            stream: OutputStream::Log,
            limit: hane_core::ByteSize(stdio_capacity(limits) as u64),
        };
    }
    if let Some(e) = classify_incident(incidents, panic.clone()) {
        return e;
    }
    let message = match err.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{err:#}"),
    };
    CallError::Trap { message, panic }
}

/// The message of a Rust panic printed to stderr:
/// `thread '…' panicked at src/lib.rs:1:2:\nMESSAGE\nnote: …`.
fn panic_message(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let at = text.find("panicked at ")?;
    let rest = &text[at..];
    let body = &rest[rest.find('\n')? + 1..];
    let end = body.find("\nnote: ").unwrap_or(body.len());
    let message = body[..end].trim_end();
    (!message.is_empty()).then(|| message.to_owned())
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_messages_are_found_in_stderr() {
        let stderr = b"thread '<unnamed>' panicked at src/bin/x.rs:3:5:\nboom: it broke\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(panic_message(stderr).as_deref(), Some("boom: it broke"));
        assert_eq!(panic_message(b"just some text\n"), None);
        let multi = b"thread 'main' panicked at a.rs:1:1:\nline one\nline two\n";
        assert_eq!(panic_message(multi).as_deref(), Some("line one\nline two"));
    }
}
