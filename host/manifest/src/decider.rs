//! The `DeciderPolicy` manifest (`agents/v1alpha1`): who decides an
//! agent's outbound actions, rule by rule, and the matching that picks the
//! rule for one action.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::agent::{check_dns_name, not_blank};
use crate::manifest::Source;
use crate::{AGENTS_API_VERSION, ManifestError, Metadata};
use hane_core::tool::OUTBOUND_TOOLS;

/// The entry of a rule's `tools` that matches every outbound tool.
const ANY_TOOL: &str = "*";

/// A `DeciderPolicy` manifest (`agents/v1alpha1`): who decides whether an
/// agent's outbound actions (e-mails, text messages, calls, integration
/// calls) go ahead. An agent uses one by naming it in
/// `spec.approval.decider`.
///
/// # Examples
///
/// ```
/// use hane_manifest::{Decider, DeciderPolicyManifest, PolicyVerdict};
/// use serde_json::json;
///
/// let policy = DeciderPolicyManifest::from_yaml("policy.yaml", r#"
/// apiVersion: agents/v1alpha1
/// kind: DeciderPolicy
/// metadata:
///   name: fleet-outbound
/// spec:
///   rules:
///     - name: reminders
///       tools: [communication.send_email]
///       recipient: "*@fleet.example"
///       content: { subject: "Inspection reminder*" }
///       decider: { policy: approve }
///   default: { person: fleet-desk }
/// "#).unwrap();
/// let content = json!({ "subject": "Inspection reminder: KT-12" });
/// let decision = policy.spec.decide("communication.send_email", "ops@FLEET.example", &content);
/// assert_eq!(decision, Some((Some(0), &Decider::Policy(PolicyVerdict::Approve))));
/// let decision = policy.spec.decide("communication.send_sms", "+81 90 0000 0000", &content);
/// assert_eq!(decision, Some((None, &Decider::Person("fleet-desk".into()))));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeciderPolicyManifest {
    /// Must be `agents/v1alpha1`.
    pub api_version: String,
    /// Must be `DeciderPolicy`.
    pub kind: String,
    /// The name: lowercase letters, digits and `-`, starting with a letter.
    pub metadata: Metadata,
    /// The rules and the default.
    pub spec: DeciderPolicySpec,
}

/// `spec` of a `DeciderPolicy` manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeciderPolicySpec {
    /// The rules, in order: the first that matches an action decides it.
    /// None when absent.
    #[serde(default)]
    pub rules: Vec<DeciderRule>,
    /// Who decides an action no rule matches. When absent, a person of the
    /// agent's `approval.assignment` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Decider>,
}

/// One rule of a `DeciderPolicy`: which actions it matches and who decides
/// them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeciderRule {
    /// A name for people reading decision trails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The outbound tools the rule matches, from [`OUTBOUND_TOOLS`], or `*`
    /// for any of them; at least one.
    pub tools: Vec<String>,
    /// A [glob](glob_matches) the recipient must match; any recipient when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient: Option<String>,
    /// Content field names, each with a [glob](glob_matches) the field's
    /// string value must match. A field that is absent or not a string
    /// does not match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub content: BTreeMap<String, String>,
    /// Who decides the actions the rule matches.
    pub decider: Decider,
}

/// Who decides an outbound action. Written as a map with exactly one key:
///
/// ```yaml
/// decider: { person: fleet-desk }   # a person of this assignment group, through an approval task
/// decider: { agent: email-review }  # a review agent of the bundle: approves, rejects or escalates to a person
/// decider: { policy: approve }      # the policy itself, without a task: `approve` or `reject`
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decider {
    /// A person of this assignment group decides, through an approval task.
    Person(String),
    /// This review agent decides; it needs the `submit_review` tool.
    Agent(String),
    /// The policy decides at once.
    Policy(PolicyVerdict),
}

/// What a policy decides on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyVerdict {
    /// The action goes ahead.
    Approve,
    /// The action is refused.
    Reject,
}

