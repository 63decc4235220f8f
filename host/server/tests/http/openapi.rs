//! The OpenAPI document against what is served: every route the router
//! serves is documented and every documented one served, and every answer
//! any test of this file gets ([`check_answer`], called by `send`) has a
//! status its operation documents and, when it is JSON, a body valid
//! against the schema documented for that status.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::{Value, json};

use super::{Reply, Server, request};

/// The documented path template that `path` (without its query) reaches,
/// as the router chooses: segment by segment, a fixed segment before a
/// parameter (`/conversations/memory-schema` before `/conversations/{id}`).
fn template<'a>(doc: &'a Value, path: &str) -> Option<&'a str> {
    let path = path.split('?').next().unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    doc["paths"]
        .as_object()?
        .keys()
        .filter_map(|template| {
            let parts: Vec<&str> = template.split('/').collect();
            if parts.len() != segments.len() {
                return None;
            }
            // One rank per segment: 0 for a fixed one, 1 for a parameter;
            // the least rank, compared from the left, is the router's.
            let mut rank = Vec::new();
            for (part, segment) in parts.iter().zip(&segments) {
                if part.starts_with('{') && part.ends_with('}') && !segment.is_empty() {
                    rank.push(1);
                } else if part == segment {
                    rank.push(0);
                } else {
                    return None;
                }
            }
            Some((rank, template.as_str()))
        })
        .min()
        .map(|(_, template)| template)
}

/// The document's schemas, compiled once each, by the pointer to them.
type Validators = Mutex<HashMap<String, Arc<jsonschema::Validator>>>;

fn validator(doc: &Value, pointer: &str, schema: &Value) -> Arc<jsonschema::Validator> {
    static COMPILED: LazyLock<Validators> = LazyLock::new(Validators::default);
    let mut compiled = COMPILED.lock().expect("no test panicked holding it");
    compiled
        .entry(pointer.to_owned())
        .or_insert_with(|| {
            let wrapper = json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "allOf": [schema],
                "components": doc["components"],
            });
            Arc::new(
                jsonschema::validator_for(&wrapper)
                    .unwrap_or_else(|e| panic!("the schema at {pointer} does not compile: {e}")),
            )
        })
        .clone()
}

/// Checks an answer to `method path` against the served document: its
/// status is one its operation documents, and a JSON body is valid
/// against the schema documented for it. An answer to a path or a method
/// no route serves is the router's fallback (`404`, `405`), which the
/// tests of those check.
pub(super) fn check_answer(method: &str, path: &str, reply: &Reply) {
    let doc = hane_server::openapi();
    let Some(template) = template(doc, path) else {
        return;
    };
    let method = method.to_ascii_lowercase();
    let Some(operation) = doc["paths"][template].get(&method) else {
        return;
    };
    let status = reply.status.to_string();
    let mut answer = operation["responses"].get(&status).unwrap_or_else(|| {
        panic!(
            "`{method} {template}` answered {status}, which the document does not list for it: {}",
            reply.body
        )
    });
    let mut pointer = format!("#/paths/{template}/{method}/responses/{status}");
    if let Some(Value::String(reference)) = answer.get("$ref") {
        pointer.clone_from(reference);
        answer = doc
            .pointer(reference.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("{reference} does not resolve"));
    }
    let is_json = reply
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/json"));
    if !is_json {
        return;
    }
    let schema = answer["content"]["application/json"]
        .get("schema")
        .unwrap_or_else(|| {
            panic!(
                "`{method} {template}` answered {status} in JSON, but {pointer} has no JSON body"
            )
        });
    let errors: Vec<String> = validator(doc, &pointer, schema)
        .iter_errors(&reply.body)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "`{method} {template}` answered {status} with a body not valid against {pointer}: \
         {errors:?}\n{:#}",
        reply.body
    );
}

/// Every route the router serves is documented with an operation id, and
/// every documented one is served.
#[test]
fn the_router_and_the_document_list_the_same_routes() {
    let doc = hane_server::openapi();
    let mut served = Vec::new();
    for (method, path) in hane_server::served_routes() {
        let method = method.as_str().to_ascii_lowercase();
        let operation = &doc["paths"][path][&method];
        assert!(
            operation["operationId"]
                .as_str()
                .is_some_and(|id| !id.is_empty()),
            "`{method} {path}` is served but has no documented operation"
        );
        assert!(
            operation["responses"]
                .as_object()
                .is_some_and(|r| r.keys().any(|s| s.starts_with('2'))),
            "`{method} {path}` documents no answer of success"
        );
        served.push(format!("{method} {path}"));
    }
    for (path, item) in doc["paths"].as_object().expect("paths") {
        if [hane_server::MCP_PATH, hane_server::MCP_RELEASE_PATH].contains(&path.as_str()) {
            continue;
        }
        for method in item.as_object().expect("a path item").keys() {
            assert!(
                served.contains(&format!("{method} {path}")),
                "`{method} {path}` is documented but not served"
            );
        }
    }
}

#[test]
fn a_path_reaches_the_template_the_router_chooses() {
    let doc = hane_server::openapi();
    let reached = |path| template(doc, path);
    assert_eq!(
        reached("/v1/agents/conversations/memory-schema"),
        Some("/v1/agents/conversations/memory-schema")
    );
    assert_eq!(
        reached("/v1/agents/conversations/conv_1?x=1"),
        Some("/v1/agents/conversations/{id}")
    );
    assert_eq!(
        reached("/v1/agents/evals/compare?a=1&b=2"),
        Some("/v1/agents/evals/compare")
    );
    assert_eq!(reached("/v1/agents/nothing"), None);
}

/// Answers with a body that breaks its documented schema, or under a
/// status the document does not list, are caught.
#[test]
fn an_answer_off_the_document_is_caught() {
    let reply = |status: u16, body: Value| Reply {
        status,
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body,
    };
    let caught = |method: &'static str, path: &'static str, answer: Reply| {
        std::panic::catch_unwind(move || check_answer(method, path, &answer)).is_err()
    };
    assert!(!caught(
        "GET",
        "/healthz",
        reply(200, json!({"status": "ok"}))
    ));
    assert!(caught(
        "GET",
        "/healthz",
        reply(200, json!({"status": "up"}))
    ));
    assert!(caught(
        "GET",
        "/healthz",
        reply(201, json!({"status": "ok"}))
    ));
    assert!(caught(
        "GET",
        "/v1/agents/tools",
        reply(200, json!({"tools": [{"name": "x"}]}))
    ));
    let error = json!({"error": {"code": "not_found", "message": "no run"}});
    assert!(!caught("GET", "/v1/agents/runs/run_1", reply(404, error)));
    let bad = json!({"error": {"code": "not_found"}});
    assert!(caught("GET", "/v1/agents/runs/run_1", reply(404, bad)));
}

/// Every route answers a request with the role it needs as documented:
/// a viewer's key on a route for approvers or operators is refused with
/// `403`, which [`check_answer`] finds documented.
#[tokio::test]
async fn each_route_answers_a_viewer_as_documented() -> anyhow::Result<()> {
    let server = Server::start().await?;
    for (method, path) in hane_server::served_routes() {
        let path = path
            .replace("{id}", "run_00000000000000000000000000")
            .replace("{tool}", "communication.send_email")
            .replace("{name}", "lease-inquiry")
            .replace("{step}", "desk");
        let body = ["POST", "PUT"].contains(&method.as_str()).then_some("{}");
        // `send` checks the answer against the document.
        request(
            server.addr,
            method.as_str(),
            &path,
            Some(&server.viewer),
            body,
        )
        .await?;
    }
    server.stop().await
}
