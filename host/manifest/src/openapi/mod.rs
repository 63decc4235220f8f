//! A customer API's OpenAPI 3.0 or 3.1 document read as operations hane
//! can offer an agent as tools: each with one input schema (a field per
//! parameter, and `body`), an output schema, and the exact HTTP request a
//! tool input becomes.
//!
//! Only what a tool needs is kept. Local `$ref`s are inlined, capped in
//! size and depth so that a small document of nested references cannot
//! blow up memory; 3.0's `nullable` becomes a 3.1 type array; keywords
//! that are OpenAPI's rather than JSON Schema's are dropped. A malformed
//! operation refuses the whole document. A well-formed one that hane
//! cannot call (a body that is not JSON, a required cookie) is listed in
//! [`ApiDocument::unusable`] with the reason instead: a connection allows
//! only some of an API's operations, and only those must be usable.
//!
//! # Examples
//!
//! ```
//! use hane_manifest::openapi::ApiDocument;
//! use serde_json::json;
//!
//! let document = ApiDocument::parse("garage.yaml", r#"
//! openapi: 3.1.0
//! info: {title: Garage, version: "1"}
//! paths:
//!   /vehicles/{registration}:
//!     get:
//!       operationId: get_vehicle
//!       parameters:
//!         - {name: registration, in: path, required: true, schema: {type: string}}
//!       responses:
//!         "200": {description: The vehicle}
//! "#).unwrap();
//! let operation = document.find("GET /vehicles/{registration}").unwrap();
//! assert_eq!(operation.name(), "get_vehicle");
//! let request = operation.request(&json!({"registration": "AB 12/3"})).unwrap();
//! assert_eq!(request.path_and_query, "/vehicles/AB%2012%2F3");
//! ```

use std::collections::HashMap;
use std::fmt::{self, Write as _};

use serde_json::{Map, Value, json};

/// The most bytes an OpenAPI document may hold (4 MiB).
pub const MAX_OPENAPI_BYTES: u64 = 4 << 20;

/// The most bytes of JSON one schema (of a parameter, a request body or a
/// response) may become once its `$ref`s are inlined (256 KiB): inlining
/// can grow a schema exponentially, and tool schemas go to a model.
pub const MAX_RESOLVED_SCHEMA_BYTES: u64 = 256 << 10;

/// The most bytes of JSON all the schemas of one document together may
/// become once their `$ref`s are inlined (16 MiB), so that many operations
/// sharing a large schema cannot multiply it past what memory holds.
pub const MAX_RESOLVED_DOCUMENT_BYTES: u64 = 16 << 20;

/// The deepest a schema may nest, counting each inlined `$ref` as a level,
/// so that resolving never exhausts the stack.
pub const MAX_SCHEMA_DEPTH: usize = 128;

/// The OpenAPI methods, as the keys of a path item and as sent.
const METHODS: [(&str, &str); 8] = [
    ("get", "GET"),
    ("put", "PUT"),
    ("post", "POST"),
    ("delete", "DELETE"),
    ("options", "OPTIONS"),
    ("head", "HEAD"),
    ("patch", "PATCH"),
    ("trace", "TRACE"),
];

/// A checked OpenAPI document: its operations hane can call, and those it
/// cannot with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiDocument {
    /// The OpenAPI version the document declares, such as `3.1.0`.
    pub openapi: String,
    /// `info.title`.
    pub title: String,
    /// `info.version`: the API's version, not OpenAPI's.
    pub version: String,
    /// The operations hane can call, by path (in byte order) and then by
    /// method in OpenAPI's order (get, put, post, delete, options, head,
    /// patch).
    pub operations: Vec<ApiOperation>,
    /// Well-formed operations hane cannot call, in the same order: among
    /// them those whose schemas refer to another document or to themselves
    /// (a recursive schema cannot be inlined into a tool's).
    pub unusable: Vec<ApiUnusable>,
}

/// An operation of the document that is well formed but that hane cannot
/// call; refused only if a connection allows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiUnusable {
    /// `operationId`, when the document gives one.
    pub operation_id: Option<String>,
    /// The method, upper case.
    pub method: String,
    /// The path template, as in the document.
    pub path: String,
    /// Why hane cannot call it.
    pub reason: String,
}

