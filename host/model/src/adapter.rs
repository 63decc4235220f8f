//! The HTTP adapters: one [`ModelAdapter`] for each [`Api`], built from an
//! [`AdapterConfig`].

use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use http::header::{ACCEPT, AUTHORIZATION, HeaderName, HeaderValue};
use serde_json::Value;

use crate::dialect::sse::SseParser;
use crate::{
    EventSink, ModelAdapter, ModelError, ModelRequest, ModelResponse,
    dialect::{anthropic, chat, responses},
    error,
};
use hane_core::{BoxFuture, credential::Secret};
use hane_http::{Client, Reply, Request};

/// The most bytes of a provider's answer read: a whole JSON body, or the
/// whole of an event stream. A larger answer is a
/// [`ModelError::Transport`].
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// The most bytes of an error answer read (and then quoted, bounded by
/// [`error::MAX_ERROR_MESSAGE_CHARS`]).
pub const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// How long a whole call may take unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// A provider's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// OpenAI Chat Completions, `POST {base}/chat/completions`.
    ChatCompletions,
    /// OpenAI Responses, `POST {base}/responses`.
    Responses,
    /// Anthropic Messages, `POST {base}/messages`.
    AnthropicMessages,
}

impl Api {
    /// The path after the base URL.
    pub fn path(self) -> &'static str {
        match self {
            Api::ChatCompletions => "/chat/completions",
            Api::Responses => "/responses",
            Api::AnthropicMessages => "/messages",
        }
    }
}

/// What the wire translation needs beyond the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WireOptions {
    /// Ask for an event stream.
    pub stream: bool,
    /// `parallel_tool_calls` (Chat Completions, Responses) or
    /// `tool_choice.disable_parallel_tool_use` (Anthropic), when set and
    /// the request has tools; the provider's default when `None`.
    pub parallel_tool_calls: Option<bool>,
}

/// One provider endpoint.
///
/// Defaults ([`AdapterConfig::new`]): no credential, streamed, a
/// [`DEFAULT_TIMEOUT`] for the whole call, the provider's default for
/// parallel tool calls.
#[derive(Debug, Clone)]
pub struct AdapterConfig {
    /// The wire format.
    pub api: Api,
    /// The base URL the API's path is added to, such as
    /// `http://127.0.0.1:8080/v1` or `https://api.openai.com/v1`.
    pub base_url: String,
    /// The credential: `Authorization: Bearer` (OpenAI) or `x-api-key`
    /// (Anthropic). Read it with [`Secret::from_env`].
    pub credential: Option<Secret>,
    /// Whether to stream the answer (default `true`).
    pub stream: bool,
    /// How long the whole call may take, connecting to the last byte.
    pub timeout: Duration,
    /// See [`WireOptions::parallel_tool_calls`].
    pub parallel_tool_calls: Option<bool>,
}

impl AdapterConfig {
    /// `api` at `base_url`, with the defaults above.
    pub fn new(api: Api, base_url: impl Into<String>) -> Self {
        Self {
            api,
            base_url: base_url.into(),
            credential: None,
            stream: true,
            timeout: DEFAULT_TIMEOUT,
            parallel_tool_calls: None,
        }
    }
}

/// Why an [`AdapterConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the model base URL {url:?} {problem}")]
pub struct AdapterConfigError {
    /// The URL at fault.
    pub url: String,
    /// What is wrong with it.
    pub problem: String,
}

/// The adapter `config` describes.
///
/// # Errors
///
/// [`AdapterConfigError`] when the base URL is not an `http` or `https` URL with
/// a host (the error names the URL).
pub fn adapter(config: AdapterConfig) -> Result<Arc<dyn ModelAdapter>, AdapterConfigError> {
    Ok(Arc::new(HttpAdapter::new(config)?))
}

/// A [`ModelAdapter`] over HTTP, for any [`Api`].
#[derive(Debug)]
pub struct HttpAdapter {
    config: AdapterConfig,
    url: Uri,
    /// Its kept-alive connections to `url`.
    client: Client,
}

