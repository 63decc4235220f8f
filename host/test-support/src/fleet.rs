//! A customer's HTTP API on loopback for the connection tests:
//! `examples/services/fleet-maintenance/app.py`, the fleet-maintenance API
//! of a vehicle leasing company on FastAPI, in the Python that `cargo xtask
//! test` provisions (passed as `HANE_TEST_PYTHON` or found where it puts
//! it).
//!
//! Its operations, each needing `Authorization: Bearer TOKEN` with the
//! token it was started with (else 401): `getServiceHistory` (`GET
//! /vehicles/{registration}/services`, the vehicles of the example
//! ledger), `listServiceSlots` (`GET /slots?depot=…&date=…`),
//! `bookServiceSlot` (`POST /bookings`, 201; the same `Idempotency-Key`
//! again answers the same booking with 200 and books nothing) and
//! `getBooking` (`GET /bookings/{id}`). Its OpenAPI document is
//! [`openapi_file`]. Its test controls are [`FleetService::requests`],
//! [`FleetService::behave`] and [`FleetService::reset`].
//!
//! Requests go over HTTP/1.1, one connection each ([`FleetService::call`]):
//! plain, or over TLS for a service started with [`FleetService::start_tls`],
//! which serves HTTPS with the certificate a test gives it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::python::{self, PROVISION};

/// How long the service may take to start listening (about a second when
/// the machine is idle).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long [`FleetService::api`] and the test controls wait for an answer.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The service's folder: `examples/services/fleet-maintenance`.
pub fn folder() -> PathBuf {
    crate::examples().join("services/fleet-maintenance")
}

/// The service's program: `examples/services/fleet-maintenance/app.py`.
pub fn app() -> PathBuf {
    folder().join("app.py")
}

/// The committed OpenAPI document:
/// `examples/services/fleet-maintenance/openapi.json`.
pub fn openapi_file() -> PathBuf {
    folder().join("openapi.json")
}

/// The OpenAPI document the service generates from its code, as
/// `app.py --print-openapi` prints it (JSON, sorted keys, indent 2).
///
/// # Panics
///
/// The provisioned Python or its FastAPI is missing, or the program fails.
pub fn generated_openapi() -> String {
    let python =
        python::require("fastapi", "the connection tests").unwrap_or_else(|e| panic!("{e:#}"));
    let output = Command::new(&python)
        .arg(app())
        .arg("--print-openapi")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        output.status.success(),
        "app.py --print-openapi failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("the OpenAPI document is UTF-8")
}

/// Percent-encodes `text` as one segment of a URL's path (every byte but
/// the unreserved ones), such as a registration `架空 300 あ 10-02`.
pub fn path_segment(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// How an operation of the service behaves, set by
/// [`FleetService::behave`]. Whatever the mode, the request is counted and
/// its token checked first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetMode {
    /// As the API says.
    Normal,
    /// Sleeps 120 seconds before answering, far past any client's timeout.
    Hang,
    /// Answers 503 with a JSON error.
    Error,
    /// Answers 200 with a JSON body of 8 MiB.
    Large,
    /// Answers 302 to `http://127.0.0.1:9/elsewhere`, where nothing
    /// listens.
    Redirect,
    /// Does the operation's work, then answers its JSON without the first
    /// field of each object: a booking without its `id`, which the
    /// documented schema requires.
    Incomplete,
}

impl FleetMode {
    /// The mode's name in the service's test controls, such as `hang`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Hang => "hang",
            Self::Error => "error",
            Self::Large => "large",
            Self::Redirect => "redirect",
            Self::Incomplete => "incomplete",
        }
    }
}

/// One answer of the service.
#[derive(Clone, Debug)]
pub struct FleetResponse {
    /// The HTTP status, such as 201.
    pub status: u16,
    /// The headers, names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl FleetResponse {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON, `null` when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// One request the service received to one of its operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetRequest {
    /// The operation, such as `bookServiceSlot`.
    pub operation_id: String,
    /// The HTTP method.
    pub method: String,
    /// The path, percent-decoded, without the query.
    pub path: String,
    /// Whether it carried the right bearer token (the token itself is
    /// never reported).
    pub authorized: bool,
    /// Its `Idempotency-Key` header, if it had one.
    pub idempotency_key: Option<String>,
}

/// One booking the service made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetBooking {
    /// Its id, such as `B-0001`.
    pub id: String,
    /// The vehicle's registration.
    pub registration: String,
    /// The booked slot's id.
    pub slot: String,
    /// `booked`.
    pub status: String,
    /// When it was made, as the service wrote it (RFC 3339, UTC).
    pub created_at: String,
}

/// What the service received since it started or was last
/// [reset](FleetService::reset): its `GET /_test/requests`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetRequests {
    /// How many requests reached an operation, whatever their answer.
    pub total: usize,
    /// How many of them reached each operation, by operationId (every
    /// operation is there, with 0 when none did).
    pub counts: BTreeMap<String, usize>,
    /// Each of them, in the order received.
    pub requests: Vec<FleetRequest>,
    /// The bookings made, in the order made.
    pub bookings: Vec<FleetBooking>,
}

