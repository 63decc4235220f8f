//! Untrusted text at the terminal, shown as what it is.
//!
//! Recipients, subjects, a model's words, a tool's output, a reviewer's
//! reason or an SMTP server's reply can hold escape sequences that move the
//! cursor, rewrite a line or recolour the screen, and invisible or
//! reordering characters: `boss@attacker.example\x1b[16Dfleet.example\x1b[K`
//! would show as `boss@fleet.example`. Whatever the CLI prints that a run,
//! a model, a guest, a request or a remote server wrote goes through
//! [`terminal_text`], [`terminal_line`] or [`terminal_json`], which write
//! each such character as its escape (`\u{1b}`), so a person sees every
//! character that is there.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as it is:
///
/// - a control character (C0, DEL, C1: escape sequences, carriage returns,
///   bells, the one-character CSI `\u{9b}`);
/// - a bidirectional mark, embedding, override or isolate, which reorders
///   what is shown around it (U+061C, U+200E, U+200F, U+202A to U+202E,
///   U+2066 to U+2069);
/// - a character that shows as nothing: zero-width spaces and joiners,
///   the word joiner and invisible operators, deprecated format
///   characters, the byte-order mark, the soft hyphen, the grapheme
///   joiner, the Mongolian vowel separator, Hangul fillers, interlinear
///   annotation marks and tags; and the line and paragraph separators,
///   which some terminals break lines at.
pub(crate) fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{00ad}'
                | '\u{034f}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200d}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{2060}'..='\u{2064}'
                | '\u{206a}'..='\u{206f}'
                | '\u{3164}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

/// `text` as it may be written to a terminal: every character of
/// [`unsafe_char`] but newline and tab written as its escape (`\u{1b}`).
pub(crate) fn terminal_text(text: &str) -> Cow<'_, str> {
    escape(text, |c| unsafe_char(c) && c != '\n' && c != '\t')
}

/// [`terminal_text`] for text shown on one line: a newline is escaped too,
/// so nothing can start a line that seems to be the CLI's own.
pub(crate) fn terminal_line(text: &str) -> Cow<'_, str> {
    escape(text, |c| unsafe_char(c) && c != '\t')
}

