//! [`ProxyOperationManager`]: runs operations on a `hane worker` in
//! another process.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hane_core::{Ledger, Operation, OperationId, Outcome};
use tokio::sync::mpsc;

use super::protocol::{
    ClientMessage, FrameReader, FrameWriter, HANDSHAKE_TIMEOUT, ProtocolError, WorkerMessage,
    WorkerSecret, client_handshake, encode_ledger,
};
use super::worker::{BoxRead, BoxWrite};
use super::{Components, Ending, OperationManager, Ticket, TicketSender, WorkerAddr, lock};

/// Settings of a [`ProxyOperationManager`]. Each method documents its
/// default.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    reconnect_delay: Duration,
    max_reconnect_delay: Duration,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            reconnect_delay: Duration::from_millis(50),
            max_reconnect_delay: Duration::from_secs(2),
        }
    }
}

impl ProxyConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The wait before the first attempt to reconnect after the connection
    /// is lost; it doubles after each failed attempt. Default: 50 ms.
    pub fn reconnect_delay(&mut self, delay: Duration) -> &mut Self {
        self.reconnect_delay = delay;
        self
    }

    /// The longest wait between two attempts to reconnect, and so the
    /// longest a restarted worker waits for its client. Default: 2 s.
    pub fn max_reconnect_delay(&mut self, delay: Duration) -> &mut Self {
        self.max_reconnect_delay = delay;
        self
    }
}

/// The first connection to a worker failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to worker {addr}: {source}")]
pub struct ConnectError {
    /// The worker's address.
    pub addr: WorkerAddr,
    /// What went wrong: the worker is unreachable, refused this client
    /// (another secret or protocol version), or broke the protocol.
    pub source: ProtocolError,
}

/// Runs operations on a `hane worker` reached over TCP or a Unix socket,
/// streaming their progress back to the tickets.
///
/// One task owns the connection. When the connection is lost, operations
/// already sent to the worker end as [`Ending::Lost`]: whether they ran is
/// unknown (the worker may have started one and died before saying so),
/// and only the caller can tell whether running one again is safe, so they
/// are never sent again. Operations not yet sent go out once the task has
/// reconnected; it tries again with growing
/// pauses ([`ProxyConfig`]) until the worker is back. When the worker
/// refuses the client on a reconnect (another secret or protocol version),
/// the operations waiting fail with outcome `host_error` and the reason.
///
/// Components travel on demand: the worker asks for a digest it does not
/// hold and the proxy sends it from its [`Components`]. So does the ledger
/// ([`OperationManager::set_ledger`]): each operation names the one that
/// was set when it was submitted, and the proxy keeps the last
/// [`LEDGERS_KEPT`] it was given to answer for them.
///
/// # Examples
///
/// ```no_run
/// use hane_manager::{Components, OperationManager, ProxyOperationManager, WorkerSecret};
///
/// # async fn run(operation: hane_core::Operation) -> anyhow::Result<()> {
/// let manager = ProxyOperationManager::connect(
///     "unix:/run/hane/worker.sock".parse()?,
///     WorkerSecret::from_file("/etc/hane/worker-secret".as_ref())?,
///     Components::with_builtins(hane_builtins::all()),
/// )
/// .await?;
/// let ending = manager.submit(operation).ending().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ProxyOperationManager {
    commands: mpsc::UnboundedSender<Command>,
    ledgers: Arc<Mutex<Ledgers>>,
}

/// How many ledgers a proxy keeps to send: the one operations read now
/// and those before it, for operations submitted before it was set.
pub const LEDGERS_KEPT: usize = 4;

/// The ledgers a proxy was given, newest last, encoded for the wire.
#[derive(Debug, Default)]
struct Ledgers {
    kept: VecDeque<(String, Bytes)>,
}

impl Ledgers {
    fn current(&self) -> Option<String> {
        self.kept.back().map(|(digest, _)| digest.clone())
    }

    fn get(&self, digest: &str) -> Option<Bytes> {
        self.kept
            .iter()
            .find(|(d, _)| d == digest)
            .map(|(_, bytes)| bytes.clone())
    }

