//! Durable appends from concurrent writers, as the store benchmarks make
//! them on either engine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hane_core::{SessionEvent, SessionId};
use hane_store::SessionStore;

/// A distinct event of a few dozen bytes, like a run changing state.
pub fn event(i: u64) -> SessionEvent {
    SessionEvent::RunStateChanged {
        run: "run-1".into(),
        state: format!("state-{i}"),
    }
}

/// `appends` appends of one event each, shared by one writer task per
/// session; the time until all were acknowledged.
pub async fn concurrent_appends(
    store: &Arc<dyn SessionStore>,
    sessions: &[SessionId],
    appends: u64,
) -> Duration {
    let writers = sessions.len() as u64;
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (w, session) in (0..writers).zip(sessions) {
        let store = store.clone();
        let session = session.clone();
        let n = appends / writers + u64::from(w < appends % writers);
        set.spawn(async move {
            for i in 0..n {
                store
                    .append(&session, vec![event(i)])
                    .await
                    .expect("append");
            }
        });
    }
    while let Some(joined) = set.join_next().await {
        joined.expect("writer task");
    }
    start.elapsed()
}
