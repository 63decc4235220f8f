//! Documents of the host's ledger, through `hane:operation/documents`.
//!
//! The host keeps sets of text documents, such as `leases`, each split into
//! pages. A document is named by its file name (`c-1001.txt`) or by its stem
//! (`c-1001`) when that is unique in its set. A call may read only the sets
//! its policy grants (`capabilities.documents` in the operation's manifest,
//! `--allow-documents` on the command line): asking for another comes back
//! as [`Error::Denied`], which the host also records in the call's receipt.
//! The host caps how much one call returns, so read long documents a few
//! pages at a time.
//!
//! # Examples
//!
//! ```no_run
//! use hane_guest::{documents, Error};
//!
//! # fn main() -> Result<(), Error> {
//! let hits = documents::search("leases", "early return", 5)?;
//! if let Some(best) = hits.first() {
//!     let pages = documents::read_pages("leases", &best.document, best.page, 1)?;
//!     hane_guest::log::info(&pages.pages[0]);
//! }
//! let summary = documents::read_summary("leases", "c-1001.txt")?;
//! assert!(summary.pages >= 1);
//! # Ok(())
//! # }
//! ```

use crate::Error;

/// A document [`search`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The document's name, such as `c-1001.txt`.
    pub document: String,
    /// Its first line.
    pub title: String,
    /// The 1-based page where most query words occur.
    pub page: u32,
    /// Text of that page around the first query word found.
    pub snippet: String,
    /// Distinct query words the document contains.
    pub matched_words: u32,
}

/// Pages [`read_pages`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pages {
    /// The document's name.
    pub document: String,
    /// The 1-based number of the first page in `pages`.
    pub first: u32,
    /// The pages' text; fewer than asked for at the end of the document or
    /// over the host's caps.
    pub pages: Vec<String>,
    /// Pages in the document.
    pub total_pages: u32,
}

/// What [`read_summary`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The document's name.
    pub document: String,
    /// Its first line.
    pub title: String,
    /// Its summary: written by its author, or its first paragraph.
    pub summary: String,
    /// Pages in the document.
    pub pages: u32,
}

/// Documents of `set` containing words of `query` (whole words, any case),
/// most matching words first, then by name; at most `limit`.
///
/// # Errors
///
/// - [`Error::Denied`] when the set is not granted to this call;
/// - [`Error::NotFound`] when the ledger has no such set;
/// - [`Error::InvalidInput`] when the query has no words or is too long;
/// - [`Error::Failed`] outside a wasm32 component.
pub fn search(set: &str, query: &str, limit: u32) -> Result<Vec<Hit>, Error> {
    host::search(set, query, limit)
}

/// Up to `count` pages of `document` from the 1-based page `first`.
///
/// # Errors
///
/// As [`search`], [`Error::NotFound`] for a document the set does not have,
/// and [`Error::InvalidInput`] when `first` is 0 or past the last page.
pub fn read_pages(set: &str, document: &str, first: u32, count: u32) -> Result<Pages, Error> {
    host::read_pages(set, document, first, count)
}

/// The title, summary and page count of `document`.
///
/// # Errors
///
/// As [`search`], and [`Error::NotFound`] for a document the set does not
/// have.
pub fn read_summary(set: &str, document: &str) -> Result<Summary, Error> {
    host::read_summary(set, document)
}

#[cfg(target_arch = "wasm32")]
mod host {
    use super::{Hit, Pages, Summary};
    use crate::Error;
    use crate::wit::hane::operation::documents;

    pub(super) fn search(set: &str, query: &str, limit: u32) -> Result<Vec<Hit>, Error> {
        let hits = documents::search(set, query, limit)?;
        Ok(hits
            .into_iter()
            .map(|hit| Hit {
                document: hit.document,
                title: hit.title,
                page: hit.page,
                snippet: hit.snippet,
                matched_words: hit.matched_words,
            })
            .collect())
    }

    pub(super) fn read_pages(
        set: &str,
        document: &str,
        first: u32,
        count: u32,
    ) -> Result<Pages, Error> {
        let pages = documents::read_pages(set, document, first, count)?;
        Ok(Pages {
            document: pages.document,
            first: pages.first,
            pages: pages.pages,
            total_pages: pages.total_pages,
        })
    }

    pub(super) fn read_summary(set: &str, document: &str) -> Result<Summary, Error> {
        let s = documents::read_summary(set, document)?;
        Ok(Summary {
            document: s.document,
            title: s.title,
            summary: s.summary,
            pages: s.pages,
        })
    }
}

// The generated imports are `unreachable!()` stubs off wasm32.
#[cfg(not(target_arch = "wasm32"))]
mod host {
    use super::{Hit, Pages, Summary};
    use crate::Error;

    fn unavailable() -> Error {
        Error::Failed("documents are only available inside a wasm32-wasip2 component".to_owned())
    }

    pub(super) fn search(_set: &str, _query: &str, _limit: u32) -> Result<Vec<Hit>, Error> {
        Err(unavailable())
    }

    pub(super) fn read_pages(
        _set: &str,
        _document: &str,
        _first: u32,
        _count: u32,
    ) -> Result<Pages, Error> {
        Err(unavailable())
    }

    pub(super) fn read_summary(_set: &str, _document: &str) -> Result<Summary, Error> {
        Err(unavailable())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_wasm_calls_fail_without_panicking() {
        assert!(
            matches!(search("leases", "term", 3), Err(Error::Failed(m)) if m.contains("only available inside"))
        );
        assert!(matches!(
            read_pages("leases", "c-1001", 1, 1),
            Err(Error::Failed(_))
        ));
        assert!(matches!(
            read_summary("leases", "c-1001"),
            Err(Error::Failed(_))
        ));
    }
}
