//! The worker protocol, spoken between a [`ProxyOperationManager`] (the
//! client) and `hane worker` over a byte stream (TCP or a Unix socket).
//!
//! Every message is one frame: a `u32` big-endian payload length, then the
//! payload, a postcard-encoded [`WorkerMessage`] or [`ClientMessage`].
//! Frames are at most [`MAX_FRAME_BYTES`] long, and at most
//! [`MAX_HANDSHAKE_FRAME_BYTES`] before the client is authenticated.
//!
//! **Handshake.** The worker speaks first, with [`WorkerMessage::Hello`]:
//! its protocol version, its hane version and 32 random bytes (the nonce).
//! The client checks the version and answers [`ClientMessage::Auth`] with
//! its own version and `HMAC-SHA256(secret, "hane-worker v{version}" ||
//! nonce)`. The worker checks both (the MAC in constant time) and answers
//! [`WorkerMessage::Welcome`], or [`WorkerMessage::Refused`] with the reason
//! and closes the connection. The secret itself never crosses the wire, and
//! a fresh nonce per connection means a recorded answer cannot be replayed.
//! The first variants of both message types keep their layout in every
//! protocol version, so peers of different versions can still tell each
//! other which versions they speak.
//!
//! **Operations.** The client sends [`ClientMessage::Run`] with the
//! operation sealed in hane's version envelope, so a worker that does not
//! read that version of [`Operation`] says so instead of misreading it. The
//! worker asks for components it does not hold with
//! [`WorkerMessage::NeedComponent`], reports [`WorkerMessage::Started`] and
//! [`WorkerMessage::Finished`], and cancels on [`ClientMessage::Cancel`].
//! Any number of operations are in flight on one connection, told apart by
//! their ids.
//!
//! [`ProxyOperationManager`]: super::ProxyOperationManager
//! [`Operation`]: hane_core::Operation

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf as _, Bytes, BytesMut};
use hane_core::OperationId;
use hmac::{Hmac, Mac as _};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, BufWriter};

use super::Ending;

/// The protocol version this build speaks. Both sides must speak the same.
/// Version 2: receipts count `records` and `documents` calls (their
/// postcard layout changed). Version 3: policies grant `actions`, and an
/// operation's output carries the actions it proposed. Version 4: a
/// failure carries the guest's own error kind. Version 5: an operation
/// names the ledger it reads, which travels on demand like components.
pub const PROTOCOL_VERSION: u16 = 5;

/// The largest frame accepted or sent, in bytes. A frame carries at most one
/// component, and components with their dependencies compiled in run to
/// tens of MiB.
pub const MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;

/// The most bytes of a worker secret file (4 KiB): a secret is a line of
/// random characters.
pub const MAX_SECRET_FILE_BYTES: u64 = 4 << 10;

/// The largest frame accepted before the handshake is over, so an
/// unauthenticated peer cannot make the other side allocate much.
pub const MAX_HANDSHAKE_FRAME_BYTES: usize = 4 * 1024;

/// How long either side waits for the other's part of the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes of the worker's nonce.
pub const NONCE_BYTES: usize = 32;

/// What the worker sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WorkerMessage {
    /// The first message on every connection.
    Hello {
        /// The worker's [`PROTOCOL_VERSION`].
        protocol: u16,
        /// The worker's hane version, for error messages.
        hane: String,
        /// Random bytes the client's MAC must cover.
        nonce: [u8; NONCE_BYTES],
    },
    /// The client is authenticated; operations may follow.
    Welcome,
    /// The client is refused; the worker closes the connection.
    Refused {
        /// Why, in words.
        reason: String,
    },
    /// The worker does not hold the component with this digest; the client
    /// answers with [`ClientMessage::Component`] or
    /// [`ClientMessage::NoComponent`].
    NeedComponent {
        /// `sha256:` digest of the component.
        digest: String,
    },
    /// The worker does not hold the ledger with this digest; the client
    /// answers with [`ClientMessage::Ledger`] or [`ClientMessage::NoLedger`].
    NeedLedger {
        /// `sha256:` digest of the ledger's encoding.
        digest: String,
    },
    /// The operation started.
    Started {
        /// The operation.
        id: OperationId,
    },
    /// The operation ended.
    Finished {
        /// The operation.
        id: OperationId,
        /// How.
        ending: Ending,
    },
}

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ClientMessage {
    /// The answer to [`WorkerMessage::Hello`].
    Auth {
        /// The client's [`PROTOCOL_VERSION`].
        protocol: u16,
        /// `HMAC-SHA256(secret, "hane-worker v{protocol}" || nonce)`.
        mac: [u8; 32],
    },
    /// Run an operation.
    Run {
        /// The operation's id, readable even when the operation is not.
        id: OperationId,
        /// The operation, sealed with `hane_stored::seal`.
        operation: Bytes,
        /// `sha256:` digest of the ledger it reads (see
        /// [`ClientMessage::Ledger`]); none reads an empty ledger.
        ledger: Option<String>,
    },
    /// Cancel an operation that is queued or running.
    Cancel {
        /// The operation.
        id: OperationId,
    },
    /// A component the worker asked for.
    Component {
        /// `sha256:` digest of `bytes`; the worker checks it.
        digest: String,
        /// The component.
        bytes: Bytes,
    },
    /// The client does not have the component the worker asked for either;
    /// the operations that need it fail.
    NoComponent {
        /// `sha256:` digest of the component.
        digest: String,
    },
    /// A ledger the worker asked for.
    Ledger {
        /// `sha256:` digest of `bytes`; the worker checks it.
        digest: String,
        /// The ledger, postcard-encoded ([`encode_ledger`]).
        bytes: Bytes,
    },
    /// The client does not have the ledger the worker asked for (any
    /// more); the operations that read it fail.
    NoLedger {
        /// `sha256:` digest of the ledger's encoding.
        digest: String,
    },
}

