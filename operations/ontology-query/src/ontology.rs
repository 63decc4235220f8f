//! The ontology as [`hane_guest::records::ontology`] returns it, and the
//! checks and conversions the ontology operations make with it.
//!
//! An ontology names object types (`vehicle`, `lease`), each the records of
//! one collection seen through typed properties, with named links to other
//! objects or to documents and the document sets that hold knowledge about
//! it. The host checks the ontology against the ledger when the release is
//! made; here it is only read.

use std::collections::BTreeMap;
use std::fmt;

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

/// Object types by name, such as `vehicle` and `lease`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ontology {
    /// The ontology's name, such as `fleet`.
    pub name: String,
    /// The object types, by name.
    pub object_types: BTreeMap<String, ObjectType>,
}

/// One kind of object: the records of a collection, seen through typed
/// properties.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectType {
    /// What an object of this type is.
    #[serde(default)]
    pub description: String,
    /// The ledger collection whose records are the objects.
    pub collection: String,
    /// The property that names one object.
    pub key: String,
    /// The typed properties, by name.
    #[serde(default)]
    pub properties: BTreeMap<String, Property>,
    /// Links to other objects or to documents, by name.
    #[serde(default)]
    pub links: BTreeMap<String, Link>,
    /// The document sets that hold knowledge about this type or its objects.
    #[serde(default)]
    pub knowledge: Vec<KnowledgeSource>,
}

/// A typed property: a top-level field of the records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Property {
    /// Its type: string, integer, number, boolean or date (YYYY-MM-DD).
    #[serde(rename = "type")]
    pub kind: PropertyType,
    /// What it holds.
    #[serde(default)]
    pub description: String,
}

/// The type of a [`Property`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PropertyType {
    /// Any text.
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

/// A named link from an object to other objects or to a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Link {
    /// What the link means.
    #[serde(default)]
    pub description: String,
    /// The field of this object whose value the link follows.
    pub from: String,
    /// Where it leads.
    pub target: LinkTarget,
}

/// Where a [`Link`] leads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum LinkTarget {
    /// The objects of type `to` whose property `via` equals this object's
    /// `from`.
    Object {
        /// The object type it leads to.
        to: String,
        /// That type's property holding this object's `from` value.
        via: String,
        /// Whether it leads to any number of objects (a list) rather than
        /// to one (an object or null).
        many: bool,
    },
    /// The document of set `set` that this object's `from` names.
    Document {
        /// The document set.
        set: String,
    },
}

/// A document set that holds knowledge about an object type.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KnowledgeSource {
    /// The document set.
    pub documents: String,
    /// The field naming each object's own document in the set; `None` when
    /// the whole set is about the type.
    #[serde(default)]
    pub from: Option<String>,
}

/// An object type with its name, as [`Ontology::object_type`] finds it.
#[derive(Debug, Clone, Copy)]
pub struct Type<'o> {
    /// The type's name, such as `vehicle`.
    pub name: &'o str,
    /// Its definition.
    pub def: &'o ObjectType,
}

impl Ontology {
    /// The ontology in what [`hane_guest::records::ontology`] returned.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when the release defines no ontology, and
    /// [`Error::Failed`] when the JSON does not have an ontology's shape.
    pub fn from_host(value: Option<Value>) -> Result<Self, Error> {
        let value =
            value.ok_or_else(|| Error::NotFound("the release defines no ontology".to_owned()))?;
        serde_json::from_value(value).map_err(|e| {
            Error::Failed(format!(
                "the host's ontology does not have the expected shape: {e}"
            ))
        })
    }

    /// The object type named `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the types there are, when there is
    /// no such type.
    pub fn object_type(&self, name: &str) -> Result<Type<'_>, Error> {
        match self.object_types.get_key_value(name) {
            Some((name, def)) => Ok(Type { name, def }),
            None => Err(Error::InvalidInput(format!(
                "the ontology has no object type `{name}`; it has {}",
                list(self.object_types.keys())
            ))),
        }
    }
}

