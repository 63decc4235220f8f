//! One HTTP/1.1 POST to a provider, on hyper's connection-level client:
//! plain TCP for `http://` (loopback servers), rustls (ring, Mozilla's roots)
//! for `https://`.
//!
//! Connections are kept alive in a [`Pool`], one per adapter (an adapter
//! has one URL). A connection is driven by the task that uses it, never by
//! a task of its own: a call reads its answer without waking another thread
//! (on a VM each such wake-up costs tens of microseconds), and dropping the
//! call drops the connection, which cancels the upstream request. A
//! connection goes back to the pool only once its answer was read to the
//! end; one idle for [`IDLE_FOR`] is closed instead of reused.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST, HeaderName, HeaderValue, USER_AGENT};
use http::{HeaderMap, Method, StatusCode, Uri};
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

use crate::ModelError;

/// How long an idle connection is kept: below the 5 s after which Node's
/// and uvicorn's servers close one by default, so that a reused connection
/// is rarely one the server is closing.
pub(crate) const IDLE_FOR: Duration = Duration::from_secs(4);
/// How many idle connections a pool keeps.
const MAX_IDLE: usize = 16;

/// A connection's byte stream: TCP, or TLS over TCP.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// hyper's side of one connection: its I/O, moved on by whoever polls it.
type Driven = Connection<TokioIo<Box<dyn Io>>, Full<Bytes>>;

/// One HTTP/1.1 connection: the request side and the I/O that the user of
/// the connection drives.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    connection: Pin<Box<Driven>>,
    /// The connection's I/O ended (closed, failed, or not to be kept alive).
    ended: bool,
}

impl Conn {
    /// Moves the connection's I/O on; whether it has ended.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.ended && self.connection.as_mut().poll(cx).is_ready() {
            self.ended = true;
        }
        self.ended
    }

    /// Whether a request can be sent now (an idle connection the server
    /// has not closed).
    fn poll_usable(&mut self, cx: &mut Context<'_>) -> bool {
        if self.drive(cx) {
            return false;
        }
        matches!(self.sender.poll_ready(cx), Poll::Ready(Ok(())))
    }
}

/// The idle connections of one adapter.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<Vec<(Instant, Conn)>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.idle.lock().map_or(0, |idle| idle.len());
        f.debug_struct("Pool").field("idle", &idle).finish()
    }
}

impl Pool {
    /// An idle connection that can take a request, if there is one.
    async fn take(&self) -> Option<Conn> {
        loop {
            let (since, mut conn) = self.idle.lock().ok()?.pop()?;
            if since.elapsed() >= IDLE_FOR {
                continue;
            }
            // One poll: an idle connection is ready at once, or closed.
            let usable = poll_fn(|cx| Poll::Ready(conn.poll_usable(cx))).await;
            if usable {
                return Some(conn);
            }
        }
    }

    fn put(&self, conn: Conn) {
        if conn.ended {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            idle.retain(|(since, _)| since.elapsed() < IDLE_FOR);
            if idle.len() < MAX_IDLE {
                idle.push((Instant::now(), conn));
            }
        }
    }
}

/// An answer whose body is still to be read.
pub(crate) struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: Incoming,
    /// The connection, driven while the body is read; back to `pool` once
    /// the body has ended, closed if the reply is dropped before.
    conn: Option<Conn>,
    pool: Arc<Pool>,
}

