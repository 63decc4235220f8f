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
        let mut reader = Reader {
            root: &root,
            v30: false,
            total_bytes: 0,
            schema_bytes: 0,
            schema_at: String::new(),
        };
        reader
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

/// The parameters one `parameters` list declares, each with the pointer
/// to where it is declared.
#[derive(Clone, Default)]
struct Declared {
    parameters: Vec<(ApiParameter, String)>,
    unusable: Option<String>,
}

/// One declared parameter, as hane takes it.
enum Declaration {
    /// Sent, unless `unusable` says why it cannot be.
    Kept(ApiParameter, Option<String>),
    /// Left out: a header OpenAPI says to ignore, an optional cookie.
    Ignored,
    /// A required cookie.
    Unusable(String),
}

/// Walks one parsed document.
struct Reader<'a> {
    root: &'a Value,
    /// 3.0: `nullable`, boolean `exclusiveMinimum`, `$ref` siblings ignored.
    v30: bool,
    total_bytes: u64,
    schema_bytes: u64,
    /// Where the schema being resolved starts, to name it when too large.
    schema_at: String,
}

impl<'a> Reader<'a> {
    fn document(&mut self) -> Result<ApiDocument, (Option<String>, Fault)> {
        let top = |fault| (None, fault);
        let root = object(self.root, "", "an OpenAPI document").map_err(top)?;
        let openapi = match root.get("openapi") {
            Some(Value::String(v)) if supported_version(v) => v.clone(),
            Some(Value::String(v)) => {
                let message = format!("OpenAPI {v} is not supported: expected 3.0.x or 3.1.x");
                return Err(top(fault("/openapi", message)));
            }
            Some(other) => {
                let message = format!(
                    "`openapi` must be a version string such as \"3.1.0\", found {}",
                    kind(other)
                );
                return Err(top(fault("/openapi", message)));
            }
            None => {
                let message = match root.get("swagger") {
                    Some(Value::String(v)) => format!(
                        "Swagger {v} (OpenAPI 2) is not supported: expected an OpenAPI 3.0.x or 3.1.x document"
                    ),
                    Some(_) => "Swagger (OpenAPI 2) is not supported: expected an OpenAPI 3.0.x or 3.1.x document".to_owned(),
                    None => {
                        let message = "missing `openapi`: expected an OpenAPI 3.0.x or 3.1.x document";
                        return Err(top(fault("", message)));
                    }
                };
                return Err(top(fault("/swagger", message)));
            }
        };
        self.v30 = openapi.starts_with("3.0.");
        let info = root.get("info").ok_or_else(|| {
            top(fault(
                "",
                "missing `info`, with the API's `title` and `version`",
            ))
        })?;
        let info = object(info, "/info", "`info`").map_err(top)?;
        let title = optional_string(info, "title", "/info")
            .map_err(top)?
            .ok_or_else(|| top(fault("/info", "missing `title`")))?;
        let version = match info.get("version") {
            Some(Value::String(v)) => v.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => {
                let message = format!("`version` must be a string, found {}", kind(other));
                return Err(top(fault("/info/version", message)));
            }
            None => return Err(top(fault("/info", "missing `version`"))),
        };

        let mut document = ApiDocument {
            openapi,
            title,
            version,
            operations: Vec::new(),
            unusable: Vec::new(),
        };
        let paths = match root.get("paths") {
            None => return Ok(document),
            Some(paths) => object(paths, "/paths", "`paths`").map_err(top)?,
        };
        let mut ids: HashMap<&'a str, String> = HashMap::new();
        for (path, item) in paths {
            if path.starts_with("x-") {
                continue;
            }
            let item_at = child("/paths", path);
            if !path.starts_with('/') {
                return Err(top(fault(
                    item_at,
                    format!("the path `{path}` must start with `/`"),
                )));
            }
            let variables = template_variables(path).map_err(|m| top(fault(&item_at, m)))?;
            let (item, item_target, _) = self.deref(item, &item_at).map_err(top)?;
            let item = object(item, &item_target, "a path item").map_err(top)?;
            let shared = self
                .parameter_list(item.get("parameters"), &item_target)
                .map_err(top)?;
            for (key, method) in METHODS {
                let Some(operation) = item.get(key) else {
                    continue;
                };
                let at = child(&item_target, key);
                let operation = object(operation, &at, "an operation").map_err(top)?;
                let operation_id = match operation.get("operationId") {
                    None => None,
                    Some(Value::String(id)) => Some(id.as_str()),
                    Some(other) => {
                        let message =
                            format!("`operationId` must be a string, found {}", kind(other));
                        return Err(top(fault(child(&at, "operationId"), message)));
                    }
                };
                let name = operation_name(operation_id, method, path);
                if let Some(id) = operation_id {
                    if let Some(first) = ids.get(id) {
                        let message = format!("operationId `{id}` is already used at {first}");
                        return Err((Some(name), fault(child(&at, "operationId"), message)));
                    }
                    ids.insert(id, at.clone());
                }
                let unusable = |reason: String| ApiUnusable {
                    operation_id: operation_id.map(str::to_owned),
                    method: method.to_owned(),
                    path: path.clone(),
                    reason,
                };
                if method == "TRACE" {
                    let reason = "TRACE operations are not offered as tools".to_owned();
                    document.unusable.push(unusable(reason));
                    continue;
                }
                let checked =
                    match self.operation(path, &variables, &shared, method, operation, &at) {
                        Ok(checked) => checked,
                        Err(fault) if fault.unsupported => {
                            Err(format!("{} (at {})", fault.message, fault.pointer))
                        }
                        Err(fault) => return Err((Some(name.clone()), fault)),
                    };
                match checked {
                    Ok(mut checked) => {
                        checked.operation_id = operation_id.map(str::to_owned);
                        document.operations.push(checked);
                    }
                    Err(reason) => document.unusable.push(unusable(reason)),
                }
            }
        }
        Ok(document)
    }

