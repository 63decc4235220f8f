//! The generic functions behind [`operation!`](crate::operation).

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Error;
use crate::wit;

/// What an operation may do to the world outside its sandbox.
///
/// The host decides from this how a call is approved and whether it may be
/// retried, so claim no less than the operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Impact {
    /// Reads only; safe to run again after a crash.
    Read,
    /// Changes state the host owns.
    Write,
    /// Reaches people or systems outside; always approved, executed once.
    /// Only such an operation may propose actions ([`crate::actions`]).
    Outbound,
}

impl From<Impact> for wit::hane::operation::types::Impact {
    fn from(impact: Impact) -> Self {
        match impact {
            Impact::Read => Self::Read,
            Impact::Write => Self::Write,
            Impact::Outbound => Self::Outbound,
        }
    }
}

/// The JSON Schema (draft 2020-12) of `T`, as compact JSON text.
pub fn input_schema<T: JsonSchema>() -> String {
    schemars::schema_for!(T).as_value().to_string()
}

/// The JSON Schema (draft 2020-12) of `T` as it serializes.
///
/// Output types are described in serialize mode so that, for example, fields
/// with `skip_serializing_if` are not listed as required.
pub fn output_schema<T: JsonSchema>() -> String {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>()
        .as_value()
        .to_string()
}

/// Builds the descriptor of an operation whose run function is `run`.
///
/// `run` is only used for its type: the schemas come from `I` and `O`.
pub fn describe<I, O, E>(
    run: fn(I) -> Result<O, E>,
    name: &str,
    version: &str,
    description: &str,
    impact: Impact,
) -> wit::Descriptor
where
    I: JsonSchema,
    O: JsonSchema,
{
    let _ = run;
    wit::Descriptor {
        name: name.to_owned(),
        version: version.to_owned(),
        description: description.to_owned(),
        input_schema: input_schema::<I>(),
        output_schema: output_schema::<O>(),
        impact: impact.into(),
    }
}

/// Runs `run` on JSON `input` and returns its output as JSON.
///
/// # Errors
///
/// [`Error::InvalidInput`] with serde's message when `input` does not
/// deserialize into `I`; whatever `run` returns, converted; and
/// [`Error::Failed`] if the output cannot be serialized.
pub fn run_json<I, O, E>(input: &str, run: fn(I) -> Result<O, E>) -> Result<String, Error>
where
    I: DeserializeOwned,
    O: Serialize,
    E: Into<Error>,
{
    let input: I = serde_json::from_str(input).map_err(|e| Error::InvalidInput(e.to_string()))?;
    let output = run(input).map_err(Into::into)?;
    serde_json::to_string(&output).map_err(|e| Error::Failed(format!("cannot encode output: {e}")))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::*;

    /// Greets someone.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Greet {
        /// Who to greet.
        name: String,
        /// How many times.
        #[serde(default)]
        times: Option<u32>,
    }

    #[derive(Serialize, JsonSchema)]
    struct Greeting {
        text: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    }

    fn greet(input: Greet) -> Result<Greeting, Error> {
        if input.name.is_empty() {
            return Err(Error::InvalidInput("name is empty".into()));
        }
        let times = input.times.unwrap_or(1) as usize;
        Ok(Greeting {
            text: vec![format!("hello {}", input.name); times].join(" "),
            note: None,
        })
    }

    fn fails_with_str(_: Greet) -> Result<Greeting, &'static str> {
        Err("disk on fire")
    }

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("schema is JSON")
    }

    #[test]
    fn run_json_round_trips() {
        let out = run_json(r#"{"name": "ada", "times": 2}"#, greet).unwrap();
        assert_eq!(parse(&out), json!({"text": "hello ada hello ada"}));
    }

    #[test]
    fn undeserializable_input_is_invalid_input_with_serde_message() {
        let err = run_json(r#"{"times": 2}"#, greet).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput(m) if m.contains("missing field `name`")),
            "{err:?}"
        );
        let err = run_json(r#"{"name": "ada", "extra": 1}"#, greet).unwrap_err();
        assert!(matches!(&err, Error::InvalidInput(m) if m.contains("unknown field `extra`")));
        let err = run_json("not json", greet).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)));
    }

    #[test]
    fn run_errors_pass_through_and_convert() {
        assert_eq!(
            run_json(r#"{"name": ""}"#, greet),
            Err(Error::InvalidInput("name is empty".into()))
        );
        assert_eq!(
            run_json(r#"{"name": "ada"}"#, fails_with_str),
            Err(Error::Failed("disk on fire".into()))
        );
    }

    #[test]
    fn describe_fills_every_field() {
        let d = describe(greet, "demo.greet", "1.2.3", "Greets.", Impact::Outbound);
        assert_eq!(d.name, "demo.greet");
        assert_eq!(d.version, "1.2.3");
        assert_eq!(d.description, "Greets.");
        assert_eq!(d.impact, wit::hane::operation::types::Impact::Outbound);
        assert_eq!(parse(&d.input_schema), parse(&input_schema::<Greet>()));
        assert_eq!(parse(&d.output_schema), parse(&output_schema::<Greeting>()));
    }

    #[test]
    fn input_schema_is_draft_2020_12_with_docs() {
        let schema = parse(&input_schema::<Greet>());
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["description"], "Greets someone.");
        assert_eq!(schema["required"], json!(["name"]));
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["properties"]["name"]["type"], "string");
        assert_eq!(schema["properties"]["name"]["description"], "Who to greet.");
        assert_eq!(schema["properties"]["times"]["minimum"], 0);
    }

    #[test]
    fn output_schema_describes_serialized_form() {
        let schema = parse(&output_schema::<Greeting>());
        assert_eq!(schema["required"], json!(["text"]));
        let props: BTreeMap<String, Value> =
            serde_json::from_value(schema["properties"].clone()).unwrap();
        assert_eq!(props.keys().collect::<Vec<_>>(), ["note", "text"]);
    }

    #[test]
    fn impact_maps_to_wit() {
        use wit::hane::operation::types::Impact as Wit;
        assert_eq!(Wit::from(Impact::Read), Wit::Read);
        assert_eq!(Wit::from(Impact::Write), Wit::Write);
        assert_eq!(Wit::from(Impact::Outbound), Wit::Outbound);
    }
}
