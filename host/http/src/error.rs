//! Why a request failed, and whether it may have reached the server.

use std::fmt;
use std::time::Duration;

/// The step of an exchange a deadline ran out in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Opening the TCP connection.
    Connect,
    /// The TLS handshake.
    Tls,
    /// Waiting for the connection to take the request.
    Ready,
    /// Waiting for the answer's head, after the request was sent.
    Answer,
    /// Reading the answer's body.
    Body,
}

/// A failed request, worded for a person: each names the server (and what
/// it is to the caller, when the request was [named](crate::Request::named)).
///
/// [`Error::nothing_sent`] says whether the server can have seen the
/// request, which is what decides whether an outbound action is failed or
/// unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The request could not be made: a URL with no host, a name no TLS
    /// certificate can carry, a header hyper refuses.
    Request {
        /// Who it was for.
        server: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The TCP connection failed (refused, unreachable, no such name).
    Connect {
        /// Who it was for.
        server: String,
        /// The system's reason.
        detail: String,
    },
    /// The TLS handshake failed (no TLS there, a certificate for another
    /// name, an expired one).
    Tls {
        /// Who it was for.
        server: String,
        /// rustls' reason.
        detail: String,
    },
    /// The server's certificate is not signed by a root the client
    /// trusts: the platform's, Mozilla's, or the client's own
    /// ([`Client::with_roots`](crate::Client::with_roots)).
    Untrusted {
        /// Who it was for.
        server: String,
        /// rustls' reason.
        detail: String,
    },
    /// The connection closed before the request left.
    NotSent {
        /// Who it was for.
        server: String,
        /// hyper's reason.
        detail: String,
    },
    /// The connection failed after the request was sent and before an
    /// answer: the server may have acted on it.
    Unanswered {
        /// Who it was for.
        server: String,
        /// hyper's reason.
        detail: String,
    },
    /// The request's deadline passed during `step`.
    TimedOut {
        /// Who it was for.
        server: String,
        /// The step that was under way.
        step: Step,
        /// The timeout the request was given.
        after: Duration,
    },
    /// The answer's body ended early.
    CutOff {
        /// Who it was from.
        server: String,
        /// hyper's reason.
        detail: String,
    },
    /// The answer's body is longer than the caller takes.
    TooLarge {
        /// Who it was from.
        server: String,
        /// The cap, in bytes.
        cap: usize,
    },
}

impl Error {
    /// Whether the request certainly never reached the server: `false` once
    /// bytes may have left (an unanswered request, a deadline that passed
    /// while waiting for the answer, anything about the answer).
    pub fn nothing_sent(&self) -> bool {
        match self {
            Error::Request { .. }
            | Error::Connect { .. }
            | Error::Tls { .. }
            | Error::Untrusted { .. }
            | Error::NotSent { .. } => true,
            Error::TimedOut { step, .. } => matches!(step, Step::Connect | Step::Tls | Step::Ready),
            Error::Unanswered { .. } | Error::CutOff { .. } | Error::TooLarge { .. } => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Request { server, problem } => write!(f, "the request to {server} {problem}"),
            Error::Connect { server, detail } => {
                write!(f, "could not connect to {server}: {detail}")
            }
            Error::Tls { server, detail } => {
                write!(f, "TLS handshake with {server} failed: {detail}")
            }
            Error::Untrusted { server, detail } => write!(
                f,
                "the certificate of {server} is not trusted: it is not signed by a trusted root \
                 ({detail})"
            ),
            Error::NotSent { server, detail } => write!(
                f,
                "the connection to {server} closed before the request was sent: {detail}"
            ),
            Error::Unanswered { server, detail } => write!(
                f,
                "the connection to {server} failed after the request was sent and before an \
                 answer: {detail}"
            ),
            Error::TimedOut {
                server,
                step,
                after,
            } => {
                let after = seconds_or_millis(*after);
                match step {
                    Step::Connect => write!(f, "timed out after {after} connecting to {server}"),
                    Step::Tls => {
                        write!(
                            f,
                            "timed out after {after} in the TLS handshake with {server}"
                        )
                    }
                    Step::Ready => write!(
                        f,
                        "timed out after {after} waiting for the connection to {server}"
                    ),
                    Step::Answer => write!(
                        f,
                        "no answer from {server} within {after} of sending the request"
                    ),
                    Step::Body => write!(
                        f,
                        "the answer from {server} did not arrive whole within {after}"
                    ),
                }
            }
            Error::CutOff { server, detail } => {
                write!(f, "the answer from {server} was cut off: {detail}")
            }
            Error::TooLarge { server, cap } => {
                write!(f, "the answer from {server} is larger than {cap} bytes")
            }
        }
    }
}

impl std::error::Error for Error {}

/// "30 s" or "250 ms".
pub fn seconds_or_millis(duration: Duration) -> String {
    if duration.subsec_millis() == 0 && !duration.is_zero() {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// An error and its sources, `outer: inner: innermost`, skipping a source
/// whose text the outer message already repeats.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
