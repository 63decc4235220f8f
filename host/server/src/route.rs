//! [`Route`]: one route of the API written once, with what serves it and
//! what the OpenAPI document says of it. Each feature lists its own
//! (`actions::routes`, `conversations::routes`, …); the router and the
//! document are both built from that list, so neither can name a route
//! the other lacks.

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter, on};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;

use crate::keys::KeyRole;
use crate::routes::Api;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Anyone, without a key.
    Public,
    /// A key with any role.
    Read,
    /// A key with the `approver` or `operator` role.
    Approve,
    /// A key with the `operator` role.
    Operate,
    /// A run's token, not an API key: the Model Gateway's routes, which
    /// check it themselves.
    RunToken,
}

impl Access {
    pub(crate) fn allows(self, role: KeyRole) -> bool {
        match self {
            Access::Public | Access::Read => true,
            Access::Approve => matches!(role, KeyRole::Approver | KeyRole::Operator),
            Access::Operate => role == KeyRole::Operator,
            Access::RunToken => false,
        }
    }

    /// Who may call it, in words, for errors and the OpenAPI document.
    pub(crate) fn needs(self) -> &'static str {
        match self {
            Access::Public => "no API key",
            Access::Read => "an API key with any role (viewer, approver or operator)",
            Access::Approve => "an API key with the approver or operator role",
            Access::Operate => "an API key with the operator role",
            Access::RunToken => {
                "a run's token (`Authorization: Bearer TOKEN` or `x-api-key: TOKEN`), not an API key"
            }
        }
    }
}

/// The schema of a body.
pub(crate) enum Shape {
    /// Derived from the Rust type the handler (de)serializes: a reference
    /// into `components/schemas`, where the generator puts its definition.
    Of(fn(&mut SchemaGenerator) -> Schema),
    /// Written in place, for a body that is no Rust type of this server
    /// (a provider's passthrough body, a document served as it is).
    Inline(Value),
}

/// The schema of `T`, derived.
pub(crate) fn of<T: JsonSchema>() -> Shape {
    Shape::Of(|generator| generator.subschema_for::<T>())
}

/// One answer of a route, under its status.
pub(crate) enum Reply {
    /// A JSON body of a shape.
    Json {
        description: String,
        shape: Shape,
        /// Headers it carries: name and description.
        headers: Vec<(&'static str, &'static str)>,
    },
    /// An error answer in the error envelope, described for this route.
    Error(String),
    /// One of the answers shared by many routes, in
    /// `components/responses`, by name (such as `NotFound`).
    Common(&'static str),
    /// Written in place: an answer with no body, or not JSON.
    Raw(Value),
}

/// What the OpenAPI document says of one route.
pub(crate) struct Operation {
    pub(crate) id: &'static str,
    pub(crate) summary: &'static str,
    /// More than the summary; empty for none. The role the route needs
    /// is added to it.
    pub(crate) description: &'static str,
    pub(crate) parameters: Vec<Value>,
    /// The request body's shape, when it takes one (always required).
    pub(crate) body: Option<Shape>,
    /// By status, in the order declared.
    pub(crate) replies: Vec<(u16, Reply)>,
}

/// One route of the API.
pub(crate) struct Route {
    pub(crate) method: Method,
    /// In axum's and OpenAPI's syntax alike: `{id}` is a parameter.
    pub(crate) path: &'static str,
    pub(crate) access: Access,
    /// What serves it, before the key check is layered on.
    pub(crate) handler: MethodRouter<Api>,
    pub(crate) doc: Operation,
}

impl Route {
    /// A route of `method` at `path`, served by `handler`; `id` and
    /// `summary` are its operation's.
    pub(crate) fn new<H, T>(
        method: Method,
        path: &'static str,
        access: Access,
        handler: H,
        (id, summary): (&'static str, &'static str),
    ) -> Self
    where
        H: Handler<T, Api>,
        T: 'static,
    {
        let filter = MethodFilter::try_from(method.clone())
            .unwrap_or_else(|_| panic!("`{method} {path}`: axum routes no such method"));
        Route {
            method,
            path,
            access,
            handler: on(filter, handler),
            doc: Operation {
                id,
                summary,
                description: "",
                parameters: Vec::new(),
                body: None,
                replies: Vec::new(),
            },
        }
    }

    pub(crate) fn get<H: Handler<T, Api>, T: 'static>(
        path: &'static str,
        access: Access,
        handler: H,
        operation: (&'static str, &'static str),
    ) -> Self {
        Self::new(Method::GET, path, access, handler, operation)
    }

    pub(crate) fn post<H: Handler<T, Api>, T: 'static>(
        path: &'static str,
        access: Access,
        handler: H,
        operation: (&'static str, &'static str),
    ) -> Self {
        Self::new(Method::POST, path, access, handler, operation)
    }

    /// What the summary does not say.
    pub(crate) fn describe(mut self, description: &'static str) -> Self {
        self.doc.description = description;
        self
    }

    /// A parameter, as an OpenAPI Parameter Object.
    pub(crate) fn param(mut self, parameter: Value) -> Self {
        self.doc.parameters.push(parameter);
        self
    }

    /// The JSON request body it takes.
    pub(crate) fn body(mut self, shape: Shape) -> Self {
        self.doc.body = Some(shape);
        self
    }

    /// A JSON answer of `shape` under `status`.
    pub(crate) fn answer(mut self, status: u16, description: &str, shape: Shape) -> Self {
        self.doc.replies.push((
            status,
            Reply::Json {
                description: description.to_owned(),
                shape,
                headers: Vec::new(),
            },
        ));
        self
    }

    /// A header the answer just declared carries.
    pub(crate) fn header(mut self, name: &'static str, description: &'static str) -> Self {
        match self.doc.replies.last_mut() {
            Some((_, Reply::Json { headers, .. })) => headers.push((name, description)),
            _ => panic!(
                "`{} {}`: a header belongs to a JSON answer declared before it",
                self.method, self.path
            ),
        }
        self
    }

    /// An error answer under `status`, with what it means on this route.
    pub(crate) fn error(mut self, status: u16, description: &str) -> Self {
        self.doc
            .replies
            .push((status, Reply::Error(description.to_owned())));
        self
    }

    /// Shared error answers (`components/responses`), each under its
    /// status, such as `(404, "NotFound")`.
    pub(crate) fn errors(mut self, common: &[(u16, &'static str)]) -> Self {
        for &(status, name) in common {
            self.doc.replies.push((status, Reply::Common(name)));
        }
        self
    }

    /// An answer written in place.
    pub(crate) fn raw(mut self, status: u16, response: Value) -> Self {
        self.doc.replies.push((status, Reply::Raw(response)));
        self
    }
}
