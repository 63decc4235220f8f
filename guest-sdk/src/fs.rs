//! Files in the directories the host granted.
//!
//! A component sees only the directories the host preopened for the call (its
//! grants), under guest paths the host chose, such as `/docs`. `std::fs`
//! works inside them. This module lists the grants, reads files with errors
//! that name the path, and [`resolve`]s a caller-supplied path against the
//! grants before anything touches it, so an operation can say "outside the
//! granted directories" instead of a bare "not found".

use std::path::{Component, Path, PathBuf};

use crate::Error;

/// A directory the host granted (preopened), from `wasi:filesystem/preopens`.
///
/// Whether the grant is read-only is not observable from inside the
/// component: a write to a read-only grant fails with [`Error::Denied`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The path under which the component sees the directory, such as `/docs`.
    pub guest_path: String,
}

impl Grant {
    /// [`Grant::guest_path`] as a path.
    pub fn path(&self) -> &Path {
        Path::new(&self.guest_path)
    }
}

/// The directories the host granted to this call, in the host's order.
///
/// Empty outside a wasm32 component.
pub fn grants() -> Vec<Grant> {
    #[cfg(target_arch = "wasm32")]
    {
        wasi::filesystem::preopens::get_directories()
            .into_iter()
            .map(|(_descriptor, guest_path)| Grant { guest_path })
            .collect()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        Vec::new()
    }
}

/// The guest paths of [`grants`], the roots an operation that works on
/// "the granted folders" searches or resolves paths against.
pub fn grant_paths() -> Vec<PathBuf> {
    grants()
        .into_iter()
        .map(|grant| PathBuf::from(grant.guest_path))
        .collect()
}

/// Reads a whole file.
///
/// # Errors
///
/// [`Error::NotFound`], [`Error::Denied`] or [`Error::Failed`] by the kind of
/// I/O error, with a message that starts with the path.
pub fn read(path: impl AsRef<Path>) -> Result<Vec<u8>, Error> {
    let path = path.as_ref();
    std::fs::read(path).map_err(|e| Error::from_io(&e, path.display()))
}

/// Reads a whole file as UTF-8 text.
///
/// # Errors
///
/// As [`read`], and [`Error::InvalidInput`] when the file is not UTF-8.
pub fn read_to_string(path: impl AsRef<Path>) -> Result<String, Error> {
    let path = path.as_ref();
    std::fs::read_to_string(path).map_err(|e| Error::from_io(&e, path.display()))
}

/// Resolves `path` against `roots` (usually the guest paths of [`grants`])
/// and checks that it stays inside one of them.
///
/// An absolute path is taken as is; a relative one is joined to the first
/// root. `.` and `..` are resolved lexically, without touching the file
/// system: the host enforces the real boundary, this only turns a path that
/// plainly leaves the grants into a clear error before any I/O.
///
/// # Errors
///
/// [`Error::Denied`] when there are no roots, or the path leaves them; the
/// message lists the roots so the caller can pick a path that works.
///
/// # Examples
///
/// ```
/// use std::path::Path;
/// use hane_guest::fs::resolve;
///
/// let roots = ["/docs", "/notes"];
/// assert_eq!(resolve(&roots, "a/../b.md").unwrap(), Path::new("/docs/b.md"));
/// assert_eq!(resolve(&roots, "/notes/./c.md").unwrap(), Path::new("/notes/c.md"));
/// assert!(resolve(&roots, "/etc/passwd").is_err());
/// assert!(resolve(&roots, "../secrets").is_err());
/// ```
pub fn resolve(roots: &[impl AsRef<Path>], path: impl AsRef<Path>) -> Result<PathBuf, Error> {
    let path = path.as_ref();
    let roots: Vec<PathBuf> = roots
        .iter()
        .filter_map(|root| normalize(root.as_ref()))
        .collect();
    let Some(first) = roots.first() else {
        return Err(Error::Denied(format!(
            "{}: no directory is granted to this operation",
            path.display()
        )));
    };
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        first.join(path)
    };
    let inside = normalize(&joined).filter(|resolved| {
        roots
            .iter()
            .any(|root| resolved.is_absolute() == root.is_absolute() && resolved.starts_with(root))
    });
    inside.ok_or_else(|| {
        let granted: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        Error::Denied(format!(
            "{} is outside the granted directories ({})",
            path.display(),
            granted.join(", ")
        ))
    })
}

/// Removes `.` and resolves `..` lexically; `None` if `..` climbs above the
/// start of the path.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => out.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_empty_off_wasm() {
        assert!(grants().is_empty());
    }

    #[test]
    fn resolves_relative_paths_against_the_first_root() {
        let roots = ["/docs", "/notes"];
        assert_eq!(resolve(&roots, "a.md").unwrap(), Path::new("/docs/a.md"));
        assert_eq!(
            resolve(&roots, "./x/./y.md").unwrap(),
            Path::new("/docs/x/y.md")
        );
        assert_eq!(resolve(&roots, "").unwrap(), Path::new("/docs"));
    }

    #[test]
    fn accepts_absolute_paths_in_any_root() {
        let roots = ["/docs/", "/notes"];
        assert_eq!(
            resolve(&roots, "/notes/n.txt").unwrap(),
            Path::new("/notes/n.txt")
        );
        assert_eq!(resolve(&roots, "/docs").unwrap(), Path::new("/docs"));
        assert_eq!(
            resolve(&roots, "/notes/../docs/d.md").unwrap(),
            Path::new("/docs/d.md")
        );
    }

    #[test]
    fn refuses_paths_outside_the_roots() {
        let roots = ["/docs"];
        for path in [
            "/etc/passwd",
            "/docsx/a.md",
            "../a.md",
            "/docs/../../a",
            "/",
        ] {
            let err = resolve(&roots, path).unwrap_err();
            assert!(
                matches!(&err, Error::Denied(m) if m.contains("outside the granted directories (/docs)")),
                "{path}: {err:?}"
            );
        }
    }

    #[test]
    fn refuses_everything_without_roots() {
        let none: [&str; 0] = [];
        assert!(matches!(resolve(&none, "a.md"), Err(Error::Denied(_))));
    }

    #[test]
    fn a_relative_root_does_not_admit_absolute_paths() {
        let roots = ["."];
        assert_eq!(resolve(&roots, "a/b.md").unwrap(), Path::new("a/b.md"));
        assert!(resolve(&roots, "/etc/passwd").is_err());
    }

    #[test]
    fn read_errors_name_the_path() {
        let dir = std::env::temp_dir().join("hane-guest-fs-test-missing");
        let missing = dir.join("nope.txt");
        let err = read(&missing).unwrap_err();
        assert!(
            matches!(&err, Error::NotFound(m) if m.starts_with(&missing.display().to_string())),
            "{err:?}"
        );
        assert!(matches!(read_to_string(&missing), Err(Error::NotFound(_))));
    }

    #[test]
    fn read_to_string_refuses_non_utf8() {
        let path = std::env::temp_dir().join(format!("hane-guest-fs-{}.bin", std::process::id()));
        std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
        let result = read_to_string(&path);
        let bytes = read(&path);
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(result, Err(Error::InvalidInput(_))), "{result:?}");
        assert_eq!(bytes.unwrap(), [0xff, 0xfe, 0x00]);
    }
}
