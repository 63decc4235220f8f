//! hane's one HTTP/1.1 client, used by the model adapters, delivery (SMS,
//! calls, customer APIs) and `hane mcp`.
//!
//! - **Connections** are kept alive in a pool by origin (a [`Client`] made
//!   with [`Client::single_use`] keeps none: one attempt, one connection),
//!   and driven by the task that uses them, never by a task of their own.
//!   A connection goes back to the pool only once its answer was read to
//!   the end; one idle for [`IDLE_FOR`] is closed instead of reused.
//! - **Deadlines** are by request and checked at every step, so a timeout
//!   says which step ran out ([`Step`]).
//! - **Whether a request left** is always known: [`Error::nothing_sent`]
//!   is `true` only when hyper handed the request back or it never had a
//!   connection to go on. An outbound action that fails that way is
//!   failed; otherwise it is unknown, never sent again.
//! - **TLS** is rustls on ring, HTTP/1.1 by ALPN, trusting the platform's
//!   roots (and those named by `SSL_CERT_FILE`/`SSL_CERT_DIR`) and
//!   Mozilla's; a client may add its own ([`Client::with_roots`],
//!   [`Client::with_root_pem`]). A certificate that chains to none of them
//!   is [`Error::Untrusted`].
//! - **Bodies** are read in chunks or whole under a cap ([`Reply::body`]).
//! - **No proxy** is used: every request, to loopback or not, goes straight
//!   to the host its URL names.

mod conn;
mod error;
mod tls;

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST, HeaderName, HeaderValue, USER_AGENT};
use http::{HeaderMap, Method, StatusCode, Uri};
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use tokio::time::Instant;
use tokio_rustls::rustls::ClientConfig;

pub use conn::IDLE_FOR;
pub use error::{Error, Step, error_chain, seconds_or_millis};
pub use tls::{RootsError, parse_pem, read_pem};

use conn::{Conn, Failure, Origin, Pool};

/// An HTTP/1.1 client; cheap to clone (clones share the pool).
#[derive(Clone)]
pub struct Client {
    /// Idle connections; `None` for a client that keeps none.
    pool: Option<Arc<Pool>>,
    tls: Arc<ClientConfig>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl Default for Client {
    fn default() -> Self {
        Self::new()
    }
}

impl Client {
    /// A client that keeps connections alive for the next request to the
    /// same origin.
    pub fn new() -> Self {
        Self {
            pool: Some(Arc::default()),
            tls: tls::default_config(),
        }
    }

    /// A client that opens a connection for each request and closes it
    /// after: for requests that must not meet a connection the server is
    /// closing (an outbound action is sent once, on a connection of its
    /// own).
    pub fn single_use() -> Self {
        Self {
            pool: None,
            tls: tls::default_config(),
        }
    }

    /// This client, trusting the certificates of the PEM file at `path`
    /// besides the platform's and Mozilla's roots.
    ///
    /// # Errors
    ///
    /// [`RootsError`] naming the file when it cannot be read, holds no
    /// certificate, or holds one that cannot be a root.
    pub fn with_roots(mut self, path: &std::path::Path) -> Result<Self, RootsError> {
        let extra = read_pem(path)?;
        self.tls = tls::config_with(extra, &path.display().to_string())?;
        Ok(self)
    }

    /// This client, trusting the certificates of the PEM text `pem`
    /// besides the platform's and Mozilla's roots; `origin` names the text
    /// in errors. Each call builds a TLS configuration: a caller that
    /// trusts the same roots often keeps the client.
    ///
    /// # Errors
    ///
    /// [`RootsError`] naming `origin` when `pem` holds no certificate, or
    /// one that cannot be a root.
    pub fn with_root_pem(mut self, pem: &[u8], origin: &str) -> Result<Self, RootsError> {
        let extra = parse_pem(pem, origin)?;
        self.tls = tls::config_with(extra, origin)?;
        Ok(self)
    }

