//! The model's input, and nothing that can reach the outside world.
//!
//! [`types`] holds hane's normalized model request ([`ModelRequest`]) and
//! *completed* response ([`ModelResponse`]): every adapter (`hane-model`)
//! translates from and to them, and every wire format the Model Gateway
//! serves is translated through them. The context builder assembles a
//! request's messages from a run's history and says what it left out.
//!
//! This crate is pure on purpose: it has no tokio, no HTTP client, no store
//! and no clock among its dependencies, so the context builder cannot do
//! I/O or wait, and the same history always gives the same input.
//!
//! # Examples
//!
//! ```
//! use hane_context::{Content, Message, ModelRequest};
//!
//! let mut request = ModelRequest::new("smollm2");
//! request.system = Some("You check vehicles.".to_owned());
//! request.messages.push(Message::user("Is AB-123 in the fleet?"));
//! assert_eq!(request.messages[0].content, vec![Content::text("Is AB-123 in the fleet?")]);
//! assert_eq!(request.digest().len(), 64);
//! ```

pub mod types;

pub use types::{
    Content, Message, ModelRequest, ModelResponse, Role, StopReason, ToolChoice, ToolSpec, Usage,
};
