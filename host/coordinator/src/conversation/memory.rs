//! The memory format: a conversation's context as versioned JSON, what
//! `GET …/memory` returns and `PUT …/memory` and a new conversation take.
//!
//! A memory is context, never authority: it holds what was said and what
//! runs did, as text the model reads. It has no field for tools, limits,
//! budgets or decisions, and one is refused; an action's state is always
//! read again from the execution ledger. Its JSON Schema is
//! [`memory_schema`]; versions this build reads are [`MEMORY_READS`], the
//! older upgraded on read, a newer one refused with
//! [`MemoryError::NewerVersion`].

use std::sync::LazyLock;

use hane_core::{ActionId, ActionState, RunId, RunStatus};
use hane_sandbox::Schema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The memory version this build writes.
pub const MEMORY_VERSION: u64 = 2;

/// The memory versions this build reads: version 1 (messages only) is
/// upgraded to version 2 on read.
pub const MEMORY_READS: [u64; 2] = [1, 2];

/// The most messages one memory holds.
pub const MAX_MEMORY_MESSAGES: usize = 1000;

/// A conversation's context, as versioned JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Memory {
    /// [`MEMORY_VERSION`] once read.
    pub schema_version: u64,
    /// The agent the conversation is with.
    pub agent: String,
    /// What was said, in order.
    pub messages: Vec<MemoryMessage>,
    /// What the runs started by messages did, each named by one message.
    pub runs: Vec<RunSummary>,
    /// The outbound actions those runs proposed, with their state.
    pub actions: Vec<ActionSummary>,
}

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Speaker {
    /// A person.
    User,
    /// The agent, in words (a transcript's reply); a run's result is its
    /// run's summary.
    Assistant,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryMessage {
    /// Who said it.
    pub role: Speaker,
    /// What was said.
    pub text: String,
    /// The run a person's message started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunId>,
}

/// What one run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunSummary {
    /// The run.
    pub id: RunId,
    /// How it stands.
    pub status: RunStatus,
    /// Its input.
    pub input: Value,
    /// Its result, once it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why it did not succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The tools it called, in order.
    #[serde(default)]
    pub tool_calls: Vec<ToolCallNote>,
}

/// One tool call of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCallNote {
    /// The tool.
    pub tool: String,
    /// How it ended.
    pub status: hane_core::run::ToolCallEnd,
    /// What went wrong, or what a control tool did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// One outbound action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActionSummary {
    /// The action.
    pub id: ActionId,
    /// The run that proposed it.
    pub run: RunId,
    /// The outbound tool.
    pub tool: String,
    /// Its recipient.
    pub recipient: String,
    /// Its state in the execution ledger.
    pub state: ActionState,
    /// The digest of what it sends.
    pub digest: String,
}

impl Memory {
    /// An empty memory of a conversation with `agent`.
    pub fn empty(agent: &str) -> Self {
        Self {
            schema_version: MEMORY_VERSION,
            agent: agent.to_owned(),
            messages: Vec::new(),
            runs: Vec::new(),
            actions: Vec::new(),
        }
    }

    /// The run with this id.
    pub fn run(&self, id: &RunId) -> Option<&RunSummary> {
        self.runs.iter().find(|r| &r.id == id)
    }

    /// The memory as JSON.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a memory is plain JSON")
    }
}

/// Why a memory was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// Written by a later hane: this build cannot read it.
    #[error(
        "memory schemaVersion {found} is newer than this build reads ({}): it was written by a later hane",
        versions()
    )]
    NewerVersion {
        /// The version found.
        found: u64,
    },
    /// Not a memory this build reads; `path` is a JSON Pointer into it.
    #[error("{message}")]
    Invalid {
        /// Where, as a JSON Pointer (`/runs/0/status`); empty for the
        /// whole document.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl MemoryError {
    /// Where in the memory the error is, as a JSON Pointer.
    pub fn path(&self) -> &str {
        match self {
            MemoryError::NewerVersion { .. } => "/schemaVersion",
            MemoryError::Invalid { path, .. } => path,
        }
    }

    fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        MemoryError::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }
}

