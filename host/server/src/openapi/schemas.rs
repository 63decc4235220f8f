//! The components of the OpenAPI document: the schemas of requests,
//! answers and errors, and the bearer scheme.

use schemars::SchemaGenerator;
use serde_json::{Map, Value, json};

use super::{error_schema, schema};

/// The `skipped` of a listing: how many stored items it left out.
fn skipped() -> Value {
    json!({
        "type": "integer",
        "minimum": 0,
        "description": "How many stored items were left out because they do not read (damaged, or written by a newer hane); the server logs each with its id, and `hane store check` lists them"
    })
}

pub(super) fn components(answers: &mut SchemaGenerator) -> Value {
    let id = |prefix: &str| json!({ "type": "string", "pattern": format!("^{prefix}[0-9a-hjkmnp-tv-z]{{26}}$") });
    let millis = json!({
        "type": "integer",
        "minimum": 0,
        "description": "Milliseconds since the Unix epoch"
    });
    let mut components = json!({
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key from `hane keys create NAME --role ROLE`: `hane_` and 40 hex characters"
            },
            "runToken": {
                "type": "http",
                "scheme": "bearer",
                "description": "A run's token, which hane gives the driver of an attached run"
            },
            "runTokenKey": {
                "type": "apiKey",
                "in": "header",
                "name": "x-api-key",
                "description": "A run's token, as Anthropic clients send a key"
            }
        },
        "parameters": parameters(id),
        "responses": responses(answers),
        "schemas": {
            "JsonRpcMessage": {
                "type": "object",
                "description": "One JSON-RPC 2.0 message: a request (`id` and `method`), a notification (`method` only), or a response (`id` and `result` or `error`). MCP's methods and their params and results are in the MCP specification.",
                "required": ["jsonrpc"],
                "properties": {
                    "jsonrpc": { "const": "2.0" },
                    "id": { "type": ["string", "integer", "null"] },
                    "method": { "type": "string", "examples": ["initialize", "tools/list", "tools/call", "ping"] },
                    "params": { "type": "object" },
                    "result": { "type": "object" },
                    "error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": {
                            "code": { "type": "integer" },
                            "message": { "type": "string" },
                            "data": {}
                        }
                    }
                }
            }
        }
    });
    if let Some(schemas) = components["schemas"].as_object_mut() {
        schemas.extend(conversation_schemas(&millis, id));
    }
    components
}

/// The schemas of conversations and their memory.
fn conversation_schemas(millis: &Value, id: impl Fn(&str) -> Value) -> Map<String, Value> {
    let mut schemas = Map::new();
    let mut memory = hane_coordinator::conversation::memory_schema().clone();
    if let Some(fields) = memory.as_object_mut() {
        fields.remove("$schema");
        fields.remove("$id");
    }
    schemas.insert("Memory".to_owned(), memory);
    schemas.insert(
        "Conversation".to_owned(),
        json!({
            "type": "object",
            "required": ["id", "agent", "createdAtMs", "updatedAtMs", "entries"],
            "additionalProperties": false,
            "properties": {
                "id": id("conv_"),
                "agent": { "type": "string" },
                "createdAtMs": millis,
                "updatedAtMs": millis,
                "notes": { "type": "array", "items": { "type": "string" }, "description": "On creation from a memory: what was changed or left out" },
                "entries": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["seq", "kind", "atMs"],
                        "additionalProperties": false,
                        "properties": {
                            "seq": { "type": "integer", "minimum": 0 },
                            "kind": { "enum": ["message", "memory"] },
                            "atMs": millis,
                            "text": { "type": "string", "description": "A message's text" },
                            "run": schema("AgentRun"),
                            "messages": { "type": "integer", "minimum": 0, "description": "A saved memory's messages" }
                        }
                    }
                }
            }
        }),
    );
    schemas.insert(
        "ConversationList".to_owned(),
        json!({
            "type": "object",
            "required": ["conversations", "skipped"],
            "additionalProperties": false,
            "properties": {
                "conversations": { "type": "array", "items": {
                    "type": "object",
                    "required": ["id", "agent", "createdAtMs", "updatedAtMs"],
                    "additionalProperties": false,
                    "properties": { "id": id("conv_"), "agent": { "type": "string" }, "createdAtMs": millis, "updatedAtMs": millis }
                } },
                "skipped": skipped()
            }
        }),
    );
    schemas.insert(
        "CreateConversationRequest".to_owned(),
        json!({
            "type": "object",
            "anyOf": [{ "required": ["agent"] }, { "required": ["memory"] }],
            "additionalProperties": false,
            "properties": {
                "agent": { "type": "string", "description": "The agent; may be left out when `memory` names it" },
                "memory": { "type": "object", "description": "A saved history to start from, of a memory version this server reads; it names its agent" }
            }
        }),
    );
    schemas.insert(
        "SendMessageRequest".to_owned(),
        json!({
            "type": "object",
            "required": ["text"],
            "additionalProperties": false,
            "properties": {
                "text": { "type": "string", "minLength": 1 },
                "input": { "type": "object", "description": "The run's input; without it, `{\"message\": TEXT}`" },
                "wait": { "type": "boolean", "default": false, "description": "Answer once the run has ended" }
            }
        }),
    );
    schemas.extend(message_schemas(id));
    schemas
}

