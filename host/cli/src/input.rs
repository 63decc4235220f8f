//! `--input`: JSON given inline, or read from a file (`@FILE`) or from
//! stdin (`@-`), at most [`FileCap::INPUT`] of it.

use std::path::Path;

use hane_core::file::{FileCap, ReadError, read_capped_text, read_capped_text_from};

/// The text of `--input`. Stdin is read only for `@-`; a file only when
/// it is a regular file within the cap, so `@/dev/zero` or `@FIFO` fail
/// at once, naming the file.
pub(crate) fn input_text(input: &str) -> Result<String, ReadError> {
    match input.strip_prefix('@') {
        Some("-") => read_capped_text_from(std::io::stdin().lock(), "stdin", FileCap::INPUT),
        Some(file) => read_capped_text(Path::new(file), FileCap::INPUT),
        None => Ok(input.to_owned()),
    }
}
