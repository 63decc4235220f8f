//! The worker: serves [`ProxyOperationManager`]s over TCP or a Unix socket
//! and runs their operations on a [`LocalOperationManager`].
//!
//! [`ProxyOperationManager`]: super::ProxyOperationManager

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::io;
use std::os::unix::fs::FileTypeExt as _;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hane_core::{Ledger, Operation, OperationId, Outcome, operation::OperationKind};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::mpsc;

use super::protocol::{
    ClientMessage, FrameReader, FrameWriter, ProtocolError, WorkerMessage, WorkerSecret,
    decode_ledger, worker_handshake,
};
use super::{Ending, LocalOperationManager, OperationManager, Update, component_digest, lock};

/// Where a worker listens and its clients connect: `tcp://HOST:PORT` (or
/// just `HOST:PORT`) or `unix:PATH`.
///
/// # Examples
///
/// ```
/// use hane_manager::WorkerAddr;
///
/// let tcp: WorkerAddr = "127.0.0.1:7000".parse().unwrap();
/// assert_eq!(tcp.to_string(), "tcp://127.0.0.1:7000");
/// let unix: WorkerAddr = "unix:/run/hane/worker.sock".parse().unwrap();
/// assert_eq!(unix.to_string(), "unix:/run/hane/worker.sock");
/// assert!("http://example.com".parse::<WorkerAddr>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WorkerAddr {
    /// A TCP address.
    Tcp {
        /// A host name, an IPv4 address, or an IPv6 address in brackets.
        host: String,
        /// The port; 0 when binding picks a free one.
        port: u16,
    },
    /// A Unix socket's path.
    Unix(PathBuf),
}

/// A worker address that did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid worker address `{text}`: {reason}")]
pub struct AddrError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl FromStr for WorkerAddr {
    type Err = AddrError;

