//! Records of the host's ledger, through `hane:operation/records`.
//!
//! The host keeps collections of records, JSON objects each with a string
//! `id`, such as a fleet's `vehicles` or `leases`. A call may read only the
//! collections its policy grants (`capabilities.records` in the operation's
//! manifest, `--allow-records` on the command line): asking for another
//! comes back as [`Error::Denied`], which the host also records in the
//! call's receipt, and a granted collection the ledger does not have as
//! [`Error::NotFound`]. The host caps how much one call returns; [`Found`]
//! says when there was more, and [`query`] reads on page by page.
//!
//! When the release defines an ontology (object types over the collections,
//! their typed properties, links and knowledge documents), [`ontology`]
//! returns it as JSON.
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
//!
//! let mut query = records::Query {
//!     collection: "vehicles".into(),
//!     conditions: vec![records::Condition {
//!         field: "mileage_km".into(),
//!         comparison: records::Comparison::GreaterOrEqual,
//!         value: json!(50000),
//!     }],
//!     order_by: Some("mileage_km".into()),
//!     descending: true,
//!     after: None,
//!     limit: 20,
//! };
//! loop {
//!     let page = records::query(&query)?;
//!     hane_guest::log::info(&format!("{} vehicles", page.records.len()));
//!     let Some(next) = page.next else { break };
//!     query.after = Some(next);
//! }
//! if let Some(ontology) = records::ontology()? {
//!     hane_guest::log::info(&format!("ontology {}", ontology["name"]));
//! }
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

/// How a [`Condition`] compares a record's field with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Comparison {
    /// Equal, by the rules of [`find`]: a number also equals its text.
    Equal,
    /// Less than the value.
    Less,
    /// Less than or equal to the value.
    LessOrEqual,
    /// Greater than the value.
    Greater,
    /// Greater than or equal to the value.
    GreaterOrEqual,
    /// A string field that starts with the value, which must be a string.
    Prefix,
}

/// One condition of a [`Query`] on a top-level field of the records.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The field, such as `mileage_km`.
    pub field: String,
    /// How the field compares with `value`.
    pub comparison: Comparison,
    /// A string, a number, a boolean or null. A number compares with fields
    /// holding numbers or numbers' text (CSV cells); a string compares with
    /// string fields character by character, so ISO dates order as dates.
    pub value: Value,
}

/// A query over one collection, answered one [`Page`] at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The collection, such as `vehicles`.
    pub collection: String,
    /// Every condition must hold; none matches every record.
    pub conditions: Vec<Condition>,
    /// Order by this field (numbers by value, then strings, then records
    /// without it), ties by the collection's order; `None` keeps the
    /// collection's order.
    pub order_by: Option<String>,
    /// Reverse `order_by`; ties stay in the collection's order.
    pub descending: bool,
    /// The `next` of a previous page of this query: continue after it.
    pub after: Option<String>,
    /// Most records to return; the host caps it.
    pub limit: u32,
}

/// One page of a [`query`].
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The records (JSON objects), in the query's order.
    pub records: Vec<Value>,
    /// When more records matched: pass it as the query's `after` to read
    /// the next page. Opaque; valid only for the same query.
    pub next: Option<String>,
}

/// The records of `q.collection` that meet every condition of `q`, one
/// page at a time.
///
/// # Errors
///
/// - [`Error::Denied`] when the collection is not granted to this call;
/// - [`Error::NotFound`] when the ledger has no such collection;
/// - [`Error::InvalidInput`] when a value is not a scalar, the query is over
///   the host's caps, or `after` is not a `next` of this query;
/// - [`Error::Failed`] when the host returns a record that is not JSON, and
///   outside a wasm32 component.
pub fn query(q: &Query) -> Result<Page, Error> {
    let values: Vec<String> = q.conditions.iter().map(|c| c.value.to_string()).collect();
    let (records, next) = host::query(q, &values)?;
    let records = records
        .iter()
        .map(|text| parse(&q.collection, text))
        .collect::<Result<_, _>>()?;
    Ok(Page { records, next })
}

/// The release's ontology, or `None` when it defines none: a JSON object
/// with its `name` and its `objectTypes` by name, each with the
/// `collection` it maps to, its `key` property, its typed `properties`, its
/// `links` to other objects or documents and the `knowledge` documents
/// about it.
///
/// # Errors
///
/// [`Error::Failed`] when the host's ontology is not JSON, and outside a
/// wasm32 component.
pub fn ontology() -> Result<Option<Value>, Error> {
    host::ontology()?
        .map(|text| parse_ontology(&text))
        .transpose()
}

fn parse_ontology(text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| {
        Error::Failed(format!(
            "the host returned an ontology that is not JSON: {e}"
        ))
    })
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

    /// `values` are the conditions' values as JSON text, in order.
    pub(super) fn query(
        q: &super::Query,
        values: &[String],
    ) -> Result<(Vec<String>, Option<String>), Error> {
        use super::Comparison as C;
        use records::Comparison as Wit;
        let conditions = q
            .conditions
            .iter()
            .zip(values)
            .map(|(condition, value)| records::Condition {
                field: condition.field.clone(),
                comparison: match condition.comparison {
                    C::Equal => Wit::Equal,
                    C::Less => Wit::Less,
                    C::LessOrEqual => Wit::LessOrEqual,
                    C::Greater => Wit::Greater,
                    C::GreaterOrEqual => Wit::GreaterOrEqual,
                    C::Prefix => Wit::Prefix,
                },
                value: value.clone(),
            })
            .collect();
        let page = records::query(&records::RecordQuery {
            collection: q.collection.clone(),
            conditions,
            order_by: q.order_by.clone(),
            descending: q.descending,
            after: q.after.clone(),
            limit: q.limit,
        })?;
        Ok((page.records, page.next))
    }

    pub(super) fn ontology() -> Result<Option<String>, Error> {
        Ok(records::ontology())
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

    pub(super) fn query(
        _q: &super::Query,
        _values: &[String],
    ) -> Result<(Vec<String>, Option<String>), Error> {
        Err(unavailable())
    }

    pub(super) fn ontology() -> Result<Option<String>, Error> {
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
        let q = Query {
            collection: "vehicles".into(),
            conditions: vec![Condition {
                field: "depot".into(),
                comparison: Comparison::Equal,
                value: json!("Kawasaki"),
            }],
            order_by: None,
            descending: false,
            after: None,
            limit: 5,
        };
        assert!(matches!(query(&q), Err(Error::Failed(m)) if m.contains("only available inside")));
        assert!(matches!(ontology(), Err(Error::Failed(m)) if m.contains("only available inside")));
    }

    #[test]
    fn records_that_are_not_json_are_failures() {
        assert!(matches!(parse("c", "{nope"), Err(Error::Failed(m)) if m.contains("`c`")));
        assert_eq!(parse("c", r#"{"id":"a"}"#).unwrap(), json!({"id": "a"}));
        assert!(
            matches!(parse_ontology("{\"name\": "), Err(Error::Failed(m)) if m.starts_with("the host returned an ontology that is not JSON: "))
        );
        assert_eq!(
            parse_ontology(r#"{"name": "fleet", "objectTypes": {}}"#).unwrap(),
            json!({"name": "fleet", "objectTypes": {}})
        );
    }
}
