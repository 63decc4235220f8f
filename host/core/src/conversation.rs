//! Conversations of the built-in chat, as the store keeps them: a
//! [`Conversation`] with one agent, and its [`ConversationEntry`]s in
//! order. What a message's run did is not copied into an entry: the run,
//! the execution ledger and the session hold it, and the context of the
//! next message is built from them as they are then.

use serde::{Deserialize, Serialize};

use crate::{ConversationId, JsonText, RunId};

/// A conversation with one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    /// The conversation's id.
    pub id: ConversationId,
    /// The agent every message's run is a run of.
    pub agent: String,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
}

/// One entry of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ConversationEntry {
    /// A person's message, and the run of the conversation's agent it
    /// started.
    Message {
        /// What the person wrote.
        text: String,
        /// The run it started.
        run: RunId,
        /// When it was accepted.
        at_ms: u64,
    },
    /// A saved memory: the conversation's context starts from it and
    /// goes on with the entries after it.
    Memory {
        /// The memory's JSON, as checked and upgraded to the memory format
        /// this build writes when it was saved.
        memory: JsonText,
        /// When it was saved.
        at_ms: u64,
    },
}

impl ConversationEntry {
    /// When the entry was made.
    pub fn at_ms(&self) -> u64 {
        match self {
            ConversationEntry::Message { at_ms, .. } | ConversationEntry::Memory { at_ms, .. } => {
                *at_ms
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let entries = [
            ConversationEntry::Message {
                text: "Is 品川 300 あ 12-34 due?".to_owned(),
                run: RunId::new(),
                at_ms: 7,
            },
            ConversationEntry::Memory {
                memory: JsonText::parse(r#"{"schemaVersion":2}"#).unwrap(),
                at_ms: 9,
            },
        ];
        for entry in entries {
            let read: ConversationEntry = crate::round_trip(&entry);
            assert_eq!(read, entry);
        }
        let conversation = Conversation {
            id: ConversationId::new(),
            agent: "fleet-assistant".to_owned(),
            created_at_ms: 3,
        };
        assert_eq!(crate::round_trip(&conversation), conversation);
    }
}
