//! Bounded reads of the files a person or a manifest names: inputs,
//! components, manifests, ledgers, recordings, keys.
//!
//! A name can point at anything: `/dev/zero`, a FIFO nobody writes to, a
//! directory, or a file that grows while it is read. Reading one whole
//! with `std::fs::read` takes as much memory as it offers, or waits
//! forever. [`read_capped`] reads only regular files, and at most the
//! [`FileCap`] of what the file is for, so every such read ends promptly,
//! within its cap, with an error that names the file.
//!
//! | what | cap | constant |
//! |---|---|---|
//! | inputs (`--input @FILE`, `@-`) | 1 MiB | [`MAX_INPUT_BYTES`] |
//! | manifests and policies | 1 MiB | [`MAX_MANIFEST_BYTES`](crate::file::MAX_MANIFEST_BYTES) |
//! | components (`.wasm`) | 128 MiB | [`MAX_COMPONENT_BYTES`] |
//! | ledger collections | 128 MiB | [`MAX_COLLECTION_BYTES`](crate::ledger::MAX_COLLECTION_BYTES) |
//! | ledger documents and summaries | 8 MiB | [`MAX_DOCUMENT_BYTES`](crate::ledger::MAX_DOCUMENT_BYTES) |
//!
//! Crates with files of their own define their caps beside them (model
//! recordings, certificates, the worker's secret).
//!
//! # Examples
//!
//! ```
//! use hane_core::file::{FileCap, read_capped};
//!
//! let error = read_capped("/dev/zero".as_ref(), FileCap::INPUT).unwrap_err();
//! assert_eq!(
//!     error.to_string(),
//!     "/dev/zero is a character device, not a regular file; inputs are read from regular files"
//! );
//! ```

use std::fmt;
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::ledger::{MAX_COLLECTION_BYTES, MAX_DOCUMENT_BYTES};

/// The most bytes one manifest file may hold (1 MiB).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// The most bytes of an input read from a file or stdin (1 MiB), as much
/// as the HTTP API takes in a request body.
pub const MAX_INPUT_BYTES: u64 = 1 << 20;

/// The most bytes of a component file (128 MiB). Components with their
/// dependencies compiled in run to tens of MiB; the worker protocol's
/// frame, which carries one, is larger still.
pub const MAX_COMPONENT_BYTES: u64 = 128 << 20;

/// What a file is read as: the most bytes it may hold, and the words an
/// error uses for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileCap {
    /// The most bytes read.
    pub bytes: u64,
    /// What such files are, plural, for errors: `inputs`, `components`.
    pub what: &'static str,
}

impl FileCap {
    /// An input: [`MAX_INPUT_BYTES`].
    pub const INPUT: FileCap = FileCap::new(MAX_INPUT_BYTES, "inputs");
    /// A manifest or policy: [`MAX_MANIFEST_BYTES`].
    pub const MANIFEST: FileCap = FileCap::new(MAX_MANIFEST_BYTES, "manifests");
    /// A component: [`MAX_COMPONENT_BYTES`].
    pub const COMPONENT: FileCap = FileCap::new(MAX_COMPONENT_BYTES, "components");
    /// A ledger collection: [`MAX_COLLECTION_BYTES`].
    pub const COLLECTION: FileCap = FileCap::new(MAX_COLLECTION_BYTES, "ledger collections");
    /// A ledger document or summary: [`MAX_DOCUMENT_BYTES`].
    pub const DOCUMENT: FileCap = FileCap::new(MAX_DOCUMENT_BYTES, "documents");

    /// A cap of `bytes` on files that are `what`.
    pub const fn new(bytes: u64, what: &'static str) -> Self {
        Self { bytes, what }
    }
}

/// A file that could not be read within its cap, naming it.
#[derive(Debug)]
pub struct ReadError {
    /// The file as named, or `stdin`.
    pub path: PathBuf,
    /// What was wrong.
    pub problem: ReadProblem,
}

/// What was wrong with a file read by [`read_capped`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadProblem {
    /// Not a regular file: a directory, FIFO, device or socket.
    NotAFile {
        /// `a directory`, `a FIFO`, …
        kind: &'static str,
        /// What the file was to be read as.
        cap: FileCap,
    },
    /// More bytes than the cap, on disk or as read.
    TooLarge {
        /// The cap.
        cap: FileCap,
    },
    /// Opening or reading failed.
    Io(io::Error),
    /// Text that is not UTF-8.
    NotUtf8,
}

