//! Recorded responses: [`Recorder`] captures a conversation's turns from a
//! real adapter, [`ReplayAdapter`] replays them offline.
//!
//! # The file
//!
//! JSON, versioned ([`RECORDING_FORMAT`], [`RECORDING_VERSION`]):
//! `{"format": "hane-model-recording", "version": 1, "model": ...,
//! "turns": [{"request": <pinned>, "response": <ModelResponse>}]}`. It is
//! rewritten whole after each turn, through a temporary file and a rename,
//! so a reader never sees half of one. An unknown version is refused.
//!
//! # What a recording pins
//!
//! A replayed request is answered by the recorded turn whose request
//! matches it in what decides the model's behaviour, wherever that turn is
//! in the file: one recording serves several conversations (the demo's
//! two vehicles), runs that go on at the same time, and the same run
//! replayed again. What is matched:
//!
//! - the number and order of messages, and each message's role;
//! - in each message, the number, order and kind of its blocks;
//! - text blocks (user and assistant) exactly — they are the task and what
//!   the model said, which a replay reproduces;
//! - images by media type and a SHA-256 of their bytes;
//! - tool calls' names and inputs exactly;
//! - tool results by *which call they answer* (the position of that call
//!   in the conversation, not its id, which providers generate anew) and
//!   by `is_error`;
//! - the set of tool names offered, and the tool choice.
//!
//! It does not pin what legitimately varies between runs of the same
//! behaviour: the system text (a CLI's own system prompt, dates), tool
//! descriptions and schemas (wording), the content of tool results (they
//! carry run, task and action ids, timestamps), tool call ids, the model's
//! name, and sampling parameters (temperature, output cap, stop
//! sequences). The replayed response, its `usage` included, is exactly what
//! was recorded.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hane_core::file::{FileCap, read_capped_text};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::{
    Content, EventSink, ModelAdapter, ModelError, ModelRequest, ModelResponse, StreamEvent,
};
use hane_core::BoxFuture;

/// The `format` of a recording file.
pub const RECORDING_FORMAT: &str = "hane-model-recording";
/// The `version` this build writes and reads.
pub const RECORDING_VERSION: u32 = 1;

/// One recorded turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// What the request pinned; see [`pin`].
    pub request: Value,
    /// The answer.
    pub response: ModelResponse,
}

/// The most bytes a recording file may hold (16 MiB): a few hundred turns
/// of a conversation with their requests.
pub const MAX_RECORDING_BYTES: u64 = 16 << 20;

/// A recording file's contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    /// Always [`RECORDING_FORMAT`].
    pub format: String,
    /// Always [`RECORDING_VERSION`].
    pub version: u32,
    /// The model the first request named.
    pub model: String,
    /// The turns, in order.
    pub turns: Vec<Turn>,
}

/// Why a recording cannot be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// The file cannot be read or written.
    #[error("recording {path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The file is not a recording.
    #[error("recording {path} is malformed: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A version this build does not read.
    #[error("recording {path} is version {version}; this build reads version {RECORDING_VERSION}")]
    UnknownVersion {
        /// The file.
        path: PathBuf,
        /// Its version.
        version: u64,
    },
}

impl Recording {
    /// What a recording file is read as: at most [`MAX_RECORDING_BYTES`].
    pub const CAP: FileCap = FileCap::new(MAX_RECORDING_BYTES, "recordings");

    /// Reads and checks the recording at `path`, of at most
    /// [`Recording::CAP`].
    ///
    /// # Errors
    ///
    /// [`RecordingError`], naming the file (and the version when unknown).
    pub fn read(path: &Path) -> Result<Self, RecordingError> {
        let text = read_capped_text(path, Self::CAP).map_err(|e| RecordingError::Io {
            path: path.to_owned(),
            message: e.problem.to_string(),
        })?;
        Self::parse(&text, path)
    }

    /// Reads and checks a recording's `text`; `origin` names it in errors
    /// (a file, or where the text was kept).
    ///
    /// # Errors
    ///
    /// [`RecordingError`], naming `origin` (and the version when unknown).
    pub fn parse(text: &str, origin: impl AsRef<Path>) -> Result<Self, RecordingError> {
        let path = origin.as_ref();
        let malformed = |message: String| RecordingError::Malformed {
            path: path.to_owned(),
            message,
        };
        let value: Value =
            serde_json::from_str(text).map_err(|e| malformed(format!("not JSON: {e}")))?;
        if value["format"] != RECORDING_FORMAT {
            return Err(malformed(format!("its format is not {RECORDING_FORMAT:?}")));
        }
        let version = value["version"]
            .as_u64()
            .ok_or_else(|| malformed("it has no version".into()))?;
        if version != u64::from(RECORDING_VERSION) {
            return Err(RecordingError::UnknownVersion {
                path: path.to_owned(),
                version,
            });
        }
        serde_json::from_value(value).map_err(|e| malformed(e.to_string()))
    }

