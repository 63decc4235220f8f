//! `http.get`: fetches an `http` or `https` URL.
//!
//! The request goes through the host's `wasi:http` outgoing handler, which
//! decides which URLs are reachable: a refused URL is [`Error::Denied`], and
//! the model can ask for access rather than retry. The body comes back as
//! text (UTF-8, invalid sequences replaced), cut at `max_bytes`.
//!
//! [`get`] is the whole operation; [`request`] and [`output`] are its two
//! halves, testable without a network.
//!
//! # Examples
//!
//! ```
//! use http_get::{request, GetInput};
//!
//! let input = GetInput {
//!     url: "https://example.com/page".into(),
//!     headers: [("Accept".to_owned(), "text/html".to_owned())].into(),
//!     max_bytes: Some(4096),
//! };
//! let req = request(&input)?;
//! assert_eq!(req.method, "GET");
//! assert_eq!(req.max_response_bytes, 4096);
//! # Ok::<(), hane_guest::Error>(())
//! ```

use std::collections::BTreeMap;

use hane_guest::Error;
use hane_guest::http::{self, Request, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Body bytes returned when the input gives no `max_bytes`: 1 MiB.
pub const DEFAULT_MAX_BYTES: u32 = 1024 * 1024;
/// Largest `max_bytes` accepted: 8 MiB.
pub const MAX_MAX_BYTES: u32 = 8 * 1024 * 1024;
/// Longest URL accepted, in bytes.
pub const MAX_URL_BYTES: usize = 8 * 1024;
/// Most request headers accepted.
pub const MAX_HEADERS: usize = 32;
/// Most bytes of request header names and values, together.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// Fetch an http or https URL with GET.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetInput {
    /// Absolute http or https URL.
    pub url: String,
    /// Request headers, name to value; at most 32, 8 KiB in all. The host
    /// may refuse some names.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Most body bytes to return, up to 8388608 (8 MiB); default 1048576
    /// (1 MiB). A longer body is cut and `truncated` is true.
    #[serde(default)]
    #[schemars(range(max = 8_388_608))]
    pub max_bytes: Option<u32>,
}

/// The response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct GetOutput {
    /// The URL as given.
    pub url: String,
    /// HTTP status code, such as 200 or 404.
    pub status: u16,
    /// Response headers by lowercase name; repeated headers are joined with
    /// ", ".
    pub headers: BTreeMap<String, String>,
    /// The body as UTF-8 text, invalid sequences replaced with U+FFFD.
    pub body: String,
    /// Whether the body was longer than `max_bytes` and was cut.
    pub truncated: bool,
    /// Body bytes received (at most `max_bytes`), before any replacement.
    pub bytes: u32,
}

hane_guest::operation! {
    name: "http.get",
    impact: Read,
    run: get,
}

/// Fetches `input.url`.
///
/// # Errors
///
/// As [`request`] and [`hane_guest::http::send`]: [`Error::InvalidInput`]
/// for a URL that is not `http` or `https` or inputs over their caps,
/// [`Error::Denied`] when the host refuses the URL, and [`Error::Failed`]
/// when the request fails on the way.
pub fn get(input: GetInput) -> Result<GetOutput, Error> {
    let response = http::send(request(&input)?)?;
    Ok(output(input.url, response))
}

/// Builds the request for `input`, checking its caps.
///
/// # Errors
///
/// [`Error::InvalidInput`] when the URL, the headers or `max_bytes` exceed
/// [`MAX_URL_BYTES`], [`MAX_HEADERS`], [`MAX_HEADER_BYTES`] or
/// [`MAX_MAX_BYTES`].
pub fn request(input: &GetInput) -> Result<Request, Error> {
    if input.url.len() > MAX_URL_BYTES {
        return Err(Error::InvalidInput(format!(
            "the url is {} bytes long; at most {MAX_URL_BYTES} are allowed",
            input.url.len()
        )));
    }
    if input.headers.len() > MAX_HEADERS {
        return Err(Error::InvalidInput(format!(
            "{} headers given; at most {MAX_HEADERS} are allowed",
            input.headers.len()
        )));
    }
    let header_bytes: usize = input.headers.iter().map(|(n, v)| n.len() + v.len()).sum();
    if header_bytes > MAX_HEADER_BYTES {
        return Err(Error::InvalidInput(format!(
            "the headers are {header_bytes} bytes long; at most {MAX_HEADER_BYTES} are allowed"
        )));
    }
    let max_bytes = input.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
    if max_bytes > MAX_MAX_BYTES {
        return Err(Error::InvalidInput(format!(
            "max_bytes must be at most {MAX_MAX_BYTES}, not {max_bytes}"
        )));
    }
    let request = input
        .headers
        .iter()
        .fold(Request::get(&input.url), |req, (name, value)| {
            req.header(name, value)
        });
    Ok(request.max_response_bytes(max_bytes as usize))
}

