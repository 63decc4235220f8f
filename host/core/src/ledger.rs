//! [`Ledger`]: the records and documents operations read through the
//! `records` and `documents` capabilities.
//!
//! A ledger is loaded from a folder ([`Ledger::load_dir`]):
//!
//! ```text
//! records/<collection>.jsonl        one JSON object per line, each with a string `id`
//! records/<collection>.csv          a header line with an `id` column, then one record per line
//! documents/<set>/<name>.txt|.md    a document; pages are separated by form feeds (`\f`)
//! documents/<set>/<stem>.summary.txt  the summary of `<stem>.txt` or `<stem>.md` (optional)
//! ```
//!
//! The query functions ([`Ledger::find`], [`Ledger::get`],
//! [`Ledger::search`], [`Ledger::read_pages`], [`Ledger::summary`]) are pure,
//! so the host capabilities that call them stay thin and these rules are
//! tested without a sandbox. They know nothing of grants: the caller checks
//! that a collection or set is granted before asking.
//!
//! A ledger round-trips through postcard (records are kept as their JSON
//! text, see [`JsonText`]), so it can be sent to a worker as it is.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::JsonText;
use crate::file::{FileCap, ReadProblem, read_capped_text};
use crate::ontology::Ontology;

mod query;

pub use query::{Comparison, FieldCondition, MAX_CONDITIONS, QueryPage, RecordQuery};

/// Longest collection or document set name, in bytes.
pub const MAX_NAME_LEN: usize = 64;
/// Largest record: 64 KiB of JSON (a JSONL line, or a CSV row as a JSON
/// object). Records are handed to guests whole, so one must stay small.
pub const MAX_RECORD_BYTES: usize = 64 * 1024;
/// Most records in one collection. Queries scan a collection, so this bounds
/// the work of one call.
pub const MAX_RECORDS_PER_COLLECTION: usize = 100_000;
/// Largest collection file (`records/*.jsonl`, `records/*.csv`): 128 MiB,
/// room for [`MAX_RECORDS_PER_COLLECTION`] records of over a KiB each. A
/// ledger is held in memory whole.
pub const MAX_COLLECTION_BYTES: u64 = 128 << 20;
/// Largest document (or summary file): 8 MiB.
pub const MAX_DOCUMENT_BYTES: u64 = 8 * 1024 * 1024;
/// Most documents in one set. A search reads every document of its set.
pub const MAX_DOCUMENTS_PER_SET: usize = 10_000;
/// Longest summary, in characters; a longer one is cut and ends with `…`.
pub const MAX_SUMMARY_CHARS: usize = 1000;
/// Longest title, in characters; a longer one is cut and ends with `…`.
pub const MAX_TITLE_CHARS: usize = 200;
/// Longest search snippet, in characters.
pub const MAX_SNIPPET_CHARS: usize = 240;
/// Most pages one [`Ledger::read_pages`] returns; asking for more returns
/// this many.
pub const MAX_PAGES_PER_READ: u32 = 10;
/// Query words a search uses; later ones are ignored.
pub const MAX_QUERY_WORDS: usize = 32;

/// The file name of a summary is the document's stem and this suffix.
const SUMMARY_SUFFIX: &str = ".summary.txt";
const FORM_FEED: char = '\x0c';

/// Whether `name` may name a collection or a document set: 1 to
/// [`MAX_NAME_LEN`] of `a-z`, `0-9`, `_` and `-`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The records and documents operations may read, by collection and by
/// document set. Which of them a call may touch is its policy's business
/// (`records` and `documents` grants), not the ledger's.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Ledger {
    /// Collections of records, by name.
    pub collections: BTreeMap<String, Collection>,
    /// Sets of documents, by name.
    pub document_sets: BTreeMap<String, DocumentSet>,
    /// The object types over the collections, when the release defines
    /// them; checked against this ledger ([`Ontology::check`]).
    pub ontology: Option<Ontology>,
}

/// Records in the order of their file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Collection {
    /// The records; ids are unique.
    pub records: Vec<Record>,
    /// The fields [`Ledger::query`] has read so far; built on demand, never
    /// stored.
    #[serde(skip)]
    columns: query::Columns,
}

impl Collection {
    /// A collection of `records`, whose ids must be unique.
    pub fn new(records: Vec<Record>) -> Self {
        Self {
            records,
            columns: query::Columns::default(),
        }
    }
}

