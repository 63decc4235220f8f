//! Request bodies as JSON, read so that nothing in them is ambiguous: an
//! object that gives one key twice is refused, naming the key and where
//! it is, instead of letting the last value win (a client and a proxy
//! in front of the server could each read a different one).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Why a body is not one unambiguous JSON value.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// An object gives `key` twice; `pointer` is the JSON Pointer of the
    /// second one.
    DuplicateKey { key: String, pointer: String },
    /// The bytes are not JSON.
    Syntax(serde_json::Error),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::DuplicateKey { key, pointer } => write!(
                f,
                "the request body gives the key `{}` twice (at `{}`): send each key once",
                shown(key),
                shown(pointer)
            ),
            BodyError::Syntax(e) => write!(f, "the request body is not valid JSON: {e}"),
        }
    }
}

/// `text` as an error repeats a client's text: its start, with control
/// characters escaped.
fn shown(text: &str) -> String {
    hane_core::ids::IdError::shown(text)
}

/// `bytes` as one JSON value in which no object has a key twice.
pub(crate) fn unique_value(bytes: &[u8]) -> Result<Value, BodyError> {
    let mut path = Vec::new();
    let mut duplicate = None;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let parsed = Unique {
        path: &mut path,
        duplicate: &mut duplicate,
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value));
    match (parsed, duplicate) {
        (_, Some((key, pointer))) => Err(BodyError::DuplicateKey { key, pointer }),
        (Ok(value), None) => Ok(value),
        (Err(e), None) => Err(BodyError::Syntax(e)),
    }
}

/// One value at `path`; a duplicate key found inside is put in
/// `duplicate` (with its pointer) and ends the parse.
struct Unique<'a> {
    path: &'a mut Vec<String>,
    duplicate: &'a mut Option<(String, String)>,
}

impl Unique<'_> {
    fn pointer(&self) -> String {
        self.path
            .iter()
            .map(|segment| format!("/{}", segment.replace('~', "~0").replace('/', "~1")))
            .collect()
    }
}

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON has no NaN or infinity, so every parsed float is a number.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            self.path.push(items.len().to_string());
            let item = seq.next_element_seed(Unique {
                path: self.path,
                duplicate: self.duplicate,
            });
            self.path.pop();
            match item? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.path.push(key);
            if object.contains_key(self.path.last().map_or("", String::as_str)) {
                let pointer = self.pointer();
                let key = self.path.pop().unwrap_or_default();
                *self.duplicate = Some((key, pointer));
                return Err(de::Error::custom("a key is given twice"));
            }
            let value = map.next_value_seed(Unique {
                path: self.path,
                duplicate: self.duplicate,
            });
            let key = self.path.pop().unwrap_or_default();
            object.insert(key, value?);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_parse_as_serde_json_parses_them() {
        let text =
            r#"{"a": [1, -2, 3.5, true, null, "x"], "b": {"c": {}}, "d": 18446744073709551615}"#;
        assert_eq!(
            unique_value(text.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        assert_eq!(unique_value(b" 7 ").unwrap(), json!(7));
    }

    #[test]
    fn a_key_given_twice_is_refused_with_its_pointer() {
        let err = unique_value(br#"{"agent": "a", "agent": "b"}"#).unwrap_err();
        assert!(
            matches!(&err, BodyError::DuplicateKey { key, pointer } if key == "agent" && pointer == "/agent"),
            "{err:?}"
        );
        let err = unique_value(br#"{"input": {"list": [{"x/y": 1, "x/y": 2}]}}"#).unwrap_err();
        assert!(
            matches!(&err, BodyError::DuplicateKey { pointer, .. } if pointer == "/input/list/0/x~1y"),
            "{err:?}"
        );
        assert!(err.to_string().contains("`x/y` twice"), "{err}");
        // The same key in two objects is no duplicate.
        assert!(unique_value(br#"[{"a": 1}, {"a": 2}]"#).is_ok());
    }

    #[test]
    fn broken_json_and_trailing_bytes_are_syntax_errors() {
        for text in [&b"{"[..], b"{\"a\": 1} x", b"", b"[1,]"] {
            let err = unique_value(text).unwrap_err();
            assert!(matches!(err, BodyError::Syntax(_)), "{err:?}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "[".repeat(100_000);
        assert!(matches!(
            unique_value(deep.as_bytes()).unwrap_err(),
            BodyError::Syntax(_)
        ));
    }

    #[test]
    fn a_long_key_is_cut_in_the_error() {
        let key = "k".repeat(5000);
        let err = unique_value(format!(r#"{{"{key}": 1, "{key}": 2}}"#).as_bytes()).unwrap_err();
        assert!(err.to_string().len() < 300, "{err}");
    }
}
