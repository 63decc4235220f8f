//! One HTTP/1.1 POST to a provider, on hyper's connection-level client:
//! plain TCP for `http://` (loopback servers), rustls (ring, Mozilla's roots)
//! for `https://`.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST, HeaderName, HeaderValue, USER_AGENT};
use http::{HeaderMap, Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

use crate::ModelError;

/// An answer whose body is still to be read.
pub(crate) struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: Incoming,
    /// Keeps the connection alive while the body is read; aborts it after.
    _connection: AbortOnDrop,
}

impl Reply {
    /// The next piece of the body, `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, ModelError> {
        loop {
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(ModelError::Transport(format!(
                        "the provider's answer was cut off: {}",
                        error_chain(&e)
                    )));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// The whole body, refused past `cap` bytes; or, with `truncate`, cut
    /// at `cap` (for error bodies, which are only quoted).
    pub async fn body(&mut self, cap: usize, truncate: bool) -> Result<Vec<u8>, ModelError> {
        let mut bytes = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            if bytes.len() + chunk.len() > cap {
                if truncate {
                    bytes.extend_from_slice(&chunk[..cap - bytes.len()]);
                    break;
                }
                return Err(ModelError::Transport(format!(
                    "the provider's answer is larger than {cap} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}

/// Aborts the connection task when the call ends, however it ends (so
/// dropping the call's future closes the connection, cancelling upstream).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// POSTs `body` (JSON) to `url` with `headers` and returns the answer once
/// its head has arrived.
pub(crate) async fn post(
    url: &Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Vec<u8>,
) -> Result<Reply, ModelError> {
    let https = url.scheme_str() == Some("https");
    let authority = url
        .authority()
        .ok_or_else(|| ModelError::Transport(format!("the URL {url} names no host")))?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = TcpStream::connect((host, port)).await.map_err(|e| {
        ModelError::Transport(format!(
            "could not connect to {host}:{port}: {}",
            error_chain(&e)
        ))
    })?;
    // Requests are small; don't let Nagle hold back their last segment.
    let _ = tcp.set_nodelay(true);
    let request = build(url, headers, body)?;
    if !https {
        return exchange(tcp, request).await;
    }
    let name = ServerName::try_from(host.to_owned()).map_err(|_| {
        ModelError::Transport(format!(
            "{host:?} is not a name a TLS certificate can carry"
        ))
    })?;
    let tls = TlsConnector::from(tls_config())
        .connect(name, tcp)
        .await
        .map_err(|e| {
            ModelError::Transport(format!(
                "TLS handshake with {host}:{port} failed: {}",
                error_chain(&e)
            ))
        })?;
    exchange(tls, request).await
}

fn build(
    url: &Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Vec<u8>,
) -> Result<http::Request<Full<Bytes>>, ModelError> {
    let authority = url
        .authority()
        .ok_or_else(|| ModelError::Transport(format!("the URL {url} names no host")))?;
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    let mut builder = http::Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(HOST, authority.as_str())
        .header(USER_AGENT, concat!("hane/", env!("CARGO_PKG_VERSION")))
        .header(CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| ModelError::Transport(format!("cannot build the request: {e}")))
}

async fn exchange<S>(stream: S, request: http::Request<Full<Bytes>>) -> Result<Reply, ModelError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| {
            ModelError::Transport(format!("could not start HTTP/1.1: {}", error_chain(&e)))
        })?;
    let connection = AbortOnDrop(tokio::spawn(async move {
        let _ = connection.await;
    }));
    let response = sender.send_request(request).await.map_err(|e| {
        ModelError::Transport(format!(
            "the connection failed before an answer: {}",
            error_chain(&e)
        ))
    })?;
    let (parts, body) = response.into_parts();
    Ok(Reply {
        status: parts.status,
        headers: parts.headers,
        body,
        _connection: connection,
    })
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

/// An error and its sources, joined by `: `.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}