/// One record: a JSON object with a string `id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The record's `id` field.
    pub id: String,
    /// The whole object as JSON text, fields in the order of the file.
    pub json: JsonText,
}

/// Documents by name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DocumentSet {
    /// The documents, by file name such as `c-1001.txt`.
    pub documents: BTreeMap<String, Document>,
}

/// One document, split into pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// The first line (without Markdown `#`s), at most [`MAX_TITLE_CHARS`].
    pub title: String,
    /// From the summary file, or the first paragraph of the first page; at
    /// most [`MAX_SUMMARY_CHARS`].
    pub summary: String,
    /// The pages (text between form feeds), at least one.
    pub pages: Vec<String>,
}

/// A ledger folder that could not be loaded: the file, the 1-based line for
/// records, and what is wrong. Displays as `FILE[:LINE]: problem`.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {problem}", .path.display(), LineSuffix(*.line))]
pub struct LedgerError {
    /// The file or folder at fault.
    pub path: PathBuf,
    /// The 1-based line in a records file, where the record starts.
    pub line: Option<usize>,
    /// What is wrong.
    pub problem: LedgerProblem,
}

struct LineSuffix(Option<usize>);

impl fmt::Display for LineSuffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(line) => write!(f, ":{line}"),
            None => Ok(()),
        }
    }
}

/// What is wrong in a [`LedgerError`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerProblem {
    /// The file or folder could not be read.
    #[error("cannot read: {0}")]
    Io(io::Error),
    /// The ledger folder itself is not a folder.
    #[error("not a folder")]
    NotAFolder,
    /// A file or folder that does not belong where it is.
    #[error("unexpected {0}")]
    Unexpected(&'static str),
    /// A collection or set name outside `[a-z0-9_-]+`.
    #[error("invalid name `{0}`: names are 1 to 64 of a-z, 0-9, `_` and `-`")]
    Name(String),
    /// Two files define the same collection.
    #[error("collection `{name}` is also defined by `{other}`")]
    DuplicateCollection {
        /// The collection.
        name: String,
        /// The other file's name.
        other: String,
    },
    /// A line is not JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// A line is JSON but not an object.
    #[error("a record must be a JSON object")]
    NotAnObject,
    /// A record without a usable `id`.
    #[error("the record has no `id`; every record needs a non-empty string `id`")]
    NoId,
    /// `id` is there but not a non-empty string.
    #[error("`id` must be a non-empty string")]
    IdNotAString,
    /// An id already used in the collection.
    #[error("duplicate id `{id}` (first at line {first})")]
    DuplicateId {
        /// The id.
        id: String,
        /// The line of the record that has it first.
        first: usize,
    },
    /// CSV quoting that RFC 4180 does not allow.
    #[error("bad CSV quoting: {0}")]
    CsvQuoting(&'static str),
    /// A CSV row with another number of cells than the header.
    #[error("{found} cell{} but the header has {expected}", plural(*.found))]
    CellCount {
        /// Cells in the header.
        expected: usize,
        /// Cells in the row.
        found: usize,
    },
    /// A CSV header without an `id` column.
    #[error("the header has no `id` column")]
    NoIdColumn,
    /// A CSV header naming a column twice, or not at all.
    #[error("column {column} of the header is {problem}")]
    BadColumn {
        /// 1-based column.
        column: usize,
        /// `empty`, or `a second `name``.
        problem: String,
    },
    /// A record larger than [`MAX_RECORD_BYTES`].
    #[error("the record is {0} bytes; at most {MAX_RECORD_BYTES} are allowed")]
    RecordTooLarge(usize),
    /// More than [`MAX_RECORDS_PER_COLLECTION`] records.
    #[error("more than {MAX_RECORDS_PER_COLLECTION} records in one collection")]
    TooManyRecords,
    /// Not a regular file, or larger than its cap
    /// ([`MAX_COLLECTION_BYTES`], [`MAX_DOCUMENT_BYTES`]), or not UTF-8.
    #[error("{0}")]
    Read(ReadProblem),
    /// More than [`MAX_DOCUMENTS_PER_SET`] documents.
    #[error("more than {MAX_DOCUMENTS_PER_SET} documents in one set")]
    TooManyDocuments,
    /// A summary file without its document.
    #[error("a summary of no document: expected `{0}.txt` or `{0}.md` beside it")]
    OrphanSummary(String),
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A query the ledger cannot answer. [`QueryError::is_not_found`] tells
/// missing things apart from bad requests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// No collection of that name.
    #[error("the ledger has no collection `{0}`")]
    NoCollection(String),
    /// No document set of that name.
    #[error("the ledger has no document set `{0}`")]
    NoDocumentSet(String),
    /// No document of that name in the set.
    #[error("document set `{set}` has no document `{document}`")]
    NoDocument {
        /// The set.
        set: String,
        /// The name asked for.
        document: String,
    },
    /// A first page past the end of the document.
    #[error("page {page} is out of range: `{document}` has {pages} page{}", plural(*.pages as usize))]
    PageOutOfRange {
        /// The document.
        document: String,
        /// The page asked for.
        page: u32,
        /// Pages in the document.
        pages: u32,
    },
    /// The request itself is malformed, such as an empty search query.
    #[error("{0}")]
    Invalid(String),
}

impl QueryError {
    /// Whether the collection, set or document asked for does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            QueryError::NoCollection(_)
                | QueryError::NoDocumentSet(_)
                | QueryError::NoDocument { .. }
        )
    }
}

