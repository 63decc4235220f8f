//! hane's built-in operations, compiled from `operations/` to WebAssembly
//! components at build time and embedded, so one `hane` binary carries them:
//!
//! - `documents.search`, `documents.read_pages`: text documents in granted
//!   directories;
//! - `image.view`: an image in a granted directory;
//! - `http.get`: a URL on the HTTP allow-list;
//! - `data.find_record`, `data.get_record`: records of the ledger's granted
//!   collections (the `records` capability);
//! - `documents.read_summary`: documents of the ledger's granted document
//!   sets (the `documents` capability).
//!
//! # Examples
//!
//! ```
//! let search = hane_builtins::get("documents.search").expect("built in");
//! assert_eq!(&search[..4], b"\0asm");
//! assert!(hane_builtins::names().any(|n| n == "http.get"));
//! ```

/// A built-in operation.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// The operation's name, such as `documents.search`.
    pub name: &'static str,
    /// The component.
    pub bytes: &'static [u8],
    /// The component's `sha256:` digest, computed when hane was built.
    pub digest: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/components.rs"));

/// The component of the built-in operation `name`.
pub fn get(name: &str) -> Option<&'static [u8]> {
    BUILTINS.iter().find(|b| b.name == name).map(|b| b.bytes)
}

/// The built-in operation `name`, with its digest.
pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// Every built-in operation as its name and component bytes, the form
/// `hane_manager::Components::with_builtins` takes.
pub fn all() -> impl Iterator<Item = (&'static str, &'static [u8])> {
    BUILTINS.iter().map(|b| (b.name, b.bytes))
}

/// Every built-in operation as its name, component bytes and digest, the
/// form `hane_manager::Components::with_digested_builtins` takes.
pub fn digested() -> impl Iterator<Item = (&'static str, &'static [u8], &'static str)> {
    BUILTINS.iter().map(|b| (b.name, b.bytes, b.digest))
}

/// The names of all built-in operations.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|b| b.name)
}

#[cfg(test)]
mod tests {
    use sha2::{Digest as _, Sha256};

    #[test]
    fn every_digest_is_its_components() {
        for builtin in super::BUILTINS {
            let digest = format!("sha256:{}", hex::encode(Sha256::digest(builtin.bytes)));
            assert_eq!(builtin.digest, digest, "{}", builtin.name);
        }
        assert!(super::BUILTINS.len() >= 9);
    }
}
