//! ActionRequests: an outbound action an agent proposed, fixed with a
//! digest of exactly what would go out, and the trail of who decided.

use std::fmt;
use std::str::FromStr;

use crate::{ActionId, JsonText, Lifecycle, RunId, TaskId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Where an action is.
///
/// `pending → approved → executing → delivered | failed | unknown`, or
/// `pending → rejected`; `shadowed` for what a shadow run would have sent.
/// `unknown` is final for the run; a person may reconcile it to
/// `delivered` or `failed`. Every transition is in
/// [`Lifecycle::TRANSITIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(
    description = "`pending` → `approved` → `executing` → `delivered`, `failed` or `unknown`; or `pending` → `rejected`. `shadowed` is what a shadow run would have proposed. An `unknown` action may or may not have gone out and is never resent; a person reconciles it"
)]
pub enum ActionState {
    /// Waiting for a decision.
    Pending,
    /// Approved; not attempted yet.
    Approved,
    /// Refused; nothing was sent.
    Rejected,
    /// The attempt is recorded and delivery is under way.
    Executing,
    /// Sent.
    Delivered,
    /// Not sent: the adapter says nothing went out.
    Failed,
    /// It may or may not have gone out; never resent, a person reconciles
    /// it.
    Unknown,
    /// A shadow run proposed it; only a record.
    Shadowed,
}

impl ActionState {
    /// Every state.
    pub const ALL: [ActionState; 8] = [
        ActionState::Pending,
        ActionState::Approved,
        ActionState::Rejected,
        ActionState::Executing,
        ActionState::Delivered,
        ActionState::Failed,
        ActionState::Unknown,
        ActionState::Shadowed,
    ];

    /// The state's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionState::Pending => "pending",
            ActionState::Approved => "approved",
            ActionState::Rejected => "rejected",
            ActionState::Executing => "executing",
            ActionState::Delivered => "delivered",
            ActionState::Failed => "failed",
            ActionState::Unknown => "unknown",
            ActionState::Shadowed => "shadowed",
        }
    }

    /// True when the run that proposed it can go on: nothing more will
    /// happen to it without a person.
    pub fn is_settled(self) -> bool {
        !matches!(
            self,
            ActionState::Pending | ActionState::Approved | ActionState::Executing
        )
    }
}

impl fmt::Display for ActionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An action state's name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown action state `{0}`; expected one of pending, approved, rejected, executing, delivered, failed, unknown, shadowed"
)]
pub struct UnknownActionState(pub String);

impl FromStr for ActionState {
    type Err = UnknownActionState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ActionState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownActionState(s.to_owned()))
    }
}

impl Lifecycle for ActionState {
    const KIND: &'static str = "action";
    const ALL: &'static [Self] = &ActionState::ALL;
    /// Proposed for a decider, or decided by a policy as it was proposed,
    /// or a shadow run's record.
    const INITIAL: &'static [Self] = &[
        ActionState::Pending,
        ActionState::Approved,
        ActionState::Rejected,
        ActionState::Shadowed,
    ];
    const TRANSITIONS: &'static [(Self, Self)] = {
        use ActionState::*;
        &[
            // A review agent escalates it: people decide it, with a task.
            (Pending, Pending),
            // A decider approves it.
            (Pending, Approved),
            // A decider rejects it, or it is withdrawn: its run stopped.
            (Pending, Rejected),
            // Claimed for delivery, the attempt recorded.
            (Approved, Executing),
            // Not sent: the day's budget has no action left.
            (Approved, Failed),
            // The adapter's answer, or recovery's when its deliverer died.
            (Executing, Delivered),
            (Executing, Failed),
            (Executing, Unknown),
            // A person reconciles it, or its deliverer, taken for dead,
            // records what the adapter said after all.
            (Unknown, Delivered),
            (Unknown, Failed),
            (Unknown, Unknown),
        ]
    };

    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// Who decided, or decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(description = "Only `person` is human approval")]
pub enum DeciderKind {
    /// A person (an approval task for an assignment group).
    Person,
    /// A review agent.
    Agent,
    /// A rule of the agent's DeciderPolicy, without a task.
    Policy,
}

