//! Blocking HTTP requests through the host's `wasi:http/outgoing-handler`.
//!
//! The host decides which requests leave the sandbox: a request it refuses
//! comes back as [`Error::Denied`] naming the URL, so the model can ask for
//! access instead of retrying. Responses are read into memory up to
//! [`Request::max_response_bytes`]; the rest of the body is not read.

use crate::Error;

/// Response bytes read when a [`Request`] does not say otherwise: 1 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// An HTTP request to send with [`send`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Method such as `GET`, sent as written.
    pub method: String,
    /// Absolute `http` or `https` URL; a `#fragment` is not sent.
    pub url: String,
    /// Header names and values, in order; the host may refuse some names.
    pub headers: Vec<(String, String)>,
    /// Body to send; empty sends none.
    pub body: Vec<u8>,
    /// Response body bytes to keep; past this the response is marked
    /// [`Response::truncated`] and the rest is not read.
    pub max_response_bytes: usize,
}

impl Request {
    /// A `GET` of `url` with no headers, reading up to
    /// [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub fn get(url: impl Into<String>) -> Self {
        Self {
            method: "GET".to_owned(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets how many response body bytes to keep.
    #[must_use]
    pub fn max_response_bytes(mut self, n: usize) -> Self {
        self.max_response_bytes = n;
        self
    }
}

/// A response received by [`send`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code such as 200.
    pub status: u16,
    /// Header names (as the host reports them, usually lowercase) and values,
    /// in order; values that are not UTF-8 are converted lossily.
    pub headers: Vec<(String, String)>,
    /// The body, at most [`Request::max_response_bytes`] long.
    pub body: Vec<u8>,
    /// Whether the body was longer than [`Request::max_response_bytes`].
    pub truncated: bool,
}

/// Sends `req` and waits for the response and its body.
///
/// # Errors
///
/// - [`Error::InvalidInput`] when the URL is not an absolute `http` or
///   `https` URL, or the host refuses a header;
/// - [`Error::Denied`] naming the URL when the host does not allow the
///   request;
/// - [`Error::Failed`] with the `wasi:http` error code for anything else
///   (DNS, connection, timeouts), and always outside a wasm32 component.
pub fn send(req: Request) -> Result<Response, Error> {
    let target = Target::parse(&req.url)?;
    transport::send(&req, &target)
}

/// `GET`s `url` with default settings; see [`send`].
///
/// # Errors
///
/// As [`send`].
pub fn get(url: &str) -> Result<Response, Error> {
    send(Request::get(url))
}

/// The parts of a URL that `wasi:http` takes separately.
#[derive(Debug, PartialEq, Eq)]
struct Target<'a> {
    https: bool,
    authority: &'a str,
    path_with_query: String,
}

impl<'a> Target<'a> {
    fn parse(url: &'a str) -> Result<Self, Error> {
        let invalid = |why: &str| Error::InvalidInput(format!("{url}: {why}"));
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid(
                "urls may not contain whitespace or control characters",
            ));
        }
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(invalid("not an absolute http or https url"));
        };
        let https = if scheme.eq_ignore_ascii_case("https") {
            true
        } else if scheme.eq_ignore_ascii_case("http") {
            false
        } else {
            return Err(invalid("only http and https urls are supported"));
        };
        let rest = rest
            .split_once('#')
            .map_or(rest, |(before, _fragment)| before);
        let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        if authority.is_empty() {
            return Err(invalid("the url has no host"));
        }
        if authority.contains('@') {
            return Err(invalid(
                "credentials in urls are not supported; send a header instead",
            ));
        }
        let path_with_query = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        Ok(Self {
            https,
            authority,
            path_with_query,
        })
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod transport {
    use super::{Request, Response, Target};
    use crate::Error;

    pub(super) fn send(_req: &Request, _target: &Target<'_>) -> Result<Response, Error> {
        Err(Error::Failed(
            "http is only available inside a wasm32-wasip2 component".to_owned(),
        ))
    }
}

#[cfg(target_arch = "wasm32")]
mod transport {
    use wasi::http::outgoing_handler;
    use wasi::http::types::{
        ErrorCode, Fields, IncomingResponse, Method, OutgoingBody, OutgoingRequest, Scheme,
    };
    use wasi::io::streams::StreamError;

    use super::{Request, Response, Target};
    use crate::Error;

    /// Largest write `blocking-write-and-flush` accepts in one call.
    const WRITE_CHUNK: usize = 4096;
    /// Bytes asked for per read of the response body.
    const READ_CHUNK: u64 = 64 * 1024;

