//! OpenAI's tokenizer tables, built on first use and cached on disk.
//!
//! The binary carries each table's tokens only (in rank order, deflated:
//! about 1.6 MB for both, by `build.rs`). The table a count needs (the
//! tokens with the automata that find them, 32 MB for `o200k_base` and
//! 15 MB for `cl100k_base`) takes about a second to build, so it is built
//! once and kept in the tables' cache directory: `$HANE_CACHE_DIR/tokenizers`,
//! else `$XDG_CACHE_HOME/hane/tokenizers`, else
//! `$HOME/.cache/hane/tokenizers`. Each later process reads it back (tens of
//! milliseconds), checks that it holds this binary's tokens, and rebuilds
//! it when it does not (a file cut short, another version's, altered).
//!
//! A cache that cannot be written costs each process the build, with one
//! warning; counting never fails for it. This is the crate's only I/O,
//! and it only decides how fast a table is ready, never what it counts.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use bpe_openai::Tokenizer;
use bpe_openai::byte_pair_encoding::BytePairEncoding;

/// The hash factor the tables are built with (the one `bpe-openai` uses,
/// chosen there so that no two tokens collide).
const HASH_FACTOR: u64 = 17_846_336_922_010_275_747;

/// One of the tables: its tokens and how text is split before encoding.
pub(crate) struct Table {
    name: &'static str,
    /// The tokens as `build.rs` wrote them: deflated, each a two-byte
    /// little-endian length and its bytes.
    tokens: &'static [u8],
    /// The pre-tokenizer's patterns; `true` marks a pattern whose last
    /// character is a one-character look-ahead.
    patterns: fn() -> Vec<(String, bool)>,
}

pub(crate) static O200K_BASE: LazyLock<Tokenizer> =
    LazyLock::new(|| load(&O200K, cache_dir().as_deref()));
pub(crate) static CL100K_BASE: LazyLock<Tokenizer> =
    LazyLock::new(|| load(&CL100K, cache_dir().as_deref()));

pub(crate) const O200K: Table = Table {
    name: "o200k_base",
    tokens: include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.tokens")),
    patterns: || {
        let letters = [
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"\p{N}{1,3}",
            r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
            r"\s*[\r\n]+",
            r"\s+$",
        ];
        split_patterns(&letters.join("|"))
    },
};

pub(crate) const CL100K: Table = Table {
    name: "cl100k_base",
    tokens: include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.tokens")),
    patterns: || {
        split_patterns(
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+$",
        )
    },
};

/// tiktoken's patterns end in `\s+(?!\S)|\s+`; the regex engine has no
/// look-ahead, so that becomes `\s+\s` with its last character dropped
/// from the match, then `\s+`.
fn split_patterns(main: &str) -> Vec<(String, bool)> {
    vec![
        (main.to_owned(), false),
        (r"\s+\s".to_owned(), true),
        (r"\s+".to_owned(), false),
    ]
}

/// Where tables are cached (see the module's documentation).
pub(crate) fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HANE_CACHE_DIR") {
        return Some(PathBuf::from(dir).join("tokenizers"));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("hane").join("tokenizers"))
}

/// `table` ready to count: from `cache` when it holds it, else built (and
/// stored there when it can be).
pub(crate) fn load(table: &Table, cache: Option<&Path>) -> Tokenizer {
    let tokens = table.tokens();
    let file = cache.map(|dir| dir.join(table.file_name()));
    let bpe = file
        .as_deref()
        .and_then(|file| read(file, &tokens))
        .unwrap_or_else(|| {
            let bpe = BytePairEncoding::from_dictionary(tokens, Some(HASH_FACTOR));
            if let Some(file) = &file
                && let Err(e) = write(file, &bpe)
            {
                tracing::warn!(
                    "cannot cache the {} tokenizer table in {}: {e}; each process builds it again (about a second)",
                    table.name,
                    file.display()
                );
            }
            bpe
        });
    let patterns = (table.patterns)();
    let patterns: Vec<(&str, bool)> = patterns.iter().map(|(p, l)| (p.as_str(), *l)).collect();
    Tokenizer::new_lookahead(bpe, &patterns, false).expect("the tables' patterns are valid")
}

