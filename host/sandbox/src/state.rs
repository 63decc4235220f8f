//! The state of one call: its WASI context, meters and host capabilities.

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use hane_core::{ByteSize, Policy, policy::Scheme};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{
    RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

use crate::bindings::hane::operation::log::{self, Level};
use crate::error::Limit;

/// Largest number of table elements a guest may grow a table to.
pub(crate) const MAX_TABLE_ELEMENTS: usize = 100_000;

/// What the guest did that the host refused or cut off, shared with the
/// socket check and HTTP futures that run outside the store.
#[derive(Default)]
pub(crate) struct Incidents {
    denials: Mutex<Vec<String>>,
    limit: Mutex<Option<Limit>>,
    denied: AtomicU32,
    http_requests: AtomicU32,
    prominent: std::sync::atomic::AtomicBool,
}

/// Refused attempts remembered per call.
const MAX_DENIALS_KEPT: usize = 16;

impl Incidents {
    /// Records a refused attempt; a `prominent` one is reported before
    /// the others.
    pub(crate) fn deny(&self, what: String, prominent: bool) {
        self.denied.fetch_add(1, Ordering::Relaxed);
        let mut denials = self.denials.lock().unwrap_or_else(|e| e.into_inner());
        // Only the first few are kept; a guest retrying in a loop must not
        // grow host memory.
        if denials.len() >= MAX_DENIALS_KEPT {
            return;
        }
        if prominent && !self.prominent.swap(true, Ordering::Relaxed) {
            denials.insert(0, what);
        } else {
            denials.push(what);
        }
    }

    fn exceed(&self, limit: Limit) {
        let mut slot = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(limit);
    }

    pub(crate) fn first_denial(&self) -> Option<String> {
        let denials = self.denials.lock().unwrap_or_else(|e| e.into_inner());
        denials.first().cloned()
    }

    pub(crate) fn limit(&self) -> Option<Limit> {
        *self.limit.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn denied(&self) -> u32 {
        self.denied.load(Ordering::Relaxed)
    }

    pub(crate) fn http_requests(&self) -> u32 {
        self.http_requests.load(Ordering::Relaxed)
    }
}

/// A capability whose grant is a list of names in the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NamedCapability {
    /// Ledger collections, `records`.
    Records,
    /// Document sets, `documents`.
    Documents,
    /// Outbound action tools, `actions`.
    Actions,
}

impl NamedCapability {
    /// What the names are, for messages.
    fn what(self) -> &'static str {
        match self {
            NamedCapability::Records => "collection",
            NamedCapability::Documents => "document set",
            NamedCapability::Actions => "action tool",
        }
    }

    /// The policy's field that grants them.
    fn field(self) -> &'static str {
        match self {
            NamedCapability::Records => "records",
            NamedCapability::Documents => "documents",
            NamedCapability::Actions => "actions",
        }
    }

    /// Whether `policy` grants `name`, by the policy's own predicate.
    fn allows(self, policy: &Policy, name: &str) -> bool {
        match self {
            NamedCapability::Records => policy.allows_records(name),
            NamedCapability::Documents => policy.allows_documents(name),
            NamedCapability::Actions => policy.allows_action(name),
        }
    }

    fn granted(self, policy: &Policy) -> &[String] {
        match self {
            NamedCapability::Records => &policy.records,
            NamedCapability::Documents => &policy.documents,
            NamedCapability::Actions => &policy.actions,
        }
    }
}

/// The names one capability of a call may use (ledger collections, document
/// sets, action tools), as the call's policy grants them; anything else is
/// refused and recorded.
pub(crate) struct NameGrant {
    capability: NamedCapability,
    policy: Arc<Policy>,
    incidents: Arc<Incidents>,
}

impl NameGrant {
    pub(crate) fn new(
        capability: NamedCapability,
        policy: Arc<Policy>,
        incidents: Arc<Incidents>,
    ) -> Self {
        Self {
            capability,
            policy,
            incidents,
        }
    }

    /// `Ok` when `name` is granted; otherwise records a denial and returns
    /// the WIT `denied` error, which lists what is granted.
    pub(crate) fn check(
        &self,
        name: &str,
    ) -> Result<(), crate::bindings::hane::operation::types::Error> {
        let capability = self.capability;
        if capability.allows(&self.policy, name) {
            return Ok(());
        }
        // The name comes from the guest: show a bounded piece of it.
        let shown: String = name.chars().take(hane_core::ledger::MAX_NAME_LEN).collect();
        let cut = if shown.len() < name.len() { "…" } else { "" };
        let denial = format!("{} `{shown}{cut}` is not granted", capability.what());
        let names = capability.granted(&self.policy);
        let granted = if names.is_empty() {
            "none is granted".to_owned()
        } else {
            format!("granted: {}", names.join(", "))
        };
        let message = format!(
            "{denial} to this operation ({granted}); grant it in `capabilities.{}`",
            capability.field()
        );
        self.incidents.deny(denial, true);
        Err(crate::bindings::hane::operation::types::Error::Denied(
            message,
        ))
    }
}

/// The WIT error for a ledger query that failed: `not-found` for a missing
/// collection, set or document, `invalid-input` for the rest.
pub(crate) fn query_error(
    e: hane_core::ledger::QueryError,
) -> crate::bindings::hane::operation::types::Error {
    use crate::bindings::hane::operation::types::Error;
    if e.is_not_found() {
        Error::NotFound(e.to_string())
    } else {
        Error::InvalidInput(e.to_string())
    }
}