/// One operation of an API, ready to be offered as a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiOperation {
    /// `operationId`, when the document gives one.
    pub operation_id: Option<String>,
    /// The method, upper case: GET, POST, PUT, PATCH, DELETE, HEAD or
    /// OPTIONS.
    pub method: String,
    /// The path template, such as `/vehicles/{registration}/services`.
    pub path: String,
    /// The operation's `summary`.
    pub summary: Option<String>,
    /// The operation's `description`.
    pub description: Option<String>,
    /// The path, query and header parameters: those of the path item then
    /// the operation's own (an operation's parameter replaces the path
    /// item's of the same name and location, in its place).
    pub parameters: Vec<ApiParameter>,
    /// The `application/json` request body, if any.
    pub body: Option<ApiBody>,
    /// The JSON Schema of the tool's input: an object with one property per
    /// parameter, under its own name, and the request body as `body`; no
    /// other properties.
    pub input_schema: Value,
    /// The schema of the lowest 2xx response with JSON content, resolved;
    /// `None` when that response gives no schema or no 2xx response is
    /// JSON.
    pub output_schema: Option<Value>,
    /// The lowest 2xx status the document declares (a `2XX` range counts
    /// for none).
    pub success_status: Option<u16>,
}

/// One parameter of an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiParameter {
    /// The parameter's name, which is also its field in the tool input.
    pub name: String,
    /// Where the request carries it.
    pub location: ApiParameterLocation,
    /// Whether the request must carry it (always true in the path).
    pub required: bool,
    /// Its JSON Schema, `$ref`s inlined; `{}` when the document gives none.
    pub schema: Value,
    /// The parameter's `description`.
    pub description: Option<String>,
    /// For a query array: true sends each item as its own `name=item`,
    /// false sends `name=a,b`. Path and header arrays are always joined
    /// with commas.
    pub explode: bool,
}

/// Where a request carries a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiParameterLocation {
    /// Substituted into the path template.
    Path,
    /// Appended to the query string.
    Query,
    /// Sent as a header.
    Header,
}

impl ApiParameterLocation {
    /// The name OpenAPI's `in` gives it: `path`, `query` or `header`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiParameterLocation::Path => "path",
            ApiParameterLocation::Query => "query",
            ApiParameterLocation::Header => "header",
        }
    }
}

impl fmt::Display for ApiParameterLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operation's JSON request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiBody {
    /// Whether the request must carry it.
    pub required: bool,
    /// The JSON media type the body is sent as: `application/json`, or an
    /// `application/*+json` type when the document offers only that.
    pub media_type: String,
    /// Its JSON Schema, `$ref`s inlined; `{}` when the document gives none.
    pub schema: Value,
    /// The request body's `description`.
    pub description: Option<String>,
}

/// The HTTP request one tool input becomes, relative to the API's base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRequest {
    /// The method, upper case.
    pub method: String,
    /// The path with its parameters substituted and the query string, if
    /// any, all percent-encoded.
    pub path_and_query: String,
    /// The header parameters in the document's order, then `content-type`
    /// when there is a body.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Option<Value>,
}

/// An OpenAPI document that could not be read or is not valid. Displays
/// as `FILE: operation `NAME` at POINTER: MESSAGE`, leaving out the
/// operation or the pointer when there is none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {}{message}", place(.operation.as_deref(), .pointer))]
pub struct OpenApiError {
    /// The file (or other source name) the document came from.
    pub file: String,
    /// The name of the operation at fault, when the fault is in one.
    pub operation: Option<String>,
    /// An RFC 6901 JSON Pointer into the document, such as
    /// `/paths/~1vehicles~1{registration}/get/parameters/0/schema`; empty
    /// for the document itself.
    pub pointer: String,
    /// What was wrong.
    pub message: String,
}

/// The part of an error's display between the file and the message.
fn place(operation: Option<&str>, pointer: &str) -> String {
    match (operation, pointer.is_empty()) {
        (Some(name), false) => format!("operation `{name}` at {pointer}: "),
        (Some(name), true) => format!("operation `{name}`: "),
        (None, false) => format!("at {pointer}: "),
        (None, true) => String::new(),
    }
}