impl DeciderKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeciderKind::Person => "person",
            DeciderKind::Agent => "agent",
            DeciderKind::Policy => "policy",
        }
    }
}

/// What a decider said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Send it.
    Approve,
    /// Do not send it.
    Reject,
    /// A review agent hands the decision to a person.
    Escalate,
}

impl Verdict {
    /// The verdict's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "approve",
            Verdict::Reject => "reject",
            Verdict::Escalate => "escalate",
        }
    }
}

/// One entry of an action's decider trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Decision {
    /// Of which kind the decider is. Only `person` is human approval.
    pub kind: DeciderKind,
    /// Who: an API key's name or `cli:USER` for a person, `agent:NAME
    /// (run ID)` for a review agent, `policy:NAME rule N` for a policy.
    pub by: String,
    /// What was decided.
    pub verdict: Verdict,
    /// Why, when given.
    pub reason: Option<String>,
    /// The digest of the content the decider saw.
    pub digest: String,
    /// When.
    pub at_ms: u64,
}

/// One attempt to deliver, recorded before delivery starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// The process that made it: `PID:START` (its start time in clock
    /// ticks since boot), so recovery can tell whether it still runs.
    pub owner: String,
    /// When it started.
    pub started_at_ms: u64,
}

/// How an action ended, from the adapter or a person's reconciliation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct ActionOutcome {
    /// `delivered`, `failed`, `unknown`, `rejected` or `shadowed`.
    pub state: ActionState,
    /// The provider's answer or what went wrong.
    pub detail: String,
    /// Who reconciled it, when a person did.
    pub reconciled_by: Option<String>,
    /// When.
    pub at_ms: u64,
    /// For a delivered `integration.execute`: how the API's answer departs
    /// from the schema its document gives the operation's success
    /// response, one sentence each; empty when it matches, when the
    /// document gives none, and for other actions.
    pub schema_violations: Vec<String>,
}

/// A person deciding or reconciling outbound actions: how the trail names
/// them, and the assignment groups they act for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    /// How decisions name them, such as `key:desk`.
    pub by: String,
    /// The groups whose actions they decide; `None` for every group.
    pub groups: Option<Vec<String>>,
}

impl Person {
    /// A person who acts for every group, such as whoever holds the store
    /// (the CLI).
    pub fn anyone(by: impl Into<String>) -> Self {
        Person {
            by: by.into(),
            groups: None,
        }
    }

    /// A person who acts for `groups` only.
    pub fn of_groups(by: impl Into<String>, groups: Vec<String>) -> Self {
        Person {
            by: by.into(),
            groups: Some(groups),
        }
    }

    /// Whether they decide an action assigned to `assignment`; an action
    /// assigned to no group (decided by a policy or a review agent) is
    /// only for a person of every group.
    pub fn acts_for(&self, assignment: Option<&str>) -> bool {
        match (&self.groups, assignment) {
            (None, _) => true,
            (Some(groups), Some(assignment)) => groups.iter().any(|g| g == assignment),
            (Some(_), None) => false,
        }
    }
}

/// The customer API an `integration.execute` action calls, copied from the
/// agent's `connections` when it was proposed. The credential is a name;
/// the secret stays with the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct ConnectionTarget {
    /// The connection's name.
    pub name: String,
    /// Its base URL.
    pub base_url: String,
    /// The name of the credential the host injects.
    pub credential: Option<String>,
    /// How long its delivery may take, in milliseconds: the connection's
    /// `timeout` when it was proposed; `None` for an action stored before
    /// actions carried it, which the host's delivery timeout bounds.
    pub timeout_ms: Option<u64>,
    /// The connection's own CA certificates (PEM, from its `tls.caFile`)
    /// when it was proposed, trusted for its delivery besides the
    /// platform's and Mozilla's roots; `None` when it had none, or for an
    /// action stored before actions carried them.
    pub ca_certificates: Option<String>,
    /// The most bytes of the API's answer read, to check it against
    /// `response_schema`: the connection's `maxResponseBytes` when it was
    /// proposed; `None` for an action stored before actions carried it.
    pub max_response_bytes: Option<u64>,
    /// The JSON Schema the connection's document gives the operation's
    /// success response, when it was proposed; a delivered answer is
    /// checked against it. `None` when the document gives none, or for an
    /// action stored before actions carried it.
    pub response_schema: Option<JsonText>,
}

