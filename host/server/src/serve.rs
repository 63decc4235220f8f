//! The server's own accept loop, which holds up under abusive clients:
//! a request head must arrive within [`ServeConfig::header_timeout`] of
//! its first byte, a connection waiting for a request is closed after
//! [`ServeConfig::idle_timeout`], a body must arrive within
//! [`ServeConfig::body_timeout`], heads are capped at [`MAX_HEAD_BYTES`]
//! and targets at [`MAX_URI_BYTES`], and at most
//! [`ServeConfig::max_connections`] connections are served at once: when
//! all are taken, the one idle longest (waiting for a request with no
//! byte of one come) is closed to make room; when none is idle, the oldest
//! of those still sending a request head from the address that has the
//! most of them, so a slow client holds at most its own places; only when
//! every connection has a request being answered is the next one answered
//! `503` and closed. Every refusal is logged with the
//! peer's address and the reason, and answered in the JSON error
//! envelope, including the replies hyper writes itself when a head cannot
//! be parsed.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use hane_coordinator::Services;
use http_body::{Frame, SizeHint};
use hyper::rt::{Sleep, Timer};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use crate::error::{ApiError, ErrorCode};

/// The largest request head (request line and headers) read, in bytes; a
/// larger one is answered `431`.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The longest request target (path and query), in bytes; a longer one is
/// answered `414`.
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// Pause after a failed `accept` (such as too many open files), so the
/// loop does not spin while the condition lasts.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// How long a refused connection's `503` may take to write.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);

/// How the server treats its connections; [`ServeConfig::default`] is what
/// `hane serve` uses unless told otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeConfig {
    /// Time from a request head's first byte to its last (10 s); a
    /// client that sends it slower is disconnected.
    pub header_timeout: Duration,
    /// Time a connection may wait without starting a request (60 s),
    /// from its opening or the end of its previous response.
    pub idle_timeout: Duration,
    /// Time from a request's head to the end of its body (30 s); a body
    /// that arrives slower is answered `408`.
    pub body_timeout: Duration,
    /// Connections served at once (1024); one more closes the connection
    /// idle longest, or is answered `503` and closed when none is idle.
    pub max_connections: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
        }
    }
}

/// Serves the API over `services` on `listener` with the default
/// [`ServeConfig`] until `shutdown` resolves, then waits for the requests
/// in progress (a `wait: true` start waits for its run, at most the
/// agent's `maxSeconds`).
///
/// # Errors
///
/// Reading the listener's address failed.
pub async fn serve(
    listener: TcpListener,
    services: Services,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_with(listener, services, ServeConfig::default(), shutdown).await
}

/// [`serve`] with `config`'s timeouts and connection cap.
///
/// # Errors
///
/// Reading the listener's address failed.
pub async fn serve_with(
    listener: TcpListener,
    services: Services,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_router(listener, crate::router(services), config, shutdown).await
}

/// Serves `router` as [`serve_with`] does.
pub(crate) async fn serve_router(
    listener: TcpListener,
    router: Router,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    listener.local_addr()?;
    let body_timeout = config.body_timeout;
    let router = router.layer(middleware::from_fn(move |request, next| {
        limits(body_timeout, request, next)
    }));
    let permits = Arc::new(Semaphore::new(config.max_connections));
    let refusals = Arc::new(Refusals::default());
    let open = Arc::new(Open::default());
    let admitting = Arc::new(AtomicUsize::new(0));
    // Dropped to ask every connection to finish; each holds a receiver,
    // so `closed` tells when the last has.
    let (stop, stopping) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
        };
        // Answers are small and often written in pieces (a stream's
        // events): don't let Nagle hold one back for a delayed ACK.
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let stopping = stopping.clone();
        let open = open.clone();
        if let Ok(permit) = permits.clone().try_acquire_owned() {
            tokio::spawn(async move {
                connection(tcp, peer, router, config, stopping, &open).await;
                drop(permit);
            });
            continue;
        }
        // Full: the connection idle longest makes room for this one, so
        // idle and silent peers cannot lock out a client with a request.
        if admitting.load(Ordering::Relaxed) < MAX_ADMITTING && open.make_room() {
            admitting.fetch_add(1, Ordering::Relaxed);
            let (permits, admitting, refusals) =
                (permits.clone(), admitting.clone(), refusals.clone());
            tokio::spawn(async move {
                let permit = tokio::time::timeout(EVICTION_WAIT, permits.acquire_owned()).await;
                admitting.fetch_sub(1, Ordering::Relaxed);
                if let Ok(Ok(permit)) = permit {
                    connection(tcp, peer, router, config, stopping, &open).await;
                    drop(permit);
                } else {
                    refusals.note(peer, config.max_connections);
                    refuse(tcp).await;
                }
            });
            continue;
        }
        refusals.note(peer, config.max_connections);
        tokio::spawn(refuse(tcp));
    }
    drop(stopping);
    stop.send_replace(());
    stop.closed().await;
    Ok(())
}

