//! The OpenAPI 3.1 document of the API, built from [`ROUTES`] so that the
//! router and the document list the same routes.

use std::sync::LazyLock;

use hane_coordinator::agent::RunStatus;
use serde_json::{Map, Value, json};

use crate::error::ErrorCode;
use crate::routes::{Access, DEFAULT_LIST_LIMIT, Endpoint, MAX_BODY_BYTES, ROUTES, Route};

/// The OpenAPI 3.1 document describing every route, served at
/// `GET /v1/openapi.json`: the request and response schemas, the bearer
/// scheme, and (in each operation's description) the role it needs.
pub fn openapi() -> &'static Value {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(document);
    &DOCUMENT
}

fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn response(name: &str) -> Value {
    json!({ "$ref": format!("#/components/responses/{name}") })
}

fn ok(description: &str, schema_name: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": schema(schema_name) } }
    })
}

fn document() -> Value {
    let mut paths = Map::new();
    for route in &ROUTES {
        let item = paths
            .entry(route.path)
            .or_insert_with(|| Value::Object(Map::new()));
        item[route.method.as_str().to_ascii_lowercase()] = operation(route);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "hane API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": format!(
                "Start agent runs from the active release, follow them, and list the tools they may call. \
                 Every route under /v1/agents needs an API key, sent as `Authorization: Bearer KEY`; \
                 create one with `hane keys create NAME --role ROLE`. A `viewer` key reads, an `operator` \
                 key also starts and cancels runs, an `approver` key reads (approving comes in a later \
                 version). Request bodies are at most {MAX_BODY_BYTES} bytes. Every error is answered \
                 with an `Error` body."
            ),
        },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": components(),
    })
}

fn operation(route: &Route) -> Value {
    let (id, summary, description) = match route.endpoint {
        Endpoint::Health => ("health", "Whether the server is up", ""),
        Endpoint::OpenApi => ("openapi", "This document", ""),
        Endpoint::StartRun => (
            "startRun",
            "Start a run of an agent",
            "Starts a run of `agent` from the active release with `input`, which must be valid \
             against the agent's input schema. The run is `queued` when this answers, unless \
             `wait` is true (in the body or the query), when it answers once the run has ended.",
        ),
        Endpoint::ListRuns => ("listRuns", "List runs, newest first", ""),
        Endpoint::GetRun => ("getRun", "Get a run", ""),
        Endpoint::CancelRun => (
            "cancelRun",
            "Cancel a run",
            "Its next tool call is refused and its running operations are cancelled; it ends \
             `cancelled`. A run that already ended cannot be cancelled (409).",
        ),
        Endpoint::RunTasks => (
            "listRunTasks",
            "List the tasks for people a run created, such as handovers",
            "",
        ),
        Endpoint::ListTools => (
            "listTools",
            "List the tools the active release offers",
            "Every tool an agent of the active release may be allowed, with its input and output \
             schemas. Which of them an agent may call is in its definition's `tools`.",
        ),
    };
    let role = match route.access {
        Access::Public => "Needs no API key.".to_owned(),
        access => format!("Needs {}.", access.needs()),
    };
    let description = if description.is_empty() {
        role
    } else {
        format!("{description}\n\n{role}")
    };
    let mut op = json!({
        "operationId": id,
        "summary": summary,
        "description": description,
    });
    if route.access == Access::Public {
        op["security"] = json!([]);
    }
    let run_id = json!([{ "$ref": "#/components/parameters/RunId" }]);
    let mut responses = json!({});
    match route.endpoint {
        Endpoint::Health => {
            responses["200"] = ok("The server is up", "Health");
        }
        Endpoint::OpenApi => {
            responses["200"] = json!({
                "description": "This document",
                "content": { "application/json": { "schema": { "type": "object" } } }
            });
        }
        Endpoint::StartRun => {
            responses["201"] = ok(
                "The run: `queued`, or ended when `wait` was true",
                "AgentRun",
            );
            responses["201"]["headers"] = json!({
                "Location": {
                    "description": "The run's URL",
                    "schema": { "type": "string" }
                }
            });
            responses["400"] = response("BadRequest");
            responses["404"] = json!({
                "description": "No agent of this name in the active release (`path` is `/agent`)",
                "content": { "application/json": { "schema": schema("Error") } }
            });
            responses["409"] = json!({
                "description": "No release is active",
                "content": { "application/json": { "schema": schema("Error") } }
            });
            responses["413"] = response("PayloadTooLarge");
            responses["415"] = response("UnsupportedMediaType");
            responses["422"] = json!({
                "description": "The body or the input is not valid, or the agent's driver is not \
                                available in this build; `path` points at the field, such as \
                                `/input/vehicle`",
                "content": { "application/json": { "schema": schema("Error") } }
            });
            op["parameters"] = json!([{
                "name": "wait",
                "in": "query",
                "required": false,
                "description": "Answer once the run has ended, as `wait` in the body does",
                "schema": { "type": "boolean", "default": false }
            }]);
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": schema("StartRunRequest") } }
            });
        }
        Endpoint::ListRuns => {
            responses["200"] = ok("The runs", "RunList");
            responses["400"] = response("BadRequest");
            let statuses: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            op["parameters"] = json!([
                {
                    "name": "agent",
                    "in": "query",
                    "required": false,
                    "description": "Only runs of this agent",
                    "schema": { "type": "string" }
                },
                {
                    "name": "status",
                    "in": "query",
                    "required": false,
                    "description": "Only runs with this status",
                    "schema": { "type": "string", "enum": statuses }
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": false,
                    "description": "At most this many runs",
                    "schema": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": hane_store::MAX_RUNS_LISTED,
                        "default": DEFAULT_LIST_LIMIT
                    }
                }
            ]);
        }
        Endpoint::GetRun | Endpoint::CancelRun => {
            responses["200"] = ok("The run", "AgentRun");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            if route.endpoint == Endpoint::CancelRun {
                responses["409"] = json!({
                    "description": "The run already ended",
                    "content": { "application/json": { "schema": schema("Error") } }
                });
            }
            op["parameters"] = run_id;
        }
        Endpoint::RunTasks => {
            responses["200"] = ok("The run's tasks, oldest first", "TaskList");
            responses["400"] = response("BadRequest");
            responses["404"] = response("NotFound");
            op["parameters"] = run_id;
        }
        Endpoint::ListTools => {
            responses["200"] = ok("The tools", "ToolList");
            responses["409"] = json!({
                "description": "No release is active",
                "content": { "application/json": { "schema": schema("Error") } }
            });
        }
    }
    if route.access != Access::Public {
        responses["401"] = response("Unauthorized");
    }
    if route.access == Access::Operate {
        responses["403"] = response("Forbidden");
    }
    if route.path.starts_with("/v1/agents") {
        responses["500"] = response("Internal");
    }
    op["responses"] = responses;
    op
}

