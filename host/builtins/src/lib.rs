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
}

include!(concat!(env!("OUT_DIR"), "/components.rs"));

/// The component of the built-in operation `name`.
pub fn get(name: &str) -> Option<&'static [u8]> {
    BUILTINS.iter().find(|b| b.name == name).map(|b| b.bytes)
}

/// Every built-in operation as its name and component bytes, the form
/// `hane_manager::Components::with_builtins` takes.
pub fn all() -> impl Iterator<Item = (&'static str, &'static [u8])> {
    BUILTINS.iter().map(|b| (b.name, b.bytes))
}

/// The names of all built-in operations.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|b| b.name)
}
