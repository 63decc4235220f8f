//! Counting tokens: a real tokenizer where one exists for the model's
//! family, an estimate otherwise.
//!
//! A request's size is counted as the sum of its parts, each counted on
//! its own, plus fixed framing overheads that stand for what a provider
//! wraps around them (role markers, block separators, tool definitions'
//! framing). The payload text is counted with the family's tokenizer:
//!
//! - [`Tokenizer::O200k`] (`o200k_base`): gpt-4o, gpt-4.1, gpt-4.5, gpt-5,
//!   o1, o3, o4 and gpt-oss (its `o200k_harmony` differs only in special
//!   tokens, which ordinary text never produces);
//! - [`Tokenizer::Cl100k`] (`cl100k_base`): gpt-4, gpt-3.5-turbo;
//! - [`Tokenizer::Estimate`] for every other family: `ceil(bytes / 4)`.
//!
//! The overheads are the same for all three: [`MESSAGE_OVERHEAD`] per
//! message (and for the system text), [`BLOCK_OVERHEAD`] per content block,
//! [`TOOL_OVERHEAD`] per tool, [`REPLY_PRIMING`] once per request, and an
//! image counts [`IMAGE_TOKENS`]. A provider's own count differs from this
//! by its framing, which is why a window should keep some slack.
//!
//! Counting uses `bpe-openai` (exact byte-pair encoding of the same
//! tables, several times faster than tiktoken's own algorithm; a test
//! checks both give the same counts); tiktoken-rs maps model names to
//! their encodings. A table is made ready once per process, on first use,
//! and shared by every builder: built from the tokens the binary carries
//! once per machine, and read from a cache on disk after that (`tables`).
//! The `exact-tokens` feature (on by default, off in the device build)
//! brings them; without it every model's tokens are estimated, and
//! [`Tokenizer::for_model`] says so by answering [`Tokenizer::Estimate`].

use serde::{Deserialize, Serialize};

use hane_model_types::{Content, Message, ToolSpec};

/// Tokens per message for its framing (role and separators), as the
/// OpenAI cookbook counts them; the system text counts it too.
pub const MESSAGE_OVERHEAD: u64 = 3;
/// Tokens per content block beyond its payload.
pub const BLOCK_OVERHEAD: u64 = 1;
/// Tokens per tool definition beyond its name, description and schema.
pub const TOOL_OVERHEAD: u64 = 8;
/// Tokens once per request that prime the reply.
pub const REPLY_PRIMING: u64 = 3;
/// Tokens an image counts: images are not decoded here, so a fixed charge.
pub const IMAGE_TOKENS: u64 = 1_000;

/// How tokens are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Tokenizer {
    /// OpenAI's `o200k_base`.
    #[serde(rename = "o200k_base")]
    O200k,
    /// OpenAI's `cl100k_base`.
    #[serde(rename = "cl100k_base")]
    Cl100k,
    /// No tokenizer: `ceil(bytes / 4)` per text.
    #[serde(rename = "estimate")]
    Estimate,
}

impl Tokenizer {
    /// The tokenizer of a model's family; [`Tokenizer::Estimate`] for
    /// families without one here. A provider prefix (`openai/gpt-4o`) and
    /// a fine-tune prefix (`ft:gpt-4o:…`) are looked through.
    #[cfg(feature = "exact-tokens")]
    pub fn for_model(model: &str) -> Self {
        let name = model.rsplit('/').next().unwrap_or(model);
        use tiktoken_rs::tokenizer::{Tokenizer as T, get_tokenizer};
        match get_tokenizer(name) {
            Some(T::O200kBase | T::O200kHarmony) => Tokenizer::O200k,
            Some(T::Cl100kBase) => Tokenizer::Cl100k,
            _ => Tokenizer::Estimate,
        }
    }

    /// [`Tokenizer::Estimate`]: this build has no tokenizer tables.
    #[cfg(not(feature = "exact-tokens"))]
    pub fn for_model(_model: &str) -> Self {
        Tokenizer::Estimate
    }

