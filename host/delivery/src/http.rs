//! One HTTP/1.1 request to a provider or customer API, on hyper's
//! connection-level client so each step (connect, TLS, send, answer) can be
//! classified on its own.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use http::{Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::timeout_at;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

use super::{BODY_EXCERPT_BYTES, Deadline, Delivery, Secret, error_chain, host_port};

/// One request, already checked.
pub(super) struct Request<'a> {
    /// Who it goes to, for details: "SMS provider", "connection \"crm\"".
    pub what: &'a str,
    pub method: Method,
    pub url: Uri,
    pub bearer: Option<&'a Secret>,
    /// JSON.
    pub body: Option<Vec<u8>>,
    pub idempotency_key: &'a str,
}

pub(super) async fn send(request: Request<'_>, deadline: Deadline) -> Delivery {
    let Request { what, url, .. } = &request;
    let https = url.scheme_str() == Some("https");
    let Some(authority) = url.authority() else {
        return Delivery::failed(format!("the {what} URL names no host; nothing was sent"));
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let server = host_port(host, port);
    let what = format!("{what} at {server}");

    let tcp = match timeout_at(deadline.at, TcpStream::connect((host, port))).await {
        Err(_) => {
            return Delivery::failed(format!(
                "timed out after {} connecting to {what}; nothing was sent",
                deadline.describe()
            ));
        }
        Ok(Err(e)) => {
            return Delivery::failed(format!(
                "could not connect to {what}: {}; nothing was sent",
                error_chain(&e)
            ));
        }
        Ok(Ok(tcp)) => tcp,
    };
    // Requests are small; don't let Nagle hold back their last segment.
    let _ = tcp.set_nodelay(true);

    if !https {
        return exchange(tcp, request, &what, deadline).await;
    }
    let Ok(name) = ServerName::try_from(host.to_owned()) else {
        return Delivery::failed(format!(
            "{host:?} is not a name a TLS certificate can carry; nothing was sent"
        ));
    };
    let connector = TlsConnector::from(tls_config());
    match timeout_at(deadline.at, connector.connect(name, tcp)).await {
        Err(_) => Delivery::failed(format!(
            "timed out after {} in the TLS handshake with {what}; nothing was sent",
            deadline.describe()
        )),
        Ok(Err(e)) => Delivery::failed(format!(
            "TLS handshake with {what} failed: {}; nothing was sent",
            error_chain(&e)
        )),
        Ok(Ok(tls)) => exchange(tls, request, &what, deadline).await,
    }
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

/// Aborts the connection task when the attempt ends, however it ends.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn exchange<S>(stream: S, request: Request<'_>, what: &str, deadline: Deadline) -> Delivery
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let http_request = match build(&request) {
        Ok(http_request) => http_request,
        Err(problem) => return Delivery::failed(format!("{what}: {problem}; nothing was sent")),
    };
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
            Ok(pair) => pair,
            Err(e) => {
                return Delivery::failed(format!(
                    "could not start HTTP/1.1 with {what}: {}; nothing was sent",
                    error_chain(&e)
                ));
            }
        };
    let _connection = AbortOnDrop(tokio::spawn(async move {
        let _ = connection.await;
    }));
    match timeout_at(deadline.at, sender.ready()).await {
        Err(_) => {
            return Delivery::failed(format!(
                "timed out after {} waiting for the connection to {what}; nothing was sent",
                deadline.describe()
            ));
        }
        Ok(Err(e)) => {
            return Delivery::failed(format!(
                "the connection to {what} closed before the request was sent: {}; \
                 nothing was sent",
                error_chain(&e)
            ));
        }
        Ok(Ok(())) => {}
    }

    // From here on bytes may be on the wire: only hyper handing the request
    // back proves it never left.
    let response = match timeout_at(deadline.at, sender.try_send_request(http_request)).await {
        Err(_) => {
            return Delivery::unknown(format!(
                "no answer from {what} within {} of sending the request; \
                 it may have been acted on",
                deadline.describe()
            ));
        }
        Ok(Err(mut e)) => {
            return if e.take_message().is_some() {
                Delivery::failed(format!(
                    "the connection to {what} failed before the request was sent: {}; \
                     nothing was sent",
                    error_chain(e.error())
                ))
            } else {
                Delivery::unknown(format!(
                    "the connection to {what} failed after the request was sent and before \
                     an answer: {}; it may have been acted on",
                    error_chain(e.error())
                ))
            };
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let mut excerpt = read_excerpt(response.into_body(), deadline).await;
    // A provider that echoes the request must not carry the credential
    // into the outcome, which is stored and shown.
    if let Some(secret) = request.bearer
        && !secret.expose().is_empty()
    {
        excerpt = excerpt.replace(secret.expose(), "***");
    }
    classify(what, status, &excerpt)
}

/// Why [`build`] could not make the request; says which part is bad
/// without quoting the request.
#[derive(Debug, thiserror::Error)]
enum BuildError {
    #[error("the URL names no host")]
    NoHost,
    #[error("the credential cannot be sent in a header (it holds control characters)")]
    Credential,
    #[error("cannot build the request: {0}")]
    Request(#[source] http::Error),
}

fn build(request: &Request<'_>) -> Result<http::Request<Full<Bytes>>, BuildError> {
    let url = &request.url;
    let authority = url.authority().ok_or(BuildError::NoHost)?;
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    let mut builder = http::Request::builder()
        .method(request.method.clone())
        .uri(path)
        .header(HOST, authority.as_str())
        .header(USER_AGENT, concat!("hane/", env!("CARGO_PKG_VERSION")))
        .header("idempotency-key", request.idempotency_key);
    if request.body.is_some() {
        builder = builder.header(CONTENT_TYPE, "application/json");
    }
    if let Some(secret) = request.bearer {
        let mut value = HeaderValue::from_str(&format!("Bearer {}", secret.expose()))
            .map_err(|_| BuildError::Credential)?;
        value.set_sensitive(true);
        builder = builder.header(AUTHORIZATION, value);
    }
    let body = Full::new(Bytes::from(request.body.clone().unwrap_or_default()));
    builder.body(body).map_err(BuildError::Request)
}

/// Up to [`BODY_EXCERPT_BYTES`] of the answer's body, as text. The status has
/// already decided the outcome, so a body that fails or runs past the
/// deadline only shortens the excerpt.
async fn read_excerpt(mut body: Incoming, deadline: Deadline) -> String {
    let mut bytes = Vec::new();
    let mut note = "";
    while bytes.len() <= BODY_EXCERPT_BYTES {
        match timeout_at(deadline.at, body.frame()).await {
            Err(_) => {
                note = " (the rest of the body did not arrive in time)";
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(_))) => {
                note = " (the rest of the body was lost)";
                break;
            }
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    bytes.extend_from_slice(&data);
                }
            }
        }
    }
    let mut text = excerpt(&bytes);
    text.push_str(note);
    text
}

