//! Server-sent events both ways: parsed incrementally as a provider's
//! body arrives ([`SseParser`]), and written for a gateway client
//! ([`SseOut`], [`encode`]).
//!
//! The parser follows the WHATWG rules the providers rely on: lines end in LF, CRLF or
//! CR; a blank line ends an event; `data:` lines join with `\n`; lines
//! starting with `:` are comments (keep-alives); one space after the colon
//! is dropped; an event with no data is not dispatched. Bytes are buffered
//! until a line is complete, so an event (or a UTF-8 character) split
//! across chunks is assembled whole.

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, empty when absent.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The `id:` field, empty when absent.
    pub id: String,
}

/// The most bytes one unfinished line may hold; past it the stream is
/// refused (a provider's event is a few KiB at most).
pub const MAX_SSE_LINE_BYTES: usize = 4 << 20;

/// An incremental parser: [`SseParser::push`] each chunk, then
/// [`SseParser::finish`].
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended in CR: a leading LF of this one belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    id: String,
    has_data: bool,
}

/// An event stream line longer than [`MAX_SSE_LINE_BYTES`]: the stream is
/// not one a model server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an event stream line is longer than {MAX_SSE_LINE_BYTES} bytes")]
pub struct LineTooLong;

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `chunk`, returning the events it completed.
    ///
    /// # Errors
    ///
    /// A line longer than [`MAX_SSE_LINE_BYTES`].
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, LineTooLong> {
        let mut events = Vec::new();
        for &byte in chunk {
            let after_cr = std::mem::take(&mut self.after_cr);
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_done(&line) {
                        events.push(event);
                    }
                }
                _ => {
                    if self.line.len() >= MAX_SSE_LINE_BYTES {
                        return Err(LineTooLong);
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(events)
    }

    /// Ends the stream: an event the stream did not end with a blank line
    /// is dispatched too (some servers close right after the last `data:`).
    pub fn finish(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.line);
        let event = if line.is_empty() {
            None
        } else {
            self.line_done(&line)
        };
        event.or_else(|| self.dispatch())
    }

    fn line_done(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.find(':') {
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&line[..], ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => value.clone_into(&mut self.event),
            "id" => value.clone_into(&mut self.id),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
            id: self.id.clone(),
        })
    }
}

/// One server-sent event to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseOut {
    /// The `event:` name, when the format names its events.
    pub event: Option<String>,
    /// The `data:` text.
    pub data: String,
}

impl SseOut {
    /// An unnamed event of `data` as JSON.
    pub fn data(data: &serde_json::Value) -> Self {
        Self {
            event: None,
            data: data.to_string(),
        }
    }

    /// An event named `event` of `data` as JSON.
    pub fn named(event: &str, data: &serde_json::Value) -> Self {
        Self {
            event: Some(event.to_owned()),
            data: data.to_string(),
        }
    }
}

/// `events` as an event stream body: `event: x\ndata: y\n\n` each (a
/// multi-line `data` as several `data:` lines).
pub fn encode(events: &[SseOut]) -> String {
    let mut out = String::new();
    for event in events {
        if let Some(name) = &event.event {
            out.push_str("event: ");
            out.push_str(name);
            out.push('\n');
        }
        for line in event.data.split('\n') {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(text: &str, size: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for piece in text.as_bytes().chunks(size) {
            events.extend(parser.push(piece).unwrap());
        }
        events.extend(parser.finish());
        events
    }

    #[test]
    fn events_split_anywhere_parse_the_same() {
        let text = ": keep-alive\r\nevent: message_start\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n\
                    data: é\n\ndata:[DONE]\r\r";
        let expected = vec![
            SseEvent {
                event: "message_start".into(),
                data: "{\"a\":\n1}".into(),
                id: String::new(),
            },
            SseEvent {
                data: "é".into(),
                ..SseEvent::default()
            },
            SseEvent {
                data: "[DONE]".into(),
                ..SseEvent::default()
            },
        ];
        for size in 1..text.len() {
            assert_eq!(parse_in_pieces(text, size), expected, "chunks of {size}");
        }
    }

    #[test]
    fn comments_and_empty_events_are_not_dispatched() {
        assert!(parse_in_pieces(": ping\n\nevent: x\n\n\n", 3).is_empty());
    }

    #[test]
    fn an_unterminated_last_event_is_dispatched_at_the_end() {
        let events = parse_in_pieces("data: {\"x\":1}", 4);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "{\"x\":1}");
    }

    #[test]
    fn encoding_names_events_and_splits_data_lines() {
        let events = vec![
            SseOut::named("a", &serde_json::json!({"x": 1})),
            SseOut {
                event: None,
                data: "one\ntwo".into(),
            },
        ];
        let text = encode(&events);
        assert_eq!(
            text,
            "event: a\ndata: {\"x\":1}\n\ndata: one\ndata: two\n\n"
        );
        let parsed = parse_in_pieces(&text, 7);
        assert_eq!(parsed[0].event, "a");
        assert_eq!(parsed[1].data, "one\ntwo");
    }
}