/// Serves one connection until it ends, or until `stopping` changes, then
/// lets its request in progress finish.
async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    router: Router,
    config: ServeConfig,
    mut stopping: watch::Receiver<()>,
    open: &Open,
) {
    let reads = Arc::new(AtomicU64::new(0));
    let fired = Arc::new(AtomicU8::new(FIRED_NONE));
    let seen = Arc::new(Seen {
        peer: peer.ip(),
        reads: reads.clone(),
        waiting: std::sync::Mutex::new(None),
        evict: tokio::sync::Notify::new(),
        cut: tokio::sync::Notify::new(),
    });
    let _open = open.add(seen.clone());
    let io = Conn {
        tcp,
        peer,
        reads: reads.clone(),
        pending: Vec::new(),
        written: 0,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(HeadTimer {
            seen: seen.clone(),
            reads,
            fired: fired.clone(),
            header: config.header_timeout,
            idle: config.idle_timeout,
            waits: AtomicU64::new(0),
        })
        // hyper measures from when it starts waiting for a head; the
        // timer turns that into the idle and the header timeouts.
        .header_read_timeout(config.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let service = TowerToHyperService::new(router);
    let serving = builder.serve_connection(TokioIo::new(io), service);
    let mut serving = std::pin::pin!(serving);
    let ended = loop {
        tokio::select! {
            ended = serving.as_mut() => break ended,
            _ = stopping.changed() => {
                serving.as_mut().graceful_shutdown();
                break serving.await;
            }
            () = seen.evict.notified() => {
                tracing::debug!(%peer, "closed an idle connection to make room for a new one");
                serving.as_mut().graceful_shutdown();
                break serving.await;
            }
            // Dropping `serving` closes the connection at once; unless its
            // head was done meanwhile, when it goes on.
            () = seen.cut.notified() => if seen.sending_head() {
                tracing::warn!(
                    %peer,
                    "closed a connection still sending its request head to make room for a new one: \
                     its address had the most such connections"
                );
                return;
            }
        }
    };
    if let Err(e) = ended
        && e.is_timeout()
    {
        match fired.load(Ordering::Relaxed) {
            FIRED_HEADER => tracing::warn!(
                %peer,
                "closed a connection: its request head did not arrive within {:?}",
                config.header_timeout
            ),
            _ => tracing::debug!(
                %peer,
                "closed a connection idle for {:?}",
                config.idle_timeout
            ),
        }
    }
}

/// Answers a connection over the cap `503` and closes it.
async fn refuse(mut tcp: TcpStream) {
    let reply = envelope(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Unavailable,
        "the server has as many connections as it takes: try again shortly",
    );
    let _ = tokio::time::timeout(REFUSAL_WRITE, async {
        tcp.write_all(&reply).await?;
        tcp.shutdown().await
    })
    .await;
}

/// Refusals over the connection cap, logged at most once a second with
/// how many there were, so a flood of connections cannot flood the log.
#[derive(Default)]
struct Refusals {
    since_logged: AtomicU64,
    last_logged: std::sync::Mutex<Option<Instant>>,
}

impl Refusals {
    fn note(&self, peer: SocketAddr, cap: usize) {
        let count = self.since_logged.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self
            .last_logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            *last = Some(Instant::now());
            self.since_logged.store(0, Ordering::Relaxed);
            tracing::warn!(
                %peer,
                "refused {count} connection(s) since the last report: {cap} connections are open, the most --max-connections allows"
            );
        }
    }
}

/// A whole HTTP/1.1 reply that closes the connection, with `message` in
/// the JSON error envelope.
fn envelope(status: StatusCode, code: ErrorCode, message: &str) -> Vec<u8> {
    let body = ApiError::new(code, message).body().to_string();
    let mut reply = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        status.as_str(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes();
    reply.extend_from_slice(body.as_bytes());
    reply
}

/// The checks of a request hyper has read: the target's length, and the
/// body's deadline.
async fn limits(body_timeout: Duration, request: Request, next: Next) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |target| target.as_str().len());
    if target > MAX_URI_BYTES {
        return ApiError::new(
            ErrorCode::UriTooLong,
            format!("the request's target is {target} bytes long, more than the {MAX_URI_BYTES} the server reads"),
        )
        .into_response();
    }
    // hyper stops reading a head once its buffer passes the cap, but a
    // head that completes within the read that passed it is parsed: the
    // cap is held exactly here, counting the bytes as they were sent.
    let head = request.method().as_str().len()
        + target
        + "  HTTP/1.1\r\n\r\n".len()
        + request
            .headers()
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + ": \r\n".len())
            .sum::<usize>();
    if head > MAX_HEAD_BYTES {
        return ApiError::new(
            ErrorCode::HeadersTooLarge,
            format!("the request's head (its request line and headers) is {head} bytes long, more than the {MAX_HEAD_BYTES} bytes the server reads"),
        )
        .into_response();
    }
    let request = request.map(|body| {
        Body::new(Deadline {
            body,
            timeout: body_timeout,
            sleep: Box::pin(tokio::time::sleep(body_timeout)),
        })
    });
    next.run(request).await
}

