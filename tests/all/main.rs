//! Integration tests of hane, one binary so the heavy dependencies link once.

mod agents;
mod approvals;
mod builtins;
mod cli_drivers;
mod conversations;
mod coordinator;
mod delivery;
mod evaluations;
mod fleet_service;
mod harness;
mod hostile;
mod images;
mod integrations;
mod ledger;
mod manager;
mod mcp;
mod model;
mod ontology;
mod programs;
mod reception;
mod recovery;
mod sandbox;
mod schedules;
mod served;
mod workflows;
