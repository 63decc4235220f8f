//! [`Ontology`]: object types over the [`Ledger`]'s collections, their typed
//! properties, the links between them and the documents that hold
//! knowledge about them.
//!
//! A release defines it in an `Ontology` manifest (`hane-manifest`), checks
//! it against its ledger ([`Ontology::check`]) and keeps it in the ledger
//! ([`Ledger::ontology`]), so every call that reads the ledger reads the same
//! ontology: the `ontology.query` and `ontology.knowledge` operations get it
//! as JSON through the `records` capability and walk the links themselves,
//! inside the sandbox.
//!
//! # Examples
//!
//! ```
//! use hane_core::ontology::{Ontology, PropertyType};
//!
//! let ontology: Ontology = serde_json::from_value(serde_json::json!({
//!     "name": "fleet",
//!     "objectTypes": {
//!         "vehicle": {
//!             "description": "A leased vehicle",
//!             "collection": "vehicles",
//!             "key": "id",
//!             "properties": {"id": {"type": "string", "description": ""}},
//!             "links": {},
//!             "knowledge": []
//!         }
//!     }
//! }))?;
//! assert_eq!(ontology.object_types["vehicle"].properties["id"].kind, PropertyType::String);
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ledger::Ledger;

/// Most object types one ontology defines.
pub const MAX_OBJECT_TYPES: usize = 64;
/// Most properties of one object type.
pub const MAX_PROPERTIES: usize = 128;
/// Most links of one object type.
pub const MAX_LINKS: usize = 32;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1000;
/// Most problems [`Ontology::check`] reports about one property's values;
/// the rest are counted.
const MAX_VALUE_PROBLEMS: usize = 3;

/// Object types by name, such as `vehicle` and `lease`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ontology {
    /// The `Ontology` manifest's name.
    pub name: String,
    /// The object types, by name.
    pub object_types: BTreeMap<String, ObjectType>,
}

/// One kind of object: the records of a collection, seen through typed
/// properties.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectType {
    /// What an object of this type is, for people and models.
    pub description: String,
    /// The ledger collection whose records are the objects.
    pub collection: String,
    /// The property that names one object; unique in the collection.
    pub key: String,
    /// The properties a query may filter on, order by and return, by name.
    pub properties: BTreeMap<String, Property>,
    /// Links to other objects or to documents, by name.
    pub links: BTreeMap<String, Link>,
    /// The documents that hold knowledge about this type or its objects.
    pub knowledge: Vec<KnowledgeSource>,
}

/// A typed property: a top-level field of the records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Property {
    /// Its type; every record's value has it, or the record has none.
    #[serde(rename = "type")]
    pub kind: PropertyType,
    /// What it holds.
    pub description: String,
}

/// The type of a [`Property`]. Values loaded from CSV are strings; they have
/// the type when their text does (`48210` is an integer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PropertyType {
    /// Any string.
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A calendar date, `YYYY-MM-DD`.
    Date,
}

impl PropertyType {
    /// Its name in manifests and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Date => "date",
        }
    }

    /// The type named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "date" => Self::Date,
            _ => return None,
        })
    }

    /// Whether `value` is of this type. `null` and the empty string are
    /// no value, which every property may have.
    pub fn admits(self, value: &Value) -> bool {
        match value {
            Value::Null => true,
            Value::String(s) if s.is_empty() => true,
            Value::String(s) => match self {
                Self::String => true,
                Self::Integer => s.trim().parse::<i64>().is_ok(),
                Self::Number => s.trim().parse::<f64>().is_ok_and(f64::is_finite),
                Self::Boolean => s == "true" || s == "false",
                Self::Date => is_date(s),
            },
            Value::Number(n) => match self {
                Self::Integer => n.is_i64() || n.is_u64(),
                Self::Number => true,
                _ => false,
            },
            Value::Bool(_) => self == Self::Boolean,
            Value::Array(_) | Value::Object(_) => false,
        }
    }
}

impl fmt::Display for PropertyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether `s` is a date `YYYY-MM-DD` with a month of 1 to 12 and a day of
/// 1 to 31.
pub fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if !(digits(0..4) && digits(5..7) && digits(8..10)) {
        return false;
    }
    let month = (b[5] - b'0') * 10 + (b[6] - b'0');
    let day = (b[8] - b'0') * 10 + (b[9] - b'0');
    (1..=12).contains(&month) && (1..=31).contains(&day)
}

/// A named link from an object to other objects or to a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Link {
    /// What the link means.
    pub description: String,
    /// The property of this object whose value the link follows.
    pub from: String,
    /// Where it leads.
    pub target: LinkTarget,
}

