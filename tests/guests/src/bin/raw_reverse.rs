//! An operation written straight against `wit/operation.wit` with wit-bindgen,
//! without the guest SDK: proof that the contract alone is enough.

wit_bindgen::generate!({
    path: "../../wit",
    world: "operation",
});

use hane::operation::log::{Level, log};
use hane::operation::types::Impact;

const INPUT_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "text": { "type": "string" }
  },
  "required": ["text"],
  "additionalProperties": false
}"#;

const OUTPUT_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "reversed": { "type": "string" }
  },
  "required": ["reversed"]
}"#;

struct Reverse;

impl Guest for Reverse {
    fn describe() -> Descriptor {
        Descriptor {
            name: "raw.reverse".to_string(),
            version: "0.1.0".to_string(),
            description: "Reverses `text` character by character.".to_string(),
            input_schema: INPUT_SCHEMA.to_string(),
            output_schema: OUTPUT_SCHEMA.to_string(),
            impact: Impact::Read,
        }
    }

    fn run(input: String) -> Result<String, Error> {
        let input: serde_json::Value =
            serde_json::from_str(&input).map_err(|e| Error::InvalidInput(e.to_string()))?;
        let text = input
            .get("text")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| Error::InvalidInput("`text` must be a string".to_string()))?;
        let reversed: String = text.chars().rev().collect();
        log(
            Level::Info,
            &format!("reversed {} characters", reversed.chars().count()),
        );
        Ok(serde_json::json!({ "reversed": reversed }).to_string())
    }
}

export!(Reverse);

fn main() {}
