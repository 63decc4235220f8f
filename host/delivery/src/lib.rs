//! Delivery adapters: one honest attempt to send an approved outbound action,
//! and a precise account of what happened.
//!
//! The execution ledger records the attempt before calling [`deliver`] and
//! records the [`Delivery`] it returns, so this module never retries: a
//! second attempt could send the message twice. Its whole job is to tell
//! apart the three outcomes:
//!
//! - [`Delivery::Failed`]: nothing can have gone out: delivery is not
//!   configured, the connection, DNS lookup or TLS handshake failed, the
//!   SMTP server refused the login, sender, recipient or message, or the
//!   HTTP provider answered 4xx (it refused the request itself);
//! - [`Delivery::Unknown`]: it may have gone out: the timeout expired or the
//!   connection was lost after the message or request was sent and before
//!   the final answer, or the answer does not say (an HTTP redirect, or a
//!   5xx: a server that failed part-way, or a gateway that may have passed
//!   the request on). A person reconciles these; hane never resends them;
//! - [`Delivery::Delivered`]: the SMTP server's final reply was 2xx, or the
//!   provider answered 2xx (a customer API's answer comes with it, read
//!   whole up to the connection's `maxResponseBytes`, for its caller to
//!   check).
//!
//! Every detail is meant for the person reading the ledger: it names the
//! server or provider, quotes its reply (HTTP bodies up to
//! [`BODY_EXCERPT_BYTES`]), and when something is not configured, names the
//! variable to set. Details, errors and `Debug` output never contain a
//! credential; a provider that echoes the bearer token back has it
//! replaced by `***`.
//!
//! # Configuration
//!
//! [`DeliveryConfig::from_env`] reads:
//!
//! | Variable | Meaning |
//! |---|---|
//! | `HANE_SMTP_URL` | `smtp://[user[:password]@]host[:port]?from=ADDRESS[&tls=none\|starttls\|tls]`; `smtps://` means `tls=tls`. User and password are percent-decoded. `tls` defaults to `starttls` (required, never downgraded) for `smtp://`; the port defaults to 25, 587 or 465 for `none`, `starttls`, `tls`. |
//! | `HANE_SMTP_PASSWORD` | The SMTP password, overriding one in the URL, so it need not sit there. |
//! | `HANE_SMTP_CA_FILE` | A PEM file of extra root certificates to trust for the SMTP server (besides the Mozilla roots). |
//! | `HANE_SMS_URL` | The SMS provider's endpoint, `http://` or `https://`. |
//! | `HANE_SMS_TOKEN` | Its bearer token. |
//! | `HANE_CALL_URL` | The call provider's endpoint. |
//! | `HANE_CALL_TOKEN` | Its bearer token. |
//! | `HANE_CREDENTIAL_<NAME>` | The credential integrations name `<name>`; see [`credential_env_var`]. |
//! | `HANE_DELIVERY_TIMEOUT_MS` | How long one attempt may take, in milliseconds; default 30 000. |
//!
//! A variable set to the empty string counts as unset.
//!
//! # Wire formats
//!
//! - Email: a `text/plain; charset=utf-8` message from the configured
//!   address, with `Message-ID: <ACTION@hane>` and `X-Hane-Action: ACTION`
//!   so a reconciling person can find it in the recipient's mailbox or the
//!   relay's logs.
//! - SMS and calls: `POST` to the provider's URL with the JSON body
//!   `{"to": ..., "text": ...}` or `{"to": ..., "message": ...}`.
//! - Integrations: `METHOD base_url + path` with the JSON body if any,
//!   trusting the connection's own CA certificates besides the platform's
//!   and Mozilla's roots; a certificate none of them signed fails the
//!   delivery before anything is sent, saying it is not trusted.
//!
//! Every HTTP request carries `Idempotency-Key: ACTION`, so a provider that
//! honours it will not act twice even if a person resends by hand, and
//! `Authorization: Bearer ...` when the provider has a token or the
//! connection names a credential. Redirects are not followed.
//!
//! # Examples
//!
//! ```
//! use hane_delivery::{Delivery, DeliveryConfig, Outbound, deliver};
//!
//! let config = DeliveryConfig::new();
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let outcome = runtime.block_on(deliver(
//!     &config,
//!     Outbound::Sms { to: "+15550100", text: "Your table is ready", action: "act-1" },
//! ));
//! // Nothing is configured, so nothing can have been sent.
//! assert!(matches!(&outcome, Delivery::Failed { detail } if detail.contains("HANE_SMS_URL")));
//! # Ok::<(), std::io::Error>(())
//! ```

mod config;
mod http;
mod read;
mod smtp;
mod trust;

use std::time::Duration;

use ::http::Method;
use tokio::time::Instant;

use config::{CA_FILE_CAP, UrlProblem};
pub use config::{
    CALL_TOKEN_ENV, CALL_URL_ENV, CREDENTIAL_ENV_PREFIX, ConfigError, DEFAULT_TIMEOUT,
    DeliveryConfig, HttpProvider, MAX_CA_FILE_BYTES, SMS_TOKEN_ENV, SMS_URL_ENV, SMTP_CA_FILE_ENV,
    SMTP_PASSWORD_ENV, SMTP_URL_ENV, Secret, SmtpConfig, SmtpTls, TIMEOUT_ENV, credential_env_var,
};

pub use hane_http::RootsError;
pub use read::{ApiAnswer, ApiRead, ApiReadError, read_api};
pub use trust::check_roots;

/// How much of an HTTP provider's answer a detail quotes.
pub const BODY_EXCERPT_BYTES: usize = 500;

/// The longest action id accepted; it goes into headers.
pub const MAX_ACTION_ID_BYTES: usize = 200;

/// One approved outbound action, exactly as approved.
#[derive(Debug, Clone, Copy)]
pub enum Outbound<'a> {
    /// An email through [`DeliveryConfig::smtp`].
    Email {
        /// The recipient, `a@example.com` or `Name <a@example.com>`, or a
        /// comma-separated list of them (one RCPT each; any refusal fails
        /// the whole message before it is sent).
        to: &'a str,
        /// The subject; line breaks in it are sent as spaces.
        subject: &'a str,
        /// The plain-text body.
        body: &'a str,
        /// The action id, sent as `Message-ID: <ID@hane>` and
        /// `X-Hane-Action: ID`.
        message_id: &'a str,
    },
    /// A text message through [`DeliveryConfig::sms`].
    Sms {
        /// The recipient's number, passed to the provider as is.
        to: &'a str,
        /// The text.
        text: &'a str,
        /// The action id, sent as `Idempotency-Key`.
        action: &'a str,
    },
    /// A phone call through [`DeliveryConfig::call`].
    Call {
        /// The number to call, passed to the provider as is.
        to: &'a str,
        /// What the call says.
        message: &'a str,
        /// The action id, sent as `Idempotency-Key`.
        action: &'a str,
    },
    /// A request through one of the agent's connections to a customer API.
    Integration {
        /// The connection's name, for details.
        connection: &'a str,
        /// The connection's base URL; the request never leaves its scheme,
        /// host and port.
        base_url: &'a str,
        /// The name of the credential the connection uses, looked up in
        /// [`DeliveryConfig::credential`]; `None` sends no `Authorization`.
        credential: Option<&'a str>,
        /// The connection's own CA certificates (PEM), trusted besides the
        /// platform's and Mozilla's roots; `None` trusts those only.
        ca_certificates: Option<&'a str>,
        /// The HTTP method, e.g. `POST`.
        method: &'a str,
        /// Appended to `base_url`; must start with `/` (or `?`).
        path: &'a str,
        /// Further headers, a JSON object of names to string values, such
        /// as an API operation's header parameters; never `Authorization`,
        /// which is the credential's.
        headers: Option<&'a serde_json::Value>,
        /// The JSON body, if any.
        body: Option<&'a serde_json::Value>,
        /// How long the attempt may take: the connection's timeout;
        /// [`DeliveryConfig::timeout`] when `None`.
        timeout: Option<Duration>,
        /// The most bytes of a successful answer read whole into
        /// [`Delivery::Delivered`]'s `answer` (the connection's
        /// `maxResponseBytes`); `None` reads only what the detail quotes.
        max_response_bytes: Option<usize>,
        /// The action id, sent as `Idempotency-Key`.
        action: &'a str,
    },
}

impl<'a> Outbound<'a> {
    /// The action id.
    pub fn action(&self) -> &'a str {
        match *self {
            Self::Email { message_id, .. } => message_id,
            Self::Sms { action, .. } | Self::Call { action, .. } => action,
            Self::Integration { action, .. } => action,
        }
    }
}

