//! `documents.read_pages`: reads one page, or a range of lines, of a text
//! document in the granted directories.
//!
//! A page is the text between form feeds (`\f`, as `pdftotext` and many
//! printers' formats separate pages) when the document has any, otherwise
//! [`LINES_PER_PAGE`] lines. Reading by page lets a model walk a long document
//! a bounded piece at a time; reading by lines lets it go straight to a line a
//! search reported.
//!
//! The logic is [`read_pages`], which takes its roots explicitly; the exported
//! operation passes the guest paths of the host's grants.
//!
//! # Examples
//!
//! ```
//! use documents_read_pages::{read_pages, ReadPagesInput};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("report.txt"), "cover\n\x0cchapter one\nmore\n")?;
//!
//! let input = ReadPagesInput { path: "report.txt".into(), page: Some(2), lines: None };
//! let output = read_pages(&[dir.path()], input)?;
//! assert_eq!(output.text, "chapter one\nmore\n");
//! assert_eq!((output.total_pages, output.start_line, output.end_line), (2, 2, 3));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs;
use std::ops::Range;
use std::path::Path;

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Lines on a page of a document without form feeds.
pub const LINES_PER_PAGE: usize = 50;
/// Largest document read: 32 MiB.
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// Most lines one `lines` range may span.
pub const MAX_LINES_PER_READ: usize = 1000;
/// Most bytes of text returned; a longer page or range is cut at a character
/// boundary and the output says `truncated`. 256 KiB.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
/// Bytes at the start of a file checked for NUL, which text never contains.
const SNIFF_BYTES: usize = 8 * 1024;
const FORM_FEED: char = '\x0c';

/// Read one page, or a range of lines, of a text document in the granted
/// directories.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadPagesInput {
    /// Guest path of the document: absolute inside a granted directory, or
    /// relative to the first one.
    pub path: String,
    /// 1-based page to read. A page is the text between form feeds if the
    /// document has any, otherwise 50 lines. Not together with `lines`;
    /// without either, page 1 is read.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub page: Option<u32>,
    /// 1-based inclusive range of lines to read, such as "10-40", or one line
    /// such as "12"; at most 1000 lines. Not together with `page`.
    #[serde(default)]
    #[schemars(regex(pattern = r"^\s*[0-9]+\s*(-\s*[0-9]+\s*)?$"))]
    pub lines: Option<String>,
}

/// The text read, and where it lies in the document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReadPagesOutput {
    /// Guest path of the document.
    pub path: String,
    /// The text, as in the file (without the form feeds between pages).
    pub text: String,
    /// The page read, when reading by page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// Pages in the document.
    pub total_pages: u32,
    /// 1-based first line of `text` (0 for an empty document).
    pub start_line: u32,
    /// 1-based last line of `text` (0 for an empty document).
    pub end_line: u32,
    /// Lines in the document.
    pub total_lines: u32,
    /// Whether `text` was cut at 256 KiB; `end_line` is then the last line
    /// it reaches.
    pub truncated: bool,
}

fn run(input: ReadPagesInput) -> Result<ReadPagesOutput, Error> {
    read_pages(&hane_guest::fs::grant_paths(), input)
}

hane_guest::operation! {
    name: "documents.read_pages",
    impact: Read,
    run: run,
}

/// What to read.
enum Selection {
    Page(usize),
    /// 1-based inclusive.
    Lines(usize, usize),
}

/// Reads a page or a range of lines of the document `input.path`, which must
/// lie inside one of `roots`.
///
/// # Errors
///
/// - [`Error::InvalidInput`] when both `page` and `lines` are given, `lines`
///   is malformed or spans more than [`MAX_LINES_PER_READ`] lines, the page or
///   lines are out of range (the message gives the document's size), or the
///   file is a directory, binary, or larger than [`MAX_FILE_BYTES`];
/// - [`Error::Denied`] when the path lies outside `roots`;
/// - [`Error::NotFound`] when the file does not exist.
pub fn read_pages(
    roots: &[impl AsRef<Path>],
    input: ReadPagesInput,
) -> Result<ReadPagesOutput, Error> {
    let selection = match (input.page, input.lines.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(Error::InvalidInput(
                "give either page or lines, not both".to_owned(),
            ));
        }
        (Some(0), None) => {
            return Err(Error::InvalidInput("pages are numbered from 1".to_owned()));
        }
        (Some(page), None) => Selection::Page(page as usize),
        (None, Some(lines)) => parse_lines(lines)?,
        (None, None) => Selection::Page(1),
    };
    let path = hane_guest::fs::resolve(roots, &input.path)?;
    let text = read_text(&path, &input.path)?;
    let document = Document::new(&text);
    let name = &input.path;

    let (range, page) = match selection {
        Selection::Page(page) => {
            let total = document.pages.len();
            let Some(range) = document.pages.get(page - 1) else {
                return Err(Error::InvalidInput(format!(
                    "page {page} is out of range: {name} has {total} page{}",
                    plural(total)
                )));
            };
            (range.clone(), Some(page))
        }
        Selection::Lines(first, last) => {
            let total = document.line_count();
            if last > total {
                return Err(Error::InvalidInput(format!(
                    "lines {first}-{last} are out of range: {name} has {total} line{}",
                    plural(total)
                )));
            }
            (document.line_span(first, last), None)
        }
    };

    let (range, truncated) = cap(&text, range);
    let (start_line, end_line) = document.lines_of(&range);
    Ok(ReadPagesOutput {
        path: path.display().to_string(),
        text: text[range].to_owned(),
        page: page.map(to_u32),
        total_pages: to_u32(document.pages.len()),
        start_line: to_u32(start_line),
        end_line: to_u32(end_line),
        total_lines: to_u32(document.line_count()),
        truncated,
    })
}

