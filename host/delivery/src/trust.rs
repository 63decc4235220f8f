//! The clients of customer APIs, by the roots they trust: the platform's
//! and Mozilla's, plus a connection's own CA certificates (its
//! `tls.caFile`) when it has them.
//!
//! A set of roots gets its clients once per process, so reads through a
//! connection keep their pooled connections and neither a read nor a
//! delivery parses certificates again.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use hane_http::{Client, RootsError};

/// The clients that trust one set of roots.
#[derive(Debug)]
pub(crate) struct Clients {
    /// Reads: keeps connections alive for the next read.
    pub reads: Client,
    /// Deliveries: one connection per attempt, never one the server may
    /// be closing.
    pub writes: Client,
}

/// The clients of connections without roots of their own, and of the
/// SMS and call providers.
pub(crate) static DEFAULT: LazyLock<Arc<Clients>> = LazyLock::new(|| {
    Arc::new(Clients {
        reads: Client::new(),
        writes: Client::single_use(),
    })
});

/// The clients of each connection's roots, by their PEM text.
static BY_ROOTS: LazyLock<Mutex<HashMap<String, Arc<Clients>>>> = LazyLock::new(Mutex::default);

/// The clients that trust `roots` (PEM text) besides the platform's and
/// Mozilla's roots, or only those when `roots` is `None`; built the first
/// time, then kept. `origin` names the text in errors.
pub(crate) fn clients(roots: Option<&str>, origin: &str) -> Result<Arc<Clients>, RootsError> {
    let Some(pem) = roots else {
        return Ok(Arc::clone(&DEFAULT));
    };
    let mut by_roots = BY_ROOTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(clients) = by_roots.get(pem) {
        return Ok(Arc::clone(clients));
    }
    let clients = Arc::new(Clients {
        reads: Client::new().with_root_pem(pem.as_bytes(), origin)?,
        writes: Client::single_use().with_root_pem(pem.as_bytes(), origin)?,
    });
    by_roots.insert(pem.to_owned(), Arc::clone(&clients));
    Ok(clients)
}

/// Checks that `pem` holds CA certificates a connection can trust (its
/// `tls.caFile`, read when a release is activated), and makes the clients
/// that trust them ready. `origin` names the text in errors, such as the
/// file it was read from.
///
/// # Errors
///
/// [`RootsError`] naming `origin`: `pem` holds no certificate, a broken
/// one, or one that cannot be a root.
pub fn check_roots(pem: &str, origin: &str) -> Result<(), RootsError> {
    clients(Some(pem), origin).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_get_their_clients_once_and_bad_ones_none() {
        let key = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let pem = key.cert.pem();
        let first = clients(Some(&pem), "ca.pem").unwrap();
        let again = clients(Some(&pem), "ca.pem").unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert!(!Arc::ptr_eq(&first, &clients(None, "").unwrap()));
        let error = check_roots("-----BEGIN PRIVATE KEY-----\n", "ca.pem").unwrap_err();
        assert!(error.to_string().contains("ca.pem"), "{error}");
        let error = check_roots("hello", "ca.pem").unwrap_err();
        assert_eq!(error.to_string(), "ca.pem holds no PEM certificate");
    }
}