/// What one attempt did. Each detail is a sentence for the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Delivery {
    /// The server or provider accepted it.
    Delivered {
        /// Its final answer, e.g. the SMTP reply or the HTTP status and body.
        detail: String,
        /// The API's answer to an [`Outbound::Integration`] with a
        /// `max_response_bytes`, read whole; `None` for other channels and
        /// for a body longer than the cap or cut off (the detail says so).
        answer: Option<ApiAnswer>,
    },
    /// Nothing can have gone out.
    Failed {
        /// Why, naming the variable to set when something is not configured.
        detail: String,
    },
    /// It may have gone out; a person must find out.
    Unknown {
        /// What was sent and where the attempt stopped.
        detail: String,
    },
}

impl Delivery {
    /// The detail, whatever the outcome.
    pub fn detail(&self) -> &str {
        match self {
            Self::Delivered { detail, .. } | Self::Failed { detail } | Self::Unknown { detail } => {
                detail
            }
        }
    }

    fn failed(detail: impl Into<String>) -> Self {
        Self::Failed {
            detail: detail.into(),
        }
    }

    fn unknown(detail: impl Into<String>) -> Self {
        Self::Unknown {
            detail: detail.into(),
        }
    }
}

/// What this host lacks to send an [`Outbound`]: no attempt could succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} is not configured on this host: set {var}")]
pub struct NotConfigured {
    /// What is missing, such as `email delivery` or `credential "crm"`.
    pub what: String,
    /// The environment variable that configures it.
    pub var: String,
}