    fn set(&mut self, digest: String, bytes: Bytes) {
        self.kept.retain(|(d, _)| *d != digest);
        self.kept.push_back((digest, bytes));
        while self.kept.len() > LEDGERS_KEPT {
            self.kept.pop_front();
        }
    }
}

#[derive(Debug)]
enum Command {
    Submit {
        id: OperationId,
        sealed: Bytes,
        ledger: Option<String>,
        ticket: TicketSender,
    },
    Cancel(OperationId),
}

impl ProxyOperationManager {
    /// Connects to the worker at `addr` with the default [`ProxyConfig`].
    ///
    /// # Errors
    ///
    /// See [`ProxyOperationManager::connect_with`].
    pub async fn connect(
        addr: WorkerAddr,
        secret: WorkerSecret,
        components: Components,
    ) -> Result<Self, ConnectError> {
        Self::connect_with(addr, secret, components, &ProxyConfig::new()).await
    }

    /// Connects to the worker at `addr` and authenticates with `secret`;
    /// the connection is then owned by a task on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// The worker cannot be reached, refuses this client (another secret
    /// or protocol version) or does not finish the handshake within
    /// [`HANDSHAKE_TIMEOUT`].
    pub async fn connect_with(
        addr: WorkerAddr,
        secret: WorkerSecret,
        components: Components,
        config: &ProxyConfig,
    ) -> Result<Self, ConnectError> {
        let link = match open(&addr, &secret).await {
            Ok(link) => link,
            Err(source) => return Err(ConnectError { addr, source }),
        };
        let (commands, inbox) = mpsc::unbounded_channel();
        let ledgers = Arc::new(Mutex::new(Ledgers::default()));
        let connection = Connection {
            addr,
            secret,
            components,
            ledgers: ledgers.clone(),
            config: config.clone(),
            inbox,
            inbox_open: true,
            flights: HashMap::new(),
            next_seq: 0,
        };
        tokio::spawn(connection.run(link));
        Ok(Self { commands, ledgers })
    }
}

impl OperationManager for ProxyOperationManager {
    fn submit(&self, operation: Operation) -> Ticket {
        let (ticket, sender) = Ticket::new(operation.id.clone());
        let command = Command::Submit {
            id: operation.id.clone(),
            sealed: Bytes::from(hane_stored::seal(&operation)),
            ledger: lock(&self.ledgers).current(),
            ticket: sender,
        };
        if let Err(mpsc::error::SendError(Command::Submit { ticket, .. })) =
            self.commands.send(command)
        {
            ticket.finish(Ending::failed(
                Outcome::HostError,
                "the connection task of the proxy operation manager has stopped",
            ));
        }
        ticket
    }

    fn cancel(&self, id: &OperationId) {
        // A stopped task has no operation left to cancel.
        let _ = self.commands.send(Command::Cancel(id.clone()));
    }

    fn set_ledger(&self, ledger: &Arc<Ledger>) {
        let (digest, bytes) = encode_ledger(ledger);
        lock(&self.ledgers).set(digest, bytes);
    }
}

/// An authenticated connection.
struct Link {
    reader: FrameReader<BoxRead>,
    writer: FrameWriter<BoxWrite>,
}

async fn open(addr: &WorkerAddr, secret: &WorkerSecret) -> Result<Link, ProtocolError> {
    let (read, write) = tokio::time::timeout(HANDSHAKE_TIMEOUT, addr.connect())
        .await
        .map_err(|_| ProtocolError::Timeout(HANDSHAKE_TIMEOUT))??;
    let mut link = Link {
        reader: FrameReader::new(read),
        writer: FrameWriter::new(write),
    };
    client_handshake(&mut link.reader, &mut link.writer, secret).await?;
    Ok(link)
}

/// Whether a failed connection attempt is worth repeating as it is: the
/// worker was down or slow, rather than refusing this client.
fn transient(e: &ProtocolError) -> bool {
    matches!(
        e,
        ProtocolError::Io(_)
            | ProtocolError::Closed
            | ProtocolError::Truncated
            | ProtocolError::Timeout(_)
    )
}