fn versions() -> String {
    MEMORY_READS
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The JSON Schema of the memory format this build writes (version 2).
pub fn memory_schema() -> &'static Value {
    static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
        let statuses: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
        let states: Vec<&str> = ActionState::ALL.iter().map(|s| s.as_str()).collect();
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://hane.dev/schemas/conversation-memory/v2.json",
            "title": "hane conversation memory, version 2",
            "description": "A conversation's context: what was said, what the runs it started did, and the state of their outbound actions. It grants nothing: permissions, limits and budgets come from the active release, and action states from the execution ledger. Version 1 (schemaVersion, agent, messages of role and text) is read and upgraded.",
            "type": "object",
            "additionalProperties": false,
            "required": ["schemaVersion", "agent", "messages", "runs", "actions"],
            "properties": {
                "schemaVersion": { "const": MEMORY_VERSION },
                "agent": { "type": "string", "minLength": 1, "maxLength": 200 },
                "messages": {
                    "type": "array",
                    "maxItems": MAX_MEMORY_MESSAGES,
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["role", "text"],
                        "properties": {
                            "role": { "enum": ["user", "assistant"] },
                            "text": { "type": "string" },
                            "run": { "type": "string", "pattern": "^run_[0-9a-z]{26}$" }
                        }
                    }
                },
                "runs": {
                    "type": "array",
                    "maxItems": MAX_MEMORY_MESSAGES,
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["id", "status", "input"],
                        "properties": {
                            "id": { "type": "string", "pattern": "^run_[0-9a-z]{26}$" },
                            "status": { "enum": statuses },
                            "input": { "type": "object" },
                            "result": {},
                            "error": { "type": "string" },
                            "toolCalls": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": false,
                                    "required": ["tool", "status"],
                                    "properties": {
                                        "tool": { "type": "string" },
                                        "status": { "type": "string" },
                                        "detail": { "type": "string" }
                                    }
                                }
                            }
                        }
                    }
                },
                "actions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["id", "run", "tool", "recipient", "state", "digest"],
                        "properties": {
                            "id": { "type": "string", "pattern": "^act_[0-9a-z]{26}$" },
                            "run": { "type": "string", "pattern": "^run_[0-9a-z]{26}$" },
                            "tool": { "type": "string" },
                            "recipient": { "type": "string" },
                            "state": { "enum": states },
                            "digest": { "type": "string" }
                        }
                    }
                }
            }
        })
    });
    &SCHEMA
}

/// Version 1: messages only, as a plain transcript has them.
fn schema_v1() -> &'static Schema {
    static SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
        Schema::from_value(&json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["schemaVersion", "agent", "messages"],
            "properties": {
                "schemaVersion": { "const": 1 },
                "agent": { "type": "string", "minLength": 1, "maxLength": 200 },
                "messages": {
                    "type": "array",
                    "maxItems": MAX_MEMORY_MESSAGES,
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["role", "text"],
                        "properties": {
                            "role": { "enum": ["user", "assistant"] },
                            "text": { "type": "string" }
                        }
                    }
                }
            }
        }))
        .expect("the version 1 schema compiles")
    });
    &SCHEMA
}

fn schema_v2() -> &'static Schema {
    static SCHEMA: LazyLock<Schema> =
        LazyLock::new(|| Schema::from_value(memory_schema()).expect("the memory schema compiles"));
    &SCHEMA
}

fn check(schema: &Schema, memory: &Value) -> Result<(), MemoryError> {
    schema.check(memory).map_err(|violations| {
        let first = &violations[0];
        MemoryError::at(
            first.instance_path.clone(),
            format!(
                "not a valid memory: {}",
                hane_sandbox::describe_violations(&violations)
            ),
        )
    })
}

/// Reads a memory: its version first (a newer one is refused, an older
/// one upgraded), then its shape against [`memory_schema`], then that its
/// messages, runs and actions name each other consistently.
///
/// # Errors
///
/// [`MemoryError`], naming where the memory is wrong.
pub fn read_memory(memory: &Value) -> Result<Memory, MemoryError> {
    let Value::Object(fields) = memory else {
        return Err(MemoryError::at(
            "",
            "a memory must be a JSON object with schemaVersion, agent, messages, runs and actions",
        ));
    };
    let version = match fields.get("schemaVersion") {
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64().unwrap_or_default(),
        Some(_) => {
            return Err(MemoryError::at(
                "/schemaVersion",
                format!(
                    "schemaVersion must be a whole number; this build reads {}",
                    versions()
                ),
            ));
        }
        None => {
            return Err(MemoryError::at(
                "/schemaVersion",
                format!("schemaVersion is required; this build reads {}", versions()),
            ));
        }
    };
    let upgraded;
    let current = match version {
        1 => {
            check(schema_v1(), memory)?;
            upgraded = upgrade_v1(memory);
            &upgraded
        }
        MEMORY_VERSION => memory,
        found if found > MEMORY_VERSION => return Err(MemoryError::NewerVersion { found }),
        found => {
            return Err(MemoryError::at(
                "/schemaVersion",
                format!(
                    "memory schemaVersion {found} is not one this build reads ({})",
                    versions()
                ),
            ));
        }
    };
    check(schema_v2(), current)?;
    let memory: Memory = serde_json::from_value(current.clone())
        .map_err(|e| MemoryError::at("", format!("not a valid memory: {e}")))?;
    consistent(&memory)?;
    Ok(memory)
}