/// Where a [`Link`] leads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LinkTarget {
    /// The objects of type `to` whose property `via` equals this object's
    /// `from`: one when `via` is that type's key, else any number.
    #[serde(rename_all = "camelCase")]
    Object {
        /// The object type.
        to: String,
        /// Its property that holds the value.
        via: String,
        /// Whether many objects may match (`via` is not the key).
        many: bool,
    },
    /// The document of set `set` that this object's `from` names.
    #[serde(rename_all = "camelCase")]
    Document {
        /// The document set.
        set: String,
    },
}

/// Documents that hold knowledge of an object type: a whole set, or the one
/// document each object names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeSource {
    /// The document set.
    pub documents: String,
    /// The property naming each object's own document in the set; none
    /// when the whole set is about the type.
    pub from: Option<String>,
}

/// Something in an ontology that its ledger contradicts, named by where in
/// the ontology it is (`objectTypes.vehicle.properties.mileage_km`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OntologyProblem {
    /// The path in the ontology's `spec`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl Ontology {
    /// Checks the ontology against `ledger`: every collection and document
    /// set it names exists, every object's key is there and unique, every
    /// property value has its type, and every document link names a
    /// document of its set. Problems about values name the record by id,
    /// at most a few per property.
    pub fn check(&self, ledger: &Ledger) -> Vec<OntologyProblem> {
        let mut problems = Vec::new();
        for (name, object_type) in &self.object_types {
            let at = format!("objectTypes.{name}");
            let Some(collection) = ledger.collections.get(&object_type.collection) else {
                problems.push(OntologyProblem {
                    field: format!("{at}.collection"),
                    message: format!("the ledger has no collection `{}`", object_type.collection),
                });
                continue;
            };
            for source in &object_type.knowledge {
                if !ledger.document_sets.contains_key(&source.documents) {
                    problems.push(OntologyProblem {
                        field: format!("{at}.knowledge"),
                        message: format!("the ledger has no document set `{}`", source.documents),
                    });
                }
            }
            for (link_name, link) in &object_type.links {
                if let LinkTarget::Document { set } = &link.target
                    && !ledger.document_sets.contains_key(set)
                {
                    problems.push(OntologyProblem {
                        field: format!("{at}.links.{link_name}.documents"),
                        message: format!("the ledger has no document set `{set}`"),
                    });
                }
            }
            check_values(name, object_type, collection, ledger, &mut problems);
        }
        problems
    }
}

/// Checks each record of `collection` against `object_type`'s properties,
/// key and document links.
fn check_values(
    name: &str,
    object_type: &ObjectType,
    collection: &crate::ledger::Collection,
    ledger: &Ledger,
    problems: &mut Vec<OntologyProblem>,
) {
    let at = format!("objectTypes.{name}");
    let mut bad: BTreeMap<&str, (Vec<String>, usize)> = BTreeMap::new();
    let mut keys: HashMap<String, String> = HashMap::new();
    let mut key_problems = Vec::new();
    let mut missing_documents: BTreeMap<&str, (Vec<String>, usize)> = BTreeMap::new();
    for record in &collection.records {
        let Ok(Value::Object(object)) = record.json.to_value() else {
            continue;
        };
        for (property_name, property) in &object_type.properties {
            if let Some(value) = object.get(property_name)
                && !property.kind.admits(value)
            {
                let entry = bad.entry(property_name).or_default();
                entry.1 += 1;
                if entry.0.len() < MAX_VALUE_PROBLEMS {
                    entry.0.push(format!("record `{}` has {value}", record.id));
                }
            }
        }
        match object.get(&object_type.key).and_then(key_text) {
            None => {
                if key_problems.len() < MAX_VALUE_PROBLEMS {
                    key_problems.push(format!(
                        "record `{}` has no `{}`",
                        record.id, object_type.key
                    ));
                }
            }
            Some(key) => {
                if let Some(first) = keys.insert(key.clone(), record.id.clone())
                    && key_problems.len() < MAX_VALUE_PROBLEMS
                {
                    key_problems.push(format!(
                        "records `{first}` and `{}` both have `{key}`",
                        record.id
                    ));
                }
            }
        }
        for (link_name, link) in &object_type.links {
            let LinkTarget::Document { set } = &link.target else {
                continue;
            };
            let Some(documents) = ledger.document_sets.get(set) else {
                continue;
            };
            let Some(document) = object.get(&link.from).and_then(key_text) else {
                continue;
            };
            if !documents.documents.contains_key(&document) {
                let entry = missing_documents.entry(link_name).or_default();
                entry.1 += 1;
                if entry.0.len() < MAX_VALUE_PROBLEMS {
                    entry.0.push(format!(
                        "record `{}` names `{document}`, which set `{set}` does not have",
                        record.id
                    ));
                }
            }
        }
    }
    for (property_name, (examples, count)) in bad {
        let kind = object_type.properties[property_name].kind;
        problems.push(OntologyProblem {
            field: format!("{at}.properties.{property_name}"),
            message: format!(
                "{count} record{} of `{}` do not hold {} {kind}: {}{}",
                if count == 1 { "" } else { "s" },
                object_type.collection,
                if kind == PropertyType::Integer {
                    "an"
                } else {
                    "a"
                },
                examples.join("; "),
                more(count, examples.len()),
            ),
        });
    }
    if !key_problems.is_empty() {
        problems.push(OntologyProblem {
            field: format!("{at}.key"),
            message: format!(
                "`{}` must name every object of `{}` once: {}",
                object_type.key,
                object_type.collection,
                key_problems.join("; ")
            ),
        });
    }
    for (link_name, (examples, count)) in missing_documents {
        problems.push(OntologyProblem {
            field: format!("{at}.links.{link_name}"),
            message: format!("{}{}", examples.join("; "), more(count, examples.len())),
        });
    }
}

