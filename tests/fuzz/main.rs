//! Fuzz targets, each a test that runs for a bounded time
//! (`HANE_FUZZ_SECONDS`, 10 s unless set): manifests, version envelopes,
//! the worker's frames, handshake and a live worker, the model wire
//! formats both ways, and every HTTP route's body. `engine` is what they
//! share; `FUZZING.md` says how to run them longer.

mod engine;
mod envelopes;
mod frames;
mod http;
mod manifests;
mod model;
