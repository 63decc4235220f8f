//! Reads through a connection: a `GET` or `HEAD` of a customer API, run at
//! once (a read changes nothing, so it needs no approval and may run
//! again), with the connection's credential, on a pooled connection.
//!
//! What comes back is held to the connection's limits: an answer past its
//! cap, a redirect (which is not followed: the credential stays with the
//! connection's origin), a server error or a timeout is an [`ApiReadError`]
//! naming the connection, never an answer cut short. The credential never
//! appears in an answer or an error.

use std::time::Duration;

use ::http::Method;
use ::http::header::LOCATION;
use hane_http::Request;

use crate::http::{excerpt, with_headers};
use crate::{DeliveryConfig, NotConfigured, credential_env_var, integration_url, trust};

/// One read of a customer API.
#[derive(Debug, Clone, Copy)]
pub struct ApiRead<'a> {
    /// The connection's name, for errors.
    pub connection: &'a str,
    /// The connection's base URL; the request never leaves its scheme,
    /// host and port.
    pub base_url: &'a str,
    /// The credential's name, sent as a bearer token; `None` sends none.
    pub credential: Option<&'a str>,
    /// The connection's own CA certificates (PEM), trusted besides the
    /// platform's and Mozilla's roots; `None` trusts those only.
    pub ca_certificates: Option<&'a str>,
    /// `GET` or `HEAD`.
    pub method: &'a str,
    /// The path and query, appended to `base_url`.
    pub path: &'a str,
    /// Further headers, such as an operation's header parameters.
    pub headers: &'a [(String, String)],
    /// How long the whole read may take.
    pub timeout: Duration,
    /// The most bytes of body read.
    pub cap: usize,
}

/// A customer API's answer to a read: any status below 300, and the 4xx
/// answers (such as `404`), which are the API's to give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiAnswer {
    /// The status.
    pub status: u16,
    /// The `Content-Type`, if any.
    pub content_type: Option<String>,
    /// The body, at most the read's cap.
    pub body: Vec<u8>,
}

/// Why a read gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiReadError {
    /// The host does not hold the connection's credential.
    #[error(transparent)]
    NotConfigured(#[from] NotConfigured),
    /// The request cannot be made (a method that is not a read, a path
    /// that leaves the connection's host, a header that cannot be sent).
    #[error("connection {connection:?}: {problem}; nothing was sent")]
    Invalid {
        /// The connection.
        connection: String,
        /// What is wrong.
        problem: String,
    },
    /// The API answered with a redirect, which is not followed.
    #[error(
        "connection {connection:?} answered {status} redirecting to {location:?}; redirects are not followed, so the credential stays with the connection's origin"
    )]
    Redirected {
        /// The connection.
        connection: String,
        /// The status, such as 302.
        status: u16,
        /// Where it pointed.
        location: String,
    },
    /// The API failed (a 5xx status).
    #[error("connection {connection:?} failed with {status}: {excerpt}")]
    Upstream {
        /// The connection.
        connection: String,
        /// The status.
        status: u16,
        /// The start of its body.
        excerpt: String,
    },
    /// The answer's body is larger than the read's cap.
    #[error(
        "connection {connection:?} answered more than {cap} bytes, the connection's maxResponseBytes"
    )]
    TooLarge {
        /// The connection.
        connection: String,
        /// The cap.
        cap: usize,
    },
    /// The API's TLS certificate is not signed by a trusted root: the
    /// platform's, Mozilla's or the connection's own. Nothing was sent.
    #[error(
        "connection {connection:?}: {detail}; nothing was sent (a private CA's certificate goes in the connection's tls.caFile)"
    )]
    Untrusted {
        /// The connection.
        connection: String,
        /// Which server, and why its certificate was refused.
        detail: String,
    },
    /// No answer in time, or none at all.
    #[error("connection {connection:?}: {detail}")]
    Unreachable {
        /// The connection.
        connection: String,
        /// What happened, with the timeout where it passed.
        detail: String,
    },
}

/// Reads `read` from its connection.
///
/// # Errors
///
/// [`ApiReadError`]: the credential is not held, the request cannot be
/// made, the API's certificate is not trusted, or the API redirected,
/// failed, answered past the cap or did not answer in time.
pub async fn read_api(
    config: &DeliveryConfig,
    read: ApiRead<'_>,
) -> Result<ApiAnswer, ApiReadError> {
    let connection = read.connection.to_owned();
    let invalid = |problem: String| ApiReadError::Invalid {
        connection: connection.clone(),
        problem,
    };
    let method = match read.method {
        "GET" => Method::GET,
        "HEAD" => Method::HEAD,
        other => return Err(invalid(format!("{other:?} is not a read (GET or HEAD)"))),
    };
    let secret = match read.credential {
        None => None,
        Some(name) => Some(config.credential_for(name).ok_or_else(|| NotConfigured {
            what: format!("credential {name:?} of connection {:?}", read.connection),
            var: credential_env_var(name),
        })?),
    };
    let url = integration_url(read.base_url, read.path).map_err(|e| invalid(e.to_string()))?;
    let request = Request::new(method, url)
        .named(format!("connection {:?}", read.connection))
        .timeout(read.timeout)
        .resend_if_stale();
    let request =
        with_headers(request, read.headers, &[], secret).map_err(|e| invalid(e.to_string()))?;
    let redact = |text: String| match secret {
        Some(secret) if !secret.expose().is_empty() => text.replace(secret.expose(), "***"),
        _ => text,
    };
    let unreachable = |e: hane_http::Error| ApiReadError::Unreachable {
        connection: connection.clone(),
        detail: redact(e.to_string()),
    };
    // Reads of a connection share the pooled client of its roots.
    let clients = trust::clients(
        read.ca_certificates,
        &format!("the tls.caFile of connection {:?}", read.connection),
    )
    .map_err(|e| invalid(e.to_string()))?;
    let mut reply = match clients.reads.send(request).await {
        Ok(reply) => reply,
        Err(e @ hane_http::Error::Untrusted { .. }) => {
            return Err(ApiReadError::Untrusted {
                connection: connection.clone(),
                detail: e.to_string(),
            });
        }
        Err(e) => return Err(unreachable(e)),
    };
    let status = reply.status.as_u16();
    if reply.status.is_redirection() {
        let location = reply
            .headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        return Err(ApiReadError::Redirected {
            connection: connection.clone(),
            status,
            location: redact(location),
        });
    }
    if reply.status.is_server_error() {
        let body = reply
            .body(crate::BODY_EXCERPT_BYTES, true)
            .await
            .unwrap_or_default();
        return Err(ApiReadError::Upstream {
            connection: connection.clone(),
            status,
            excerpt: redact(excerpt(&body)),
        });
    }
    let content_type = reply
        .headers
        .get(::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = match reply.body(read.cap, false).await {
        Ok(body) => body,
        Err(hane_http::Error::TooLarge { .. }) => {
            return Err(ApiReadError::TooLarge {
                connection: connection.clone(),
                cap: read.cap,
            });
        }
        Err(e) => return Err(unreachable(e)),
    };
    Ok(ApiAnswer {
        status,
        content_type,
        body,
    })
}
