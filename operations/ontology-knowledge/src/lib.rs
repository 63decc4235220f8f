//! `ontology.knowledge`: what the release's ontology knows about an object
//! type, and the passages of its knowledge documents that answer a
//! question.
//!
//! The ontology (from [`hane_guest::records::ontology`]) defines each
//! object type and names the document sets that hold knowledge about it: a
//! whole set about the type (a handbook), or one document per object (a
//! lease's contract, named by a field of the lease). The answer gives the
//! type's definition and ranks passages from both kinds for the question:
//!
//! - a set about the type is searched with
//!   [`hane_guest::documents::search`], as is a set of per-object documents
//!   when no object `id` is given;
//! - given an `id`, the object's own document is read page by page
//!   ([`MAX_PAGES`] at most) and each page that contains question words
//!   becomes a passage around the first of them.
//!
//! A passage's score is the number of distinct question words it contains
//! (whole words, any case). Passages from the asked object's own document
//! come first (`aboutObject`), then by score, then by set, document and
//! page.
//!
//! The logic is [`find_knowledge`], which reads through a [`Ledger`] so it
//! is testable off wasm; the exported operation passes [`HostLedger`].
//!
//! # Examples
//!
//! ```
//! use hane_guest::Error;
//! use hane_guest::documents::{Hit, Pages};
//! use hane_guest::records::{Page, Query};
//! use ontology_knowledge::{find_knowledge, KnowledgeInput, Ledger};
//! use serde_json::{json, Value};
//!
//! struct Handbook;
//!
//! impl Ledger for Handbook {
//!     fn ontology(&self) -> Result<Option<Value>, Error> {
//!         Ok(Some(json!({"name": "fleet", "objectTypes": {"vehicle": {
//!             "description": "A leased vehicle", "collection": "vehicles", "key": "id",
//!             "properties": {"id": {"type": "string", "description": "Fleet number"}},
//!             "links": {}, "knowledge": [{"documents": "handbook", "from": null}]
//!         }}})))
//!     }
//!     fn query(&self, _: &Query) -> Result<Page, Error> {
//!         unreachable!("no id is given")
//!     }
//!     fn search(&self, set: &str, query: &str, limit: u32) -> Result<Vec<Hit>, Error> {
//!         assert_eq!((set, query, limit), ("handbook", "tyre pressure", 5));
//!         Ok(vec![Hit {
//!             document: "fleet-handbook.md".into(),
//!             title: "Fleet handbook".into(),
//!             page: 3,
//!             snippet: "Check the tyre pressure weekly.".into(),
//!             matched_words: 2,
//!         }])
//!     }
//!     fn read_pages(&self, _: &str, _: &str, _: u32, _: u32) -> Result<Pages, Error> {
//!         unreachable!("no id is given")
//!     }
//! }
//!
//! let input: KnowledgeInput =
//!     serde_json::from_value(json!({"type": "vehicle", "question": "tyre pressure"}))?;
//! let output = find_knowledge(input, &Handbook)?;
//! assert_eq!(output.definition.source.ontology, "fleet");
//! assert_eq!(output.knowledge[0].source.page, 3);
//! assert_eq!(output.knowledge[0].score, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use hane_guest::Error;
use hane_guest::documents::{Hit, Pages};
use hane_guest::records::{Comparison, Condition, Page, Query};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The ontology, as `ontology.query` reads it.
#[path = "../../ontology-query/src/ontology.rs"]
pub mod ontology;
mod text;

use ontology::{Link, Ontology, Property, Type, name_text};
pub use text::PASSAGE_CHARS;

/// Passages returned when the input gives no `limit`.
pub const DEFAULT_LIMIT: u32 = 5;
/// Largest `limit` accepted.
pub const MAX_LIMIT: u32 = 20;
/// Longest question accepted, in bytes.
pub const MAX_QUESTION_BYTES: usize = 1024;
/// Pages of an object's own document read at most; the rest are not
/// ranked.
pub const MAX_PAGES: u32 = 100;
/// Pages asked for in one read; the host returns at most 10.
pub const PAGES_PER_READ: u32 = 10;

