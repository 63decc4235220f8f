//! What PostgreSQL's store and a build without it share: how a
//! synchronous call is kept off the async runtime, and an address without
//! its password.

use crate::StoreError;

/// Connections open at most at once, by default.
pub(crate) const DEFAULT_CONNECTIONS: usize = 8;

/// Runs `f` on a thread of its own and waits for it. The client drives a
/// runtime of its own, so it is never called on a thread that may be
/// driving one: a synchronous caller (opening a store, taking a lease)
/// goes through here.
pub(crate) fn off_runtime<T: Send>(
    f: impl FnOnce() -> Result<T, StoreError> + Send,
) -> Result<T, StoreError> {
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .unwrap_or_else(|_| Err(StoreError::Database("a call to PostgreSQL panicked".into())))
    })
}

/// `url` with any password replaced by `***`.
pub fn redact(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://")
        && let Some((credentials, host)) = rest.split_once('@')
        && let Some((user, _password)) = credentials.split_once(':')
    {
        return format!("{scheme}://{user}:***@{host}");
    }
    if url.contains("password") {
        return url
            .split_whitespace()
            .map(|pair| {
                if pair.starts_with("password=") {
                    "password=***"
                } else {
                    pair
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
    }
    url.to_owned()
}