impl fmt::Display for ReadProblem {
    /// The problem without the file's name, for errors that name it
    /// themselves: `larger than the 1 MiB cap on inputs`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadProblem::NotAFile { kind, cap } => write!(
                f,
                "{kind}, not a regular file; {} are read from regular files",
                cap.what
            ),
            ReadProblem::TooLarge { cap } => write!(
                f,
                "larger than the {} cap on {}",
                Bytes(cap.bytes),
                cap.what
            ),
            ReadProblem::Io(e) => write!(f, "cannot read: {e}"),
            ReadProblem::NotUtf8 => f.write_str("not UTF-8 text"),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.problem {
            ReadProblem::Io(e) => write!(f, "cannot read {path}: {e}"),
            problem => write!(f, "{path} is {problem}"),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.problem {
            ReadProblem::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// A size in the largest binary unit that divides it: `1 MiB`, `1500 bytes`.
struct Bytes(u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, size) in [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{} {unit}", self.0 / size);
            }
        }
        write!(f, "{} bytes", self.0)
    }
}

/// The bytes of the regular file at `path`, at most `cap.bytes` of them.
///
/// What the path names is checked before it is opened, for a prompt
/// refusal without waiting on a FIFO, and again once open, in case it
/// changed; it is opened non-blocking so that a FIFO put in its place
/// meanwhile cannot hold it. The read stops one byte past the cap, so a
/// file that grows while it is read is refused too.
///
/// # Errors
///
/// The path names no regular file, the file holds more than the cap, or
/// it cannot be opened or read; each naming the path.
pub fn read_capped(path: &Path, cap: FileCap) -> Result<Vec<u8>, ReadError> {
    let fail = |problem| ReadError {
        path: path.to_owned(),
        problem,
    };
    let named = std::fs::metadata(path).map_err(|e| fail(ReadProblem::Io(e)))?;
    check(&named, cap).map_err(fail)?;
    let file = open(path).map_err(|e| fail(ReadProblem::Io(e)))?;
    let opened = file.metadata().map_err(|e| fail(ReadProblem::Io(e)))?;
    check(&opened, cap).map_err(fail)?;
    read_capped_from(file, path, cap, opened.len())
}

/// [`read_capped`] of a UTF-8 text file, without its byte-order mark if it
/// has one.
///
/// # Errors
///
/// As [`read_capped`], or the file is not UTF-8.
pub fn read_capped_text(path: &Path, cap: FileCap) -> Result<String, ReadError> {
    text(read_capped(path, cap)?, path)
}

/// Everything `reader` gives until its end, at most `cap.bytes` of it;
/// `name` names it in errors (`stdin`). `expected` is how many bytes are
/// likely, to allocate once; 0 when unknown.
///
/// # Errors
///
/// More than `cap.bytes` came, or reading failed.
pub fn read_capped_from(
    reader: impl Read,
    name: impl AsRef<Path>,
    cap: FileCap,
    expected: u64,
) -> Result<Vec<u8>, ReadError> {
    let fail = |problem| ReadError {
        path: name.as_ref().to_owned(),
        problem,
    };
    let mut bytes = Vec::with_capacity(usize::try_from(expected.min(cap.bytes)).unwrap_or(0));
    reader
        .take(cap.bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| fail(ReadProblem::Io(e)))?;
    if bytes.len() as u64 > cap.bytes {
        return Err(fail(ReadProblem::TooLarge { cap }));
    }
    Ok(bytes)
}

/// [`read_capped_from`] of UTF-8 text, without a byte-order mark.
///
/// # Errors
///
/// As [`read_capped_from`], or the text is not UTF-8.
pub fn read_capped_text_from(
    reader: impl Read,
    name: impl AsRef<Path>,
    cap: FileCap,
) -> Result<String, ReadError> {
    let bytes = read_capped_from(reader, name.as_ref(), cap, 0)?;
    text(bytes, name.as_ref())
}

fn text(bytes: Vec<u8>, path: &Path) -> Result<String, ReadError> {
    let mut text = String::from_utf8(bytes).map_err(|_| ReadError {
        path: path.to_owned(),
        problem: ReadProblem::NotUtf8,
    })?;
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok(text)
}

/// Refuses what is not a regular file, or is larger than `cap`.
fn check(meta: &Metadata, cap: FileCap) -> Result<(), ReadProblem> {
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(ReadProblem::NotAFile {
            kind: kind_of(&kind),
            cap,
        });
    }
    if meta.len() > cap.bytes {
        return Err(ReadProblem::TooLarge { cap });
    }
    Ok(())
}