/// An outbound action an agent proposed: exactly what would go out, and
/// everything decided about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionRequest {
    /// `act_…`.
    pub id: ActionId,
    /// The run that proposed it.
    pub run: RunId,
    /// That run's agent.
    pub agent: String,
    /// The tool, such as `communication.send_email`.
    pub tool: String,
    /// Who receives it: an address, a phone number, or a connection name.
    pub recipient: String,
    /// What goes out, fixed when proposed.
    pub content: JsonText,
    /// `sha256:` of the canonical JSON of tool, recipient and content.
    pub digest: String,
    /// Where it is.
    pub state: ActionState,
    /// Who decides it now.
    pub decider: DeciderKind,
    /// The assignment group whose people decide it: at once, or when its
    /// review agent escalates it (or an override sends it to people);
    /// `None` when a policy decided it.
    pub assignment: Option<String>,
    /// The review agent when an agent decides.
    pub reviewer: Option<String>,
    /// The DeciderPolicy and rule that chose the decider, such as
    /// `fleet-outbound rule 2`; `None` when no policy chose.
    pub rule: Option<String>,
    /// True when a decider override sent it to people.
    pub overridden: bool,
    /// The approval task, when a person decides.
    pub task: Option<TaskId>,
    /// For `integration.execute`: the API it calls.
    pub connection: Option<ConnectionTarget>,
    /// Every decision, oldest first.
    pub trail: Vec<Decision>,
    /// Delivery attempts; at most one ever starts.
    pub attempts: Vec<Attempt>,
    /// How it ended.
    pub outcome: Option<ActionOutcome>,
    /// When it was proposed.
    pub created_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
}

impl ActionRequest {
    /// The decision that approved it, if any.
    pub fn approval(&self) -> Option<&Decision> {
        self.trail
            .iter()
            .rev()
            .find(|d| d.verdict == Verdict::Approve)
    }

    /// True only when a person approved it: never for an agent's or a
    /// policy's approval.
    pub fn human_approved(&self) -> bool {
        self.approval()
            .is_some_and(|d| d.kind == DeciderKind::Person)
    }

    /// The action as the API shows it: every field but the process that
    /// owns an attempt (the host's process ids are not for readers), plus
    /// `humanApproved` and `approvedBy` (the kind of the decider that
    /// approved it).
    pub fn to_json(&self) -> Value {
        let mut value = serde_json::to_value(self).expect("an action serializes");
        if let Some(Value::Array(attempts)) = value.get_mut("attempts") {
            for attempt in attempts {
                if let Value::Object(attempt) = attempt {
                    attempt.remove("owner");
                }
            }
        }
        value["humanApproved"] = Value::Bool(self.human_approved());
        value["approvedBy"] = match self.approval() {
            Some(d) => Value::String(d.kind.as_str().to_owned()),
            None => Value::Null,
        };
        value
    }
}

/// The digest of an action: `sha256:` and the hex SHA-256 of the
/// canonical JSON of `{"content", "recipient", "tool"}` (keys sorted at
/// every level, no spaces).
pub fn digest(tool: &str, recipient: &str, content: &Value) -> String {
    let mut text = String::new();
    text.push_str("{\"content\":");
    canonical(content, &mut text);
    text.push_str(",\"recipient\":");
    canonical(&Value::String(recipient.to_owned()), &mut text);
    text.push_str(",\"tool\":");
    canonical(&Value::String(tool.to_owned()), &mut text);
    text.push('}');
    format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
}