/// Find what the ontology knows about an object type: its definition, and
/// the passages of its knowledge documents (reference documents, and an
/// object's own document such as a lease's contract) that best match a
/// question.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeInput {
    /// The object type, such as "lease" or "vehicle". An unknown type is
    /// answered with the types that exist.
    #[serde(rename = "type")]
    pub object_type: String,
    /// One object: its key (the property the definition names as `key`,
    /// such as a lease's contract number "C-1001") or its record id (such
    /// as "L-01"). Its own documents, such as a lease's contract, are read
    /// page by page besides the documents about the type. Default: the
    /// documents about the type, and a search of every object's documents.
    #[serde(default)]
    pub id: Option<String>,
    /// What to look for, in words the documents would use, such as "early
    /// termination fee". Case and punctuation are ignored.
    pub question: String,
    /// Most passages to return, 1 to 20; default 5.
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<u32>,
}

/// The object type's definition and the passages that match the question.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct KnowledgeOutput {
    /// The object type, as the ontology names it.
    #[serde(rename = "type")]
    pub object_type: String,
    /// What the ontology says about the type.
    pub definition: Definition,
    /// The object named by `id`, with every property typed as the ontology
    /// says; absent without `id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Map<String, Value>>,
    /// Passages that contain question words, most matched words first, then
    /// by set, document and page; empty when no document matched.
    pub knowledge: Vec<Passage>,
}

/// An object type as the ontology defines it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Definition {
    /// What an object of this type is.
    pub description: String,
    /// The property whose value names one object: what `id` may give.
    pub key: String,
    /// The properties, by name, with their types and descriptions.
    pub properties: BTreeMap<String, Property>,
    /// The links to other objects or documents, by name: `ontology.query`
    /// follows them.
    pub links: BTreeMap<String, Link>,
    /// Where the definition comes from.
    pub source: DefinitionSource,
}

/// The ontology a [`Definition`] comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct DefinitionSource {
    /// The ontology's name, such as "fleet".
    pub ontology: String,
}

/// A passage of a knowledge document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Passage {
    /// Where it is.
    pub source: PassageSource,
    /// The document's title: its first line.
    pub title: String,
    /// The text around the first question word on the page, whitespace
    /// collapsed, `…` where text was left out.
    pub text: String,
    /// Distinct question words the passage's page contains (whole words,
    /// any case); for a passage a search found, distinct question words
    /// in its whole document.
    pub score: u32,
    /// Whether the passage is from the asked object's own document; these
    /// come first.
    #[serde(rename = "aboutObject")]
    pub about_object: bool,
}

/// Where a [`Passage`] is: a page of a document of a set.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
pub struct PassageSource {
    /// The document set, such as "leases".
    pub set: String,
    /// The document's name, such as "c-1001.txt".
    pub document: String,
    /// The 1-based page.
    pub page: u32,
}

/// What [`find_knowledge`] reads through: the host's `records` and
/// `documents` capabilities ([`HostLedger`]), or a stand-in.
pub trait Ledger {
    /// The release's ontology as JSON, as
    /// [`hane_guest::records::ontology`] returns it.
    ///
    /// # Errors
    ///
    /// As [`hane_guest::records::ontology`].
    fn ontology(&self) -> Result<Option<Value>, Error>;

    /// One page of records, as [`hane_guest::records::query`] returns it.
    ///
    /// # Errors
    ///
    /// As [`hane_guest::records::query`].
    fn query(&self, query: &Query) -> Result<Page, Error>;

    /// Documents of `set` matching `query`, as
    /// [`hane_guest::documents::search`] returns them.
    ///
    /// # Errors
    ///
    /// As [`hane_guest::documents::search`].
    fn search(&self, set: &str, query: &str, limit: u32) -> Result<Vec<Hit>, Error>;