#[cfg(unix)]
fn kind_of(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "something else"
    }
}

#[cfg(not(unix))]
fn kind_of(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else {
        "something else"
    }
}

#[cfg(unix)]
fn open(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open(path: &Path) -> io::Result<File> {
    File::open(path)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    const SMALL: FileCap = FileCap::new(16, "tests");

    #[test]
    fn a_file_within_its_cap_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.json");
        std::fs::write(&path, b"0123456789abcdef").unwrap();
        assert_eq!(read_capped(&path, SMALL).unwrap(), b"0123456789abcdef");
        std::fs::write(&path, "\u{feff}{\"a\": 1}").unwrap();
        assert_eq!(read_capped_text(&path, SMALL).unwrap(), "{\"a\": 1}");
    }

    #[test]
    fn a_file_over_its_cap_is_refused_naming_file_and_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.json");
        std::fs::write(&path, [b'x'; 17]).unwrap();
        let e = read_capped(&path, SMALL).unwrap_err();
        assert!(matches!(e.problem, ReadProblem::TooLarge { cap } if cap == SMALL));
        assert_eq!(
            e.to_string(),
            format!(
                "{} is larger than the 16 bytes cap on tests",
                path.display()
            )
        );
        let e = read_capped(&path, FileCap::INPUT).map(drop);
        assert!(e.is_ok());
        std::fs::write(&path, vec![b' '; (MAX_INPUT_BYTES + 1) as usize]).unwrap();
        let e = read_capped(&path, FileCap::INPUT).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{} is larger than the 1 MiB cap on inputs", path.display())
        );
    }

    #[test]
    fn a_reader_is_cut_one_byte_past_the_cap() {
        // An endless reader, as a file growing while it is read: the read
        // stops at the cap and one byte more.
        let e = read_capped_from(io::repeat(b'0'), "stdin", SMALL, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stdin is larger than the 16 bytes cap on tests"
        );
        let read = read_capped_from(&b"0123456789abcdef"[..], "stdin", SMALL, 0).unwrap();
        assert_eq!(read.len(), 16);
        let e = read_capped_text_from(&[0xff, 0xfe][..], "stdin", SMALL).unwrap_err();
        assert_eq!(e.to_string(), "stdin is not UTF-8 text");
    }

    #[test]
    fn devices_directories_and_fifos_are_refused_without_reading() {
        let e = read_capped(Path::new("/dev/zero"), FileCap::INPUT).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero is a character device, not a regular file; inputs are read from regular files"
        );
        let dir = tempfile::tempdir().unwrap();
        let e = read_capped(dir.path(), FileCap::MANIFEST).unwrap_err();
        assert!(
            matches!(
                e.problem,
                ReadProblem::NotAFile {
                    kind: "a directory",
                    ..
                }
            ),
            "{e}"
        );
        // A FIFO with no writer: opening it for reading would wait for
        // one; it is refused at once instead.
        let fifo = dir.path().join("in.fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let e = read_capped(&fifo, FileCap::INPUT).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} is a FIFO, not a regular file; inputs are read from regular files",
                fifo.display()
            )
        );
    }

    #[test]
    fn a_symbolic_link_is_read_as_what_it_points_to() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.yaml");
        let mut file = File::create(&target).unwrap();
        file.write_all(b"kind: Agent").unwrap();
        let link = dir.path().join("link.yaml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(
            read_capped_text(&link, FileCap::MANIFEST).unwrap(),
            "kind: Agent"
        );
        let to_zero = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &to_zero).unwrap();
        let e = read_capped(&to_zero, FileCap::INPUT).unwrap_err();
        assert!(
            matches!(
                e.problem,
                ReadProblem::NotAFile {
                    kind: "a character device",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let e = read_capped(Path::new("/nonexistent/in.json"), FileCap::INPUT).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read /nonexistent/in.json: "),
            "{e}"
        );
        assert!(matches!(&e.problem, ReadProblem::Io(io) if io.kind() == io::ErrorKind::NotFound));
    }

    #[test]
    fn caps_are_shown_in_binary_units() {
        assert_eq!(Bytes(1 << 20).to_string(), "1 MiB");
        assert_eq!(Bytes(128 << 20).to_string(), "128 MiB");
        assert_eq!(Bytes(4 << 10).to_string(), "4 KiB");
        assert_eq!(Bytes(1500).to_string(), "1500 bytes");
    }
}