/// How a decider is written, so that none or two of its keys is an error
/// that says what was expected.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a decider: a map with one of `person`, `agent` or `policy`"
)]
struct DeciderMap {
    #[serde(default)]
    person: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    policy: Option<PolicyVerdict>,
}

impl<'de> Deserialize<'de> for Decider {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = DeciderMap::deserialize(d)?;
        let given: Vec<&str> = [
            ("person", map.person.is_some()),
            ("agent", map.agent.is_some()),
            ("policy", map.policy.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect();
        match map {
            DeciderMap {
                person: Some(person),
                agent: None,
                policy: None,
            } => Ok(Decider::Person(person)),
            DeciderMap {
                person: None,
                agent: Some(agent),
                policy: None,
            } => Ok(Decider::Agent(agent)),
            DeciderMap {
                person: None,
                agent: None,
                policy: Some(verdict),
            } => Ok(Decider::Policy(verdict)),
            _ => {
                let found = if given.is_empty() {
                    "none".to_owned()
                } else {
                    let keys: Vec<String> = given.iter().map(|k| format!("`{k}`")).collect();
                    keys.join(" and ")
                };
                Err(serde::de::Error::custom(format!(
                    "expected exactly one of `person`, `agent` or `policy`, found {found}"
                )))
            }
        }
    }
}

impl DeciderPolicyManifest {
    /// Parses and validates a `DeciderPolicy` manifest; `file` names it in
    /// errors.
    ///
    /// Beyond the fields' types, it checks that the name is a DNS label (as
    /// for agents), that rule names are not blank and are distinct, that
    /// each rule lists at least one tool, each one of [`OUTBOUND_TOOLS`] or
    /// `*` and listed once, that recipient and content patterns are not
    /// blank, and that each `person` is not blank and each `agent` is a DNS
    /// label. Whether the agents exist is checked with the rest of the
    /// bundle by [`read_bundle_dir`](crate::read_bundle_dir).
    ///
    /// # Errors
    ///
    /// The first problem: malformed YAML, an unknown or missing field, a
    /// wrong type, a wrong `apiVersion` or `kind`, a decider with none or
    /// several of `person`, `agent` and `policy`, a verdict other than
    /// `approve` or `reject`, or a broken rule above, naming the field and
    /// its line.
    pub fn from_yaml(file: &str, text: &str) -> Result<Self, ManifestError> {
        let source = Source::new(file, text);
        let manifest: Self = source.parse_manifest(AGENTS_API_VERSION, "DeciderPolicy")?;
        check_dns_name(&manifest.metadata.name).map_err(|m| source.error("metadata.name", m))?;
        manifest.spec.check(&source)?;
        Ok(manifest)
    }
}

impl DeciderPolicySpec {
    /// Who decides the action of calling `tool` for `recipient` with
    /// `content` (the tool's input): the decider of the first rule that
    /// [matches](DeciderRule::matches), with the rule's index, or else the
    /// default, with `None`. `None` when nothing matches and there is no
    /// default, which means a person of the agent's `approval.assignment`
    /// decides.
    pub fn decide(
        &self,
        tool: &str,
        recipient: &str,
        content: &Value,
    ) -> Option<(Option<usize>, &Decider)> {
        match self
            .rules
            .iter()
            .position(|rule| rule.matches(tool, recipient, content))
        {
            Some(i) => Some((Some(i), &self.rules[i].decider)),
            None => self.default.as_ref().map(|d| (None, d)),
        }
    }

    /// Every decider with its field path, such as
    /// `spec.rules[1].decider`, the default last.
    pub(crate) fn deciders(&self) -> impl Iterator<Item = (String, &Decider)> {
        let rules = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| (format!("spec.rules[{i}].decider"), &rule.decider));
        rules.chain(self.default.iter().map(|d| ("spec.default".to_owned(), d)))
    }