impl ApiDocument {
    /// Parses and checks a document; `file` names it in errors.
    ///
    /// # Errors
    ///
    /// Text over [`MAX_OPENAPI_BYTES`]; text that is neither JSON nor YAML;
    /// a document whose `openapi` is not 3.0.x or 3.1.x (a Swagger 2 one
    /// included); a malformed operation, parameter, request body or
    /// response; a dangling `$ref`; a
    /// schema over [`MAX_RESOLVED_SCHEMA_BYTES`] or [`MAX_SCHEMA_DEPTH`]
    /// once resolved, or all of them over [`MAX_RESOLVED_DOCUMENT_BYTES`];
    /// two operations with one `operationId`; two parameters of an
    /// operation with one name, or one named `body` beside a request body;
    /// a path template whose variables are not its path parameters.
    pub fn parse(file: &str, text: &str) -> Result<ApiDocument, OpenApiError> {
        let error = |operation: Option<String>, fault: Fault| OpenApiError {
            file: file.to_owned(),
            operation,
            pointer: fault.pointer,
            message: fault.message,
        };
        if text.len() as u64 > MAX_OPENAPI_BYTES {
            let message = format!(
                "the document is {} bytes, over the limit of {MAX_OPENAPI_BYTES}",
                text.len()
            );
            return Err(error(None, fault("", message)));
        }
        let root = read_text(text).map_err(|message| error(None, fault("", message)))?;
        Reader::new(&root)
            .document()
            .map_err(|(operation, fault)| error(operation, fault))
    }

    /// The operation a selector names: its `operationId`, or `METHOD /path`
    /// with the path exactly as in the document (the method in any case).
    pub fn find(&self, selector: &str) -> Option<&ApiOperation> {
        let id = self
            .operations
            .iter()
            .find(|op| op.operation_id.as_deref() == Some(selector));
        id.or_else(|| {
            self.operations
                .iter()
                .find(|op| selects_route(selector, &op.method, &op.path))
        })
    }

    /// The unusable operation a selector names, as [`ApiDocument::find`]
    /// reads it, so a caller can say why an allowed operation cannot be
    /// called.
    pub fn find_unusable(&self, selector: &str) -> Option<&ApiUnusable> {
        let id = self
            .unusable
            .iter()
            .find(|op| op.operation_id.as_deref() == Some(selector));
        id.or_else(|| {
            self.unusable
                .iter()
                .find(|op| selects_route(selector, &op.method, &op.path))
        })
    }
}

/// Whether `selector` is `METHOD /path` naming this method and path.
fn selects_route(selector: &str, method: &str, path: &str) -> bool {
    selector
        .split_once(' ')
        .is_some_and(|(m, p)| m.eq_ignore_ascii_case(method) && p == path)
}

/// `operationId`, else `METHOD /path`.
fn operation_name(operation_id: Option<&str>, method: &str, path: &str) -> String {
    match operation_id {
        Some(id) => id.to_owned(),
        None => format!("{method} {path}"),
    }
}

impl ApiUnusable {
    /// `operationId`, else `METHOD /path`.
    pub fn name(&self) -> String {
        operation_name(self.operation_id.as_deref(), &self.method, &self.path)
    }
}

impl ApiOperation {
    /// `operationId`, else `METHOD /path`.
    pub fn name(&self) -> String {
        operation_name(self.operation_id.as_deref(), &self.method, &self.path)
    }

    /// GET or HEAD: by HTTP's definition, nothing changes state.
    pub fn is_read(&self) -> bool {
        self.method == "GET" || self.method == "HEAD"
    }

