//! `cargo xtask architecture`'s second and third checks: no two public
//! types of the host's library crates share a name, and no crate root
//! names more than [`MAX_ROOT_NAMES`].
//!
//! A name that means two things (two `Operation`s, a `Role` of a model
//! message and one of an API key) makes every reader of an import look up
//! which is meant. Each `pub struct`, `pub enum`, `pub trait`, `pub type`
//! and `pub union` in `host/*/src` of a crate with a `lib.rs` is counted,
//! outside `#[cfg(test)] mod tests` and `tests.rs` files; `pub(crate)` and
//! narrower are not public. A `pub use` is the same type under its own name
//! and is not counted. The guest SDK is left out: its names are the WIT's,
//! on the guest's side of the same interface.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most names a library's root may offer: what it re-exports plus
/// what `lib.rs` defines itself. A crate with more is read through public
/// modules instead, so an import says where a name comes from.
pub const MAX_ROOT_NAMES: usize = 60;

/// Runs the root check under `root`: each host library's `lib.rs` names at
/// most [`MAX_ROOT_NAMES`] and re-exports no glob (whose names cannot be
/// counted).
pub fn check_roots(root: &Path) -> Result<(), String> {
    let host = root.join("host");
    let crates =
        std::fs::read_dir(&host).map_err(|e| format!("cannot list {}: {e}", host.display()))?;
    let mut problems = Vec::new();
    let mut largest = (0, String::new());
    let mut libraries = 0;
    for entry in crates {
        let lib = entry
            .map_err(|e| format!("cannot list {}: {e}", host.display()))?
            .path()
            .join("src/lib.rs");
        if !lib.is_file() {
            continue;
        }
        libraries += 1;
        let text = std::fs::read_to_string(&lib)
            .map_err(|e| format!("cannot read {}: {e}", lib.display()))?;
        let shown = lib.strip_prefix(root).unwrap_or(&lib).display().to_string();
        match root_names(&text) {
            Ok(names) if names.len() > MAX_ROOT_NAMES => problems.push(format!(
                "{shown} names {} at its root, more than {MAX_ROOT_NAMES}: move some into public \
                 modules",
                names.len()
            )),
            Ok(names) => {
                if names.len() > largest.0 {
                    largest = (names.len(), shown);
                }
            }
            Err(glob) => problems.push(format!(
                "{shown} re-exports a glob, `pub use {glob}`: name what it offers"
            )),
        }
    }
    if problems.is_empty() {
        println!(
            "xtask: architecture: no root of the {libraries} host libraries names more than \
             {MAX_ROOT_NAMES} (the most: {}, {})",
            largest.1, largest.0
        );
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The names `lib.rs` offers at its root: each leaf of its `pub use`
/// statements (the alias where one is given) and each `pub` item it
/// defines other than a module, up to a `#[cfg(test)]` module; `Err` with
/// the path of a glob re-export.
fn root_names(text: &str) -> Result<Vec<String>, String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("\npub use ") {
        let after = &rest[at + "\npub use ".len()..];
        let end = after.find(';').unwrap_or(after.len());
        let tree = &after[..end];
        if tree.contains('*') {
            return Err(tree.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        let leaves = match (tree.find('{'), tree.rfind('}')) {
            (Some(open), Some(close)) => &tree[open + 1..close],
            _ => tree.rsplit("::").next().unwrap_or(tree),
        };
        for leaf in leaves.split(',').map(str::trim).filter(|l| !l.is_empty()) {
            let name = leaf.rsplit(" as ").next().unwrap_or(leaf);
            names.push(name.rsplit("::").next().unwrap_or(name).to_owned());
        }
        rest = &after[end..];
    }
    for line in code.lines() {
        let Some(item) = line.strip_prefix("pub ") else {
            continue;
        };
        let item = item.strip_prefix("async ").unwrap_or(item);
        if let Some(named) = [
            "fn ", "struct ", "enum ", "const ", "static ", "type ", "trait ", "union ",
        ]
        .iter()
        .find_map(|kind| item.strip_prefix(kind))
        {
            names.push(
                named
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect(),
            );
        }
    }
    Ok(names)
}

/// Runs the check under `root`, printing one line when every name is
/// unique.
pub fn check(root: &Path) -> Result<(), String> {
    let mut defined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let host = root.join("host");
    let crates =
        std::fs::read_dir(&host).map_err(|e| format!("cannot list {}: {e}", host.display()))?;
    let mut files = 0;
    for entry in crates {
        let src = entry
            .map_err(|e| format!("cannot list {}: {e}", host.display()))?
            .path()
            .join("src");
        if !src.join("lib.rs").is_file() {
            continue;
        }
        for file in sources(&src)? {
            files += 1;
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let shown = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            for (line, name) in public_types(&text) {
                defined
                    .entry(name)
                    .or_default()
                    .push(format!("{shown}:{line}"));
            }
        }
    }
    let shared: Vec<String> = defined
        .iter()
        .filter(|(_, places)| places.len() > 1)
        .map(|(name, places)| format!("`{name}`: {}", places.join(", ")))
        .collect();
    if shared.is_empty() {
        println!(
            "xtask: architecture: the {} public types of the host's libraries have names of their \
             own ({files} files)",
            defined.len()
        );
        Ok(())
    } else {
        Err(format!(
            "public types of the host's libraries share names (rename all but one):\n  {}",
            shared.join("\n  ")
        ))
    }
}

/// The `.rs` files under `dir`, tests left out, in a stable order.
fn sources(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        let entries =
            std::fs::read_dir(&at).map_err(|e| format!("cannot list {}: {e}", at.display()))?;
        for entry in entries {
            let path = entry
                .map_err(|e| format!("cannot list {}: {e}", at.display()))?
                .path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if name != "tests" {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Each public type `text` defines, with its line (from 1), up to a
/// `#[cfg(test)]` module.
fn public_types(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((at, line)) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|(_, next)| next.trim_start().starts_with("mod tests"))
        {
            break;
        }
        let Some(rest) = trimmed.strip_prefix("pub ") else {
            continue;
        };
        let Some(rest) = ["struct ", "enum ", "trait ", "type ", "union "]
            .iter()
            .find_map(|kind| rest.strip_prefix(kind))
        else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.starts_with(|c: char| c.is_ascii_uppercase()) {
            found.push((at + 1, name));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_names_count_leaves_aliases_and_items_but_not_modules() {
        let text = "//! Docs.\n\npub mod a;\nmod b;\n\npub use a::{X, Y as Z, c::W};\npub use b::V;\npub fn f() {}\npub const N: u8 = 1;\npub(crate) fn g() {}\n#[cfg(test)]\nmod tests {\n    pub use super::*;\n}\n";
        assert_eq!(root_names(text).unwrap(), ["X", "Z", "W", "V", "f", "N"]);
        assert_eq!(root_names("\npub use other::*;\n").unwrap_err(), "other::*");
    }

    #[test]
    fn public_types_are_found_and_narrower_ones_are_not() {
        let text = "pub struct A;\npub(crate) struct B;\n    pub enum C {}\npub type D<'a> = &'a str;\npub trait E: Send {}\npub fn f() {}\n#[cfg(test)]\nmod tests {\n    pub struct F;\n}\n";
        let names: Vec<String> = public_types(text).into_iter().map(|(_, n)| n).collect();
        assert_eq!(names, ["A", "C", "D", "E"]);
    }
}
