//! The `hane:operation/documents` capability: search and read the
//! [`Ledger`]'s document sets that the call's policy grants.
//!
//! As with [`records`](crate::records), a call reads the ledger the sandbox
//! held when it started; a set that is not granted returns the WIT `denied`
//! error and is recorded as a denial in the receipt; everything the guest
//! passes in is capped by the constants below and by those of
//! [`hane_core::ledger`] (pages per read, query words).

use std::sync::Arc;

use hane_core::{Ledger, Policy};
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::hane::operation::documents::{self, Hit, Pages, Summary};
use crate::bindings::hane::operation::types::Error;
use crate::records::MAX_KEY_BYTES;
use crate::state::{Incidents, NameGrant, NamedCapability, query_error};

/// Most documents one `search` returns; a larger `limit` is lowered to this.
pub const MAX_SEARCH_LIMIT: u32 = 50;
/// Longest search query, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most bytes of text one `read-pages` returns: 1 MiB. The first page is
/// always returned; later pages that would pass this are left for the next
/// read.
pub const MAX_READ_BYTES: usize = 1024 * 1024;

/// The `documents` state of one call: the ledger it reads, the sets it may
/// read, and how many calls it made.
pub(crate) struct DocumentsCtx {
    ledger: Arc<Ledger>,
    grant: NameGrant,
    calls: u32,
}

impl DocumentsCtx {
    /// Calls of the import so far, for the receipt.
    pub(crate) fn calls(&self) -> u32 {
        self.calls
    }
}

/// Builds a [`DocumentsCtx`]; each method documents its default.
#[derive(Default)]
pub(crate) struct DocumentsCtxBuilder {
    ledger: Arc<Ledger>,
    policy: Arc<Policy>,
}

impl DocumentsCtxBuilder {
    /// Nothing to read: an empty ledger and no set granted.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The ledger the call reads. Default: an empty one.
    pub(crate) fn ledger(&mut self, ledger: Arc<Ledger>) -> &mut Self {
        self.ledger = ledger;
        self
    }

    /// The policy whose `documents` grant is checked. Default: one that
    /// grants nothing.
    pub(crate) fn policy(&mut self, policy: Arc<Policy>) -> &mut Self {
        self.policy = policy;
        self
    }

    /// The context; refusals are recorded in `incidents`.
    pub(crate) fn build(&mut self, incidents: Arc<Incidents>) -> DocumentsCtx {
        DocumentsCtx {
            ledger: std::mem::take(&mut self.ledger),
            grant: NameGrant::new(
                NamedCapability::Documents,
                std::mem::take(&mut self.policy),
                incidents,
            ),
            calls: 0,
        }
    }
}

/// Adds `hane:operation/documents` to `linker`, reading each call's context
/// with `get`.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut DocumentsCtx,
) -> wasmtime::Result<()> {
    documents::add_to_linker::<T, HasSelf<DocumentsCtx>>(linker, get)
}

fn document_name(document: &str) -> Result<(), Error> {
    if document.len() > MAX_KEY_BYTES {
        return Err(Error::InvalidInput(format!(
            "the document name is {} bytes; names are at most {MAX_KEY_BYTES}",
            document.len()
        )));
    }
    Ok(())
}

