//! Conversations of the built-in chat: a person's messages to one agent,
//! each starting an ordinary run of it (same gateways, limits, budget and
//! approvals), whose context is built from the conversation so far.
//!
//! The store keeps a conversation's entries (a message and the run it
//! started, or a saved memory); what a run did stays in the run, its
//! session and the execution ledger. The context of the next message is
//! built from them as they are at that moment, through [`Memory`]: the
//! conversation's messages, its runs' inputs, results and tool calls, and
//! its actions' states, which are always the ledger's. [`history`] turns a
//! memory into the messages the `llm` driver gives the model before the
//! task (a CLI driver gets them as text in its prompt).

mod memory;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use hane_core::{
    ActionState, AgentRun, Conversation, ConversationId, ErrorKind, JsonText, ReceptionStatus,
    RunId, RunStatus, conversation::ConversationEntry, now_ms,
};
use hane_model_types::Message;
use hane_store::{ConversationRow, Registry, StoreError};
use serde_json::{Value, json};

pub use memory::{
    ActionSummary, MAX_MEMORY_MESSAGES, MEMORY_READS, MEMORY_VERSION, Memory, MemoryError,
    MemoryMessage, REDACTED, RunSummary, Speaker, ToolCallNote, memory_schema, read_memory, redact,
};

use crate::reception::{ReceptionDesk, ReceptionError, ReceptionRequest};
use crate::runtime::{RunContext, RunError, lock};
use crate::{AgentRuntime, ExecutionLedger, Listed, StartRun};

/// The longest message a person may send, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// Why a conversation could not be started, read or added to.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConversationError {
    /// No conversation has this id.
    #[error("conversation `{0}` not found")]
    NotFound(String),
    /// The previous message's run has not ended: its result belongs in
    /// the next message's context.
    #[error(
        "conversation `{conversation}` is still answering: run `{run}` has not ended; send the next message after it (or cancel it)"
    )]
    Busy {
        /// The conversation.
        conversation: String,
        /// The run still going.
        run: String,
    },
    /// The message, or what it asks, is not acceptable; `path` is a JSON
    /// Pointer into the request.
    #[error("{message}")]
    Invalid {
        /// Where, such as `/text`.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The memory is not one this build takes.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// Starting or reading a run failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored item could not be read.
    #[error("{0}")]
    Corrupt(String),
    /// Deriving a message's input through the model failed.
    #[error("deriving the message's input: {0}")]
    Reception(#[from] ReceptionError),
}

impl ConversationError {
    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ConversationError::NotFound(_) => ErrorKind::NotFound,
            ConversationError::Busy { .. } => ErrorKind::Conflict,
            ConversationError::Invalid { .. } | ConversationError::Memory(_) => ErrorKind::Invalid,
            ConversationError::Run(e) => e.kind(),
            ConversationError::Store(_) | ConversationError::Corrupt(_) => ErrorKind::Internal,
            ConversationError::Reception(e) => e.kind(),
        }
    }

    fn invalid(path: &str, message: impl Into<String>) -> Self {
        ConversationError::Invalid {
            path: path.to_owned(),
            message: message.into(),
        }
    }
}

/// A conversation and where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationView {
    /// The conversation.
    pub conversation: Conversation,
    /// When its last entry was added.
    pub updated_at_ms: u64,
    /// Its entries, in order; a message's run as it is now.
    pub entries: Vec<EntryView>,
}

/// One entry of a conversation, as reported (and answered over HTTP).
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
#[schemars(rename = "ConversationEntry", deny_unknown_fields)]
pub enum EntryView {
    /// A person's message and its run.
    Message {
        /// The entry's place.
        seq: u64,
        /// What the person wrote.
        text: String,
        /// When it was accepted.
        at_ms: u64,
        /// The run it started, as it is now.
        run: Box<AgentRun>,
    },
    /// A saved memory the conversation goes on from.
    Memory {
        /// The entry's place.
        seq: u64,
        /// When it was saved.
        at_ms: u64,
        /// Its messages.
        messages: usize,
    },
}