/// Version 1 as version 2: the same messages, no runs, no actions.
fn upgrade_v1(memory: &Value) -> Value {
    json!({
        "schemaVersion": MEMORY_VERSION,
        "agent": memory["agent"],
        "messages": memory["messages"],
        "runs": [],
        "actions": [],
    })
}

/// Every run named by one person's message, every message's run and every
/// action's run present, and no id twice.
fn consistent(memory: &Memory) -> Result<(), MemoryError> {
    for (i, run) in memory.runs.iter().enumerate() {
        if memory.runs[..i].iter().any(|r| r.id == run.id) {
            return Err(MemoryError::at(
                format!("/runs/{i}/id"),
                format!("run `{}` is listed twice", run.id),
            ));
        }
        let named = memory
            .messages
            .iter()
            .filter(|m| m.run.as_ref() == Some(&run.id))
            .count();
        if named != 1 {
            return Err(MemoryError::at(
                format!("/runs/{i}/id"),
                format!(
                    "run `{}` must be named by exactly one message's `run`; {named} name it",
                    run.id
                ),
            ));
        }
    }
    for (i, message) in memory.messages.iter().enumerate() {
        match (&message.run, message.role) {
            (Some(_), Speaker::Assistant) => {
                return Err(MemoryError::at(
                    format!("/messages/{i}/run"),
                    "only a person's message starts a run: an assistant message has no `run`",
                ));
            }
            (Some(run), Speaker::User) if memory.run(run).is_none() => {
                return Err(MemoryError::at(
                    format!("/messages/{i}/run"),
                    format!("run `{run}` is not among the memory's runs"),
                ));
            }
            _ => {}
        }
    }
    for (i, action) in memory.actions.iter().enumerate() {
        if memory.actions[..i].iter().any(|a| a.id == action.id) {
            return Err(MemoryError::at(
                format!("/actions/{i}/id"),
                format!("action `{}` is listed twice", action.id),
            ));
        }
        if memory.run(&action.run).is_none() {
            return Err(MemoryError::at(
                format!("/actions/{i}/run"),
                format!("run `{}` is not among the memory's runs", action.run),
            ));
        }
    }
    Ok(())
}

/// What stands in for a secret in a memory.
pub const REDACTED: &str = "***";

/// Replaces, in every string of `value`, what is or may be a secret: a
/// run's token (`hrt1.…`), an API key (`hane_` and 40 hex characters) and
/// each of `credentials` and the value of each `HANE_CREDENTIAL_*`
/// variable of this process's environment (of 8 bytes or more). A memory
/// is redacted before it is stored and before it is returned, so neither
/// holds one, whatever a person wrote or a tool returned.
pub fn redact(value: &mut Value, credentials: &[String]) {
    let mut all: Vec<String> = std::env::vars()
        .filter(|(name, _)| name.starts_with(hane_core::credential::CREDENTIAL_ENV_PREFIX))
        .map(|(_, value)| value)
        .chain(credentials.iter().cloned())
        .filter(|value| value.len() >= 8)
        .collect();
    // The longest first, so one that holds another is cut whole.
    all.sort_by_key(|v| std::cmp::Reverse(v.len()));
    redact_with(value, &all);
}