impl Reply {
    /// The next piece of the body, `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, ModelError> {
        loop {
            let frame = poll_fn(|cx| {
                if let Some(conn) = &mut self.conn {
                    conn.drive(cx);
                }
                Pin::new(&mut self.body).poll_frame(cx)
            })
            .await;
            match frame {
                None => {
                    self.release();
                    return Ok(None);
                }
                Some(Err(e)) => {
                    self.conn = None;
                    return Err(ModelError::Transport(format!(
                        "the provider's answer was cut off: {}",
                        error_chain(&e)
                    )));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        if self.body.is_end_stream() {
                            self.release();
                        }
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// The whole body, refused past `cap` bytes; or, with `truncate`, cut
    /// at `cap` (for error bodies, which are only quoted).
    pub async fn body(&mut self, cap: usize, truncate: bool) -> Result<Vec<u8>, ModelError> {
        let mut bytes = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            if bytes.len() + chunk.len() > cap {
                if truncate {
                    bytes.extend_from_slice(&chunk[..cap - bytes.len()]);
                    break;
                }
                return Err(ModelError::Transport(format!(
                    "the provider's answer is larger than {cap} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    /// The body has been read to its end: the connection can be reused.
    fn release(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.put(conn);
        }
    }
}

/// POSTs `body` (JSON) to `url` with `headers` on one of `pool`'s
/// connections, or a new one, and returns the answer once its head has
/// arrived. A kept-alive connection that fails before an answer (the
/// server closed it as it was taken) is given up and the request sent once
/// more on a new connection.
pub(crate) async fn post(
    pool: &Arc<Pool>,
    url: &Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Vec<u8>,
) -> Result<Reply, ModelError> {
    let request = build(url, headers, body)?;
    if let Some(conn) = pool.take().await {
        let again = clone_request(&request);
        match exchange(conn, request, pool).await {
            Ok(reply) => return Ok(reply),
            Err(_) => return exchange(connect(url).await?, again, pool).await,
        }
    }
    exchange(connect(url).await?, request, pool).await
}

/// A new connection to `url`'s host, with HTTP/1.1 started on it.
async fn connect(url: &Uri) -> Result<Conn, ModelError> {
    let https = url.scheme_str() == Some("https");
    let authority = url
        .authority()
        .ok_or_else(|| ModelError::Transport(format!("the URL {url} names no host")))?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = TcpStream::connect((host, port)).await.map_err(|e| {
        ModelError::Transport(format!(
            "could not connect to {host}:{port}: {}",
            error_chain(&e)
        ))
    })?;
    // Requests are small; don't let Nagle hold back their last segment.
    let _ = tcp.set_nodelay(true);
    let io: Box<dyn Io> = if https {
        let name = ServerName::try_from(host.to_owned()).map_err(|_| {
            ModelError::Transport(format!(
                "{host:?} is not a name a TLS certificate can carry"
            ))
        })?;
        let tls = TlsConnector::from(tls_config())
            .connect(name, tcp)
            .await
            .map_err(|e| {
                ModelError::Transport(format!(
                    "TLS handshake with {host}:{port} failed: {}",
                    error_chain(&e)
                ))
            })?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| {
            ModelError::Transport(format!("could not start HTTP/1.1: {}", error_chain(&e)))
        })?;
    Ok(Conn {
        sender,
        connection: Box::pin(connection),
        ended: false,
    })
}

fn build(
    url: &Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Vec<u8>,
) -> Result<http::Request<Full<Bytes>>, ModelError> {
    let authority = url
        .authority()
        .ok_or_else(|| ModelError::Transport(format!("the URL {url} names no host")))?;
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    let mut builder = http::Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(HOST, authority.as_str())
        .header(USER_AGENT, concat!("hane/", env!("CARGO_PKG_VERSION")))
        .header(CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| ModelError::Transport(format!("cannot build the request: {e}")))
}

/// The same request again (its body is one shared buffer).
fn clone_request(request: &http::Request<Full<Bytes>>) -> http::Request<Full<Bytes>> {
    let mut again = http::Request::new(request.body().clone());
    *again.method_mut() = request.method().clone();
    *again.uri_mut() = request.uri().clone();
    *again.headers_mut() = request.headers().clone();
    again
}

/// Sends `request` on `conn`, driving the connection until the answer's
/// head has arrived.
async fn exchange(
    mut conn: Conn,
    request: http::Request<Full<Bytes>>,
    pool: &Arc<Pool>,
) -> Result<Reply, ModelError> {
    let Conn {
        sender,
        connection,
        ended,
    } = &mut conn;
    let mut response = std::pin::pin!(sender.send_request(request));
    let answer = poll_fn(|cx| {
        if !*ended && connection.as_mut().poll(cx).is_ready() {
            *ended = true;
        }
        response.as_mut().poll(cx)
    })
    .await;
    let response = answer.map_err(|e| {
        ModelError::Transport(format!(
            "the connection failed before an answer: {}",
            error_chain(&e)
        ))
    })?;
    let (parts, body) = response.into_parts();
    let mut reply = Reply {
        status: parts.status,
        headers: parts.headers,
        body,
        conn: Some(conn),
        pool: Arc::clone(pool),
    };
    if reply.body.is_end_stream() {
        reply.release();
    }
    Ok(reply)
}

/// Mozilla's roots through ring, HTTP/1.1 only; built once.
fn tls_config() -> Arc<ClientConfig> {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let mut config = ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(config)
        })
        .clone()
}

/// An error and its sources, joined by `: `.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}
