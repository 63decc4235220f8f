//! The delivery adapters against real servers on loopback: an aiosmtpd SMTP
//! server (`hane_test_support::SmtpServer`) and a small hyper HTTP provider.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hane_delivery::{
    Delivery, DeliveryConfig, HttpProvider, Outbound, Secret, SmtpConfig, SmtpTls,
    credential_env_var, deliver,
};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tempfile::TempDir;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

use hane_test_support::SmtpServer;

/// A self-signed certificate for `localhost` and 127.0.0.1, written to a
/// directory as `cert.pem` and `key.pem`.
struct TestCertificate {
    dir: TempDir,
}

impl TestCertificate {
    fn new() -> Self {
        let key = rcgen::generate_simple_self_signed(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
        ])
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cert.pem"), key.cert.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), key.signing_key.serialize_pem()).unwrap();
        Self { dir }
    }

    fn cert(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    fn key(&self) -> PathBuf {
        self.dir.path().join("key.pem")
    }

    /// An SMTP server presenting this certificate: `flag` is `--starttls`
    /// or `--tls`, `more` the rest of its command line.
    fn server(&self, flag: &str, more: &[&str]) -> SmtpServer {
        let (cert, key) = (self.cert(), self.key());
        let mut args = vec![flag, cert.to_str().unwrap(), key.to_str().unwrap()];
        args.extend_from_slice(more);
        SmtpServer::start(&args)
    }
}

fn email<'a>(to: &'a str, action: &'a str) -> Outbound<'a> {
    Outbound::Email {
        to,
        subject: "Table for two",
        // A lone "." line would end the message early without dot-stuffing.
        body: "See you at 8.\n.\n.leading dot\nafter the dots\n",
        message_id: action,
    }
}

fn smtp_config(smtp: SmtpConfig) -> DeliveryConfig {
    let mut config = DeliveryConfig::new();
    config.smtp(smtp);
    config
}

#[track_caller]
fn assert_delivered(outcome: &Delivery, needle: &str) {
    assert!(
        matches!(outcome, Delivery::Delivered { detail, .. } if detail.contains(needle)),
        "expected Delivered mentioning {needle:?}, got {outcome:?}"
    );
}

#[track_caller]
fn assert_failed(outcome: &Delivery, needle: &str) {
    assert!(
        matches!(outcome, Delivery::Failed { detail } if detail.contains(needle)),
        "expected Failed mentioning {needle:?}, got {outcome:?}"
    );
}

#[track_caller]
fn assert_unknown(outcome: &Delivery, needle: &str) {
    assert!(
        matches!(outcome, Delivery::Unknown { detail } if detail.contains(needle)),
        "expected Unknown mentioning {needle:?}, got {outcome:?}"
    );
}

#[tokio::test]
async fn plain_smtp_delivers_one_message_with_the_action_headers() {
    let server = SmtpServer::start(&[]);
    let config = smtp_config(server.config("127.0.0.1", SmtpTls::None));

    let outcome = deliver(&config, email("ana@example.com", "act-plain-1")).await;

    assert_delivered(&outcome, "250");
    let messages = server.messages();
    assert_eq!(messages.len(), 1, "{messages:#?}\n{}", server.log());
    let message = &messages[0];
    for expected in [
        "From: Hane <hane@example.com>",
        "To: ana@example.com",
        "Subject: Table for two",
        "Message-ID: <act-plain-1@hane>",
        "X-Hane-Action: act-plain-1",
        "Content-Type: text/plain; charset=utf-8",
        "See you at 8.\r\n.\r\n.leading dot\r\nafter the dots",
    ] {
        assert!(
            message.contains(expected),
            "{expected:?} missing from:\n{message}"
        );
    }
}

