//! The model's input, and nothing that can reach the outside world.
//!
//! The context builder assembles a request's messages (`hane-model-types`'
//! [`ModelRequest`](hane_model_types::ModelRequest)) from a run's history
//! and says what it left out; [`tokens`] counts them as the model would.
//!
//! This crate is pure on purpose: it has no tokio, no HTTP client, no store
//! and no clock among its dependencies, so the context builder cannot do
//! I/O or wait, and the same history always gives the same input. (The
//! one file the crate touches is the tokenizer tables' cache, which
//! decides how soon a table is ready, never what it counts.)
//!
//! The [`context`] builder keeps what fits the window and reports the rest:
//!
//! ```
//! use hane_context::{Action, ContextBuilder, ContextConfig, Tokenizer};
//! use hane_model_types::Message;
//!
//! let config = ContextConfig::new("You check vehicles.", vec![], 200, 50, Tokenizer::for_model("gpt-4o"));
//! let mut builder = ContextBuilder::new(config);
//! builder.push(Message::user("Is AB-123 in the fleet?"));
//! for _ in 0..20 {
//!     builder.push(Message::assistant("Let me think about that at some length. ".repeat(4)));
//!     builder.push(Message::user("Go on."));
//! }
//! builder.push(Message::user("And CD-456?"));
//!
//! let context = builder.build();
//! assert!(context.report.input_tokens + 50 <= 200);
//! assert_eq!(context.report.tokenizer.name(), "o200k_base");
//! // The task and the latest input are kept; what was dropped is one note.
//! assert_eq!(context.report.items[0].action, Action::Compacted);
//! let request = context.into_request("gpt-4o");
//! assert!(request.messages.last().unwrap().content.iter().any(|c| *c == hane_model_types::Content::text("And CD-456?")));
//! ```

pub mod context;
#[cfg(feature = "exact-tokens")]
mod tables;
pub mod tokens;

pub use context::{
    Action, Context, ContextBuilder, ContextConfig, ContextItem, ContextReport, Reason,
};
pub use tokens::Tokenizer;