/// A message accepted: its place and the run it started.
#[derive(Debug, Clone, PartialEq)]
pub struct SentMessage {
    /// The conversation.
    pub conversation: ConversationId,
    /// The entry's place.
    pub seq: u64,
    /// The run, as it started (`queued`).
    pub run: AgentRun,
}

/// A memory saved: its place, and what of it was not kept.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedMemory {
    /// The entry's place.
    pub seq: u64,
    /// The memory as the conversation now holds it (redacted, its
    /// actions the ledger's).
    pub memory: Memory,
    /// What was changed or left out, and why (an action the ledger does
    /// not know, a state the ledger says otherwise).
    pub notes: Vec<String>,
}

/// Conversations that are taking a message in this process: one message
/// of a conversation at a time.
#[derive(Debug, Default)]
struct Sending(Mutex<HashSet<String>>);

struct SendingGuard<'a> {
    sending: &'a Sending,
    id: String,
}

impl Drop for SendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.sending.0).remove(&self.id);
    }
}

impl Sending {
    fn take(&self, id: &str) -> Option<SendingGuard<'_>> {
        lock(&self.0).insert(id.to_owned()).then(|| SendingGuard {
            sending: self,
            id: id.to_owned(),
        })
    }
}

/// Conversations: each message a run of the conversation's agent, with
/// the conversation so far as its context. A service over the run kernel:
/// it starts, reads and cancels runs through [`AgentRuntime`], derives a
/// message's input through [`ReceptionDesk`] when the person gave none,
/// and keeps conversations in the registry.
#[derive(Clone)]
pub struct Conversations {
    runs: AgentRuntime,
    registry: Registry,
    /// The execution ledger: a memory's actions are always its own.
    actions: ExecutionLedger,
    reception: ReceptionDesk,
    /// Conversations taking a message in this process.
    sending: Arc<Sending>,
}

impl std::fmt::Debug for Conversations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversations").finish_non_exhaustive()
    }
}

impl Conversations {
    /// Conversations over the runs of `runs`, kept in its registry;
    /// `reception` derives a message's input.
    pub fn new(runs: &AgentRuntime, reception: &ReceptionDesk) -> Self {
        Self {
            runs: runs.clone(),
            registry: runs.registry().clone(),
            actions: runs.actions().clone(),
            reception: reception.clone(),
            sending: Arc::default(),
        }
    }

    /// Starts a conversation with `agent` of the active release, from
    /// `memory` when given (a saved history, of any version this build
    /// reads: it is checked, upgraded, redacted and its actions made the
    /// ledger's, see [`Conversations::save_memory`]).
    ///
    /// # Errors
    ///
    /// No release, an unknown agent, a memory this build does not take or
    /// of another agent, or the store failed.
    pub async fn create(
        &self,
        agent: &str,
        memory: Option<&Value>,
    ) -> Result<(ConversationView, Vec<String>), ConversationError> {
        let release = self.runs.release().await?;
        if !release.agents.contains_key(agent) {
            return Err(RunError::UnknownAgent {
                agent: agent.to_owned(),
                release: release.info.number,
                known: release.agents.keys().cloned().collect(),
            }
            .into());
        }
        let now = now_ms();
        let (first, notes) = match memory {
            Some(memory) => {
                let (memory, notes) = self.checked_memory(agent, memory).await?;
                let entry = ConversationEntry::Memory {
                    memory: JsonText::from_value(&memory.to_value()),
                    at_ms: now,
                };
                (Some(hane_stored::seal(&entry)), notes)
            }
            None => (None, Vec::new()),
        };
        let conversation = Conversation {
            id: ConversationId::new(),
            agent: agent.to_owned(),
            created_at_ms: now,
        };
        self.registry
            .conversations()
            .create(
                ConversationRow {
                    id: conversation.id.to_string(),
                    agent: agent.to_owned(),
                    created_at_ms: now,
                    updated_at_ms: now,
                    body: hane_stored::seal(&conversation),
                },
                first,
            )
            .await?;
        Ok((self.get(&conversation.id).await?, notes))
    }