    /// The exact HTTP request for a tool input that matches
    /// [`ApiOperation::input_schema`]. Path values are percent-encoded
    /// (only RFC 3986's unreserved characters are kept, so a `/` is
    /// encoded too); query parameters follow in the document's order, an
    /// array as repeated keys (or one comma-joined value when `explode` is
    /// false); header parameters become headers; the `body` field becomes
    /// the JSON body. A null field counts as absent.
    ///
    /// # Errors
    ///
    /// The input is not an object or has a field that is not in the input
    /// schema; a required parameter or body is missing; a path value is
    /// empty; a parameter's value is an object, an array of arrays or
    /// objects, or not of a JSON type its schema's `type` allows; a header
    /// value holds a control character. The message names the field.
    pub fn request(&self, input: &Value) -> Result<ApiRequest, String> {
        let Value::Object(fields) = input else {
            return Err(format!(
                "the input must be an object, found {}",
                kind(input)
            ));
        };
        for key in fields.keys() {
            let known = self.parameters.iter().any(|p| &p.name == key)
                || (key == "body" && self.body.is_some());
            if !known {
                return Err(format!("unknown input field `{key}`"));
            }
        }
        let mut path = self.path.clone();
        let mut query = String::new();
        let mut headers = Vec::new();
        for parameter in &self.parameters {
            let value = match fields.get(&parameter.name) {
                None | Some(Value::Null) if parameter.required => {
                    return Err(format!(
                        "missing required {} parameter `{}`",
                        parameter.location, parameter.name
                    ));
                }
                None | Some(Value::Null) => continue,
                Some(value) => value,
            };
            let texts = parameter.texts(value)?;
            match parameter.location {
                ApiParameterLocation::Path => {
                    if texts.is_empty() || texts.iter().any(String::is_empty) {
                        return Err(format!("path parameter `{}` is empty", parameter.name));
                    }
                    let encoded: Vec<String> = texts.iter().map(|t| percent_encode(t)).collect();
                    path = path.replace(&format!("{{{}}}", parameter.name), &encoded.join(","));
                }
                ApiParameterLocation::Query => {
                    let key = percent_encode(&parameter.name);
                    let pairs: Vec<String> = if parameter.explode || texts.len() <= 1 {
                        texts.iter().map(|t| percent_encode(t)).collect()
                    } else {
                        let joined: Vec<String> = texts.iter().map(|t| percent_encode(t)).collect();
                        vec![joined.join(",")]
                    };
                    for value in pairs {
                        query.push(if query.is_empty() { '?' } else { '&' });
                        let _ = write!(query, "{key}={value}");
                    }
                }
                ApiParameterLocation::Header => {
                    let value = texts.join(",");
                    if value
                        .chars()
                        .any(|c| (c < ' ' && c != '\t') || c == '\u{7f}')
                    {
                        return Err(format!(
                            "header parameter `{}` holds a control character",
                            parameter.name
                        ));
                    }
                    headers.push((parameter.name.clone(), value));
                }
            }
        }
        let mut body = None;
        if let Some(declared) = &self.body {
            match fields.get("body") {
                None | Some(Value::Null) if declared.required => {
                    return Err("missing required field `body`".to_owned());
                }
                None | Some(Value::Null) => {}
                Some(value) => {
                    headers.push(("content-type".to_owned(), declared.media_type.clone()));
                    body = Some(value.clone());
                }
            }
        }
        Ok(ApiRequest {
            method: self.method.clone(),
            path_and_query: path + &query,
            headers,
            body,
        })
    }
}

impl ApiParameter {
    /// The texts a value is sent as: one for a scalar, one per item for an
    /// array; refused when of a type the schema does not allow.
    fn texts(&self, value: &Value) -> Result<Vec<String>, String> {
        match value {
            Value::Object(_) => Err(format!(
                "{} parameter `{}` is an object; only strings, numbers, booleans and arrays of them can be sent",
                self.location, self.name
            )),
            Value::Array(items) => {
                self.check_type(&self.schema, value, "")?;
                let item_schema = array_items(&self.schema);
                items
                    .iter()
                    .map(|item| match item {
                        Value::Array(_) | Value::Object(_) | Value::Null => Err(format!(
                            "{} parameter `{}` holds {} in its array; only strings, numbers and booleans can be items",
                            self.location,
                            self.name,
                            kind(item)
                        )),
                        _ => {
                            if let Some(schema) = item_schema {
                                self.check_type(schema, item, "an item of ")?;
                            }
                            Ok(scalar_text(item))
                        }
                    })
                    .collect()
            }
            _ => {
                self.check_type(&self.schema, value, "")?;
                Ok(vec![scalar_text(value)])
            }
        }
    }

