//! [`Components`]: component bytes by content digest, and the built-in
//! ones by name.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
pub use hane_sandbox::component_digest;

/// A registry of components by digest, shared by the managers that run
/// them. Cloning it is cheap and every clone sees the same components;
/// bytes are reference-counted, never copied on lookup.
///
/// It also knows the built-in components the binary carries, by name: it
/// is the one resolver of `builtin:NAME` (in an `Operation` manifest's
/// `spec.component`, or on `hane op run`).
///
/// # Examples
///
/// ```
/// use hane_manager::Components;
///
/// let components = Components::with_builtins([("text.echo", &b"\0asm echo"[..])]);
/// let digest = components.insert(&b"\0asm"[..]);
/// assert!(digest.starts_with("sha256:"));
/// assert_eq!(components.get(&digest).as_deref(), Some(&b"\0asm"[..]));
/// assert_eq!(components.builtin("text.echo").as_deref(), Some(&b"\0asm echo"[..]));
/// assert_eq!(components.builtin_names(), ["text.echo"]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Components {
    inner: Arc<RwLock<Held>>,
}

#[derive(Debug, Default)]
struct Held {
    by_digest: HashMap<String, Bytes>,
    /// Built-in components' digests by name.
    builtins: BTreeMap<&'static str, String>,
}

impl Components {
    /// An empty registry, with no built-in components.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry holding `builtins`, each a name (such as
    /// `documents.search`) and the component's bytes.
    pub fn with_builtins(
        builtins: impl IntoIterator<Item = (&'static str, &'static [u8])>,
    ) -> Self {
        let components = Self::new();
        for (name, bytes) in builtins {
            let digest = components.insert(Bytes::from_static(bytes));
            components.write().builtins.insert(name, digest);
        }
        components
    }

    /// A registry holding `builtins`, each a name, the component's bytes
    /// and its digest as computed when hane was built
    /// (`hane_builtins::digested`): nothing is hashed. A digest is taken
    /// as given, so only digests computed from the same bytes belong here.
    pub fn with_digested_builtins(
        builtins: impl IntoIterator<Item = (&'static str, &'static [u8], &'static str)>,
    ) -> Self {
        let components = Self::new();
        {
            let mut held = components.write();
            for (name, bytes, digest) in builtins {
                held.by_digest
                    .entry(digest.to_owned())
                    .or_insert_with(|| Bytes::from_static(bytes));
                held.builtins.insert(name, digest.to_owned());
            }
        }
        components
    }

    /// Adds a component and returns its digest. Adding the same bytes again
    /// changes nothing.
    pub fn insert(&self, bytes: impl Into<Bytes>) -> String {
        let bytes = bytes.into();
        let digest = component_digest(&bytes);
        self.write()
            .by_digest
            .entry(digest.clone())
            .or_insert(bytes);
        digest
    }

    /// The component with `digest`, if the registry holds it.
    pub fn get(&self, digest: &str) -> Option<Bytes> {
        self.read().by_digest.get(digest).cloned()
    }

    /// Whether the registry holds the component with `digest`.
    pub fn contains(&self, digest: &str) -> bool {
        self.read().by_digest.contains_key(digest)
    }

    /// The built-in component `name` (what `builtin:NAME` stands for).
    pub fn builtin(&self, name: &str) -> Option<Bytes> {
        let held = self.read();
        let digest = held.builtins.get(name)?;
        held.by_digest.get(digest).cloned()
    }

    /// The names of the built-in components, sorted.
    pub fn builtin_names(&self) -> Vec<&'static str> {
        self.read().builtins.keys().copied().collect()
    }

    /// How many components the registry holds.
    pub fn len(&self) -> usize {
        self.read().by_digest.len()
    }

    /// Whether the registry holds no component.
    pub fn is_empty(&self) -> bool {
        self.read().by_digest.is_empty()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Held> {
        // The maps are valid after any panic: every write is one insert.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Held> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
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
    fn builtins_are_found_by_name_and_digest_and_clones_share_inserts() {
        let builtins: [(&'static str, &'static [u8]); 2] =
            [("b.two", b"\0asm two"), ("a.one", b"\0asm one")];
        let components = Components::with_builtins(builtins);
        assert_eq!(components.len(), 2);
        assert_eq!(components.builtin_names(), ["a.one", "b.two"]);
        for (name, bytes) in builtins {
            let digest = component_digest(bytes);
            assert_eq!(components.get(&digest).as_deref(), Some(bytes));
            assert_eq!(components.builtin(name).as_deref(), Some(bytes));
        }
        assert!(components.builtin("c.three").is_none());
        let clone = components.clone();
        let digest = clone.insert(b"other".to_vec());
        assert!(components.contains(&digest));
        assert_eq!(clone.insert(b"other".to_vec()), digest);
        assert_eq!(components.len(), 3);
        assert!(components.get("sha256:00").is_none());
    }

    #[test]
    fn the_built_ins_digests_from_the_build_are_the_ones_hashing_gives() {
        let hashed = Components::with_builtins(hane_builtins::all());
        let digested = Components::with_digested_builtins(hane_builtins::digested());
        assert_eq!(hashed.builtin_names(), digested.builtin_names());
        assert_eq!(hashed.len(), digested.len());
        for (name, bytes, digest) in hane_builtins::digested() {
            assert_eq!(digested.get(digest).as_deref(), Some(bytes), "{name}");
            assert!(hashed.contains(digest), "{name}");
        }
    }
}
