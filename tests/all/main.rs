//! Integration tests of hane, one binary so the heavy dependencies link once.

mod builtins;
mod coordinator;
mod harness;
mod hostile;
mod manager;
mod recovery;
mod sandbox;