impl<'o> Type<'o> {
    /// The property named `name` and its name as the ontology spells it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the properties there are (and saying
    /// so when `name` is a link).
    pub fn property(&self, name: &str) -> Result<(&'o str, &'o Property), Error> {
        if let Some(found) = self.def.properties.get_key_value(name) {
            return Ok((found.0.as_str(), found.1));
        }
        let hint = if self.def.links.contains_key(name) {
            format!(" (`{name}` is a link: follow it)")
        } else {
            String::new()
        };
        Err(Error::InvalidInput(format!(
            "object type `{}` has no property `{name}`; it has {}{hint}",
            self.name,
            list(self.def.properties.keys())
        )))
    }

    /// The link named `name` and its name as the ontology spells it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the links there are (and saying so
    /// when `name` is a property).
    pub fn link(&self, name: &str) -> Result<(&'o str, &'o Link), Error> {
        if let Some(found) = self.def.links.get_key_value(name) {
            return Ok((found.0.as_str(), found.1));
        }
        let hint = if self.def.properties.contains_key(name) {
            format!(" (`{name}` is a property)")
        } else {
            String::new()
        };
        Err(Error::InvalidInput(format!(
            "`{}` has no link `{name}`; it has {}{hint}",
            self.name,
            list(self.def.links.keys())
        )))
    }

    /// The properties named `fields` (every property, in name order, when
    /// `None`) of `record`, each typed as the ontology says: numbers and
    /// booleans held as text become JSON numbers and booleans, and a
    /// missing or empty value is null. Names must be properties; check
    /// them with [`Type::property`] first.
    pub fn typed<'a>(
        &self,
        record: &Map<String, Value>,
        fields: impl IntoIterator<Item = &'a str>,
    ) -> Map<String, Value> {
        fields
            .into_iter()
            .filter_map(|name| {
                let property = self.def.properties.get(name)?;
                let value = record.get(name).unwrap_or(&Value::Null);
                Some((name.to_owned(), property.kind.output(value)))
            })
            .collect()
    }

    /// Every property of `record`, typed as [`Type::typed`] does.
    pub fn typed_all(&self, record: &Map<String, Value>) -> Map<String, Value> {
        self.typed(record, self.def.properties.keys().map(String::as_str))
    }
}

impl PropertyType {
    /// Its name in the ontology, such as `integer`.
    pub fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Date => "date",
        }
    }

    /// `value` as this type, for an answer: text holding a number or a
    /// boolean becomes one, a number or boolean in a string property
    /// becomes its text, and null or "" is null. A value that does not
    /// convert is kept as it is.
    pub fn output(self, value: &Value) -> Value {
        match value {
            Value::Null => Value::Null,
            Value::String(s) if s.trim().is_empty() => Value::Null,
            Value::String(s) => match self {
                Self::Integer | Self::Number => {
                    parse_number(self, s).map_or_else(|| value.clone(), Value::Number)
                }
                Self::Boolean => match s.trim() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    _ => value.clone(),
                },
                Self::String | Self::Date => value.clone(),
            },
            Value::Number(n) if self == Self::String => Value::String(n.to_string()),
            Value::Bool(b) if self == Self::String => Value::String(b.to_string()),
            other => other.clone(),
        }
    }

    /// `value`, given in a filter on `property`, as this type for the host:
    /// integers and numbers as JSON numbers (from numbers or their text),
    /// booleans as JSON booleans (from `true`/`false` or their text),
    /// dates as `YYYY-MM-DD` text and strings as text (a number or
    /// boolean as its text).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the property, its type and the value
    /// when the value is not of the type.
    pub fn input(self, property: &str, value: &Value) -> Result<Value, Error> {
        let converted = match (self, value) {
            (Self::String, Value::String(_)) => Some(value.clone()),
            (Self::String, Value::Number(n)) => Some(Value::String(n.to_string())),
            (Self::String, Value::Bool(b)) => Some(Value::String(b.to_string())),
            (Self::Integer, Value::Number(n)) => {
                if n.is_i64() || n.is_u64() {
                    Some(value.clone())
                } else {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                        .map(|f| Value::from(f as i64))
                }
            }
            (Self::Number, Value::Number(_)) => Some(value.clone()),
            (Self::Integer | Self::Number, Value::String(s)) => {
                parse_number(self, s).map(Value::Number)
            }
            (Self::Boolean, Value::Bool(_)) => Some(value.clone()),
            (Self::Boolean, Value::String(s)) => match s.trim() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            (Self::Date, Value::String(s)) if is_date(s.trim()) => {
                Some(Value::String(s.trim().to_owned()))
            }
            _ => None,
        };
        converted
            .ok_or_else(|| Error::InvalidInput(format!("`{property}` is {self:#}, not {value}")))
    }
}

