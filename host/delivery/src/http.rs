//! One HTTP/1.1 request to a provider or customer API, on hane-http's
//! client: one attempt on a connection of its own, with a deadline checked
//! at each step, so a failure says whether the request can have left.

use hane_http::{Client, Error, Reply};
use http::header::{AUTHORIZATION, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};

use super::{ApiAnswer, BODY_EXCERPT_BYTES, Deadline, Delivery, Secret};

/// One request, already checked.
pub(super) struct Request<'a> {
    /// Who it goes to, for details: "SMS provider", "connection \"crm\"".
    pub what: &'a str,
    /// A client that keeps no connections, trusting the roots the
    /// destination needs.
    pub client: &'a Client,
    /// What a person does about a certificate no trusted root signed.
    pub untrusted: &'a str,
    pub method: Method,
    pub url: Uri,
    pub bearer: Option<&'a Secret>,
    /// Further headers; never `Authorization` or `Idempotency-Key`.
    pub headers: &'a [(String, String)],
    /// JSON.
    pub body: Option<Vec<u8>>,
    pub idempotency_key: &'a str,
    /// Reads a successful answer whole, up to this many bytes, into
    /// [`Delivery::Delivered`]'s answer; `None` reads what details quote.
    pub answer_cap: Option<usize>,
}

pub(super) async fn send(request: Request<'_>, deadline: Deadline) -> Delivery {
    let what = request.what;
    let http = match build(&request, deadline) {
        Ok(http) => http,
        Err(problem) => return Delivery::failed(format!("{what}: {problem}; nothing was sent")),
    };
    // An outbound action is sent once, on a connection of its own: never on
    // one the server may be closing.
    let mut reply = match request.client.send(http).await {
        Ok(reply) => reply,
        Err(error @ Error::Untrusted { .. }) => {
            return Delivery::failed(format!("{error}; nothing was sent ({})", request.untrusted));
        }
        Err(error) if error.nothing_sent() => {
            return Delivery::failed(format!("{error}; nothing was sent"));
        }
        Err(error) => return Delivery::unknown(format!("{error}; it may have been acted on")),
    };
    let status = reply.status;
    let content_type = reply
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // A successful answer the caller checks is read whole, up to its cap;
    // otherwise only what the detail quotes.
    let answer_cap = request.answer_cap.filter(|_| status.is_success());
    let read = read_body(&mut reply, answer_cap.unwrap_or(BODY_EXCERPT_BYTES)).await;
    // A provider that echoes the request must not carry the credential
    // into the outcome, which is stored and shown.
    let bytes = match request.bearer {
        Some(secret) if !secret.expose().is_empty() => {
            redact(&read.bytes, secret.expose().as_bytes())
        }
        _ => read.bytes,
    };
    let mut quoted = excerpt(&bytes);
    quoted.push_str(read.note);
    let mut outcome = classify(reply.server(), status, &quoted);
    if let (Delivery::Delivered { detail, answer }, Some(cap)) = (&mut outcome, answer_cap) {
        if read.whole && bytes.len() <= cap {
            *answer = Some(ApiAnswer {
                status: status.as_u16(),
                content_type,
                body: bytes,
            });
        } else if read.note.is_empty() {
            detail.push_str(&format!(
                " (the answer is longer than {cap} bytes, the connection's maxResponseBytes, and was not read whole)"
            ));
        }
    }
    outcome
}

/// `bytes` with each `secret` in it replaced by `***`.
fn redact(bytes: &[u8], secret: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = rest.windows(secret.len()).position(|w| w == secret) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(b"***");
        rest = &rest[at + secret.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Why [`build`] could not make the request; says which part is bad
/// without quoting the request.
#[derive(Debug, thiserror::Error)]
enum BuildError {
    #[error("the action id cannot be sent in a header")]
    IdempotencyKey,
    #[error(transparent)]
    Headers(#[from] HeaderError),
}

/// The header `Idempotency-Key`, which a delivery sets itself.
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

fn build(request: &Request<'_>, deadline: Deadline) -> Result<hane_http::Request, BuildError> {
    let key =
        HeaderValue::from_str(request.idempotency_key).map_err(|_| BuildError::IdempotencyKey)?;
    let http = hane_http::Request::new(request.method.clone(), request.url.clone())
        .named(request.what)
        .deadline(deadline.at, deadline.timeout)
        .header(IDEMPOTENCY_KEY, key);
    let mut http = with_headers(http, request.headers, &[IDEMPOTENCY_KEY], request.bearer)?;
    if let Some(body) = &request.body {
        http = http.json(body.clone());
    }
    Ok(http)
}

/// Why a request's headers cannot be sent; names the header, never a
/// value.
#[derive(Debug, thiserror::Error)]
pub(super) enum HeaderError {
    #[error("{0:?} is not a header name")]
    Name(String),
    #[error("header {0} is set by hane itself")]
    Reserved(String),
    #[error("the value of header {0} cannot be sent")]
    Value(String),
    #[error("the credential cannot be sent in a header (it holds control characters)")]
    Credential,
}

/// `request` with `headers` and then, when there is a credential, its
/// `Authorization: Bearer` (marked sensitive): the one way reads and
/// deliveries add them. `Authorization`, which is the credential's, and
/// the `reserved` headers the caller sets itself are refused among
/// `headers`.
pub(super) fn with_headers(
    mut request: hane_http::Request,
    headers: &[(String, String)],
    reserved: &[HeaderName],
    bearer: Option<&Secret>,
) -> Result<hane_http::Request, HeaderError> {
    for (name, value) in headers {
        let header =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| HeaderError::Name(name.clone()))?;
        if header == AUTHORIZATION || reserved.contains(&header) {
            return Err(HeaderError::Reserved(header.to_string()));
        }
        let value =
            HeaderValue::from_str(value).map_err(|_| HeaderError::Value(header.to_string()))?;
        request = request.header(header, value);
    }
    if let Some(secret) = bearer {
        let mut value = HeaderValue::from_str(&format!("Bearer {}", secret.expose()))
            .map_err(|_| HeaderError::Credential)?;
        value.set_sensitive(true);
        request = request.header(AUTHORIZATION, value);
    }
    Ok(request)
}

/// What [`read_body`] read of an answer's body.
struct Body {
    bytes: Vec<u8>,
    /// It ended: `bytes` is the whole body.
    whole: bool,
    /// Why it stopped early, for the detail; empty otherwise.
    note: &'static str,
}

/// The answer's body until it ends or passes `keep` bytes. The status has
/// already decided the outcome, so a body that fails or runs past the
/// deadline only shortens what is read.
async fn read_body(reply: &mut Reply, keep: usize) -> Body {
    let mut bytes = Vec::new();
    while bytes.len() <= keep {
        let note = match reply.chunk().await {
            Ok(None) => {
                return Body {
                    bytes,
                    whole: true,
                    note: "",
                };
            }
            Ok(Some(data)) => {
                bytes.extend_from_slice(&data);
                continue;
            }
            Err(Error::TimedOut { .. }) => " (the rest of the body did not arrive in time)",
            Err(_) => " (the rest of the body was lost)",
        };
        return Body {
            bytes,
            whole: false,
            note,
        };
    }
    Body {
        bytes,
        whole: false,
        note: "",
    }
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
        200..=299 => Delivery::Delivered {
            detail,
            answer: None,
        },
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
    fn secrets_are_redacted_from_bodies() {
        assert_eq!(
            redact(b"{\"echo\":\"tok tok\"}", b"tok"),
            b"{\"echo\":\"*** ***\"}"
        );
        assert_eq!(redact(b"nothing", b"tok"), b"nothing");
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