impl DeliveryConfig {
    /// Whether this host has what sending `outbound` needs: the adapter
    /// of its channel, and the credential of its connection. An attempt
    /// without them fails at once with the same words.
    ///
    /// # Errors
    ///
    /// What is missing, and the variable to set.
    pub fn can_send(&self, outbound: &Outbound<'_>) -> Result<(), NotConfigured> {
        self.route(*outbound).map(drop)
    }

    /// The one place that finds what sends `outbound` on this host, for
    /// [`DeliveryConfig::can_send`] and [`deliver`] alike.
    fn route<'c, 'a>(&'c self, outbound: Outbound<'a>) -> Result<Route<'c, 'a>, NotConfigured> {
        let missing = |what: &str, var: &str| NotConfigured {
            what: what.to_owned(),
            var: var.to_owned(),
        };
        match outbound {
            Outbound::Email {
                to,
                subject,
                body,
                message_id,
            } => {
                let smtp =
                    (self.smtp.as_ref()).ok_or_else(|| missing("email delivery", SMTP_URL_ENV))?;
                let email = smtp::Email {
                    to,
                    subject,
                    body,
                    action: message_id,
                };
                Ok(Route::Email(smtp, email))
            }
            Outbound::Sms { to, text, action } => {
                let provider =
                    (self.sms.as_ref()).ok_or_else(|| missing("SMS delivery", SMS_URL_ENV))?;
                let body = serde_json::json!({ "to": to, "text": text });
                Ok(Route::Provider(provider, "SMS provider", body, action))
            }
            Outbound::Call {
                to,
                message,
                action,
            } => {
                let provider =
                    (self.call.as_ref()).ok_or_else(|| missing("call delivery", CALL_URL_ENV))?;
                let body = serde_json::json!({ "to": to, "message": message });
                Ok(Route::Provider(provider, "call provider", body, action))
            }
            Outbound::Integration {
                connection,
                base_url,
                credential,
                ca_certificates,
                method,
                path,
                headers,
                body,
                action,
                timeout: _,
                max_response_bytes,
            } => {
                let bearer = match credential {
                    None => None,
                    Some(name) => Some(self.credential_for(name).ok_or_else(|| {
                        missing(
                            &format!("credential {name:?} of connection {connection:?}"),
                            &credential_env_var(name),
                        )
                    })?),
                };
                Ok(Route::Integration(IntegrationCall {
                    connection,
                    base_url,
                    bearer,
                    ca_certificates,
                    method,
                    path,
                    headers,
                    body,
                    action,
                    max_response_bytes,
                }))
            }
        }
    }
}