/// Records a [`Ledger::find`] matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found<'a> {
    /// The first matches, in the collection's order.
    pub records: Vec<&'a Record>,
    /// Whether more records matched than were returned.
    pub truncated: bool,
}

/// A document a [`Ledger::search`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentHit {
    /// The document's name, such as `c-1001.txt`.
    pub document: String,
    /// Its title.
    pub title: String,
    /// The 1-based page where most query words occur (the first such page).
    pub page: u32,
    /// Text of that page around the first query word found, at most
    /// [`MAX_SNIPPET_CHARS`].
    pub snippet: String,
    /// How many distinct query words the document contains.
    pub matched_words: u32,
}

/// Pages a [`Ledger::read_pages`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pages<'a> {
    /// The document's name.
    pub document: &'a str,
    /// The 1-based number of the first page returned.
    pub first: u32,
    /// The pages, at most [`MAX_PAGES_PER_READ`].
    pub pages: &'a [String],
    /// Pages in the document.
    pub total_pages: u32,
}

/// What [`Ledger::summary`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary<'a> {
    /// The document's name.
    pub document: &'a str,
    /// Its title.
    pub title: &'a str,
    /// Its summary.
    pub summary: &'a str,
    /// Pages in the document.
    pub pages: u32,
}

impl Ledger {
    /// Loads `dir/records/` and `dir/documents/` (see the [module
    /// docs](self)). A missing `records/` or `documents/` folder means no
    /// collections or no document sets. Files whose names start with `.`
    /// are ignored; any other file that is not a collection, a document or
    /// a summary is an error, so nothing an operator put there is silently
    /// left out.
    ///
    /// # Errors
    ///
    /// The first problem found, naming the file and, in a records file, the
    /// line: unreadable files, invalid names, lines that are not JSON
    /// objects, records without an `id` or with one already used, bad CSV
    /// quoting, rows with the wrong number of cells, and anything over the
    /// size caps ([`MAX_RECORD_BYTES`], [`MAX_RECORDS_PER_COLLECTION`],
    /// [`MAX_DOCUMENT_BYTES`], [`MAX_DOCUMENTS_PER_SET`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let ledger = hane_core::Ledger::load_dir("examples/ledger".as_ref())?;
    /// let v1 = ledger.get("vehicles", "V-001")?.expect("a record");
    /// println!("{}", v1.json);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_dir(dir: &Path) -> Result<Ledger, LedgerError> {
        if !dir.is_dir() {
            return Err(fail(dir, None, LedgerProblem::NotAFolder));
        }
        let mut ledger = Ledger::default();
        let mut sources: HashMap<String, String> = HashMap::new();
        for entry in list(&dir.join("records"))? {
            if entry.is_dir {
                return Err(entry.fail(LedgerProblem::Unexpected(
                    "folder: records/ holds `<collection>.jsonl` and `<collection>.csv` files",
                )));
            }
            let (name, csv) = if let Some(stem) = entry.name.strip_suffix(".jsonl") {
                (stem, false)
            } else if let Some(stem) = entry.name.strip_suffix(".csv") {
                (stem, true)
            } else {
                return Err(entry.fail(LedgerProblem::Unexpected(
                    "file: records/ holds `<collection>.jsonl` and `<collection>.csv` files",
                )));
            };
            if !is_valid_name(name) {
                return Err(entry.fail(LedgerProblem::Name(name.to_owned())));
            }
            if let Some(other) = sources.insert(name.to_owned(), entry.name.clone()) {
                return Err(entry.fail(LedgerProblem::DuplicateCollection {
                    name: name.to_owned(),
                    other,
                }));
            }
            let text = read_text(&entry.path, FileCap::COLLECTION)?;
            let collection = if csv {
                parse_csv(&entry.path, &text)?
            } else {
                parse_jsonl(&entry.path, &text)?
            };
            ledger.collections.insert(name.to_owned(), collection);
        }
        for entry in list(&dir.join("documents"))? {
            if !entry.is_dir {
                return Err(entry.fail(LedgerProblem::Unexpected(
                    "file: documents/ holds one folder per document set",
                )));
            }
            if !is_valid_name(&entry.name) {
                return Err(entry.fail(LedgerProblem::Name(entry.name.clone())));
            }
            let set = load_set(&entry.path)?;
            ledger.document_sets.insert(entry.name, set);
        }
        Ok(ledger)
    }

    fn collection(&self, name: &str) -> Result<&Collection, QueryError> {
        self.collections
            .get(name)
            .ok_or_else(|| QueryError::NoCollection(name.to_owned()))
    }

    fn document_set(&self, name: &str) -> Result<&DocumentSet, QueryError> {
        self.document_sets
            .get(name)
            .ok_or_else(|| QueryError::NoDocumentSet(name.to_owned()))
    }

    /// The first `limit` records of `collection` whose fields equal every
    /// `(field, value)` pair, in the collection's order.
    ///
    /// Fields are top-level fields of the record. Values compare as JSON:
    /// numbers by value (`1` equals `1.0`), and a string equals a number
    /// when it is that number's text, because CSV cells are always strings
    /// (`"48210"` matches `48210`). Strings compare exactly.
    ///
    /// # Errors
    ///
    /// [`QueryError::NoCollection`], or [`QueryError::Invalid`] when
    /// `fields` is empty.
    pub fn find<'a>(
        &'a self,
        collection: &str,
        fields: &[(String, Value)],
        limit: usize,
    ) -> Result<Found<'a>, QueryError> {
        let collection = self.collection(collection)?;
        if fields.is_empty() {
            return Err(QueryError::Invalid(
                "give at least one field to match".to_owned(),
            ));
        }
        let mut found = Found {
            records: Vec::new(),
            truncated: false,
        };
        // The records a field's column says may match, else all of them;
        // each is compared in full either way.
        let candidates = collection.equal_candidates(fields);
        let records: Box<dyn Iterator<Item = &Record>> = match &candidates {
            Some(positions) => Box::new(positions.iter().map(|&p| &collection.records[p as usize])),
            None => Box::new(collection.records.iter()),
        };
        for record in records {
            let Ok(Value::Object(object)) = record.json.to_value() else {
                continue;
            };
            let matches = fields.iter().all(|(field, expected)| {
                object
                    .get(field)
                    .is_some_and(|actual| json_equal(actual, expected))
            });
            if !matches {
                continue;
            }
            if found.records.len() == limit {
                found.truncated = true;
                break;
            }
            found.records.push(record);
        }
        Ok(found)
    }

    /// The record of `collection` whose `id` is `id`, if any.
    ///
    /// # Errors
    ///
    /// [`QueryError::NoCollection`].
    pub fn get<'a>(&'a self, collection: &str, id: &str) -> Result<Option<&'a Record>, QueryError> {
        let collection = self.collection(collection)?;
        Ok(collection.records.iter().find(|r| r.id == id))
    }

    /// Documents of `set` that contain words of `query`, most matching
    /// words first, then by name; at most `limit`.
    ///
    /// Words are runs of letters and digits, compared case-insensitively;
    /// a document matches a query word when it contains it as a whole word.
    ///
    /// # Errors
    ///
    /// [`QueryError::NoDocumentSet`], or [`QueryError::Invalid`] when the
    /// query has no words.
    pub fn search(
        &self,
        set: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<DocumentHit>, QueryError> {
        let documents = self.document_set(set)?;
        let mut wanted: Vec<String> = Vec::new();
        for (_, word) in words(query) {
            if !wanted.contains(&word) && wanted.len() < MAX_QUERY_WORDS {
                wanted.push(word);
            }
        }
        if wanted.is_empty() {
            return Err(QueryError::Invalid(
                "the query has no words to search for".to_owned(),
            ));
        }
        let mut hits = Vec::new();
        for (name, document) in &documents.documents {
            if let Some(hit) = search_document(name, document, &wanted) {
                hits.push(hit);
            }
        }
        // Names are unique and the map is ordered, so a stable sort by the
        // count keeps names in order among equals.
        hits.sort_by_key(|hit| std::cmp::Reverse(hit.matched_words));
        hits.truncate(limit);
        Ok(hits)
    }

    /// Up to `count` pages of `document` in `set` from the 1-based page
    /// `first`; never more than [`MAX_PAGES_PER_READ`], nor past the last
    /// page. `document` is the file name, or its stem when that is unique
    /// (`c-1001` for `c-1001.txt`).
    ///
    /// # Errors
    ///
    /// [`QueryError::NoDocumentSet`], [`QueryError::NoDocument`],
    /// [`QueryError::PageOutOfRange`], or [`QueryError::Invalid`] when
    /// `first` or `count` is 0.
    pub fn read_pages<'a>(
        &'a self,
        set: &str,
        document: &str,
        first: u32,
        count: u32,
    ) -> Result<Pages<'a>, QueryError> {
        if first == 0 {
            return Err(QueryError::Invalid("pages are numbered from 1".to_owned()));
        }
        if count == 0 {
            return Err(QueryError::Invalid(
                "the page count must be at least 1".to_owned(),
            ));
        }
        let (name, doc) = self.document(set, document)?;
        let total = to_u32(doc.pages.len());
        if first > total {
            return Err(QueryError::PageOutOfRange {
                document: name.to_owned(),
                page: first,
                pages: total,
            });
        }
        let start = first as usize - 1;
        let end = (start + count.min(MAX_PAGES_PER_READ) as usize).min(doc.pages.len());
        Ok(Pages {
            document: name,
            first,
            pages: &doc.pages[start..end],
            total_pages: total,
        })
    }

    /// The title, summary and page count of `document` in `set` (named as
    /// for [`Ledger::read_pages`]).
    ///
    /// # Errors
    ///
    /// [`QueryError::NoDocumentSet`] or [`QueryError::NoDocument`].
    pub fn summary<'a>(&'a self, set: &str, document: &str) -> Result<Summary<'a>, QueryError> {
        let (name, doc) = self.document(set, document)?;
        Ok(Summary {
            document: name,
            title: &doc.title,
            summary: &doc.summary,
            pages: to_u32(doc.pages.len()),
        })
    }

    /// The document named `name` (or with that unique stem) in `set`.
    fn document<'a>(
        &'a self,
        set: &str,
        name: &str,
    ) -> Result<(&'a str, &'a Document), QueryError> {
        let documents = &self.document_set(set)?.documents;
        if let Some((key, doc)) = documents.get_key_value(name) {
            return Ok((key, doc));
        }
        let mut by_stem = documents.iter().filter(|(key, _)| stem(key) == name);
        match (by_stem.next(), by_stem.next()) {
            (Some((key, doc)), None) => Ok((key, doc)),
            _ => Err(QueryError::NoDocument {
                set: set.to_owned(),
                document: name.to_owned(),
            }),
        }
    }
}