    fn from_str(s: &str) -> Result<Self, AddrError> {
        let err = |reason: &str| AddrError {
            text: s.to_owned(),
            reason: reason.to_owned(),
        };
        if let Some(path) = s.strip_prefix("unix:") {
            // `unix:///run/x.sock` is the URL spelling of `unix:/run/x.sock`.
            let path = path
                .strip_prefix("//")
                .filter(|p| p.starts_with('/'))
                .unwrap_or(path);
            if path.is_empty() {
                return Err(err("the socket path is empty; expected unix:/PATH"));
            }
            return Ok(WorkerAddr::Unix(PathBuf::from(path)));
        }
        let rest = s.strip_prefix("tcp://").unwrap_or(s);
        if let Some((scheme, _)) = rest.split_once("://") {
            return Err(err(&format!(
                "unknown scheme `{scheme}`; expected tcp://HOST:PORT, HOST:PORT or unix:/PATH"
            )));
        }
        let Some((host, port)) = rest.rsplit_once(':') else {
            return Err(err(
                "no port; expected tcp://HOST:PORT, HOST:PORT or unix:/PATH",
            ));
        };
        if host.is_empty() {
            return Err(err("the host is empty"));
        }
        if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
            return Err(err("an IPv6 host goes in brackets, such as [::1]:7000"));
        }
        let port = port
            .parse()
            .map_err(|_| err(&format!("`{port}` is not a port number (0 to 65535)")))?;
        Ok(WorkerAddr::Tcp {
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Display for WorkerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerAddr::Tcp { host, port } => write!(f, "tcp://{host}:{port}"),
            WorkerAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

pub(crate) type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
pub(crate) type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

fn tcp_halves(stream: TcpStream) -> io::Result<(BoxRead, BoxWrite)> {
    // Frames are flushed whole; waiting to coalesce them only adds latency.
    stream.set_nodelay(true)?;
    let (read, write) = stream.into_split();
    Ok((Box::new(read), Box::new(write)))
}

fn unix_halves(stream: UnixStream) -> (BoxRead, BoxWrite) {
    let (read, write) = stream.into_split();
    (Box::new(read), Box::new(write))
}

impl WorkerAddr {
    /// Opens a connection to the worker at this address.
    pub(crate) async fn connect(&self) -> io::Result<(BoxRead, BoxWrite)> {
        match self {
            WorkerAddr::Tcp { host, port } => {
                tcp_halves(TcpStream::connect(format!("{host}:{port}")).await?)
            }
            WorkerAddr::Unix(path) => Ok(unix_halves(UnixStream::connect(path).await?)),
        }
    }
}

/// A bound worker address, ready to accept clients.
#[derive(Debug)]
pub struct WorkerListener {
    socket: Socket,
    addr: WorkerAddr,
}

#[derive(Debug)]
enum Socket {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl WorkerListener {
    /// Binds `addr`. A Unix socket file left behind by a worker that died
    /// is replaced; one a live worker listens on is not.
    ///
    /// # Errors
    ///
    /// The address cannot be bound: it is in use, not permitted, or its
    /// host does not resolve.
    pub async fn bind(addr: &WorkerAddr) -> io::Result<Self> {
        match addr {
            WorkerAddr::Tcp { host, port } => {
                let listener = TcpListener::bind(format!("{host}:{port}")).await?;
                let local = listener.local_addr()?;
                Ok(Self {
                    addr: WorkerAddr::Tcp {
                        host: match local {
                            std::net::SocketAddr::V4(a) => a.ip().to_string(),
                            std::net::SocketAddr::V6(a) => format!("[{}]", a.ip()),
                        },
                        port: local.port(),
                    },
                    socket: Socket::Tcp(listener),
                })
            }
            WorkerAddr::Unix(path) => {
                let listener = match UnixListener::bind(path) {
                    Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                        let is_socket = std::fs::symlink_metadata(path)
                            .is_ok_and(|m| m.file_type().is_socket());
                        if !is_socket || UnixStream::connect(path).await.is_ok() {
                            return Err(e);
                        }
                        std::fs::remove_file(path)?;
                        UnixListener::bind(path)?
                    }
                    bound => bound?,
                };
                Ok(Self {
                    socket: Socket::Unix(listener),
                    addr: addr.clone(),
                })
            }
        }
    }

    /// The address bound, with the port chosen when 0 was asked for.
    pub fn local_addr(&self) -> &WorkerAddr {
        &self.addr
    }

    /// The next client's connection, and who it is for the log.
    async fn accept(&self) -> io::Result<(BoxRead, BoxWrite, String)> {
        match &self.socket {
            Socket::Tcp(listener) => {
                let (stream, peer) = listener.accept().await?;
                let (read, write) = tcp_halves(stream)?;
                Ok((read, write, peer.to_string()))
            }
            Socket::Unix(listener) => {
                let (read, write) = unix_halves(listener.accept().await?.0);
                Ok((read, write, self.addr.to_string()))
            }
        }
    }
}

impl Drop for WorkerListener {
    fn drop(&mut self) {
        if let WorkerAddr::Unix(path) = &self.addr {
            // The socket file is useless once nobody listens on it.
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Serves clients that hold the shared secret, running their operations
/// on one [`LocalOperationManager`]: its concurrency bound holds across
/// all connections.
///
/// # Examples
///
/// ```no_run
/// use hane_manager::{
///     Components, LocalConfig, LocalOperationManager, Worker, WorkerListener, WorkerSecret,
/// };
/// use hane_sandbox::{Sandbox, SandboxConfig};
///
/// # async fn run() -> anyhow::Result<()> {
/// let manager = LocalOperationManager::new(
///     Sandbox::new(&SandboxConfig::new())?,
///     Components::with_builtins(hane_builtins::all()),
///     &LocalConfig::new(),
/// );
/// let listener = WorkerListener::bind(&"unix:/run/hane/worker.sock".parse()?).await?;
/// Worker::new(manager, WorkerSecret::new(b"shared secret")?)
///     .serve(listener)
///     .await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Worker {
    manager: LocalOperationManager,
    secret: WorkerSecret,
    max_unauthenticated: usize,
    /// The ledgers clients sent, shared by every connection.
    ledgers: KeptLedgers,
}

/// Ledgers by digest, newest last.
type KeptLedgers = Arc<Mutex<VecDeque<(String, Arc<Ledger>)>>>;

/// How many ledgers a worker keeps from its clients (each coordinator's
/// active release has one): an operation naming another is preceded by a
/// request for it.
pub const WORKER_LEDGERS_KEPT: usize = 8;

/// Pause after a failed `accept` (such as too many open files), so the
/// loop does not spin while the condition lasts.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Connections whose handshake is not over, at most, unless
/// [`Worker::max_unauthenticated`] says otherwise.
pub const DEFAULT_MAX_UNAUTHENTICATED: usize = 64;

/// What a handshake sends: one `Hello` frame.
const HANDSHAKE_WRITE_BUFFER: usize = 256;

impl Worker {
    /// A worker running operations on `manager` for clients holding
    /// `secret`.
    pub fn new(manager: LocalOperationManager, secret: WorkerSecret) -> Self {
        Self {
            manager,
            secret,
            max_unauthenticated: DEFAULT_MAX_UNAUTHENTICATED,
            ledgers: Arc::default(),
        }
    }

    /// Serves at most `max` connections (at least one) whose handshake is
    /// not over, and a quarter of them (at least one) from one address.
    /// One more closes the oldest of its address's, or when all places
    /// are taken, the oldest of the address holding the most, and is
    /// logged. So a flood of silent connections from one address churns
    /// through that address's places, and a client from elsewhere is
    /// admitted at once and keeps its place while it proves, within
    /// [`crate::protocol::HANDSHAKE_TIMEOUT`], that it holds the secret.
    #[must_use]
    pub fn max_unauthenticated(mut self, max: usize) -> Self {
        self.max_unauthenticated = max.max(1);
        self
    }

    /// Accepts clients on `listener` until the returned future is dropped.
    /// Each connection is served by its own task; when a client goes away,
    /// its operations are cancelled.
    pub async fn serve(&self, listener: WorkerListener) {
        let handshaking = Arc::new(Mutex::new(Handshaking::default()));
        let max = self.max_unauthenticated;
        let per_address = (max / 4).max(1);
        let mut refused = Refused::default();
        loop {
            match listener.accept().await {
                Ok((read, write, peer)) => {
                    let address = peer.parse::<std::net::SocketAddr>().ok().map(|a| a.ip());
                    let (place, closed) = lock(&handshaking).admit(address, max, per_address);
                    if closed {
                        refused.note(&peer, max, per_address);
                    }
                    let place = Place {
                        handshaking: handshaking.clone(),
                        id: place.0,
                        give_up: place.1,
                    };
                    tokio::spawn(self.clone().connection(read, write, peer, place));
                }
                Err(e) => {
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            }
        }
    }

    async fn connection(self, read: BoxRead, write: BoxWrite, peer: String, place: Place) {
        let mut reader = FrameReader::new(read);
        let mut writer = FrameWriter::with_capacity(HANDSHAKE_WRITE_BUFFER, write);
        let handshake = tokio::select! {
            handshake = worker_handshake(&mut reader, &mut writer, &self.secret) => handshake,
            // Its place went to a newer connection (see `Handshaking`).
            () = place.give_up.notified() => return,
        };
        drop(place);
        match handshake {
            Ok(()) => {}
            // A connection closed before a word (a port probe) is no
            // refusal.
            Err(ProtocolError::Closed) => return,
            Err(e) => {
                tracing::warn!(peer = %peer, "refused a client: {e}");
                return;
            }
        }
        let writer = FrameWriter::new(writer.into_inner());
        let (out, outbox) = mpsc::unbounded_channel();
        tokio::spawn(write_frames(writer, outbox));
        let mut client = Client {
            manager: self.manager,
            out,
            in_flight: Arc::default(),
            awaiting: HashMap::new(),
            ledgers: self.ledgers,
            awaiting_ledger: HashMap::new(),
        };
        while let Ok(message) = reader.next::<ClientMessage>().await {
            if !client.handle(message).await {
                break;
            }
        }
        // Nobody is left to receive the results.
        let in_flight: Vec<_> = lock(&client.in_flight).iter().cloned().collect();
        for id in in_flight {
            client.manager.cancel(&id);
        }
    }
}

/// The connections whose handshake is not over, oldest first: an id, the
/// peer's address (none for a Unix socket) and what tells it to give up
/// its place.
#[derive(Default)]
struct Handshaking {
    next: u64,
    waiting: VecDeque<(u64, Option<std::net::IpAddr>, Arc<tokio::sync::Notify>)>,
}

impl Handshaking {
    /// A place for a connection from `address`, made, when `address` holds
    /// `per_address` places already or all `max` are taken, by closing the
    /// oldest of that address's or of the address holding the most;
    /// whether one was closed.
    fn admit(
        &mut self,
        address: Option<std::net::IpAddr>,
        max: usize,
        per_address: usize,
    ) -> ((u64, Arc<tokio::sync::Notify>), bool) {
        let held =
            |by: Option<std::net::IpAddr>| self.waiting.iter().filter(|(_, a, _)| *a == by).count();
        let from = if address.is_some() && held(address) >= per_address {
            Some(address)
        } else if self.waiting.len() >= max {
            self.waiting
                .iter()
                .map(|(_, a, _)| *a)
                .max_by_key(|a| held(*a))
        } else {
            None
        };
        let closed = from
            .and_then(|from| self.waiting.iter().position(|(_, a, _)| *a == from))
            .and_then(|oldest| self.waiting.remove(oldest))
            .map(|(_, _, give_up)| give_up.notify_one())
            .is_some();
        let id = self.next;
        self.next += 1;
        let give_up = Arc::new(tokio::sync::Notify::new());
        self.waiting.push_back((id, address, give_up.clone()));
        ((id, give_up), closed)
    }

    fn done(&mut self, id: u64) {
        if let Some(at) = self.waiting.iter().position(|(i, _, _)| *i == id) {
            self.waiting.remove(at);
        }
    }
}

/// A connection's place among those handshaking, given back when dropped.
struct Place {
    handshaking: Arc<Mutex<Handshaking>>,
    id: u64,
    give_up: Arc<tokio::sync::Notify>,
}

impl Drop for Place {
    fn drop(&mut self) {
        lock(&self.handshaking).done(self.id);
    }
}

/// Connections closed over the cap, logged at most once a second with how
/// many there were, so a flood of connections cannot flood the log.
#[derive(Default)]
struct Refused {
    since_logged: u64,
    last_logged: Option<std::time::Instant>,
}

impl Refused {
    fn note(&mut self, peer: &str, max: usize, per_address: usize) {
        self.since_logged += 1;
        if self
            .last_logged
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            tracing::warn!(
                peer = %peer,
                "closed {} connection(s), the oldest of their address first, since the last report: {max} connections have not finished their handshake, the most allowed, and at most {per_address} from one address",
                self.since_logged
            );
            self.since_logged = 0;
            self.last_logged = Some(std::time::Instant::now());
        }
    }
}

/// Sends what a connection's operations report, flushing once per burst.
async fn write_frames(
    mut writer: FrameWriter<BoxWrite>,
    mut outbox: mpsc::UnboundedReceiver<WorkerMessage>,
) {
    while let Some(message) = outbox.recv().await {
        if writer.send(&message).await.is_err() {
            return;
        }
        while let Ok(message) = outbox.try_recv() {
            if writer.send(&message).await.is_err() {
                return;
            }
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
}

/// One authenticated client's state.
struct Client {
    manager: LocalOperationManager,
    out: mpsc::UnboundedSender<WorkerMessage>,
    /// This client's operations submitted to the manager and not finished.
    in_flight: Arc<Mutex<HashSet<OperationId>>>,
    /// Operations waiting for the client to send their component, by
    /// digest, with the ledger each reads.
    awaiting: HashMap<String, Vec<(Operation, Arc<Ledger>)>>,
    /// The ledgers clients sent ([`Worker`]'s).
    ledgers: KeptLedgers,
    /// Operations waiting for the client to send their ledger, by digest.
    awaiting_ledger: HashMap<String, Vec<Operation>>,
}

impl Client {
    /// Handles one message; `false` ends the connection.
    async fn handle(&mut self, message: ClientMessage) -> bool {
        match message {
            ClientMessage::Run {
                id,
                operation,
                ledger,
            } => self.run(id, &operation, ledger),
            ClientMessage::Cancel { id } => self.cancel(&id),
            ClientMessage::Component { digest, bytes } => self.component(digest, bytes).await,
            ClientMessage::Ledger { digest, bytes } => self.ledger(digest, bytes).await,
            ClientMessage::NoLedger { digest } => {
                for operation in self.awaiting_ledger.remove(&digest).unwrap_or_default() {
                    self.finish(
                        operation.id,
                        Ending::failed(
                            Outcome::HostError,
                            format!("ledger {digest} is available neither on the worker nor on the client"),
                        ),
                    );
                }
            }
            ClientMessage::NoComponent { digest } => {
                for (operation, _) in self.awaiting.remove(&digest).unwrap_or_default() {
                    self.finish(
                        operation.id,
                        Ending::failed(Outcome::HostError, format!(
                            "component {digest} is available neither on the worker nor on the client"
                        )),
                    );
                }
            }
            // The handshake is over; a second one is a broken client.
            ClientMessage::Auth { .. } => return false,
        }
        true
    }

    fn run(&mut self, id: OperationId, sealed: &[u8], ledger: Option<String>) {
        let operation = match hane_stored::open::<Operation>(sealed) {
            Ok(operation) if operation.id == id => operation,
            Ok(operation) => {
                let message = format!("the operation sent as {id} has the id {}", operation.id);
                return self.finish(id, Ending::failed(Outcome::HostError, message));
            }
            Err(e) => {
                return self.finish(
                    id,
                    Ending::failed(
                        Outcome::HostError,
                        format!("the worker cannot read the operation: {e}"),
                    ),
                );
            }
        };
        let Some(digest) = ledger else {
            return self.with_ledger(operation, Arc::default());
        };
        let kept = lock(&self.ledgers)
            .iter()
            .find(|(d, _)| *d == digest)
            .map(|(_, ledger)| ledger.clone());
        if let Some(ledger) = kept {
            return self.with_ledger(operation, ledger);
        }
        let waiting = self.awaiting_ledger.entry(digest.clone()).or_default();
        if waiting.is_empty() {
            let _ = self.out.send(WorkerMessage::NeedLedger { digest });
        }
        waiting.push(operation);
    }

    /// Runs `operation`, which reads `ledger`, once its component is here.
    fn with_ledger(&mut self, operation: Operation, ledger: Arc<Ledger>) {
        let digest = match &operation.kind {
            OperationKind::Wasm(call) => &call.component,
            // Not the worker's to judge; the manager refuses what it cannot run.
            _ => return self.start(operation, ledger),
        };
        if self.manager.components().contains(digest) {
            return self.start(operation, ledger);
        }
        let waiting = self.awaiting.entry(digest.clone()).or_default();
        if waiting.is_empty() {
            let _ = self.out.send(WorkerMessage::NeedComponent {
                digest: digest.clone(),
            });
        }
        waiting.push((operation, ledger));
    }

    async fn ledger(&mut self, digest: String, bytes: Bytes) {
        // Only ledgers this worker asked for are kept.
        let Some(waiting) = self.awaiting_ledger.remove(&digest) else {
            return;
        };
        let checked = digest.clone();
        let decoded = tokio::task::spawn_blocking(move || decode_ledger(&checked, &bytes)).await;
        let ledger = match decoded {
            Ok(Ok(ledger)) => Arc::new(ledger),
            Ok(Err(e)) => return self.without_ledger(waiting, &e),
            Err(e) => return self.without_ledger(waiting, &e),
        };
        {
            let mut kept = lock(&self.ledgers);
            kept.retain(|(d, _)| *d != digest);
            kept.push_back((digest, ledger.clone()));
            while kept.len() > WORKER_LEDGERS_KEPT {
                kept.pop_front();
            }
        }
        for operation in waiting {
            self.with_ledger(operation, ledger.clone());
        }
    }

    /// Fails the operations `waiting` for a ledger that could not be had.
    fn without_ledger(&self, waiting: Vec<Operation>, why: &dyn fmt::Display) {
        let message = why.to_string();
        for operation in waiting {
            self.finish(
                operation.id,
                Ending::failed(Outcome::HostError, message.clone()),
            );
        }
    }

    fn cancel(&mut self, id: &OperationId) {
        for waiting in self.awaiting_ledger.values_mut() {
            if let Some(i) = waiting.iter().position(|op| op.id == *id) {
                let operation = waiting.remove(i);
                return self.finish(
                    operation.id,
                    Ending::failed(Outcome::Cancelled, "cancelled before it started"),
                );
            }
        }
        for waiting in self.awaiting.values_mut() {
            if let Some(i) = waiting.iter().position(|(op, _)| op.id == *id) {
                let (operation, _) = waiting.remove(i);
                return self.finish(
                    operation.id,
                    Ending::failed(Outcome::Cancelled, "cancelled before it started"),
                );
            }
        }
        // Only this client's own operations.
        if lock(&self.in_flight).contains(id) {
            self.manager.cancel(id);
        }
    }

    async fn component(&mut self, digest: String, bytes: Bytes) {
        // Only components this worker asked for are kept.
        let Some(waiting) = self.awaiting.remove(&digest) else {
            return;
        };
        // Hashing tens of MiB takes tens of milliseconds.
        let hashed = bytes.clone();
        let actual = tokio::task::spawn_blocking(move || component_digest(&hashed))
            .await
            .unwrap_or_default();
        if actual != digest {
            for (operation, _) in waiting {
                self.finish(
                    operation.id,
                    Ending::failed(
                        Outcome::HostError,
                        format!("the component sent for {digest} has the digest {actual}"),
                    ),
                );
            }
            return;
        }
        self.manager.components().insert(bytes);
        for (operation, ledger) in waiting {
            self.start(operation, ledger);
        }
    }

    fn start(&self, operation: Operation, ledger: Arc<Ledger>) {
        let id = operation.id.clone();
        lock(&self.in_flight).insert(id.clone());
        let mut ticket = self.manager.submit_reading(operation, ledger);
        let out = self.out.clone();
        let in_flight = self.in_flight.clone();
        tokio::spawn(async move {
            while let Some(update) = ticket.next().await {
                match update {
                    Update::Started => {
                        let _ = out.send(WorkerMessage::Started { id: id.clone() });
                    }
                    Update::Finished(ending) => {
                        lock(&in_flight).remove(&id);
                        let _ = out.send(WorkerMessage::Finished { id, ending });
                        return;
                    }
                }
            }
        });
    }

    fn finish(&self, id: OperationId, ending: Ending) {
        // A closed outbox means the connection is gone.
        let _ = self.out.send(WorkerMessage::Finished { id, ending });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_in_every_spelling_and_say_what_is_wrong() {
        let tcp = |host: &str, port| WorkerAddr::Tcp {
            host: host.into(),
            port,
        };
        assert_eq!("tcp://localhost:7070".parse(), Ok(tcp("localhost", 7070)));
        assert_eq!("0.0.0.0:0".parse(), Ok(tcp("0.0.0.0", 0)));
        assert_eq!("[::1]:7070".parse(), Ok(tcp("[::1]", 7070)));
        let unix = WorkerAddr::Unix("/run/w.sock".into());
        assert_eq!("unix:/run/w.sock".parse(), Ok(unix.clone()));
        assert_eq!("unix:///run/w.sock".parse(), Ok(unix));
        for (text, reason) in [
            (
                "localhost",
                "no port; expected tcp://HOST:PORT, HOST:PORT or unix:/PATH",
            ),
            ("tcp://:80", "the host is empty"),
            (
                "::1:80",
                "an IPv6 host goes in brackets, such as [::1]:7000",
            ),
            ("localhost:http", "`http` is not a port number (0 to 65535)"),
            (
                "localhost:70000",
                "`70000` is not a port number (0 to 65535)",
            ),
            ("unix:", "the socket path is empty; expected unix:/PATH"),
            (
                "https://example.com:443",
                "unknown scheme `https`; expected tcp://HOST:PORT, HOST:PORT or unix:/PATH",
            ),
        ] {
            let err = text.parse::<WorkerAddr>().unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid worker address `{text}`: {reason}")
            );
        }
    }
}