impl Table {
    /// Its tokens in rank order.
    pub(crate) fn tokens(&self) -> Vec<Vec<u8>> {
        let mut flat = Vec::new();
        flate2::read::DeflateDecoder::new(self.tokens)
            .read_to_end(&mut flat)
            .expect("build.rs deflated the tokens");
        let mut tokens = Vec::new();
        let mut rest = flat.as_slice();
        while let [a, b, tail @ ..] = rest {
            let (token, tail) = tail.split_at(usize::from(u16::from_le_bytes([*a, *b])));
            tokens.push(token.to_vec());
            rest = tail;
        }
        tokens
    }

    /// Its cache file's name: the table's name, a digest of its tokens
    /// and this crate's version, so a table of other tokens or another
    /// build's format is never read as this one.
    pub(crate) fn file_name(&self) -> String {
        // FNV-1a: the name only has to differ when the tokens do.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self
            .tokens
            .iter()
            .chain(env!("CARGO_PKG_VERSION").as_bytes())
        {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
        format!("{}-{hash:016x}.bpe", self.name)
    }
}

/// The table cached in `file`, if it is there and holds exactly `tokens`.
fn read(file: &Path, tokens: &[Vec<u8>]) -> Option<BytePairEncoding> {
    let bytes = std::fs::read(file).ok()?;
    let bpe: BytePairEncoding = rmp_serde::from_slice(&bytes).ok()?;
    let same = bpe.num_tokens() == tokens.len()
        && tokens
            .iter()
            .enumerate()
            .all(|(rank, token)| bpe.token_bytes(rank as u32) == token.as_slice());
    same.then_some(bpe)
}

/// Stores `bpe` in `file`, whole or not at all (written beside it, then
/// renamed).
fn write(file: &Path, bpe: &BytePairEncoding) -> std::io::Result<()> {
    let dir = file.parent().expect("a cache file is in a directory");
    std::fs::create_dir_all(dir)?;
    let bytes = rmp_serde::to_vec(bpe).map_err(std::io::Error::other)?;
    let partial = dir.join(format!(
        ".{}.{}.partial",
        file.file_name().and_then(|n| n.to_str()).unwrap_or("table"),
        std::process::id()
    ));
    std::fs::write(&partial, bytes)?;
    std::fs::rename(&partial, file).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "The vehicle 架空 300 あ 10-02 is leased until 2031-04-01.\n\n  x";

    #[test]
    fn a_table_is_cached_read_back_and_rebuilt_when_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(CL100K.file_name());
        let expected = CL100K_BASE.count(TEXT);

        // Built, then stored.
        assert_eq!(load(&CL100K, Some(dir.path())).count(TEXT), expected);
        let stored = std::fs::read(&file).expect("the table is cached");
        assert!(stored.len() > 10_000_000, "{}", stored.len());
        // Read back: the same counts.
        assert!(read(&file, &CL100K.tokens()).is_some());
        assert_eq!(load(&CL100K, Some(dir.path())).count(TEXT), expected);

        // Cut short, or another table's under this one's name: not read,
        // rebuilt and stored again.
        std::fs::write(&file, &stored[..stored.len() / 2]).unwrap();
        assert!(read(&file, &CL100K.tokens()).is_none());
        assert_eq!(load(&CL100K, Some(dir.path())).count(TEXT), expected);
        assert_eq!(std::fs::read(&file).unwrap(), stored);
        let other = BytePairEncoding::from_dictionary(
            CL100K.tokens().into_iter().take(1_000),
            Some(HASH_FACTOR),
        );
        std::fs::write(&file, rmp_serde::to_vec(&other).unwrap()).unwrap();
        assert!(read(&file, &CL100K.tokens()).is_none());
        assert_eq!(load(&CL100K, Some(dir.path())).count(TEXT), expected);
        assert_eq!(std::fs::read(&file).unwrap(), stored);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [file.file_name().unwrap()], "no partial files left");
    }

    #[test]
    fn a_cache_that_cannot_be_written_still_counts() {
        let dir = tempfile::tempdir().unwrap();
        let not_a_dir = dir.path().join("file");
        std::fs::write(&not_a_dir, "x").unwrap();
        let tokenizer = load(&CL100K, Some(&not_a_dir.join("tokenizers")));
        assert_eq!(tokenizer.count(TEXT), CL100K_BASE.count(TEXT));
    }

    #[test]
    fn tables_hold_openais_tokens_by_rank() {
        let o200k = O200K.tokens();
        assert_eq!(o200k.len(), 199_998);
        assert_eq!(o200k[0], b"!");
        let cl100k = CL100K.tokens();
        assert_eq!(cl100k.len(), 100_256);
        assert_ne!(O200K.file_name(), CL100K.file_name());
    }
}
