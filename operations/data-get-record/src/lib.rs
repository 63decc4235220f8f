//! `data.get_record`: gets one record of a ledger collection by its id.
//!
//! The record comes from the host's `records` capability, which lets the
//! operation read only the collections its policy grants; asking for another
//! is [`Error::Denied`]. The logic is [`get_record`], which takes the lookup
//! as a function so it is testable off wasm; the exported operation passes
//! [`hane_guest::records::get`].
//!
//! # Examples
//!
//! ```
//! use data_get_record::{get_record, GetRecordInput};
//! use serde_json::json;
//!
//! let input = GetRecordInput { collection: "vehicles".into(), id: "V-001".into() };
//! let output = get_record(input, |_, id| Ok(Some(json!({"id": id}))))?;
//! assert_eq!(output.record["id"], "V-001");
//! # Ok::<(), hane_guest::Error>(())
//! ```

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Get one record of a ledger collection by its id.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetRecordInput {
    /// The collection to look in, such as "vehicles" or "leases".
    #[schemars(regex(pattern = r"^[a-z0-9_-]{1,64}$"))]
    pub collection: String,
    /// The record's id, such as "V-001".
    #[schemars(length(min = 1, max = 256))]
    pub id: String,
}

/// The record.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct GetRecordOutput {
    /// The record, with all its fields.
    pub record: Map<String, Value>,
}

fn run(input: GetRecordInput) -> Result<GetRecordOutput, Error> {
    get_record(input, hane_guest::records::get)
}

hane_guest::operation! {
    name: "data.get_record",
    impact: Read,
    run: run,
}

/// Asks `get` (the `records` capability, or a stand-in) for the record.
///
/// # Errors
///
/// - [`Error::InvalidInput`] when `id` is empty;
/// - [`Error::NotFound`] when the collection has no record with that id;
/// - whatever `get` returns: [`Error::Denied`] for a collection that is not
///   granted, [`Error::NotFound`] for one the ledger does not have;
/// - [`Error::Failed`] when the record is not a JSON object.
pub fn get_record(
    input: GetRecordInput,
    get: impl FnOnce(&str, &str) -> Result<Option<Value>, Error>,
) -> Result<GetRecordOutput, Error> {
    if input.id.is_empty() {
        return Err(Error::InvalidInput("id must not be empty".to_owned()));
    }
    match get(&input.collection, &input.id)? {
        Some(Value::Object(record)) => Ok(GetRecordOutput { record }),
        Some(other) => Err(Error::Failed(format!(
            "record `{}` of `{}` is not a JSON object: {other}",
            input.id, input.collection
        ))),
        None => Err(Error::NotFound(format!(
            "collection `{}` has no record with id `{}`",
            input.collection, input.id
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn input(id: &str) -> GetRecordInput {
        GetRecordInput {
            collection: "vehicles".into(),
            id: id.into(),
        }
    }

    #[test]
    fn returns_the_record_or_not_found() {
        let out = get_record(input("V-001"), |collection, id| {
            assert_eq!((collection, id), ("vehicles", "V-001"));
            Ok(Some(json!({"id": "V-001", "model": "Toyota Hiace Van"})))
        })
        .unwrap();
        assert_eq!(out.record["model"], "Toyota Hiace Van");

        let err = get_record(input("V-404"), |_, _| Ok(None)).unwrap_err();
        assert_eq!(
            err,
            Error::NotFound("collection `vehicles` has no record with id `V-404`".into())
        );
    }

    #[test]
    fn refuses_empty_ids_and_passes_host_errors_through() {
        let err = get_record(input(""), |_, _| panic!("must not be called")).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)));
        let err = get_record(input("V-1"), |_, _| {
            Err(Error::Denied("not granted".into()))
        })
        .unwrap_err();
        assert!(matches!(err, Error::Denied(_)));
        let err = get_record(input("V-1"), |_, _| Ok(Some(json!("text")))).unwrap_err();
        assert!(matches!(err, Error::Failed(_)));
    }
}
