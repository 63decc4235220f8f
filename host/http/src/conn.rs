//! Connections: opened (TCP, then TLS for `https`), kept idle in a
//! [`Pool`], and driven by the task that uses them.
//!
//! A connection is never given a task of its own: a call reads its answer
//! without waking another thread (on a VM each such wake-up costs tens of
//! microseconds), and dropping the call drops the connection, which ends
//! the request upstream.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig};

use crate::error::{Error, Step, error_chain};
use crate::{Deadline, Target};

/// How long an idle connection is kept: below the 5 s after which Node's
/// and uvicorn's servers close one by default, so that a reused connection
/// is rarely one the server is closing.
pub const IDLE_FOR: Duration = Duration::from_secs(4);
/// How many idle connections a pool keeps.
const MAX_IDLE: usize = 16;

/// A connection's byte stream: TCP, or TLS over TCP.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// hyper's side of one connection: its I/O, moved on by whoever polls it.
type Driven = Connection<TokioIo<Box<dyn Io>>, Full<Bytes>>;

/// Where a connection goes: scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub https: bool,
    pub host: String,
    pub port: u16,
}

/// One HTTP/1.1 connection: the request side and the I/O that the user of
/// the connection drives.
pub(crate) struct Conn {
    origin: Origin,
    sender: SendRequest<Full<Bytes>>,
    connection: Pin<Box<Driven>>,
    /// The connection's I/O ended (closed, failed, or not to be kept alive).
    ended: bool,
}

impl Conn {
    /// Moves the connection's I/O on; whether it has ended.
    pub(crate) fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.ended && self.connection.as_mut().poll(cx).is_ready() {
            self.ended = true;
        }
        self.ended
    }

    /// Whether a request can be sent now, driving the connection; an error
    /// once it has closed.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        // A connection whose I/O has ended may still take a request into
        // hyper's queue, where nothing would ever send it.
        if self.drive(cx) {
            return Poll::Ready(Err("the connection closed".into()));
        }
        match self.sender.poll_ready(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(error_chain(&e))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Idle connections, by origin.
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
    /// An idle connection to `origin` that can take a request, if there is
    /// one.
    pub(crate) async fn take(&self, origin: &Origin) -> Option<Conn> {
        loop {
            let mut conn = {
                let mut idle = self.idle.lock().ok()?;
                idle.retain(|(since, _)| since.elapsed() < IDLE_FOR);
                let at = idle.iter().rposition(|(_, conn)| conn.origin == *origin)?;
                idle.remove(at).1
            };
            // One poll: an idle connection is ready at once, or closed.
            let usable =
                poll_fn(|cx| Poll::Ready(matches!(conn.poll_ready(cx), Poll::Ready(Ok(()))))).await;
            if usable {
                return Some(conn);
            }
        }
    }

    pub(crate) fn put(&self, conn: Conn) {
        if conn.ended {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            idle.retain(|(since, _)| since.elapsed() < IDLE_FOR);
            if idle.len() >= MAX_IDLE {
                idle.remove(0);
            }
            idle.push((Instant::now(), conn));
        }
    }
}

/// A new connection to `target`, with HTTP/1.1 started on it.
pub(crate) async fn connect(
    target: &Target,
    tls: &Arc<ClientConfig>,
    deadline: Deadline,
) -> Result<Conn, Error> {
    let Origin { https, host, port } = &target.origin;
    let server = || target.server.clone();
    let tcp = deadline
        .within(
            Step::Connect,
            &target.server,
            TcpStream::connect((host.as_str(), *port)),
        )
        .await?
        .map_err(|e| Error::Connect {
            server: server(),
            detail: error_chain(&e),
        })?;
    // Requests are small; don't let Nagle hold back their last segment.
    let _ = tcp.set_nodelay(true);
    let io: Box<dyn Io> = if *https {
        let name = ServerName::try_from(host.clone()).map_err(|_| Error::Request {
            server: server(),
            problem: format!("names {host:?}, which is not a name a TLS certificate can carry"),
        })?;
        let handshake = TlsConnector::from(Arc::clone(tls)).connect(name, tcp);
        let stream = deadline
            .within(Step::Tls, &target.server, handshake)
            .await?
            .map_err(|e| handshake_error(server(), &e))?;
        Box::new(stream)
    } else {
        Box::new(tcp)
    };
    // hyper's handshake only sets the connection up; nothing is read or
    // written yet.
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| Error::NotSent {
            server: server(),
            detail: format!("could not start HTTP/1.1: {}", error_chain(&e)),
        })?;
    Ok(Conn {
        origin: target.origin.clone(),
        sender,
        connection: Box::pin(connection),
        ended: false,
    })
}

/// A failed TLS handshake: [`Error::Untrusted`] when the server's
/// certificate chains to no trusted root, else [`Error::Tls`].
fn handshake_error(server: String, error: &std::io::Error) -> Error {
    let detail = error_chain(error);
    let rustls = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match rustls {
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)) => {
            Error::Untrusted { server, detail }
        }
        _ => Error::Tls { server, detail },
    }
}

/// Why an exchange failed, with the request back when it never left.
pub(crate) struct Failure {
    pub error: Error,
    pub unsent: Option<http::Request<Full<Bytes>>>,
}

/// Sends `request` on `conn`, driving the connection until the answer's
/// head has arrived.
pub(crate) async fn exchange(
    conn: &mut Conn,
    request: http::Request<Full<Bytes>>,
    target: &Target,
    deadline: Deadline,
) -> Result<hyper::Response<Incoming>, Failure> {
    let ready = deadline
        .within(
            Step::Ready,
            &target.server,
            poll_fn(|cx| conn.poll_ready(cx)),
        )
        .await;
    match ready {
        Err(error) => {
            return Err(Failure {
                error,
                unsent: Some(request),
            });
        }
        Ok(Err(detail)) => {
            return Err(Failure {
                error: Error::NotSent {
                    server: target.server.clone(),
                    detail,
                },
                unsent: Some(request),
            });
        }
        Ok(Ok(())) => {}
    }
    let Conn {
        sender,
        connection,
        ended,
        ..
    } = conn;
    let mut response = std::pin::pin!(sender.try_send_request(request));
    let answer = poll_fn(|cx| {
        if !*ended && connection.as_mut().poll(cx).is_ready() {
            *ended = true;
        }
        response.as_mut().poll(cx)
    });
    // From here on bytes may be on the wire: only hyper handing the
    // request back proves it never left.
    match deadline.within(Step::Answer, &target.server, answer).await {
        Err(error) => Err(Failure {
            error,
            unsent: None,
        }),
        Ok(Ok(response)) => Ok(response),
        Ok(Err(mut e)) => {
            let unsent = e.take_message();
            let server = target.server.clone();
            let detail = error_chain(e.error());
            let error = if unsent.is_some() {
                Error::NotSent { server, detail }
            } else {
                Error::Unanswered { server, detail }
            };
            Err(Failure { error, unsent })
        }
    }
}