/// One submitted operation that has not finished.
struct Flight {
    /// Submission order, kept when operations are sent again.
    seq: u64,
    sealed: Bytes,
    /// The ledger it reads.
    ledger: Option<String>,
    ticket: TicketSender,
    /// Written whole to the current connection: the worker may have run
    /// it.
    sent: bool,
    /// The worker said it started.
    started: bool,
    /// Cancelled while sent; the worker's answer is awaited.
    cancelled: bool,
}

/// The task that owns the connection and the operations in flight.
struct Connection {
    addr: WorkerAddr,
    secret: WorkerSecret,
    components: Components,
    ledgers: Arc<Mutex<Ledgers>>,
    config: ProxyConfig,
    inbox: mpsc::UnboundedReceiver<Command>,
    /// Whether a [`ProxyOperationManager`] is left to send commands.
    inbox_open: bool,
    flights: HashMap<OperationId, Flight>,
    next_seq: u64,
}

impl Connection {
    async fn run(mut self, link: Link) {
        let mut link = Some(link);
        let mut delay = self.config.reconnect_delay;
        loop {
            if let Some(connected) = link.take() {
                delay = self.config.reconnect_delay;
                match self.serve(connected).await {
                    Ok(()) => return,
                    Err(e) => self.lost(&format!(
                        "the connection to worker {} was lost while the operation ran: {e}",
                        self.addr
                    )),
                }
            }
            if !self.inbox_open {
                // Nobody can cancel or add operations any more, and none is
                // running: give up on those waiting to be sent.
                for (_, flight) in self.flights.drain() {
                    flight.ticket.finish(Ending::failed(
                        Outcome::HostError,
                        "the proxy operation manager was dropped while disconnected from its worker",
                    ));
                }
                return;
            }
            self.offline(tokio::time::sleep(delay)).await;
            delay = (delay * 2).min(self.config.max_reconnect_delay);
            match self
                .offline(open(&self.addr.clone(), &self.secret.clone()))
                .await
            {
                Ok(connected) => link = Some(connected),
                Err(e) if transient(&e) => {}
                Err(e) => {
                    let reason = format!("cannot run on worker {}: {e}", self.addr);
                    for (_, flight) in self.flights.drain() {
                        flight
                            .ticket
                            .finish(Ending::failed(Outcome::HostError, reason.clone()));
                    }
                }
            }
        }
    }

    /// Waits for `until` while disconnected, taking commands meanwhile.
    async fn offline<T>(&mut self, until: impl Future<Output = T>) -> T {
        tokio::pin!(until);
        loop {
            tokio::select! {
                value = &mut until => return value,
                command = self.inbox.recv(), if self.inbox_open => match command {
                    Some(Command::Submit { id, sealed, ledger, ticket }) => {
                        self.add(id, sealed, ledger, ticket);
                    }
                    Some(Command::Cancel(id)) => {
                        if let Some(flight) = self.flights.remove(&id) {
                            flight.ticket.finish(cancelled());
                        }
                    }
                    None => self.inbox_open = false,
                },
            }
        }
    }

    /// Tracks a new operation, unless one with its id is in flight.
    fn add(
        &mut self,
        id: OperationId,
        sealed: Bytes,
        ledger: Option<String>,
        ticket: TicketSender,
    ) -> bool {
        if self.flights.contains_key(&id) {
            ticket.finish(Ending::failed(
                Outcome::HostError,
                format!("operation {id} is already in flight"),
            ));
            return false;
        }
        self.next_seq += 1;
        self.flights.insert(
            id,
            Flight {
                seq: self.next_seq,
                sealed,
                ledger,
                ticket,
                sent: false,
                started: false,
                cancelled: false,
            },
        );
        true
    }

