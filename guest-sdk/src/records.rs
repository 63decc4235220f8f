//! Records of the host's ledger, through `hane:operation/records`.
//!
//! The host keeps collections of records, JSON objects each with a string
//! `id`, such as a fleet's `vehicles` or `leases`. A call may read only the
//! collections its policy grants (`capabilities.records` in the operation's
//! manifest, `--allow-records` on the command line): asking for another
//! comes back as [`Error::Denied`], which the host also records in the
//! call's receipt, and a granted collection the ledger does not have as
//! [`Error::NotFound`]. The host caps how much one call returns; [`Found`]
//! says when there was more.
//!
//! # Examples
//!
//! ```no_run
//! use hane_guest::{records, Error};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Error> {
//! let found = records::find("vehicles", [("registration", json!("架空 300 あ 10-02"))], 10)?;
//! for vehicle in &found.records {
//!     hane_guest::log::info(&format!("{} is a {}", vehicle["id"], vehicle["model"]));
//! }
//! let lease = records::get("leases", "L-01")?.ok_or_else(|| Error::NotFound("lease L-01".into()))?;
//! assert_eq!(lease["id"], "L-01");
//! # Ok(())
//! # }
//! ```

use std::borrow::Borrow;

use serde_json::Value;

use crate::Error;

/// What [`find`] matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The matching records (JSON objects), in the collection's order.
    pub records: Vec<Value>,
    /// Whether more records matched than were returned: past `limit`, or
    /// past the host's caps on count and bytes.
    pub truncated: bool,
}

/// The records of `collection` whose top-level fields equal every
/// `(field, value)` pair of `fields`, at most `limit` of them.
///
/// Values compare as JSON: numbers by value, and a string equals a number
/// when it is that number's text (records loaded from CSV hold only
/// strings, so `48210` finds `"48210"`). Strings compare exactly.
///
/// # Errors
///
/// - [`Error::Denied`] when the collection is not granted to this call;
/// - [`Error::NotFound`] when the ledger has no such collection;
/// - [`Error::InvalidInput`] when `fields` is empty or over the host's caps;
/// - [`Error::Failed`] outside a wasm32 component.
pub fn find<K, V>(
    collection: &str,
    fields: impl IntoIterator<Item = (K, V)>,
    limit: u32,
) -> Result<Found, Error>
where
    K: AsRef<str>,
    V: Borrow<Value>,
{
    let fields: Vec<(String, String)> = fields
        .into_iter()
        .map(|(field, value)| (field.as_ref().to_owned(), value.borrow().to_string()))
        .collect();
    let (records, truncated) = host::find(collection, &fields, limit)?;
    let records = records
        .iter()
        .map(|text| parse(collection, text))
        .collect::<Result<_, _>>()?;
    Ok(Found { records, truncated })
}

/// The record of `collection` whose `id` is `id`, or `None`.
///
/// # Errors
///
/// As [`find`].
pub fn get(collection: &str, id: &str) -> Result<Option<Value>, Error> {
    host::get(collection, id)?
        .map(|text| parse(collection, &text))
        .transpose()
}

fn parse(collection: &str, text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| {
        Error::Failed(format!(
            "the host returned a record of `{collection}` that is not JSON: {e}"
        ))
    })
}

#[cfg(target_arch = "wasm32")]
mod host {
    use crate::Error;
    use crate::wit::hane::operation::records;

    pub(super) fn find(
        collection: &str,
        fields: &[(String, String)],
        limit: u32,
    ) -> Result<(Vec<String>, bool), Error> {
        let found = records::find(collection, fields, limit)?;
        Ok((found.records, found.truncated))
    }

    pub(super) fn get(collection: &str, id: &str) -> Result<Option<String>, Error> {
        Ok(records::get(collection, id)?)
    }
}

// The generated imports are `unreachable!()` stubs off wasm32.
#[cfg(not(target_arch = "wasm32"))]
mod host {
    use crate::Error;

    fn unavailable() -> Error {
        Error::Failed("records are only available inside a wasm32-wasip2 component".to_owned())
    }

    pub(super) fn find(
        _collection: &str,
        _fields: &[(String, String)],
        _limit: u32,
    ) -> Result<(Vec<String>, bool), Error> {
        Err(unavailable())
    }

    pub(super) fn get(_collection: &str, _id: &str) -> Result<Option<String>, Error> {
        Err(unavailable())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn off_wasm_calls_fail_without_panicking() {
        let err = find("vehicles", [("id", json!("V-001"))], 1).unwrap_err();
        assert!(matches!(err, Error::Failed(m) if m.contains("only available inside")));
        assert!(matches!(get("vehicles", "V-001"), Err(Error::Failed(_))));
        let map = json!({"depot": "Kawasaki"});
        assert!(find("vehicles", map.as_object().unwrap(), 1).is_err());
    }

    #[test]
    fn records_that_are_not_json_are_failures() {
        assert!(matches!(parse("c", "{nope"), Err(Error::Failed(m)) if m.contains("`c`")));
        assert_eq!(parse("c", r#"{"id":"a"}"#).unwrap(), json!({"id": "a"}));
    }
}