/// `ledger` as it travels to a worker, and the digest that names it.
pub fn encode_ledger(ledger: &hane_core::Ledger) -> (String, Bytes) {
    let bytes = postcard::to_allocvec(ledger).expect("postcard encodes to a Vec");
    (hane_sandbox::component_digest(&bytes), Bytes::from(bytes))
}

/// A ledger as [`encode_ledger`] encoded it, once its bytes have the
/// digest `digest`.
///
/// # Errors
///
/// Another digest, or bytes that are not a ledger; see [`LedgerDecodeError`].
pub fn decode_ledger(digest: &str, bytes: &[u8]) -> Result<hane_core::Ledger, LedgerDecodeError> {
    let actual = hane_sandbox::component_digest(bytes);
    if actual != digest {
        return Err(LedgerDecodeError::Digest {
            digest: digest.to_owned(),
            actual,
        });
    }
    postcard::from_bytes(bytes).map_err(|source| LedgerDecodeError::Decode {
        digest: digest.to_owned(),
        source,
    })
}

/// Why [`decode_ledger`] refused the bytes a client sent as a ledger.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerDecodeError {
    /// The bytes do not have the digest they were sent under.
    #[error("the ledger sent for {digest} has the digest {actual}")]
    Digest {
        /// The digest they were sent under.
        digest: String,
        /// Their digest.
        actual: String,
    },
    /// The bytes have the digest but are not a ledger.
    #[error("the ledger sent for {digest} does not read: {source}")]
    Decode {
        /// The digest they were sent under.
        digest: String,
        /// What postcard found wrong.
        #[source]
        source: postcard::Error,
    },
}

/// Why the protocol could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The peer closed the connection between frames.
    #[error("the connection was closed")]
    Closed,
    /// The peer closed the connection in the middle of a frame.
    #[error("the connection was closed in the middle of a frame")]
    Truncated,
    /// Reading or writing the stream failed.
    #[error("connection error: {0}")]
    Io(#[from] io::Error),
    /// A frame is larger than allowed at this point of the protocol.
    #[error("a frame of {size} bytes is larger than the limit of {limit} bytes")]
    FrameTooLarge {
        /// The frame's payload size.
        size: usize,
        /// The limit in force.
        limit: usize,
    },
    /// A frame's payload is not a message of this protocol version.
    #[error("cannot decode a message: {0}")]
    Decode(String),
    /// A message could not be encoded.
    #[error("cannot encode a message: {0}")]
    Encode(String),
    /// The two sides speak different protocol versions.
    #[error(
        "the {peer} speaks worker protocol version {theirs}, but this {us} speaks version {ours} (hane {hane})"
    )]
    VersionMismatch {
        /// `worker` or `client`: the other side.
        peer: &'static str,
        /// `worker` or `client`: this side.
        us: &'static str,
        /// The other side's version.
        theirs: u16,
        /// This side's version.
        ours: u16,
        /// This side's hane version.
        hane: &'static str,
    },
    /// The worker refused this client.
    #[error("the worker refused the connection: {0}")]
    Refused(String),
    /// The client's MAC does not match: it holds another secret.
    #[error("authentication failed: the client's secret does not match the worker's")]
    WrongSecret,
    /// A message arrived that this point of the protocol does not allow.
    #[error("expected {expected}, got {got}")]
    Unexpected {
        /// What was expected.
        expected: &'static str,
        /// What arrived.
        got: &'static str,
    },
    /// The other side did not finish the handshake in time.
    #[error("the handshake did not finish within {} s", .0.as_secs())]
    Timeout(Duration),
}