impl FleetRequests {
    /// How many requests reached `operation_id`.
    pub fn count(&self, operation_id: &str) -> usize {
        self.counts.get(operation_id).copied().unwrap_or(0)
    }

    fn parse(value: &Value) -> Option<Self> {
        let text = |v: &Value, key: &str| v.get(key)?.as_str().map(str::to_owned);
        let counts = value
            .get("counts")?
            .as_object()?
            .iter()
            .map(|(k, v)| Some((k.clone(), usize::try_from(v.as_u64()?).ok()?)))
            .collect::<Option<_>>()?;
        let requests = value
            .get("requests")?
            .as_array()?
            .iter()
            .map(|r| {
                Some(FleetRequest {
                    operation_id: text(r, "operationId")?,
                    method: text(r, "method")?,
                    path: text(r, "path")?,
                    authorized: r.get("authorized")?.as_bool()?,
                    idempotency_key: text(r, "idempotencyKey"),
                })
            })
            .collect::<Option<_>>()?;
        let bookings = value
            .get("bookings")?
            .as_array()?
            .iter()
            .map(|b| {
                Some(FleetBooking {
                    id: text(b, "id")?,
                    registration: text(b, "registration")?,
                    slot: text(b, "slot")?,
                    status: text(b, "status")?,
                    created_at: text(b, "createdAt")?,
                })
            })
            .collect::<Option<_>>()?;
        Some(Self {
            total: usize::try_from(value.get("total")?.as_u64()?).ok()?,
            counts,
            requests,
            bookings,
        })
    }
}

/// What a service started with [`FleetService::start_tls`] serves HTTPS
/// with, all PEM.
#[derive(Clone, Debug)]
pub struct FleetTls {
    /// The server's certificate, followed by any intermediates.
    pub certificate: String,
    /// Its private key.
    pub private_key: String,
    /// The CA certificates that sign it: what [`FleetService::call`] and
    /// the test controls trust (and nothing else).
    pub ca_certificates: String,
}

/// The TLS side of a service started with [`FleetService::start_tls`].
struct Tls {
    /// Trusts [`FleetTls::ca_certificates`] only.
    client: Arc<ClientConfig>,
    /// The certificate and key files uvicorn reads.
    _files: tempfile::TempDir,
}

/// `examples/services/fleet-maintenance/app.py`, run as a child process
/// for one test and killed when dropped (it also exits when our end of its
/// stdin closes, so it ends with the test process).
pub struct FleetService {
    child: Child,
    _stdin: ChildStdin,
    port: u16,
    token: String,
    log: tempfile::NamedTempFile,
    tls: Option<Tls>,
}

impl FleetService {
    /// Starts the service on a free loopback port; every API request must
    /// carry `Authorization: Bearer {token}`. Its slots are on the ten
    /// weekdays after today (in Japan).
    ///
    /// # Panics
    ///
    /// When it cannot: the provisioned Python or its FastAPI missing
    /// (naming the command that provisions them), or the service not
    /// coming up (with its log).
    pub fn start(token: &str) -> Self {
        Self::start_with(token, &[])
    }