    /// Conversation `id` and its entries.
    ///
    /// # Errors
    ///
    /// No such conversation, or the store failed.
    pub async fn get(&self, id: &ConversationId) -> Result<ConversationView, ConversationError> {
        let (conversation, updated_at_ms) = self.conversation_row(id).await?;
        let mut entries = Vec::new();
        for (seq, entry) in self.entries(id).await? {
            entries.push(match entry {
                ConversationEntry::Message { text, run, at_ms } => EntryView::Message {
                    seq,
                    text,
                    at_ms,
                    run: Box::new(self.runs.get(&run).await?),
                },
                ConversationEntry::Memory { memory, at_ms } => EntryView::Memory {
                    seq,
                    at_ms,
                    messages: stored_memory(&memory)?.messages.len(),
                },
            });
        }
        Ok(ConversationView {
            conversation,
            updated_at_ms,
            entries,
        })
    }

    /// Conversations, of `agent` when given, the most recently changed
    /// first, with when each last changed. A stored conversation that
    /// does not read is left out and named in [`Listed::skipped`].
    ///
    /// # Errors
    ///
    /// The store failed.
    pub async fn list(
        &self,
        agent: Option<String>,
        limit: u32,
    ) -> Result<Listed<(Conversation, u64)>, ConversationError> {
        let rows = self.registry.conversations().list(agent, limit).await?;
        Ok(Listed::read(
            "conversation",
            rows,
            |row| &row.id,
            |row| hane_stored::open(&row.body).map(|c| (c, row.updated_at_ms)),
        ))
    }

    /// Sends a person's message: starts a run of the conversation's agent
    /// with `input` (or, without one, `{"message": TEXT}` when the agent's
    /// input schema takes it) and the conversation so far as its context,
    /// and adds the message to the conversation. The run goes on in the
    /// background; [`AgentRuntime::follow`] follows it.
    ///
    /// # Errors
    ///
    /// No such conversation; its previous message's run has not ended; an
    /// empty or oversized text; no input and an agent that does not take
    /// `{"message": …}`; the run could not start (its input, the budget,
    /// the release); or the store failed. Nothing is added then.
    pub async fn send(
        &self,
        id: &ConversationId,
        text: &str,
        input: Option<Value>,
    ) -> Result<SentMessage, ConversationError> {
        if text.trim().is_empty() {
            return Err(ConversationError::invalid(
                "/text",
                "`text` is empty: write the message",
            ));
        }
        if text.len() > MAX_MESSAGE_BYTES {
            return Err(ConversationError::invalid(
                "/text",
                format!(
                    "`text` is {} bytes; a message holds at most {MAX_MESSAGE_BYTES}",
                    text.len()
                ),
            ));
        }
        let (conversation, _) = self.conversation_row(id).await?;
        let Some(_sending) = self.sending.take(id.as_str()) else {
            return Err(ConversationError::Busy {
                conversation: id.to_string(),
                run: "(a message being sent now)".to_owned(),
            });
        };
        let entries = self.entries(id).await?;
        if let Some(run) = entries.iter().rev().find_map(|(_, e)| match e {
            ConversationEntry::Message { run, .. } => Some(run),
            ConversationEntry::Memory { .. } => None,
        }) && !self.runs.get(run).await?.status.is_final()
        {
            return Err(ConversationError::Busy {
                conversation: id.to_string(),
                run: run.to_string(),
            });
        }
        let input = match input {
            Some(input) => input,
            None => self.message_input(&conversation.agent, text).await?,
        };
        let memory = self.memory_of(&conversation, &entries).await?;
        let run = self
            .runs
            .start_in(
                StartRun {
                    agent: conversation.agent.clone(),
                    input,
                    shadow: false,
                },
                RunContext {
                    history: history(&memory),
                    follow: true,
                    release: None,
                    id: None,
                },
            )
            .await?;
        let entry = ConversationEntry::Message {
            text: text.to_owned(),
            run: run.id.clone(),
            at_ms: now_ms(),
        };
        let seq = match self
            .registry
            .conversations()
            .add_entry(id.as_str(), entry.at_ms(), hane_stored::seal(&entry))
            .await
        {
            Ok(seq) => seq,
            Err(e) => {
                // A run the conversation does not know of must not go on.
                let _ = self.runs.cancel(&run.id).await;
                return Err(e.into());
            }
        };
        Ok(SentMessage {
            conversation: id.clone(),
            seq,
            run,
        })
    }

