//! JSON Schema validation of inputs and outputs.

use serde_json::Value;

use crate::error::SchemaViolation;

/// Violations reported for one document, at most; the rest are dropped so a
/// huge bad document does not make a huge error.
const MAX_VIOLATIONS: usize = 8;

/// A compiled JSON Schema (2020-12 unless the schema says otherwise).
pub(crate) struct Schema {
    validator: jsonschema::Validator,
}

impl Schema {
    pub(crate) fn compile(text: &str) -> Result<Self, String> {
        let schema: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&schema)
            .map_err(|e| e.to_string())?;
        Ok(Self { validator })
    }

    pub(crate) fn check(&self, doc: &Value) -> Result<(), Vec<SchemaViolation>> {
        if self.validator.is_valid(doc) {
            return Ok(());
        }
        let violations: Vec<SchemaViolation> = self
            .validator
            .iter_errors(doc)
            .take(MAX_VIOLATIONS)
            .map(|e| SchemaViolation {
                instance_path: e.instance_path().to_string(),
                schema_path: e.schema_path().to_string(),
                message: e.to_string(),
            })
            .collect();
        Err(violations)
    }
}