    /// Its name as reports give it: `o200k_base`, `cl100k_base` or
    /// `estimate`.
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::O200k => "o200k_base",
            Tokenizer::Cl100k => "cl100k_base",
            Tokenizer::Estimate => "estimate",
        }
    }

    #[cfg(feature = "exact-tokens")]
    fn bpe(self) -> Option<&'static bpe_openai::Tokenizer> {
        match self {
            Tokenizer::O200k => Some(&crate::tables::O200K_BASE),
            Tokenizer::Cl100k => Some(&crate::tables::CL100K_BASE),
            Tokenizer::Estimate => None,
        }
    }

    /// Tokens of `text` by the family's table, if this build has it.
    #[cfg(feature = "exact-tokens")]
    fn exact_count(self, text: &str) -> Option<u64> {
        self.bpe().map(|bpe| bpe.count(text) as u64)
    }

    /// Bytes of the first `tokens` tokens of `text` by the family's
    /// table, if this build has it.
    #[cfg(feature = "exact-tokens")]
    fn exact_head(self, text: &str, tokens: u64) -> Option<usize> {
        let bpe = self.bpe()?;
        let ranks = bpe.encode(text);
        let k = usize::try_from(tokens)
            .unwrap_or(usize::MAX)
            .min(ranks.len());
        Some(bpe.bpe.decode_tokens(&ranks[..k]).len())
    }

    #[cfg(not(feature = "exact-tokens"))]
    fn exact_count(self, _text: &str) -> Option<u64> {
        None
    }

    #[cfg(not(feature = "exact-tokens"))]
    fn exact_head(self, _text: &str, _tokens: u64) -> Option<usize> {
        None
    }

    /// Tokens of `text` (special tokens count as ordinary text).
    pub fn count(self, text: &str) -> u64 {
        self.exact_count(text)
            .unwrap_or_else(|| (text.len() as u64).div_ceil(4))
    }

    /// Tokens of one content block.
    pub fn block_tokens(self, block: &Content) -> u64 {
        BLOCK_OVERHEAD
            + match block {
                Content::Text { text } => self.count(text),
                Content::Image { .. } => IMAGE_TOKENS,
                Content::ToolCall { id, name, input } => {
                    self.count(id) + self.count(name) + self.count(&input.to_string())
                }
                Content::ToolResult {
                    call_id, content, ..
                } => self.count(call_id) + self.count(content),
            }
    }

    /// Tokens of one message: [`MESSAGE_OVERHEAD`] and its blocks.
    pub fn message_tokens(self, message: &Message) -> u64 {
        MESSAGE_OVERHEAD
            + message
                .content
                .iter()
                .map(|b| self.block_tokens(b))
                .sum::<u64>()
    }

    /// Tokens of the system text: nothing when it is empty.
    pub fn system_tokens(self, system: &str) -> u64 {
        if system.is_empty() {
            0
        } else {
            MESSAGE_OVERHEAD + self.count(system)
        }
    }

    /// Tokens of the tool definitions.
    pub fn tools_tokens(self, tools: &[ToolSpec]) -> u64 {
        tools
            .iter()
            .map(|t| {
                TOOL_OVERHEAD
                    + self.count(&t.name)
                    + self.count(&t.description)
                    + self.count(&t.input_schema.to_string())
            })
            .sum()
    }

    /// Tokens of a whole request's input: system, tools, messages and
    /// [`REPLY_PRIMING`].
    pub fn request_tokens<'m>(
        self,
        system: &str,
        tools: &[ToolSpec],
        messages: impl IntoIterator<Item = &'m Message>,
    ) -> u64 {
        REPLY_PRIMING
            + self.system_tokens(system)
            + self.tools_tokens(tools)
            + messages
                .into_iter()
                .map(|m| self.message_tokens(m))
                .sum::<u64>()
    }

    /// The longest head of `text` of about `tokens` tokens, cut at a
    /// character boundary (a re-count may differ by a token or so, where
    /// the cut joins what the tokenizer would have split).
    pub(crate) fn head(self, text: &str, tokens: u64) -> &str {
        let bytes = self
            .exact_head(text, tokens)
            .unwrap_or_else(|| usize::try_from(tokens.saturating_mul(4)).unwrap_or(usize::MAX));
        let mut end = bytes.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        &text[..end]
    }
}

#[cfg(all(test, feature = "exact-tokens"))]
mod tests {
    use super::*;

    #[test]
    fn families_pick_their_tokenizer() {
        assert_eq!(Tokenizer::for_model("gpt-4o"), Tokenizer::O200k);
        assert_eq!(Tokenizer::for_model("gpt-4o-mini"), Tokenizer::O200k);
        assert_eq!(Tokenizer::for_model("gpt-4.1"), Tokenizer::O200k);
        assert_eq!(Tokenizer::for_model("gpt-5"), Tokenizer::O200k);
        assert_eq!(Tokenizer::for_model("o3"), Tokenizer::O200k);
        assert_eq!(Tokenizer::for_model("openai/o4-mini"), Tokenizer::O200k);
        assert_eq!(Tokenizer::for_model("gpt-4"), Tokenizer::Cl100k);
        assert_eq!(Tokenizer::for_model("gpt-3.5-turbo"), Tokenizer::Cl100k);
        assert_eq!(Tokenizer::for_model("claude-sonnet-4"), Tokenizer::Estimate);
        assert_eq!(Tokenizer::for_model("smollm2"), Tokenizer::Estimate);
    }

    #[test]
    fn counts_are_real_or_estimated() {
        assert_eq!(Tokenizer::O200k.count("hello world"), 2);
        assert_eq!(Tokenizer::Cl100k.count("hello world"), 2);
        assert_eq!(Tokenizer::Estimate.count("hello world"), 3);
        assert_eq!(Tokenizer::Estimate.count(""), 0);
    }

    #[test]
    fn counts_agree_with_tiktoken() {
        let texts = [
            "hello world",
            "The vehicle 架空 300 あ 10-02 is leased until 2031-04-01.\n\n  indented\ttabs",
            r#"{"records":[{"id":"V-001","model":"Toyota Hiace Van","mileage_km":48210}]}"#,
            "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
            "émoji 🚐🚐 and CJK 車両点検の有効期限",
            "    ",
            "",
        ];
        for text in texts {
            assert_eq!(
                Tokenizer::O200k.count(text),
                tiktoken_rs::o200k_base_singleton()
                    .encode_ordinary(text)
                    .len() as u64,
                "{text:?}"
            );
            assert_eq!(
                Tokenizer::Cl100k.count(text),
                tiktoken_rs::cl100k_base_singleton()
                    .encode_ordinary(text)
                    .len() as u64,
                "{text:?}"
            );
        }
    }

    #[test]
    fn heads_cut_at_character_boundaries() {
        for t in [Tokenizer::O200k, Tokenizer::Estimate] {
            let text = "架空 300 あ 10-02 ".repeat(50);
            let head = t.head(&text, 10);
            assert!(text.starts_with(head));
            assert!(t.count(head) <= 11, "{t:?}: {}", t.count(head));
            assert_eq!(t.head(&text, 1_000_000), text);
        }
    }
}