/// The file name without `.txt` or `.md`.
fn stem(name: &str) -> &str {
    name.strip_suffix(".txt")
        .or_else(|| name.strip_suffix(".md"))
        .unwrap_or(name)
}

/// Counts here are bounded by the size caps, far below `u32::MAX`.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// JSON equality with numbers compared by value and numeric strings equal
/// to their number.
fn json_equal(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Number(a), Value::Number(b)) => numbers_equal(a, b),
        (Value::String(s), Value::Number(n)) | (Value::Number(n), Value::String(s)) => s
            .trim()
            .parse::<serde_json::Number>()
            .is_ok_and(|parsed| numbers_equal(&parsed, n)),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, x)| b.get(k).is_some_and(|y| json_equal(x, y)))
        }
        _ => actual == expected,
    }
}

fn numbers_equal(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x == y;
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return x == y;
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// The words of `text`, lowercased, with their byte ranges in `text`.
fn words(text: &str) -> impl Iterator<Item = (Range<usize>, String)> + '_ {
    let mut chars = text.char_indices().peekable();
    std::iter::from_fn(move || {
        let (start, _) = chars.by_ref().find(|(_, c)| c.is_alphanumeric())?;
        let mut end = text.len();
        while let Some(&(i, c)) = chars.peek() {
            if !c.is_alphanumeric() {
                end = i;
                break;
            }
            chars.next();
        }
        Some((start..end, text[start..end].to_lowercase()))
    })
}