    /// The rules serde cannot express, each error naming its field.
    fn check(&self, source: &Source<'_>) -> Result<(), ManifestError> {
        let fail = |field: &str, message: String| source.error(field, message);
        let mut names = BTreeMap::new();
        for (i, rule) in self.rules.iter().enumerate() {
            let field = format!("spec.rules[{i}]");
            if let Some(name) = &rule.name {
                not_blank(name).map_err(|m| fail(&format!("{field}.name"), m.to_string()))?;
                if let Some(j) = names.insert(name.as_str(), i) {
                    return Err(fail(
                        &format!("{field}.name"),
                        format!("`{name}` is already the name of spec.rules[{j}]"),
                    ));
                }
            }
            rule.check_tools(&field).map_err(|(f, m)| fail(&f, m))?;
            if let Some(recipient) = &rule.recipient {
                not_blank(recipient)
                    .map_err(|m| fail(&format!("{field}.recipient"), m.to_string()))?;
            }
            for key in rule.content.keys() {
                not_blank(key).map_err(|m| {
                    fail(
                        &format!("{field}.content"),
                        format!("a content field name {m}"),
                    )
                })?;
            }
        }
        for (field, decider) in self.deciders() {
            match decider {
                Decider::Person(person) => {
                    not_blank(person)
                        .map_err(|m| fail(&format!("{field}.person"), m.to_string()))?;
                }
                Decider::Agent(agent) => {
                    check_dns_name(agent)
                        .map_err(|m| fail(&format!("{field}.agent"), m.to_string()))?;
                }
                Decider::Policy(_) => {}
            }
        }
        Ok(())
    }
}

impl DeciderRule {
    /// Whether the rule matches calling `tool` for `recipient` with
    /// `content`: `tool` is listed (or `*` is), the recipient matches
    /// `recipient` when the rule has one, and each field of `content` the
    /// rule names is a string matching its pattern.
    pub fn matches(&self, tool: &str, recipient: &str, content: &Value) -> bool {
        self.tools.iter().any(|t| t == ANY_TOOL || t == tool)
            && self
                .recipient
                .as_deref()
                .is_none_or(|pattern| glob_matches(pattern, recipient))
            && self.content.iter().all(|(field, pattern)| {
                content
                    .get(field)
                    .and_then(Value::as_str)
                    .is_some_and(|value| glob_matches(pattern, value))
            })
    }

    /// At least one tool, each outbound or `*`, listed once.
    fn check_tools(&self, rule: &str) -> Result<(), (String, String)> {
        if self.tools.is_empty() {
            return Err((
                format!("{rule}.tools"),
                format!("expected at least one tool: {}", allowed_tools()),
            ));
        }
        let mut seen = BTreeMap::new();
        for (i, tool) in self.tools.iter().enumerate() {
            let field = format!("{rule}.tools[{i}]");
            not_blank(tool).map_err(|m| (field.clone(), m.to_string()))?;
            if tool != ANY_TOOL && !OUTBOUND_TOOLS.contains(&tool.as_str()) {
                return Err((
                    field,
                    format!("expected {}, found `{tool}`", allowed_tools()),
                ));
            }
            if let Some(j) = seen.insert(tool.as_str(), i) {
                return Err((
                    field,
                    format!("`{tool}` is already listed as {rule}.tools[{j}]"),
                ));
            }
        }
        Ok(())
    }
}

/// The names a rule's `tools` may hold, for errors.
fn allowed_tools() -> String {
    let names: Vec<String> = OUTBOUND_TOOLS.iter().map(|t| format!("`{t}`")).collect();
    format!(
        "one of the outbound tools {}, or `{ANY_TOOL}` for any of them",
        names.join(", ")
    )
}