/// The secret a worker and its clients share. It is never sent: the client
/// proves it holds it by a MAC over the worker's nonce.
#[derive(Clone)]
pub struct WorkerSecret(Arc<[u8]>);

/// A secret that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The secret is empty (or only whitespace).
    #[error("the worker secret is empty")]
    Empty,
    /// The secret file could not be read: missing, not a regular file,
    /// or larger than [`MAX_SECRET_FILE_BYTES`].
    #[error("the worker secret file: {source}")]
    Read {
        /// The file.
        path: String,
        /// What was wrong, naming the file.
        source: hane_core::file::ReadError,
    },
}

impl WorkerSecret {
    /// The secret `bytes`, without leading or trailing whitespace (a secret
    /// file's final newline is not part of the secret).
    ///
    /// # Errors
    ///
    /// Nothing is left after trimming.
    pub fn new(bytes: &[u8]) -> Result<Self, SecretError> {
        let trimmed = bytes.trim_ascii();
        if trimmed.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(Self(trimmed.into()))
    }

    /// The secret in the file at `path`, as [`WorkerSecret::new`] reads it.
    ///
    /// # Errors
    ///
    /// The file cannot be read within [`MAX_SECRET_FILE_BYTES`] or holds
    /// an empty secret.
    pub fn from_file(path: &Path) -> Result<Self, SecretError> {
        let cap = hane_core::file::FileCap::new(MAX_SECRET_FILE_BYTES, "worker secret files");
        let bytes =
            hane_core::file::read_capped(path, cap).map_err(|source| SecretError::Read {
                path: path.display().to_string(),
                source,
            })?;
        Self::new(&bytes)
    }

    /// The MAC a client sends for `nonce`.
    pub fn mac(&self, protocol: u16, nonce: &[u8; NONCE_BYTES]) -> [u8; 32] {
        self.keyed(protocol, nonce).finalize().into_bytes().into()
    }

    /// Whether `mac` is the MAC of `nonce`, compared in constant time.
    pub fn verify(&self, protocol: u16, nonce: &[u8; NONCE_BYTES], mac: &[u8; 32]) -> bool {
        self.keyed(protocol, nonce).verify_slice(mac).is_ok()
    }

    fn keyed(&self, protocol: u16, nonce: &[u8; NONCE_BYTES]) -> Hmac<Sha256> {
        // HMAC takes keys of any length.
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC accepts any key");
        mac.update(format!("hane-worker v{protocol}").as_bytes());
        mac.update(nonce);
        mac
    }
}

impl fmt::Debug for WorkerSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WorkerSecret(..)")
    }
}

/// Reads frames. Cancel-safe: a `next` future dropped before it finishes
/// loses nothing, so it can sit in a `select!` beside other work.
pub struct FrameReader<R> {
    io: R,
    buf: BytesMut,
    limit: usize,
}

/// Bytes read from the stream at a time, at least.
const READ_CHUNK: usize = 64 * 1024;

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader of frames of at most [`MAX_HANDSHAKE_FRAME_BYTES`] until
    /// [`FrameReader::authenticated`] is called.
    pub fn new(io: R) -> Self {
        Self {
            io,
            // Sized to the handshake's frames: a peer not yet known gets
            // no more memory than its one frame needs.
            buf: BytesMut::with_capacity(4 + MAX_HANDSHAKE_FRAME_BYTES),
            limit: MAX_HANDSHAKE_FRAME_BYTES,
        }
    }

    /// Bytes to make room for before a read: a whole handshake frame
    /// before the peer is known, [`READ_CHUNK`] after.
    fn chunk(&self) -> usize {
        if self.limit <= MAX_HANDSHAKE_FRAME_BYTES {
            4 + MAX_HANDSHAKE_FRAME_BYTES
        } else {
            READ_CHUNK
        }
    }

    /// Raises the frame limit to [`MAX_FRAME_BYTES`], once the peer is
    /// known.
    pub fn authenticated(&mut self) {
        self.limit = MAX_FRAME_BYTES;
    }

    /// The next message.
    ///
    /// # Errors
    ///
    /// [`ProtocolError::Closed`] at the end of the stream, or the stream
    /// failed, a frame is too large or does not decode.
    pub async fn next<T: DeserializeOwned>(&mut self) -> Result<T, ProtocolError> {
        loop {
            if self.buf.len() >= 4 {
                let size = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                    as usize;
                if size > self.limit {
                    return Err(ProtocolError::FrameTooLarge {
                        size,
                        limit: self.limit,
                    });
                }
                if self.buf.len() >= 4 + size {
                    self.buf.advance(4);
                    let payload = self.buf.split_to(size);
                    return postcard::from_bytes(&payload)
                        .map_err(|e| ProtocolError::Decode(e.to_string()));
                }
                self.buf.reserve(4 + size - self.buf.len());
            }
            self.buf.reserve(self.chunk());
            if self.io.read_buf(&mut self.buf).await? == 0 {
                return Err(if self.buf.is_empty() {
                    ProtocolError::Closed
                } else {
                    ProtocolError::Truncated
                });
            }
        }
    }
}