/// A request body that did not arrive within the body timeout.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub(crate) struct BodyTimedOut(pub(crate) Duration);

/// A request body that fails with [`BodyTimedOut`] once its time is up.
struct Deadline {
    body: Body,
    timeout: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(BodyTimedOut(self.timeout).into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

const FIRED_NONE: u8 = 0;
const FIRED_IDLE: u8 = 1;
const FIRED_HEADER: u8 = 2;

/// Connections admitted beyond the cap at once while the idle ones they
/// evicted close; more are refused.
const MAX_ADMITTING: usize = 64;

/// How long a connection admitted by evicting an idle one waits for its
/// place before it is refused.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// The open connections, to find the one idle longest.
#[derive(Default)]
struct Open {
    next: AtomicU64,
    connections: std::sync::Mutex<std::collections::HashMap<u64, Arc<Seen>>>,
}

/// One open connection as [`Open`] sees it.
struct Seen {
    /// The client's address.
    peer: std::net::IpAddr,
    /// Bytes read on it so far.
    reads: Arc<AtomicU64>,
    /// While it waits for a request head: when the wait began, the bytes
    /// read by then (idle while no more have come), and which wait it is.
    /// `None` once the head is read, until the next wait.
    waiting: std::sync::Mutex<Option<Waiting>>,
    /// Told to close once idle.
    evict: tokio::sync::Notify,
    /// Told to close now, if still sending its head.
    cut: tokio::sync::Notify,
}

#[derive(Clone, Copy)]
struct Waiting {
    since: Instant,
    read_before: u64,
    wait: u64,
}

impl Seen {
    fn idle_since(&self) -> Option<Instant> {
        let waiting = *lock(&self.waiting);
        waiting
            .filter(|w| self.reads.load(Ordering::Relaxed) == w.read_before)
            .map(|w| w.since)
    }

    /// When it began sending the head it is sending, if it is.
    fn head_since(&self) -> Option<Instant> {
        let waiting = *lock(&self.waiting);
        waiting
            .filter(|w| self.reads.load(Ordering::Relaxed) > w.read_before)
            .map(|w| w.since)
    }

    fn sending_head(&self) -> bool {
        self.head_since().is_some()
    }
}

/// Takes a connection out of [`Open`] when dropped.
struct Registered<'a> {
    open: &'a Open,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        lock(&self.open.connections).remove(&self.id);
    }
}

