//! Identifiers: generated ones for sessions, tool calls and operations, and
//! the caller-supplied [`InputId`].

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest input id accepted, in bytes.
pub const MAX_INPUT_ID_LEN: usize = 256;

/// An identifier that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} `{text}`: {reason}")]
pub struct IdError {
    /// The kind of id, such as `session id`.
    pub what: &'static str,
    /// The start of the text given ([`IdError::shown`]): at most
    /// [`SHOWN_ID_CHARS`] characters, control characters escaped.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// The most characters of a malformed id an error repeats.
pub const SHOWN_ID_CHARS: usize = 64;

impl IdError {
    /// `text` as an error shows it: its first [`SHOWN_ID_CHARS`]
    /// characters, `…` when there were more, and control characters
    /// escaped, so an error never echoes kilobytes or terminal escapes
    /// back.
    pub fn shown(text: &str) -> String {
        let mut shown = String::new();
        for c in text.chars().take(SHOWN_ID_CHARS) {
            if c.is_control() {
                shown.extend(c.escape_debug());
            } else {
                shown.push(c);
            }
        }
        if text.chars().nth(SHOWN_ID_CHARS).is_some() {
            shown.push('…');
        }
        shown
    }
}

/// Milliseconds since the Unix epoch: the one clock stored times are read
/// from (0 on a clock set before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

const CROCKFORD: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// 26 characters of Crockford base32: 48 bits of milliseconds since the
/// epoch, then 80 random bits. Ids sort by creation time.
fn generate() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut random = [0u8; 10];
    // Without an entropy source the process cannot make unique ids.
    getrandom::fill(&mut random).expect("the operating system provides random bytes");
    let mut value = (ms & ((1 << 48) - 1)) << 80;
    for (i, b) in random.iter().enumerate() {
        value |= u128::from(*b) << (8 * (9 - i));
    }
    (0..26)
        .rev()
        .map(|i| CROCKFORD[((value >> (5 * i)) & 31) as usize] as char)
        .collect()
}

macro_rules! generated_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            #[doc = concat!("A new unique id, `", $prefix, "` followed by 26 characters.")]
            #[expect(clippy::new_without_default, reason = "every value is new; a default would hide that")]
            pub fn new() -> Self {
                Self(format!("{}{}", $prefix, generate()))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, IdError> {
                let err = |reason: &str| IdError {
                    what: $what,
                    text: IdError::shown(s),
                    reason: reason.to_owned(),
                };
                let rest = s
                    .strip_prefix($prefix)
                    .ok_or_else(|| err(concat!("it must start with `", $prefix, "`")))?;
                if rest.len() != 26 || !rest.bytes().all(|b| CROCKFORD.contains(&b)) {
                    return Err(err(concat!(
                        "expected `",
                        $prefix,
                        "` and 26 lowercase base32 characters"
                    )));
                }
                Ok(Self(s.to_owned()))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }

        /// The prefix and 26 lowercase base32 characters, as serialized.
        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "pattern": concat!("^", $prefix, "[0-9a-hjkmnp-tv-z]{26}$")
                })
            }
        }
    };
}

generated_id!(
    /// Names a session: `ses_` and 26 characters.
    SessionId,
    "ses_",
    "session id"
);
generated_id!(
    /// Names one tool call within a session: `call_` and 26 characters.
    ToolCallId,
    "call_",
    "tool call id"
);
generated_id!(
    /// Names one operation: `op_` and 26 characters.
    OperationId,
    "op_",
    "operation id"
);
generated_id!(
    /// Names one agent run: `run_` and 26 characters.
    RunId,
    "run_",
    "run id"
);
generated_id!(
    /// Names one task for people, such as a handover: `task_` and 26
    /// characters.
    TaskId,
    "task_",
    "task id"
);
generated_id!(
    /// Names one outbound action an agent proposed (an ActionRequest):
    /// `act_` and 26 characters.
    ActionId,
    "act_",
    "action id"
);
generated_id!(
    /// Names one conversation of the built-in chat: `conv_` and 26
    /// characters.
    ConversationId,
    "conv_",
    "conversation id"
);
generated_id!(
    /// Names one request reception answered (`POST /v1/agents/requests`):
    /// `req_` and 26 characters.
    ReceptionId,
    "req_",
    "request id"
);
generated_id!(
    /// Names one evaluation of an `EvalSuite` (`POST /v1/agents/evals`):
    /// `eval_` and 26 characters.
    EvaluationId,
    "eval_",
    "evaluation id"
);
generated_id!(
    /// Names one case of a workflow: `case_` and 26 characters.
    WorkflowCaseId,
    "case_",
    "workflow case id"
);

/// The id a caller gives an input. It is globally unique and stays the same
/// when the input is delivered again, which is what makes redelivery safe:
/// a session accepts each input id once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InputId(String);

impl InputId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for InputId {
    type Err = IdError;

    /// Accepts 1 to [`MAX_INPUT_ID_LEN`] bytes with no control characters.
    fn from_str(s: &str) -> Result<Self, IdError> {
        let err = |reason: String| IdError {
            what: "input id",
            text: IdError::shown(s),
            reason,
        };
        if s.is_empty() {
            return Err(err("it is empty".into()));
        }
        if s.len() > MAX_INPUT_ID_LEN {
            return Err(err(format!(
                "it is {} bytes long, more than {MAX_INPUT_ID_LEN}",
                s.len()
            )));
        }
        if s.chars().any(char::is_control) {
            return Err(err("it contains a control character".into()));
        }
        Ok(Self(s.to_owned()))
    }
}

impl fmt::Display for InputId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for InputId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for InputId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_back_and_sort_by_time() {
        let a = SessionId::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = SessionId::new();
        assert!(a < b, "{a} should sort before {b}");
        assert_eq!(a.as_str().parse::<SessionId>().unwrap(), a);
        assert_eq!(a.as_str().len(), 4 + 26);
    }

    #[test]
    fn ids_of_another_kind_are_refused_by_name() {
        let op = OperationId::new();
        let err = op.as_str().parse::<SessionId>().unwrap_err();
        assert_eq!(err.what, "session id");
        assert!(err.to_string().contains("must start with `ses_`"), "{err}");
        let err = "ses_short".parse::<SessionId>().unwrap_err();
        assert!(err.to_string().contains("26 lowercase base32"), "{err}");
    }

    #[test]
    fn errors_show_the_start_of_a_long_id_with_controls_escaped() {
        let err = format!("run_{}", "a".repeat(8000))
            .parse::<RunId>()
            .unwrap_err();
        assert_eq!(err.text, format!("run_{}…", "a".repeat(SHOWN_ID_CHARS - 4)));
        assert!(err.to_string().len() < 200, "{err}");
        let err = "ses_\u{1b}[2Jx".parse::<SessionId>().unwrap_err();
        assert_eq!(err.text, "ses_\\u{1b}[2Jx");
        assert!(!err.to_string().contains('\u{1b}'), "{err}");
    }

    #[test]
    fn input_ids_are_bounded_and_printable() {
        assert!("order-17/attempt".parse::<InputId>().is_ok());
        assert!(
            "".parse::<InputId>()
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        let long = "x".repeat(MAX_INPUT_ID_LEN + 1);
        assert!(
            long.parse::<InputId>()
                .unwrap_err()
                .to_string()
                .contains("257 bytes")
        );
        assert!(
            "a\nb"
                .parse::<InputId>()
                .unwrap_err()
                .to_string()
                .contains("control")
        );
    }
}