impl HttpAdapter {
    /// The adapter `config` describes; see [`adapter`].
    ///
    /// # Errors
    ///
    /// As [`adapter`].
    pub fn new(config: AdapterConfig) -> Result<Self, AdapterConfigError> {
        let problem = |problem: &str| AdapterConfigError {
            url: config.base_url.clone(),
            problem: problem.to_owned(),
        };
        let full = format!(
            "{}{}",
            config.base_url.trim_end_matches('/'),
            config.api.path()
        );
        let url: Uri = full
            .parse()
            .map_err(|e| problem(&format!("is not a URL: {e}")))?;
        if !matches!(url.scheme_str(), Some("http" | "https")) {
            return Err(problem("is not an http:// or https:// URL"));
        }
        if url.host().is_none_or(str::is_empty) {
            return Err(problem("names no host"));
        }
        if url.query().is_some() {
            return Err(problem("has a query, which the API's path cannot follow"));
        }
        Ok(Self {
            config,
            url,
            client: Client::new(),
        })
    }

    /// What it was built from.
    pub fn config(&self) -> &AdapterConfig {
        &self.config
    }

    fn headers(&self) -> Result<Vec<(HeaderName, HeaderValue)>, ModelError> {
        let mut headers = Vec::new();
        if self.config.stream {
            headers.push((ACCEPT, HeaderValue::from_static("text/event-stream")));
        } else {
            headers.push((ACCEPT, HeaderValue::from_static("application/json")));
        }
        let anthropic = self.config.api == Api::AnthropicMessages;
        if anthropic {
            headers.push((
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(anthropic::ANTHROPIC_VERSION),
            ));
        }
        if let Some(secret) = &self.config.credential {
            let text = if anthropic {
                secret.expose().to_owned()
            } else {
                format!("Bearer {}", secret.expose())
            };
            let mut value =
                HeaderValue::from_str(&text).map_err(|_| ModelError::InvalidRequest {
                    message:
                        "the credential cannot be sent in a header (it holds control characters)"
                            .into(),
                })?;
            value.set_sensitive(true);
            let name = if anthropic {
                HeaderName::from_static("x-api-key")
            } else {
                AUTHORIZATION
            };
            headers.push((name, value));
        }
        Ok(headers)
    }

    fn redact(&self, text: &str) -> String {
        match &self.config.credential {
            Some(secret) => secret.redact(text),
            None => text.to_owned(),
        }
    }

    async fn call(
        &self,
        request: &ModelRequest,
        events: Option<EventSink<'_>>,
    ) -> Result<ModelResponse, ModelError> {
        let options = WireOptions {
            stream: self.config.stream,
            parallel_tool_calls: self.config.parallel_tool_calls,
        };
        let body = match self.config.api {
            Api::ChatCompletions => chat::request_body(request, &options),
            Api::Responses => responses::request_body(request, &options),
            Api::AnthropicMessages => anthropic::request_body(request, &options),
        }?;
        let body = serde_json::to_vec(&body).expect("JSON values serialize");
        // A model call may be repeated: one that met a kept-alive connection
        // the server was closing is sent again on a new one.
        let mut http = Request::post_json(self.url.clone(), body)
            .named("the provider")
            .resend_if_stale();
        for (name, value) in self.headers()? {
            http = http.header(name, value);
        }
        let mut reply = self.client.send(http).await?;
        if !reply.status.is_success() {
            let bytes = reply
                .body(MAX_ERROR_BODY_BYTES, true)
                .await
                .unwrap_or_default();
            let text = self.redact(&String::from_utf8_lossy(&bytes));
            return Err(error::from_status(reply.status, &reply.headers, &text));
        }
        let header_id = ["x-request-id", "request-id"]
            .iter()
            .find_map(|h| reply.headers.get(*h)?.to_str().ok())
            .map(str::to_owned);
        let mut response = if reply.is_event_stream() {
            self.read_stream(&mut reply, events).await
        } else {
            let bytes = reply.body(MAX_RESPONSE_BYTES, false).await?;
            let json: Value = serde_json::from_slice(&bytes).map_err(|e| {
                ModelError::Transport(format!(
                    "the answer is not JSON ({e}): {}",
                    error::bounded(&self.redact(&String::from_utf8_lossy(&bytes)))
                ))
            })?;
            match self.config.api {
                Api::ChatCompletions => chat::parse_response(&json),
                Api::Responses => responses::parse_response(&json),
                Api::AnthropicMessages => anthropic::parse_response(&json),
            }
        }
        .map_err(|e| redact_error(e, |t| self.redact(t)))?;
        if response.request_id.is_none() {
            response.request_id = header_id;
        }
        if response.model.is_empty() {
            response.model.clone_from(&request.model);
        }
        Ok(response)
    }

