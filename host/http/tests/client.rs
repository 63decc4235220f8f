//! hane-http against real servers on loopback: hyper's HTTP/1.1 server,
//! raw sockets that misbehave, and a TLS server with a certificate of its
//! own.
#![allow(missing_docs, reason = "tests")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use hane_http::{Client, Error, Request, Step};
use http::{Method, StatusCode, Uri};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// An HTTP/1.1 server answering every request with `body`, counting the
/// connections it accepted.
struct Server {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
}

impl Server {
    async fn start(body: &'static str) -> Self {
        Self::start_with(body, None).await
    }

    async fn start_with(body: &'static str, tls: Option<TlsAcceptor>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&connections);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let tls = tls.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: hyper::Request<_>| async move {
                        let echo = request.headers().get("x-echo").cloned();
                        let mut response =
                            hyper::Response::new(Full::new(Bytes::from_static(body.as_bytes())));
                        if let Some(echo) = echo {
                            response.headers_mut().insert("x-echo", echo);
                        }
                        Ok::<_, std::convert::Infallible>(response)
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    match tls {
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(stream).await {
                                let _ = http.serve_connection(TokioIo::new(stream), service).await;
                            }
                        }
                        None => {
                            let _ = http.serve_connection(TokioIo::new(stream), service).await;
                        }
                    }
                });
            }
        });
        Self { addr, connections }
    }

    fn url(&self, scheme: &str) -> Uri {
        format!("{scheme}://{}/v1/thing?x=1", self.addr)
            .parse()
            .unwrap()
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A socket server that reads each request's head and then does `then`.
async fn raw_server(then: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                match then {
                    "close" => drop(stream),
                    "silence" => tokio::time::sleep(Duration::from_secs(60)).await,
                    "huge" => {
                        let body = vec![b'x'; 10_000];
                        let head =
                            format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                        let _ = stream.write_all(head.as_bytes()).await;
                        let _ = stream.write_all(&body).await;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    "short" => {
                        let _ = stream
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly some")
                            .await;
                    }
                    other => panic!("no such behaviour {other}"),
                }
            });
        }
    });
    addr
}

fn url(addr: SocketAddr) -> Uri {
    format!("http://{addr}/x").parse().unwrap()
}

#[tokio::test]
async fn a_kept_alive_connection_serves_the_next_request() {
    let server = Server::start("hello").await;
    let client = Client::new();
    for _ in 0..3 {
        let mut reply = client
            .send(Request::new(Method::GET, server.url("http")))
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body(100, false).await.unwrap(), b"hello");
    }
    assert_eq!(server.connections(), 1);

    // A single-use client opens one for each request.
    let client = Client::single_use();
    for _ in 0..2 {
        let mut reply = client
            .send(Request::new(Method::GET, server.url("http")))
            .await
            .unwrap();
        reply.body(100, false).await.unwrap();
    }
    assert_eq!(server.connections(), 3);
}

#[tokio::test]
async fn a_reply_dropped_unread_does_not_go_back_to_the_pool() {
    let server = Server::start("hello").await;
    let client = Client::new();
    let reply = client
        .send(Request::post_json(server.url("http"), "{}"))
        .await
        .unwrap();
    drop(reply);
    let mut reply = client
        .send(Request::post_json(server.url("http"), "{}"))
        .await
        .unwrap();
    assert_eq!(reply.body(100, false).await.unwrap(), b"hello");
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn headers_reach_the_server() {
    let server = Server::start("ok").await;
    let reply = Client::new()
        .send(Request::new(Method::GET, server.url("http")).header(
            http::HeaderName::from_static("x-echo"),
            http::HeaderValue::from_static("back"),
        ))
        .await
        .unwrap();
    assert_eq!(reply.headers["x-echo"], "back");
}

#[tokio::test]
async fn a_refused_connection_sent_nothing_and_names_the_server() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let error = Client::new()
        .send(Request::post_json(url(addr), "{}").named("SMS provider"))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Connect { .. }), "{error:?}");
    assert!(error.nothing_sent());
    assert!(
        error
            .to_string()
            .starts_with(&format!("could not connect to SMS provider at {addr}: ")),
        "{error}"
    );
}

#[tokio::test]
async fn a_connection_closed_after_the_request_may_have_acted() {
    let addr = raw_server("close").await;
    let error = Client::single_use()
        .send(Request::post_json(url(addr), "{}"))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Unanswered { .. }), "{error:?}");
    assert!(!error.nothing_sent());
}