impl Open {
    fn add(&self, seen: Arc<Seen>) -> Registered<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.connections).insert(id, seen);
        Registered { open: self, id }
    }

    /// Tells the connection idle longest (waiting for a request, with no
    /// byte of one come) to close; when none is idle, the oldest of those
    /// still sending a head from the address with the most of them.
    /// Whether one was told.
    fn make_room(&self) -> bool {
        let connections = lock(&self.connections);
        let longest = connections
            .values()
            .filter_map(|seen| seen.idle_since().map(|since| (since, seen)))
            .min_by_key(|(since, _)| *since);
        if let Some((_, seen)) = longest {
            // Not chosen again while it closes.
            *lock(&seen.waiting) = None;
            seen.evict.notify_one();
            return true;
        }
        let sending: Vec<(Instant, &Arc<Seen>)> = connections
            .values()
            .filter_map(|seen| seen.head_since().map(|since| (since, seen)))
            .collect();
        let mut by_peer: std::collections::HashMap<std::net::IpAddr, usize> =
            std::collections::HashMap::new();
        for (_, seen) in &sending {
            *by_peer.entry(seen.peer).or_default() += 1;
        }
        let Some((&most, _)) = by_peer.iter().max_by_key(|(_, n)| **n) else {
            return false;
        };
        let Some((_, seen)) = sending
            .iter()
            .filter(|(_, seen)| seen.peer == most)
            .min_by_key(|(since, _)| *since)
        else {
            return false;
        };
        seen.cut.notify_one();
        true
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// hyper's timer for one connection. hyper asks for one deadline when it
/// starts waiting for a request head; this one waits `idle` while no byte
/// comes, and `header` from the first byte on.
struct HeadTimer {
    /// Where the connection's waits are noted for [`Open`].
    seen: Arc<Seen>,
    /// Bytes read on the connection so far.
    reads: Arc<AtomicU64>,
    /// Which timeout ended the connection, for the log.
    fired: Arc<AtomicU8>,
    header: Duration,
    idle: Duration,
    /// Numbers the waits, so an old one ending does not clear a new one.
    waits: AtomicU64,
}

impl Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        Box::pin(Plain(Box::pin(tokio::time::sleep(duration))))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        // hyper's deadline is the wait's start plus the header timeout.
        let start = deadline.checked_sub(self.header).unwrap_or(deadline);
        let wait = self.waits.fetch_add(1, Ordering::Relaxed);
        *lock(&self.seen.waiting) = Some(Waiting {
            since: start,
            read_before: self.reads.load(Ordering::Relaxed),
            wait,
        });
        Box::pin(HeadWait {
            seen: self.seen.clone(),
            wait,
            reads: self.reads.clone(),
            read_before: self.reads.load(Ordering::Relaxed),
            fired: self.fired.clone(),
            header: self.header,
            started: false,
            sleep: Box::pin(tokio::time::sleep_until((start + self.idle).into())),
        })
    }
}

/// A plain sleep, for whatever else hyper times.
struct Plain(Pin<Box<tokio::time::Sleep>>);

