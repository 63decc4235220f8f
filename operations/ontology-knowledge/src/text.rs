//! Words of questions and pages, and the passage of a page around a match.

/// Characters of page text in a passage, before the ellipses.
pub const PASSAGE_CHARS: usize = 400;

/// Words of `text` with their byte offsets: maximal runs of Unicode
/// alphanumeric characters.
pub fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let rest = &text[pos..];
        let start = pos + rest.find(char::is_alphanumeric)?;
        let len = text[start..]
            .find(|c: char| !c.is_alphanumeric())
            .unwrap_or(text.len() - start);
        pos = start + len;
        Some((start, &text[start..pos]))
    })
}

/// The distinct lowercase words of `question`, in order of first
/// appearance.
pub fn question_words(question: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, word) in words(question) {
        let word = word.to_lowercase();
        if !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// How many of `wanted` (lowercase) occur in `page` as whole words, any
/// case, and the byte offset of the first occurrence of any of them.
pub fn matches(page: &str, wanted: &[String]) -> (u32, Option<usize>) {
    let mut found = vec![false; wanted.len()];
    let mut first = None;
    for (offset, word) in words(page) {
        let word = word.to_lowercase();
        if let Some(i) = wanted.iter().position(|w| *w == word) {
            found[i] = true;
            first.get_or_insert(offset);
        }
    }
    (found.iter().filter(|&&f| f).count() as u32, first)
}

/// About [`PASSAGE_CHARS`] characters of `page` around the byte offset
/// `at` (a third of them before it), whitespace collapsed, cut at spaces
/// where there are some near the ends, and `…` where text was left out.
pub fn passage(page: &str, at: usize) -> String {
    let chars: Vec<char> = page.chars().collect();
    let at = page[..at.min(page.len())].chars().count();
    let mut start = at
        .saturating_sub(PASSAGE_CHARS / 3)
        .min(chars.len().saturating_sub(PASSAGE_CHARS));
    let mut end = (start + PASSAGE_CHARS).min(chars.len());
    // Do not start or end in the middle of a word when a space is near.
    const NEAR: usize = 20;
    if start > 0
        && !chars[start - 1].is_whitespace()
        && let Some(space) = chars[start..(start + NEAR).min(at)]
            .iter()
            .position(|c| c.is_whitespace())
    {
        start += space + 1;
    }
    if end < chars.len() && !chars[end].is_whitespace() {
        let floor = end.saturating_sub(NEAR).max(at);
        if let Some(space) = chars[floor..end].iter().rposition(|c| c.is_whitespace()) {
            end = floor + space;
        }
    }
    let text: String = chars[start..end].iter().collect();
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(&text.split_whitespace().collect::<Vec<_>>().join(" "));
    if end < chars.len() {
        out.push('…');
    }
    out
}

/// The first line of `text` that is not blank, trimmed.
pub fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_words_are_distinct_lowercase_alphanumeric_runs() {
        assert_eq!(
            question_words("Early-termination FEE? early fee, 違約金"),
            ["early", "termination", "fee", "違約金"]
        );
        assert!(question_words(" ?! ").is_empty());
    }

    #[test]
    fn matches_count_whole_words_in_any_case() {
        let wanted = question_words("early termination fee");
        let page = "Fees apply. An EARLY return\nends the lease; the fee is 3 months.";
        // "Fees" is not "fee"; "termination" is absent.
        assert_eq!(matches(page, &wanted), (2, Some(15)));
        assert_eq!(matches("nothing here", &wanted), (0, None));
    }

    #[test]
    fn short_pages_are_whole_passages() {
        assert_eq!(passage("  The fee\n\n is   due. ", 6), "The fee is due.");
    }

    #[test]
    fn long_pages_are_cut_around_the_match_at_spaces() {
        let page = format!("{}needle {}", "word ".repeat(200), "tail ".repeat(200));
        let at = page.find("needle").unwrap();
        let p = passage(&page, at);
        assert!(p.starts_with("…word ") && p.ends_with(" tail…"), "{p}");
        assert!(p.contains("needle"));
        assert!(p.chars().count() <= PASSAGE_CHARS + 2);
        // Without spaces, the cut is by characters.
        let page = "あ".repeat(1000);
        let p = passage(&page, page.len() / 2);
        assert_eq!(p.chars().count(), PASSAGE_CHARS + 2);
    }

    #[test]
    fn first_line_skips_blank_lines() {
        assert_eq!(first_line("\n  \n  Lease C-1001  \nbody"), "Lease C-1001");
        assert_eq!(first_line(""), "");
    }
}