    /// Sends `request` and returns the answer once its head has arrived.
    ///
    /// On a kept-alive connection that closed as it was taken, the request
    /// is sent again on a new one when it never left, or when the request
    /// allows it ([`Request::resend_if_stale`]).
    ///
    /// # Errors
    ///
    /// [`Error`], saying which step failed and whether the request left.
    pub async fn send(&self, request: Request) -> Result<Reply, Error> {
        let target = Target::of(&request)?;
        let resend = request.resend_if_stale;
        let deadline = request.deadline;
        let mut http_request = request.build(&target)?;
        if let Some(pool) = &self.pool
            && let Some(mut conn) = pool.take(&target.origin).await
        {
            let again = resend.then(|| clone_request(&http_request));
            match conn::exchange(&mut conn, http_request, &target, deadline).await {
                Ok(response) => return Ok(self.reply(response, conn, target, deadline)),
                Err(Failure {
                    unsent: Some(unsent),
                    ..
                }) => http_request = unsent,
                Err(Failure {
                    error,
                    unsent: None,
                }) => match again {
                    Some(again) if !matches!(error, Error::TimedOut { .. }) => {
                        http_request = again;
                    }
                    _ => return Err(error),
                },
            }
        }
        let mut conn = conn::connect(&target, &self.tls, deadline).await?;
        match conn::exchange(&mut conn, http_request, &target, deadline).await {
            Ok(response) => Ok(self.reply(response, conn, target, deadline)),
            Err(failure) => Err(failure.error),
        }
    }

    fn reply(
        &self,
        response: hyper::Response<Incoming>,
        conn: Conn,
        target: Target,
        deadline: Deadline,
    ) -> Reply {
        let (parts, body) = response.into_parts();
        let mut reply = Reply {
            status: parts.status,
            headers: parts.headers,
            body,
            conn: Some(conn),
            pool: self.pool.clone(),
            server: target.server,
            deadline,
        };
        if reply.body.is_end_stream() {
            reply.release();
        }
        reply
    }
}

/// One request to send.
#[derive(Debug, Clone)]
pub struct Request {
    method: Method,
    url: Uri,
    name: Option<String>,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Option<Bytes>,
    deadline: Deadline,
    resend_if_stale: bool,
}

impl Request {
    /// A `method` request to `url` (`http` or `https`), with no body.
    pub fn new(method: Method, url: Uri) -> Self {
        Self {
            method,
            url,
            name: None,
            headers: Vec::new(),
            body: None,
            deadline: Deadline(None),
            resend_if_stale: false,
        }
    }

    /// A `POST` of the JSON `body` to `url`.
    pub fn post_json(url: Uri, body: impl Into<Bytes>) -> Self {
        Self::new(Method::POST, url).json(body)
    }

    /// What the server is to the caller ("SMS provider"), for errors:
    /// "could not connect to SMS provider at 127.0.0.1:9".
    #[must_use]
    pub fn named(mut self, what: impl Into<String>) -> Self {
        self.name = Some(what.into());
        self
    }