    /// Writes the recording to `path` atomically: a temporary file beside
    /// it, then a rename.
    ///
    /// # Errors
    ///
    /// [`RecordingError::Io`].
    pub fn write(&self, path: &Path) -> Result<(), RecordingError> {
        let io = |e: std::io::Error| RecordingError::Io {
            path: path.to_owned(),
            message: format!("cannot write it: {e}"),
        };
        let mut text = serde_json::to_string_pretty(self).expect("a recording is JSON");
        text.push('\n');
        let mut temp = path.as_os_str().to_owned();
        temp.push(".tmp");
        let temp = PathBuf::from(temp);
        std::fs::write(&temp, text).map_err(io)?;
        std::fs::rename(&temp, path).map_err(io)
    }
}

/// What a recording pins of `request` (see the module's documentation), as
/// JSON.
pub fn pin(request: &ModelRequest) -> Value {
    let mut calls: Vec<(&str, String)> = Vec::new();
    let messages: Vec<Value> = request
        .messages
        .iter()
        .enumerate()
        .map(|(m, message)| {
            let content: Vec<Value> = message
                .content
                .iter()
                .enumerate()
                .map(|(c, block)| match block {
                    Content::Text { text } => json!({"type": "text", "text": text}),
                    Content::Image { media_type, data } => json!({"type": "image",
                        "mediaType": media_type,
                        "sha256": hex::encode(Sha256::digest(data.as_bytes()))}),
                    Content::ToolCall { id, name, input } => {
                        calls.push((id, format!("messages[{m}].content[{c}]")));
                        json!({"type": "tool_call", "name": name, "input": input})
                    }
                    Content::ToolResult {
                        call_id, is_error, ..
                    } => {
                        let answers = calls
                            .iter()
                            .rev()
                            .find(|(id, _)| id == call_id)
                            .map_or_else(
                                || format!("an unknown call {call_id:?}"),
                                |(_, at)| at.clone(),
                            );
                        json!({"type": "tool_result", "answers": answers, "isError": is_error})
                    }
                })
                .collect();
            json!({"role": message.role, "content": content})
        })
        .collect();
    let mut tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    tools.sort_unstable();
    json!({"messages": messages, "tools": tools, "toolChoice": request.tool_choice})
}

/// Where `got` differs from `recorded` (both from [`pin`]): the place and
/// what differs there, or `None` when they match.
pub fn difference(recorded: &Value, got: &Value) -> Option<(String, String)> {
    let empty = Vec::new();
    let list = |v: &Value, key: &str| v[key].as_array().unwrap_or(&empty).clone();
    let (rm, gm) = (list(recorded, "messages"), list(got, "messages"));
    for (m, (r, g)) in rm.iter().zip(&gm).enumerate() {
        if r["role"] != g["role"] {
            return Some((
                format!("messages[{m}].role"),
                format!("recorded {}, got {}", r["role"], g["role"]),
            ));
        }
        let (rc, gc) = (list(r, "content"), list(g, "content"));
        for (c, (rb, gb)) in rc.iter().zip(&gc).enumerate() {
            let place = format!("messages[{m}].content[{c}]");
            if rb["type"] != gb["type"] || rb["name"] != gb["name"] {
                return Some((
                    place,
                    format!("recorded {}, got {}", describe(rb), describe(gb)),
                ));
            }
            for field in ["text", "input", "mediaType", "sha256", "answers", "isError"] {
                if rb[field] != gb[field] {
                    return Some((
                        format!("{place}.{field}"),
                        format!(
                            "recorded {}, got {}",
                            excerpt(&rb[field]),
                            excerpt(&gb[field])
                        ),
                    ));
                }
            }
        }
        if rc.len() != gc.len() {
            return Some((
                format!("messages[{m}].content"),
                format!("recorded {} blocks, got {}", rc.len(), gc.len()),
            ));
        }
    }
    if rm.len() != gm.len() {
        return Some((
            "messages".into(),
            format!("recorded {} messages, got {}", rm.len(), gm.len()),
        ));
    }
    for key in ["tools", "toolChoice"] {
        if recorded[key] != got[key] {
            return Some((
                key.into(),
                format!("recorded {}, got {}", recorded[key], got[key]),
            ));
        }
    }
    None
}

fn describe(block: &Value) -> String {
    match block["type"].as_str().unwrap_or("") {
        "tool_call" => format!("a tool_call to {}", block["name"].as_str().unwrap_or("")),
        "tool_result" => "a tool_result".into(),
        "image" => "an image".into(),
        other => other.to_owned(),
    }
}