fn search_document(name: &str, document: &Document, wanted: &[String]) -> Option<DocumentHit> {
    let mut all = vec![false; wanted.len()];
    // (page index, words matched on it, byte offset of its first match)
    let mut best: Option<(usize, usize, usize)> = None;
    for (index, page) in document.pages.iter().enumerate() {
        let mut seen = vec![false; wanted.len()];
        let mut first = None;
        for (range, word) in words(page) {
            if let Some(i) = wanted.iter().position(|w| *w == word) {
                seen[i] = true;
                all[i] = true;
                first.get_or_insert(range.start);
            }
        }
        let count = seen.iter().filter(|s| **s).count();
        if let Some(offset) = first
            && best.is_none_or(|(_, most, _)| count > most)
        {
            best = Some((index, count, offset));
        }
    }
    let (index, _, offset) = best?;
    Some(DocumentHit {
        document: name.to_owned(),
        title: document.title.clone(),
        page: to_u32(index + 1),
        snippet: snippet(&document.pages[index], offset),
        matched_words: to_u32(all.iter().filter(|s| **s).count()),
    })
}

/// Text around the byte `offset` of `page`, whitespace collapsed, at most
/// [`MAX_SNIPPET_CHARS`] characters with `…` where it was cut.
fn snippet(page: &str, offset: usize) -> String {
    const BEFORE: usize = 60;
    let start = page[..offset]
        .char_indices()
        .rev()
        .nth(BEFORE - 1)
        .map_or(0, |(i, _)| i);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    let budget = MAX_SNIPPET_CHARS - out.chars().count();
    // Only as much of the page as a snippet can show is copied: twice the
    // budget leaves room for the whitespace that collapses.
    let rest = &page[start..];
    let end = rest
        .char_indices()
        .nth(budget * 2)
        .map_or(rest.len(), |(i, _)| i);
    let mut text = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
    if end < rest.len() {
        text.push_str(" …");
    }
    out.push_str(&cap_chars(&text, budget));
    out
}

