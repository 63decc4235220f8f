//! hane's model adapters.

pub use hane_context::types::*;