/// An [`Outbound`] with what sends it here.
enum Route<'c, 'a> {
    Email(&'c SmtpConfig, smtp::Email<'a>),
    /// An SMS or call provider, named for details, the JSON body, and the
    /// action id.
    Provider(&'c HttpProvider, &'static str, serde_json::Value, &'a str),
    Integration(IntegrationCall<'c, 'a>),
}

/// An [`Outbound::Integration`] with its credential's secret, if any.
struct IntegrationCall<'c, 'a> {
    connection: &'a str,
    base_url: &'a str,
    bearer: Option<&'c Secret>,
    ca_certificates: Option<&'a str>,
    method: &'a str,
    path: &'a str,
    headers: Option<&'a serde_json::Value>,
    body: Option<&'a serde_json::Value>,
    action: &'a str,
    max_response_bytes: Option<usize>,
}

/// Makes one attempt to send `outbound` and says what happened. Never
/// retries, never panics on bad input: anything wrong before sending is a
/// [`Delivery::Failed`].
pub async fn deliver(config: &DeliveryConfig, outbound: Outbound<'_>) -> Delivery {
    let action = outbound.action();
    if let Err(problem) = check_action_id(action) {
        return Delivery::failed(format!("action id {action:?} {problem}; nothing was sent"));
    }
    let route = match config.route(outbound) {
        Ok(route) => route,
        Err(missing) => return Delivery::failed(format!("{missing}; nothing was sent")),
    };
    let timeout = match outbound {
        Outbound::Integration {
            timeout: Some(timeout),
            ..
        } => timeout,
        _ => config.timeout,
    };
    let deadline = Deadline::after(timeout);
    match route {
        Route::Email(smtp, email) => smtp::send(smtp, &email, deadline).await,
        Route::Provider(provider, what, body, action) => {
            send_to_provider(provider, what, &body, action, deadline).await
        }
        Route::Integration(call) => send_to_integration(call, deadline).await,
    }
}

/// Sends an [`Outbound::Integration`]: the request to the connection's
/// base URL, with its credential as a bearer token.
async fn send_to_integration(call: IntegrationCall<'_, '_>, deadline: Deadline) -> Delivery {
    let IntegrationCall {
        connection,
        base_url,
        bearer,
        ca_certificates,
        method,
        path,
        headers,
        body,
        action,
        max_response_bytes,
    } = call;
    let what = format!("connection {connection:?}");
    let clients = match trust::clients(ca_certificates, &format!("the tls.caFile of {what}")) {
        Ok(clients) => clients,
        Err(problem) => {
            return Delivery::failed(format!("{what}: {problem}; nothing was sent"));
        }
    };
    let url = match integration_url(base_url, path) {
        Ok(url) => url,
        Err(problem) => {
            return Delivery::failed(format!("{what}: {problem}; nothing was sent"));
        }
    };
    let Ok(method) = Method::from_bytes(method.to_ascii_uppercase().as_bytes()) else {
        return Delivery::failed(format!(
            "{what}: {method:?} is not an HTTP method; nothing was sent"
        ));
    };
    let headers: Vec<(String, String)> = match headers {
        None => Vec::new(),
        Some(serde_json::Value::Object(map)) => {
            let mut pairs = Vec::new();
            for (name, value) in map {
                let Some(value) = value.as_str() else {
                    return Delivery::failed(format!(
                        "{what}: header {name:?} is not a string; nothing was sent"
                    ));
                };
                pairs.push((name.clone(), value.to_owned()));
            }
            pairs
        }
        Some(_) => {
            return Delivery::failed(format!(
                "{what}: the headers are not an object; nothing was sent"
            ));
        }
    };
    let body = match body.map(serde_json::to_vec).transpose() {
        Ok(body) => body,
        Err(e) => {
            return Delivery::failed(format!(
                "{what}: the body cannot be serialized: {e}; nothing was sent"
            ));
        }
    };
    let request = http::Request {
        what: &what,
        client: &clients.writes,
        untrusted: "a private CA's certificate goes in the connection's tls.caFile",
        method,
        url,
        bearer,
        headers: &headers,
        body,
        idempotency_key: action,
        answer_cap: max_response_bytes,
    };
    http::send(request, deadline).await
}

async fn send_to_provider(
    provider: &HttpProvider,
    what: &str,
    body: &serde_json::Value,
    action: &str,
    deadline: Deadline,
) -> Delivery {
    let url = match config::check_http_url(&provider.url) {
        Ok(url) => url,
        Err(problem) => {
            return Delivery::failed(format!("the {what} URL {problem}; nothing was sent"));
        }
    };
    let request = http::Request {
        what,
        client: &trust::clients(None, what)
            .expect("no roots of its own")
            .writes,
        untrusted: "its CA must be among the platform's roots",
        method: Method::POST,
        url,
        bearer: provider.token.as_ref(),
        headers: &[],
        body: Some(body.to_string().into_bytes()),
        idempotency_key: action,
        answer_cap: None,
    };
    http::send(request, deadline).await
}

/// Action ids go into `Message-ID` (where they must be a dot-atom),
/// `X-Hane-Action` and `Idempotency-Key`, so they are held to what all three
/// take unquoted. hane's own ids (`act_` and base32) always pass.
fn check_action_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() {
        return Err("is empty");
    }
    if id.len() > MAX_ACTION_ID_BYTES {
        return Err("is too long");
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err("holds characters other than ASCII letters, digits, -, _ and .");
    }
    if id.starts_with('.') || id.ends_with('.') || id.contains("..") {
        return Err("starts or ends with a dot, or holds two in a row");
    }
    Ok(())
}