    /// One operation, or why hane cannot call it.
    fn operation(
        &mut self,
        path: &str,
        variables: &[String],
        shared: &Declared,
        method: &str,
        operation: &'a Map<String, Value>,
        at: &str,
    ) -> Checked<Result<ApiOperation, String>> {
        let summary = optional_string(operation, "summary", at)?;
        let description = optional_string(operation, "description", at)?;
        let own = self.parameter_list(operation.get("parameters"), at)?;

        let mut merged = shared.parameters.clone();
        for (parameter, declared_at) in own.parameters {
            let same = merged
                .iter_mut()
                .find(|(other, _)| same_parameter(other, &parameter));
            match same {
                Some(slot) => *slot = (parameter, declared_at),
                None => merged.push((parameter, declared_at)),
            }
        }
        let mut unusable = own.unusable.or_else(|| shared.unusable.clone());

        for (i, (parameter, declared_at)) in merged.iter().enumerate() {
            if let Some((other, _)) = merged[..i].iter().find(|(o, _)| o.name == parameter.name) {
                let message = format!(
                    "parameter `{}` is declared both in {} and in {}; a tool input has one field per name",
                    parameter.name, other.location, parameter.location
                );
                return Err(fault(declared_at, message));
            }
        }
        for (parameter, declared_at) in &merged {
            if parameter.location == ApiParameterLocation::Path
                && !variables.contains(&parameter.name)
            {
                let message = format!(
                    "path parameter `{}` is not a variable of the path template `{path}`",
                    parameter.name
                );
                return Err(fault(declared_at, message));
            }
        }
        for variable in variables {
            let declared = merged
                .iter()
                .any(|(p, _)| p.location == ApiParameterLocation::Path && &p.name == variable);
            if !declared {
                let message =
                    format!("the path template variable `{{{variable}}}` has no path parameter");
                return Err(fault(at, message));
            }
        }

        let body = match operation.get("requestBody") {
            None => None,
            Some(body) => match self.body(body, &child(at, "requestBody"))? {
                Ok(body) => Some(body),
                Err(reason) => {
                    unusable.get_or_insert(reason);
                    None
                }
            },
        };
        if operation.contains_key("requestBody")
            && let Some((_, declared_at)) = merged.iter().find(|(p, _)| p.name == "body")
        {
            let message = "parameter `body` clashes with the request body, which the tool input holds in its field `body`";
            return Err(fault(declared_at, message));
        }
        let (success_status, output_schema) = self.responses(operation, at)?;
        if let Some(reason) = unusable {
            return Ok(Err(reason));
        }

        let parameters: Vec<ApiParameter> = merged.into_iter().map(|(p, _)| p).collect();
        let mut properties = Map::new();
        let mut required = Vec::new();
        for parameter in &parameters {
            let mut schema = parameter.schema.clone();
            if let Some(description) = &parameter.description {
                describe(&mut schema, description);
            }
            properties.insert(parameter.name.clone(), schema);
            if parameter.required {
                required.push(Value::String(parameter.name.clone()));
            }
        }
        if let Some(body) = &body {
            let mut schema = body.schema.clone();
            if let Some(description) = &body.description {
                describe(&mut schema, description);
            }
            properties.insert("body".to_owned(), schema);
            if body.required {
                required.push("body".into());
            }
        }
        let input_schema = json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        });
        Ok(Ok(ApiOperation {
            operation_id: None,
            method: method.to_owned(),
            path: path.to_owned(),
            summary,
            description,
            parameters,
            body,
            input_schema,
            output_schema,
            success_status,
        }))
    }

    /// A `parameters` list of a path item or an operation at `at`.
    fn parameter_list(&mut self, list: Option<&'a Value>, at: &str) -> Checked<Declared> {
        let mut declared = Declared::default();
        let Some(list) = list else {
            return Ok(declared);
        };
        let at = child(at, "parameters");
        let Value::Array(list) = list else {
            let message = format!("`parameters` must be an array, found {}", kind(list));
            return Err(fault(at, message));
        };
        for (i, parameter) in list.iter().enumerate() {
            let parameter_at = child(&at, &i.to_string());
            match self.parameter(parameter, &parameter_at)? {
                Declaration::Kept(parameter, reason) => {
                    if declared
                        .parameters
                        .iter()
                        .any(|(p, _)| same_parameter(p, &parameter))
                    {
                        let message = format!(
                            "{} parameter `{}` is declared twice",
                            parameter.location, parameter.name
                        );
                        return Err(fault(parameter_at, message));
                    }
                    if let Some(reason) = reason {
                        declared.unusable.get_or_insert(reason);
                    }
                    declared.parameters.push((parameter, parameter_at));
                }
                Declaration::Ignored => {}
                Declaration::Unusable(reason) => {
                    declared.unusable.get_or_insert(reason);
                }
            }
        }
        Ok(declared)
    }

    /// One parameter object (or a reference to one) at `at`.
    fn parameter(&mut self, value: &'a Value, at: &str) -> Checked<Declaration> {
        let (value, target, described) = self.deref(value, at)?;
        let map = object(value, &target, "a parameter")?;
        let name = match map.get("name") {
            Some(Value::String(name)) if !name.is_empty() => name.clone(),
            _ => {
                return Err(fault(
                    &target,
                    "a parameter needs a `name`, a non-empty string",
                ));
            }
        };
        let required = optional_bool(map, "required", &target)?.unwrap_or(false);
        let location = match map.get("in").and_then(Value::as_str) {
            Some("path") => ApiParameterLocation::Path,
            Some("query") => ApiParameterLocation::Query,
            Some("header") => ApiParameterLocation::Header,
            Some("cookie") if required => {
                let reason =
                    format!("cookie parameter `{name}` is required; hane sends no cookies");
                return Ok(Declaration::Unusable(reason));
            }
            Some("cookie") => return Ok(Declaration::Ignored),
            _ => {
                let message = "a parameter needs `in`: path, query, header or cookie";
                return Err(fault(child(&target, "in"), message));
            }
        };
        if location == ApiParameterLocation::Header {
            // OpenAPI: these are described elsewhere and the parameter "SHALL be ignored".
            let lower = name.to_ascii_lowercase();
            if matches!(lower.as_str(), "accept" | "content-type" | "authorization") {
                return Ok(Declaration::Ignored);
            }
            if !is_header_name(&name) {
                let message = format!("`{name}` is not an HTTP header name");
                return Err(fault(child(&target, "name"), message));
            }
        }
        let description = match described {
            Some(description) => Some(description),
            None => optional_string(map, "description", &target)?,
        };
        let sent_style = match location {
            ApiParameterLocation::Query => "form",
            ApiParameterLocation::Path | ApiParameterLocation::Header => "simple",
        };
        let style = optional_string(map, "style", &target)?;
        let style = style.as_deref().unwrap_or(sent_style);
        let explode = optional_bool(map, "explode", &target)?.unwrap_or(style == "form");
        let mut unusable = None;
        if style != sent_style {
            unusable = Some(format!(
                "{location} parameter `{name}` has style `{style}`; hane sends query parameters in form style and path and header ones in simple style"
            ));
        }
        let schema = match map.get("schema") {
            Some(schema) => self.schema(schema, &child(&target, "schema"))?,
            None => {
                if map.contains_key("content") {
                    unusable.get_or_insert(format!(
                        "{location} parameter `{name}` is described by `content`, which hane does not send"
                    ));
                }
                json!({})
            }
        };
        let parameter = ApiParameter {
            name,
            location,
            required: required || location == ApiParameterLocation::Path,
            schema,
            description,
            explode,
        };
        Ok(Declaration::Kept(parameter, unusable))
    }

    /// A request body object (or a reference to one) at `at`: a JSON one,
    /// or why there is none.
    fn body(&mut self, value: &'a Value, at: &str) -> Checked<Result<ApiBody, String>> {
        let (value, target, described) = self.deref(value, at)?;
        let map = object(value, &target, "a request body")?;
        let content_at = child(&target, "content");
        let content = match map.get("content") {
            Some(content) => object(content, &content_at, "`content`")?,
            None => return Err(fault(target, "a request body needs `content`")),
        };
        let Some((media_type, media)) = json_media(content) else {
            let offered: Vec<String> = content.keys().map(|k| format!("`{k}`")).collect();
            let reason = if offered.is_empty() {
                "the request body declares no media type; hane sends application/json bodies only"
                    .to_owned()
            } else {
                format!(
                    "the request body offers only {}; hane sends application/json bodies only",
                    offered.join(", ")
                )
            };
            return Ok(Err(reason));
        };
        let media_at = child(&content_at, media_type);
        let media_map = object(media, &media_at, "a media type")?;
        let schema = match media_map.get("schema") {
            Some(schema) => self.schema(schema, &child(&media_at, "schema"))?,
            None => json!({}),
        };
        let description = match described {
            Some(description) => Some(description),
            None => optional_string(map, "description", &target)?,
        };
        Ok(Ok(ApiBody {
            required: optional_bool(map, "required", &target)?.unwrap_or(false),
            media_type: media_type.clone(),
            schema,
            description,
        }))
    }

    /// The lowest declared 2xx status, and the schema of the lowest 2xx
    /// response (explicit codes before `2XX`) with JSON content.
    fn responses(
        &mut self,
        operation: &'a Map<String, Value>,
        at: &str,
    ) -> Checked<(Option<u16>, Option<Value>)> {
        let Some(responses) = operation.get("responses") else {
            return Ok((None, None));
        };
        let at = child(at, "responses");
        let responses = object(responses, &at, "`responses`")?;
        let mut successes: Vec<(u16, &String, &'a Value)> = responses
            .iter()
            .filter_map(|(code, response)| {
                let rank = match code.parse::<u16>() {
                    Ok(status @ 200..=299) => status,
                    _ if code.eq_ignore_ascii_case("2XX") => 300,
                    _ => return None,
                };
                Some((rank, code, response))
            })
            .collect();
        successes.sort_by_key(|(rank, _, _)| *rank);
        let success_status = successes
            .first()
            .map(|(rank, _, _)| *rank)
            .filter(|rank| *rank < 300);
        for (_, code, response) in successes {
            let (response, target, _) = self.deref(response, &child(&at, code))?;
            let response = object(response, &target, "a response")?;
            let content_at = child(&target, "content");
            let content = match response.get("content") {
                None => continue,
                Some(content) => object(content, &content_at, "`content`")?,
            };
            let Some((media_type, media)) = json_media(content) else {
                continue;
            };
            let media_at = child(&content_at, media_type);
            let media = object(media, &media_at, "a media type")?;
            let output = match media.get("schema") {
                Some(schema) => Some(self.schema(schema, &child(&media_at, "schema"))?),
                None => None,
            };
            return Ok((success_status, output));
        }
        Ok((success_status, None))
    }

    /// Follows `$ref`s from a non-schema object (a path item, parameter,
    /// request body or response) to what it names: the object, the pointer
    /// to it, and (3.1) the description the outermost reference gives.
    fn deref(&self, value: &'a Value, at: &str) -> Checked<(&'a Value, String, Option<String>)> {
        let mut value = value;
        let mut at = at.to_owned();
        let mut chain = Vec::new();
        let mut description = None;
        while let Some(reference) = value.get("$ref") {
            if !self.v30 && description.is_none() {
                description = value
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            let (target, key) = self.target(reference, &at, &chain)?;
            at = key[1..].to_owned();
            chain.push(key);
            value = target;
        }
        Ok((value, at, description))
    }

    /// What a `$ref` at `at` names, and its key (`#` and the decoded
    /// pointer); refused when external, dangling, or already in `chain`.
    fn target(
        &self,
        reference: &Value,
        at: &str,
        chain: &[String],
    ) -> Checked<(&'a Value, String)> {
        let Value::String(reference) = reference else {
            let message = format!("`$ref` must be a string, found {}", kind(reference));
            return Err(fault(at, message));
        };
        let Some(fragment) = reference.strip_prefix('#') else {
            let message = format!(
                "the external `$ref` `{reference}` is not supported: only references inside the document (`#/...`)"
            );
            return Err(unsupported(at, message));
        };
        let pointer = percent_decode(fragment)
            .filter(|p| p.is_empty() || p.starts_with('/'))
            .ok_or_else(|| {
                fault(
                    at,
                    format!("the `$ref` `{reference}` is not a JSON Pointer (`#/...`)"),
                )
            })?;
        let key = format!("#{pointer}");
        if let Some(start) = chain.iter().position(|k| *k == key) {
            let mut cycle = chain[start..].to_vec();
            cycle.push(key);
            let message = format!("`$ref` cycle: {}", cycle.join(" -> "));
            return Err(unsupported(at, message));
        }
        let target = self.root.pointer(&pointer).ok_or_else(|| {
            fault(
                at,
                format!("the `$ref` target `{reference}` does not exist"),
            )
        })?;
        Ok((target, key))
    }

    /// Counts bytes of resolved schema against both caps.
    fn charge(&mut self, bytes: u64) -> Checked<()> {
        self.schema_bytes += bytes;
        self.total_bytes += bytes;
        if self.schema_bytes > MAX_RESOLVED_SCHEMA_BYTES {
            let message = format!(
                "the schema is over {MAX_RESOLVED_SCHEMA_BYTES} bytes of JSON once its `$ref`s are inlined"
            );
            return Err(fault(&self.schema_at, message));
        }
        if self.total_bytes > MAX_RESOLVED_DOCUMENT_BYTES {
            let message = format!(
                "the document's schemas are over {MAX_RESOLVED_DOCUMENT_BYTES} bytes of JSON once their `$ref`s are inlined"
            );
            return Err(fault(&self.schema_at, message));
        }
        Ok(())
    }

    /// A schema at `at`, resolved into plain JSON Schema.
    fn schema(&mut self, value: &'a Value, at: &str) -> Checked<Value> {
        self.schema_bytes = 0;
        self.schema_at = at.to_owned();
        self.subschema(value, at, &mut Vec::new(), 0)
    }

    fn subschema(
        &mut self,
        value: &'a Value,
        at: &str,
        chain: &mut Vec<String>,
        depth: usize,
    ) -> Checked<Value> {
        if depth > MAX_SCHEMA_DEPTH {
            let message = format!(
                "the schema nests deeper than {MAX_SCHEMA_DEPTH} levels once its `$ref`s are inlined"
            );
            return Err(fault(&self.schema_at, message));
        }
        let map = match value {
            Value::Bool(b) => {
                self.charge(5)?;
                return Ok(Value::Bool(*b));
            }
            Value::Object(map) => map,
            other => {
                let message = format!(
                    "expected a schema (an object or a boolean), found {}",
                    kind(other)
                );
                return Err(fault(at, message));
            }
        };
        let Some(reference) = map.get("$ref") else {
            return self.keywords(map, at, chain, depth).map(Value::Object);
        };
        let (target, key) = self.target(reference, at, chain)?;
        let target_at = key[1..].to_owned();
        chain.push(key);
        let resolved = self.subschema(target, &target_at, chain, depth + 1)?;
        chain.pop();
        if self.v30 {
            // 3.0 ignores a Reference Object's siblings, but a `nullable`
            // beside a `$ref` is too common to read as anything but meant.
            if map.get("nullable") == Some(&Value::Bool(true)) {
                return Ok(json!({ "anyOf": [resolved, { "type": "null" }] }));
            }
            return Ok(resolved);
        }
        if map.len() == 1 {
            return Ok(resolved);
        }
        // 3.1: the keywords beside `$ref` apply as well.
        let siblings = self.keywords(map, at, chain, depth)?;
        match resolved {
            _ if siblings.is_empty() => Ok(resolved),
            Value::Object(mut resolved) if siblings.keys().all(|k| is_annotation(k)) => {
                resolved.extend(siblings);
                Ok(Value::Object(resolved))
            }
            resolved => {
                let mut combined = Map::new();
                combined.insert("allOf".to_owned(), Value::Array(vec![resolved]));
                combined.extend(siblings);
                Ok(Value::Object(combined))
            }
        }
    }

    /// A schema object's keywords but `$ref`, with their subschemas
    /// resolved and OpenAPI's own keywords turned into JSON Schema.
    fn keywords(
        &mut self,
        map: &'a Map<String, Value>,
        at: &str,
        chain: &mut Vec<String>,
        depth: usize,
    ) -> Checked<Map<String, Value>> {
        self.charge(2)?;
        let mut out = Map::new();
        let mut nullable = false;
        for (keyword, value) in map {
            let keyword_at = child(at, keyword);
            let resolved = match keyword.as_str() {
                "$ref" | "discriminator" | "xml" | "externalDocs" | "example" => continue,
                "nullable" if self.v30 => {
                    nullable = value == &Value::Bool(true);
                    continue;
                }
                "examples" if !value.is_array() => continue,
                "properties" | "patternProperties" | "$defs" | "definitions"
                | "dependentSchemas" => {
                    let schemas = object(value, &keyword_at, &format!("`{keyword}`"))?;
                    let mut resolved = Map::new();
                    for (name, schema) in schemas {
                        self.charge(name.len() as u64 + 4)?;
                        let schema_at = child(&keyword_at, name);
                        let schema = self.subschema(schema, &schema_at, chain, depth + 1)?;
                        resolved.insert(name.clone(), schema);
                    }
                    Value::Object(resolved)
                }
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                    let Value::Array(schemas) = value else {
                        let message =
                            format!("`{keyword}` must be an array, found {}", kind(value));
                        return Err(fault(keyword_at, message));
                    };
                    self.schema_array(schemas, &keyword_at, chain, depth)?
                }
                "items" if value.is_array() => {
                    let schemas = value.as_array().map(Vec::as_slice).unwrap_or_default();
                    self.schema_array(schemas, &keyword_at, chain, depth)?
                }
                "items"
                | "additionalProperties"
                | "additionalItems"
                | "not"
                | "contains"
                | "propertyNames"
                | "if"
                | "then"
                | "else"
                | "unevaluatedItems"
                | "unevaluatedProperties"
                | "contentSchema" => self.subschema(value, &keyword_at, chain, depth + 1)?,
                _ => {
                    self.charge(json_size(value))?;
                    value.clone()
                }
            };
            self.charge(keyword.len() as u64 + 4)?;
            out.insert(keyword.clone(), resolved);
        }
        if self.v30 {
            to_31_bounds(&mut out);
            if nullable {
                return Ok(to_31_nullable(out));
            }
        }
        Ok(out)
    }

    fn schema_array(
        &mut self,
        schemas: &'a [Value],
        at: &str,
        chain: &mut Vec<String>,
        depth: usize,
    ) -> Checked<Value> {
        let mut resolved = Vec::with_capacity(schemas.len());
        for (i, schema) in schemas.iter().enumerate() {
            let schema_at = child(at, &i.to_string());
            resolved.push(self.subschema(schema, &schema_at, chain, depth + 1)?);
            self.charge(1)?;
        }
        Ok(Value::Array(resolved))
    }
}

