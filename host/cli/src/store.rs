//! What the CLI says of the store: the stored items a listing left out.

use hane_coordinator::Skipped;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The stored items a listing names before it says how many more.
const SKIPPED_NAMED: usize = 3;

/// Says on stderr, in one line, which stored items a listing left out
/// because they do not read (`what`: the singular and plural of their
/// kind); nothing when none was.
pub(crate) fn note_skipped(what: (&str, &str), skipped: &[Skipped]) {
    if skipped.is_empty() {
        return;
    }
    let mut named: Vec<String> = skipped
        .iter()
        .take(SKIPPED_NAMED)
        .map(|s| format!("{} ({})", s.id, s.error))
        .collect();
    if skipped.len() > SKIPPED_NAMED {
        named.push(format!("{} more", skipped.len() - SKIPPED_NAMED));
    }
    let (one, many) = what;
    eprintln!(
        "hane: skipped {} that could not be read: {}; `hane store check` reports every one",
        plural(skipped.len(), one, many),
        named.join(", ")
    );
}
