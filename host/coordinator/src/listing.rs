//! [`Listed`]: a listing of stored items, those that read and those left
//! out.

use std::fmt::Display;

/// A listing of stored items. An item that does not read (damaged, or
/// written by a newer hane) is left out, logged as a warning with its id,
/// and named in [`Listed::skipped`]: one bad item never fails the whole
/// listing. Reading one item by its id still fails, naming it; `hane store
/// check` finds every one.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<T> {
    /// The items that read, in the listing's order.
    pub items: Vec<T>,
    /// Those left out, in the listing's order.
    pub skipped: Vec<Skipped>,
}

/// A stored item a listing left out because it does not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its id.
    pub id: String,
    /// Why it does not read.
    pub error: String,
}

impl<T> Listed<T> {
    /// Reads each of `rows` with `read`, in order, leaving out those that
    /// fail; `what` names the kind of item (`run`) in the warning.
    pub(crate) fn read<R, E: Display>(
        what: &str,
        rows: impl IntoIterator<Item = R>,
        id: impl Fn(&R) -> &str,
        mut read: impl FnMut(&R) -> Result<T, E>,
    ) -> Self {
        let mut listed = Listed {
            items: Vec::new(),
            skipped: Vec::new(),
        };
        for row in rows {
            match read(&row) {
                Ok(item) => listed.items.push(item),
                Err(e) => {
                    let id = id(&row).to_owned();
                    tracing::warn!(%id, error = %e, "a stored {what} does not read: left out of the listing");
                    listed.skipped.push(Skipped {
                        id,
                        error: e.to_string(),
                    });
                }
            }
        }
        listed
    }
}