    async fn read_stream(
        &self,
        reply: &mut Reply,
        events: Option<EventSink<'_>>,
    ) -> Result<ModelResponse, ModelError> {
        let mut stream = match self.config.api {
            Api::ChatCompletions => Assembly::Chat(chat::ChatStream::new(events)),
            Api::Responses => Assembly::Responses(responses::ResponsesStream::new(events)),
            Api::AnthropicMessages => Assembly::Anthropic(anthropic::AnthropicStream::new(events)),
        };
        let mut parser = SseParser::new();
        let mut read = 0usize;
        loop {
            let Some(chunk) = reply.chunk().await? else {
                if let Some(event) = parser.finish() {
                    stream.event(&event)?;
                }
                break;
            };
            read += chunk.len();
            if read > MAX_RESPONSE_BYTES {
                return Err(ModelError::Transport(format!(
                    "the provider's event stream is longer than {MAX_RESPONSE_BYTES} bytes"
                )));
            }
            let mut done = false;
            for event in parser
                .push(&chunk)
                .map_err(|e| ModelError::Transport(e.to_string()))?
            {
                done |= stream.event(&event)?;
            }
            if done {
                break;
            }
        }
        stream.finish()
    }
}

enum Assembly<'a> {
    Chat(chat::ChatStream<'a>),
    Responses(responses::ResponsesStream<'a>),
    Anthropic(anthropic::AnthropicStream<'a>),
}

impl Assembly<'_> {
    fn event(&mut self, event: &crate::dialect::sse::SseEvent) -> Result<bool, ModelError> {
        match self {
            Assembly::Chat(s) => s.event(event),
            Assembly::Responses(s) => s.event(event),
            Assembly::Anthropic(s) => s.event(event),
        }
    }

    fn finish(self) -> Result<ModelResponse, ModelError> {
        match self {
            Assembly::Chat(s) => s.finish(),
            Assembly::Responses(s) => s.finish(),
            Assembly::Anthropic(s) => s.finish(),
        }
    }
}

/// `error` with `redact` applied to the provider's message it quotes.
fn redact_error(error: ModelError, redact: impl Fn(&str) -> String) -> ModelError {
    match error {
        ModelError::Authentication { message } => ModelError::Authentication {
            message: redact(&message),
        },
        ModelError::RateLimited {
            retry_after,
            message,
        } => ModelError::RateLimited {
            retry_after,
            message: redact(&message),
        },
        ModelError::Overloaded {
            retry_after,
            message,
        } => ModelError::Overloaded {
            retry_after,
            message: redact(&message),
        },
        ModelError::ContextTooLong { message } => ModelError::ContextTooLong {
            message: redact(&message),
        },
        ModelError::InvalidRequest { message } => ModelError::InvalidRequest {
            message: redact(&message),
        },
        ModelError::Transport(message) => ModelError::Transport(redact(&message)),
        other => other,
    }
}

impl ModelAdapter for HttpAdapter {
    fn send<'a>(
        &'a self,
        request: &'a ModelRequest,
        events: Option<EventSink<'a>>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let timeout = self.config.timeout;
            match tokio::time::timeout(timeout, self.call(request, events)).await {
                Ok(result) => result,
                Err(_) => Err(ModelError::Timeout(timeout)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;
    use crate::Message;

    /// Serves one connection with `answer`, after reading the request head.
    async fn answer_once(answer: String) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            let _ = socket.read(&mut buf).await;
            socket.write_all(answer.as_bytes()).await.unwrap();
            let _ = socket.shutdown().await;
        });
        url
    }

    /// A Chat Completions answer, kept alive.
    const COMPLETION: &str = r#"{"id":"c1","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

    /// A server that answers every request on every connection with
    /// [`COMPLETION`] (closing the connection after each answer when
    /// `close`, without saying so), and counts the connections it accepted.
    async fn keep_alive_server(close: bool) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        // One request: the head, then content-length bytes.
                        let head_end = loop {
                            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break at + 4;
                            }
                            if !read_more(&mut socket, &mut buf).await {
                                return;
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        while buf.len() < head_end + length {
                            if !read_more(&mut socket, &mut buf).await {
                                return;
                            }
                        }
                        buf.drain(..head_end + length);
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                             content-length: {}\r\n\r\n{COMPLETION}",
                            COMPLETION.len()
                        );
                        if socket.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                        if close {
                            let _ = socket.shutdown().await;
                            return;
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    /// Appends what `socket` has next to `buf`; false at its end.
    async fn read_more(socket: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> bool {
        let mut more = [0u8; 4096];
        match socket.read(&mut more).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                buf.extend_from_slice(&more[..n]);
                true
            }
        }
    }

    #[tokio::test]
    async fn calls_one_after_another_share_one_kept_alive_connection() {
        let (url, accepted) = keep_alive_server(false).await;
        let mut config = AdapterConfig::new(Api::ChatCompletions, url);
        config.stream = false;
        let adapter = HttpAdapter::new(config).unwrap();
        for _ in 0..5 {
            let response = adapter.send(&request(), None).await.unwrap();
            assert_eq!(response.content, vec![crate::Content::text("ok")]);
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_replaced_not_failed() {
        let (url, accepted) = keep_alive_server(true).await;
        let mut config = AdapterConfig::new(Api::ChatCompletions, url);
        config.stream = false;
        let adapter = HttpAdapter::new(config).unwrap();
        for _ in 0..3 {
            let response = adapter.send(&request(), None).await.unwrap();
            assert_eq!(response.content, vec![crate::Content::text("ok")]);
            // Let the server's close arrive, as it would between turns.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_call_dropped_before_its_answer_closes_its_connection() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let mut config = AdapterConfig::new(Api::ChatCompletions, url);
        config.stream = false;
        let adapter = HttpAdapter::new(config).unwrap();
        let asked = request();
        let call = adapter.send(&asked, None);
        let server = async {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            let _ = socket.read(&mut buf).await.unwrap();
            socket
        };
        // The server takes the request and never answers; the call gives up.
        let mut socket = tokio::select! {
            _ = call => panic!("the call was answered"),
            socket = server => socket,
        };
        // The call's future is dropped: its connection must close.
        let mut rest = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut rest))
            .await
            .expect("the connection stayed open after its call was dropped");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }

    fn request() -> ModelRequest {
        let mut request = ModelRequest::new("m");
        request.messages.push(Message::user("hi"));
        request
    }

    #[tokio::test]
    async fn the_credential_never_appears_in_an_error() {
        let key = "sk-very-secret-key";
        for (status, body) in [
            (
                "401 Unauthorized",
                format!(r#"{{"error":{{"message":"bad key {key}"}}}}"#),
            ),
            ("400 Bad Request", format!("you sent {key}")),
            ("200 OK", format!("not json {key}")),
        ] {
            for api in [Api::ChatCompletions, Api::Responses, Api::AnthropicMessages] {
                let url = answer_once(format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                ))
                .await;
                let mut config = AdapterConfig::new(api, url);
                config.credential = Some(Secret::new(key));
                config.stream = false;
                let error = adapter(config)
                    .unwrap()
                    .send(&request(), None)
                    .await
                    .unwrap_err();
                assert!(!error.to_string().contains(key), "{error}");
                assert!(!format!("{error:?}").contains(key), "{error:?}");
                assert!(error.to_string().contains("***"), "{error}");
            }
        }
    }

    #[tokio::test]
    async fn a_stream_cut_short_is_a_transport_error_that_says_so() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"he\"}}]}\n\n";
        let url = answer_once(format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
        ))
        .await;
        let error = adapter(AdapterConfig::new(Api::ChatCompletions, url))
            .unwrap()
            .send(&request(), None)
            .await
            .unwrap_err();
        let ModelError::Transport(message) = error else {
            panic!("{error:?}")
        };
        assert!(message.contains("ended before"), "{message}");
    }

    #[tokio::test]
    async fn rate_limits_carry_retry_after() {
        let url = answer_once(
            "HTTP/1.1 429 Too Many Requests\r\nretry-after: 3\r\ncontent-length: 0\r\n\
             connection: close\r\n\r\n"
                .into(),
        )
        .await;
        let error = adapter(AdapterConfig::new(Api::AnthropicMessages, url))
            .unwrap()
            .send(&request(), None)
            .await
            .unwrap_err();
        assert_eq!(
            error.retry_after(),
            Some(Duration::from_secs(3)),
            "{error:?}"
        );
    }
}