fn redact_with(value: &mut Value, credentials: &[String]) {
    match value {
        Value::String(text) => {
            if let Some(clean) = redacted(text, credentials) {
                *text = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact_with(v, credentials)),
        Value::Object(fields) => fields
            .values_mut()
            .for_each(|v| redact_with(v, credentials)),
        _ => {}
    }
}

/// `text` without its secrets, or `None` when it has none.
fn redacted(text: &str, credentials: &[String]) -> Option<String> {
    let mut out = text.to_owned();
    for credential in credentials {
        if out.contains(credential.as_str()) {
            out = out.replace(credential.as_str(), REDACTED);
        }
    }
    out = cut_tokens(
        &out,
        "hrt1.",
        |c| c.is_ascii_alphanumeric() || "._-".contains(c),
        10,
    );
    out = cut_tokens(&out, "hane_", |c| c.is_ascii_hexdigit(), 40);
    (out != text).then_some(out)
}

/// `text` with each `prefix` followed by at least `min` characters that
/// `part` accepts replaced by [`REDACTED`].
fn cut_tokens(text: &str, prefix: &str, part: impl Fn(char) -> bool, min: usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        let len: usize = after
            .chars()
            .take_while(|c| part(*c))
            .map(char::len_utf8)
            .sum();
        out.push_str(&rest[..at]);
        if len >= min {
            out.push_str(REDACTED);
        } else {
            out.push_str(&rest[at..at + prefix.len() + len]);
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_id() -> RunId {
        RunId::new()
    }

    #[test]
    fn a_version_1_transcript_is_upgraded() {
        let memory = read_memory(&json!({
            "schemaVersion": 1,
            "agent": "fleet-assistant",
            "messages": [
                { "role": "user", "text": "Hello" },
                { "role": "assistant", "text": "Hi" }
            ]
        }))
        .unwrap();
        assert_eq!(memory.schema_version, MEMORY_VERSION);
        assert_eq!(memory.messages.len(), 2);
        assert!(memory.runs.is_empty() && memory.actions.is_empty());
    }

    #[test]
    fn a_newer_version_is_refused_by_name() {
        let err = read_memory(&json!({ "schemaVersion": 3, "agent": "a" })).unwrap_err();
        assert_eq!(err, MemoryError::NewerVersion { found: 3 });
        assert_eq!(
            err.to_string(),
            "memory schemaVersion 3 is newer than this build reads (1 and 2): it was written by a later hane"
        );
        let err = read_memory(&json!({ "agent": "a" })).unwrap_err();
        assert_eq!(err.path(), "/schemaVersion");
        let err = read_memory(&json!({ "schemaVersion": 0, "agent": "a" })).unwrap_err();
        assert!(
            err.to_string().contains("not one this build reads"),
            "{err}"
        );
    }

    #[test]
    fn a_field_that_would_grant_something_is_refused_where_it_is() {
        for (field, value) in [
            ("tools", json!(["communication.send_email"])),
            ("limits", json!({ "maxModelTokens": 10_000_000 })),
            ("budget", json!({ "modelTokensPerDay": 10_000_000 })),
        ] {
            let mut memory = Memory::empty("fleet-assistant").to_value();
            memory[field] = value;
            let err = read_memory(&memory).unwrap_err();
            assert_eq!(err.path(), "", "{field}: {err}");
            assert!(err.to_string().contains(field), "{field}: {err}");
        }
        let run = run_id();
        let memory = json!({
            "schemaVersion": 2, "agent": "a",
            "messages": [{ "role": "user", "text": "x", "run": run }],
            "runs": [{ "id": run, "status": "succeeded", "input": {}, "approved": true }],
            "actions": []
        });
        let err = read_memory(&memory).unwrap_err();
        assert_eq!(err.path(), "/runs/0", "{err}");
    }

    #[test]
    fn runs_and_actions_must_name_each_other() {
        let (a, b) = (run_id(), run_id());
        let memory = json!({
            "schemaVersion": 2, "agent": "a",
            "messages": [{ "role": "user", "text": "x", "run": a }],
            "runs": [
                { "id": a, "status": "succeeded", "input": {} },
                { "id": b, "status": "failed", "input": {}, "error": "no" }
            ],
            "actions": []
        });
        let err = read_memory(&memory).unwrap_err();
        assert_eq!(err.path(), "/runs/1/id", "{err}");
        let memory = json!({
            "schemaVersion": 2, "agent": "a",
            "messages": [{ "role": "user", "text": "x", "run": a }],
            "runs": [{ "id": a, "status": "succeeded", "input": {} }],
            "actions": [{
                "id": ActionId::new(), "run": b, "tool": "communication.send_email",
                "recipient": "x@example.com", "state": "delivered", "digest": "sha256:00"
            }]
        });
        let err = read_memory(&memory).unwrap_err();
        assert_eq!(err.path(), "/actions/0/run", "{err}");
    }

    #[test]
    fn secrets_are_cut_wherever_they_are() {
        let token = "hrt1.run_0123456789abcdefghjkmnpqrs.1767225600000.c2lnbmF0dXJlLWJ5dGVz";
        let key = format!("hane_{}", "0123456789abcdef".repeat(3).get(..40).unwrap());
        let credential = "sk-live-credential-value".to_owned();
        let mut memory = json!({
            "text": format!("my token is {token}, my key {key}."),
            "nested": [{ "deep": format!("{credential}!") }],
            "short": "hane_store and hrt1.x stay",
        });
        redact_with(&mut memory, std::slice::from_ref(&credential));
        let text = memory.to_string();
        assert!(!text.contains(token) && !text.contains(&key) && !text.contains(&credential));
        assert_eq!(memory["text"], "my token is ***, my key ***.");
        assert_eq!(memory["nested"][0]["deep"], "***!");
        assert_eq!(memory["short"], "hane_store and hrt1.x stay");
    }
}