fn parse_lines(lines: &str) -> Result<Selection, Error> {
    let invalid = || {
        Error::InvalidInput(format!(
            "lines must look like \"10-40\" or \"12\", not {lines:?}"
        ))
    };
    let number = |s: &str| s.trim().parse::<usize>().map_err(|_| invalid());
    let (first, last) = match lines.split_once('-') {
        Some((first, last)) => (number(first)?, number(last)?),
        None => {
            let line = number(lines)?;
            (line, line)
        }
    };
    if first == 0 {
        return Err(Error::InvalidInput("lines are numbered from 1".to_owned()));
    }
    if first > last {
        return Err(Error::InvalidInput(format!(
            "lines {first}-{last} end before they start"
        )));
    }
    if last - first >= MAX_LINES_PER_READ {
        return Err(Error::InvalidInput(format!(
            "lines {first}-{last} span {} lines; at most {MAX_LINES_PER_READ} can be read at once",
            last - first + 1
        )));
    }
    Ok(Selection::Lines(first, last))
}

fn read_text(path: &Path, name: &str) -> Result<String, Error> {
    let meta = fs::metadata(path).map_err(|e| Error::from_io(&e, name))?;
    if meta.is_dir() {
        return Err(Error::InvalidInput(format!(
            "{name} is a directory, not a document"
        )));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(Error::InvalidInput(format!(
            "{name} is {} bytes; documents over {MAX_FILE_BYTES} bytes cannot be read",
            meta.len()
        )));
    }
    let bytes = fs::read(path).map_err(|e| Error::from_io(&e, name))?;
    if bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0) {
        return Err(Error::InvalidInput(format!(
            "{name} is a binary file, not a text document"
        )));
    }
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Lines and pages of a text, as byte offsets.
struct Document<'a> {
    text: &'a str,
    /// Byte offset where each line starts; a final newline starts no line.
    line_starts: Vec<usize>,
    /// Byte ranges of the pages, without the form feeds; at least one.
    pages: Vec<Range<usize>>,
}

impl<'a> Document<'a> {
    fn new(text: &'a str) -> Self {
        let mut line_starts = Vec::new();
        if !text.is_empty() {
            line_starts.push(0);
        }
        line_starts.extend(
            text.match_indices('\n')
                .map(|(i, _)| i + 1)
                .filter(|&start| start < text.len()),
        );
        let mut document = Self {
            text,
            line_starts,
            pages: Vec::new(),
        };
        document.pages = if text.contains(FORM_FEED) {
            document.form_feed_pages()
        } else {
            document.line_pages()
        };
        document
    }

    fn form_feed_pages(&self) -> Vec<Range<usize>> {
        let mut pages = Vec::new();
        let mut start = 0;
        for (i, _) in self.text.match_indices(FORM_FEED) {
            pages.push(start..i);
            start = i + FORM_FEED.len_utf8();
        }
        // A form feed that ends the text closes the last page rather than
        // opening an empty one.
        if pages.is_empty() || !self.text[start..].trim().is_empty() {
            pages.push(start..self.text.len());
        }
        pages
    }

    fn line_pages(&self) -> Vec<Range<usize>> {
        let mut pages: Vec<Range<usize>> = self
            .line_starts
            .chunks(LINES_PER_PAGE)
            .enumerate()
            .map(|(i, chunk)| {
                let end = self
                    .line_starts
                    .get((i + 1) * LINES_PER_PAGE)
                    .copied()
                    .unwrap_or(self.text.len());
                chunk[0]..end
            })
            .collect();
        // An empty document still has one (empty) page.
        if pages.is_empty() {
            pages.push(0..0);
        }
        pages
    }

    fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// Bytes of lines `first..=last` (1-based, in range), with the newline
    /// ending the last one.
    fn line_span(&self, first: usize, last: usize) -> Range<usize> {
        let end = self
            .line_starts
            .get(last)
            .copied()
            .unwrap_or(self.text.len());
        self.line_starts[first - 1]..end
    }

    /// 1-based line of the byte at `offset`; 0 in an empty document.
    fn line_at(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= offset)
    }

    /// First and last line that `range` covers; a trailing newline belongs
    /// to the line it ends.
    fn lines_of(&self, range: &Range<usize>) -> (usize, usize) {
        let start = self.line_at(range.start);
        let mut end = range.end;
        if end > range.start && self.text.as_bytes()[end - 1] == b'\n' {
            end -= 1;
        }
        if end > range.start {
            (start, self.line_at(end - 1))
        } else {
            (start, start)
        }
    }
}

/// Cuts `range` to [`MAX_TEXT_BYTES`] at a character boundary.
fn cap(text: &str, range: Range<usize>) -> (Range<usize>, bool) {
    if range.len() <= MAX_TEXT_BYTES {
        return (range, false);
    }
    let mut end = range.start + MAX_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (range.start..end, true)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Counts here are bounded by [`MAX_FILE_BYTES`], far below `u32::MAX`.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
