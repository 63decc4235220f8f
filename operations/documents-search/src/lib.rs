//! `documents.search`: ranked full-text search over the text and Markdown
//! files in the granted directories.
//!
//! Documents are `.txt`, `.md` and `.markdown` files. Each is split into
//! lowercase Unicode words and ranked against the query with BM25; every
//! result carries a title (the first Markdown heading, else the file name)
//! and a snippet around the line that matches most query words. There is no
//! index: each call reads the files, so the walk is capped by
//! [`MAX_FILES`], [`MAX_FILE_BYTES`] and [`MAX_TOTAL_BYTES`].
//!
//! The search itself is [`search`], which takes its roots explicitly; the
//! exported operation passes the guest paths of the host's grants.
//!
//! # Examples
//!
//! ```
//! use documents_search::{search, SearchInput};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("wasm.md"), "# Components\nA component imports and exports.")?;
//! std::fs::write(dir.path().join("other.txt"), "Nothing relevant.")?;
//!
//! let input = SearchInput { query: "component".into(), limit: None, folder: None };
//! let output = search(&[dir.path()], input)?;
//! assert_eq!(output.searched_documents, 2);
//! assert_eq!(output.results.len(), 1);
//! assert_eq!(output.results[0].title, "Components");
//! assert_eq!(output.results[0].line, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod text;

pub use text::SNIPPET_CHARS;

/// Results returned when the input gives no `limit`.
pub const DEFAULT_LIMIT: u32 = 10;
/// Largest `limit` accepted.
pub const MAX_LIMIT: u32 = 50;
/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most distinct words a query may have.
pub const MAX_QUERY_TERMS: usize = 32;
/// Documents larger than this are skipped (counted in `skipped`): 1 MiB.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Files (of any kind) looked at before the walk stops and the output says
/// `truncated`.
pub const MAX_FILES: usize = 10_000;
/// Document bytes read before the walk stops and the output says
/// `truncated`: 64 MiB.
pub const MAX_TOTAL_BYTES: u64 = 64 * 1024 * 1024;
/// Directory levels below a root the walk descends.
pub const MAX_DEPTH: usize = 32;
/// File extensions searched, compared without regard to case.
pub const EXTENSIONS: [&str; 3] = ["txt", "md", "markdown"];

/// BM25 term-frequency saturation.
const K1: f64 = 1.2;
/// BM25 document-length normalization.
const B: f64 = 0.75;

/// Search the text and Markdown documents (.txt, .md, .markdown) in the
/// granted directories for words.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// Words to look for. Case and punctuation are ignored; documents that
    /// contain more of the words, and rarer ones, rank higher.
    pub query: String,
    /// Most results to return, 1 to 50; default 10.
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
    /// Search only under this directory: an absolute guest path inside a
    /// granted directory, or a path relative to the first one. Default:
    /// every granted directory.
    #[serde(default)]
    pub folder: Option<String>,
}

/// Documents matching the query, best first.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SearchOutput {
    /// The query as given.
    pub query: String,
    /// Matching documents by descending score, then by path (as bytes).
    pub results: Vec<SearchResult>,
    /// Documents read and ranked.
    pub searched_documents: u32,
    /// Documents not read: larger than 1 MiB, or unreadable.
    pub skipped: u32,
    /// Whether the walk stopped early at its cap on files or bytes, so some
    /// documents were not searched.
    pub truncated: bool,
}

/// One matching document.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SearchResult {
    /// Guest path of the document.
    pub path: String,
    /// First Markdown heading, else the file name.
    pub title: String,
    /// BM25 relevance; only comparable within one search.
    pub score: f64,
    /// 1-based line where the snippet starts: the line with the most query
    /// words.
    pub line: u32,
    /// About 200 characters from that line, whitespace collapsed.
    pub snippet: String,
}

fn run(input: SearchInput) -> Result<SearchOutput, Error> {
    search(&hane_guest::fs::grant_paths(), input)
}

hane_guest::operation! {
    name: "documents.search",
    impact: Read,
    run: run,
}

