//! The `hane:operation/actions` capability: an operation proposes outbound
//! actions (email, SMS, calls, writes through a customer API); it never
//! sends one.
//!
//! A proposal is only recorded in the call's state, with an id the host
//! gives it (`prop-1`, `prop-2`, … in the order proposed). When the call
//! succeeds, its proposals come back in [`Call::proposals`] for the host to
//! fix into action requests, have decided and deliver; when it fails in any
//! way (its own error, a trap, a limit, a timeout, cancellation) they are
//! dropped. Proposing a tool the call's policy does not grant returns the
//! WIT `denied` error and is recorded as a denial in the receipt;
//! everything the guest passes in is capped by the constants below.
//!
//! [`Call::proposals`]: crate::Call::proposals

use std::sync::Arc;

use hane_core::{
    ControlTool, JsonText, Policy,
    action::ProposedAction,
    address::{AddressError, check_recipient},
};
use serde_json::Value;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::hane::operation::actions;
use crate::bindings::hane::operation::types::Error;
use crate::state::{Incidents, NameGrant, NamedCapability};

/// Most proposals one call may make; past it `propose` returns
/// `invalid-input`. An operation proposes a handful of messages, and each
/// proposal becomes work for a decider.
pub const MAX_PROPOSALS: usize = 16;
/// Longest recipient, in bytes: the longest email address (64 bytes of
/// local part, `@` and 255 of domain); phone numbers and connection names
/// are far shorter.
pub const MAX_RECIPIENT_BYTES: usize = 320;
/// Longest content of one proposal, in bytes of JSON text: 64 KiB.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;

/// The `actions` state of one call: the tools it may propose and what it
/// proposed.
pub(crate) struct ActionsCtx {
    grant: NameGrant,
    proposals: Vec<ProposedAction>,
}

impl ActionsCtx {
    /// The proposals made so far, in order, leaving none.
    pub(crate) fn take_proposals(&mut self) -> Vec<ProposedAction> {
        std::mem::take(&mut self.proposals)
    }
}

/// Builds an [`ActionsCtx`]; each method documents its default.
#[derive(Default)]
pub(crate) struct ActionsCtxBuilder {
    policy: Arc<Policy>,
}

impl ActionsCtxBuilder {
    /// Nothing may be proposed.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The policy whose `actions` grant is checked. Default: one that
    /// grants nothing.
    pub(crate) fn policy(&mut self, policy: Arc<Policy>) -> &mut Self {
        self.policy = policy;
        self
    }

    /// The context; refusals are recorded in `incidents`.
    pub(crate) fn build(&mut self, incidents: Arc<Incidents>) -> ActionsCtx {
        ActionsCtx {
            grant: NameGrant::new(
                NamedCapability::Actions,
                std::mem::take(&mut self.policy),
                incidents,
            ),
            proposals: Vec::new(),
        }
    }
}

/// Adds `hane:operation/actions` to `linker`, reading each call's context
/// with `get`.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut ActionsCtx,
) -> wasmtime::Result<()> {
    actions::add_to_linker::<T, HasSelf<ActionsCtx>>(linker, get)
}

impl actions::Host for ActionsCtx {
    fn propose(
        &mut self,
        tool: String,
        recipient: String,
        content: String,
    ) -> wasmtime::Result<Result<String, Error>> {
        if let Err(denied) = self.grant.check(&tool) {
            return Ok(Err(denied));
        }
        let content = match check(&tool, &recipient, &content) {
            Ok(content) => content,
            Err(refused) => return Ok(Err(Error::InvalidInput(refused.to_string()))),
        };
        if self.proposals.len() >= MAX_PROPOSALS {
            return Ok(Err(Error::InvalidInput(format!(
                "this call already made {MAX_PROPOSALS} proposals, the most one call may make"
            ))));
        }
        let id = format!("prop-{}", self.proposals.len() + 1);
        self.proposals.push(ProposedAction {
            id: id.clone(),
            tool,
            recipient,
            content,
        });
        Ok(Ok(id))
    }
}