/// Writes frames through a buffer; nothing reaches the peer before
/// [`FrameWriter::flush`], so a burst of messages costs one write.
pub struct FrameWriter<W: AsyncWrite> {
    io: BufWriter<W>,
    frame: Vec<u8>,
}

/// Encode buffers larger than this are not kept between frames.
const KEEP_FRAME_BUFFER: usize = 1024 * 1024;

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    /// A writer on `io`.
    pub fn new(io: W) -> Self {
        Self::with_capacity(READ_CHUNK, io)
    }

    /// A writer on `io` buffering at most `capacity` bytes, such as the
    /// few a handshake sends.
    pub fn with_capacity(capacity: usize, io: W) -> Self {
        Self {
            io: BufWriter::with_capacity(capacity, io),
            frame: Vec::new(),
        }
    }

    /// The stream, once what was buffered is sent ([`FrameWriter::flush`]);
    /// anything still buffered is lost.
    pub fn into_inner(self) -> W {
        self.io.into_inner()
    }

    /// Buffers one message.
    ///
    /// # Errors
    ///
    /// The message is larger than [`MAX_FRAME_BYTES`], or the stream
    /// failed.
    pub async fn send<T: Serialize>(&mut self, message: &T) -> Result<(), ProtocolError> {
        self.frame.clear();
        self.frame.extend_from_slice(&[0; 4]);
        postcard::to_io(message, &mut self.frame)
            .map_err(|e| ProtocolError::Encode(e.to_string()))?;
        let size = self.frame.len() - 4;
        if size > MAX_FRAME_BYTES {
            self.frame = Vec::new();
            return Err(ProtocolError::FrameTooLarge {
                size,
                limit: MAX_FRAME_BYTES,
            });
        }
        self.frame[..4].copy_from_slice(&(size as u32).to_be_bytes());
        let written = self.io.write_all(&self.frame).await;
        if self.frame.capacity() > KEEP_FRAME_BUFFER {
            self.frame = Vec::with_capacity(1024);
        }
        Ok(written?)
    }

    /// Sends everything buffered.
    ///
    /// # Errors
    ///
    /// The stream failed.
    pub async fn flush(&mut self) -> Result<(), ProtocolError> {
        Ok(self.io.flush().await?)
    }

    /// Buffers one message and sends everything buffered.
    ///
    /// # Errors
    ///
    /// As [`FrameWriter::send`] and [`FrameWriter::flush`].
    pub async fn send_now<T: Serialize>(&mut self, message: &T) -> Result<(), ProtocolError> {
        self.send(message).await?;
        self.flush().await
    }

    /// Shuts the stream down for writing, after sending what is buffered.
    pub async fn shutdown(&mut self) {
        // The peer may be gone already; there is nobody to tell.
        let _ = self.io.shutdown().await;
    }
}

fn message_name(message: &WorkerMessage) -> &'static str {
    match message {
        WorkerMessage::Hello { .. } => "hello",
        WorkerMessage::Welcome => "welcome",
        WorkerMessage::Refused { .. } => "refused",
        WorkerMessage::NeedComponent { .. } => "need-component",
        WorkerMessage::NeedLedger { .. } => "need-ledger",
        WorkerMessage::Started { .. } => "started",
        WorkerMessage::Finished { .. } => "finished",
    }
}

