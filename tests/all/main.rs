//! Integration tests of hane, one binary so the heavy dependencies link once.

mod builtins;
mod harness;
mod hostile;
mod sandbox;
