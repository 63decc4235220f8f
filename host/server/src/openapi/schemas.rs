//! The components of the OpenAPI document that are not derived from the
//! types the handlers (de)serialize: the schemas of bodies that are no
//! Rust type of this server (MCP's JSON-RPC messages, the memory format's
//! own document), the shared parameters and error answers, and the
//! security schemes.

use schemars::SchemaGenerator;
use serde_json::{Value, json};

use super::error_schema;

pub(super) fn components(answers: &mut SchemaGenerator) -> Value {
    let id = |prefix: &str| json!({ "type": "string", "pattern": format!("^{prefix}[0-9a-hjkmnp-tv-z]{{26}}$") });
    json!({
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
            },
            "Memory": memory_schema()
        }
    })
}

/// The schema of a conversation's memory: the memory format's own
/// document (`GET /v1/agents/conversations/memory-schema`), without the
/// keywords of a document of its own.
fn memory_schema() -> Value {
    let mut memory = hane_coordinator::conversation::memory_schema().clone();
    if let Some(fields) = memory.as_object_mut() {
        fields.remove("$schema");
        fields.remove("$id");
    }
    memory
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
