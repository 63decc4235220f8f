//! The kind and version of each stored type, and how an older version
//! reads: through the mirrors in `v1`, `v2` and `v3`.

use hane_core::conversation::ConversationEntry;
use hane_core::{
    ActionRequest, AgentRun, Conversation, Evaluation, Operation, Reception, SessionEvent, Task,
    WorkflowCase,
};

use crate::Versioned;

impl Versioned for Conversation {
    const KIND: &'static str = "conversation";
    const VERSION: u16 = 1;
}

impl Versioned for ConversationEntry {
    const KIND: &'static str = "conversation-entry";
    const VERSION: u16 = 1;
}

impl Versioned for Reception {
    const KIND: &'static str = "reception";
    const VERSION: u16 = 1;
}

impl Versioned for Evaluation {
    const KIND: &'static str = "evaluation";
    const VERSION: u16 = 1;
}

/// Version 2 added the `records` and `documents` grants to operations'
/// policies and their call counts to receipts, version 3 the `actions`
/// grant, version 4 the guest's error kind to failures, version 5 the
/// [`SessionEvent::LlmTurn`] event, version 6 the [`SessionEvent::CliOutput`]
/// event, version 7 the [`SessionEvent::ActionProposed`] and
/// [`SessionEvent::TaskCreated`] events; older versions read with none
/// granted and the kind taken from the failure's message. Versions 5 to 7
/// only appended variants, so a version 4 to 6 payload reads as the
/// current type.
impl Versioned for SessionEvent {
    const KIND: &'static str = "session-event";
    const VERSION: u16 = 7;
    const READS: &'static [u16] = &[1, 2, 3, 4, 5, 6, 7];

    fn upgrade(version: u16, payload: &[u8]) -> Result<Self, postcard::Error> {
        match version {
            1 => crate::v1::upgrade::<crate::v1::SessionEvent, _>(version, payload),
            2 => crate::v2::upgrade::<crate::v2::SessionEvent, _>(version, payload),
            3 => crate::v3::upgrade::<crate::v3::SessionEvent, _>(version, payload),
            _ => postcard::from_bytes(payload),
        }
    }
}

/// Version 2 added the `records` and `documents` grants to the policy,
/// version 3 the `actions` grant; older versions read with none.
impl Versioned for Operation {
    const KIND: &'static str = "operation";
    const VERSION: u16 = 3;
    const READS: &'static [u16] = &[1, 2, 3];

    fn upgrade(version: u16, payload: &[u8]) -> Result<Self, postcard::Error> {
        match version {
            1 => crate::v1::upgrade::<crate::v1::Operation, _>(version, payload),
            _ => crate::v2::upgrade::<crate::v2::Operation, _>(version, payload),
        }
    }
}

impl Versioned for WorkflowCase {
    const KIND: &'static str = "workflow-case";
    const VERSION: u16 = 1;
}

impl Versioned for AgentRun {
    const KIND: &'static str = "agent-run";
    const VERSION: u16 = 2;
    const READS: &'static [u16] = &[1, 2];

    fn upgrade(version: u16, payload: &[u8]) -> Result<Self, postcard::Error> {
        crate::v1::upgrade::<crate::v1::AgentRun, _>(version, payload)
    }
}

impl Versioned for Task {
    const KIND: &'static str = "task";
    const VERSION: u16 = 1;
}

/// Version 2 added the connection's timeout to an `integration.execute`
/// action's target, version 3 its CA certificates, version 4 its response
/// cap and schema and the schema violations of a delivered answer; older
/// actions read with none.
impl Versioned for ActionRequest {
    const KIND: &'static str = "action-request";
    const VERSION: u16 = 4;
    const READS: &'static [u16] = &[1, 2, 3, 4];

    fn upgrade(version: u16, payload: &[u8]) -> Result<Self, postcard::Error> {
        match version {
            1 => crate::v1::upgrade::<crate::v1::ActionRequest, _>(version, payload),
            2 => crate::v2::upgrade::<crate::v2::ActionRequest, _>(version, payload),
            _ => crate::v3::upgrade::<crate::v3::ActionRequest, _>(version, payload),
        }
    }
}

#[cfg(test)]
mod tests {
    use hane_core::{ConversationId, JsonText, RunId};

    use super::*;
    use crate::{EnvelopeError, open, seal};

    /// Each stored type has a kind of its own, so one is never read as
    /// another.
    #[test]
    fn kinds_are_distinct() {
        let kinds = [
            Conversation::KIND,
            ConversationEntry::KIND,
            Reception::KIND,
            Evaluation::KIND,
            SessionEvent::KIND,
            Operation::KIND,
            WorkflowCase::KIND,
            AgentRun::KIND,
            Task::KIND,
            ActionRequest::KIND,
        ];
        let unique: std::collections::BTreeSet<_> = kinds.iter().collect();
        assert_eq!(unique.len(), kinds.len(), "{kinds:?}");
    }

    #[test]
    fn an_item_reads_back_and_is_not_read_as_another_kind() {
        let entry = ConversationEntry::Memory {
            memory: JsonText::parse(r#"{"schemaVersion":2}"#).unwrap(),
            at_ms: 9,
        };
        assert_eq!(open::<ConversationEntry>(&seal(&entry)).unwrap(), entry);
        let conversation = Conversation {
            id: ConversationId::new(),
            agent: "fleet-assistant".to_owned(),
            created_at_ms: 3,
        };
        assert_eq!(
            open::<Conversation>(&seal(&conversation)).unwrap(),
            conversation
        );
        assert!(matches!(
            open::<Conversation>(&seal(&entry)),
            Err(EnvelopeError::WrongKind {
                expected: "conversation",
                ..
            })
        ));
        let message = ConversationEntry::Message {
            text: "Is 品川 300 あ 12-34 due?".to_owned(),
            run: RunId::new(),
            at_ms: 7,
        };
        assert_eq!(open::<ConversationEntry>(&seal(&message)).unwrap(), message);
    }
}
