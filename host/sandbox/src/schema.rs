//! JSON Schema validation of inputs and outputs.

use serde_json::Value;

use crate::error::SchemaViolation;

/// Violations reported for one document, at most; the rest are dropped so a
/// huge bad document does not make a huge error.
const MAX_VIOLATIONS: usize = 8;

/// A compiled JSON Schema (2020-12 unless the schema says otherwise): the
/// one validator hane uses for operations' inputs and outputs and for
/// agents' inputs and results.
pub struct Schema {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Schema")
    }
}

/// Why a JSON Schema did not compile; the message says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(String);

impl Schema {
    /// Starts building, on a thread of its own, what the first compilation
    /// in a process waits for: the validator of the JSON Schema 2020-12
    /// meta-schema that every schema is checked against (about 1.5 ms, ten
    /// times a schema's own compilation). A process about to load one
    /// operation calls this first, so that the validator is ready by the
    /// time the component has described itself. Later calls do nothing.
    pub fn warm_up() {
        static STARTED: std::sync::Once = std::sync::Once::new();
        STARTED.call_once(|| {
            let _ = std::thread::Builder::new()
                .name("hane-schemas".into())
                .spawn(|| Self::from_value(&serde_json::json!({"type": "object"})));
        });
    }

    /// Compiles a schema written as JSON text.
    ///
    /// # Errors
    ///
    /// The text is not JSON, or not a valid schema.
    pub fn compile(text: &str) -> Result<Self, SchemaError> {
        let schema: Value =
            serde_json::from_str(text).map_err(|e| SchemaError(format!("not JSON: {e}")))?;
        Self::from_value(&schema)
    }

    /// Compiles a schema.
    ///
    /// # Errors
    ///
    /// It is not a valid schema.
    pub fn from_value(schema: &Value) -> Result<Self, SchemaError> {
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(schema)
            .map_err(|e| SchemaError(e.to_string()))?;
        Ok(Self { validator })
    }

    /// Checks `doc`, returning the first few violations.
    ///
    /// # Errors
    ///
    /// The violations, at most eight.
    pub fn check(&self, doc: &Value) -> Result<(), Vec<SchemaViolation>> {
        if self.validator.is_valid(doc) {
            return Ok(());
        }
        let violations: Vec<SchemaViolation> = self
            .validator
            .iter_errors(doc)
            .take(MAX_VIOLATIONS)
            .map(|e| SchemaViolation {
                // A missing property is reported at its object; point at
                // the property itself, which is what the caller must add.
                instance_path: match e.kind() {
                    jsonschema::error::ValidationErrorKind::Required { property } => {
                        let name = property
                            .as_str()
                            .map_or_else(|| property.to_string(), str::to_owned);
                        let escaped = name.replace('~', "~0").replace('/', "~1");
                        format!("{}/{escaped}", e.instance_path())
                    }
                    _ => e.instance_path().to_string(),
                },
                schema_path: e.schema_path().to_string(),
                message: e.to_string(),
            })
            .collect();
        Err(violations)
    }
}
