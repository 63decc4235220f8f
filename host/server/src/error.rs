//! [`ApiError`]: every error the API answers with, in one JSON shape, and
//! the extractors that turn axum's rejections into it.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hane_coordinator::{ActionError, RunError};
use hane_core::ErrorKind;
use schemars::JsonSchema;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::json::BodyError;
use crate::serve::BodyTimedOut;

/// The `code` of an error body: what kind of failure, for machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorCode {
    /// A well-formed request whose content is wrong, such as an input the
    /// agent's schema refuses (422).
    InvalidInput,
    /// No such route, run, agent, action or override (404).
    NotFound,
    /// No API key, or one that is not known (401).
    Unauthorized,
    /// The key's role may not do this (403).
    Forbidden,
    /// The request conflicts with the state: the run ended, no release is
    /// active, the action was decided already or its digest is stale (409).
    Conflict,
    /// A request that cannot be read: broken JSON, a malformed id or query
    /// (400).
    BadRequest,
    /// The body is over [`crate::MAX_BODY_BYTES`] (413).
    PayloadTooLarge,
    /// The body is not `application/json` (415).
    UnsupportedMediaType,
    /// The route has no such method (405).
    MethodNotAllowed,
    /// The request's head, or its body, did not arrive in time (408).
    RequestTimeout,
    /// The request's target is longer than [`crate::MAX_URI_BYTES`] (414).
    UriTooLong,
    /// The request's head is larger than [`crate::ServeConfig`] allows
    /// (431).
    HeadersTooLarge,
    /// The day's budget does not allow it (429).
    BudgetExceeded,
    /// The server has as many connections as it takes (503).
    Unavailable,
    /// The model the request needed failed; the message says which and
    /// how (502).
    BadGateway,
    /// The server failed; its log says why (500).
    Internal,
}

impl ErrorCode {
    /// Every code.
    pub(crate) const ALL: [ErrorCode; 16] = [
        ErrorCode::InvalidInput,
        ErrorCode::NotFound,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::Conflict,
        ErrorCode::BadRequest,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RequestTimeout,
        ErrorCode::UriTooLong,
        ErrorCode::HeadersTooLarge,
        ErrorCode::BudgetExceeded,
        ErrorCode::Unavailable,
        ErrorCode::BadGateway,
        ErrorCode::Internal,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::Conflict => "conflict",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::UriTooLong => "uri_too_long",
            ErrorCode::HeadersTooLarge => "headers_too_large",
            ErrorCode::BudgetExceeded => "budget_exceeded",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::BadGateway => "bad_gateway",
            ErrorCode::Internal => "internal",
        }
    }

    pub(crate) fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidInput => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::Conflict => StatusCode::CONFLICT,
            ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::UriTooLong => StatusCode::URI_TOO_LONG,
            ErrorCode::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorCode::BudgetExceeded => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::BadGateway => StatusCode::BAD_GATEWAY,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// Written as its name ([`ErrorCode::as_str`]).
impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One of the names [`ErrorCode`] is written as.
impl JsonSchema for ErrorCode {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorCode".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let codes: Vec<&str> = Self::ALL.iter().map(|c| c.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": codes })
    }
}

/// An error answer: `{"error": {"code", "message", "path"?}}` ([`ErrorBody`])
/// with the status its code stands for.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(inline, deny_unknown_fields, description = "What failed")]
pub(crate) struct ApiError {
    /// What kind of failure, for machines.
    code: ErrorCode,
    /// What went wrong, for people.
    message: String,
    /// JSON Pointer to the field of the request body the error is about,
    /// such as `/input/vehicle`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    path: Option<String>,
}

/// The body of every error answer, whatever the route.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Error", deny_unknown_fields)]
pub(crate) struct ErrorBody<'a> {
    error: &'a ApiError,
}

impl ApiError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            path: None,
        }
    }

    pub(crate) fn at(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// A failure of the server itself: the details go to the log, never to
    /// the client.
    pub(crate) fn internal(what: &str, error: &dyn std::fmt::Display) -> Self {
        tracing::error!("{what}: {error}");
        Self::new(
            ErrorCode::Internal,
            "the server failed; its log has the details",
        )
    }

    /// A stored item that does not read: a failure of the server, but
    /// the client asked for that item, so the answer names it.
    pub(crate) fn unreadable(error: &dyn std::fmt::Display) -> Self {
        tracing::error!("{error}");
        Self::new(
            ErrorCode::Internal,
            format!("a stored item does not read: {error}"),
        )
    }

    pub(crate) fn body(&self) -> Value {
        serde_json::to_value(ErrorBody { error: self }).expect("an error body is JSON")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response =
            (self.code.status(), axum::Json(ErrorBody { error: &self })).into_response();
        if self.code == ErrorCode::Unauthorized {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"hane\""),
            );
        }
        response
    }
}