/// A limit a host function or the limiter trapped on; downcast from the
/// trap's error to tell limits apart from guest traps.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub(crate) enum HostTrap {
    #[error("memory limit of {limit} exceeded: {requested} bytes requested")]
    Memory { limit: ByteSize, requested: u64 },
    #[error("log limit of {0} bytes exceeded")]
    Log(ByteSize),
    #[error("time limit exceeded")]
    Timeout,
    #[error("call cancelled")]
    Cancelled,
}

/// Caps all linear memories of the instance together at the call's limit
/// and records the peak.
pub(crate) struct MemoryLimiter {
    limit: ByteSize,
    total: u64,
    pub(crate) peak: u64,
}

impl MemoryLimiter {
    pub(crate) fn new(limit: ByteSize) -> Self {
        Self {
            limit,
            total: 0,
            peak: 0,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = (self.total + desired as u64).saturating_sub(current as u64);
        if total > self.limit.bytes() {
            return Err(HostTrap::Memory {
                limit: self.limit,
                requested: total,
            }
            .into());
        }
        self.total = total;
        self.peak = self.peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// One message the guest logged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogRecord {
    /// `trace`, `debug`, `info`, `warn`, `error`, or `stdout`/`stderr` for
    /// text the guest printed.
    pub level: &'static str,
    /// The message.
    pub message: String,
}

pub(crate) struct LogSink {
    pub(crate) records: Vec<LogRecord>,
    pub(crate) bytes: u64,
    pub(crate) calls: u32,
    limit: ByteSize,
}

impl LogSink {
    pub(crate) fn new(limit: ByteSize) -> Self {
        Self {
            records: Vec::new(),
            bytes: 0,
            calls: 0,
            limit,
        }
    }
}

/// The HTTP policy of one call: the policy's allow-list, the request count
/// and the response byte budget.
pub(crate) struct HttpGate {
    pub(crate) policy: Arc<Policy>,
    pub(crate) max_requests: u32,
    pub(crate) response_budget: Arc<AtomicU64>,
    pub(crate) response_limit: ByteSize,
    pub(crate) deadline: Instant,
    pub(crate) incidents: Arc<Incidents>,
}

impl WasiHttpHooks for HttpGate {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        drop(fut);
        let uri = request.uri();
        let scheme = uri.scheme_str().and_then(Scheme::parse);
        let host = uri.host().unwrap_or_default().to_owned();
        let allowed = scheme.is_some_and(|scheme| {
            let port = uri.port_u16().unwrap_or(scheme.default_port());
            self.policy.allows_http(scheme, &host, port)
        });
        if !allowed {
            let target = match scheme {
                Some(s) => format!(
                    "{s}://{host}:{}",
                    uri.port_u16().unwrap_or(s.default_port())
                ),
                None => uri.to_string(),
            };
            self.incidents.deny(
                format!("http request to {target} is not on the allow-list"),
                true,
            );
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        if self.incidents.http_requests() >= self.max_requests {
            self.incidents
                .exceed(Limit::HttpRequests(self.max_requests));
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        self.incidents.http_requests.fetch_add(1, Ordering::Relaxed);

        // A request never outlives the call: every timeout is capped by the
        // time the call has left.
        let left = self.deadline.saturating_duration_since(Instant::now());
        let cap = |t: Option<std::time::Duration>| Some(t.map_or(left, |t| t.min(left)));
        let options = options.unwrap_or_default();
        let options = RequestOptions {
            connect_timeout: cap(options.connect_timeout),
            first_byte_timeout: cap(options.first_byte_timeout),
            between_bytes_timeout: cap(options.between_bytes_timeout),
        };
        let budget = self.response_budget.clone();
        let limit = self.response_limit;
        let incidents = self.incidents.clone();
        Box::new(async move {
            let (response, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            let response = response.map(|inner| {
                MeteredBody {
                    inner,
                    budget,
                    limit,
                    incidents,
                }
                .boxed_unsync()
            });
            Ok((response, Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
}

/// A response body that fails once the call's response budget is spent.
struct MeteredBody<B> {
    inner: B,
    budget: Arc<AtomicU64>,
    limit: ByteSize,
    incidents: Arc<Incidents>,
}

impl<B> Body for MeteredBody<B>
where
    B: Body<Data = Bytes, Error = wasmtime_wasi_http::Error> + Unpin,
{
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            let len = data.len() as u64;
            let taken = self
                .budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(len)
                });
            if taken.is_err() {
                self.incidents.exceed(Limit::ResponseBytes(self.limit));
                return Poll::Ready(Some(Err(wasmtime_wasi_http::Error::HttpResponseBodySize(
                    Some(self.limit.bytes()),
                ))));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Everything a call's `Store` holds.
pub(crate) struct CallState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) http: WasiHttpCtx,
    pub(crate) gate: HttpGate,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) log: LogSink,
    pub(crate) records: crate::records::RecordsCtx,
    pub(crate) documents: crate::documents::DocumentsCtx,
    pub(crate) actions: crate::actions::ActionsCtx,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.gate,
        }
    }
}

impl crate::bindings::hane::operation::types::Host for CallState {}

impl log::Host for CallState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let sink = &mut self.log;
        sink.calls += 1;
        sink.bytes += message.len() as u64;
        if sink.bytes > sink.limit.bytes() {
            return Err(HostTrap::Log(sink.limit).into());
        }
        let level = match level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        sink.records.push(LogRecord { level, message });
        Ok(())
    }
}