    /// The current context of conversation `id` as a [`Memory`], redacted:
    /// its messages, its runs as they are now, and their actions as the
    /// ledger has them.
    ///
    /// # Errors
    ///
    /// No such conversation, or the store failed.
    pub async fn memory(&self, id: &ConversationId) -> Result<Memory, ConversationError> {
        let (conversation, _) = self.conversation_row(id).await?;
        let entries = self.entries(id).await?;
        self.memory_of(&conversation, &entries).await
    }

    /// Saves `memory` as the conversation's context from now on: the
    /// context of its next message starts from it. It is checked
    /// ([`read_memory`]), must be of the conversation's agent, and is
    /// redacted; its actions are replaced by the ledger's actions of its
    /// runs, so a memory cannot say an action was approved or delivered.
    /// What it cannot carry — permissions, limits, a budget — it has no
    /// field for.
    ///
    /// # Errors
    ///
    /// No such conversation, a memory this build does not take, a message
    /// being answered, or the store failed.
    pub async fn save_memory(
        &self,
        id: &ConversationId,
        memory: &Value,
    ) -> Result<SavedMemory, ConversationError> {
        let (conversation, _) = self.conversation_row(id).await?;
        let (memory, notes) = self.checked_memory(&conversation.agent, memory).await?;
        let Some(_sending) = self.sending.take(id.as_str()) else {
            return Err(ConversationError::Busy {
                conversation: id.to_string(),
                run: "(a message being sent now)".to_owned(),
            });
        };
        let entry = ConversationEntry::Memory {
            memory: JsonText::from_value(&memory.to_value()),
            at_ms: now_ms(),
        };
        let seq = self
            .registry
            .conversations()
            .add_entry(id.as_str(), entry.at_ms(), hane_stored::seal(&entry))
            .await?;
        Ok(SavedMemory { seq, memory, notes })
    }

    async fn conversation_row(
        &self,
        id: &ConversationId,
    ) -> Result<(Conversation, u64), ConversationError> {
        let row = self
            .registry
            .conversations()
            .get(id.as_str())
            .await?
            .ok_or_else(|| ConversationError::NotFound(id.to_string()))?;
        Ok((open_conversation(&row)?, row.updated_at_ms))
    }

    async fn entries(
        &self,
        id: &ConversationId,
    ) -> Result<Vec<(u64, ConversationEntry)>, ConversationError> {
        let rows = self.registry.conversations().entries(id.as_str()).await?;
        rows.iter()
            .map(|row| {
                hane_stored::open::<ConversationEntry>(&row.body)
                    .map(|entry| (row.seq, entry))
                    .map_err(|e| {
                        ConversationError::Corrupt(format!(
                            "entry {} of conversation `{id}` cannot be read: {e}",
                            row.seq
                        ))
                    })
            })
            .collect()
    }