    /// Adds a header (`Host` and `User-Agent` are set by the client).
    #[must_use]
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The JSON body, with its `Content-Type`.
    #[must_use]
    pub fn json(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Gives the whole exchange, from connecting to the body's last byte,
    /// until `timeout` from now.
    #[must_use]
    pub fn timeout(self, timeout: Duration) -> Self {
        self.deadline(Instant::now() + timeout, timeout)
    }

    /// Gives the whole exchange until `at`; errors quote `timeout` as the
    /// time it was given.
    #[must_use]
    pub fn deadline(mut self, at: Instant, timeout: Duration) -> Self {
        self.deadline = Deadline(Some((at, timeout)));
        self
    }

    /// Allows the request to be sent again on a new connection when a
    /// kept-alive one fails without an answer (the server closed it as it
    /// was taken), although the request may have reached the server: for
    /// requests that may be repeated, such as a model call.
    #[must_use]
    pub fn resend_if_stale(mut self) -> Self {
        self.resend_if_stale = true;
        self
    }

    fn build(&self, target: &Target) -> Result<http::Request<Full<Bytes>>, Error> {
        let path = self.url.path_and_query().map_or("/", |p| p.as_str());
        let mut builder = http::Request::builder()
            .method(self.method.clone())
            .uri(path)
            .header(HOST, target.authority.as_str())
            .header(USER_AGENT, concat!("hane/", env!("CARGO_PKG_VERSION")));
        if self.body.is_some() {
            builder = builder.header(CONTENT_TYPE, "application/json");
        }
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        builder
            .body(Full::new(self.body.clone().unwrap_or_default()))
            .map_err(|e| Error::Request {
                server: target.server.clone(),
                problem: format!("cannot be built: {e}"),
            })
    }
}

/// The whole exchange's deadline, and the timeout it came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Option<(Instant, Duration)>);

impl Deadline {
    /// `future`'s output, or [`Error::TimedOut`] at `step` when the
    /// deadline passes first.
    pub(crate) async fn within<F: Future>(
        self,
        step: Step,
        server: &str,
        future: F,
    ) -> Result<F::Output, Error> {
        match self.0 {
            None => Ok(future.await),
            Some((at, after)) => {
                tokio::time::timeout_at(at, future)
                    .await
                    .map_err(|_| Error::TimedOut {
                        server: server.to_owned(),
                        step,
                        after,
                    })
            }
        }
    }
}

/// Where a request goes, and how errors name it.
#[derive(Debug)]
pub(crate) struct Target {
    origin: Origin,
    /// `host:port` as the `Host` header gives it.
    authority: String,
    /// "host:port", or "SMS provider at host:port".
    server: String,
}

impl Target {
    fn of(request: &Request) -> Result<Self, Error> {
        let url = &request.url;
        let named = |place: &str| match &request.name {
            Some(name) => format!("{name} at {place}"),
            None => place.to_owned(),
        };
        let refuse = |problem: &str| Error::Request {
            server: named(&url.to_string()),
            problem: problem.to_owned(),
        };
        let https = match url.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(refuse("is not to an http:// or https:// URL")),
        };
        let authority = url
            .authority()
            .filter(|a| !a.host().is_empty())
            .ok_or_else(|| refuse("names no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let place = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(Self {
            server: named(&place),
            authority: authority.as_str().to_owned(),
            origin: Origin { https, host, port },
        })
    }
}

/// The same request again (its body is one shared buffer).
fn clone_request(request: &http::Request<Full<Bytes>>) -> http::Request<Full<Bytes>> {
    let mut again = http::Request::new(request.body().clone());
    *again.method_mut() = request.method().clone();
    *again.uri_mut() = request.uri().clone();
    *again.headers_mut() = request.headers().clone();
    again
}

/// An answer whose body is still to be read.
pub struct Reply {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    body: Incoming,
    /// The connection, driven while the body is read; back to `pool` once
    /// the body has ended, closed if the reply is dropped before.
    conn: Option<Conn>,
    pool: Option<Arc<Pool>>,
    server: String,
    deadline: Deadline,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply")
            .field("status", &self.status)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Reply {
    /// Who answered, as errors name it: "host:port", or "SMS provider at
    /// host:port" for a [named](Request::named) request.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Whether the body is `text/event-stream`.
    pub fn is_event_stream(&self) -> bool {
        self.headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"))
    }

    /// The next piece of the body, `None` at its end.
    ///
    /// # Errors
    ///
    /// [`Error::CutOff`] when the body ends early, [`Error::TimedOut`] at
    /// [`Step::Body`] when the request's deadline passes.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        loop {
            let Self {
                body,
                conn,
                server,
                deadline,
                ..
            } = self;
            let next = poll_fn(|cx| {
                if let Some(conn) = conn.as_mut() {
                    conn.drive(cx);
                }
                Pin::new(&mut *body).poll_frame(cx)
            });
            match deadline.within(Step::Body, server, next).await? {
                None => {
                    self.release();
                    return Ok(None);
                }
                Some(Err(e)) => {
                    self.conn = None;
                    return Err(Error::CutOff {
                        server: self.server.clone(),
                        detail: error_chain(&e),
                    });
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
    /// at `cap` (for bodies that are only quoted, such as errors).
    ///
    /// # Errors
    ///
    /// As [`Reply::chunk`], and [`Error::TooLarge`] past `cap` unless
    /// `truncate`.
    pub async fn body(&mut self, cap: usize, truncate: bool) -> Result<Vec<u8>, Error> {
        let mut bytes = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            if bytes.len() + chunk.len() > cap {
                if truncate {
                    bytes.extend_from_slice(&chunk[..cap - bytes.len()]);
                    break;
                }
                return Err(Error::TooLarge {
                    server: self.server.clone(),
                    cap,
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    /// The body has been read to its end: the connection can be reused.
    fn release(&mut self) {
        if let Some(conn) = self.conn.take()
            && let Some(pool) = &self.pool
        {
            pool.put(conn);
        }
    }
}