/// `text` cut to at most `max` characters, the last one `…` when cut.
fn cap_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some(_) => {
            let end = text
                .char_indices()
                .nth(max.saturating_sub(1))
                .map_or(0, |(i, _)| i);
            format!("{}…", text[..end].trim_end())
        }
    }
}

fn fail(path: &Path, line: Option<usize>, problem: LedgerProblem) -> LedgerError {
    LedgerError {
        path: path.to_owned(),
        line,
        problem,
    }
}

/// An entry of a ledger folder.
struct Entry {
    name: String,
    path: PathBuf,
    is_dir: bool,
}

impl Entry {
    fn fail(&self, problem: LedgerProblem) -> LedgerError {
        fail(&self.path, None, problem)
    }
}

/// The entries of `dir` by name, without dotfiles; none when `dir` does not
/// exist.
fn list(dir: &Path) -> Result<Vec<Entry>, LedgerError> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(fail(dir, None, LedgerProblem::Io(e))),
    };
    let mut entries = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| fail(dir, None, LedgerProblem::Io(e)))?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(fail(
                &path,
                None,
                LedgerProblem::Unexpected("file name that is not UTF-8"),
            ));
        };
        if name.starts_with('.') {
            continue;
        }
        // Follows symlinks, so a linked folder or file counts as what it
        // points to.
        let meta = std::fs::metadata(&path).map_err(|e| fail(&path, None, LedgerProblem::Io(e)))?;
        entries.push(Entry {
            name,
            path,
            is_dir: meta.is_dir(),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// A whole UTF-8 file, without a byte-order mark, of at most `cap`.
fn read_text(path: &Path, cap: FileCap) -> Result<String, LedgerError> {
    read_capped_text(path, cap).map_err(|e| {
        let problem = match e.problem {
            ReadProblem::Io(e) => LedgerProblem::Io(e),
            problem => LedgerProblem::Read(problem),
        };
        fail(path, None, problem)
    })
}

/// Collects records, checking ids and caps.
struct Records<'a> {
    path: &'a Path,
    records: Vec<Record>,
    first_line: HashMap<String, usize>,
}

impl<'a> Records<'a> {
    fn new(path: &'a Path) -> Self {
        Self {
            path,
            records: Vec::new(),
            first_line: HashMap::new(),
        }
    }

    fn push(&mut self, line: usize, id: String, json: String) -> Result<(), LedgerError> {
        let err = |problem| fail(self.path, Some(line), problem);
        if json.len() > MAX_RECORD_BYTES {
            return Err(err(LedgerProblem::RecordTooLarge(json.len())));
        }
        if let Some(&first) = self.first_line.get(&id) {
            return Err(err(LedgerProblem::DuplicateId { id, first }));
        }
        if self.records.len() == MAX_RECORDS_PER_COLLECTION {
            return Err(err(LedgerProblem::TooManyRecords));
        }
        let json = JsonText::parse(json).map_err(|e| err(LedgerProblem::NotJson(e.to_string())))?;
        self.first_line.insert(id.clone(), line);
        self.records.push(Record { id, json });
        Ok(())
    }

    fn finish(self) -> Collection {
        Collection::new(self.records)
    }
}

fn parse_jsonl(path: &Path, text: &str) -> Result<Collection, LedgerError> {
    let mut records = Records::new(path);
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let err = |problem| fail(path, Some(number), problem);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.len() > MAX_RECORD_BYTES {
            return Err(err(LedgerProblem::RecordTooLarge(line.len())));
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            // serde_json ends its message with the position; the line is
            // ours, the column is what helps.
            let message = e.to_string();
            let message = message
                .find(" at line ")
                .map_or(message.as_str(), |i| &message[..i]);
            err(LedgerProblem::NotJson(format!(
                "{message} at column {}",
                e.column()
            )))
        })?;
        let Value::Object(object) = value else {
            return Err(err(LedgerProblem::NotAnObject));
        };
        let id = match object.get("id") {
            None => return Err(err(LedgerProblem::NoId)),
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            Some(_) => return Err(err(LedgerProblem::IdNotAString)),
        };
        records.push(number, id, line.to_owned())?;
    }
    Ok(records.finish())
}

