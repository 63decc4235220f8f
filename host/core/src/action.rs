//! [`ProposedAction`]: an outbound action an operation proposed through the
//! `actions` capability.

use serde::{Deserialize, Serialize};

use crate::JsonText;

/// An outbound action an operation proposed during one call, as the
/// sandbox recorded it. Nothing has been sent: a proposal is only what
/// the operation asked for, for the host to fix into an action request,
/// have decided, and deliver itself.
///
/// The sandbox returns the proposals of a call only when the call
/// succeeded; those of a call that failed are dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposedAction {
    /// The id the sandbox gave it within its call: `prop-1`, `prop-2`, …
    /// in the order proposed.
    pub id: String,
    /// The outbound tool, one of [`OUTBOUND_TOOLS`](crate::tool::OUTBOUND_TOOLS),
    /// granted to the operation by its policy's `actions`.
    pub tool: String,
    /// Who would receive it: an address, a phone number or a connection
    /// name, as the operation wrote it.
    pub recipient: String,
    /// What would go out: a JSON object, such as `{"subject": …, "body":
    /// …}` for an email.
    pub content: JsonText,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposals_round_trip_through_postcard_and_json() {
        let proposal = ProposedAction {
            id: "prop-1".into(),
            tool: "communication.send_email".into(),
            recipient: "kenji@example.com".into(),
            content: JsonText::parse(r#"{"subject":"Inspection due: V-001","body":"Book it."}"#)
                .unwrap(),
        };
        let bytes = postcard::to_allocvec(&proposal).unwrap();
        assert_eq!(
            postcard::from_bytes::<ProposedAction>(&bytes).unwrap(),
            proposal
        );
        // JSON shows the content as an object, not as a string of JSON.
        let json = serde_json::to_value(&proposal).unwrap();
        assert_eq!(json["content"]["subject"], "Inspection due: V-001");
        let back: ProposedAction = serde_json::from_value(json).unwrap();
        assert_eq!(back.recipient, proposal.recipient);
        assert_eq!(
            back.content.to_value().unwrap(),
            proposal.content.to_value().unwrap()
        );
    }
}
