//! The OpenAPI 3.1 document of the API, built from the routes
//! ([`crate::routes::all`]) that the router is built from: each route's
//! operation, and the schemas derived from the types its handlers
//! (de)serialize.

use std::sync::LazyLock;

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::error::ErrorBody;
use crate::mcp::{MAX_MCP_MESSAGE_BYTES, MCP_PATH, MCP_RELEASE_PATH};
use crate::route::{Access, Reply, Route, Shape};
use crate::routes::MAX_BODY_BYTES;

mod schemas;

use schemas::components;

/// The OpenAPI 3.1 document describing every route, served at
/// `GET /v1/openapi.json`: the request and response schemas, the bearer
/// scheme, and (in each operation's description) the role it needs.
pub fn openapi() -> &'static Value {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(document);
    &DOCUMENT
}

fn response(name: &str) -> Value {
    json!({ "$ref": format!("#/components/responses/{name}") })
}

/// The generators of the document's derived schemas: JSON Schema
/// 2020-12, as OpenAPI 3.1 takes it, each type's definition under
/// `components/schemas` (where its references point). A request body's
/// schema says what the server accepts (a field with a default may be
/// left out); an answer's says what it sends (such a field is always
/// there).
struct Generators {
    requests: SchemaGenerator,
    answers: SchemaGenerator,
}

impl Generators {
    fn new() -> Self {
        let settings = SchemaSettings::draft2020_12().with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        });
        Generators {
            requests: settings.clone().for_deserialize().into_generator(),
            answers: settings.for_serialize().into_generator(),
        }
    }

    /// Every definition, put among the hand-written `schemas`.
    fn define(mut self, schemas: &mut Map<String, Value>) {
        let requests = self.requests.take_definitions(true);
        let answers = self.answers.take_definitions(true);
        for (name, schema) in requests.into_iter().chain(answers) {
            // A name is one type's: a schema of the same name written by
            // hand, or read differently than sent, would be another.
            if let Some(other) = schemas.insert(name.clone(), schema.clone()) {
                assert_eq!(
                    other, schema,
                    "schema `{name}` has two definitions: derived and written by hand, or as \
                     accepted and as sent"
                );
            }
        }
    }
}

fn document() -> Value {
    let mut generators = Generators::new();
    let mut paths = Map::new();
    for route in crate::routes::all() {
        let item = paths
            .entry(route.path)
            .or_insert_with(|| Value::Object(Map::new()));
        item[route.method.as_str().to_ascii_lowercase()] = operation(&route, &mut generators);
    }
    mcp_paths(&mut paths);
    let mut components = components(&mut generators.answers);
    generators.define(
        components["schemas"]
            .as_object_mut()
            .expect("the components have schemas"),
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "hane API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": format!(
                "Start agent runs from the active release, follow them, list the tools they may call, \
                 and decide the outbound actions (emails, text messages, calls, customer API calls) \
                 they propose. Every route under /v1/agents needs an API key, sent as \
                 `Authorization: Bearer KEY`; create one with `hane keys create NAME --role ROLE`. \
                 A `viewer` key reads; an `approver` key also approves, rejects and reconciles \
                 outbound actions; an `operator` key does all that, starts and cancels runs and sets \
                 decider overrides. An approver or operator key made with `--group` decides only the \
                 actions assigned to its groups (403 for others). Request bodies are at most {MAX_BODY_BYTES} bytes. Every error is \
                 answered with an `Error` body."
            ),
        },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": components,
    })
}

/// The schema of every error answer, [`ErrorBody`].
pub(crate) fn error_schema(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<ErrorBody>().to_value()
}

/// A shape as a schema of the document.
fn shape_schema(shape: &Shape, generator: &mut SchemaGenerator) -> Value {
    match shape {
        Shape::Of(derive) => derive(generator).to_value(),
        Shape::Inline(schema) => schema.clone(),
    }
}

fn reply(reply: &Reply, generator: &mut SchemaGenerator) -> Value {
    match reply {
        Reply::Json {
            description,
            shape,
            headers,
        } => {
            let mut out = json!({
                "description": description,
                "content": { "application/json": { "schema": shape_schema(shape, generator) } }
            });
            for (name, description) in headers {
                out["headers"][*name] = json!({
                    "description": description,
                    "schema": { "type": "string" }
                });
            }
            out
        }
        Reply::Error(description) => json!({
            "description": description,
            "content": { "application/json": { "schema": error_schema(generator) } }
        }),
        Reply::Common(name) => response(name),
        Reply::Raw(value) => value.clone(),
    }
}

/// What a route needs, in words, after its description.
fn role(access: Access) -> String {
    match access {
        Access::Public => "Needs no API key.".to_owned(),
        Access::RunToken => format!(
            "Needs {}. Requests and answers (JSON, or Server-Sent Events with `stream: true`) are in the provider's own format; so are errors. Bodies are at most {} bytes.",
            access.needs(),
            crate::MAX_MODEL_BODY_BYTES
        ),
        access => format!("Needs {}.", access.needs()),
    }
}