fn escape(text: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `value` as pretty JSON whose strings hold no character of
/// [`unsafe_char`] as it is: each is written as a JSON escape (`\u009b`,
/// `\u202e`, a surrogate pair past U+FFFF). serde_json escapes only C0
/// controls; this is the same JSON to any parser, harmless to a terminal.
///
/// # Errors
///
/// `value` cannot be serialized.
pub(crate) fn terminal_json(value: &impl serde::Serialize) -> serde_json::Result<String> {
    let json = serde_json::to_string_pretty(value)?;
    // serde_json writes no raw control character but the newlines between
    // lines; inside strings it escapes every C0 one.
    if !json.chars().any(|c| unsafe_char(c) && c != '\n') {
        return Ok(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if unsafe_char(c) && c != '\n' {
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// A step that can take more than a second (compiling a release's
/// components, a run of a coding CLI). On a terminal, a line on stderr
/// counts its seconds once it has taken a second, until it ends, and is
/// then cleared; otherwise one plain line says what is happening once it
/// has taken five (a quick step prints nothing where a program reads the
/// output).
pub(crate) struct Working {
    stop: std::sync::mpsc::Sender<()>,
    shown: Option<std::thread::JoinHandle<()>>,
}

/// How long a step runs before [`Working`] shows it on a terminal, and
/// elsewhere.
const SHOW_AFTER: [std::time::Duration; 2] = [
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(5),
];

impl Working {
    /// Starts showing `what` (such as `compiling the release's components`).
    pub(crate) fn start(what: &str) -> Self {
        use std::io::{IsTerminal as _, Write as _};
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let what = terminal_line(what).into_owned();
        let draw = std::io::stderr().is_terminal();
        let started = std::time::Instant::now();
        let shown = std::thread::spawn(move || {
            if stopped.recv_timeout(SHOW_AFTER[usize::from(!draw)]).is_ok() {
                return;
            }
            if !draw {
                eprintln!("hane: {what}…");
                let _ = stopped.recv();
                return;
            }
            loop {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[K{what}… {} s", started.elapsed().as_secs());
                let _ = err.flush();
                drop(err);
                match stopped.recv_timeout(std::time::Duration::from_millis(250)) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    _ => break,
                }
            }
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        });
        Self {
            stop,
            shown: Some(shown),
        }
    }
}

impl Drop for Working {
    /// Ends the line: cleared on a terminal, before anything else is
    /// printed.
    fn drop(&mut self) {
        let _ = self.stop.send(());
        if let Some(shown) = self.shown.take() {
            let _ = shown.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn control_characters_are_shown_escaped_and_text_is_kept() {
        // Clear the screen, set the window title, return to the line's
        // start, ring the bell, a C1 CSI, and a right-to-left override.
        let hostile = "ok\u{1b}[2J\u{1b}]0;title\u{7}\rover\u{9b}31m\u{202e}txt.exe";
        let shown = terminal_text(hostile);
        assert_eq!(
            shown,
            r"ok\u{1b}[2J\u{1b}]0;title\u{7}\u{d}over\u{9b}31m\u{202e}txt.exe"
        );
        assert!(!shown.chars().any(unsafe_char));
        // Newlines and tabs stay in streamed text; on a line a newline is
        // escaped too.
        assert_eq!(terminal_text("a\n\tb"), "a\n\tb");
        assert_eq!(terminal_line("a\n\tb\u{7f}"), r"a\u{a}	b\u{7f}");
        // Ordinary text of any script is left alone, and not copied.
        let plain = "架空 300 あ 10-02 — Toyota Hiace Van 🚐 مرحبا שלום";
        assert!(matches!(terminal_text(plain), Cow::Borrowed(t) if t == plain));
    }

    #[test]
    fn the_address_that_showed_as_another_is_shown_whole() {
        let address = "boss@attacker.example\u{1b}[16Dfleet.example\u{1b}[K";
        assert_eq!(
            terminal_line(address),
            r"boss@attacker.example\u{1b}[16Dfleet.example\u{1b}[K"
        );
    }

    #[test]
    fn invisible_and_reordering_characters_are_shown_escaped() {
        for (c, shown) in [
            ('\u{200b}', r"\u{200b}"),
            ('\u{200d}', r"\u{200d}"),
            ('\u{200e}', r"\u{200e}"),
            ('\u{2066}', r"\u{2066}"),
            ('\u{2069}', r"\u{2069}"),
            ('\u{2028}', r"\u{2028}"),
            ('\u{2060}', r"\u{2060}"),
            ('\u{feff}', r"\u{feff}"),
            ('\u{ad}', r"\u{ad}"),
            ('\u{3164}', r"\u{3164}"),
            ('\u{e0041}', r"\u{e0041}"),
            ('\u{85}', r"\u{85}"),
        ] {
            assert_eq!(terminal_line(&format!("a{c}b")), format!("a{shown}b"));
        }
    }

    #[test]
    fn json_keeps_its_meaning_and_loses_its_escape_codes() {
        let value = json!({
            "subject": "ok\u{1b}[2J",
            "body": "line\nnext \u{9b}31m \u{202e}gpj.exe \u{e0041}",
            "n": 3,
        });
        let text = terminal_json(&value).unwrap();
        assert!(!text.chars().any(|c| unsafe_char(c) && c != '\n'), "{text}");
        assert!(text.contains(r"\u001b[2J"), "{text}");
        assert!(text.contains(r"\u009b31m"), "{text}");
        assert!(text.contains(r"\u202egpj.exe"), "{text}");
        assert!(text.contains(r"\udb40\udc41"), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
        // Plain JSON is as serde_json writes it.
        let plain = json!({"a": ["架空", 1]});
        assert_eq!(
            terminal_json(&plain).unwrap(),
            serde_json::to_string_pretty(&plain).unwrap()
        );
    }
}
