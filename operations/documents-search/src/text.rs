//! Tokens, titles and snippets of plain-text and Markdown documents.

use std::borrow::Cow;

/// Characters of text in a snippet, before the ellipses.
pub const SNIPPET_CHARS: usize = 200;

/// Words of `text` with their byte offsets: maximal runs of Unicode
/// alphanumeric characters.
pub fn words(text: &str) -> Words<'_> {
    Words { text, pos: 0 }
}

/// Iterator returned by [`words`].
pub struct Words<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Iterator for Words<'a> {
    type Item = (usize, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.text[self.pos..];
        let start = self.pos + rest.find(char::is_alphanumeric)?;
        let len = self.text[start..]
            .find(|c: char| !c.is_alphanumeric())
            .unwrap_or(self.text.len() - start);
        self.pos = start + len;
        Some((start, &self.text[start..self.pos]))
    }
}

/// `word` in lowercase, borrowing when it already is (the common case).
pub fn lowercase(word: &str) -> Cow<'_, str> {
    if word
        .bytes()
        .any(|b| b.is_ascii_uppercase() || !b.is_ascii())
    {
        Cow::Owned(word.to_lowercase())
    } else {
        Cow::Borrowed(word)
    }
}

/// The distinct lowercase words of `query`, in order of first appearance.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for (_, word) in words(query) {
        let word = lowercase(word);
        if !terms.iter().any(|t| *t == word) {
            terms.push(word.into_owned());
        }
    }
    terms
}

/// The first ATX heading (`# Title`) of a Markdown document, skipping YAML
/// front matter and fenced code blocks.
pub fn markdown_title(text: &str) -> Option<String> {
    let mut lines = text.lines().peekable();
    if lines.peek().is_some_and(|l| l.trim_end() == "---") {
        lines.next();
        for line in lines.by_ref() {
            if matches!(line.trim_end(), "---" | "...") {
                break;
            }
        }
    }
    let mut fence: Option<&str> = None;
    for line in lines {
        let trimmed = line.trim_start();
        // Four spaces of indentation make a code block, not a heading.
        if line.len() - trimmed.len() > 3 {
            continue;
        }
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        let level = trimmed.bytes().take_while(|&b| b == b'#').count();
        if !(1..=6).contains(&level) {
            continue;
        }
        let rest = &trimmed[level..];
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            continue;
        }
        let title = collapse_whitespace(rest.trim().trim_end_matches('#'));
        if !title.is_empty() {
            return Some(title);
        }
    }
    None
}

/// About [`SNIPPET_CHARS`] characters of `text` from its line `line_index`
/// (0-based) on, whitespace collapsed. A long line is cut around its first
/// match of `terms`; a short one is followed by the next lines. Cuts are
/// marked with `…`.
pub fn snippet(text: &str, line_index: usize, terms: &[String]) -> String {
    let mut lines = text.lines().skip(line_index);
    let line = collapse_whitespace(lines.next().unwrap_or(""));
    let chars: Vec<char> = line.chars().collect();
    if chars.len() > SNIPPET_CHARS {
        let hit = words(&line)
            .find(|(_, w)| terms.iter().any(|t| *t == lowercase(w)))
            .map_or(0, |(offset, _)| line[..offset].chars().count());
        // Keep a third of the window before the match for context.
        let start = hit
            .saturating_sub(SNIPPET_CHARS / 3)
            .min(chars.len() - SNIPPET_CHARS);
        let end = start + SNIPPET_CHARS;
        let mut out = String::new();
        if start > 0 {
            out.push('…');
        }
        out.extend(&chars[start..end]);
        if end < chars.len() {
            out.push('…');
        }
        return out;
    }
    let mut out = line;
    let mut len = chars.len();
    for next in lines {
        if len >= SNIPPET_CHARS {
            break;
        }
        let next = collapse_whitespace(next);
        if next.is_empty() {
            continue;
        }
        out.push(' ');
        len += 1;
        let take = SNIPPET_CHARS - len.min(SNIPPET_CHARS);
        let next_len = next.chars().count();
        if next_len > take {
            out.extend(next.chars().take(take));
            out.push('…');
            break;
        }
        out.push_str(&next);
        len += next_len;
    }
    out
}

fn collapse_whitespace(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_alphanumeric_runs_with_offsets() {
        let got: Vec<_> = words("Hello, wörld! x2 — 東京").collect();
        assert_eq!(got, [(0, "Hello"), (7, "wörld"), (15, "x2"), (22, "東京")]);
        assert_eq!(words("  ...  ").count(), 0);
    }

    #[test]
    fn query_terms_are_lowercase_and_distinct() {
        assert_eq!(
            query_terms("Rust rust ÄRGER, ärger; wasm"),
            ["rust", "ärger", "wasm"]
        );
        assert!(query_terms(" -- ").is_empty());
    }

    #[test]
    fn markdown_title_takes_the_first_heading() {
        assert_eq!(
            markdown_title("intro\n## Setup ##\n# Later").as_deref(),
            Some("Setup")
        );
        assert_eq!(markdown_title("#hashtag\n#\n#   \n").as_deref(), None);
        assert_eq!(
            markdown_title("---\ntitle: x\n# not this\n---\n# Real").as_deref(),
            Some("Real")
        );
        assert_eq!(
            markdown_title("```sh\n# comment\n```\n    # code\n### Third").as_deref(),
            Some("Third")
        );
    }

    #[test]
    fn short_lines_are_followed_by_context() {
        let text = "first\n  the   needle  line \n\nnext line\n";
        assert_eq!(
            snippet(text, 1, &["needle".into()]),
            "the needle line next line"
        );
    }

    #[test]
    fn long_lines_are_cut_around_the_match() {
        let line = format!("{} needle {}", "a ".repeat(300), "b ".repeat(300));
        let s = snippet(&line, 0, &["needle".into()]);
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("needle"));
        assert_eq!(s.chars().count(), SNIPPET_CHARS + 2);
    }

    #[test]
    fn following_lines_stop_at_the_budget() {
        let text = format!("needle\n{}\n", "word ".repeat(100));
        let s = snippet(&text, 0, &["needle".into()]);
        assert!(s.starts_with("needle word"));
        assert!(s.ends_with('…'));
        assert_eq!(s.chars().count(), SNIPPET_CHARS + 1);
    }
}