/// A value for an error message: JSON, at most 200 characters.
fn excerpt(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// Wraps an adapter and records each successful turn to a file (see the
/// module's documentation). The file is started afresh by the first turn.
#[derive(Debug)]
pub struct Recorder {
    inner: Arc<dyn ModelAdapter>,
    path: PathBuf,
    recording: Mutex<Option<Recording>>,
}

impl Recorder {
    /// Records what `inner` answers to `path`.
    pub fn new(inner: Arc<dyn ModelAdapter>, path: impl Into<PathBuf>) -> Self {
        Self {
            inner,
            path: path.into(),
            recording: Mutex::new(None),
        }
    }

    /// Where it records.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl ModelAdapter for Recorder {
    fn send<'a>(
        &'a self,
        request: &'a ModelRequest,
        events: Option<EventSink<'a>>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let response = self.inner.send(request, events).await?;
            let mut recording = self
                .recording
                .lock()
                .expect("the recorder's lock is not poisoned");
            let recording = recording.get_or_insert_with(|| Recording {
                format: RECORDING_FORMAT.into(),
                version: RECORDING_VERSION,
                model: request.model.clone(),
                turns: Vec::new(),
            });
            recording.turns.push(Turn {
                request: pin(request),
                response: response.clone(),
            });
            recording
                .write(&self.path)
                .map_err(|e| ModelError::Recording(e.to_string()))?;
            Ok(response)
        })
    }
}

/// Replays a recording: each request is answered by the recorded turn
/// whose request matches it (see the module's documentation). A request
/// recorded twice is answered by its first turn.
#[derive(Debug)]
pub struct ReplayAdapter {
    path: PathBuf,
    recording: Recording,
    asked: Mutex<usize>,
}

impl ReplayAdapter {
    /// The recording at `path`.
    ///
    /// # Errors
    ///
    /// [`RecordingError`], naming the file (and the version when unknown).
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, RecordingError> {
        let path = path.into();
        let recording = Recording::read(&path)?;
        Ok(Self::new(recording, path))
    }

    /// Replays `recording`; `origin` names it in errors.
    pub fn new(recording: Recording, origin: impl Into<PathBuf>) -> Self {
        Self {
            path: origin.into(),
            recording,
            asked: Mutex::new(0),
        }
    }

    /// What it replays.
    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    /// How many requests it was asked.
    pub fn replayed(&self) -> usize {
        *self
            .asked
            .lock()
            .expect("the replay's lock is not poisoned")
    }

    fn answer(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let asked = {
            let mut asked = self
                .asked
                .lock()
                .expect("the replay's lock is not poisoned");
            *asked += 1;
            *asked
        };
        let path = self.path.display().to_string();
        let got = pin(request);
        let mut closest: Option<(usize, usize, String, String)> = None;
        for (i, turn) in self.recording.turns.iter().enumerate() {
            let Some((place, detail)) = difference(&turn.request, &got) else {
                return Ok(turn.response.clone());
            };
            let score = agreement(&turn.request, &got);
            if closest.as_ref().is_none_or(|(best, ..)| score > *best) {
                closest = Some((score, i + 1, place, detail));
            }
        }
        match closest {
            None => Err(ModelError::Recording(format!(
                "recording {path} has no turns; request {asked} has no answer"
            ))),
            Some((_, turn, place, detail)) => Err(ModelError::RecordingMismatch {
                path,
                turn,
                place,
                detail,
            }),
        }
    }
}

/// How far two pinned requests agree: the messages they share from the
/// start, then whether they have as many; the closest turn is the one a
/// mismatch is reported against.
fn agreement(recorded: &Value, got: &Value) -> usize {
    let empty = Vec::new();
    let list = |v: &Value| v["messages"].as_array().unwrap_or(&empty).clone();
    let (r, g) = (list(recorded), list(got));
    let shared = r.iter().zip(&g).take_while(|(a, b)| a == b).count();
    shared * 2 + usize::from(r.len() == g.len())
}

/// Passes a replayed response to `events` as a stream would.
fn replay_events(response: &ModelResponse, events: EventSink<'_>) {
    for (index, block) in response.content.iter().enumerate() {
        match block {
            Content::Text { text } => events(StreamEvent::TextDelta {
                index,
                text: text.clone(),
            }),
            Content::ToolCall { id, name, input } => {
                events(StreamEvent::ToolCallStart {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                });
                events(StreamEvent::ToolCallDelta {
                    index,
                    json: crate::assemble::arguments_text(input),
                });
            }
            _ => {}
        }
    }
}