    /// Refuses a value whose JSON type the schema's `type` (or the types
    /// of its `anyOf` or `oneOf` branches) does not allow.
    fn check_type(&self, schema: &Value, value: &Value, what: &str) -> Result<(), String> {
        let Some(types) = allowed_types(schema) else {
            return Ok(());
        };
        let fits = types.iter().any(|t| match (*t, value) {
            ("string", Value::String(_)) => true,
            ("boolean", Value::Bool(_)) => true,
            ("number", Value::Number(_)) => true,
            ("integer", Value::Number(n)) => is_integral(n),
            ("array", Value::Array(_)) => true,
            _ => false,
        });
        if fits {
            Ok(())
        } else {
            Err(format!(
                "{what}{} parameter `{}` must be {}, found {}",
                self.location,
                self.name,
                types.join(" or "),
                kind(value)
            ))
        }
    }
}

/// The JSON types a schema's `type` allows, from its `anyOf` or `oneOf`
/// branches when it has none; `None` when anything goes.
fn allowed_types(schema: &Value) -> Option<Vec<&str>> {
    match schema.get("type") {
        Some(Value::String(t)) => return Some(vec![t.as_str()]),
        Some(Value::Array(types)) => return Some(types.iter().filter_map(Value::as_str).collect()),
        _ => {}
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(keyword) {
            let mut union = Vec::new();
            for branch in branches {
                for t in allowed_types(branch)? {
                    if !union.contains(&t) {
                        union.push(t);
                    }
                }
            }
            return Some(union);
        }
    }
    None
}

/// The `items` schema of an array schema, or of its first `anyOf` or
/// `oneOf` branch that has one.
fn array_items(schema: &Value) -> Option<&Value> {
    if let Some(items) = schema.get("items") {
        return Some(items);
    }
    ["anyOf", "oneOf"]
        .iter()
        .filter_map(|keyword| schema.get(keyword)?.as_array())
        .flatten()
        .find_map(array_items)
}

fn is_integral(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// A scalar as a parameter sends it: a string as it is, an integral float
/// without its `.0`.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
                format!("{}", f as i64)
            }
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Decodes `%XX` escapes (a `$ref` is a URI); `None` when the result is not
/// UTF-8 or an escape is broken.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A JSON value's kind, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads JSON, else YAML, into one JSON value.
fn read_text(text: &str) -> Result<Value, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let json_error = if text.trim_start().starts_with('{') {
        match serde_json::from_str(text) {
            Ok(value) => return Ok(value),
            Err(e) => Some(e),
        }
    } else {
        None
    };
    let yaml = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text).and_then(|mut yaml| {
        yaml.apply_merge()?;
        Ok(yaml)
    });
    match (yaml, json_error) {
        (Ok(yaml), _) => yaml_to_json(yaml),
        (Err(_), Some(json)) => Err(format!("neither JSON nor YAML: {json}")),
        (Err(yaml), None) => Err(format!("neither JSON nor YAML: {yaml}")),
    }
}

/// YAML as JSON: scalar keys become strings (`200:` is the status `"200"`),
/// tags are dropped.
fn yaml_to_json(value: serde_yaml_ng::Value) -> Result<Value, String> {
    use serde_yaml_ng::Value as Yaml;
    Ok(match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into()
            } else if let Some(u) = n.as_u64() {
                u.into()
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .ok_or_else(|| format!("the YAML number `{n}` has no JSON equivalent"))?
            }
        }
        Yaml::String(s) => Value::String(s),
        Yaml::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(yaml_to_json)
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Mapping(mapping) => {
            let mut out = Map::new();
            for (key, value) in mapping {
                let key = match key {
                    Yaml::String(s) => s,
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    other => {
                        return Err(format!(
                            "a YAML mapping key must be a scalar, found {other:?}"
                        ));
                    }
                };
                out.insert(key, yaml_to_json(value)?);
            }
            Value::Object(out)
        }
        Yaml::Tagged(tagged) => yaml_to_json(tagged.value)?,
    })
}

/// Where in the document a check failed, and why.
#[derive(Debug)]
struct Fault {
    pointer: String,
    message: String,
    /// The document is sound there, but hane cannot make a tool's schema of
    /// it (a recursive schema, a reference to another document): the
    /// operation is unusable, the rest of the document is not at fault.
    unsupported: bool,
}

