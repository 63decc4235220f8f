//! The `hane` binary run as a real process, one test binary so that it
//! links once: `op` (operations, outputs, receipts and exit codes),
//! `agents` (releases, runs, the demo, keys), `approvals`, `ask`
//! (reception from the terminal), `chat` (a
//! conversation on stdin), `mcp` (the stdio relay), `reads` (files and
//! stdin read bounded, under a memory limit), `schedules` (two
//! `hane serve` starting a schedule's runs once per tick), `session`, `store`
//! (opening, listings with damaged items, `hane store check`), `processes`
//! (several on one store: a killed one's runs ended by the next, one
//! day's budget), `worker`, `device` (the aarch64 device binary under
//! qemu, run by `cargo xtask test` once it has built one), and `docs` (the README's tour and the book's
//! shell blocks run as written, the book built, its links).

mod agents;
mod approvals;
mod ask;
mod chaos;
mod chat;
mod common;
mod device;
mod docs;
mod eval;
mod integrations;
mod mcp;
mod op;
mod processes;
mod reads;
mod schedules;
mod session;
mod soak;
mod store;
mod worker;
mod workflow;