/// The output for `response` to a request for `url`.
pub fn output(url: String, response: Response) -> GetOutput {
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in response.headers {
        headers
            .entry(name.to_ascii_lowercase())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(&value);
            })
            .or_insert(value);
    }
    GetOutput {
        url,
        status: response.status,
        headers,
        // The body is capped at MAX_MAX_BYTES, which fits in u32.
        bytes: u32::try_from(response.body.len()).unwrap_or(u32::MAX),
        body: String::from_utf8_lossy(&response.body).into_owned(),
        truncated: response.truncated,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn input(url: &str) -> GetInput {
        GetInput {
            url: url.to_owned(),
            headers: BTreeMap::new(),
            max_bytes: None,
        }
    }

    #[test]
    fn builds_a_get_with_headers_and_the_byte_cap() {
        let mut i = input("https://example.com/a?b=c");
        i.headers.insert("Accept".into(), "text/plain".into());
        i.headers.insert("X-Trace".into(), "1".into());
        let req = request(&i).unwrap();
        assert_eq!(req.method, "GET");
        assert_eq!(req.url, "https://example.com/a?b=c");
        assert_eq!(
            req.headers,
            [
                ("Accept".to_owned(), "text/plain".to_owned()),
                ("X-Trace".to_owned(), "1".to_owned())
            ]
        );
        assert!(req.body.is_empty());
        assert_eq!(req.max_response_bytes, DEFAULT_MAX_BYTES as usize);

        i.max_bytes = Some(MAX_MAX_BYTES);
        assert_eq!(request(&i).unwrap().max_response_bytes, 8 * 1024 * 1024);
    }

    #[test]
    fn caps_the_input() {
        let mut i = input("https://example.com");
        i.max_bytes = Some(MAX_MAX_BYTES + 1);
        assert!(matches!(request(&i), Err(Error::InvalidInput(m)) if m.contains("max_bytes")));

        let mut i = input("https://example.com");
        for n in 0..=MAX_HEADERS {
            i.headers.insert(format!("x-{n}"), "v".into());
        }
        assert!(matches!(request(&i), Err(Error::InvalidInput(m)) if m.contains("33 headers")));

        let mut i = input("https://example.com");
        i.headers
            .insert("x-big".into(), "v".repeat(MAX_HEADER_BYTES));
        assert!(matches!(request(&i), Err(Error::InvalidInput(m)) if m.contains("headers are")));

        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_BYTES));
        assert!(
            matches!(request(&input(&long)), Err(Error::InvalidInput(m)) if m.contains("url is"))
        );
    }

    #[test]
    fn only_http_and_https_urls_are_fetched() {
        for url in [
            "ftp://example.com/f",
            "file:///etc/passwd",
            "example.com",
            "gopher://x",
        ] {
            let err = get(input(url)).unwrap_err();
            assert!(matches!(err, Error::InvalidInput(_)), "{url}: {err:?}");
        }
        // A valid URL gets as far as the transport, which exists only in a
        // component.
        let err = get(input("https://example.com")).unwrap_err();
        assert!(matches!(err, Error::Failed(m) if m.contains("wasm32-wasip2")));
    }

    #[test]
    fn output_lowercases_and_joins_headers_and_reads_the_body_lossily() {
        let response = Response {
            status: 206,
            headers: vec![
                ("Content-Type".into(), "text/plain".into()),
                ("set-cookie".into(), "a=1".into()),
                ("Set-Cookie".into(), "b=2".into()),
            ],
            body: b"caf\xc3\xa9 \xff".to_vec(),
            truncated: true,
        };
        let out = output("https://example.com/x".into(), response);
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({
                "url": "https://example.com/x",
                "status": 206,
                "headers": {"content-type": "text/plain", "set-cookie": "a=1, b=2"},
                "body": "café \u{fffd}",
                "truncated": true,
                "bytes": 7,
            })
        );
    }

    #[test]
    fn schemas_describe_the_json() {
        let d = hane_guest::__private::describe(get, "http.get", "0", "", hane_guest::Impact::Read);
        let schema: Value = serde_json::from_str(&d.input_schema).unwrap();
        assert_eq!(schema["required"], json!(["url"]));
        assert_eq!(schema["properties"]["headers"]["type"], "object");
        assert_eq!(schema["properties"]["max_bytes"]["maximum"], 8_388_608);
        let schema: Value = serde_json::from_str(&d.output_schema).unwrap();
        assert_eq!(
            schema["required"],
            json!(["url", "status", "headers", "body", "truncated", "bytes"])
        );

        let err = hane_guest::__private::run_json(r#"{"url": "https://x", "method": "POST"}"#, get)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(m) if m.contains("unknown field `method`")));
    }
}