impl ApiError {
    /// The answer to an error of `kind`: its status is the kind's, and an
    /// internal failure's details go to the log only.
    pub(crate) fn of_kind(kind: ErrorKind, what: &str, error: &dyn std::fmt::Display) -> Self {
        let code = match kind {
            ErrorKind::NotFound => ErrorCode::NotFound,
            ErrorKind::Invalid => ErrorCode::InvalidInput,
            ErrorKind::Conflict => ErrorCode::Conflict,
            ErrorKind::Forbidden => ErrorCode::Forbidden,
            ErrorKind::LimitExceeded => ErrorCode::BudgetExceeded,
            ErrorKind::Upstream => ErrorCode::BadGateway,
            _ => return Self::internal(what, error),
        };
        Self::new(code, error.to_string())
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        if let RunError::Corrupt(_) = e {
            return Self::unreadable(&e);
        }
        let answer = Self::of_kind(e.kind(), "agent runtime", &e);
        match e {
            RunError::UnknownAgent { .. } | RunError::DriverUnavailable { .. } => {
                answer.at("/agent")
            }
            RunError::InvalidInput { path, .. } => answer.at(format!("/input{path}")),
            _ => answer,
        }
    }
}

impl From<ActionError> for ApiError {
    fn from(e: ActionError) -> Self {
        let answer = Self::of_kind(e.kind(), "execution ledger", &e);
        match e {
            ActionError::StaleDigest { .. } => answer.at("/digest"),
            // Only an override names a tool, and only a reconciliation a
            // state.
            ActionError::NotOutbound(_) => answer.at("/tool"),
            ActionError::BadReconcile(_) => answer.at("/state"),
            _ => answer,
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::new(ErrorCode::BadRequest, rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        Self::new(ErrorCode::BadRequest, rejection.body_text())
    }
}

/// An extractor whose rejection is answered as an [`ApiError`]: `Checked<Query<T>>`,
/// `Checked<Path<T>>`, `Checked<Json<T>>`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checked<E>(pub(crate) E);

impl<S, E> FromRequestParts<S> for Checked<E>
where
    S: Send + Sync,
    E: FromRequestParts<S>,
    ApiError: From<E::Rejection>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Ok(Self(E::from_request_parts(parts, state).await?))
    }
}

impl<S> FromRequest<S> for Checked<axum::Json<Value>>
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    /// The body as JSON: sent as `application/json`, within
    /// [`crate::MAX_BODY_BYTES`] and the body's deadline, and with no
    /// key given twice in any object.
    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(request.headers()) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "the request body must be JSON, sent with `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(body_error)?;
        crate::json::unique_value(&bytes)
            .map(|value| Self(axum::Json(value)))
            .map_err(|e| {
                let answer = ApiError::new(ErrorCode::BadRequest, e.to_string());
                match e {
                    BodyError::DuplicateKey { pointer, .. } => answer.at(pointer),
                    BodyError::Syntax(_) => answer,
                }
            })
    }
}

/// Whether the request says its body is JSON: `application/json`, or a
/// `+json` type, with any parameters.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(essence) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
    else {
        return false;
    };
    let essence = essence.trim().to_ascii_lowercase();
    essence
        .strip_prefix("application/")
        .is_some_and(|subtype| subtype == "json" || subtype.ends_with("+json"))
}

/// Why a body could not be read: too large, too slow, or the connection
/// failed while it came (never "not valid JSON": no JSON was read).
fn body_error(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "the request body is larger than {} bytes",
                crate::MAX_BODY_BYTES
            ),
        );
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&rejection);
    while let Some(e) = source {
        if let Some(timed_out) = e.downcast_ref::<BodyTimedOut>() {
            return ApiError::new(ErrorCode::RequestTimeout, timed_out.to_string());
        }
        source = e.source();
    }
    ApiError::new(
        ErrorCode::BadRequest,
        format!(
            "the request body could not be read: {}",
            rejection.body_text()
        ),
    )
}