    /// The input of a message's run when the person gave none:
    /// `{"message": TEXT}`, if the agent's input schema takes it.
    async fn message_input(&self, agent: &str, text: &str) -> Result<Value, ConversationError> {
        let release = self.runs.release().await?;
        let Some(loaded) = release.agents.get(agent) else {
            return Err(RunError::UnknownAgent {
                agent: agent.to_owned(),
                release: release.info.number,
                known: release.agents.keys().cloned().collect(),
            }
            .into());
        };
        let input = json!({ "message": text });
        let Err(violations) = loaded.input.check(&input) else {
            return Ok(input);
        };
        // The model derives the agent's input from the message, as
        // reception does; without a model to ask, the caller must send it.
        let derived = self
            .reception
            .receive(ReceptionRequest {
                text: text.to_owned(),
                dry_run: true,
                agent: Some(agent.to_owned()),
            })
            .await;
        let reception = match derived {
            Ok(reception) => reception,
            Err(ReceptionError::ModelUnavailable(_)) => {
                return Err(ConversationError::invalid(
                    "/input",
                    format!(
                        "agent `{agent}` does not take a message as its input ({}) and the release has no default model to derive one: send `input`, the agent's input as a JSON object, with the text",
                        hane_sandbox::describe_violations(&violations)
                    ),
                ));
            }
            Err(e) => return Err(ConversationError::Reception(e)),
        };
        match (&reception.status, &reception.input) {
            (ReceptionStatus::WouldStart, Some(input)) => input
                .to_value()
                .map_err(|e| ConversationError::Corrupt(e.to_string())),
            _ => Err(ConversationError::invalid(
                "/input",
                format!(
                    "agent `{agent}` does not take a message as its input, and none could be derived from this one ({}{}; request {}): say what its input needs, or send `input`, the agent's input as a JSON object, with the text",
                    reception.reasons.trim_end_matches('.'),
                    if reception.missing.is_empty() {
                        String::new()
                    } else {
                        format!("; missing: {}", reception.missing.join("; "))
                    },
                    reception.id
                ),
            )),
        }
    }

    /// `memory` read, of `agent`, redacted, with the ledger's actions.
    async fn checked_memory(
        &self,
        agent: &str,
        memory: &Value,
    ) -> Result<(Memory, Vec<String>), ConversationError> {
        let mut memory = read_memory(memory)?;
        if memory.agent != agent {
            return Err(MemoryError::Invalid {
                path: "/agent".to_owned(),
                message: format!(
                    "the memory is of agent `{}`, the conversation is with `{agent}`",
                    memory.agent
                ),
            }
            .into());
        }
        let notes = self.reconcile(&mut memory).await?;
        let mut value = memory.to_value();
        redact(&mut value, &self.runs.models().config().secret_values());
        let memory = serde_json::from_value(value)
            .map_err(|e| ConversationError::Corrupt(format!("a redacted memory: {e}")))?;
        Ok((memory, notes))
    }

    /// Makes `memory`'s runs and actions this store's: a run the store
    /// knows is replaced by the run as it is; the actions are exactly the
    /// ledger's actions of the memory's runs. Returns what changed.
    async fn reconcile(&self, memory: &mut Memory) -> Result<Vec<String>, ConversationError> {
        let mut notes = Vec::new();
        let mut actions = Vec::new();
        for summary in &mut memory.runs {
            let run = match self.runs.get(&summary.id).await {
                Ok(run) => run,
                Err(RunError::NotFound(_)) => continue,
                Err(e) => return Err(e.into()),
            };
            let now = summarize(&run)?;
            if *summary != now {
                notes.push(format!(
                    "run `{}`: as this store has it, not as the memory said",
                    run.id
                ));
                *summary = now;
            }
            actions.extend(self.ledger_actions(&run.id).await?);
        }
        for claimed in &memory.actions {
            match actions.iter().find(|a| a.id == claimed.id) {
                None => notes.push(format!(
                    "action `{}` ({} said): the execution ledger has no such action of the memory's runs; left out",
                    claimed.id,
                    claimed.state.as_str()
                )),
                Some(known) if known.state != claimed.state => notes.push(format!(
                    "action `{}`: {} in the execution ledger, not {} as the memory said",
                    claimed.id,
                    known.state.as_str(),
                    claimed.state.as_str()
                )),
                Some(_) => {}
            }
        }
        memory.actions = actions;
        Ok(notes)
    }