fn parse_csv(path: &Path, text: &str) -> Result<Collection, LedgerError> {
    let rows = csv_rows(text)
        .map_err(|(line, problem)| fail(path, Some(line), LedgerProblem::CsvQuoting(problem)))?;
    let mut rows = rows.into_iter();
    let Some((header_line, header)) = rows.next() else {
        return Ok(Collection::default());
    };
    let header_err = |problem| fail(path, Some(header_line), problem);
    for (i, name) in header.iter().enumerate() {
        if name.is_empty() {
            return Err(header_err(LedgerProblem::BadColumn {
                column: i + 1,
                problem: "empty".to_owned(),
            }));
        }
        if header[..i].contains(name) {
            return Err(header_err(LedgerProblem::BadColumn {
                column: i + 1,
                problem: format!("a second `{name}`"),
            }));
        }
    }
    let id_column = header
        .iter()
        .position(|name| name == "id")
        .ok_or_else(|| header_err(LedgerProblem::NoIdColumn))?;
    let mut records = Records::new(path);
    for (line, cells) in rows {
        if cells.len() != header.len() {
            return Err(fail(
                path,
                Some(line),
                LedgerProblem::CellCount {
                    expected: header.len(),
                    found: cells.len(),
                },
            ));
        }
        if cells[id_column].is_empty() {
            return Err(fail(path, Some(line), LedgerProblem::IdNotAString));
        }
        // Built by hand to keep the header's order.
        let mut json = String::from("{");
        for (i, (name, cell)) in header.iter().zip(&cells).enumerate() {
            if i > 0 {
                json.push(',');
            }
            json.push_str(&Value::from(name.as_str()).to_string());
            json.push(':');
            json.push_str(&Value::from(cell.as_str()).to_string());
        }
        json.push('}');
        records.push(line, cells[id_column].clone(), json)?;
    }
    Ok(records.finish())
}

/// A CSV row: the line it starts on and its cells.
type CsvRow = (usize, Vec<String>);