    pub(super) fn send(req: &Request, target: &Target<'_>) -> Result<Response, Error> {
        let url = req.url.as_str();
        let failed = |what: &str| Error::Failed(format!("{url}: {what}"));

        let entries: Vec<(String, Vec<u8>)> = req
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), value.clone().into_bytes()))
            .collect();
        let headers = Fields::from_list(&entries).map_err(|e| {
            Error::InvalidInput(format!("{url}: the host refused a request header: {e:?}"))
        })?;

        let request = OutgoingRequest::new(headers);
        let scheme = if target.https {
            Scheme::Https
        } else {
            Scheme::Http
        };
        request
            .set_method(&method(&req.method))
            .map_err(|()| Error::InvalidInput(format!("{url}: invalid method {}", req.method)))?;
        request
            .set_scheme(Some(&scheme))
            .map_err(|()| failed("the host refused the scheme"))?;
        request
            .set_authority(Some(target.authority))
            .map_err(|()| Error::InvalidInput(format!("{url}: invalid host")))?;
        request
            .set_path_with_query(Some(&target.path_with_query))
            .map_err(|()| Error::InvalidInput(format!("{url}: invalid path")))?;

        // The body handle must be taken before `handle` consumes the request,
        // and written after it, so the host is already reading it.
        let body = request
            .body()
            .map_err(|()| failed("request body already taken"))?;
        let future =
            outgoing_handler::handle(request, None).map_err(|code| from_code(url, code))?;
        if !req.body.is_empty() {
            let stream = body
                .write()
                .map_err(|()| failed("request body stream already taken"))?;
            for chunk in req.body.chunks(WRITE_CHUNK) {
                stream
                    .blocking_write_and_flush(chunk)
                    .map_err(|e| failed(&format!("sending the body: {}", stream_error(e))))?;
            }
            drop(stream);
        }
        OutgoingBody::finish(body, None).map_err(|code| from_code(url, code))?;

        let response = loop {
            match future.get() {
                Some(result) => break result,
                None => future.subscribe().block(),
            }
        };
        let response = response
            .map_err(|()| failed("response already taken"))?
            .map_err(|code| from_code(url, code))?;
        read_response(url, &response, req.max_response_bytes)
    }

    fn read_response(
        url: &str,
        response: &IncomingResponse,
        max_bytes: usize,
    ) -> Result<Response, Error> {
        let failed = |what: String| Error::Failed(format!("{url}: {what}"));
        let headers = {
            let fields = response.headers();
            fields
                .entries()
                .into_iter()
                .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
                .collect()
        };
        let incoming = response
            .consume()
            .map_err(|()| failed("response body already taken".to_owned()))?;
        let stream = incoming
            .stream()
            .map_err(|()| failed("response body stream already taken".to_owned()))?;
        let mut body = Vec::new();
        let mut truncated = false;
        loop {
            // Ask for one byte past the cap, to learn whether there is more.
            let want = (max_bytes.saturating_add(1) - body.len()).min(READ_CHUNK as usize) as u64;
            match stream.blocking_read(want) {
                Ok(chunk) => body.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(e) => return Err(failed(format!("reading the body: {}", stream_error(e)))),
            }
            if body.len() > max_bytes {
                body.truncate(max_bytes);
                truncated = true;
                break;
            }
        }
        // Child resources go before their parents.
        drop(stream);
        drop(incoming);
        Ok(Response {
            status: response.status(),
            headers,
            body,
            truncated,
        })
    }

    fn method(name: &str) -> Method {
        match name {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "CONNECT" => Method::Connect,
            "OPTIONS" => Method::Options,
            "TRACE" => Method::Trace,
            "PATCH" => Method::Patch,
            other => Method::Other(other.to_owned()),
        }
    }

    fn from_code(url: &str, code: ErrorCode) -> Error {
        match code {
            ErrorCode::HttpRequestDenied => {
                Error::Denied(format!("{url}: the host does not allow this request"))
            }
            other => Error::Failed(format!("{url}: {other:?}")),
        }
    }

    fn stream_error(err: StreamError) -> String {
        match err {
            StreamError::Closed => "stream closed".to_owned(),
            StreamError::LastOperationFailed(e) => e.to_debug_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_builder_sets_fields() {
        let req = Request::get("https://example.com/a")
            .header("accept", "text/plain")
            .header("x-a", "1")
            .max_response_bytes(10);
        assert_eq!(req.method, "GET");
        assert_eq!(req.url, "https://example.com/a");
        assert_eq!(
            req.headers,
            [
                ("accept".to_owned(), "text/plain".to_owned()),
                ("x-a".to_owned(), "1".to_owned())
            ]
        );
        assert!(req.body.is_empty());
        assert_eq!(req.max_response_bytes, 10);
        assert_eq!(
            Request::get("http://x").max_response_bytes,
            DEFAULT_MAX_RESPONSE_BYTES
        );
    }

    #[test]
    fn splits_urls_for_wasi_http() {
        let t = Target::parse("https://example.com:8443/a/b?q=1#frag").unwrap();
        assert_eq!(
            t,
            Target {
                https: true,
                authority: "example.com:8443",
                path_with_query: "/a/b?q=1".to_owned()
            }
        );
        let t = Target::parse("HTTP://example.com").unwrap();
        assert!(!t.https);
        assert_eq!(t.path_with_query, "/");
        let t = Target::parse("http://example.com?x=y").unwrap();
        assert_eq!(t.authority, "example.com");
        assert_eq!(t.path_with_query, "/?x=y");
    }

    #[test]
    fn refuses_urls_it_cannot_send() {
        for url in [
            "ftp://example.com/a",
            "file:///etc/passwd",
            "example.com/a",
            "https://",
            "https:///path",
            "http://user:pw@example.com/",
            "http://example.com/a b",
            "",
        ] {
            let err = Target::parse(url).unwrap_err();
            assert!(matches!(err, Error::InvalidInput(_)), "{url}: {err:?}");
        }
    }

    #[test]
    fn send_validates_the_url_before_anything_else() {
        assert!(
            matches!(get("ftp://example.com"), Err(Error::InvalidInput(m)) if m.contains("only http and https"))
        );
    }

    #[test]
    fn send_fails_off_wasm() {
        assert_eq!(
            get("https://example.com"),
            Err(Error::Failed(
                "http is only available inside a wasm32-wasip2 component".into()
            ))
        );
    }
}