/// `integer` and so on; with `{:#}`, with its article and, for dates, the
/// format: `an integer`, `a date (YYYY-MM-DD)`.
impl fmt::Display for PropertyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !f.alternate() {
            return f.write_str(self.name());
        }
        match self {
            Self::Integer => f.write_str("an integer"),
            Self::Date => f.write_str("a date (YYYY-MM-DD)"),
            other => write!(f, "a {}", other.name()),
        }
    }
}

/// `s` as a JSON number of type `kind`: a whole number for integers, and
/// for numbers a whole number when it is one, else a finite float.
fn parse_number(kind: PropertyType, s: &str) -> Option<Number> {
    let s = s.trim();
    if let Ok(i) = s.parse::<i64>() {
        return Some(i.into());
    }
    if kind == PropertyType::Integer {
        return None;
    }
    s.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .and_then(Number::from_f64)
}

/// Whether `s` is a date `YYYY-MM-DD` with a month of 1 to 12 and a day of
/// 1 to 31, as the host checks dates.
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

/// A field's value as the text that names something (a document, an
/// object's key): a non-empty string as it is, a number as JSON writes it;
/// `None` for anything else.
pub fn name_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `a, b, c`, or `none` for no names.
fn list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.map(String::as_str).collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fleet() -> Ontology {
        Ontology::from_host(Some(json!({
            "name": "fleet",
            "objectTypes": {
                "vehicle": {
                    "description": "A leased vehicle", "collection": "vehicles", "key": "id",
                    "properties": {
                        "id": {"type": "string", "description": ""},
                        "mileage_km": {"type": "integer", "description": ""}
                    },
                    "links": {"leases": {"description": "", "from": "id",
                        "target": {"object": {"to": "lease", "via": "vehicle", "many": true}}}},
                    "knowledge": [{"documents": "handbook", "from": null}]
                },
                "lease": {"description": "", "collection": "leases", "key": "id",
                    "properties": {}, "links": {}, "knowledge": []}
            }
        })))
        .unwrap()
    }

    #[test]
    fn reads_the_hosts_json_and_names_what_exists() {
        let ontology = fleet();
        assert_eq!(ontology.name, "fleet");
        let vehicle = ontology.object_type("vehicle").unwrap();
        assert_eq!(vehicle.def.knowledge[0].from, None);
        assert_eq!(
            ontology.object_type("car").unwrap_err(),
            Error::InvalidInput(
                "the ontology has no object type `car`; it has lease, vehicle".into()
            )
        );
        assert_eq!(
            vehicle.property("leases").unwrap_err().message(),
            "object type `vehicle` has no property `leases`; it has id, mileage_km (`leases` is a link: follow it)"
        );
        assert_eq!(
            vehicle.link("id").unwrap_err().message(),
            "`vehicle` has no link `id`; it has leases (`id` is a property)"
        );
        let lease = ontology.object_type("lease").unwrap();
        assert_eq!(
            lease.link("vehicle").unwrap_err().message(),
            "`lease` has no link `vehicle`; it has none"
        );
    }

    #[test]
    fn a_missing_or_malformed_ontology_is_an_error() {
        assert_eq!(
            Ontology::from_host(None).unwrap_err(),
            Error::NotFound("the release defines no ontology".into())
        );
        let err = Ontology::from_host(Some(json!({"name": "x"}))).unwrap_err();
        assert!(
            matches!(&err, Error::Failed(m) if m.contains("missing field `objectTypes`")),
            "{err:?}"
        );
    }

    #[test]
    fn record_values_are_typed_for_answers() {
        use PropertyType as T;
        assert_eq!(T::Integer.output(&json!("48210")), json!(48210));
        assert_eq!(T::Integer.output(&json!(" 7 ")), json!(7));
        assert_eq!(T::Integer.output(&json!("n/a")), json!("n/a"));
        assert_eq!(T::Number.output(&json!("4.5")), json!(4.5));
        assert_eq!(T::Number.output(&json!("12")), json!(12));
        assert_eq!(T::Boolean.output(&json!("true")), json!(true));
        assert_eq!(T::String.output(&json!(1001)), json!("1001"));
        assert_eq!(T::Date.output(&json!("2027-03-31")), json!("2027-03-31"));
        for kind in [T::String, T::Integer, T::Date] {
            assert_eq!(kind.output(&json!("")), Value::Null);
            assert_eq!(kind.output(&Value::Null), Value::Null);
        }
        let ontology = fleet();
        let vehicle = ontology.object_type("vehicle").unwrap();
        let record = json!({"id": "V-1", "mileage_km": "12", "colour": "red"});
        assert_eq!(
            Value::Object(vehicle.typed_all(record.as_object().unwrap())),
            json!({"id": "V-1", "mileage_km": 12})
        );
    }

    #[test]
    fn filter_values_are_converted_or_refused_by_name() {
        use PropertyType as T;
        assert_eq!(
            T::Integer.input("m", &json!("10000")).unwrap(),
            json!(10000)
        );
        assert_eq!(
            T::Integer.input("m", &json!(10000.0)).unwrap(),
            json!(10000)
        );
        assert_eq!(T::Number.input("m", &json!("2.5")).unwrap(), json!(2.5));
        assert_eq!(
            T::Boolean.input("b", &json!("false")).unwrap(),
            json!(false)
        );
        assert_eq!(T::String.input("s", &json!(12)).unwrap(), json!("12"));
        assert_eq!(
            T::Date.input("d", &json!("2027-03-31")).unwrap(),
            json!("2027-03-31")
        );
        let cases = [
            (T::Integer, json!("abc"), "`m` is an integer, not \"abc\""),
            (T::Integer, json!(2.5), "`m` is an integer, not 2.5"),
            (T::Number, json!(true), "`m` is a number, not true"),
            (T::Boolean, json!("yes"), "`m` is a boolean, not \"yes\""),
            (
                T::Date,
                json!("2027-3-31"),
                "`m` is a date (YYYY-MM-DD), not \"2027-3-31\"",
            ),
            (
                T::Date,
                json!("2027-02-32"),
                "`m` is a date (YYYY-MM-DD), not \"2027-02-32\"",
            ),
            (T::String, json!(["a"]), "`m` is a string, not [\"a\"]"),
            (T::String, Value::Null, "`m` is a string, not null"),
        ];
        for (kind, value, message) in cases {
            assert_eq!(
                kind.input("m", &value).unwrap_err(),
                Error::InvalidInput(message.into())
            );
        }
    }

    #[test]
    fn names_are_non_empty_text_or_numbers() {
        assert_eq!(
            name_text(Some(&json!("c-1.txt"))).as_deref(),
            Some("c-1.txt")
        );
        assert_eq!(name_text(Some(&json!(42))).as_deref(), Some("42"));
        assert_eq!(name_text(Some(&json!(" "))), None);
        assert_eq!(name_text(Some(&Value::Null)), None);
        assert_eq!(name_text(None), None);
    }
}