/// The schemas of a sent message and a saved memory.
fn message_schemas(id: impl Fn(&str) -> Value) -> Map<String, Value> {
    let mut schemas = Map::new();
    schemas.insert(
        "SentMessage".to_owned(),
        json!({
            "type": "object",
            "required": ["conversation", "seq", "run"],
            "additionalProperties": false,
            "properties": { "conversation": id("conv_"), "seq": { "type": "integer", "minimum": 0 }, "run": schema("AgentRun") }
        }),
    );
    schemas.insert(
        "SavedMemory".to_owned(),
        json!({
            "type": "object",
            "required": ["seq", "memory", "notes"],
            "additionalProperties": false,
            "properties": { "seq": { "type": "integer", "minimum": 0 }, "memory": schema("Memory"), "notes": { "type": "array", "items": { "type": "string" } } }
        }),
    );
    schemas
}

/// The parameters many routes share: the ids in their paths.
fn parameters(id: impl Fn(&str) -> Value) -> Value {
    json!({
        "RunId": {
            "name": "id",
            "in": "path",
            "required": true,
            "description": "The run's id",
            "schema": id("run_")
        },
        "ConversationId": {
            "name": "id",
            "in": "path",
            "required": true,
            "description": "The conversation's id",
            "schema": id("conv_")
        },
        "ActionId": {
            "name": "id",
            "in": "path",
            "required": true,
            "description": "The action's id",
            "schema": id("act_")
        },
        "Tool": {
            "name": "tool",
            "in": "path",
            "required": true,
            "description": "The outbound tool, such as `communication.send_email`",
            "schema": { "type": "string" }
        }
    })
}

/// The error answers many routes share.
fn responses(answers: &mut SchemaGenerator) -> Value {
    let schema = error_schema(answers);
    let error = |description: &str| {
        json!({
            "description": description,
            "content": { "application/json": { "schema": schema } }
        })
    };
    json!({
        "BadRequest": error("The request cannot be read: a malformed head, more than one `Authorization` header, broken JSON or a key given twice in an object (`path` points at the second), a malformed id or query parameter"),
        "RequestTimeout": error("The request's body did not arrive within the server's body timeout (`hane serve --body-timeout`, 30 s by default)"),
        "UriTooLong": error("The request's target (path and query) is over 8 KiB"),
        "HeadersTooLarge": error("The request's head (request line and headers) is over 64 KiB, or has over 100 headers"),
        "BadGateway": error("The model the request needed failed: the message names the provider, the model and what went wrong"),
        "Unavailable": error("The server has as many connections open as it takes (`hane serve --max-connections`, 1024 by default); the connection is closed"),
        "NotFound": error("Nothing has this id: no such run or action"),
        "InvalidBody": error("The body is not valid; `path` points at the field, such as `/digest`"),
        "BudgetExceeded": error("The day's budget does not allow it; the message names the limit, its value and today's usage"),
        "Unauthorized": error("No API key, a malformed Authorization header, or a key that is not known. The answer has a `WWW-Authenticate: Bearer` header"),
        "Forbidden": error("The key's role may not call this route, or the key's groups do not include the action's; the message names what is needed"),
        "PayloadTooLarge": error("The body is larger than the server accepts"),
        "UnsupportedMediaType": error("The body is not sent as `application/json`"),
        "Internal": error("The server failed; its log has the details"),
    })
}