/// Why [`integration_url`] refused a connection's base URL and path.
#[derive(Debug, thiserror::Error)]
enum IntegrationUrlError {
    #[error("the base URL {0}")]
    Base(#[source] UrlProblem),
    #[error("the base URL must not have a query")]
    BaseQuery,
    #[error("path {path:?} must start with /")]
    PathStart { path: String },
    #[error("path {path:?} does not make a valid URL: {source}")]
    InvalidPath {
        path: String,
        #[source]
        source: ::http::uri::InvalidUri,
    },
    #[error("path {path:?} leaves the connection's host")]
    LeavesHost { path: String },
}

/// `base_url` followed by `path`, refusing anything that would leave the
/// connection's scheme, host and port (and so carry its credential
/// elsewhere).
fn integration_url(base_url: &str, path: &str) -> Result<::http::Uri, IntegrationUrlError> {
    let base = config::check_http_url(base_url).map_err(IntegrationUrlError::Base)?;
    if base.query().is_some() {
        return Err(IntegrationUrlError::BaseQuery);
    }
    if !(path.is_empty() || path.starts_with('/') || path.starts_with('?')) {
        return Err(IntegrationUrlError::PathStart {
            path: path.to_owned(),
        });
    }
    let joined = match (base_url.ends_with('/'), path.strip_prefix('/')) {
        (true, Some(rest)) => format!("{base_url}{rest}"),
        _ => format!("{base_url}{path}"),
    };
    let url: ::http::Uri = joined
        .parse()
        .map_err(|source| IntegrationUrlError::InvalidPath {
            path: path.to_owned(),
            source,
        })?;
    if url.scheme() != base.scheme() || url.authority() != base.authority() {
        return Err(IntegrationUrlError::LeavesHost {
            path: path.to_owned(),
        });
    }
    Ok(url)
}

/// The end of one attempt, shared by all its steps.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: Instant,
    timeout: Duration,
}

impl Deadline {
    fn after(timeout: Duration) -> Self {
        Self {
            at: Instant::now() + timeout,
            timeout,
        }
    }

    fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// "30 s" or "250 ms", for details.
    fn describe(&self) -> String {
        hane_http::seconds_or_millis(self.timeout)
    }
}

/// `host:port`, bracketing IPv6 addresses, for details.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_ids() {
        assert!(check_action_id("act_01hx9z0m3k7q2w5e8r1t4y6u0p").is_ok());
        assert!(check_action_id("act-plain.1").is_ok());
        assert!(check_action_id("a:b").is_err());
        assert!(check_action_id(".a").is_err());
        assert!(check_action_id("a..b").is_err());
        assert!(check_action_id("").is_err());
        assert!(check_action_id("a b").is_err());
        assert!(check_action_id("a\r\nBcc: x").is_err());
        assert!(check_action_id("<a@b>").is_err());
        assert!(check_action_id(&"a".repeat(MAX_ACTION_ID_BYTES + 1)).is_err());
    }

    #[test]
    fn integration_urls_stay_on_the_connection_host() {
        let url = |base, path| integration_url(base, path).map(|u| u.to_string());
        assert_eq!(
            url("https://api.example.com", "/v1/x").unwrap(),
            "https://api.example.com/v1/x"
        );
        assert_eq!(
            url("https://api.example.com/", "/v1/x").unwrap(),
            "https://api.example.com/v1/x"
        );
        assert_eq!(
            url("https://api.example.com/v2", "/x?y=1").unwrap(),
            "https://api.example.com/v2/x?y=1"
        );
        assert_eq!(
            url("http://127.0.0.1:8080", "").unwrap(),
            "http://127.0.0.1:8080/"
        );
        assert!(url("https://api.example.com", "@evil.example/x").is_err());
        assert!(url("https://api.example.com", ".evil.example/x").is_err());
        assert!(url("https://api.example.com", "https://evil.example/").is_err());
        assert!(url("ftp://api.example.com", "/x").is_err());
        assert!(url("https://api.example.com?k=v", "/x").is_err());
    }

    #[tokio::test]
    async fn not_configured_names_the_variable() {
        let config = DeliveryConfig::new();
        let email = Outbound::Email {
            to: "a@example.com",
            subject: "s",
            body: "b",
            message_id: "act-1",
        };
        let sms = Outbound::Sms {
            to: "+1",
            text: "t",
            action: "act-1",
        };
        let call = Outbound::Call {
            to: "+1",
            message: "m",
            action: "act-1",
        };
        for (outbound, var) in [
            (email, SMTP_URL_ENV),
            (sms, SMS_URL_ENV),
            (call, CALL_URL_ENV),
        ] {
            let missing = config.can_send(&outbound).unwrap_err();
            assert_eq!(missing.var, var);
            let outcome = deliver(&config, outbound).await;
            assert!(
                matches!(&outcome, Delivery::Failed { detail } if detail.contains(var)),
                "{outcome:?}"
            );
        }
        let integration = |credential| Outbound::Integration {
            connection: "crm",
            base_url: "https://crm.example.com",
            credential,
            ca_certificates: None,
            method: "POST",
            path: "/notes",
            headers: None,
            body: None,
            timeout: None,
            max_response_bytes: None,
            action: "act-1",
        };
        assert_eq!(config.can_send(&integration(None)), Ok(()));
        let missing = config.can_send(&integration(Some("crm"))).unwrap_err();
        assert_eq!(missing.var, credential_env_var("crm"));
        assert_eq!(
            missing.to_string(),
            format!(
                "credential \"crm\" of connection \"crm\" is not configured on this host: set {}",
                credential_env_var("crm")
            )
        );
        let mut held = DeliveryConfig::new();
        held.credential("crm", "secret");
        assert_eq!(held.can_send(&integration(Some("crm"))), Ok(()));
    }

    #[tokio::test]
    async fn bad_action_id_fails_before_sending() {
        let outcome = deliver(
            &DeliveryConfig::new(),
            Outbound::Sms {
                to: "+1",
                text: "t",
                action: "a\r\nX: y",
            },
        )
        .await;
        assert!(matches!(outcome, Delivery::Failed { .. }), "{outcome:?}");
    }
}