    async fn ledger_actions(&self, run: &RunId) -> Result<Vec<ActionSummary>, ConversationError> {
        let actions = self.actions.list(None, Some(run)).await.map_err(|e| {
            ConversationError::Corrupt(format!("reading run `{run}`'s actions: {e}"))
        })?;
        // A memory leaves nothing out without saying so.
        if let Some(skipped) = actions.skipped.first() {
            return Err(ConversationError::Corrupt(format!(
                "action `{}` of run `{run}` does not read: {}",
                skipped.id, skipped.error
            )));
        }
        Ok(actions
            .items
            .into_iter()
            .map(|a| ActionSummary {
                id: a.id,
                run: a.run,
                tool: a.tool,
                recipient: a.recipient,
                state: a.state,
                digest: a.digest,
            })
            .collect())
    }

    /// The memory of a conversation with `entries`: from its last saved
    /// memory on, each message with its run as it is now and its actions
    /// as the ledger has them; redacted.
    async fn memory_of(
        &self,
        conversation: &Conversation,
        entries: &[(u64, ConversationEntry)],
    ) -> Result<Memory, ConversationError> {
        let start = entries
            .iter()
            .rposition(|(_, e)| matches!(e, ConversationEntry::Memory { .. }));
        let mut memory = match start.map(|i| &entries[i].1) {
            Some(ConversationEntry::Memory { memory, .. }) => {
                let mut memory = stored_memory(memory)?;
                // Runs and actions may have moved on since it was saved.
                self.reconcile(&mut memory).await?;
                memory
            }
            _ => Memory::empty(&conversation.agent),
        };
        for (_, entry) in &entries[start.map_or(0, |i| i + 1)..] {
            let ConversationEntry::Message { text, run, .. } = entry else {
                continue;
            };
            let found = self.runs.get(run).await?;
            memory.messages.push(MemoryMessage {
                role: Speaker::User,
                text: text.clone(),
                run: Some(run.clone()),
            });
            memory.runs.push(summarize(&found)?);
            memory.actions.extend(self.ledger_actions(run).await?);
        }
        let mut value = memory.to_value();
        redact(&mut value, &self.runs.models().config().secret_values());
        serde_json::from_value(value)
            .map_err(|e| ConversationError::Corrupt(format!("a redacted memory: {e}")))
    }
}

fn open_conversation(row: &ConversationRow) -> Result<Conversation, ConversationError> {
    hane_stored::open(&row.body).map_err(|e| {
        ConversationError::Corrupt(format!("conversation `{}` cannot be read: {e}", row.id))
    })
}

/// A memory as an entry stored it (checked when it was saved).
fn stored_memory(memory: &JsonText) -> Result<Memory, ConversationError> {
    let value = memory
        .to_value()
        .map_err(|e| ConversationError::Corrupt(format!("a stored memory: {e}")))?;
    read_memory(&value).map_err(|e| ConversationError::Corrupt(format!("a stored memory: {e}")))
}

/// What a memory says of `run`.
fn summarize(run: &AgentRun) -> Result<RunSummary, ConversationError> {
    let json = |text: &JsonText| {
        text.to_value()
            .map_err(|e| ConversationError::Corrupt(format!("run `{}`: {e}", run.id)))
    };
    Ok(RunSummary {
        id: run.id.clone(),
        status: run.status,
        input: json(&run.input)?,
        result: run.result.as_ref().map(json).transpose()?,
        error: run.error.clone(),
        tool_calls: run
            .tool_calls
            .iter()
            .map(|call| ToolCallNote {
                tool: call.tool.clone(),
                status: call.status,
                detail: call.detail.clone(),
            })
            .collect(),
    })
}