/// Searches the documents under `roots` (or under `input.folder`, which must
/// lie inside one of them).
///
/// # Errors
///
/// - [`Error::InvalidInput`] for a query without words, longer than
///   [`MAX_QUERY_BYTES`] or with more than [`MAX_QUERY_TERMS`] words, a
///   `limit` outside 1..=[`MAX_LIMIT`], or a `folder` that is not a directory;
/// - [`Error::Denied`] when there are no roots or `folder` lies outside them;
/// - [`Error::NotFound`] when `folder` does not exist.
pub fn search(roots: &[impl AsRef<Path>], input: SearchInput) -> Result<SearchOutput, Error> {
    if input.query.len() > MAX_QUERY_BYTES {
        return Err(Error::InvalidInput(format!(
            "the query is {} bytes long; at most {MAX_QUERY_BYTES} are allowed",
            input.query.len()
        )));
    }
    let terms = text::query_terms(&input.query);
    if terms.is_empty() {
        return Err(Error::InvalidInput(
            "the query has no words to search for".to_owned(),
        ));
    }
    if terms.len() > MAX_QUERY_TERMS {
        return Err(Error::InvalidInput(format!(
            "the query has {} distinct words; at most {MAX_QUERY_TERMS} are allowed",
            terms.len()
        )));
    }
    let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::InvalidInput(format!(
            "limit must be between 1 and {MAX_LIMIT}, not {limit}"
        )));
    }
    let starts = start_directories(roots, input.folder.as_deref())?;

    let mut corpus = Corpus::new(terms);
    for start in &starts {
        if !corpus.walk(start) {
            break;
        }
    }
    let results = corpus.rank(limit as usize);
    Ok(SearchOutput {
        query: input.query,
        results,
        searched_documents: corpus.documents,
        skipped: corpus.skipped,
        truncated: corpus.truncated,
    })
}

/// The directories to walk: `folder` alone, or every root not inside
/// another (so no document is counted twice).
fn start_directories(
    roots: &[impl AsRef<Path>],
    folder: Option<&str>,
) -> Result<Vec<PathBuf>, Error> {
    if let Some(folder) = folder {
        let dir = hane_guest::fs::resolve(roots, folder)?;
        let meta = fs::metadata(&dir).map_err(|e| Error::from_io(&e, folder))?;
        if !meta.is_dir() {
            return Err(Error::InvalidInput(format!("{folder} is not a directory")));
        }
        return Ok(vec![dir]);
    }
    let mut roots: Vec<PathBuf> = roots
        .iter()
        .map(|root| hane_guest::fs::resolve(roots, root.as_ref()))
        .collect::<Result<_, _>>()?;
    if roots.is_empty() {
        return Err(Error::Denied(
            "no directory is granted to this operation".to_owned(),
        ));
    }
    roots.sort();
    roots.dedup();
    let nested: Vec<bool> = roots
        .iter()
        .map(|r| roots.iter().any(|other| other != r && r.starts_with(other)))
        .collect();
    Ok(roots
        .into_iter()
        .zip(nested)
        .filter_map(|(root, nested)| (!nested).then_some(root))
        .collect())
}

/// What the search keeps of one matching document.
struct Hit {
    path: PathBuf,
    title: String,
    /// Words in the document.
    length: u32,
    /// Occurrences of each query term, in query order.
    frequencies: Vec<u32>,
    /// 0-based line with the most distinct query terms.
    line: usize,
    snippet: String,
}

/// Statistics over every document read, and the documents that matched.
struct Corpus {
    terms: Vec<String>,
    documents: u32,
    total_length: u64,
    /// Documents containing each query term, in query order.
    document_frequencies: Vec<u32>,
    hits: Vec<Hit>,
    files_seen: usize,
    bytes_read: u64,
    skipped: u32,
    truncated: bool,
}

impl Corpus {
    fn new(terms: Vec<String>) -> Self {
        Self {
            document_frequencies: vec![0; terms.len()],
            terms,
            documents: 0,
            total_length: 0,
            hits: Vec::new(),
            files_seen: 0,
            bytes_read: 0,
            skipped: 0,
            truncated: false,
        }
    }

