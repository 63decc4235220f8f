//! `cargo xtask architecture`'s second check: no two public types of the
//! host's library crates share a name.
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
    fn public_types_are_found_and_narrower_ones_are_not() {
        let text = "pub struct A;\npub(crate) struct B;\n    pub enum C {}\npub type D<'a> = &'a str;\npub trait E: Send {}\npub fn f() {}\n#[cfg(test)]\nmod tests {\n    pub struct F;\n}\n";
        let names: Vec<String> = public_types(text).into_iter().map(|(_, n)| n).collect();
        assert_eq!(names, ["A", "C", "D", "E"]);
    }
}
