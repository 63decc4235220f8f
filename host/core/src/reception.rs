//! Reception, as the store keeps it: free text, the agents its words
//! shortlisted, the model's choice with its reasons and the input it
//! derived, and what came of it (a run started, one that would have been,
//! or a refusal saying what is missing).

use serde::{Deserialize, Serialize};

use crate::{JsonText, ReceptionId, RunId};

/// What reception did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReceptionStatus {
    /// It started a run of the chosen agent.
    Started,
    /// A dry run: it chose an agent and a valid input, and started nothing.
    WouldStart,
    /// Nothing fits well enough, or the input could not be made valid;
    /// `missing` says what.
    Declined,
    /// It chose an agent and a valid input, but the run was refused when
    /// it started (the day's budget, a driver this build lacks); `error`
    /// says why.
    Refused,
}

impl ReceptionStatus {
    /// Its name, as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceptionStatus::Started => "started",
            ReceptionStatus::WouldStart => "would_start",
            ReceptionStatus::Declined => "declined",
            ReceptionStatus::Refused => "refused",
        }
    }
}

impl std::fmt::Display for ReceptionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An agent the request's words matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct ReceptionCandidate {
    /// The agent.
    pub agent: String,
    /// Its lexical score (BM25 over its purpose and examples).
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub score: f64,
}

/// The model call that chose among the shortlist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct ReceptionModelCall {
    /// The `ModelProvider`.
    pub provider: String,
    /// The model.
    pub model: String,
    /// `sha256:` and the hex SHA-256 of the canonical JSON of the request
    /// sent.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub request_digest: String,
    /// Input tokens the upstream reported.
    pub input_tokens: u64,
    /// Output tokens the upstream reported.
    pub output_tokens: u64,
    /// How long the call took.
    pub latency_ms: u64,
}

/// One request reception answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Reception {
    /// Its id.
    pub id: ReceptionId,
    /// The request's text.
    pub text: String,
    /// The release whose agents it chose among.
    #[schemars(range(min = 1))]
    pub release: u64,
    /// Only answer what would start.
    pub dry_run: bool,
    /// What came of it.
    pub status: ReceptionStatus,
    /// The agent chosen, when one was (a declined request names the agent
    /// whose input could not be made valid).
    pub agent: Option<String>,
    /// The input derived for it; valid against its input schema unless
    /// the request was declined.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub input: Option<JsonText>,
    /// Why: the model's reasons for its choice, or why nothing fits.
    pub reasons: String,
    /// What is missing for a valid request, when declined: each an input
    /// field's path and what it needs, or what the text should say.
    pub missing: Vec<String>,
    /// The shortlist, best first: the agents considered.
    pub shortlist: Vec<ReceptionCandidate>,
    /// The other agents of the shortlist, best first.
    pub alternatives: Vec<String>,
    /// The run started.
    pub run: Option<RunId>,
    /// Why the run was refused, for [`ReceptionStatus::Refused`].
    #[schemars(description = "Why the run was refused, when `refused`")]
    pub error: Option<String>,
    /// The model call, when one was made.
    pub model_call: Option<ReceptionModelCall>,
    /// When it was answered, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reception_round_trips() {
        let reception = Reception {
            id: ReceptionId::new(),
            text: "When does the inspection of 架空 300 あ 10-02 expire?".to_owned(),
            release: 3,
            dry_run: false,
            status: ReceptionStatus::Started,
            agent: Some("vehicle-check".to_owned()),
            input: Some(JsonText::parse(r#"{"vehicle":"架空 300 あ 10-02"}"#).unwrap()),
            reasons: "a vehicle's inspection".to_owned(),
            missing: Vec::new(),
            shortlist: vec![ReceptionCandidate {
                agent: "vehicle-check".to_owned(),
                score: 2.5,
            }],
            alternatives: Vec::new(),
            run: Some(RunId::new()),
            error: None,
            model_call: None,
            created_at_ms: 11,
        };
        assert_eq!(crate::round_trip(&reception), reception);
        assert_eq!(ReceptionStatus::WouldStart.to_string(), "would_start");
    }
}