/// Whether `text` matches the glob `pattern`, ignoring case: `*` matches
/// any run of characters (none included), `?` exactly one character, and
/// every other character itself. There is no escape: a pattern cannot
/// match a literal `*` or `?` only.
///
/// Runs in O(pattern × text) time at worst, never exponential, so a
/// pattern written in a manifest cannot stall matching: it backtracks only
/// to the last `*`, since a later `*` can absorb whatever an earlier one
/// would have.
///
/// # Examples
///
/// ```
/// use hane_manifest::glob_matches;
///
/// assert!(glob_matches("*@fleet.example", "Desk@FLEET.example"));
/// assert!(glob_matches("KT-??", "kt-12"));
/// assert!(!glob_matches("KT-??", "KT-123"));
/// ```
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let same = |p: char, t: char| p == t || p.to_lowercase().eq(t.to_lowercase());
    let (mut p, mut t) = (0, 0);
    // The pattern position after the last `*` seen, and the text position
    // that `*` has absorbed up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p + 1, t));
                p += 1;
            }
            Some(&c) if c == '?' || same(c, text[t]) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                // Let the last `*` absorb one more character and retry.
                Some((after, absorbed)) => {
                    star = Some((after, absorbed + 1));
                    p = after;
                    t = absorbed + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn globs_match_any_run_and_one_character() {
        let cases = [
            ("", "", true),
            ("", "a", false),
            ("*", "", true),
            ("*", "anything at all", true),
            ("?", "", false),
            ("?", "x", true),
            ("?", "xy", false),
            ("a*b", "ab", true),
            ("a*b", "axxxb", true),
            ("a*b", "axxxbc", false),
            ("a*b*c", "abbbbc", true),
            ("*@fleet.example", "desk@fleet.example", true),
            ("*@fleet.example", "desk@fleet.example.com", false),
            ("*@fleet.example", "desk@other.example", false),
            ("Inspection reminder*", "Inspection reminder: KT-12", true),
            ("Inspection reminder*", "Re: Inspection reminder", false),
            ("KT-??", "KT-12", true),
            ("KT-??", "KT-1", false),
            ("*?", "", false),
            ("*?", "a", true),
            ("**a**", "bab", true),
            ("a.b", "axb", false),
            ("車両*", "車両の点検", true),
            ("?両", "車両", true),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(
                glob_matches(pattern, text),
                expected,
                "{pattern:?} {text:?}"
            );
        }
    }

    #[test]
    fn globs_ignore_case() {
        assert!(glob_matches("*@FLEET.example", "Desk@fleet.EXAMPLE"));
        assert!(glob_matches("inspection*", "INSPECTION REMINDER"));
        assert!(glob_matches("ÄB?", "äbc"));
        assert!(!glob_matches("abc", "abd"));
    }

    /// Backtracking to every `*` would take exponential time here; the
    /// matcher only goes back to the last one.
    #[test]
    fn a_pathological_pattern_does_not_backtrack_exponentially() {
        let text = "a".repeat(10_000);
        assert!(!glob_matches("*a*a*a*a*a*b", &text));
        assert!(glob_matches("*a*a*a*a*a*", &text));
        assert!(!glob_matches(&format!("{}b", "*a".repeat(100)), &text));
        assert!(!glob_matches(&"?".repeat(10_001), &text));
        let text_b = format!("{text}b");
        assert!(glob_matches("*a*a*a*a*a*b", &text_b));
    }

    #[test]
    fn each_rule_problem_names_its_field() {
        let policy = "\
apiVersion: agents/v1alpha1
kind: DeciderPolicy
metadata:
  name: fleet-outbound
spec:
  rules:
    - name: reminders
      tools: [communication.send_email]
      recipient: \"*@fleet.example\"
      content: { subject: \"Reminder*\" }
      decider: { person: fleet-desk }
  default: { agent: review }
";
        assert!(DeciderPolicyManifest::from_yaml("p.yaml", policy).is_ok());
        let error = |from: &str, to: &str| {
            let text = policy.replace(from, to);
            assert_ne!(text, policy, "{from}");
            DeciderPolicyManifest::from_yaml("p.yaml", &text)
                .unwrap_err()
                .to_string()
        };
        let cases = [
            (
                "name: fleet-outbound",
                "name: Fleet",
                "p.yaml:4: metadata.name: expected 1 to 63 lowercase letters, digits and `-`, starting with a letter, found `Fleet`",
            ),
            (
                "name: reminders",
                "name: \" \"",
                "p.yaml:7: spec.rules[0].name: must not be empty",
            ),
            (
                "tools: [communication.send_email]",
                "tools: []",
                "p.yaml:8: spec.rules[0].tools: expected at least one tool: one of the outbound tools `communication.send_email`, `communication.send_sms`, `communication.place_call`, `integration.execute`, or `*` for any of them",
            ),
            (
                "tools: [communication.send_email]",
                "tools: [\"*\", \"\"]",
                "p.yaml:8: spec.rules[0].tools[1]: must not be empty",
            ),
            (
                "tools: [communication.send_email]",
                "tools: [\"*\", \"*\"]",
                "p.yaml:8: spec.rules[0].tools[1]: `*` is already listed as spec.rules[0].tools[0]",
            ),
            (
                "tools: [communication.send_email]",
                "tools: [submit_result]",
                "p.yaml:8: spec.rules[0].tools[0]: expected one of the outbound tools `communication.send_email`, `communication.send_sms`, `communication.place_call`, `integration.execute`, or `*` for any of them, found `submit_result`",
            ),
            (
                "\"*@fleet.example\"",
                "\"\"",
                "p.yaml:9: spec.rules[0].recipient: must not be empty",
            ),
            (
                "{ subject: ",
                "{ \"\": ",
                "p.yaml:10: spec.rules[0].content: a content field name must not be empty",
            ),
            (
                "{ person: fleet-desk }",
                "{ person: \"\" }",
                "p.yaml:11: spec.rules[0].decider.person: must not be empty",
            ),
            (
                "{ person: fleet-desk }",
                "{}",
                "p.yaml:11: spec.rules[0].decider: expected exactly one of `person`, `agent` or `policy`, found none",
            ),
            (
                "{ person: fleet-desk }",
                "fleet-desk",
                "p.yaml:11: spec.rules[0].decider: invalid type: string \"fleet-desk\", expected a decider: a map with one of `person`, `agent` or `policy`",
            ),
            (
                "{ person: fleet-desk }",
                "{ group: fleet-desk }",
                "p.yaml:11: spec.rules[0].decider.group: unknown field `group`, expected one of `person`, `agent`, `policy`",
            ),
            (
                "{ agent: review }",
                "{ agent: Review_Agent }",
                "p.yaml:12: spec.default.agent: expected 1 to 63 lowercase letters, digits and `-`, starting with a letter, found `Review_Agent`",
            ),
            (
                "      decider: { person: fleet-desk }\n",
                "",
                "p.yaml:7: spec.rules[0].decider: missing field `decider`",
            ),
        ];
        for (from, to, expected) in cases {
            assert_eq!(error(from, to), expected);
        }
    }

    fn rule(yaml: &str) -> DeciderRule {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn a_rule_matches_tool_recipient_and_content() {
        let reminders = rule(
            "tools: [communication.send_email]\n\
             recipient: \"*@fleet.example\"\n\
             content: { subject: \"Inspection reminder*\" }\n\
             decider: { policy: approve }\n",
        );
        let mail = json!({ "subject": "Inspection reminder: KT-12", "body": "..." });
        assert!(reminders.matches("communication.send_email", "desk@fleet.example", &mail));
        assert!(!reminders.matches("communication.send_sms", "desk@fleet.example", &mail));
        assert!(!reminders.matches("communication.send_email", "someone@else.example", &mail));
        let other = json!({ "subject": "Invoice" });
        assert!(!reminders.matches("communication.send_email", "desk@fleet.example", &other));
        // A content field that is absent or not a string does not match.
        for content in [json!({}), json!({ "subject": 12 }), json!(null), json!("x")] {
            assert!(
                !reminders.matches("communication.send_email", "desk@fleet.example", &content),
                "{content}"
            );
        }

        let any = rule("tools: [\"*\"]\ndecider: { person: desk }\n");
        for tool in OUTBOUND_TOOLS {
            assert!(any.matches(tool, "", &json!(null)), "{tool}");
        }
        let two = rule(
            "tools: [communication.send_sms, communication.place_call]\ndecider: { agent: r }\n",
        );
        assert!(two.matches("communication.place_call", "+81", &json!({})));
        assert!(!two.matches("integration.execute", "+81", &json!({})));
    }

    #[test]
    fn the_first_matching_rule_decides_then_the_default() {
        let mut spec: DeciderPolicySpec = serde_yaml_ng::from_str(
            "rules:\n\
             - tools: [communication.send_email]\n  recipient: \"*@fleet.example\"\n  decider: { policy: approve }\n\
             - tools: [\"*\"]\n  recipient: \"boss@*\"\n  decider: { policy: reject }\n\
             - tools: [communication.send_email, communication.send_sms]\n  decider: { agent: review }\n\
             default: { person: desk }\n",
        )
        .unwrap();
        let none = json!({});
        let decide = |spec: &DeciderPolicySpec, tool: &str, to: &str| {
            spec.decide(tool, to, &none).map(|(i, d)| (i, d.clone()))
        };
        let approve = Decider::Policy(PolicyVerdict::Approve);
        let reject = Decider::Policy(PolicyVerdict::Reject);
        let review = Decider::Agent("review".into());
        let desk = Decider::Person("desk".into());
        // `boss@fleet.example` matches rules 0 and 1; the first wins.
        let email = "communication.send_email";
        assert_eq!(
            decide(&spec, email, "boss@fleet.example"),
            Some((Some(0), approve))
        );
        assert_eq!(
            decide(&spec, email, "boss@other.example"),
            Some((Some(1), reject))
        );
        assert_eq!(
            decide(&spec, email, "x@other.example"),
            Some((Some(2), review))
        );
        let call = "communication.place_call";
        assert_eq!(decide(&spec, call, "+81"), Some((None, desk)));

        spec.default = None;
        assert_eq!(decide(&spec, call, "+81"), None);
        spec.rules.clear();
        assert_eq!(decide(&spec, email, "boss@fleet.example"), None);
    }

    #[test]
    fn a_decider_is_one_of_person_agent_or_policy() {
        let decider =
            |yaml: &str| serde_yaml_ng::from_str::<Decider>(yaml).map_err(|e| e.to_string());
        assert_eq!(decider("person: desk"), Ok(Decider::Person("desk".into())));
        assert_eq!(
            decider("agent: review"),
            Ok(Decider::Agent("review".into()))
        );
        assert_eq!(
            decider("policy: reject"),
            Ok(Decider::Policy(PolicyVerdict::Reject))
        );
        let err = decider("person: desk\nagent: review").unwrap_err();
        assert!(
            err.starts_with(
                "expected exactly one of `person`, `agent` or `policy`, found `person` and `agent`"
            ),
            "{err}"
        );
        let err = decider("{}").unwrap_err();
        assert!(err.contains("found none"), "{err}");
        let err = decider("policy: maybe").unwrap_err();
        assert!(err.contains("expected `approve` or `reject`"), "{err}");

        // The written form is the same map.
        for d in [
            Decider::Person("desk".into()),
            Decider::Agent("review".into()),
            Decider::Policy(PolicyVerdict::Approve),
        ] {
            let json = serde_json::to_value(&d).unwrap();
            assert_eq!(json.as_object().unwrap().len(), 1);
            assert_eq!(serde_json::from_value::<Decider>(json).unwrap(), d);
        }
        assert_eq!(
            serde_json::to_value(Decider::Policy(PolicyVerdict::Approve)).unwrap(),
            json!({ "policy": "approve" })
        );
    }
}