fn client_message_name(message: &ClientMessage) -> &'static str {
    match message {
        ClientMessage::Auth { .. } => "auth",
        ClientMessage::Run { .. } => "run",
        ClientMessage::Cancel { .. } => "cancel",
        ClientMessage::Component { .. } => "component",
        ClientMessage::NoComponent { .. } => "no-component",
        ClientMessage::Ledger { .. } => "ledger",
        ClientMessage::NoLedger { .. } => "no-ledger",
    }
}

/// The client's side of the handshake: checks the worker's version and
/// proves it holds `secret`. On success both sides go on to operations.
///
/// # Errors
///
/// The worker speaks another version, refused the client, broke the
/// protocol or took longer than [`HANDSHAKE_TIMEOUT`].
pub async fn client_handshake<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    secret: &WorkerSecret,
) -> Result<(), ProtocolError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let handshake = async {
        let nonce = match reader.next::<WorkerMessage>().await? {
            WorkerMessage::Hello {
                protocol: PROTOCOL_VERSION,
                nonce,
                ..
            } => nonce,
            WorkerMessage::Hello { protocol, .. } => {
                return Err(ProtocolError::VersionMismatch {
                    peer: "worker",
                    us: "client",
                    theirs: protocol,
                    ours: PROTOCOL_VERSION,
                    hane: env!("CARGO_PKG_VERSION"),
                });
            }
            other => {
                return Err(ProtocolError::Unexpected {
                    expected: "hello",
                    got: message_name(&other),
                });
            }
        };
        let mac = secret.mac(PROTOCOL_VERSION, &nonce);
        writer
            .send_now(&ClientMessage::Auth {
                protocol: PROTOCOL_VERSION,
                mac,
            })
            .await?;
        match reader.next::<WorkerMessage>().await {
            Ok(WorkerMessage::Welcome) => Ok(()),
            Ok(WorkerMessage::Refused { reason }) => Err(ProtocolError::Refused(reason)),
            Ok(other) => Err(ProtocolError::Unexpected {
                expected: "welcome",
                got: message_name(&other),
            }),
            Err(ProtocolError::Closed) => Err(ProtocolError::Refused(
                "the worker closed the connection without an answer".into(),
            )),
            Err(e) => Err(e),
        }
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| ProtocolError::Timeout(HANDSHAKE_TIMEOUT))??;
    reader.authenticated();
    Ok(())
}