impl documents::Host for DocumentsCtx {
    fn search(
        &mut self,
        set: String,
        query: String,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<Hit>, Error>> {
        self.calls += 1;
        if let Err(denied) = self.grant.check(&set) {
            return Ok(Err(denied));
        }
        if query.len() > MAX_QUERY_BYTES {
            return Ok(Err(Error::InvalidInput(format!(
                "the query is {} bytes; queries are at most {MAX_QUERY_BYTES}",
                query.len()
            ))));
        }
        let hits = self
            .ledger
            .search(&set, &query, limit.min(MAX_SEARCH_LIMIT) as usize)
            .map_err(query_error);
        Ok(hits.map(|hits| {
            hits.into_iter()
                .map(|hit| Hit {
                    document: hit.document,
                    title: hit.title,
                    page: hit.page,
                    snippet: hit.snippet,
                    matched_words: hit.matched_words,
                })
                .collect()
        }))
    }

    fn read_pages(
        &mut self,
        set: String,
        document: String,
        first: u32,
        count: u32,
    ) -> wasmtime::Result<Result<Pages, Error>> {
        self.calls += 1;
        if let Err(denied) = self.grant.check(&set) {
            return Ok(Err(denied));
        }
        if let Err(e) = document_name(&document) {
            return Ok(Err(e));
        }
        let read = match self.ledger.read_pages(&set, &document, first, count) {
            Ok(read) => read,
            Err(e) => return Ok(Err(query_error(e))),
        };
        let mut bytes = 0;
        let mut pages = Vec::with_capacity(read.pages.len());
        for page in read.pages {
            bytes += page.len();
            if bytes > MAX_READ_BYTES && !pages.is_empty() {
                break;
            }
            pages.push(page.clone());
        }
        Ok(Ok(Pages {
            document: read.document.to_owned(),
            first: read.first,
            pages,
            total_pages: read.total_pages,
        }))
    }

    fn read_summary(
        &mut self,
        set: String,
        document: String,
    ) -> wasmtime::Result<Result<Summary, Error>> {
        self.calls += 1;
        if let Err(denied) = self.grant.check(&set) {
            return Ok(Err(denied));
        }
        if let Err(e) = document_name(&document) {
            return Ok(Err(e));
        }
        Ok(self
            .ledger
            .summary(&set, &document)
            .map(|s| Summary {
                document: s.document.to_owned(),
                title: s.title.to_owned(),
                summary: s.summary.to_owned(),
                pages: s.pages,
            })
            .map_err(query_error))
    }
}

#[cfg(test)]
mod tests {
    use documents::Host as _;

    use super::*;

    fn ctx(granted: &[&str]) -> (DocumentsCtx, Arc<Incidents>) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ledger");
        let ledger = Ledger::load_dir(&dir).unwrap();
        let incidents = Arc::new(Incidents::default());
        let policy = Arc::new(Policy {
            documents: granted.iter().map(|s| (*s).to_owned()).collect(),
            ..Policy::default()
        });
        let ctx = DocumentsCtxBuilder::new()
            .ledger(Arc::new(ledger))
            .policy(policy)
            .build(incidents.clone());
        (ctx, incidents)
    }

    #[test]
    fn granted_sets_are_searched_and_read() {
        let (mut ctx, incidents) = ctx(&["leases"]);
        let hits = ctx
            .search("leases".into(), "refrigeration".into(), 500)
            .unwrap()
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].document, "c-1002.txt");
        assert_eq!(hits[0].page, 1);

        let pages = ctx
            .read_pages("leases".into(), "c-1001".into(), 2, 5)
            .unwrap()
            .unwrap();
        assert_eq!(
            (pages.document.as_str(), pages.first, pages.total_pages),
            ("c-1001.txt", 2, 2)
        );
        assert_eq!(pages.pages.len(), 1);

        let summary = ctx
            .read_summary("leases".into(), "c-1003.txt".into())
            .unwrap()
            .unwrap();
        assert!(summary.summary.contains("Aoba Florists"));
        assert_eq!(summary.pages, 2);

        let err = ctx
            .read_pages("leases".into(), "c-1001.txt".into(), 9, 1)
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        let err = ctx
            .read_summary("leases".into(), "c-0000.txt".into())
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, Error::NotFound(_)), "{err:?}");
        assert_eq!(incidents.denied(), 0);
        assert_eq!(ctx.calls(), 5);
    }

    #[test]
    fn other_sets_are_denied_and_recorded() {
        let (mut ctx, incidents) = ctx(&["manuals"]);
        let err = ctx
            .read_summary("leases".into(), "c-1001.txt".into())
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(&err, Error::Denied(m) if m.contains("document set `leases` is not granted")),
            "{err:?}"
        );
        assert_eq!(incidents.denied(), 1);
        // Granted, but the ledger has no such set.
        let err = ctx
            .search("manuals".into(), "tyre".into(), 5)
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, Error::NotFound(_)), "{err:?}");
        let err = ctx
            .search("manuals".into(), "x".repeat(MAX_QUERY_BYTES + 1), 5)
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    }
}