    /// Up to `count` pages of `document` from page `first`, as
    /// [`hane_guest::documents::read_pages`] returns them.
    ///
    /// # Errors
    ///
    /// As [`hane_guest::documents::read_pages`].
    fn read_pages(&self, set: &str, document: &str, first: u32, count: u32)
    -> Result<Pages, Error>;
}

/// The host's ledger, through `hane:operation/records` and `documents`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostLedger;

impl Ledger for HostLedger {
    fn ontology(&self) -> Result<Option<Value>, Error> {
        hane_guest::records::ontology()
    }

    fn query(&self, query: &Query) -> Result<Page, Error> {
        hane_guest::records::query(query)
    }

    fn search(&self, set: &str, query: &str, limit: u32) -> Result<Vec<Hit>, Error> {
        hane_guest::documents::search(set, query, limit)
    }

    fn read_pages(
        &self,
        set: &str,
        document: &str,
        first: u32,
        count: u32,
    ) -> Result<Pages, Error> {
        hane_guest::documents::read_pages(set, document, first, count)
    }
}

fn run(input: KnowledgeInput) -> Result<KnowledgeOutput, Error> {
    find_knowledge(input, &HostLedger)
}

hane_guest::operation! {
    name: "ontology.knowledge",
    impact: Read,
    run: run,
}

/// Checks `input`, then gives the type's definition and ranks the passages
/// of its knowledge documents for the question, reading through `ledger`.
///
/// # Errors
///
/// - [`Error::InvalidInput`] for an empty question, one without words or
///   longer than [`MAX_QUESTION_BYTES`], a `limit` outside 1 to
///   [`MAX_LIMIT`], an empty `id`, or a type the ontology does not have
///   (naming the ones it has);
/// - [`Error::NotFound`] when the release defines no ontology, or no object
///   of the type has the `id` as its key or record id;
/// - whatever `ledger` returns: [`Error::Denied`] for a collection or
///   document set that is not granted;
/// - [`Error::Failed`] when a record is not a JSON object.
pub fn find_knowledge<L: Ledger + ?Sized>(
    input: KnowledgeInput,
    ledger: &L,
) -> Result<KnowledgeOutput, Error> {
    let question = input.question.trim();
    if question.is_empty() {
        return Err(Error::InvalidInput(
            "the question is empty; ask about something, such as \"early termination fee\""
                .to_owned(),
        ));
    }
    if question.len() > MAX_QUESTION_BYTES {
        return Err(Error::InvalidInput(format!(
            "the question is {} bytes long; at most {MAX_QUESTION_BYTES} are allowed",
            question.len()
        )));
    }
    let words = text::question_words(question);
    if words.is_empty() {
        return Err(Error::InvalidInput(format!(
            "the question {question:?} has no words to look for"
        )));
    }
    let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::InvalidInput(format!(
            "limit must be from 1 to {MAX_LIMIT}, not {limit}"
        )));
    }
    if input.id.as_ref().is_some_and(|id| id.trim().is_empty()) {
        return Err(Error::InvalidInput(
            "`id` is empty; give an object's key, or no `id`".to_owned(),
        ));
    }
    let ontology = Ontology::from_host(ledger.ontology()?)?;
    let object_type = ontology.object_type(&input.object_type)?;
    let record = input
        .id
        .as_deref()
        .map(|id| find_object(ledger, object_type, id))
        .transpose()?;

    let mut passages = Vec::new();
    for source in &object_type.def.knowledge {
        let set = source.documents.as_str();
        let own = source.from.as_ref().zip(record.as_ref());
        if let Some((from, record)) = own {
            if let Some(document) = name_text(record.get(from)) {
                passages.extend(document_passages(ledger, set, &document, &words)?);
            }
            continue;
        }
        for hit in ledger.search(set, question, limit)? {
            if hit.matched_words > 0 {
                passages.push(Passage {
                    source: PassageSource {
                        set: set.to_owned(),
                        document: hit.document,
                        page: hit.page,
                    },
                    title: hit.title,
                    text: hit.snippet,
                    score: hit.matched_words,
                    about_object: false,
                });
            }
        }
    }
    // One passage per page, the object's own when two sources found it,
    // else the best-scored; the object's own first, then by score.
    let rank = |a: &Passage, b: &Passage| {
        b.about_object
            .cmp(&a.about_object)
            .then(b.score.cmp(&a.score))
    };
    passages.sort_by(|a, b| a.source.cmp(&b.source).then_with(|| rank(a, b)));
    passages.dedup_by(|later, kept| later.source == kept.source);
    passages.sort_by(|a, b| rank(a, b).then_with(|| a.source.cmp(&b.source)));
    passages.truncate(limit as usize);

    let def = object_type.def;
    Ok(KnowledgeOutput {
        object_type: object_type.name.to_owned(),
        definition: Definition {
            description: def.description.clone(),
            key: def.key.clone(),
            properties: def.properties.clone(),
            links: def.links.clone(),
            source: DefinitionSource {
                ontology: ontology.name.clone(),
            },
        },
        object: record.map(|record| object_type.typed_all(&record)),
        knowledge: passages,
    })
}

