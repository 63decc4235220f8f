//! `documents.read_summary`: what a document of a ledger document set is
//! about: its title, summary and page count.
//!
//! The document comes from the host's `documents` capability, which lets the
//! operation read only the sets its policy grants; asking for another is
//! [`Error::Denied`]. The logic is [`read_summary`], which takes the lookup
//! as a function so it is testable off wasm; the exported operation passes
//! [`hane_guest::documents::read_summary`].
//!
//! # Examples
//!
//! ```
//! use documents_read_summary::{read_summary, ReadSummaryInput};
//! use hane_guest::documents::Summary;
//!
//! let input = ReadSummaryInput { set: "leases".into(), document: "c-1001".into() };
//! let output = read_summary(input, |_, _| {
//!     Ok(Summary {
//!         document: "c-1001.txt".into(),
//!         title: "Lease contract C-1001".into(),
//!         summary: "36 months from 1 April 2025.".into(),
//!         pages: 2,
//!     })
//! })?;
//! assert_eq!((output.document.as_str(), output.pages), ("c-1001.txt", 2));
//! # Ok::<(), hane_guest::Error>(())
//! ```

use hane_guest::Error;
use hane_guest::documents::Summary;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Read the title, summary and page count of one document.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadSummaryInput {
    /// The document set, such as "leases".
    #[schemars(regex(pattern = r"^[a-z0-9_-]{1,64}$"))]
    pub set: String,
    /// The document's file name, such as "c-1001.txt", or that name without
    /// its extension.
    #[schemars(length(min = 1, max = 256))]
    pub document: String,
}

/// What the document is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReadSummaryOutput {
    /// The document's file name, such as "c-1001.txt".
    pub document: String,
    /// Its first line.
    pub title: String,
    /// A short summary: written by its author, or its first paragraph.
    pub summary: String,
    /// How many pages it has.
    pub pages: u32,
}

fn run(input: ReadSummaryInput) -> Result<ReadSummaryOutput, Error> {
    read_summary(input, hane_guest::documents::read_summary)
}

hane_guest::operation! {
    name: "documents.read_summary",
    impact: Read,
    run: run,
}

/// Asks `summarize` (the `documents` capability, or a stand-in) about the
/// document.
///
/// # Errors
///
/// - [`Error::InvalidInput`] when `document` is empty;
/// - whatever `summarize` returns: [`Error::Denied`] for a set that is not
///   granted, [`Error::NotFound`] for a set or document the ledger does not
///   have.
pub fn read_summary(
    input: ReadSummaryInput,
    summarize: impl FnOnce(&str, &str) -> Result<Summary, Error>,
) -> Result<ReadSummaryOutput, Error> {
    if input.document.is_empty() {
        return Err(Error::InvalidInput("document must not be empty".to_owned()));
    }
    let summary = summarize(&input.set, &input.document)?;
    Ok(ReadSummaryOutput {
        document: summary.document,
        title: summary.title,
        summary: summary.summary,
        pages: summary.pages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_the_set_and_document_and_errors_through() {
        let input = || ReadSummaryInput {
            set: "leases".into(),
            document: "c-1002.txt".into(),
        };
        let out = read_summary(input(), |set, document| {
            assert_eq!((set, document), ("leases", "c-1002.txt"));
            Ok(Summary {
                document: document.into(),
                title: "t".into(),
                summary: "s".into(),
                pages: 3,
            })
        })
        .unwrap();
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            serde_json::json!({"document": "c-1002.txt", "title": "t", "summary": "s", "pages": 3})
        );
        let err =
            read_summary(input(), |_, _| Err(Error::NotFound("no document".into()))).unwrap_err();
        assert!(matches!(err, Error::NotFound(_)));
        let empty = ReadSummaryInput {
            set: "leases".into(),
            document: String::new(),
        };
        let err = read_summary(empty, |_, _| panic!("must not be called")).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)));
    }
}
