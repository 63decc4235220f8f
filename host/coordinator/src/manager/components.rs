//! [`Components`]: component bytes by content digest.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
pub use hane_sandbox::component_digest;

/// A registry of components by digest, shared by the managers that run
/// them. Cloning it is cheap and every clone sees the same components;
/// bytes are reference-counted, never copied on lookup.
///
/// # Examples
///
/// ```
/// use hane_coordinator::manager::Components;
///
/// let components = Components::new();
/// let digest = components.insert(&b"\0asm"[..]);
/// assert!(digest.starts_with("sha256:"));
/// assert_eq!(components.get(&digest).as_deref(), Some(&b"\0asm"[..]));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Components {
    by_digest: Arc<RwLock<HashMap<String, Bytes>>>,
}

impl Components {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry holding every built-in operation of `hane-builtins`.
    pub fn with_builtins() -> Self {
        let components = Self::new();
        for builtin in hane_builtins::BUILTINS {
            components.insert(Bytes::from_static(builtin.bytes));
        }
        components
    }

    /// Adds a component and returns its digest. Adding the same bytes again
    /// changes nothing.
    pub fn insert(&self, bytes: impl Into<Bytes>) -> String {
        let bytes = bytes.into();
        let digest = component_digest(&bytes);
        self.write().entry(digest.clone()).or_insert(bytes);
        digest
    }

    /// The component with `digest`, if the registry holds it.
    pub fn get(&self, digest: &str) -> Option<Bytes> {
        self.read().get(digest).cloned()
    }

    /// Whether the registry holds the component with `digest`.
    pub fn contains(&self, digest: &str) -> bool {
        self.read().contains_key(digest)
    }

    /// How many components the registry holds.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the registry holds no component.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Bytes>> {
        // The map is valid after any panic: every write is one insert.
        self.by_digest.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Bytes>> {
        self.by_digest.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_match_the_sandbox_format() {
        assert_eq!(
            component_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn builtins_are_found_by_digest_and_clones_share_inserts() {
        let components = Components::with_builtins();
        assert_eq!(components.len(), hane_builtins::BUILTINS.len());
        for builtin in hane_builtins::BUILTINS {
            let digest = component_digest(builtin.bytes);
            assert_eq!(components.get(&digest).as_deref(), Some(builtin.bytes));
        }
        let clone = components.clone();
        let digest = clone.insert(b"other".to_vec());
        assert!(components.contains(&digest));
        assert_eq!(clone.insert(b"other".to_vec()), digest);
        assert_eq!(components.len(), hane_builtins::BUILTINS.len() + 1);
        assert!(components.get("sha256:00").is_none());
    }
}