/// The record of `object_type` whose key is `id`, else (when the key is
/// another field) the one whose record `id` is `id`.
fn find_object<L: Ledger + ?Sized>(
    ledger: &L,
    object_type: Type<'_>,
    id: &str,
) -> Result<Map<String, Value>, Error> {
    let def = object_type.def;
    let mut fields = vec![def.key.as_str()];
    if def.key != "id" {
        fields.push("id");
    }
    for field in &fields {
        let page = ledger.query(&Query {
            collection: def.collection.clone(),
            conditions: vec![Condition {
                field: (*field).to_owned(),
                comparison: Comparison::Equal,
                value: Value::String(id.to_owned()),
            }],
            order_by: None,
            descending: false,
            after: None,
            limit: 1,
        })?;
        match page.records.into_iter().next() {
            Some(Value::Object(record)) => return Ok(record),
            Some(other) => {
                return Err(Error::Failed(format!(
                    "a record of `{}` is not a JSON object: {other}",
                    def.collection
                )));
            }
            None => {}
        }
    }
    Err(Error::NotFound(format!(
        "there is no `{}` whose `{}` is `{id}`",
        object_type.name,
        fields.join("` or `")
    )))
}

/// The pages of `document` (the first [`MAX_PAGES`]) that contain words of
/// `words`, each as a passage around the first of them.
fn document_passages<L: Ledger + ?Sized>(
    ledger: &L,
    set: &str,
    document: &str,
    words: &[String],
) -> Result<Vec<Passage>, Error> {
    let mut passages = Vec::new();
    let mut title = None;
    let mut first = 1;
    loop {
        let count = PAGES_PER_READ.min(MAX_PAGES + 1 - first);
        let read = ledger.read_pages(set, document, first, count)?;
        let title = title.get_or_insert_with(|| {
            read.pages
                .first()
                .map(|page| text::first_line(page))
                .unwrap_or_default()
        });
        for (page, text) in (read.first..).zip(&read.pages) {
            let (score, at) = text::matches(text, words);
            let Some(at) = at else {
                continue;
            };
            passages.push(Passage {
                source: PassageSource {
                    set: set.to_owned(),
                    document: read.document.clone(),
                    page,
                },
                title: title.clone(),
                text: text::passage(text, at),
                score,
                about_object: true,
            });
        }
        let returned = u32::try_from(read.pages.len()).unwrap_or(u32::MAX);
        first = read.first.saturating_add(returned);
        if returned == 0 || first > read.total_pages {
            break;
        }
        if first > MAX_PAGES {
            hane_guest::log::warn(&format!(
                "read the first {MAX_PAGES} of the {} pages of `{document}` in set `{set}`",
                read.total_pages
            ));
            break;
        }
    }
    Ok(passages)
}

#[cfg(test)]
mod tests;