/// `bytes` as text, cut to [`BODY_EXCERPT_BYTES`] on a character boundary,
/// with `…` when cut.
pub(super) fn excerpt(bytes: &[u8]) -> String {
    let cut = bytes.len() > BODY_EXCERPT_BYTES;
    let mut end = bytes.len().min(BODY_EXCERPT_BYTES);
    if cut {
        // Back off over a multi-byte character split by the cut.
        if let Err(e) = std::str::from_utf8(&bytes[..end])
            && e.error_len().is_none()
        {
            end = e.valid_up_to();
        }
    }
    let mut text = String::from_utf8_lossy(&bytes[..end]).trim_end().to_owned();
    if cut {
        text.push('…');
    }
    text
}

fn classify(what: &str, status: StatusCode, excerpt: &str) -> Delivery {
    let mut detail = format!("{what} answered HTTP {status}");
    if !excerpt.is_empty() {
        detail.push_str(": ");
        detail.push_str(excerpt);
    }
    match status.as_u16() {
        200..=299 => Delivery::Delivered { detail },
        // The provider refused the request itself: nothing was acted on.
        400..=499 => Delivery::failed(detail),
        // A server error may come after part of the work was done (a
        // customer API that wrote, then failed), and a gateway may have
        // passed the request on: not sent again, for a person to reconcile.
        500..=599 => Delivery::unknown(format!(
            "{detail}; a server error does not say the request was not acted on"
        )),
        _ => Delivery::unknown(format!(
            "{detail}; redirects are not followed, so the request may or may not have been acted on"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_cut_on_character_boundaries() {
        assert_eq!(excerpt(b"ok\n"), "ok");
        let long = "é".repeat(BODY_EXCERPT_BYTES);
        let text = excerpt(long.as_bytes());
        assert!(text.ends_with('…'));
        assert!(text.len() <= BODY_EXCERPT_BYTES + '…'.len_utf8());
        assert!(!text.contains('\u{FFFD}'));
    }

    #[test]
    fn statuses() {
        let kind = |code| match classify("p", StatusCode::from_u16(code).unwrap(), "") {
            Delivery::Delivered { .. } => "delivered",
            Delivery::Failed { .. } => "failed",
            Delivery::Unknown { .. } => "unknown",
        };
        assert_eq!(kind(200), "delivered");
        assert_eq!(kind(202), "delivered");
        assert_eq!(kind(302), "unknown");
        assert_eq!(kind(400), "failed");
        assert_eq!(kind(429), "failed");
        assert_eq!(kind(404), "failed");
        assert_eq!(kind(500), "unknown");
        assert_eq!(kind(503), "unknown");
        assert_eq!(kind(502), "unknown");
        assert_eq!(kind(504), "unknown");
    }
}
