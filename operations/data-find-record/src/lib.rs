//! `data.find_record`: finds records of a ledger collection by the values of
//! their fields.
//!
//! The records come from the host's `records` capability, which lets the
//! operation read only the collections its policy grants; asking for another
//! is [`Error::Denied`]. The logic is [`find_record`], which takes the lookup
//! as a function so it is testable off wasm; the exported operation passes
//! [`hane_guest::records::find`].
//!
//! # Examples
//!
//! ```
//! use data_find_record::{find_record, FindRecordInput};
//! use hane_guest::records::Found;
//! use serde_json::json;
//!
//! let input: FindRecordInput = serde_json::from_value(json!({
//!     "collection": "vehicles",
//!     "match": {"registration": "架空 300 あ 10-02"},
//! }))?;
//! let output = find_record(input, |collection, fields, limit| {
//!     assert_eq!((collection, fields.len(), limit), ("vehicles", 1, 10));
//!     Ok(Found { records: vec![json!({"id": "V-001"})], truncated: false })
//! })?;
//! assert_eq!(output.records[0]["id"], "V-001");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use hane_guest::Error;
use hane_guest::records::Found;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Records returned when the input gives no `limit`.
pub const DEFAULT_LIMIT: u32 = 10;
/// Largest `limit` accepted.
pub const MAX_LIMIT: u32 = 50;

/// Find records of a ledger collection whose fields equal all the given
/// values.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindRecordInput {
    /// The collection to look in, such as "vehicles" or "leases".
    #[schemars(regex(pattern = r"^[a-z0-9_-]{1,64}$"))]
    pub collection: String,
    /// Field names and the values they must equal, such as
    /// {"registration": "品川 300 あ 12-34"} or {"vehicle": "V-001"}. Every
    /// field must match; at least one is required. Strings match exactly.
    #[serde(rename = "match")]
    #[schemars(extend("minProperties" = 1))]
    pub fields: Map<String, Value>,
    /// Most records to return, 1 to 50; default 10.
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
}

/// The records found.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct FindRecordOutput {
    /// The matching records, in the collection's order; empty when none
    /// matched.
    pub records: Vec<Map<String, Value>>,
    /// Whether more records matched than were returned; match on more
    /// fields or raise `limit` to see them.
    pub truncated: bool,
}

fn run(input: FindRecordInput) -> Result<FindRecordOutput, Error> {
    find_record(input, |collection, fields, limit| {
        hane_guest::records::find(collection, fields, limit)
    })
}

hane_guest::operation! {
    name: "data.find_record",
    impact: Read,
    run: run,
}

/// Checks `input` and asks `find` (the `records` capability, or a stand-in)
/// for the matching records.
///
/// # Errors
///
/// - [`Error::InvalidInput`] when `match` is empty or `limit` is outside
///   1 to [`MAX_LIMIT`];
/// - whatever `find` returns: [`Error::Denied`] for a collection that is not
///   granted, [`Error::NotFound`] for one the ledger does not have;
/// - [`Error::Failed`] when a record is not a JSON object.
pub fn find_record(
    input: FindRecordInput,
    find: impl FnOnce(&str, &Map<String, Value>, u32) -> Result<Found, Error>,
) -> Result<FindRecordOutput, Error> {
    if input.fields.is_empty() {
        return Err(Error::InvalidInput(
            "match needs at least one field, such as {\"id\": \"V-001\"}".to_owned(),
        ));
    }
    let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::InvalidInput(format!(
            "limit must be from 1 to {MAX_LIMIT}, not {limit}"
        )));
    }
    let found = find(&input.collection, &input.fields, limit)?;
    let records = found
        .records
        .into_iter()
        .map(|record| match record {
            Value::Object(object) => Ok(object),
            other => Err(Error::Failed(format!(
                "a record of `{}` is not a JSON object: {other}",
                input.collection
            ))),
        })
        .collect::<Result<_, _>>()?;
    Ok(FindRecordOutput {
        records,
        truncated: found.truncated,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn input(value: Value) -> FindRecordInput {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn passes_the_match_and_the_limit_and_returns_the_records() {
        let out = find_record(
            input(json!({"collection": "leases", "match": {"vehicle": "V-002", "months": 24}, "limit": 2})),
            |collection, fields, limit| {
                assert_eq!(collection, "leases");
                assert_eq!(Value::Object(fields.clone()), json!({"vehicle": "V-002", "months": 24}));
                assert_eq!(limit, 2);
                Ok(Found {
                    records: vec![json!({"id": "L-02"}), json!({"id": "L-09"})],
                    truncated: true,
                })
            },
        )
        .unwrap();
        assert_eq!(out.records.len(), 2);
        assert!(out.truncated);
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            json!({"records": [{"id": "L-02"}, {"id": "L-09"}], "truncated": true})
        );
    }

    #[test]
    fn refuses_an_empty_match_and_limits_out_of_range() {
        let never = |_: &str, _: &Map<String, Value>, _: u32| -> Result<Found, Error> {
            panic!("must not be called")
        };
        let err = find_record(input(json!({"collection": "v", "match": {}})), never).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        for limit in [0, 51] {
            let err = find_record(
                input(json!({"collection": "v", "match": {"id": "x"}, "limit": limit})),
                never,
            )
            .unwrap_err();
            assert!(
                matches!(&err, Error::InvalidInput(m) if m.contains("1 to 50")),
                "{err:?}"
            );
        }
        assert!(serde_json::from_value::<FindRecordInput>(json!({"collection": "v"})).is_err());
    }

    #[test]
    fn host_errors_pass_through_and_non_objects_fail() {
        let err = find_record(
            input(json!({"collection": "v", "match": {"id": "x"}})),
            |_, _, _| Err(Error::Denied("collection `v` is not granted".into())),
        )
        .unwrap_err();
        assert!(matches!(err, Error::Denied(_)));
        let err = find_record(
            input(json!({"collection": "v", "match": {"id": "x"}})),
            |_, _, _| {
                Ok(Found {
                    records: vec![json!([1])],
                    truncated: false,
                })
            },
        )
        .unwrap_err();
        assert!(matches!(err, Error::Failed(_)));
    }

    #[test]
    fn the_schema_tells_a_model_what_to_send() {
        let schema: Value =
            serde_json::from_str(&hane_guest::__private::input_schema::<FindRecordInput>())
                .unwrap();
        assert_eq!(schema["properties"]["match"]["minProperties"], 1);
        assert_eq!(schema["properties"]["limit"]["maximum"], 50);
        assert_eq!(schema["required"], json!(["collection", "match"]));
    }
}