impl Future for Plain {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl Sleep for Plain {}

/// The wait for one request head: until `idle` after it began while no
/// byte arrives, then `header` from the first byte.
struct HeadWait {
    /// Where the wait is noted, until it ends.
    seen: Arc<Seen>,
    wait: u64,
    reads: Arc<AtomicU64>,
    read_before: u64,
    fired: Arc<AtomicU8>,
    header: Duration,
    started: bool,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Future for HeadWait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // hyper polls this each time a read leaves the head incomplete,
        // so the first poll after a byte came is within a moment of it.
        if !self.started && self.reads.load(Ordering::Relaxed) > self.read_before {
            self.started = true;
            let deadline = tokio::time::Instant::now() + self.header;
            self.sleep.as_mut().reset(deadline);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            let fired = if self.started {
                FIRED_HEADER
            } else {
                FIRED_IDLE
            };
            self.fired.store(fired, Ordering::Relaxed);
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Sleep for HeadWait {}

impl Drop for HeadWait {
    /// hyper drops the wait once the head is read (or the connection
    /// ends): the connection is no longer idle nor sending a head.
    fn drop(&mut self) {
        let mut waiting = lock(&self.seen.waiting);
        if waiting.is_some_and(|w| w.wait == self.wait) {
            *waiting = None;
        }
    }
}

/// A connection as hyper sees it: counts the bytes read (for
/// [`HeadTimer`]) and rewrites the bodiless `400`, `414` and `431`
/// replies hyper writes itself, for a head it cannot parse, into the JSON
/// error envelope.
struct Conn {
    tcp: TcpStream,
    peer: SocketAddr,
    reads: Arc<AtomicU64>,
    /// A rewritten reply still to write, from `written` on.
    pending: Vec<u8>,
    written: usize,
}

impl Conn {
    /// Writes what is left of a rewritten reply.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let n = std::task::ready!(
                Pin::new(&mut self.tcp).poll_write(cx, &self.pending[self.written..])
            )?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.tcp).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.reads.fetch_add(n as u64, Ordering::Relaxed);
        read
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_pending(cx))?;
        if let Some((status, code, message)) = canned_reply(buf) {
            tracing::warn!(peer = %self.peer, "refused a request: {message}");
            self.pending = envelope(status, code, &message);
            self.written = 0;
            // The reply is taken; what is left of it goes out with the
            // next write or flush.
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// When `written` is one of the replies hyper writes by itself for a head
/// it cannot parse (a bodiless `400`, `414` or `431`; every reply of the
/// API's own has a JSON body), the status, code and message to send
/// instead.
fn canned_reply(written: &[u8]) -> Option<(StatusCode, ErrorCode, String)> {
    let head = std::str::from_utf8(written).ok()?;
    let rest = head.strip_prefix("HTTP/1.1 ")?;
    if !head.ends_with("\r\n\r\n") || head.matches("\r\n\r\n").count() != 1 {
        return None;
    }
    let bodiless = head
        .split("\r\n")
        .any(|line| line.eq_ignore_ascii_case("content-length: 0"));
    if !bodiless {
        return None;
    }
    let (status, code, message) = match rest.get(..4)? {
        "400 " => (
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            "the request is not HTTP/1.1 the server can read: its request line or a header is malformed"
                .to_owned(),
        ),
        "414 " => (
            StatusCode::URI_TOO_LONG,
            ErrorCode::UriTooLong,
            format!("the request's target is longer than the {MAX_URI_BYTES} bytes the server reads"),
        ),
        "431 " => (
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorCode::HeadersTooLarge,
            format!(
                "the request's head (its request line and headers) is larger than the {MAX_HEAD_BYTES} bytes the server reads, or has too many headers"
            ),
        ),
        _ => return None,
    };
    Some((status, code, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bodiless_error_replies_are_rewritten() {
        let canned =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let (status, code, _) = canned_reply(canned).unwrap();
        assert_eq!(
            (status, code),
            (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                ErrorCode::HeadersTooLarge
            )
        );
        assert!(canned_reply(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").is_some());
        // The API's own replies have bodies; a 200 is never touched.
        for reply in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n",
        ] {
            assert!(
                canned_reply(reply).is_none(),
                "{}",
                String::from_utf8_lossy(reply)
            );
        }
    }

    #[test]
    fn a_refusal_is_a_whole_reply_in_the_envelope() {
        let reply = envelope(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Unavailable,
            "full",
        );
        let text = String::from_utf8(reply).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{head}"
        );
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "unavailable");
    }
}
