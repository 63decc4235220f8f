//! Proposes an inspection reminder by email: an `outbound` operation that
//! sends nothing itself. Its input's `mode` drives the `actions`
//! capability's refusals: `ungranted` proposes an SMS, `bad_json` passes
//! content that is not JSON, `not_object` a JSON array, `too_many` one
//! proposal more than the host allows, and `fail` and `panic` end the call
//! badly after proposing, so its proposal must be dropped.

use hane_guest::{Error, actions};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

hane_guest::operation! {
    name: "test.outbound_notice",
    impact: Outbound,
    description: "Proposes an email to `to` that `vehicle` is due for inspection.",
    run: notice,
}

#[derive(Deserialize, JsonSchema)]
struct Input {
    /// The email address to remind.
    to: String,
    /// The vehicle that is due.
    vehicle: String,
    /// `ok` (the default), `ungranted`, `bad_json`, `not_object`,
    /// `too_many`, `fail` or `panic`.
    #[serde(default)]
    mode: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// The id the host gave the proposal.
    proposal: String,
}

const EMAIL: &str = "communication.send_email";

fn notice(input: Input) -> Result<Output, Error> {
    let email = json!({
        "subject": format!("Inspection due: {}", input.vehicle),
        "body": format!(
            "Vehicle {} is due for its periodic inspection. Please book a slot at your depot.",
            input.vehicle
        ),
    });
    let proposal = match input.mode.as_deref().unwrap_or("ok") {
        "ok" => actions::propose(EMAIL, &input.to, &email)?,
        "ungranted" => actions::propose(
            "communication.send_sms",
            &input.to,
            &json!({"text": "inspection due"}),
        )?,
        "bad_json" => {
            hane_guest::wit::hane::operation::actions::propose(EMAIL, &input.to, "{\"subject\": ")?
        }
        "not_object" => actions::propose(EMAIL, &input.to, &json!(["inspection", "due"]))?,
        "too_many" => {
            let mut last = String::new();
            for _ in 0..=16 {
                last = actions::propose(EMAIL, &input.to, &email)?;
            }
            last
        }
        "fail" => {
            actions::propose(EMAIL, &input.to, &email)?;
            return Err(Error::Failed("gave up after proposing".into()));
        }
        "panic" => {
            actions::propose(EMAIL, &input.to, &email)?;
            panic!("panicked after proposing");
        }
        other => return Err(Error::InvalidInput(format!("unknown mode `{other}`"))),
    };
    Ok(Output { proposal })
}

fn main() {}
