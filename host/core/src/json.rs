//! [`JsonText`]: JSON kept as text in stored items.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A JSON document kept as its text.
///
/// Binary formats (postcard, in the store and on the wire) cannot hold a
/// `serde_json::Value`, which needs a self-describing format; they hold the
/// text. Human-readable formats (`hane session export`) show the document
/// itself, not a string of escaped JSON.
#[derive(Clone, PartialEq, Eq)]
pub struct JsonText(String);

impl JsonText {
    /// Checks that `text` is JSON.
    ///
    /// # Errors
    ///
    /// `text` is not a JSON document.
    pub fn parse(text: impl Into<String>) -> Result<Self, serde_json::Error> {
        let text = text.into();
        serde_json::from_str::<serde::de::IgnoredAny>(&text)?;
        Ok(Self(text))
    }

    /// The text of `value`.
    pub fn from_value(value: &serde_json::Value) -> Self {
        Self(value.to_string())
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The document as a value.
    ///
    /// # Errors
    ///
    /// Never for a value made by [`JsonText::parse`] or read from a store;
    /// the error is kept for text that was damaged after it was written.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            let value = self.to_value().map_err(serde::ser::Error::custom)?;
            value.serialize(s)
        } else {
            s.serialize_str(&self.0)
        }
    }
}

/// Any JSON document: JSON shows the document itself.
impl schemars::JsonSchema for JsonText {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JsonText".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!(true)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let value = serde_json::Value::deserialize(d)?;
            Ok(Self::from_value(&value))
        } else {
            let text = String::deserialize(d)?;
            Self::parse(text).map_err(serde::de::Error::custom)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_forms_keep_the_text_and_readable_forms_show_the_document() {
        let doc = JsonText::parse(r#"{"query":"tyre","limit":3}"#).unwrap();
        let bytes = postcard::to_allocvec(&doc).unwrap();
        assert_eq!(postcard::from_bytes::<JsonText>(&bytes).unwrap(), doc);
        let shown = serde_json::to_string(&vec![doc.clone()]).unwrap();
        let expected = serde_json::json!([{"query": "tyre", "limit": 3}]);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&shown).unwrap(),
            expected
        );
        let back: Vec<JsonText> = serde_json::from_str(&shown).unwrap();
        assert_eq!(back[0].to_value().unwrap(), doc.to_value().unwrap());
    }

    #[test]
    fn text_that_is_not_json_is_refused() {
        assert!(JsonText::parse("{nope").is_err());
        let bytes = postcard::to_allocvec("{nope").unwrap();
        assert!(postcard::from_bytes::<JsonText>(&bytes).is_err());
    }
}