fn operation(route: &Route, generators: &mut Generators) -> Value {
    let doc = &route.doc;
    let role = role(route.access);
    let description = if doc.description.is_empty() {
        role
    } else {
        format!("{}\n\n{role}", doc.description)
    };
    let mut op = json!({
        "operationId": doc.id,
        "summary": doc.summary,
        "description": description,
    });
    match route.access {
        Access::Public => op["security"] = json!([]),
        Access::RunToken => op["security"] = json!([{ "runToken": [] }, { "runTokenKey": [] }]),
        _ => {}
    }
    if !doc.parameters.is_empty() {
        op["parameters"] = Value::Array(doc.parameters.clone());
    }
    if let Some(body) = &doc.body {
        op["requestBody"] = json!({
            "required": true,
            "content": { "application/json": { "schema": shape_schema(body, &mut generators.requests) } }
        });
    }
    let mut responses = Map::new();
    for (status, answer) in &doc.replies {
        let previous = responses.insert(status.to_string(), reply(answer, &mut generators.answers));
        assert!(
            previous.is_none(),
            "`{} {}` declares answer {status} twice",
            route.method,
            route.path
        );
    }
    let mut responses = Value::Object(responses);
    common_refusals(route, &mut responses);
    op["responses"] = responses;
    op
}

/// The refusals that follow from where a route is and who may call it:
/// no key (`401`), a key whose role may not (`403`), a failure of the
/// server (`500`), a body too slow to arrive (`408`), and those of the
/// connection.
fn common_refusals(route: &Route, responses: &mut Value) {
    if route.access != Access::Public && responses.get("401").is_none() {
        responses["401"] = response("Unauthorized");
    }
    if matches!(route.access, Access::Approve | Access::Operate) {
        responses["403"] = response("Forbidden");
    }
    if route.path.starts_with("/v1/agents") {
        responses["500"] = response("Internal");
    }
    if responses.get("413").is_some() {
        responses["408"] = response("RequestTimeout");
    }
    connection_refusals(responses);
}

/// The answers any request may get before its route reads it, all in the
/// error envelope: a head hyper cannot parse (`400`), a target or a head
/// over the caps (`414`, `431`), and a connection over the cap (`503`).
fn connection_refusals(responses: &mut Value) {
    for (status, name) in [
        ("400", "BadRequest"),
        ("414", "UriTooLong"),
        ("431", "HeadersTooLarge"),
        ("503", "Unavailable"),
    ] {
        if responses.get(status).is_none() {
            responses[status] = response(name);
        }
    }
}