/// SHA-256 (hex, no prefix) of `value`'s canonical JSON: what a model
/// call's LLM turn records of its request.
pub fn canonical_sha256(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Writes `value` as canonical JSON: object keys sorted by their UTF-8
/// bytes, no whitespace, strings and numbers as serde_json writes them.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_state_parses_from_its_name_and_the_error_lists_them_all() {
        let error = "sent".parse::<ActionState>().unwrap_err();
        for state in ActionState::ALL {
            assert_eq!(state.as_str().parse::<ActionState>(), Ok(state));
            assert!(error.to_string().contains(state.as_str()), "{error}");
        }
        assert!(error.to_string().contains("`sent`"), "{error}");
    }

    #[test]
    fn the_digest_ignores_key_order_and_covers_every_part() {
        let a = digest(
            "communication.send_email",
            "a@example.com",
            &json!({"subject": "Hi", "body": "x", "meta": {"b": 1, "a": [1, {"d": 2, "c": 3}]}}),
        );
        let b = digest(
            "communication.send_email",
            "a@example.com",
            &json!({"meta": {"a": [1, {"c": 3, "d": 2}], "b": 1}, "body": "x", "subject": "Hi"}),
        );
        assert_eq!(a, b);
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64, "{a}");
        let content = json!({"subject": "Hi", "body": "x"});
        let base = digest("communication.send_email", "a@example.com", &content);
        assert_ne!(
            base,
            digest("communication.send_sms", "a@example.com", &content)
        );
        assert_ne!(
            base,
            digest("communication.send_email", "b@example.com", &content)
        );
        assert_ne!(
            base,
            digest(
                "communication.send_email",
                "a@example.com",
                &json!({"subject": "Hi", "body": "y"})
            )
        );
    }

    #[test]
    fn a_canonical_hash_does_not_depend_on_key_order() {
        let a = json!({"b": 1, "a": [{"y": 2, "x": 3}]});
        let b: Value = serde_json::from_str(r#"{"a": [{"x": 3, "y": 2}], "b": 1}"#).unwrap();
        assert_eq!(canonical_sha256(&a), canonical_sha256(&b));
        assert_eq!(
            canonical_sha256(&json!({})),
            hex::encode(Sha256::digest(b"{}"))
        );
        assert_ne!(canonical_sha256(&a), canonical_sha256(&json!({"b": 2})));
    }

    #[test]
    fn the_digest_is_sha256_of_the_canonical_text() {
        // Written out by hand: keys sorted, no spaces.
        let text = r#"{"content":{"a":"\u0001é","b":[true,null,1.5]},"recipient":"+15550100","tool":"communication.send_sms"}"#;
        let expected = format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())));
        let got = digest(
            "communication.send_sms",
            "+15550100",
            &json!({"b": [true, null, 1.5], "a": "\u{1}é"}),
        );
        assert_eq!(got, expected);
    }

    #[test]
    fn only_a_person_approving_is_human_approval() {
        let decision = |kind, verdict| Decision {
            kind,
            by: "x".to_owned(),
            verdict,
            reason: None,
            digest: "sha256:0".to_owned(),
            at_ms: 0,
        };
        let mut action = ActionRequest {
            id: ActionId::new(),
            run: RunId::new(),
            agent: "a".to_owned(),
            tool: "communication.send_sms".to_owned(),
            recipient: "+1".to_owned(),
            content: JsonText::from_value(&json!({"text": "t"})),
            digest: "sha256:0".to_owned(),
            state: ActionState::Approved,
            decider: DeciderKind::Agent,
            assignment: None,
            reviewer: Some("r".to_owned()),
            rule: None,
            overridden: false,
            task: None,
            connection: None,
            trail: vec![decision(DeciderKind::Agent, Verdict::Approve)],
            attempts: Vec::new(),
            outcome: None,
            created_at_ms: 0,
            updated_at_ms: 0,
        };
        assert!(!action.human_approved());
        assert_eq!(action.to_json()["approvedBy"], "agent");
        assert_eq!(action.to_json()["humanApproved"], false);
        action.trail = vec![decision(DeciderKind::Policy, Verdict::Approve)];
        assert!(!action.human_approved());
        action.trail = vec![
            decision(DeciderKind::Agent, Verdict::Escalate),
            decision(DeciderKind::Person, Verdict::Approve),
        ];
        assert!(action.human_approved());
        assert_eq!(action.to_json()["approvedBy"], "person");
        assert_eq!(crate::round_trip(&action), action);
    }
}
