//! One email through an SMTP server, step by step on lettre's connection so
//! that the step a failure happens in decides its outcome: everything up to
//! the server's `354` after `DATA` is [`Delivery::Failed`], and once the
//! message's bytes are on the wire, anything short of a reply is
//! [`Delivery::Unknown`].

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use hane_core::file::ReadError;

use lettre::Message;
use lettre::address::AddressError;
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Mailbox, Mailboxes};
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, Certificate, TlsParameters};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};
use lettre::transport::smtp::response::Response;
use tokio::time::timeout_at;

use super::{
    CA_FILE_CAP, Deadline, Delivery, SMTP_CA_FILE_ENV, SMTP_URL_ENV, SmtpConfig, SmtpTls, host_port,
};

/// How long a `QUIT` may take once the outcome is known.
const QUIT_GRACE: Duration = Duration::from_secs(1);

pub(super) struct Email<'a> {
    pub to: &'a str,
    pub subject: &'a str,
    pub body: &'a str,
    pub action: &'a str,
}

pub(super) async fn send(config: &SmtpConfig, email: &Email<'_>, deadline: Deadline) -> Delivery {
    let server = format!("SMTP server {}", host_port(&config.host, config.port));
    let message = match compose(config, email) {
        Ok(message) => message,
        Err(problem) => return Delivery::failed(format!("{problem}; nothing was sent")),
    };
    let tls = match config.tls {
        SmtpTls::None => None,
        SmtpTls::StartTls | SmtpTls::Tls => match tls_parameters(config) {
            Ok(tls) => Some(tls),
            Err(problem) => return Delivery::failed(format!("{problem}; nothing was sent")),
        },
    };
    let hello = ClientId::default();
    let implicit_tls = if config.tls == SmtpTls::Tls {
        tls.clone()
    } else {
        None
    };
    let connect = AsyncSmtpConnection::connect_tokio1(
        (config.host.as_str(), config.port),
        Some(deadline.remaining()),
        &hello,
        implicit_tls,
        None,
    );
    let mut connection =
        match step(deadline, &server, "could not open a session with", connect).await {
            Ok(connection) => connection,
            Err(stop) => return stop.outcome,
        };
    let stop = match session(
        &mut connection,
        config,
        &message,
        tls,
        &hello,
        &server,
        deadline,
    )
    .await
    {
        Ok(stop) | Err(stop) => stop,
    };
    // Say goodbye only while the session is in a known state: after a
    // network or TLS error the stream may be gone.
    if stop.quit {
        let _ = tokio::time::timeout(QUIT_GRACE, connection.quit()).await;
    }
    stop.outcome
}

/// Where a session ended.
struct Stop {
    outcome: Delivery,
    /// The server's last word was a reply, so `QUIT` can follow.
    quit: bool,
}

/// Why [`compose`] could not build the message.
#[derive(Debug, thiserror::Error)]
enum ComposeError {
    #[error(
        "the configured sender {sender:?} is not an email address ({source}); fix from= in {SMTP_URL_ENV}"
    )]
    Sender {
        sender: String,
        #[source]
        source: AddressError,
    },
    #[error("recipient {recipient:?} is not an email address ({source})")]
    Recipient {
        recipient: String,
        #[source]
        source: AddressError,
    },
    #[error("cannot compose the email: {0}")]
    Message(#[source] lettre::error::Error),
}

/// The message, with its envelope taken from the headers.
fn compose(config: &SmtpConfig, email: &Email<'_>) -> Result<Message, ComposeError> {
    let from: Mailbox = config.from.parse().map_err(|source| ComposeError::Sender {
        sender: config.from.clone(),
        source,
    })?;
    let to: Mailboxes = email.to.parse().map_err(|source| ComposeError::Recipient {
        recipient: email.to.to_owned(),
        source,
    })?;
    // A line break in a header would end it; the subject is one line.
    let subject = email.subject.replace(['\r', '\n'], " ");
    Message::builder()
        .from(from)
        .mailbox(lettre::message::header::To::from(to))
        .subject(subject)
        .message_id(Some(format!("<{}@hane>", email.action)))
        .raw_header(HeaderValue::new(
            HeaderName::new_from_ascii_str("X-Hane-Action"),
            email.action.to_owned(),
        ))
        .header(ContentType::TEXT_PLAIN)
        .body(email.body.to_owned())
        .map_err(ComposeError::Message)
}