fn components() -> Value {
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    let statuses: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
    let error = |description: &str| {
        json!({
            "description": description,
            "content": { "application/json": { "schema": schema("Error") } }
        })
    };
    let id = |prefix: &str| json!({ "type": "string", "pattern": format!("^{prefix}[0-9a-hjkmnp-tv-z]{{26}}$") });
    let millis = json!({
        "type": "integer",
        "minimum": 0,
        "description": "Milliseconds since the Unix epoch"
    });
    json!({
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key from `hane keys create NAME --role ROLE`: `hane_` and 40 hex characters"
            }
        },
        "parameters": {
            "RunId": {
                "name": "id",
                "in": "path",
                "required": true,
                "description": "The run's id",
                "schema": id("run_")
            }
        },
        "responses": {
            "BadRequest": error("The request cannot be read: broken JSON, a malformed id or query parameter"),
            "NotFound": error("No run has this id"),
            "Unauthorized": error("No API key, a malformed Authorization header, or a key that is not known. The answer has a `WWW-Authenticate: Bearer` header"),
            "Forbidden": error("The key's role may not call this route; the message names the role needed"),
            "PayloadTooLarge": error("The body is larger than the server accepts"),
            "UnsupportedMediaType": error("The body is not sent as `application/json`"),
            "Internal": error("The server failed; its log has the details"),
        },
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["error"],
                "additionalProperties": false,
                "properties": {
                    "error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "additionalProperties": false,
                        "properties": {
                            "code": { "type": "string", "enum": codes },
                            "message": { "type": "string" },
                            "path": {
                                "type": "string",
                                "description": "JSON Pointer to the field of the request body the error is about, such as `/input/vehicle`"
                            }
                        }
                    }
                }
            },
            "StartRunRequest": {
                "type": "object",
                "required": ["agent", "input"],
                "additionalProperties": false,
                "properties": {
                    "agent": { "type": "string", "minLength": 1, "description": "The agent's name in the active release" },
                    "input": { "type": "object", "description": "The run's input, valid against the agent's input schema" },
                    "shadow": { "type": "boolean", "default": false, "description": "Skip outbound actions and handovers; only keep a record" },
                    "wait": { "type": "boolean", "default": false, "description": "Answer once the run has ended" }
                }
            },
            "RunStatus": {
                "type": "string",
                "enum": statuses,
                "description": "A run starts `queued` or `running` and ends in one of the others"
            },
            "ToolCallSummary": {
                "type": "object",
                "required": ["tool", "status", "detail", "operation", "durationUs"],
                "additionalProperties": false,
                "properties": {
                    "tool": { "type": "string" },
                    "status": { "type": "string", "enum": ["succeeded", "failed", "rejected", "skipped"] },
                    "detail": { "type": "string" },
                    "operation": { "type": ["string", "null"], "description": "The operation that ran it, for operation-backed tools" },
                    "durationUs": { "type": "integer", "minimum": 0 }
                }
            },
            "AgentRun": {
                "type": "object",
                "required": [
                    "id", "agent", "release", "status", "shadow", "input", "result", "error",
                    "toolCalls", "tokensUsed", "tasks", "session", "createdAtMs", "updatedAtMs"
                ],
                "additionalProperties": false,
                "properties": {
                    "id": id("run_"),
                    "agent": { "type": "string" },
                    "release": { "type": "integer", "minimum": 1, "description": "The release the agent came from" },
                    "status": schema("RunStatus"),
                    "shadow": { "type": "boolean" },
                    "input": { "description": "The input, valid against the agent's input schema" },
                    "result": { "description": "The result given with submit_result, for a succeeded run; null otherwise" },
                    "error": { "type": ["string", "null"], "description": "Why it failed, was cancelled or exceeded a limit" },
                    "toolCalls": { "type": "array", "items": schema("ToolCallSummary") },
                    "tokensUsed": { "type": "integer", "minimum": 0 },
                    "tasks": { "type": "array", "items": id("task_"), "description": "Tasks for people it created" },
                    "session": {
                        "oneOf": [id("ses_"), { "type": "null" }],
                        "description": "The session holding its history"
                    },
                    "createdAtMs": millis,
                    "updatedAtMs": millis
                }
            },
            "RunList": {
                "type": "object",
                "required": ["runs"],
                "additionalProperties": false,
                "properties": { "runs": { "type": "array", "items": schema("AgentRun") } }
            },
            "ToolDefinition": {
                "type": "object",
                "required": ["name", "description", "inputSchema", "outputSchema", "impact", "timeout", "operation", "version"],
                "additionalProperties": false,
                "properties": {
                    "name": { "type": "string", "description": "Such as `data.find_record`" },
                    "description": { "type": "string" },
                    "inputSchema": { "type": "object", "description": "JSON Schema of its input" },
                    "outputSchema": { "type": "object", "description": "JSON Schema of its output" },
                    "impact": { "type": "string", "enum": ["read", "write", "outbound", "control"] },
                    "timeout": { "type": "string", "description": "How long one call may take, such as `5s`" },
                    "operation": { "type": ["string", "null"], "description": "The operation behind it; null for tools the host runs itself" },
                    "version": { "type": ["string", "null"] }
                }
            },
            "ToolList": {
                "type": "object",
                "required": ["tools"],
                "additionalProperties": false,
                "properties": { "tools": { "type": "array", "items": schema("ToolDefinition") } }
            },
            "Task": {
                "type": "object",
                "required": ["id", "run", "kind", "assignment", "title", "details", "createdAtMs"],
                "additionalProperties": false,
                "properties": {
                    "id": id("task_"),
                    "run": id("run_"),
                    "kind": { "type": "string", "enum": ["handover", "task"] },
                    "assignment": { "type": "string", "description": "The group it is assigned to" },
                    "title": { "type": "string" },
                    "details": { "description": "More the agent wrote, or null" },
                    "createdAtMs": millis
                }
            },
            "TaskList": {
                "type": "object",
                "required": ["tasks"],
                "additionalProperties": false,
                "properties": { "tasks": { "type": "array", "items": schema("Task") } }
            },
            "Health": {
                "type": "object",
                "required": ["status"],
                "properties": { "status": { "const": "ok" } }
            }
        }
    })
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
        let mut routed: Vec<String> = ROUTES
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
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
    fn roles_are_documented() {
        let doc = openapi();
        for route in &ROUTES {
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