    /// Serves one connection until it breaks (`Err`) or nothing is left to
    /// do (`Ok`).
    async fn serve(&mut self, link: Link) -> Result<(), ProtocolError> {
        let Link {
            mut reader,
            mut writer,
        } = link;
        let mut waiting: Vec<_> = self
            .flights
            .iter()
            .map(|(id, flight)| (flight.seq, id.clone()))
            .collect();
        waiting.sort_unstable();
        for (_, id) in waiting {
            self.send_run(&id, &mut writer).await?;
        }
        writer.flush().await?;
        loop {
            if !self.inbox_open && self.flights.is_empty() {
                writer.shutdown().await;
                return Ok(());
            }
            tokio::select! {
                command = self.inbox.recv(), if self.inbox_open => match command {
                    Some(command) => self.command(command, &mut writer).await?,
                    None => self.inbox_open = false,
                },
                message = reader.next::<WorkerMessage>() => {
                    self.message(message?, &mut writer).await?;
                }
            }
            // Everything submitted meanwhile goes out in the same write.
            while let Ok(command) = self.inbox.try_recv() {
                self.command(command, &mut writer).await?;
            }
            writer.flush().await?;
        }
    }

    async fn send_run(
        &mut self,
        id: &OperationId,
        writer: &mut FrameWriter<BoxWrite>,
    ) -> Result<(), ProtocolError> {
        let Some(flight) = self.flights.get_mut(id) else {
            return Ok(());
        };
        let run = ClientMessage::Run {
            id: id.clone(),
            operation: flight.sealed.clone(),
            ledger: flight.ledger.clone(),
        };
        writer.send(&run).await?;
        // Only a frame that reached the socket whole can have been run by
        // the worker; one that failed on the way cannot, and goes out again
        // after reconnecting.
        writer.flush().await?;
        flight.sent = true;
        Ok(())
    }

    async fn command(
        &mut self,
        command: Command,
        writer: &mut FrameWriter<BoxWrite>,
    ) -> Result<(), ProtocolError> {
        match command {
            Command::Submit {
                id,
                sealed,
                ledger,
                ticket,
            } => {
                if self.add(id.clone(), sealed, ledger, ticket) {
                    self.send_run(&id, writer).await?;
                }
            }
            Command::Cancel(id) => {
                if let Some(flight) = self.flights.get_mut(&id) {
                    flight.cancelled = true;
                    writer.send(&ClientMessage::Cancel { id }).await?;
                }
            }
        }
        Ok(())
    }

    async fn message(
        &mut self,
        message: WorkerMessage,
        writer: &mut FrameWriter<BoxWrite>,
    ) -> Result<(), ProtocolError> {
        match message {
            WorkerMessage::Started { id } => {
                if let Some(flight) = self.flights.get_mut(&id) {
                    flight.started = true;
                    flight.ticket.started();
                }
            }
            WorkerMessage::Finished { id, ending } => {
                if let Some(flight) = self.flights.remove(&id) {
                    flight.ticket.finish(ending);
                }
            }
            WorkerMessage::NeedComponent { digest } => {
                let answer = match self.components.get(&digest) {
                    Some(bytes) => ClientMessage::Component { digest, bytes },
                    None => ClientMessage::NoComponent { digest },
                };
                writer.send(&answer).await?;
            }
            WorkerMessage::NeedLedger { digest } => {
                let kept = lock(&self.ledgers).get(&digest);
                let answer = match kept {
                    Some(bytes) => ClientMessage::Ledger { digest, bytes },
                    None => ClientMessage::NoLedger { digest },
                };
                writer.send(&answer).await?;
            }
            WorkerMessage::Hello { .. }
            | WorkerMessage::Welcome
            | WorkerMessage::Refused { .. } => {
                return Err(ProtocolError::Unexpected {
                    expected: "a message about an operation",
                    got: "a handshake message",
                });
            }
        }
        Ok(())
    }

    /// The connection is gone: operations sent to the worker are lost,
    /// whether or not it said they started (it may have started one and
    /// died before saying so); the others wait to be sent again (or end,
    /// when cancelled).
    fn lost(&mut self, reason: &str) {
        self.flights.retain(|_, flight| {
            if flight.sent || flight.started {
                flight.ticket.finish(Ending::Lost {
                    reason: reason.to_owned(),
                });
                return false;
            }
            if flight.cancelled {
                flight.ticket.finish(cancelled());
                return false;
            }
            flight.sent = false;
            true
        });
    }
}

fn cancelled() -> Ending {
    Ending::failed(Outcome::Cancelled, "cancelled before it started")
}