fn more(count: usize, shown: usize) -> String {
    if count > shown {
        format!(" (and {} more)", count - shown)
    } else {
        String::new()
    }
}

/// A scalar's text, as keys and document names are compared: strings as
/// they are, numbers as JSON writes them; none for anything else or "".
fn key_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> (Ontology, Ledger) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ledger");
        let ledger = Ledger::load_dir(&dir).unwrap();
        let ontology: Ontology = serde_json::from_value(serde_json::json!({
            "name": "fleet",
            "objectTypes": {
                "vehicle": {
                    "description": "", "collection": "vehicles", "key": "id",
                    "properties": {
                        "id": {"type": "string", "description": ""},
                        "mileage_km": {"type": "integer", "description": ""},
                        "inspection_expiry": {"type": "date", "description": ""}
                    },
                    "links": {}, "knowledge": []
                },
                "lease": {
                    "description": "", "collection": "leases", "key": "contract_no",
                    "properties": {"months": {"type": "integer", "description": ""}},
                    "links": {"contract": {"description": "", "from": "document",
                        "target": {"document": {"set": "leases"}}}},
                    "knowledge": [{"documents": "leases", "from": "document"}]
                }
            }
        }))
        .unwrap();
        (ontology, ledger)
    }

    #[test]
    fn the_example_ledger_meets_its_ontology() {
        let (ontology, ledger) = example();
        assert_eq!(ontology.check(&ledger), []);
        let back: Ontology = crate::round_trip(&ontology);
        assert_eq!(back, ontology);
    }

    #[test]
    fn values_of_another_type_are_named_by_record() {
        let (mut ontology, ledger) = example();
        let vehicle = ontology.object_types.get_mut("vehicle").unwrap();
        vehicle.properties.get_mut("mileage_km").unwrap().kind = PropertyType::Date;
        vehicle.key = "depot".to_owned();
        let problems = ontology.check(&ledger);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(
            problems[0].field,
            "objectTypes.vehicle.properties.mileage_km"
        );
        assert!(
            problems[0].message.starts_with(
                "5 records of `vehicles` do not hold a date: record `V-001` has \"48210\""
            ),
            "{}",
            problems[0].message
        );
        assert!(problems[0].message.ends_with("(and 2 more)"));
        assert_eq!(problems[1].field, "objectTypes.vehicle.key");
        assert!(
            problems[1]
                .message
                .contains("records `V-001` and `V-002` both have `Shinagawa`")
        );
    }

    #[test]
    fn missing_collections_sets_and_documents_are_named() {
        let (mut ontology, mut ledger) = example();
        ledger
            .document_sets
            .get_mut("leases")
            .unwrap()
            .documents
            .remove("c-1002.txt");
        ontology.object_types.get_mut("vehicle").unwrap().collection = "cars".to_owned();
        let problems = ontology.check(&ledger);
        assert_eq!(problems[0].field, "objectTypes.lease.links.contract");
        assert!(
            problems[0]
                .message
                .contains("record `L-02` names `c-1002.txt`")
        );
        assert_eq!(problems[1].field, "objectTypes.vehicle.collection");
        assert_eq!(problems[1].message, "the ledger has no collection `cars`");
    }

    #[test]
    fn types_admit_their_values() {
        use serde_json::json;
        assert!(PropertyType::Integer.admits(&json!("48210")));
        assert!(!PropertyType::Integer.admits(&json!("48.5")));
        assert!(PropertyType::Number.admits(&json!(48.5)));
        assert!(PropertyType::Date.admits(&json!("2027-03-31")));
        assert!(!PropertyType::Date.admits(&json!("2027-13-01")));
        assert!(PropertyType::Boolean.admits(&json!("true")));
        assert!(PropertyType::Date.admits(&json!("")));
        assert!(!PropertyType::String.admits(&json!({"a": 1})));
    }
}