fn fault(pointer: impl Into<String>, message: impl Into<String>) -> Fault {
    Fault {
        pointer: pointer.into(),
        message: message.into(),
        unsupported: false,
    }
}

/// A [`Fault`] in a sound document that only makes its operation unusable.
fn unsupported(pointer: impl Into<String>, message: impl Into<String>) -> Fault {
    Fault {
        unsupported: true,
        ..fault(pointer, message)
    }
}

type Checked<T> = Result<T, Fault>;

/// A JSON Pointer one reference token deeper.
fn child(at: &str, token: &str) -> String {
    format!("{at}/{}", token.replace('~', "~0").replace('/', "~1"))
}

fn object<'v>(value: &'v Value, at: &str, what: &str) -> Checked<&'v Map<String, Value>> {
    value.as_object().ok_or_else(|| {
        fault(
            at,
            format!("{what} must be an object, found {}", kind(value)),
        )
    })
}

fn optional_string(map: &Map<String, Value>, key: &str, at: &str) -> Checked<Option<String>> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(fault(
            child(at, key),
            format!("`{key}` must be a string, found {}", kind(other)),
        )),
    }
}

fn optional_bool(map: &Map<String, Value>, key: &str, at: &str) -> Checked<Option<bool>> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(fault(
            child(at, key),
            format!("`{key}` must be true or false, found {}", kind(other)),
        )),
    }
}

/// Whether an `openapi` version is 3.0.x or 3.1.x.
fn supported_version(version: &str) -> bool {
    let mut parts = version.split('.');
    let (Some("3"), Some("0" | "1"), Some(patch), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit())
}

/// The variables of a path template, in order.
fn template_variables(path: &str) -> Result<Vec<String>, String> {
    let mut variables = Vec::new();
    let mut rest = path;
    while let Some(open) = rest.find(['{', '}']) {
        if rest[open..].starts_with('}') {
            return Err(format!(
                "the path template `{path}` has a `}}` without a `{{`"
            ));
        }
        let after = &rest[open + 1..];
        let close = after
            .find(['{', '}'])
            .filter(|&i| after[i..].starts_with('}'))
            .ok_or_else(|| format!("the path template `{path}` has a `{{` without a `}}`"))?;
        let name = &after[..close];
        if name.is_empty() || name.contains('/') {
            return Err(format!(
                "the path template `{path}` has an empty or split variable"
            ));
        }
        variables.push(name.to_owned());
        rest = &after[close + 1..];
    }
    Ok(variables)
}

/// Whether a media type is JSON: `application/json` or
/// `application/*+json`, with any parameters.
fn json_media(content: &Map<String, Value>) -> Option<(&String, &Value)> {
    let essence = |media: &str| {
        media
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    };
    let exact = content
        .iter()
        .find(|(media, _)| essence(media) == "application/json");
    exact.or_else(|| {
        content.iter().find(|(media, _)| {
            let essence = essence(media);
            essence.starts_with("application/") && essence.ends_with("+json")
        })
    })
}

/// Whether a header name is an HTTP token.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Keywords that only describe: with only these beside a `$ref`, they are
/// laid over the target rather than combined with `allOf`.
fn is_annotation(keyword: &str) -> bool {
    matches!(
        keyword,
        "title"
            | "description"
            | "default"
            | "examples"
            | "deprecated"
            | "readOnly"
            | "writeOnly"
            | "$comment"
    )
}

/// Sets a schema's description, as a parameter's or body's own one says.
fn describe(schema: &mut Value, description: &str) {
    match schema {
        Value::Object(map) => {
            map.insert("description".to_owned(), description.into());
        }
        Value::Bool(true) => *schema = json!({ "description": description }),
        _ => {}
    }
}

/// About how many bytes a value takes as JSON.
fn json_size(value: &Value) -> u64 {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() as u64 + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_size(v) + 1).sum::<u64>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() as u64 + 4 + json_size(v))
                .sum::<u64>()
        }
    }
}

mod reader;
#[cfg(test)]
mod tests;

use reader::Reader;