impl ModelAdapter for ReplayAdapter {
    fn send<'a>(
        &'a self,
        request: &'a ModelRequest,
        events: Option<EventSink<'a>>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let result = self.answer(request);
        if let (Ok(response), Some(events)) = (&result, events) {
            replay_events(response, events);
        }
        Box::pin(async move { result })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, Role, ToolSpec};

    fn conversation() -> ModelRequest {
        let mut request = ModelRequest::new("m");
        request.system = Some("system at 12:00".into());
        request.tools.push(ToolSpec {
            name: "documents_search".into(),
            description: "search".into(),
            input_schema: json!({"type": "object"}),
        });
        request.messages = vec![
            Message::user("find the memo"),
            Message {
                role: Role::Assistant,
                content: vec![Content::ToolCall {
                    id: "call_1".into(),
                    name: "documents_search".into(),
                    input: json!({"q": "memo"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![Content::ToolResult {
                    call_id: "call_1".into(),
                    content: "run r-123: 1 hit".into(),
                    is_error: false,
                }],
            },
        ];
        request
    }

    #[test]
    fn what_varies_between_runs_is_not_pinned() {
        let a = conversation();
        let mut b = a.clone();
        b.system = Some("system at 13:00".into());
        b.model = "other".into();
        b.temperature = Some(0.5);
        b.tools[0].description = "find documents".into();
        b.messages[1].content[0] = Content::ToolCall {
            id: "call_9".into(),
            name: "documents_search".into(),
            input: json!({"q": "memo"}),
        };
        b.messages[2].content[0] = Content::ToolResult {
            call_id: "call_9".into(),
            content: "run r-456: 1 hit".into(),
            is_error: false,
        };
        assert_eq!(difference(&pin(&a), &pin(&b)), None);
    }

    #[test]
    fn a_change_of_behaviour_is_named_where_it_is() {
        let a = conversation();
        let mut b = a.clone();
        b.messages[1].content[0] = Content::text("no call");
        assert_eq!(
            difference(&pin(&a), &pin(&b)),
            Some((
                "messages[1].content[0]".into(),
                "recorded a tool_call to documents_search, got text".into()
            ))
        );
        let mut c = a.clone();
        c.messages[0] = Message::user("find the letter");
        assert_eq!(
            difference(&pin(&a), &pin(&c)).unwrap().0,
            "messages[0].content[0].text"
        );
        let mut d = a.clone();
        d.messages.pop();
        assert_eq!(difference(&pin(&a), &pin(&d)).unwrap().0, "messages");
        let mut e = a.clone();
        e.tools.clear();
        assert_eq!(difference(&pin(&a), &pin(&e)).unwrap().0, "tools");
    }

    fn reply(text: &str) -> ModelResponse {
        ModelResponse {
            content: vec![Content::text(text)],
            stop_reason: crate::StopReason::EndTurn,
            usage: crate::Usage::default(),
            model: "m".into(),
            request_id: None,
        }
    }

    #[tokio::test]
    async fn each_request_finds_its_own_turn_and_a_stranger_is_told_the_closest() {
        let memo = conversation();
        let mut letter = conversation();
        letter.messages[0] = Message::user("find the letter");
        let recording = Recording {
            format: RECORDING_FORMAT.into(),
            version: RECORDING_VERSION,
            model: "m".into(),
            turns: vec![
                Turn {
                    request: pin(&memo),
                    response: reply("the memo"),
                },
                Turn {
                    request: pin(&letter),
                    response: reply("the letter"),
                },
            ],
        };
        let text = serde_json::to_string(&recording).unwrap();
        let replay = ReplayAdapter::new(Recording::parse(&text, "kept").unwrap(), "kept");
        assert_eq!(
            replay.send(&letter, None).await.unwrap().text(),
            "the letter"
        );
        assert_eq!(replay.send(&memo, None).await.unwrap().text(), "the memo");
        assert_eq!(
            replay.send(&letter, None).await.unwrap().text(),
            "the letter"
        );
        let mut stranger = letter.clone();
        stranger.messages[2] = Message {
            role: Role::User,
            content: vec![Content::ToolResult {
                call_id: "call_1".into(),
                content: "failed".into(),
                is_error: true,
            }],
        };
        let error = replay.send(&stranger, None).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "no turn of recording kept matches the request; the closest, turn 2, differs at messages[2].content[0].isError: recorded false, got true"
        );
    }

    #[test]
    fn unreadable_malformed_and_unknown_versions_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let error = ReplayAdapter::open(&path).unwrap_err();
        assert!(matches!(error, RecordingError::Io { .. }));
        assert!(error.to_string().contains("r.json"), "{error}");
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(
            ReplayAdapter::open(&path),
            Err(RecordingError::Malformed { .. })
        ));
        std::fs::write(
            &path,
            r#"{"format":"hane-model-recording","version":7,"model":"m","turns":[]}"#,
        )
        .unwrap();
        let error = ReplayAdapter::open(&path).unwrap_err();
        assert!(matches!(
            error,
            RecordingError::UnknownVersion { version: 7, .. }
        ));
        assert!(error.to_string().contains("version 7"), "{error}");
    }
}