/// The MCP endpoints, which `crate::mcp` routes apart from the others:
/// JSON-RPC over MCP's Streamable HTTP, stateless.
fn mcp_paths(paths: &mut Map<String, Value>) {
    let jsonrpc_error = |description: &str| {
        json!({
            "description": description,
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/JsonRpcMessage" } } }
        })
    };
    let endpoints = [
        (
            MCP_PATH,
            "mcpRun",
            "A run's tools over MCP",
            "`tools/list` offers exactly the run's tools (its agent's `tools` and \
             `submit_result`, `.` in a name written `-`) with their input and output schemas; \
             every `tools/call` goes through the Tool Gateway as any driver's call, recorded in \
             the run. A call the gateway refuses, or that fails, is a result with `isError`. An \
             outbound tool's call is answered after a bounded wait with its action's state when \
             no decision came.",
            "Needs a run's token (`Authorization: Bearer TOKEN`), not an API key.".to_owned(),
            json!([{ "runToken": [] }]),
            None,
        ),
        (
            MCP_RELEASE_PATH,
            "mcpRelease",
            "The active release's operations over MCP",
            "`tools/list` offers the active release's operations; each `tools/call` runs one in \
             the sandbox under its policy, its receipt in the result's `_meta` as \
             `hane/receipt`.",
            format!("Needs {}.", Access::Operate.needs()),
            json!([{ "bearer": [] }]),
            Some("The API key does not have the operator role"),
        ),
    ];
    for (path, id, summary, description, needs, security, forbidden) in endpoints {
        let mut responses = json!({
            "200": {
                "description": "The JSON-RPC response, as JSON or as a stream of Server-Sent \
                                Events ending with it",
                "content": {
                    "application/json": { "schema": { "$ref": "#/components/schemas/JsonRpcMessage" } },
                    "text/event-stream": { "schema": { "type": "string" } }
                }
            },
            "202": { "description": "A notification or a response, accepted" },
            "400": jsonrpc_error("Not JSON, a batch, not JSON-RPC 2.0, or params that cannot be read"),
            "401": jsonrpc_error("No credential, or one that is malformed, forged, expired or unknown (JSON-RPC code -32001)"),
            "406": { "description": "`Accept` does not take both `application/json` and `text/event-stream`" },
            "413": jsonrpc_error(&format!("The message is over {MAX_MCP_MESSAGE_BYTES} bytes")),
            "415": { "description": "The body is not `application/json`" }
        });
        if let Some(forbidden) = forbidden {
            responses["403"] = jsonrpc_error(forbidden);
        }
        responses["408"] = response("RequestTimeout");
        connection_refusals(&mut responses);
        let post = json!({
            "operationId": id,
            "summary": summary,
            "description": format!(
                "One JSON-RPC 2.0 message of the Model Context Protocol (Streamable HTTP, \
                 stateless: no `initialize` is needed before a call, and no session id is given \
                 or read). {description}\n\n{needs}"
            ),
            "security": security,
            "parameters": [{
                "name": "mcp-protocol-version",
                "in": "header",
                "required": false,
                "description": "The MCP version the client speaks, such as `2025-11-25`",
                "schema": { "type": "string" }
            }],
            "requestBody": {
                "required": true,
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/JsonRpcMessage" } } }
            },
            "responses": responses,
        });
        let delete = json!({
            "operationId": format!("{id}End"),
            "summary": "End an MCP session: there are none, so there is nothing to end",
            "description": &needs,
            "security": security,
            "responses": {
                "204": { "description": "Nothing to end" },
                "401": jsonrpc_error("No credential, or one that is refused")
            }
        });
        paths.insert(path.to_owned(), json!({ "post": post, "delete": delete }));
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_lists_exactly_the_routes() {
        let doc = openapi();
        let mut documented: Vec<String> = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("a path item").keys() {
                documented.push(format!("{} {path}", method.to_ascii_uppercase()));
            }
        }
        let mut routed: Vec<String> = crate::routes::all()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        // The MCP endpoints' methods besides GET, which is refused (405).
        for path in [MCP_PATH, MCP_RELEASE_PATH] {
            routed.extend(["POST", "DELETE"].map(|m| format!("{m} {path}")));
        }
        documented.sort();
        routed.sort();
        assert_eq!(documented, routed);
    }

    #[test]
    fn every_reference_resolves() {
        fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(r)) = map.get("$ref") {
                        out.push(r);
                    }
                    map.values().for_each(|v| refs(v, out));
                }
                Value::Array(list) => list.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let doc = openapi();
        let mut found = Vec::new();
        refs(doc, &mut found);
        assert!(!found.is_empty());
        for r in found {
            let pointer = r.strip_prefix('#').expect("a local reference");
            assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
        }
    }

    #[test]
    fn the_action_list_cap_is_documented() {
        let op = &openapi()["paths"]["/v1/agents/action-requests"]["get"];
        let description = op["description"].as_str().expect("a description");
        assert!(
            description.contains(&format!(
                "At most {}",
                hane_store::registry::MAX_ACTIONS_LISTED
            )),
            "{description}"
        );
    }

    #[test]
    fn the_mcp_endpoints_are_documented_with_their_credentials() {
        let doc = openapi();
        let run = &doc["paths"][MCP_PATH]["post"];
        assert_eq!(run["security"], json!([{ "runToken": [] }]));
        assert!(
            run["description"]
                .as_str()
                .unwrap()
                .contains("a run's token")
        );
        assert!(run["responses"]["403"].is_null());
        let release = &doc["paths"][MCP_RELEASE_PATH]["post"];
        assert_eq!(release["security"], json!([{ "bearer": [] }]));
        assert!(
            release["description"]
                .as_str()
                .unwrap()
                .contains(Access::Operate.needs())
        );
        for op in [run, release] {
            let body = &op["requestBody"]["content"]["application/json"]["schema"]["$ref"];
            assert_eq!(body, "#/components/schemas/JsonRpcMessage");
            for status in ["200", "400", "401", "406", "413", "415"] {
                assert!(op["responses"][status].is_object(), "{status}: {op:#}");
            }
            assert!(
                op["responses"]["413"]["description"]
                    .as_str()
                    .unwrap()
                    .contains(&MAX_MCP_MESSAGE_BYTES.to_string())
            );
        }
        for path in [MCP_PATH, MCP_RELEASE_PATH] {
            assert!(doc["paths"][path]["delete"]["responses"]["204"].is_object());
            assert!(doc["paths"][path]["get"].is_null());
        }
    }

    #[test]
    fn roles_are_documented() {
        let doc = openapi();
        for route in crate::routes::all() {
            let op = &doc["paths"][route.path][route.method.as_str().to_ascii_lowercase()];
            let description = op["description"].as_str().expect("a description");
            assert!(
                description.contains(route.access.needs()),
                "{} {}: {description}",
                route.method,
                route.path
            );
            assert_eq!(
                op.get("security") == Some(&json!([])),
                route.access == Access::Public,
                "{} {}",
                route.method,
                route.path
            );
        }
    }
}