#[tokio::test]
async fn starttls_and_auth_deliver() {
    let certificate = TestCertificate::new();
    let server = certificate.server("--starttls", &["--auth", "hane:s3cret pass"]);
    let config = smtp_config(SmtpConfig {
        auth: Some(("hane".to_owned(), Secret::new("s3cret pass"))),
        root_certificate: Some(certificate.cert()),
        ..server.config("localhost", SmtpTls::StartTls)
    });

    let outcome = deliver(&config, email("ana@example.com", "act-tls-1")).await;

    assert_delivered(&outcome, "250");
    assert_eq!(server.messages().len(), 1, "{}", server.log());
    assert!(!format!("{config:?}").contains("s3cret"));
}

#[tokio::test]
async fn implicit_tls_delivers() {
    let certificate = TestCertificate::new();
    let server = certificate.server("--tls", &[]);
    let config = smtp_config(SmtpConfig {
        root_certificate: Some(certificate.cert()),
        ..server.config("127.0.0.1", SmtpTls::Tls)
    });

    let outcome = deliver(&config, email("ana@example.com", "act-smtps-1")).await;

    assert_delivered(&outcome, "250");
    assert_eq!(server.messages().len(), 1, "{}", server.log());
}

#[tokio::test]
async fn untrusted_certificate_fails_the_handshake() {
    let certificate = TestCertificate::new();
    let server = certificate.server("--starttls", &[]);
    // No root certificate: the self-signed one is not trusted.
    let config = smtp_config(server.config("localhost", SmtpTls::StartTls));

    let outcome = deliver(&config, email("ana@example.com", "act-untrusted-1")).await;

    assert_failed(&outcome, "STARTTLS failed");
    assert_failed(&outcome, "certificate");
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn starttls_required_but_not_offered_fails() {
    let server = SmtpServer::start(&[]);
    let config = smtp_config(server.config("127.0.0.1", SmtpTls::StartTls));

    let outcome = deliver(&config, email("ana@example.com", "act-nostarttls-1")).await;

    assert_failed(&outcome, "does not offer STARTTLS");
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn wrong_password_fails_naming_authentication() {
    let certificate = TestCertificate::new();
    let server = certificate.server("--starttls", &["--auth", "hane:right"]);
    let config = smtp_config(SmtpConfig {
        auth: Some(("hane".to_owned(), Secret::new("wrong-password"))),
        root_certificate: Some(certificate.cert()),
        ..server.config("localhost", SmtpTls::StartTls)
    });

    let outcome = deliver(&config, email("ana@example.com", "act-auth-1")).await;

    assert_failed(&outcome, "authentication");
    assert_failed(&outcome, "535");
    assert!(!outcome.detail().contains("wrong-password"));
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn rejected_recipient_fails_with_the_reply() {
    let server = SmtpServer::start(&["--reject-rcpt", "^blocked@"]);
    let config = smtp_config(server.config("127.0.0.1", SmtpTls::None));

    let outcome = deliver(&config, email("blocked@example.com", "act-rcpt-1")).await;

    assert_failed(&outcome, "550");
    assert_failed(&outcome, "recipient rejected by test server");
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn server_not_listening_fails() {
    let port = unused_port().await;
    let config = smtp_config(SmtpConfig {
        port,
        ..SmtpConfig::new("127.0.0.1", SmtpTls::None, "hane@example.com")
    });

    let outcome = deliver(&config, email("ana@example.com", "act-refused-1")).await;

    assert_failed(&outcome, "could not open a session");
}

#[tokio::test]
async fn slow_final_reply_is_unknown() {
    let server = SmtpServer::start(&["--delay-ms", "3000"]);
    let mut config = smtp_config(server.config("127.0.0.1", SmtpTls::None));
    config.timeout(Duration::from_millis(700));

    let outcome = deliver(&config, email("ana@example.com", "act-slow-1")).await;

    // Whether the server went on to store it is up to the server.
    assert_unknown(&outcome, "no final reply");
}

/// What the test provider saw of one request.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Bytes,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// How the test provider answers.
#[derive(Clone)]
pub(crate) enum Answer {
    Status(u16, &'static str),
    After(Duration, u16),
    /// Read the request, then close the connection without a word.
    HangUp,
}

/// A tiny HTTP provider on loopback that records every request.
pub(crate) struct Provider {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Provider {
    pub(crate) async fn start(answer: Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                if let Answer::HangUp = answer {
                    let mut buffer = [0; 4096];
                    let _ = stream.read(&mut buffer).await;
                    continue;
                }
                let answer = answer.clone();
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    let service =
                        service_fn(move |request: http::Request<hyper::body::Incoming>| {
                            let answer = answer.clone();
                            let recorded = Arc::clone(&recorded);
                            async move {
                                let (parts, body) = request.into_parts();
                                let body = body.collect().await.unwrap().to_bytes();
                                recorded.lock().unwrap().push(Seen {
                                    method: parts.method.to_string(),
                                    path: parts.uri.to_string(),
                                    headers: parts.headers,
                                    body,
                                });
                                let (status, text) = match answer {
                                    Answer::Status(status, text) => (status, text),
                                    Answer::After(delay, status) => {
                                        tokio::time::sleep(delay).await;
                                        (status, "late")
                                    }
                                    Answer::HangUp => unreachable!(),
                                };
                                let response = http::Response::builder()
                                    .status(status)
                                    .body(Full::new(Bytes::from_static(text.as_bytes())))
                                    .unwrap();
                                Ok::<_, Infallible>(response)
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, seen, task }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn unused_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn sms_posts_json_with_idempotency_key_and_bearer_token() {
    let provider = Provider::start(Answer::Status(201, r#"{"id":"sms-1"}"#)).await;
    let mut config = DeliveryConfig::new();
    config.sms(HttpProvider::new(provider.url("/v1/sms")).with_token("sms-token"));

    let outcome = deliver(
        &config,
        Outbound::Sms {
            to: "+15550100",
            text: "Your table is ready",
            action: "act-sms-1",
        },
    )
    .await;

    assert_delivered(&outcome, "201 Created");
    assert_delivered(&outcome, r#"{"id":"sms-1"}"#);
    assert!(!outcome.detail().contains("sms-token"));
    let seen = provider.seen();
    assert_eq!(seen.len(), 1);
    let request = &seen[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/sms")
    );
    assert_eq!(
        request.json(),
        serde_json::json!({ "to": "+15550100", "text": "Your table is ready" })
    );
    assert_eq!(request.header("idempotency-key"), Some("act-sms-1"));
    assert_eq!(request.header("authorization"), Some("Bearer sms-token"));
    assert_eq!(request.header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn call_posts_the_message_without_a_token() {
    let provider = Provider::start(Answer::Status(200, "queued")).await;
    let mut config = DeliveryConfig::new();
    config.call(HttpProvider::new(provider.url("/calls")));

    let outcome = deliver(
        &config,
        Outbound::Call {
            to: "+15550101",
            message: "Your order has shipped",
            action: "act-call-1",
        },
    )
    .await;

    assert_delivered(&outcome, "200 OK: queued");
    let request = &provider.seen()[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/calls")
    );
    assert_eq!(
        request.json(),
        serde_json::json!({ "to": "+15550101", "message": "Your order has shipped" })
    );
    assert_eq!(request.header("idempotency-key"), Some("act-call-1"));
    assert_eq!(request.header("authorization"), None);
}

#[tokio::test]
async fn a_refusal_fails_and_a_server_error_is_unknown_with_status_and_body() {
    for (status, body, failed) in [
        (422, "unknown number", true),
        (500, "upstream exploded", false),
    ] {
        let provider = Provider::start(Answer::Status(status, body)).await;
        let mut config = DeliveryConfig::new();
        config.sms(HttpProvider::new(provider.url("/sms")));
        let outcome = deliver(
            &config,
            Outbound::Sms {
                to: "+1",
                text: "t",
                action: "act-5xx",
            },
        )
        .await;
        if failed {
            assert_failed(&outcome, "422 Unprocessable Entity: unknown number");
        } else {
            assert_unknown(&outcome, "500 Internal Server Error: upstream exploded");
        }
    }
}

#[tokio::test]
async fn a_provider_echoing_the_token_does_not_bring_it_into_the_outcome() {
    let provider =
        Provider::start(Answer::Status(400, "bad request; you sent Bearer tok-77a1")).await;
    let mut config = DeliveryConfig::new();
    config.sms(HttpProvider::new(provider.url("/sms")).with_token("tok-77a1"));
    let outcome = deliver(
        &config,
        Outbound::Sms {
            to: "+1",
            text: "t",
            action: "act-echo",
        },
    )
    .await;
    assert_failed(&outcome, "you sent Bearer ***");
    assert!(!outcome.detail().contains("tok-77a1"), "{outcome:?}");
}

#[tokio::test]
async fn provider_body_is_quoted_up_to_500_bytes() {
    let long: &'static str = "x".repeat(2000).leak();
    let provider = Provider::start(Answer::Status(400, long)).await;
    let mut config = DeliveryConfig::new();
    config.sms(HttpProvider::new(provider.url("/sms")));

    let outcome = deliver(
        &config,
        Outbound::Sms {
            to: "+1",
            text: "t",
            action: "act-400",
        },
    )
    .await;

    assert_failed(&outcome, "400 Bad Request");
    let quoted = outcome.detail().matches('x').count();
    assert_eq!(quoted, 500, "{outcome:?}");
}

#[tokio::test]
async fn slow_provider_is_unknown() {
    let provider = Provider::start(Answer::After(Duration::from_secs(5), 200)).await;
    let mut config = DeliveryConfig::new();
    config
        .sms(HttpProvider::new(provider.url("/sms")))
        .timeout(Duration::from_millis(500));

    let outcome = deliver(
        &config,
        Outbound::Sms {
            to: "+1",
            text: "t",
            action: "act-slow-sms",
        },
    )
    .await;

    assert_unknown(&outcome, "no answer");
    assert_eq!(provider.seen().len(), 1);
}

#[tokio::test]
async fn provider_hanging_up_after_the_request_is_unknown() {
    let provider = Provider::start(Answer::HangUp).await;
    let mut config = DeliveryConfig::new();
    config.sms(HttpProvider::new(provider.url("/sms")));

    let outcome = deliver(
        &config,
        Outbound::Sms {
            to: "+1",
            text: "t",
            action: "act-hangup",
        },
    )
    .await;

    assert_unknown(&outcome, "after the request was sent");
}

#[tokio::test]
async fn provider_not_listening_fails() {
    let port = unused_port().await;
    let mut config = DeliveryConfig::new();
    config.call(HttpProvider::new(format!("http://127.0.0.1:{port}/calls")));

    let outcome = deliver(
        &config,
        Outbound::Call {
            to: "+1",
            message: "m",
            action: "act-refused",
        },
    )
    .await;

    assert_failed(&outcome, "could not connect");
}

#[tokio::test]
async fn https_to_a_server_without_tls_fails_the_handshake() {
    let provider = Provider::start(Answer::Status(200, "ok")).await;
    let mut config = DeliveryConfig::new();
    config.sms(HttpProvider::new(format!("https://{}/sms", provider.addr)));

    let outcome = deliver(
        &config,
        Outbound::Sms {
            to: "+1",
            text: "t",
            action: "act-tls",
        },
    )
    .await;

    assert_failed(&outcome, "TLS handshake");
    assert!(provider.seen().is_empty());
}

#[tokio::test]
async fn integration_sends_with_the_connection_credential() {
    let provider = Provider::start(Answer::Status(200, r#"{"ok":true}"#)).await;
    let mut config = DeliveryConfig::new();
    config.credential("crm-api", "crm-secret");
    let body = serde_json::json!({ "status": "contacted" });

    let outcome = deliver(
        &config,
        Outbound::Integration {
            connection: "crm",
            base_url: &provider.url("/api"),
            credential: Some("crm-api"),
            ca_certificates: None,
            method: "patch",
            path: "/contacts/7?notify=false",
            headers: None,
            body: Some(&body),
            timeout: None,
            max_response_bytes: Some(64 << 10),
            action: "act-int-1",
        },
    )
    .await;

    assert_delivered(&outcome, "200 OK");
    assert!(!outcome.detail().contains("crm-secret"));
    // The answer comes back whole, for the caller to check.
    let Delivery::Delivered {
        answer: Some(answer),
        ..
    } = &outcome
    else {
        panic!("no answer in {outcome:?}");
    };
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, br#"{"ok":true}"#);
    let request = &provider.seen()[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("PATCH", "/api/contacts/7?notify=false")
    );
    assert_eq!(request.json(), body);
    assert_eq!(request.header("idempotency-key"), Some("act-int-1"));
    assert_eq!(request.header("authorization"), Some("Bearer crm-secret"));
}

#[tokio::test]
async fn integration_without_credential_sends_no_authorization() {
    let provider = Provider::start(Answer::Status(204, "")).await;
    let config = DeliveryConfig::new();

    let outcome = deliver(
        &config,
        Outbound::Integration {
            connection: "public",
            base_url: &provider.url(""),
            credential: None,
            ca_certificates: None,
            method: "DELETE",
            path: "/items/3",
            headers: None,
            body: None,
            timeout: None,
            max_response_bytes: None,
            action: "act-int-2",
        },
    )
    .await;

    assert_delivered(&outcome, "204 No Content");
    let request = &provider.seen()[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("DELETE", "/items/3")
    );
    assert_eq!(request.header("authorization"), None);
    assert!(request.body.is_empty());
}

#[tokio::test]
async fn integration_with_a_missing_credential_fails_naming_the_variable() {
    let provider = Provider::start(Answer::Status(200, "ok")).await;
    let config = DeliveryConfig::new();

    let outcome = deliver(
        &config,
        Outbound::Integration {
            connection: "crm",
            base_url: &provider.url("/api"),
            credential: Some("crm-api"),
            ca_certificates: None,
            method: "POST",
            path: "/contacts",
            headers: None,
            body: None,
            timeout: None,
            max_response_bytes: None,
            action: "act-int-3",
        },
    )
    .await;

    assert_eq!(credential_env_var("crm-api"), "HANE_CREDENTIAL_CRM_API");
    assert_failed(&outcome, "set HANE_CREDENTIAL_CRM_API");
    assert!(provider.seen().is_empty());
}

#[tokio::test]
async fn integration_path_cannot_leave_the_connection_host() {
    let provider = Provider::start(Answer::Status(200, "ok")).await;
    let mut config = DeliveryConfig::new();
    config.credential("crm", "crm-secret");

    let outcome = deliver(
        &config,
        Outbound::Integration {
            connection: "crm",
            base_url: &provider.url(""),
            credential: Some("crm"),
            ca_certificates: None,
            method: "GET",
            path: "@evil.example/steal",
            headers: None,
            body: None,
            timeout: None,
            max_response_bytes: None,
            action: "act-int-4",
        },
    )
    .await;

    assert_failed(&outcome, "must start with /");
    assert!(provider.seen().is_empty());
}

#[test]
fn secrets_print_as_stars() {
    let secret = Secret::new("hunter2");
    assert_eq!(format!("{secret:?}"), "***");
    assert_eq!(secret.to_string(), "***");
    assert_eq!(secret.expose(), "hunter2");
    let mut config = DeliveryConfig::new();
    config
        .credential("crm", "hunter2")
        .sms(HttpProvider::new("http://127.0.0.1/").with_token("hunter2"));
    assert!(!format!("{config:?}").contains("hunter2"));
}

#[test]
fn deliver_can_run_on_a_spawned_task() {
    fn assert_send<T: Send>(_: &T) {}
    let config = DeliveryConfig::new();
    let future = deliver(&config, email("a@example.com", "act-send"));
    assert_send(&future);
}