    /// Reads the documents under `root` in path order; `false` once a cap
    /// stopped the walk.
    fn walk(&mut self, root: &Path) -> bool {
        let mut stack = vec![(root.to_path_buf(), 0)];
        while let Some((dir, depth)) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
            entries.sort_by_key(|e| e.file_name());
            let mut subdirectories = Vec::new();
            for entry in entries {
                let name = entry.file_name();
                // Hidden files and directories (.git, .cache) are not documents.
                if name.to_string_lossy().starts_with('.') {
                    continue;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    if depth < MAX_DEPTH {
                        subdirectories.push(entry.path());
                    }
                    continue;
                }
                // Symbolic links are not followed, so the walk cannot loop.
                if !kind.is_file() {
                    continue;
                }
                if self.files_seen == MAX_FILES {
                    hane_guest::log::warn(&format!("stopped after {MAX_FILES} files"));
                    self.truncated = true;
                    return false;
                }
                self.files_seen += 1;
                let path = entry.path();
                if is_document(&path) && !self.read(&path) {
                    return false;
                }
            }
            // Reversed so that the stack pops them in name order.
            stack.extend(subdirectories.into_iter().rev().map(|d| (d, depth + 1)));
        }
        true
    }

    /// Reads and indexes one document; `false` if the byte cap was reached.
    fn read(&mut self, path: &Path) -> bool {
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) => {
                self.skip(path, &e.to_string());
                return true;
            }
        };
        if meta.len() > MAX_FILE_BYTES {
            self.skip(path, "larger than 1 MiB");
            return true;
        }
        if self.bytes_read + meta.len() > MAX_TOTAL_BYTES {
            hane_guest::log::warn(&format!(
                "stopped before {}: {MAX_TOTAL_BYTES} bytes read",
                path.display()
            ));
            self.truncated = true;
            return false;
        }
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                self.skip(path, &e.to_string());
                return true;
            }
        };
        self.bytes_read += bytes.len() as u64;
        let text = String::from_utf8_lossy(&bytes);
        self.index(path, &text);
        true
    }

    fn skip(&mut self, path: &Path, why: &str) {
        self.skipped += 1;
        hane_guest::log::debug(&format!("skipped {}: {why}", path.display()));
    }

    fn index(&mut self, path: &Path, text: &str) {
        let mut length = 0u32;
        let mut frequencies = vec![0u32; self.terms.len()];
        // Best line so far: (distinct terms, occurrences, 0-based index).
        let mut best: Option<(usize, u32, usize)> = None;
        let mut in_line = vec![false; self.terms.len()];
        for (index, line) in text.lines().enumerate() {
            in_line.fill(false);
            let mut occurrences = 0u32;
            for (_, word) in text::words(line) {
                length = length.saturating_add(1);
                let word = text::lowercase(word);
                if let Some(t) = self.terms.iter().position(|t| *t == word) {
                    frequencies[t] += 1;
                    in_line[t] = true;
                    occurrences += 1;
                }
            }
            let distinct = in_line.iter().filter(|&&x| x).count();
            if distinct > 0 && best.is_none_or(|(d, o, _)| (distinct, occurrences) > (d, o)) {
                best = Some((distinct, occurrences, index));
            }
        }
        self.documents += 1;
        self.total_length += u64::from(length);
        for (df, &tf) in self.document_frequencies.iter_mut().zip(&frequencies) {
            if tf > 0 {
                *df += 1;
            }
        }
        let Some((_, _, line)) = best else {
            return;
        };
        let title = is_markdown(path)
            .then(|| text::markdown_title(text))
            .flatten()
            .unwrap_or_else(|| {
                path.file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            });
        self.hits.push(Hit {
            path: path.to_path_buf(),
            title,
            length,
            frequencies,
            line,
            snippet: text::snippet(text, line, &self.terms),
        });
    }

    /// The `limit` best hits by BM25.
    fn rank(&mut self, limit: usize) -> Vec<SearchResult> {
        let n = f64::from(self.documents);
        let average_length = if self.documents == 0 {
            1.0
        } else {
            (self.total_length as f64 / n).max(1.0)
        };
        let idf: Vec<f64> = self
            .document_frequencies
            .iter()
            .map(|&df| {
                let df = f64::from(df);
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        let mut scored: Vec<(f64, Hit)> = self
            .hits
            .drain(..)
            .map(|hit| {
                let norm = K1 * (1.0 - B + B * f64::from(hit.length) / average_length);
                let score = hit
                    .frequencies
                    .iter()
                    .zip(&idf)
                    .map(|(&tf, idf)| {
                        let tf = f64::from(tf);
                        idf * tf * (K1 + 1.0) / (tf + norm)
                    })
                    .sum();
                (score, hit)
            })
            .collect();
        scored.sort_by(|(a, hit_a), (b, hit_b)| {
            b.total_cmp(a)
                .then_with(|| hit_a.path.as_os_str().cmp(hit_b.path.as_os_str()))
        });
        scored
            .into_iter()
            .take(limit)
            .map(|(score, hit)| SearchResult {
                path: hit.path.display().to_string(),
                title: hit.title,
                // Four decimals are plenty to compare and cheaper to read.
                score: (score * 10_000.0).round() / 10_000.0,
                line: u32::try_from(hit.line + 1).unwrap_or(u32::MAX),
                snippet: hit.snippet,
            })
            .collect()
    }
}

fn extension(path: &Path) -> Option<String> {
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
}

fn is_document(path: &Path) -> bool {
    extension(path).is_some_and(|e| EXTENSIONS.contains(&e.as_str()))
}

fn is_markdown(path: &Path) -> bool {
    extension(path).is_some_and(|e| e == "md" || e == "markdown")
}

#[cfg(test)]
mod tests;