/// Why [`tls_parameters`] could not set up TLS for the server.
#[derive(Debug, thiserror::Error)]
enum TlsSetupError {
    #[error("the root certificate ({SMTP_CA_FILE_ENV}): {0}")]
    ReadCertificate(#[source] ReadError),
    #[error("cannot use the root certificate {path} ({SMTP_CA_FILE_ENV}): {source}")]
    Certificate {
        path: PathBuf,
        #[source]
        source: lettre::transport::smtp::Error,
    },
    #[error("cannot set up TLS for {host}: {source}")]
    Build {
        host: String,
        #[source]
        source: lettre::transport::smtp::Error,
    },
}

fn tls_parameters(config: &SmtpConfig) -> Result<TlsParameters, TlsSetupError> {
    let mut builder = TlsParameters::builder(config.host.clone());
    if let Some(path) = &config.root_certificate {
        let pem = hane_core::file::read_capped(path, CA_FILE_CAP)
            .map_err(TlsSetupError::ReadCertificate)?;
        let certificate =
            Certificate::from_pem(&pem).map_err(|source| TlsSetupError::Certificate {
                path: path.clone(),
                source,
            })?;
        builder = builder.add_root_certificate(certificate);
    }
    builder
        .build_rustls()
        .map_err(|source| TlsSetupError::Build {
            host: config.host.clone(),
            source,
        })
}

/// One step before the message data: any error or the deadline is a failure.
async fn step<T>(
    deadline: Deadline,
    server: &str,
    doing: &str,
    future: impl Future<Output = Result<T, lettre::transport::smtp::Error>>,
) -> Result<T, Stop> {
    match timeout_at(deadline.at, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(Stop {
            outcome: Delivery::failed(format!(
                "{doing} the {server}: {}; nothing was sent",
                describe(&e)
            )),
            quit: e.is_permanent() || e.is_transient(),
        }),
        Err(_) => Err(Stop {
            outcome: Delivery::failed(format!(
                "timed out after {} ({doing} the {server}); nothing was sent",
                deadline.describe()
            )),
            quit: false,
        }),
    }
}

/// `Err` carries a failure before the message data; `Ok` the outcome once
/// it was sent.
async fn session(
    connection: &mut AsyncSmtpConnection,
    config: &SmtpConfig,
    message: &Message,
    tls: Option<TlsParameters>,
    hello: &ClientId,
    server: &str,
    deadline: Deadline,
) -> Result<Stop, Stop> {
    secure_and_log_in(connection, config, tls, hello, server, deadline).await?;
    let bytes = message.formatted();
    open_envelope(connection, message, &bytes, server, deadline).await?;
    Ok(send_data(connection, &bytes, server, deadline).await)
}

/// A refusal before anything was sent: the session is ended with QUIT.
fn refuse(detail: String) -> Stop {
    Stop {
        outcome: Delivery::failed(detail),
        quit: true,
    }
}

/// STARTTLS when the configuration asks for it, then AUTH when it has
/// credentials.
async fn secure_and_log_in(
    connection: &mut AsyncSmtpConnection,
    config: &SmtpConfig,
    tls: Option<TlsParameters>,
    hello: &ClientId,
    server: &str,
    deadline: Deadline,
) -> Result<(), Stop> {
    if config.tls == SmtpTls::StartTls {
        if !connection.can_starttls() {
            return Err(refuse(format!(
                "the {server} does not offer STARTTLS, which {SMTP_URL_ENV} requires \
                 (tls=starttls); nothing was sent"
            )));
        }
        let tls = tls.expect("STARTTLS has TLS parameters");
        step(
            deadline,
            server,
            "STARTTLS failed with",
            connection.starttls(tls, hello),
        )
        .await?;
    }
    if let Some((user, password)) = &config.auth {
        let credentials = Credentials::new(user.clone(), password.expose().to_owned());
        let auth = connection.auth(&[Mechanism::Plain, Mechanism::Login], &credentials);
        step(
            deadline,
            server,
            &format!("authentication as {user:?} was refused by"),
            auth,
        )
        .await?;
    }
    Ok(())
}

/// MAIL FROM (with the extensions the message needs), RCPT TO for each
/// recipient, and DATA: everything before the message itself.
async fn open_envelope(
    connection: &mut AsyncSmtpConnection,
    message: &Message,
    bytes: &[u8],
    server: &str,
    deadline: Deadline,
) -> Result<(), Stop> {
    let envelope = message.envelope();
    let mut parameters = Vec::new();
    let utf8_addresses = envelope
        .to()
        .iter()
        .chain(envelope.from())
        .any(|a| !AsRef::<str>::as_ref(a).is_ascii());
    if utf8_addresses {
        if !connection
            .server_info()
            .supports_feature(Extension::SmtpUtfEight)
        {
            return Err(refuse(format!(
                "the {server} does not accept non-ASCII addresses (no SMTPUTF8); nothing was sent"
            )));
        }
        parameters.push(MailParameter::SmtpUtfEight);
    }
    // lettre encodes bodies as 7bit, quoted-printable or base64, so this is
    // for non-ASCII addresses in the headers.
    if !bytes.is_ascii()
        && connection
            .server_info()
            .supports_feature(Extension::EightBitMime)
    {
        parameters.push(MailParameter::Body(MailBodyParameter::EightBitMime));
    }
    let mail = connection.command(Mail::new(envelope.from().cloned(), parameters));
    step(deadline, server, "the sender was refused by", mail).await?;
    for recipient in envelope.to() {
        let rcpt = connection.command(Rcpt::new(recipient.clone(), vec![]));
        step(
            deadline,
            server,
            &format!("recipient {recipient} was refused by"),
            rcpt,
        )
        .await?;
    }
    step(
        deadline,
        server,
        "DATA was refused by",
        connection.command(Data),
    )
    .await
    .map(drop)
}

/// Sends the message itself. From here on, only a reply is certain: a
/// broken session or no reply leaves the outcome unknown.
async fn send_data(
    connection: &mut AsyncSmtpConnection,
    bytes: &[u8],
    server: &str,
    deadline: Deadline,
) -> Stop {
    let (outcome, quit) = match timeout_at(deadline.at, connection.message(bytes)).await {
        Ok(Ok(reply)) => (
            Delivery::Delivered {
                detail: format!("the {server} accepted the message: {}", reply_text(&reply)),
                answer: None,
            },
            true,
        ),
        Ok(Err(e)) if e.is_permanent() || e.is_transient() => (
            Delivery::failed(format!(
                "the {server} refused the message after receiving it: {}; it was not accepted",
                describe(&e)
            )),
            true,
        ),
        Ok(Err(e)) => (
            Delivery::unknown(format!(
                "the session with the {server} broke after the message was sent and before \
                 its final reply: {}; it may have been delivered",
                describe(&e)
            )),
            false,
        ),
        Err(_) => (
            Delivery::unknown(format!(
                "no final reply from the {server} within {} after the message was sent; \
                 it may have been delivered",
                deadline.describe()
            )),
            false,
        ),
    };
    Stop { outcome, quit }
}

fn reply_text(reply: &Response) -> String {
    let lines: Vec<&str> = reply.message().collect();
    format!("{} {}", reply.code(), lines.join(" "))
}

/// lettre's messages can repeat their kind ("Connection error: Connection
/// error: ..."); say each part once.
fn describe(error: &lettre::transport::smtp::Error) -> String {
    let text = error.to_string();
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split(": ") {
        if parts
            .last()
            .is_some_and(|last| last.eq_ignore_ascii_case(part))
        {
            continue;
        }
        parts.push(part);
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> SmtpConfig {
        SmtpConfig::new("mail.example.com", SmtpTls::None, "Hane <hane@example.com>")
    }

    #[test]
    fn subject_line_breaks_cannot_add_headers() {
        let email = Email {
            to: "a@example.com",
            subject: "hi\r\nBcc: evil@example.com",
            body: "b",
            action: "act-1",
        };
        let message = compose(&config(), &email).unwrap();
        let text = String::from_utf8(message.formatted()).unwrap();
        assert!(!text.contains("\r\nBcc:"), "{text}");
        assert_eq!(message.envelope().to().len(), 1);
    }

    #[test]
    fn non_ascii_content_is_encoded() {
        let email = Email {
            to: "José <jose@example.com>",
            subject: "Mesa para dos — 8 h",
            body: "¡Hasta luego!",
            action: "act-2",
        };
        let message = compose(&config(), &email).unwrap();
        assert!(message.formatted().is_ascii());
    }

    #[test]
    fn bad_addresses_fail_before_connecting() {
        let email = Email {
            to: "not an address",
            subject: "s",
            body: "b",
            action: "act-3",
        };
        let refused = compose(&config(), &email).unwrap_err();
        assert!(
            matches!(refused, ComposeError::Recipient { .. })
                && refused.to_string().contains("not an email address"),
            "{refused}"
        );
        let sender = SmtpConfig {
            from: "nobody".into(),
            ..config()
        };
        let email = Email {
            to: "a@example.com",
            ..email
        };
        let refused = compose(&sender, &email).unwrap_err();
        assert!(
            matches!(refused, ComposeError::Sender { .. }) && refused.to_string().contains("from="),
            "{refused}"
        );
    }
}