/// Whether two parameters have one name and location (header names in
/// any case).
fn same_parameter(a: &ApiParameter, b: &ApiParameter) -> bool {
    a.location == b.location
        && match a.location {
            ApiParameterLocation::Header => a.name.eq_ignore_ascii_case(&b.name),
            _ => a.name == b.name,
        }
}

/// 3.0's boolean `exclusiveMinimum` and `exclusiveMaximum` as 3.1's numbers.
fn to_31_bounds(schema: &mut Map<String, Value>) {
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        match schema.get(exclusive) {
            Some(Value::Bool(true)) => match schema.remove(bound) {
                Some(limit) => {
                    schema.insert(exclusive.to_owned(), limit);
                }
                None => {
                    schema.remove(exclusive);
                }
            },
            Some(Value::Bool(false)) => {
                schema.remove(exclusive);
            }
            _ => {}
        }
    }
}

/// 3.0's `nullable: true` as 3.1 says it: `null` added to `type` (and to
/// `enum`), or, for a schema without `type`, `anyOf` it or null.
fn to_31_nullable(mut schema: Map<String, Value>) -> Map<String, Value> {
    let null = Value::String("null".to_owned());
    if let Some(Value::Array(values)) = schema.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    let only_annotations = schema.keys().all(|k| is_annotation(k));
    match schema.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            schema.insert("type".to_owned(), json!([t, "null"]));
            schema
        }
        Some(Value::Array(types)) => {
            if !types.contains(&null) {
                types.push(null);
            }
            schema
        }
        _ if only_annotations => schema,
        _ => {
            let mut wrapped = Map::new();
            wrapped.insert(
                "anyOf".to_owned(),
                json!([Value::Object(schema), { "type": "null" }]),
            );
            wrapped
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GARAGE: &str = include_str!("../tests/openapi/garage.json");
    const WORKSHOP: &str = include_str!("../tests/openapi/workshop.yaml");

    fn garage() -> ApiDocument {
        ApiDocument::parse("garage.json", GARAGE).unwrap()
    }

    fn workshop() -> ApiDocument {
        ApiDocument::parse("workshop.yaml", WORKSHOP).unwrap()
    }

    /// The error a document is refused with.
    fn refused(text: &str) -> OpenApiError {
        ApiDocument::parse("api.yaml", text).unwrap_err()
    }

    /// A 3.1 document with the given `paths` and `components`, as YAML.
    fn document(paths: &str, components: &str) -> String {
        format!(
            "openapi: 3.1.0\ninfo: {{title: T, version: '1'}}\npaths:\n{paths}\ncomponents:\n{components}\n"
        )
    }

    fn status_schema() -> Value {
        json!({"type": "string", "enum": ["booked", "done", "cancelled"], "title": "ServiceStatus"})
    }

    fn kind_schema() -> Value {
        json!({"type": "string", "enum": ["inspection", "oil_change", "tyres"], "title": "ServiceKind"})
    }

    fn service_schema() -> Value {
        json!({
            "properties": {
                "id": {"type": "integer", "title": "Id"},
                "kind": kind_schema(),
                "date": {"type": "string", "format": "date", "title": "Date"},
                "notes": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Notes"},
                "status": {
                    "type": "string",
                    "enum": ["booked", "done", "cancelled"],
                    "title": "ServiceStatus",
                    "description": "Where the booking stands"
                }
            },
            "type": "object",
            "required": ["id", "kind", "date", "status"],
            "title": "Service"
        })
    }

    #[test]
    fn fastapi_document_reads_as_its_operations() {
        let garage = garage();
        assert_eq!(garage.openapi, "3.1.0");
        assert_eq!(garage.title, "Garage API");
        assert_eq!(garage.version, "0.4.2");
        let names: Vec<String> = garage.operations.iter().map(ApiOperation::name).collect();
        assert_eq!(
            names,
            [
                "invoice_pdf_invoices__invoice_id__pdf_get",
                "forget_vehicle_vehicles__registration__delete",
                "list_services_vehicles__registration__services_get",
                "book_service_vehicles__registration__services_post",
            ]
        );
        assert_eq!(
            garage.unusable,
            [ApiUnusable {
                operation_id: Some("upload_photo_uploads_photos_post".to_owned()),
                method: "POST".to_owned(),
                path: "/uploads/photos".to_owned(),
                reason: "the request body offers only `multipart/form-data`; hane sends application/json bodies only".to_owned(),
            }]
        );
    }

    #[test]
    fn fastapi_get_has_path_and_query_parameters_in_its_input() {
        let garage = garage();
        let list = garage
            .find("list_services_vehicles__registration__services_get")
            .unwrap();
        assert_eq!(list.method, "GET");
        assert_eq!(list.path, "/vehicles/{registration}/services");
        assert_eq!(list.summary.as_deref(), Some("List Services"));
        assert_eq!(
            list.description.as_deref(),
            Some("The services booked for one vehicle, newest first.")
        );
        assert!(list.is_read());
        assert_eq!(list.body, None);
        assert_eq!(
            list.parameters[0],
            ApiParameter {
                name: "registration".to_owned(),
                location: ApiParameterLocation::Path,
                required: true,
                schema: json!({"type": "string", "title": "Registration"}),
                description: Some("The number plate, as printed".to_owned()),
                explode: false,
            }
        );
        assert_eq!(list.parameters[1].location, ApiParameterLocation::Query);
        assert!(list.parameters[1].explode);
        assert_eq!(
            list.input_schema,
            json!({
                "type": "object",
                "properties": {
                    "registration": {
                        "type": "string",
                        "title": "Registration",
                        "description": "The number plate, as printed"
                    },
                    "limit": {"type": "integer", "maximum": 100, "minimum": 1, "default": 20, "title": "Limit"},
                    "status": {
                        "anyOf": [{"type": "array", "items": status_schema()}, {"type": "null"}],
                        "title": "Status"
                    }
                },
                "required": ["registration"],
                "additionalProperties": false
            })
        );
        assert_eq!(list.success_status, Some(200));
        assert_eq!(
            list.output_schema,
            Some(json!({
                "type": "array",
                "items": service_schema(),
                "title": "Response List Services Vehicles  Registration  Services Get"
            }))
        );
    }

    #[test]
    fn fastapi_post_takes_its_referenced_body_as_the_body_field() {
        let garage = garage();
        let book = garage
            .find("POST /vehicles/{registration}/services")
            .unwrap();
        assert!(!book.is_read());
        let booking = json!({
            "properties": {
                "kind": kind_schema(),
                "date": {"type": "string", "format": "date", "title": "Date"},
                "notes": {"anyOf": [{"type": "string", "maxLength": 500}, {"type": "null"}], "title": "Notes"}
            },
            "type": "object",
            "required": ["kind", "date"],
            "title": "ServiceBooking"
        });
        assert_eq!(
            book.body,
            Some(ApiBody {
                required: true,
                media_type: "application/json".to_owned(),
                schema: booking.clone(),
                description: None,
            })
        );
        assert_eq!(
            book.input_schema,
            json!({
                "type": "object",
                "properties": {
                    "registration": {"type": "string", "title": "Registration"},
                    "x-request-id": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "X-Request-Id"},
                    "body": booking
                },
                "required": ["registration", "body"],
                "additionalProperties": false
            })
        );
        assert_eq!(book.success_status, Some(201));
        assert_eq!(book.output_schema, Some(service_schema()));
    }

    #[test]
    fn responses_without_json_content_give_no_output_schema() {
        let garage = garage();
        let forget = garage
            .find("forget_vehicle_vehicles__registration__delete")
            .unwrap();
        assert_eq!(forget.success_status, Some(204));
        assert_eq!(forget.output_schema, None);
        let pdf = garage
            .find("invoice_pdf_invoices__invoice_id__pdf_get")
            .unwrap();
        assert_eq!(pdf.success_status, Some(200));
        assert_eq!(pdf.output_schema, None);
    }

    #[test]
    fn openapi_30_yaml_becomes_json_schema() {
        let workshop = workshop();
        assert_eq!(workshop.openapi, "3.0.3");
        assert_eq!(workshop.version, "2.1");
        let job = json!({
            "type": "object",
            "required": ["id", "state"],
            "properties": {
                "id": {"type": "integer"},
                "state": {"type": ["string", "null"], "enum": ["open", "closed", null]},
                "mechanic": {
                    "anyOf": [
                        {"allOf": [{"type": "object", "properties": {"name": {"type": "string"}}}]},
                        {"type": "null"}
                    ]
                },
                "supervisor": {
                    "anyOf": [
                        {"type": "object", "properties": {"name": {"type": "string"}}},
                        {"type": "null"}
                    ]
                },
                "nullable": {"type": "string", "description": "A property that happens to be named nullable"}
            }
        });
        let get = workshop.find("getJob").unwrap();
        assert_eq!(
            get.input_schema,
            json!({
                "type": "object",
                "properties": {
                    "job": {"type": "integer", "exclusiveMinimum": 0, "description": "The job number"},
                    "verbose": {"type": "boolean", "default": false, "description": "Include the job's notes"},
                    "fields": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["job"],
                "additionalProperties": false
            })
        );
        let names: Vec<&str> = get.parameters.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["job", "verbose", "fields"]);
        assert_eq!(get.success_status, Some(200));
        assert_eq!(get.output_schema, Some(job.clone()));

        let update = workshop.find("updateJob").unwrap();
        assert_eq!(update.method, "PATCH");
        let names: Vec<&str> = update.parameters.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["job", "verbose"]);
        let change = json!({
            "type": "object",
            "properties": {
                "state": {"type": "string", "enum": ["open", "closed"]},
                "notes": {"type": ["string", "null"], "maxLength": 2000}
            }
        });
        assert_eq!(
            update.body,
            Some(ApiBody {
                required: true,
                media_type: "application/merge-patch+json".to_owned(),
                schema: change,
                description: None,
            })
        );
        assert_eq!(update.output_schema, Some(job.clone()));

        let list = workshop.find("listJobs").unwrap();
        assert_eq!(list.parameters, []);
        assert_eq!(list.success_status, None);
        assert_eq!(
            list.output_schema,
            Some(json!({"type": "array", "items": job}))
        );

        assert_eq!(
            workshop
                .find_unusable("GET /reports")
                .map(|u| u.reason.as_str()),
            Some("cookie parameter `token` is required; hane sends no cookies")
        );
        assert_eq!(workshop.find("report"), None);
    }

    #[test]
    fn ref_siblings_in_31_apply_and_in_30_are_ignored() {
        let paths = "  /a:\n    get:\n      responses:\n        '200':\n          description: A\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/A', description: Why, minProperties: 1}\n";
        let components = "  schemas:\n    A: {type: object, description: What}\n";
        let text = document(paths, components);
        let a = ApiDocument::parse("api.yaml", &text).unwrap();
        assert_eq!(
            a.operations[0].output_schema,
            Some(json!({
                "allOf": [{"type": "object", "description": "What"}],
                "description": "Why",
                "minProperties": 1
            }))
        );
        let annotated = text.replace(", minProperties: 1", "");
        let a = ApiDocument::parse("api.yaml", &annotated).unwrap();
        assert_eq!(
            a.operations[0].output_schema,
            Some(json!({"type": "object", "description": "Why"}))
        );
        let old = text.replace("openapi: 3.1.0", "openapi: 3.0.0");
        let a = ApiDocument::parse("api.yaml", &old).unwrap();
        assert_eq!(
            a.operations[0].output_schema,
            Some(json!({"type": "object", "description": "What"}))
        );
    }

    #[test]
    fn find_takes_an_operation_id_or_method_and_path() {
        let garage = garage();
        let by_id = garage
            .find("forget_vehicle_vehicles__registration__delete")
            .unwrap();
        let by_route = garage.find("delete /vehicles/{registration}").unwrap();
        assert_eq!(by_id, by_route);
        assert_eq!(by_route.path, "/vehicles/{registration}");
        assert_eq!(garage.find("DELETE /vehicles/{registration}/"), None);
        assert_eq!(garage.find("DELETE /vehicles/{id}"), None);
        assert_eq!(garage.find("forget_vehicle"), None);
        assert_eq!(
            garage
                .find_unusable("POST /uploads/photos")
                .map(ApiUnusable::name),
            Some("upload_photo_uploads_photos_post".to_owned())
        );
        let text = document(
            "  /things/{id}:\n    put:\n      parameters: [{name: id, in: path, required: true}]\n      responses: {'200': {description: Done}}\n",
            "  {}",
        );
        let untitled = ApiDocument::parse("api.yaml", &text).unwrap();
        assert_eq!(untitled.operations[0].name(), "PUT /things/{id}");
        assert_eq!(
            untitled.find("Put /things/{id}").map(ApiOperation::name),
            Some("PUT /things/{id}".to_owned())
        );
    }

    #[test]
    fn request_percent_encodes_path_values() {
        let garage = garage();
        let list = garage
            .find("list_services_vehicles__registration__services_get")
            .unwrap();
        let request = list
            .request(&json!({"registration": "品川 300 あ 12-34"}))
            .unwrap();
        assert_eq!(
            request,
            ApiRequest {
                method: "GET".to_owned(),
                path_and_query: "/vehicles/%E5%93%81%E5%B7%9D%20300%20%E3%81%82%2012-34/services"
                    .to_owned(),
                headers: vec![],
                body: None,
            }
        );
        let request = list
            .request(&json!({"registration": "AB/12?x#y~z._"}))
            .unwrap();
        assert_eq!(
            request.path_and_query,
            "/vehicles/AB%2F12%3Fx%23y~z._/services"
        );
        let pdf = garage
            .find("invoice_pdf_invoices__invoice_id__pdf_get")
            .unwrap();
        let request = pdf.request(&json!({"invoice_id": 42})).unwrap();
        assert_eq!(request.path_and_query, "/invoices/42/pdf");
    }

    #[test]
    fn request_repeats_array_query_keys_in_document_order() {
        let garage = garage();
        let list = garage
            .find("list_services_vehicles__registration__services_get")
            .unwrap();
        let request = list
            .request(&json!({
                "status": ["booked", "done"],
                "registration": "AB12",
                "limit": 5
            }))
            .unwrap();
        assert_eq!(
            request.path_and_query,
            "/vehicles/AB12/services?limit=5&status=booked&status=done"
        );
        let request = list
            .request(&json!({"registration": "AB12", "limit": null, "status": null}))
            .unwrap();
        assert_eq!(request.path_and_query, "/vehicles/AB12/services");
        let request = list
            .request(&json!({"registration": "AB12", "limit": 5.0}))
            .unwrap();
        assert_eq!(request.path_and_query, "/vehicles/AB12/services?limit=5");
    }

    #[test]
    fn request_joins_unexploded_query_arrays_with_commas() {
        let workshop = workshop();
        let get = workshop.find("getJob").unwrap();
        let request = get
            .request(&json!({"job": 7, "fields": ["id", "state & notes"], "verbose": true}))
            .unwrap();
        assert_eq!(
            request.path_and_query,
            "/jobs/7?verbose=true&fields=id,state%20%26%20notes"
        );
    }

    #[test]
    fn request_sends_headers_and_the_json_body() {
        let garage = garage();
        let book = garage
            .find("book_service_vehicles__registration__services_post")
            .unwrap();
        let body = json!({"kind": "tyres", "date": "2025-06-02"});
        let request = book
            .request(&json!({"registration": "AB12", "x-request-id": "r-1", "body": body}))
            .unwrap();
        assert_eq!(
            request,
            ApiRequest {
                method: "POST".to_owned(),
                path_and_query: "/vehicles/AB12/services".to_owned(),
                headers: vec![
                    ("x-request-id".to_owned(), "r-1".to_owned()),
                    ("content-type".to_owned(), "application/json".to_owned()),
                ],
                body: Some(body),
            }
        );
        assert_eq!(
            book.request(&json!({"registration": "AB12"})),
            Err("missing required field `body`".to_owned())
        );
        assert_eq!(
            book.request(
                &json!({"registration": "AB12", "x-request-id": "a\r\nX-Admin: 1", "body": {}})
            ),
            Err("header parameter `x-request-id` holds a control character".to_owned())
        );
    }

    #[test]
    fn request_refuses_inputs_that_do_not_fit() {
        let garage = garage();
        let list = garage
            .find("list_services_vehicles__registration__services_get")
            .unwrap();
        let refusal = |input: Value| list.request(&input).unwrap_err();
        assert_eq!(
            refusal(json!({"limit": 5})),
            "missing required path parameter `registration`"
        );
        assert_eq!(
            refusal(json!({"registration": null})),
            "missing required path parameter `registration`"
        );
        assert_eq!(
            refusal(json!({"registration": ""})),
            "path parameter `registration` is empty"
        );
        assert_eq!(
            refusal(json!({"registration": "AB12", "limit": "5"})),
            "query parameter `limit` must be integer, found a string"
        );
        assert_eq!(
            refusal(json!({"registration": "AB12", "limit": 2.5})),
            "query parameter `limit` must be integer, found a number"
        );
        assert_eq!(
            refusal(json!({"registration": {"plate": "AB12"}})),
            "path parameter `registration` is an object; only strings, numbers, booleans and arrays of them can be sent"
        );
        assert_eq!(
            refusal(json!({"registration": "AB12", "status": "booked"})),
            "query parameter `status` must be array or null, found a string"
        );
        assert_eq!(
            refusal(json!({"registration": "AB12", "status": [7]})),
            "an item of query parameter `status` must be string, found a number"
        );
        assert_eq!(
            refusal(json!({"registration": "AB12", "status": [["booked"]]})),
            "query parameter `status` holds an array in its array; only strings, numbers and booleans can be items"
        );
        assert_eq!(
            refusal(json!({"registration": "AB12", "body": {}})),
            "unknown input field `body`"
        );
        assert_eq!(
            refusal(json!(["AB12"])),
            "the input must be an object, found an array"
        );
    }

    #[test]
    fn not_json_or_yaml_is_refused() {
        let error = refused("{\"openapi\": \"3.1.0\",");
        assert_eq!(error.pointer, "");
        assert_eq!(error.operation, None);
        assert_eq!(
            error.message,
            "neither JSON nor YAML: EOF while parsing a value at line 1 column 20"
        );
        assert_eq!(
            error.to_string(),
            "api.yaml: neither JSON nor YAML: EOF while parsing a value at line 1 column 20"
        );
        let error = refused("openapi: 3.1.0\n  info: [\n");
        assert!(
            error.message.starts_with("neither JSON nor YAML: "),
            "{}",
            error.message
        );
        let error = refused("just some words");
        assert_eq!(
            error.message,
            "an OpenAPI document must be an object, found a string"
        );
    }

    #[test]
    fn oversize_document_is_refused() {
        let padding = " ".repeat(MAX_OPENAPI_BYTES as usize);
        let error = refused(&format!("{{\"openapi\": \"3.1.0\"}}{padding}"));
        assert_eq!(error.pointer, "");
        assert_eq!(
            error.message,
            "the document is 4194324 bytes, over the limit of 4194304"
        );
    }

    #[test]
    fn other_openapi_versions_are_refused() {
        let error = refused("swagger: '2.0'\ninfo: {title: T, version: '1'}\npaths: {}\n");
        assert_eq!(error.pointer, "/swagger");
        assert_eq!(
            error.to_string(),
            "api.yaml: at /swagger: Swagger 2.0 (OpenAPI 2) is not supported: expected an OpenAPI 3.0.x or 3.1.x document"
        );
        let error = refused("openapi: 3.2.0\ninfo: {title: T, version: '1'}\n");
        assert_eq!(error.pointer, "/openapi");
        assert_eq!(
            error.message,
            "OpenAPI 3.2.0 is not supported: expected 3.0.x or 3.1.x"
        );
        let error = refused("openapi: 3.1\ninfo: {title: T, version: '1'}\n");
        assert_eq!(
            error.message,
            "`openapi` must be a version string such as \"3.1.0\", found a number"
        );
        let error = refused("info: {title: T, version: '1'}\n");
        assert_eq!(
            error.message,
            "missing `openapi`: expected an OpenAPI 3.0.x or 3.1.x document"
        );
    }

    /// The reason `document` gives for its unusable operation `name`.
    fn why_unusable(document: &ApiDocument, name: &str) -> String {
        document
            .find_unusable(name)
            .unwrap_or_else(|| panic!("{name} is not unusable: {document:#?}"))
            .reason
            .clone()
    }

    #[test]
    fn a_recursive_schema_makes_its_operation_unusable_naming_the_chain() {
        let paths = "  /nodes:\n    get:\n      operationId: listNodes\n      responses:\n        '200':\n          description: Nodes\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/Node'}\n  /health:\n    get:\n      operationId: health\n      responses: {'200': {description: OK}}\n";
        let components = "  schemas:\n    Node:\n      type: object\n      properties:\n        children:\n          type: array\n          items: {$ref: '#/components/schemas/Node'}\n";
        let read = ApiDocument::parse("api.yaml", &document(paths, components)).unwrap();
        assert_eq!(
            why_unusable(&read, "listNodes"),
            "`$ref` cycle: #/components/schemas/Node -> #/components/schemas/Node (at /components/schemas/Node/properties/children/items)"
        );
        // The document's other operations are not at fault.
        assert!(read.find("health").is_some());
        assert!(read.find("listNodes").is_none());

        let components = "  schemas:\n    Node: {$ref: '#/components/schemas/Tree'}\n    Tree:\n      properties:\n        first: {$ref: '#/components/schemas/Node'}\n";
        let read = ApiDocument::parse("api.yaml", &document(paths, components)).unwrap();
        assert_eq!(
            why_unusable(&read, "GET /nodes"),
            "`$ref` cycle: #/components/schemas/Node -> #/components/schemas/Tree -> #/components/schemas/Node (at /components/schemas/Tree/properties/first)"
        );
    }

    #[test]
    fn missing_ref_target_is_refused() {
        let paths = "  /vehicles/{registration}:\n    get:\n      operationId: getVehicle\n      parameters:\n        - name: registration\n          in: path\n          required: true\n          schema: {$ref: '#/components/schemas/Registration'}\n      responses: {'200': {description: OK}}\n";
        let error = refused(&document(paths, "  schemas: {}"));
        assert_eq!(error.operation.as_deref(), Some("getVehicle"));
        assert_eq!(
            error.pointer,
            "/paths/~1vehicles~1{registration}/get/parameters/0/schema"
        );
        assert_eq!(
            error.message,
            "the `$ref` target `#/components/schemas/Registration` does not exist"
        );
        let error = refused(&document(
            &paths.replace(
                "schema: {$ref: '#/components/schemas/Registration'}",
                "$ref: '#/components/parameters/Plate'",
            ),
            "  schemas: {}",
        ));
        assert_eq!(
            error.pointer,
            "/paths/~1vehicles~1{registration}/get/parameters/0"
        );
        assert_eq!(
            error.message,
            "the `$ref` target `#/components/parameters/Plate` does not exist"
        );
    }

    #[test]
    fn an_external_ref_makes_its_operation_unusable() {
        let paths = "  /vehicles:\n    post:\n      operationId: addVehicle\n      requestBody:\n        content:\n          application/json:\n            schema: {$ref: 'vehicle.yaml#/Vehicle'}\n      responses: {'201': {description: Added}}\n";
        let read = ApiDocument::parse("api.yaml", &document(paths, "  {}")).unwrap();
        assert_eq!(
            why_unusable(&read, "addVehicle"),
            "the external `$ref` `vehicle.yaml#/Vehicle` is not supported: only references inside the document (`#/...`) (at /paths/~1vehicles/post/requestBody/content/application~1json/schema)"
        );
        assert!(read.operations.is_empty());
    }

    #[test]
    fn duplicate_operation_id_is_refused() {
        let paths = "  /a:\n    get:\n      operationId: fetch\n      responses: {'200': {description: A}}\n  /b:\n    get:\n      operationId: fetch\n      responses: {'200': {description: B}}\n";
        let error = refused(&document(paths, "  {}"));
        assert_eq!(error.operation.as_deref(), Some("fetch"));
        assert_eq!(error.pointer, "/paths/~1b/get/operationId");
        assert_eq!(
            error.message,
            "operationId `fetch` is already used at /paths/~1a/get"
        );
    }

    #[test]
    fn parameter_named_body_beside_a_body_is_refused() {
        let paths = "  /notes:\n    post:\n      operationId: addNote\n      parameters:\n        - {name: body, in: query, schema: {type: string}}\n      requestBody:\n        content:\n          application/json:\n            schema: {type: object}\n      responses: {'201': {description: Added}}\n";
        let error = refused(&document(paths, "  {}"));
        assert_eq!(error.pointer, "/paths/~1notes/post/parameters/0");
        assert_eq!(
            error.message,
            "parameter `body` clashes with the request body, which the tool input holds in its field `body`"
        );
        let without_body = paths.replace(
            "      requestBody:\n        content:\n          application/json:\n            schema: {type: object}\n",
            "",
        );
        let notes = ApiDocument::parse("api.yaml", &document(&without_body, "  {}")).unwrap();
        let request = notes.operations[0].request(&json!({"body": "x"})).unwrap();
        assert_eq!(request.path_and_query, "/notes?body=x");
        assert_eq!(request.body, None);
    }

    #[test]
    fn one_name_in_two_locations_is_refused() {
        let paths = "  /items/{id}:\n    parameters:\n      - {name: id, in: path, required: true, schema: {type: string}}\n    get:\n      operationId: getItem\n      parameters:\n        - {name: id, in: header, schema: {type: string}}\n      responses: {'200': {description: OK}}\n";
        let error = refused(&document(paths, "  {}"));
        assert_eq!(error.pointer, "/paths/~1items~1{id}/get/parameters/0");
        assert_eq!(
            error.message,
            "parameter `id` is declared both in path and in header; a tool input has one field per name"
        );
        let twice = paths.replace("in: header", "in: path, required: true");
        let item = ApiDocument::parse("api.yaml", &document(&twice, "  {}")).unwrap();
        assert_eq!(item.operations[0].parameters.len(), 1);
        let same_list = "  /items:\n    get:\n      parameters:\n        - {name: q, in: query}\n        - {name: q, in: query}\n      responses: {'200': {description: OK}}\n";
        let error = refused(&document(same_list, "  {}"));
        assert_eq!(error.operation.as_deref(), Some("GET /items"));
        assert_eq!(error.pointer, "/paths/~1items/get/parameters/1");
        assert_eq!(error.message, "query parameter `q` is declared twice");
    }

    #[test]
    fn path_template_and_path_parameters_must_agree() {
        let paths = "  /items/{id}:\n    get:\n      responses: {'200': {description: OK}}\n";
        let error = refused(&document(paths, "  {}"));
        assert_eq!(error.pointer, "/paths/~1items~1{id}/get");
        assert_eq!(
            error.message,
            "the path template variable `{id}` has no path parameter"
        );
        let paths = "  /items:\n    get:\n      parameters: [{name: id, in: path, required: true}]\n      responses: {'200': {description: OK}}\n";
        let error = refused(&document(paths, "  {}"));
        assert_eq!(error.pointer, "/paths/~1items/get/parameters/0");
        assert_eq!(
            error.message,
            "path parameter `id` is not a variable of the path template `/items`"
        );
        let error = refused(&document("  /items/{id:\n    get: {}\n", "  {}"));
        assert_eq!(error.pointer, "/paths/~1items~1{id");
        assert_eq!(
            error.message,
            "the path template `/items/{id` has a `{` without a `}`"
        );
    }

    #[test]
    fn nested_refs_that_would_blow_up_are_refused() {
        // Each level holds the next twice: 2^40 copies once inlined.
        let mut components = String::from("  schemas:\n");
        for level in 0..40 {
            let next = level + 1;
            components.push_str(&format!(
                "    L{level}:\n      properties:\n        a: {{$ref: '#/components/schemas/L{next}'}}\n        b: {{$ref: '#/components/schemas/L{next}'}}\n"
            ));
        }
        components.push_str("    L40: {type: string}\n");
        let paths = "  /bomb:\n    get:\n      responses:\n        '200':\n          description: Big\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/L0'}\n";
        let error = refused(&document(paths, &components));
        assert_eq!(error.operation.as_deref(), Some("GET /bomb"));
        assert_eq!(
            error.pointer,
            "/paths/~1bomb/get/responses/200/content/application~1json/schema"
        );
        assert_eq!(
            error.message,
            "the schema is over 262144 bytes of JSON once its `$ref`s are inlined"
        );
    }

    #[test]
    fn schemas_nested_too_deep_are_refused() {
        let mut components = String::from("  schemas:\n");
        for level in 0..200 {
            let next = level + 1;
            components.push_str(&format!(
                "    L{level}: {{items: {{$ref: '#/components/schemas/L{next}'}}}}\n"
            ));
        }
        components.push_str("    L200: {type: string}\n");
        let paths = "  /deep:\n    get:\n      responses:\n        '200':\n          description: Deep\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/L0'}\n";
        let error = refused(&document(paths, &components));
        assert_eq!(
            error.message,
            "the schema nests deeper than 128 levels once its `$ref`s are inlined"
        );
    }

    #[test]
    fn malformed_operations_are_refused_but_unsupported_ones_listed() {
        let paths = "  /a:\n    get:\n      parameters:\n        - {name: a, in: query, schema: {type: string, properties: 3}}\n      responses: {}\n";
        let error = refused(&document(paths, "  {}"));
        assert_eq!(
            error.pointer,
            "/paths/~1a/get/parameters/0/schema/properties"
        );
        assert_eq!(
            error.message,
            "`properties` must be an object, found a number"
        );

        let paths = "  /a:\n    get:\n      parameters:\n        - {name: f, in: query, style: deepObject, schema: {type: object}}\n      responses: {}\n    post:\n      requestBody:\n        content: {text/plain: {}, application/xml: {}}\n      responses: {}\n    trace:\n      responses: {}\n";
        let a = ApiDocument::parse("api.yaml", &document(paths, "  {}")).unwrap();
        assert_eq!(a.operations, []);
        let reasons: Vec<(String, &str)> = a
            .unusable
            .iter()
            .map(|u| (u.name(), u.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                (
                    "GET /a".to_owned(),
                    "query parameter `f` has style `deepObject`; hane sends query parameters in form style and path and header ones in simple style"
                ),
                (
                    "POST /a".to_owned(),
                    "the request body offers only `application/xml`, `text/plain`; hane sends application/json bodies only"
                ),
                (
                    "TRACE /a".to_owned(),
                    "TRACE operations are not offered as tools"
                ),
            ]
        );
    }

    #[test]
    fn error_display_leaves_out_what_is_unknown() {
        let error = OpenApiError {
            file: "api.json".to_owned(),
            operation: Some("getVehicle".to_owned()),
            pointer: "/paths/~1vehicles/get".to_owned(),
            message: "broken".to_owned(),
        };
        assert_eq!(
            error.to_string(),
            "api.json: operation `getVehicle` at /paths/~1vehicles/get: broken"
        );
        let error = OpenApiError {
            pointer: String::new(),
            ..error
        };
        assert_eq!(
            error.to_string(),
            "api.json: operation `getVehicle`: broken"
        );
    }
}