/// The messages a model is given before a new message's task: each
/// person's message, and after it, as the agent's turn, what its run did
/// (its input, tool calls, result or error, and its actions with their
/// state). Ids are left out: they mean nothing to the model and change
/// from run to run.
pub fn history(memory: &Memory) -> Vec<Message> {
    let mut messages = Vec::new();
    for message in &memory.messages {
        match message.role {
            Speaker::User => messages.push(Message::user(message.text.clone())),
            Speaker::Assistant => messages.push(Message::assistant(message.text.clone())),
        }
        if let Some(run) = message.run.as_ref().and_then(|id| memory.run(id)) {
            let actions: Vec<&ActionSummary> =
                memory.actions.iter().filter(|a| a.run == run.id).collect();
            messages.push(Message::assistant(describe_run(run, &actions)));
        }
    }
    messages
}

/// A run, in words, for the model.
fn describe_run(run: &RunSummary, actions: &[&ActionSummary]) -> String {
    let mut text = format!(
        "(What I did for that message: a run that {}.)\nInput: {}",
        match run.status {
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "was cancelled",
            RunStatus::LimitExceeded => "went over a limit",
            RunStatus::Queued | RunStatus::Running => "had not ended",
        },
        run.input
    );
    for call in &run.tool_calls {
        text.push_str(&format!("\nCalled {}: {}", call.tool, call.status));
        if !call.detail.is_empty() {
            text.push_str(&format!(" ({})", call.detail));
        }
    }
    if let Some(result) = &run.result {
        text.push_str(&format!("\nResult: {result}"));
    }
    if let Some(error) = &run.error {
        text.push_str(&format!("\nError: {error}"));
    }
    for action in actions {
        text.push_str(&format!(
            "\nOutbound action {} to {}: {} (digest {})",
            action.tool,
            action.recipient,
            match action.state {
                ActionState::Pending => "waiting for a person's decision",
                ActionState::Approved => "approved, not sent yet",
                ActionState::Rejected => "rejected, not sent",
                ActionState::Executing => "being sent",
                ActionState::Delivered => "sent",
                ActionState::Failed => "not sent: delivery failed",
                ActionState::Unknown => "may or may not have been sent; a person reconciles it",
                ActionState::Shadowed => "recorded only (a shadow run)",
            },
            action.digest
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_puts_each_run_after_its_message_without_ids() {
        let run = RunId::new();
        let memory = read_memory(&json!({
            "schemaVersion": 2,
            "agent": "fleet-assistant",
            "messages": [
                { "role": "user", "text": "Is 品川 300 あ 12-34 in the fleet?", "run": run },
                { "role": "assistant", "text": "An earlier reply." }
            ],
            "runs": [{
                "id": run, "status": "succeeded",
                "input": { "message": "Is 品川 300 あ 12-34 in the fleet?" },
                "result": { "status": "found" },
                "toolCalls": [{ "tool": "data.find_record", "status": "succeeded" }]
            }],
            "actions": [{
                "id": hane_core::ActionId::new(), "run": run, "tool": "communication.send_email",
                "recipient": "desk@fleet.example", "state": "pending", "digest": "sha256:ab"
            }]
        }))
        .unwrap();
        let messages = history(&memory);
        assert_eq!(messages.len(), 3);
        let text: Vec<String> = messages
            .iter()
            .map(|m| serde_json::to_string(&m.content).unwrap())
            .collect();
        assert!(
            text[1].contains("Called data.find_record: succeeded"),
            "{}",
            text[1]
        );
        assert!(
            text[1].contains("Result: {\\\"status\\\":\\\"found\\\"}"),
            "{}",
            text[1]
        );
        assert!(
            text[1].contains("communication.send_email to desk@fleet.example: waiting for a person's decision (digest sha256:ab)"),
            "{}",
            text[1]
        );
        assert!(
            !text
                .iter()
                .any(|t| t.contains("run_") || t.contains("act_"))
        );
        assert_eq!(messages[2].role, hane_model_types::Role::Assistant);
    }
}
