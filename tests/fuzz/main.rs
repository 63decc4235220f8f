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

/// A runtime on a new store at `path` with the examples' release active,
/// as the targets that need one serve it.
async fn activated(path: &std::path::Path) -> hane_coordinator::AgentRuntime {
    let mut sandbox = hane_sandbox::SandboxConfig::new();
    sandbox.cache_dir(Some(hane_test_support::component_cache()));
    let mut config = hane_coordinator::RuntimeConfig::new();
    config
        .sandbox(sandbox)
        .components(hane_manager::Components::with_builtins(hane_builtins::all()));
    let runtime = hane_coordinator::AgentRuntime::open(path, &config).unwrap();
    runtime
        .activate(&hane_test_support::examples())
        .await
        .unwrap();
    runtime
}
