//! With `exact-tokens`: OpenAI's tokenizer tables as lists of tokens, in
//! rank order, deflated, for `src/tables.rs` to embed.
//!
//! The tokens come from tiktoken-rs (its copies of OpenAI's `.tiktoken`
//! files). Each is written as its length (two bytes, little-endian) and
//! its bytes. About 1.6 MB for both tables, where the tables built from
//! them take 47 MB; they are built on first use and cached on disk.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(feature = "exact-tokens")]
    {
        let out =
            std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        tables::write(&out);
    }
}

#[cfg(feature = "exact-tokens")]
mod tables {
    use std::io::Write;

    pub fn write(out: &std::path::Path) {
        let tables = [
            ("o200k_base", tiktoken_rs::o200k_base(), 199_998),
            ("cl100k_base", tiktoken_rs::cl100k_base(), 100_256),
        ];
        for (name, core, expected) in tables {
            let core = core.unwrap_or_else(|e| panic!("tiktoken-rs's {name}: {e}"));
            let mut flat = Vec::new();
            let mut count = 0u32;
            // Ranks are dense from 0; the first rank without a token ends
            // the ordinary tokens (special tokens sit above a gap).
            while let Ok(token) = core.decode_bytes(&[count]) {
                let len = u16::try_from(token.len()).expect("a token is shorter than 64 KiB");
                flat.extend_from_slice(&len.to_le_bytes());
                flat.extend_from_slice(&token);
                count += 1;
            }
            assert_eq!(count, expected, "{name}: tokens in rank order");
            let mut deflated =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
            deflated.write_all(&flat).expect("deflating in memory");
            let deflated = deflated.finish().expect("deflating in memory");
            std::fs::write(out.join(format!("{name}.tokens")), &deflated)
                .unwrap_or_else(|e| panic!("writing {name}.tokens: {e}"));
        }
    }
}
