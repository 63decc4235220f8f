//! A provider's error answer, mapped to a [`ModelError`].

use std::time::{Duration, SystemTime};

use http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::ModelError;

/// The most characters of a provider's message a [`ModelError`] quotes.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 1000;

/// Maps an error answer (`status`, `headers`, `body`) to a [`ModelError`].
/// `body` must already have had the credential redacted.
///
/// 401 and 403 are [`ModelError::Authentication`]; 429 is
/// [`ModelError::RateLimited`] with the answer's `Retry-After`; 408 is a
/// [`ModelError::Timeout`]-like retryable [`ModelError::Overloaded`]; 500,
/// 502, 503, 504, 529 and any other 5xx are [`ModelError::Overloaded`];
/// 400, 413 and 422 (and any other 4xx) are [`ModelError::ContextTooLong`]
/// when the provider says the input is too long, else
/// [`ModelError::InvalidRequest`].
pub fn from_status(status: StatusCode, headers: &HeaderMap, body: &str) -> ModelError {
    let json: Option<Value> = serde_json::from_str(body).ok();
    let message = bounded(
        &json.as_ref().and_then(provider_message).unwrap_or_else(|| {
            if body.trim().is_empty() {
                format!("HTTP {status}")
            } else {
                format!("HTTP {status}: {}", body.trim())
            }
        }),
    );
    let retry_after = retry_after(headers);
    match status.as_u16() {
        401 | 403 => ModelError::Authentication { message },
        429 => ModelError::RateLimited {
            retry_after,
            message,
        },
        408 | 500..=599 => ModelError::Overloaded {
            retry_after,
            message,
        },
        _ if too_long(json.as_ref(), body) => ModelError::ContextTooLong { message },
        _ => ModelError::InvalidRequest { message },
    }
}

/// Maps an error a provider sent inside an event stream or a JSON body
/// whose status said success: `{"error": {...}}` (OpenAI, llama.cpp) or
/// `{"type": "error", "error": {"type": "overloaded_error", ...}}`
/// (Anthropic). A numeric `code` is read as an HTTP status.
pub fn from_body(json: &Value) -> ModelError {
    let error = json.get("error").unwrap_or(json);
    let message = bounded(&provider_message(json).unwrap_or_else(|| error.to_string()));
    if let Some(code) = error.get("code").and_then(Value::as_u64)
        && let Ok(code) = u16::try_from(code)
        && let Ok(status) = StatusCode::from_u16(code)
        && status.as_u16() >= 400
    {
        return from_status(status, &HeaderMap::new(), &json.to_string());
    }
    let kind = error
        .get("type")
        .or_else(|| error.get("code"))
        .and_then(Value::as_str)
        .unwrap_or("");
    match kind {
        "authentication_error" | "permission_error" | "invalid_api_key" => {
            ModelError::Authentication { message }
        }
        "rate_limit_error" | "rate_limit_exceeded" => ModelError::RateLimited {
            retry_after: None,
            message,
        },
        "overloaded_error" | "api_error" | "server_error" => ModelError::Overloaded {
            retry_after: None,
            message,
        },
        _ if too_long(Some(json), "") => ModelError::ContextTooLong { message },
        "invalid_request_error" | "request_too_large" => ModelError::InvalidRequest { message },
        _ => ModelError::Transport(format!("the provider reported an error: {message}")),
    }
}

/// The provider's own message: `error.message`, `message` or a string
/// `error`.
fn provider_message(json: &Value) -> Option<String> {
    let error = json.get("error");
    error
        .and_then(|e| e.get("message"))
        .or_else(|| json.get("message"))
        .or_else(|| error.filter(|e| e.is_string()))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Whether the provider says the input does not fit the context window.
fn too_long(json: Option<&Value>, body: &str) -> bool {
    let code = json
        .and_then(|j| j.get("error"))
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str);
    if code == Some("context_length_exceeded") {
        return true;
    }
    let text = json
        .and_then(provider_message)
        .unwrap_or_else(|| body.to_owned())
        .to_ascii_lowercase();
    [
        "context length",
        "context_length",
        "context window",
        "maximum context",
        "too long",
        "exceeds the available context",
        "exceed_context_size",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// `text` cut to [`MAX_ERROR_MESSAGE_CHARS`], with `…` when cut.
pub(crate) fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_MESSAGE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// How long the answer asks to wait: `retry-after-ms` (milliseconds), else
/// `Retry-After` as seconds (fractions allowed) or an HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    parse_retry_after(header("retry-after")?, SystemTime::now())
}

/// A `Retry-After` value, seconds or an HTTP date (a date in the past is
/// zero), read at `now`.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_dates_and_milliseconds() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after(" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("-3", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "9".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(9)));
        headers.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
    }

    #[test]
    fn statuses_and_bodies() {
        let h = HeaderMap::new();
        let map =
            |code: u16, body: &str| from_status(StatusCode::from_u16(code).unwrap(), &h, body);
        assert!(matches!(map(401, ""), ModelError::Authentication { .. }));
        assert!(matches!(map(403, "{}"), ModelError::Authentication { .. }));
        assert!(matches!(map(429, ""), ModelError::RateLimited { .. }));
        for code in [500, 502, 503, 504, 529] {
            assert!(
                matches!(map(code, ""), ModelError::Overloaded { .. }),
                "{code}"
            );
        }
        let openai = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#;
        assert!(matches!(
            map(400, openai),
            ModelError::ContextTooLong { .. }
        ));
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert!(matches!(
            map(400, anthropic),
            ModelError::ContextTooLong { .. }
        ));
        let bad = r#"{"error":{"message":"unknown field: foo"}}"#;
        assert_eq!(
            map(422, bad),
            ModelError::InvalidRequest {
                message: "unknown field: foo".into()
            }
        );
        let long = "x".repeat(5 * MAX_ERROR_MESSAGE_CHARS);
        let ModelError::InvalidRequest { message } = map(400, &long) else {
            panic!()
        };
        assert!(message.chars().count() <= MAX_ERROR_MESSAGE_CHARS + 1);
        let event = serde_json::json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
        assert!(matches!(from_body(&event), ModelError::Overloaded { .. }));
        let llama = serde_json::json!({"error":{"code":500,"message":"m","type":"server_error"}});
        assert!(matches!(from_body(&llama), ModelError::Overloaded { .. }));
    }
}
