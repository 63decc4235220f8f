//! Outbound actions, proposed through `hane:operation/actions`.
//!
//! An operation whose impact is `Outbound` does not send email, SMS or
//! calls, nor write through a customer's API: it proposes each action to
//! the host, which fixes exactly what would go out, has a decider approve
//! or reject it, and delivers an approved one itself, exactly once.
//! **Nothing is sent by proposing**, and nothing is sent while the call
//! runs; if the call then fails (returns an error, panics or passes a
//! limit), its proposals are dropped.
//!
//! A call may propose only the tools its policy grants
//! (`capabilities.actions` in the operation's manifest, `--allow-actions`
//! on the command line): proposing another comes back as
//! [`Error::Denied`], which the host also records in the call's receipt.
//! The tools are `communication.send_email` (content `{"subject", "body"}`),
//! `communication.send_sms` (`{"text"}`), `communication.place_call`
//! (`{"message"}`) and `integration.execute`.
//!
//! # Examples
//!
//! ```no_run
//! use hane_guest::{actions, Error};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Error> {
//! let id = actions::propose(
//!     "communication.send_email",
//!     "kenji@example.com",
//!     &json!({"subject": "Inspection due: V-001", "body": "Please book an inspection."}),
//! )?;
//! assert!(id.starts_with("prop-"));
//! # Ok(())
//! # }
//! ```

use serde_json::Value;

use crate::Error;

/// Proposes one action of `tool` to `recipient` (an address, a phone number
/// or a connection name) with `content`, a JSON object; returns the id the
/// host gave the proposal in this call (`prop-1`, `prop-2`, …). Nothing is
/// sent.
///
/// # Errors
///
/// - [`Error::Denied`] when `tool` is not granted to this call;
/// - [`Error::InvalidInput`] when `content` is not an object, `recipient`
///   is empty, either is over the host's caps (320 bytes of recipient,
///   64 KiB of content), or the call has made as many proposals as the host
///   allows (16);
/// - [`Error::Failed`] outside a wasm32 component.
pub fn propose(tool: &str, recipient: &str, content: &Value) -> Result<String, Error> {
    host::propose(tool, recipient, &content.to_string())
}

#[cfg(target_arch = "wasm32")]
mod host {
    use crate::Error;
    use crate::wit::hane::operation::actions;

    pub(super) fn propose(tool: &str, recipient: &str, content: &str) -> Result<String, Error> {
        Ok(actions::propose(tool, recipient, content)?)
    }
}

// The generated imports are `unreachable!()` stubs off wasm32.
#[cfg(not(target_arch = "wasm32"))]
mod host {
    use crate::Error;

    pub(super) fn propose(_tool: &str, _recipient: &str, _content: &str) -> Result<String, Error> {
        Err(Error::Failed(
            "actions are only available inside a wasm32-wasip2 component".to_owned(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn off_wasm_proposals_fail_without_panicking() {
        let err = propose("communication.send_email", "a@example.com", &json!({})).unwrap_err();
        assert!(matches!(err, Error::Failed(m) if m.contains("only available inside")));
    }
}