/// The worker's side of the handshake: greets the client and checks its
/// version and MAC. A refused client is told why before the error is
/// returned.
///
/// # Errors
///
/// The client speaks another version, holds another secret, broke the
/// protocol or took longer than [`HANDSHAKE_TIMEOUT`].
pub async fn worker_handshake<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    secret: &WorkerSecret,
) -> Result<(), ProtocolError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut nonce = [0u8; NONCE_BYTES];
    // Without an entropy source no nonce can be trusted; stop here.
    getrandom::fill(&mut nonce).map_err(|e| io::Error::other(format!("no random bytes: {e}")))?;
    let check = async {
        writer
            .send_now(&WorkerMessage::Hello {
                protocol: PROTOCOL_VERSION,
                hane: env!("CARGO_PKG_VERSION").to_owned(),
                nonce,
            })
            .await?;
        match reader.next::<ClientMessage>().await? {
            ClientMessage::Auth { protocol, .. } if protocol != PROTOCOL_VERSION => {
                Err(ProtocolError::VersionMismatch {
                    peer: "client",
                    us: "worker",
                    theirs: protocol,
                    ours: PROTOCOL_VERSION,
                    hane: env!("CARGO_PKG_VERSION"),
                })
            }
            ClientMessage::Auth { protocol, mac } if secret.verify(protocol, &nonce, &mac) => {
                Ok(())
            }
            ClientMessage::Auth { .. } => Err(ProtocolError::WrongSecret),
            other => Err(ProtocolError::Unexpected {
                expected: "auth",
                got: client_message_name(&other),
            }),
        }
    };
    let checked = tokio::time::timeout(HANDSHAKE_TIMEOUT, check)
        .await
        .unwrap_or(Err(ProtocolError::Timeout(HANDSHAKE_TIMEOUT)));
    match checked {
        Ok(()) => {
            writer.send_now(&WorkerMessage::Welcome).await?;
            reader.authenticated();
            Ok(())
        }
        Err(e @ (ProtocolError::Closed | ProtocolError::Truncated | ProtocolError::Io(_))) => {
            Err(e)
        }
        Err(e) => {
            // Best effort: the client may be gone or not listening.
            let _ = writer
                .send_now(&WorkerMessage::Refused {
                    reason: e.to_string(),
                })
                .await;
            writer.shutdown().await;
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_ledger_travels_under_its_digest_and_another_digest_is_refused() {
        let mut ledger = hane_core::Ledger::default();
        ledger
            .collections
            .insert("vehicles".into(), Default::default());
        let (digest, bytes) = encode_ledger(&ledger);
        assert_eq!(decode_ledger(&digest, &bytes).unwrap(), ledger);
        let other = format!("sha256:{}", "0".repeat(64));
        let refused = decode_ledger(&other, &bytes).unwrap_err().to_string();
        assert!(
            refused.contains(&other) && refused.contains(&digest),
            "{refused}"
        );
        let (empty, _) = encode_ledger(&hane_core::Ledger::default());
        assert!(
            decode_ledger(&empty, &bytes).is_err(),
            "bytes of another ledger"
        );
    }

    use super::*;

    #[test]
    fn secrets_trim_whitespace_and_refuse_empty_ones() {
        let a = WorkerSecret::new(b"  s3cret\n").unwrap();
        let b = WorkerSecret::new(b"s3cret").unwrap();
        let nonce = [7u8; NONCE_BYTES];
        assert_eq!(a.mac(1, &nonce), b.mac(1, &nonce));
        assert!(a.verify(1, &nonce, &b.mac(1, &nonce)));
        assert!(!a.verify(2, &nonce, &b.mac(1, &nonce)));
        assert!(!a.verify(1, &[8; NONCE_BYTES], &b.mac(1, &nonce)));
        let other = WorkerSecret::new(b"other").unwrap();
        assert!(!a.verify(1, &nonce, &other.mac(1, &nonce)));
        assert!(matches!(WorkerSecret::new(b" \n"), Err(SecretError::Empty)));
        assert_eq!(format!("{a:?}"), "WorkerSecret(..)");
    }

    #[tokio::test]
    async fn frames_round_trip_and_oversized_ones_are_refused() {
        let (client, worker) = tokio::io::duplex(1024);
        let mut writer = FrameWriter::new(client);
        let mut reader = FrameReader::new(worker);
        let message = ClientMessage::Cancel {
            id: OperationId::new(),
        };
        writer.send(&message).await.unwrap();
        writer.send(&message).await.unwrap();
        writer.flush().await.unwrap();
        assert_eq!(reader.next::<ClientMessage>().await.unwrap(), message);
        assert_eq!(reader.next::<ClientMessage>().await.unwrap(), message);

        let big = ClientMessage::Component {
            digest: "sha256:00".into(),
            bytes: Bytes::from(vec![1u8; MAX_HANDSHAKE_FRAME_BYTES + 1]),
        };
        let sent = tokio::spawn(async move { writer.send_now(&big).await });
        let err = reader.next::<ClientMessage>().await.unwrap_err();
        assert!(
            matches!(
                err,
                ProtocolError::FrameTooLarge {
                    limit: MAX_HANDSHAKE_FRAME_BYTES,
                    ..
                }
            ),
            "{err}"
        );
        drop(reader);
        let _ = sent.await;
    }

    #[tokio::test]
    async fn the_handshake_admits_the_right_secret_only() {
        async fn attempt(
            worker_secret: &[u8],
            client_secret: &[u8],
        ) -> (Result<(), ProtocolError>, Result<(), ProtocolError>) {
            let (c, w) = tokio::io::duplex(4096);
            let (cr, cw) = tokio::io::split(c);
            let (wr, ww) = tokio::io::split(w);
            let worker_secret = WorkerSecret::new(worker_secret).unwrap();
            let client_secret = WorkerSecret::new(client_secret).unwrap();
            let worker = tokio::spawn(async move {
                worker_handshake(
                    &mut FrameReader::new(wr),
                    &mut FrameWriter::new(ww),
                    &worker_secret,
                )
                .await
            });
            let client = client_handshake(
                &mut FrameReader::new(cr),
                &mut FrameWriter::new(cw),
                &client_secret,
            )
            .await;
            (client, worker.await.unwrap())
        }
        let (client, worker) = attempt(b"same", b"same").await;
        assert!(client.is_ok() && worker.is_ok(), "{client:?} {worker:?}");
        let (client, worker) = attempt(b"right", b"wrong").await;
        assert!(
            matches!(worker, Err(ProtocolError::WrongSecret)),
            "{worker:?}"
        );
        let err = client.unwrap_err().to_string();
        assert_eq!(
            err,
            "the worker refused the connection: authentication failed: the client's secret does not match the worker's"
        );
    }
}