    /// As [`FleetService::start`], with `args` added to `app.py`'s (such
    /// as `--today 2026-07-03`, the day its slots follow).
    ///
    /// # Panics
    ///
    /// As [`FleetService::start`].
    pub fn start_with(token: &str, args: &[&str]) -> Self {
        Self::try_start(token, args, None).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// As [`FleetService::start`], serving HTTPS (its test controls
    /// included) with `tls`'s certificate and key; [`FleetService::url`]
    /// is `https://`.
    ///
    /// # Panics
    ///
    /// As [`FleetService::start`], or `tls.ca_certificates` holds no
    /// certificate.
    pub fn start_tls(token: &str, tls: &FleetTls) -> Self {
        Self::try_start(token, &[], Some(tls)).unwrap_or_else(|e| panic!("{e:#}"))
    }

    fn try_start(token: &str, args: &[&str], tls: Option<&FleetTls>) -> Result<Self> {
        let python = python::require("fastapi, uvicorn", "the connection tests")?;
        let log = tempfile::NamedTempFile::new()?;
        let mut command = Command::new(&python);
        command
            .arg(app())
            .args(["--port", "0", "--exit-with-stdin", "--token", token])
            .args(args)
            .stderr(log.reopen()?);
        let tls = match tls {
            None => None,
            Some(tls) => {
                let files = tempfile::tempdir()?;
                let certificate = files.path().join("server.pem");
                let key = files.path().join("server-key.pem");
                std::fs::write(&certificate, &tls.certificate)?;
                std::fs::write(&key, &tls.private_key)?;
                command
                    .arg("--ssl-certfile")
                    .arg(&certificate)
                    .arg("--ssl-keyfile")
                    .arg(&key);
                Some(Tls {
                    client: client_config(&tls.ca_certificates)?,
                    _files: files,
                })
            }
        };
        let started = python::spawn(&mut command, START_TIMEOUT)?;
        let line = started.line;
        let mut service = Self {
            child: started.child,
            _stdin: started.stdin,
            port: 0,
            token: token.to_owned(),
            log,
            tls,
        };
        match line.trim().parse() {
            Ok(port) => service.port = port,
            Err(_) => bail!(
                "the fleet-maintenance service did not print its port within {}s (got {line:?}); \
                 is its Python provisioned ({PROVISION})? Its log:\n{}",
                START_TIMEOUT.as_secs(),
                service.log()
            ),
        }
        Ok(service)
    }

    /// `http://127.0.0.1:PORT`, or `https://` for a service started with
    /// [`FleetService::start_tls`], without a trailing slash.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The token it was started with.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// What the service wrote to its log so far (uvicorn's access log
    /// included).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// One request to the service as it comes: `method` to `path` (with
    /// its query, percent-encoded: see [`path_segment`]) with exactly
    /// `headers` (no token unless given) and `body` as JSON, on its own
    /// connection (over TLS when the service serves it); an error when
    /// nothing comes back within `timeout`.
    ///
    /// # Errors
    ///
    /// Connecting, sending or reading failed or took longer than
    /// `timeout`, or the answer is not HTTP.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
        timeout: Duration,
    ) -> std::io::Result<FleetResponse> {
        let addr = format!("127.0.0.1:{}", self.port);
        let stream = TcpStream::connect(&addr)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() || method != "GET" {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        let mut stream: Box<dyn ReadWrite> = match &self.tls {
            None => Box::new(stream),
            Some(tls) => {
                let name = ServerName::try_from("127.0.0.1").expect("an IP address");
                let connection = ClientConnection::new(Arc::clone(&tls.client), name)
                    .map_err(std::io::Error::other)?;
                Box::new(StreamOwned::new(connection, stream))
            }
        };
        stream.write_all(head.as_bytes())?;
        stream.write_all(body.as_bytes())?;
        stream.flush()?;
        let mut raw = Vec::new();
        match stream.read_to_end(&mut raw) {
            Ok(_) => {}
            // A TLS peer that closes without close_notify after a whole
            // answer (`Connection: close`) has still answered.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
            Err(e) => return Err(e),
        }
        parse_response(&raw).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "not an HTTP answer: {:?}",
                    String::from_utf8_lossy(&raw[..raw.len().min(200)])
                ),
            )
        })
    }

    /// One request to the service's API with its token (and
    /// `Idempotency-Key: key` when given), waiting up to 30 s.
    ///
    /// # Panics
    ///
    /// No answer comes.
    pub fn api(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        key: Option<&str>,
    ) -> FleetResponse {
        let authorization = format!("Bearer {}", self.token);
        let mut headers = vec![("Authorization", authorization.as_str())];
        if let Some(key) = key {
            headers.push(("Idempotency-Key", key));
        }
        self.call(method, path, &headers, body, TIMEOUT)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}; the service's log:\n{}", self.log()))
    }

    /// What the service received since it started or was last reset.
    ///
    /// # Panics
    ///
    /// The service does not answer, or answers something else.
    pub fn requests(&self) -> FleetRequests {
        let value = self.control("GET", "/_test/requests", None);
        FleetRequests::parse(&value)
            .unwrap_or_else(|| panic!("the service's /_test/requests is not as expected: {value}"))
    }

    /// Makes `operation_id` (such as `bookServiceSlot`) behave as `mode`
    /// from its next request on.
    ///
    /// # Panics
    ///
    /// The service does not take it (an unknown operation, say).
    pub fn behave(&self, operation_id: &str, mode: FleetMode) {
        let body = json!({"operationId": operation_id, "mode": mode.as_str()});
        self.control("POST", "/_test/behavior", Some(&body));
    }

    /// Forgets the requests received, the bookings made and every
    /// [behavior](FleetService::behave).
    ///
    /// # Panics
    ///
    /// The service does not answer.
    pub fn reset(&self) {
        self.control("POST", "/_test/reset", None);
    }

    fn control(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let response = self
            .call(method, path, &[], body, TIMEOUT)
            .with_context(|| format!("{method} {path}"))
            .unwrap_or_else(|e| panic!("{e:#}; the service's log:\n{}", self.log()));
        assert_eq!(
            response.status,
            200,
            "{method} {path} {}: {}",
            body.map(Value::to_string).unwrap_or_default(),
            String::from_utf8_lossy(&response.body)
        );
        response.json()
    }
}

impl Drop for FleetService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A connection to the service: TCP, or TLS over it.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// A TLS client configuration that trusts the certificates of `pem` and
/// nothing else.
fn client_config(pem: &str) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(certificate.context("the service's CA certificates")?)?;
    }
    if roots.is_empty() {
        bail!("the service's CA certificates hold no PEM certificate");
    }
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
    Ok(Arc::new(config))
}

/// An HTTP/1.1 answer read to the end of its connection.
fn parse_response(raw: &[u8]) -> Option<FleetResponse> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let rest = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Some(FleetResponse {
        status,
        headers,
        body,
    })
}

/// A chunked body's chunks, put together.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&rest[..line_end]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}