/// The rows of an RFC 4180 CSV text, each with the 1-based line it starts
/// on. Lines end with `\n` or `\r\n`; blank lines are skipped; a quoted cell
/// may hold commas, line breaks and `""` for a quote.
fn csv_rows(text: &str) -> Result<Vec<CsvRow>, (usize, &'static str)> {
    let mut rows = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    loop {
        // Blank lines between rows.
        match chars.peek() {
            None => return Ok(rows),
            Some('\n') => {
                chars.next();
                line += 1;
                continue;
            }
            Some('\r') => {
                chars.next();
                continue;
            }
            Some(_) => {}
        }
        let start = line;
        let mut cells = Vec::new();
        loop {
            let mut cell = String::new();
            if chars.peek() == Some(&'"') {
                chars.next();
                let opened = line;
                loop {
                    match chars.next() {
                        None => return Err((opened, "a quoted cell is not closed")),
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            cell.push('"');
                        }
                        Some('"') => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            cell.push(c);
                        }
                    }
                }
                if !matches!(chars.peek(), None | Some(',' | '\n' | '\r')) {
                    return Err((
                        line,
                        "text after a closing quote; write a quote inside a quoted cell as `\"\"`",
                    ));
                }
            } else {
                while let Some(&c) = chars.peek() {
                    match c {
                        ',' | '\n' | '\r' => break,
                        '"' => {
                            return Err((
                                line,
                                "a quote in an unquoted cell; quote the whole cell and write the quote as `\"\"`",
                            ));
                        }
                        _ => {
                            cell.push(c);
                            chars.next();
                        }
                    }
                }
            }
            cells.push(cell);
            match chars.next() {
                Some(',') => {}
                Some('\r') => {
                    if chars.peek() == Some(&'\n') {
                        chars.next();
                    }
                    line += 1;
                    break;
                }
                Some('\n') => {
                    line += 1;
                    break;
                }
                // The text ended, or the unreachable: cells end only at
                // the characters above.
                _ => break,
            }
        }
        rows.push((start, cells));
    }
}

fn load_set(dir: &Path) -> Result<DocumentSet, LedgerError> {
    let mut set = DocumentSet::default();
    let mut summaries = Vec::new();
    for entry in list(dir)? {
        if entry.is_dir {
            return Err(entry.fail(LedgerProblem::Unexpected(
                "folder: a document set holds `.txt` and `.md` documents",
            )));
        }
        if let Some(stem) = entry.name.strip_suffix(SUMMARY_SUFFIX) {
            summaries.push((stem.to_owned(), entry.path));
            continue;
        }
        let markdown = entry.name.ends_with(".md");
        if !markdown && !entry.name.ends_with(".txt") {
            return Err(entry.fail(LedgerProblem::Unexpected(
                "file: a document set holds `.txt` and `.md` documents and `<name>.summary.txt` summaries",
            )));
        }
        if set.documents.len() == MAX_DOCUMENTS_PER_SET {
            return Err(entry.fail(LedgerProblem::TooManyDocuments));
        }
        let text = read_text(&entry.path, FileCap::DOCUMENT)?;
        set.documents
            .insert(entry.name, Document::from_text(&text, markdown));
    }
    for (stem_name, path) in summaries {
        let text = read_text(&path, FileCap::DOCUMENT)?;
        let summary = cap_chars(&collapse(&text), MAX_SUMMARY_CHARS);
        let mut any = false;
        for (name, document) in &mut set.documents {
            if stem(name) == stem_name {
                document.summary.clone_from(&summary);
                any = true;
            }
        }
        if !any {
            return Err(fail(&path, None, LedgerProblem::OrphanSummary(stem_name)));
        }
    }
    Ok(set)
}

/// Lines trimmed and joined with single spaces.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Document {
    /// A document from its text: pages split at form feeds (a form feed
    /// that ends the text opens no empty page), the title from the first
    /// non-blank line, the summary from the first paragraph of the first
    /// page. In Markdown (`markdown`), `#` marks are dropped from the title
    /// and heading lines are not part of the summary.
    pub fn from_text(text: &str, markdown: bool) -> Self {
        let text = text.replace("\r\n", "\n");
        let mut pages: Vec<String> = text
            .split(FORM_FEED)
            .map(|page| page.trim_matches(['\n', '\r']).to_owned())
            .collect();
        if pages.len() > 1 && pages.last().is_some_and(|p| p.trim().is_empty()) {
            pages.pop();
        }
        let heading = |line: &str| markdown && line.trim_start().starts_with('#');
        let title = pages
            .iter()
            .flat_map(|p| p.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| {
                if markdown {
                    l.trim_start_matches('#').trim()
                } else {
                    l
                }
            })
            .unwrap_or_default();
        let mut summary = String::new();
        let mut paragraph = Vec::new();
        for line in pages[0].lines().chain([""]) {
            if !line.trim().is_empty() {
                if !heading(line) {
                    paragraph.push(line.trim());
                }
            } else if !paragraph.is_empty() {
                summary = paragraph.join(" ");
                break;
            }
        }
        Document {
            title: cap_chars(title, MAX_TITLE_CHARS),
            summary: cap_chars(&summary, MAX_SUMMARY_CHARS),
            pages,
        }
    }
}

#[cfg(test)]
mod tests;