#[tokio::test]
async fn a_deadline_names_the_step_it_ran_out_in() {
    let addr = raw_server("silence").await;
    let error = Client::new()
        .send(Request::post_json(url(addr), "{}").timeout(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        Error::TimedOut {
            server: addr.to_string(),
            step: Step::Answer,
            after: Duration::from_millis(300),
        }
    );
    assert!(!error.nothing_sent());
    assert_eq!(
        error.to_string(),
        format!("no answer from {addr} within 300 ms of sending the request")
    );

    // A body that stops coming runs out at the body.
    let addr = raw_server("short").await;
    let mut reply = Client::new()
        .send(Request::new(Method::GET, url(addr)).timeout(Duration::from_millis(300)))
        .await
        .unwrap();
    let error = reply.body(1000, false).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::TimedOut {
                step: Step::Body,
                ..
            } | Error::CutOff { .. }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn bodies_are_bounded() {
    let addr = raw_server("huge").await;
    let client = Client::new();
    let mut reply = client
        .send(Request::new(Method::GET, url(addr)))
        .await
        .unwrap();
    let error = reply.body(1000, false).await.unwrap_err();
    assert_eq!(
        error,
        Error::TooLarge {
            server: addr.to_string(),
            cap: 1000
        }
    );
    let mut reply = client
        .send(Request::new(Method::GET, url(addr)))
        .await
        .unwrap();
    assert_eq!(reply.body(1000, true).await.unwrap(), vec![b'x'; 1000]);
}

#[tokio::test]
async fn urls_that_cannot_be_sent_to_are_refused_before_connecting() {
    for (url, problem) in [
        (
            "ftp://example.com/x",
            "is not to an http:// or https:// URL",
        ),
        ("/relative", "is not to an http:// or https:// URL"),
    ] {
        let error = Client::new()
            .send(Request::new(Method::GET, url.parse().unwrap()))
            .await
            .unwrap_err();
        assert!(error.nothing_sent());
        assert!(error.to_string().ends_with(problem), "{error}");
    }
}

/// A self-signed certificate for `localhost` and 127.0.0.1, as PEM, and the
/// acceptor that serves it.
fn certificate() -> (String, TlsAcceptor) {
    let key =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let pem = key.cert.pem();
    let der = CertificateDer::from(key.cert.der().to_vec());
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.signing_key.serialize_der()));
    let config = ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![der], private)
    .unwrap();
    (pem, TlsAcceptor::from(Arc::new(config)))
}

#[tokio::test]
async fn tls_trusts_added_roots_and_refuses_unknown_ones() {
    let (pem, acceptor) = certificate();
    let server = Server::start_with("secret", Some(acceptor)).await;

    let error = Client::new()
        .send(Request::new(Method::GET, server.url("https")))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Untrusted { .. }), "{error:?}");
    assert!(error.nothing_sent());
    assert!(
        error
            .to_string()
            .contains("is not signed by a trusted root"),
        "{error}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ca.pem");
    std::fs::write(&path, &pem).unwrap();
    let client = Client::new().with_roots(&path).unwrap();
    for _ in 0..2 {
        let mut reply = client
            .send(Request::new(Method::GET, server.url("https")))
            .await
            .unwrap();
        assert_eq!(reply.body(100, false).await.unwrap(), b"secret");
    }
    // The same roots given as text.
    let client = Client::new()
        .with_root_pem(pem.as_bytes(), "the test CA")
        .unwrap();
    let mut reply = client
        .send(Request::new(Method::GET, server.url("https")))
        .await
        .unwrap();
    assert_eq!(reply.body(100, false).await.unwrap(), b"secret");
    assert_eq!(
        server.connections(),
        3,
        "one refused, then one kept alive, then one of the second client"
    );

    // A file that is not PEM is named in the error.
    std::fs::write(&path, "not a certificate").unwrap();
    let error = Client::new().with_roots(&path).unwrap_err();
    assert!(error.to_string().contains("ca.pem"), "{error}");
    assert!(error.to_string().contains("no PEM certificate"), "{error}");
    let error = Client::new()
        .with_root_pem(b"not a certificate", "tls.caFile ca.pem")
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "tls.caFile ca.pem holds no PEM certificate"
    );
}

/// The child half of [`the_platforms_roots_are_trusted`]: run with the
/// platform's roots pointing at a test CA.
#[tokio::test]
#[ignore = "run by the_platforms_roots_are_trusted, in a process of its own"]
async fn platform_roots_child() {
    let url: Uri = std::env::var("HANE_HTTP_TEST_URL")
        .unwrap()
        .parse()
        .unwrap();
    let mut reply = Client::new()
        .send(Request::new(Method::GET, url))
        .await
        .unwrap();
    assert_eq!(reply.body(100, false).await.unwrap(), b"platform");
}

#[tokio::test]
async fn the_platforms_roots_are_trusted() {
    let (pem, acceptor) = certificate();
    let server = Server::start_with("platform", Some(acceptor)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("platform.pem");
    std::fs::write(&path, pem).unwrap();
    // The platform's store is read once per process: the check runs in a
    // process whose environment names the test CA as the platform's.
    let status = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "platform_roots_child", "--ignored", "--quiet"])
        .env("SSL_CERT_FILE", &path)
        .env("HANE_HTTP_TEST_URL", server.url("https").to_string())
        .status()
        .await
        .unwrap();
    assert!(status.success());
    assert_eq!(server.connections(), 1);
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_not_reused() {
    // hyper's server closes an idle keep-alive connection when told to by
    // the answer; a raw server that answers and closes does the same.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = stream.read(&mut buf).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
                // Kept alive by the headers, closed by the server.
                tokio::time::sleep(Duration::from_millis(50)).await;
            });
        }
    });
    let client = Client::new();
    for _ in 0..3 {
        let mut reply = client
            .send(Request::post_json(url(addr), "{}"))
            .await
            .unwrap();
        assert_eq!(reply.body(10, false).await.unwrap(), b"ok");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn connecting_to_a_name_that_does_not_resolve_sent_nothing() {
    let error = Client::new()
        .send(Request::new(
            Method::GET,
            "http://no-such-host.invalid/x".parse().unwrap(),
        ))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Connect { .. }), "{error:?}");
    assert!(error.nothing_sent());
}