/// Why [`check`] refused a proposal; the guest reads its text in the WIT
/// `invalid-input` error.
#[derive(Debug, thiserror::Error)]
enum ProposalError {
    #[error("the recipient is empty")]
    EmptyRecipient,
    #[error("the recipient is {bytes} bytes; recipients are at most {MAX_RECIPIENT_BYTES}")]
    RecipientTooLong { bytes: usize },
    #[error("the recipient {0}")]
    Recipient(#[source] AddressError),
    #[error("the content is {bytes} bytes; content is at most {MAX_CONTENT_BYTES}")]
    ContentTooLong { bytes: usize },
    #[error("the content is JSON but not an object; it must be a JSON object")]
    NotAnObject,
    #[error("the content is not JSON: {0}; it must be a JSON object")]
    NotJson(#[source] serde_json::Error),
}

/// The content as JSON when the recipient and content are within the caps,
/// the recipient is one of the kind `tool` sends to
/// ([`hane_core::address::check_recipient`], as the host checks every proposal
/// again), and the content is a JSON object.
fn check(tool: &str, recipient: &str, content: &str) -> Result<JsonText, ProposalError> {
    if recipient.trim().is_empty() {
        return Err(ProposalError::EmptyRecipient);
    }
    if recipient.len() > MAX_RECIPIENT_BYTES {
        return Err(ProposalError::RecipientTooLong {
            bytes: recipient.len(),
        });
    }
    if let Some(tool) = ControlTool::named(tool) {
        check_recipient(tool, recipient).map_err(ProposalError::Recipient)?;
    }
    if content.len() > MAX_CONTENT_BYTES {
        return Err(ProposalError::ContentTooLong {
            bytes: content.len(),
        });
    }
    match serde_json::from_str::<Value>(content) {
        Ok(value @ Value::Object(_)) => Ok(JsonText::from_value(&value)),
        Ok(_) => Err(ProposalError::NotAnObject),
        Err(e) => Err(ProposalError::NotJson(e)),
    }
}

#[cfg(test)]
mod tests {
    use actions::Host as _;
    use serde_json::json;

    use super::*;

    const EMAIL: &str = "communication.send_email";

    fn granting(granted: &[&str]) -> (ActionsCtx, Arc<Incidents>) {
        let incidents = Arc::new(Incidents::default());
        let policy = Arc::new(Policy {
            actions: granted.iter().map(|s| (*s).to_owned()).collect(),
            ..Policy::default()
        });
        let ctx = ActionsCtxBuilder::new()
            .policy(policy)
            .build(incidents.clone());
        (ctx, incidents)
    }

    fn propose(
        ctx: &mut ActionsCtx,
        tool: &str,
        recipient: &str,
        content: &str,
    ) -> Result<String, Error> {
        ctx.propose(tool.into(), recipient.into(), content.into())
            .unwrap()
    }

    #[test]
    fn granted_proposals_are_numbered_and_kept_in_order() {
        let (mut ctx, incidents) = granting(&[EMAIL, "communication.send_sms"]);
        let content = r#"{"subject": "Inspection due: V-001", "body": "Please book it."}"#;
        assert_eq!(
            propose(&mut ctx, EMAIL, "kenji@example.com", content).unwrap(),
            "prop-1"
        );
        assert_eq!(
            propose(
                &mut ctx,
                "communication.send_sms",
                "+81312345678",
                r#"{"text":"hi"}"#
            )
            .unwrap(),
            "prop-2"
        );
        let proposals = ctx.take_proposals();
        assert_eq!(proposals.len(), 2);
        assert_eq!(proposals[0].tool, EMAIL);
        assert_eq!(proposals[0].recipient, "kenji@example.com");
        assert_eq!(
            proposals[0].content.to_value().unwrap(),
            json!({"subject": "Inspection due: V-001", "body": "Please book it."})
        );
        assert_eq!(proposals[1].id, "prop-2");
        assert_eq!(incidents.denied(), 0);
    }

    #[test]
    fn ungranted_tools_are_denied_and_recorded() {
        let (mut ctx, incidents) = granting(&[EMAIL]);
        let err = propose(&mut ctx, "communication.send_sms", "+81312345678", "{}").unwrap_err();
        assert!(
            matches!(&err, Error::Denied(m) if m.contains("action tool `communication.send_sms` is not granted")
                && m.contains("(granted: communication.send_email); grant it in `capabilities.actions`")),
            "{err:?}"
        );
        assert_eq!(incidents.denied(), 1);
        assert_eq!(
            incidents.first_denial().unwrap(),
            "action tool `communication.send_sms` is not granted"
        );
        let (mut none, _) = granting(&[]);
        let err = propose(&mut none, EMAIL, "a@example.com", "{}").unwrap_err();
        assert!(
            matches!(&err, Error::Denied(m) if m.contains("(none is granted); grant it in `capabilities.actions`")),
            "{err:?}"
        );
        assert!(ctx.take_proposals().is_empty());
    }

    #[test]
    fn content_must_be_a_json_object_within_the_caps() {
        let (mut ctx, incidents) = granting(&[EMAIL]);
        for (recipient, content, expected) in [
            ("a@example.com", "{nope", "the content is not JSON"),
            ("a@example.com", "[1, 2]", "not an object"),
            ("a@example.com", "\"text\"", "not an object"),
            (" ", "{}", "the recipient is empty"),
            (
                "boss\u{1b}[4D\u{1b}[K@fleet.example",
                "{}",
                r"the recipient is not one email address (`name@example.com`): it holds the control character \u{1b}",
            ),
            ("Boss <boss@example.com>", "{}", "it holds a space"),
            (
                &"a".repeat(MAX_RECIPIENT_BYTES + 1),
                "{}",
                "recipients are at most 320",
            ),
            (
                "a@example.com",
                &format!(r#"{{"body": "{}"}}"#, "x".repeat(MAX_CONTENT_BYTES)),
                "content is at most 65536",
            ),
        ] {
            let err = propose(&mut ctx, EMAIL, recipient, content).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidInput(m) if m.contains(expected)),
                "{expected}: {err:?}"
            );
        }
        assert!(ctx.take_proposals().is_empty());
        assert_eq!(incidents.denied(), 0);
    }

    #[test]
    fn texts_and_calls_go_to_e164_numbers() {
        let (mut ctx, _) = granting(&["communication.send_sms", "communication.place_call"]);
        for tool in ["communication.send_sms", "communication.place_call"] {
            assert!(propose(&mut ctx, tool, "+81312345678", r#"{"text":"hi"}"#).is_ok());
            let err = propose(&mut ctx, tool, "03-1234-5678", r#"{"text":"hi"}"#).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidInput(m) if m.starts_with("the recipient is not a phone number in E.164 form")),
                "{err:?}"
            );
        }
        assert_eq!(ctx.take_proposals().len(), 2);
    }

    #[test]
    fn proposals_past_the_cap_are_refused() {
        let (mut ctx, _) = granting(&[EMAIL]);
        for i in 1..=MAX_PROPOSALS {
            assert_eq!(
                propose(&mut ctx, EMAIL, "a@example.com", "{}").unwrap(),
                format!("prop-{i}")
            );
        }
        let err = propose(&mut ctx, EMAIL, "a@example.com", "{}").unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput(m) if m.contains("already made 16 proposals")),
            "{err:?}"
        );
        assert_eq!(ctx.take_proposals().len(), MAX_PROPOSALS);
    }
}
