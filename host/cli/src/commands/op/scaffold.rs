//! `hane op new`: a new operation crate that builds to a component.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;

#[derive(Args)]
pub struct NewArgs {
    /// The operation's name, such as `text.word_count` or `demo`; the crate
    /// and folder are named after it with `.` and `_` turned into `-`.
    name: String,
    /// Where to create the crate [default: ./<crate name>].
    #[arg(long, value_name = "DIR")]
    path: Option<PathBuf>,
    /// The hane-guest SDK to depend on [default: $HANE_GUEST_SDK, else the
    /// SDK of the source tree hane was built from].
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

/// The toolchain file of hane itself, so a new crate builds with the same
/// pinned compiler and the wasm32-wasip2 target.
const TOOLCHAIN: &str = include_str!("../../../../../rust-toolchain.toml");

pub fn new(args: NewArgs) -> anyhow::Result<()> {
    let name = args.name.trim();
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if !valid {
        bail!(
            "invalid operation name `{name}`: use lowercase letters, digits, `.`, `_` and `-`, starting with a letter, such as `text.word_count`"
        );
    }
    let crate_name = name.replace(['.', '_'], "-");
    let dir = args.path.unwrap_or_else(|| PathBuf::from(&crate_name));
    if dir.exists() {
        bail!(
            "`{}` already exists; choose another name or --path",
            dir.display()
        );
    }
    let sdk = find_sdk(args.sdk)?;

    std::fs::create_dir_all(dir.join("src"))
        .with_context(|| format!("cannot create `{}`", dir.display()))?;
    let write = |file: &str, text: String| {
        std::fs::write(dir.join(file), text).with_context(|| format!("cannot write `{file}`"))
    };
    write("Cargo.toml", cargo_toml(&crate_name, &sdk))?;
    write("rust-toolchain.toml", TOOLCHAIN.to_owned())?;
    write(".gitignore", "/target\n".to_owned())?;
    write("src/lib.rs", lib_rs(name))?;

    let wasm = crate_name.replace('-', "_");
    println!("created operation `{name}` in {}", dir.display());
    println!();
    println!("  cd {}", dir.display());
    println!("  cargo test");
    println!("  cargo build --release --target wasm32-wasip2");
    println!("  hane op inspect target/wasm32-wasip2/release/{wasm}.wasm");
    println!(
        "  hane op run target/wasm32-wasip2/release/{wasm}.wasm --input '{{\"text\": \"one two three\"}}'"
    );
    Ok(())
}

fn find_sdk(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let candidates = explicit
        .into_iter()
        .chain(std::env::var_os("HANE_GUEST_SDK").map(PathBuf::from))
        .chain([Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-sdk")]);
    for candidate in candidates {
        if candidate.join("Cargo.toml").is_file() {
            return candidate
                .canonicalize()
                .with_context(|| format!("cannot resolve `{}`", candidate.display()));
        }
    }
    bail!(
        "cannot find the hane-guest SDK; pass --sdk DIR (the guest-sdk folder of a hane checkout) or set HANE_GUEST_SDK"
    )
}

fn cargo_toml(crate_name: &str, sdk: &Path) -> String {
    format!(
        r#"[package]
name = "{crate_name}"
version = "0.1.0"
edition = "2024"
description = "Counts the words, lines and characters of a text."
publish = false

# A component is a cdylib; the rlib lets `cargo test` run on the host.
[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
hane-guest = {{ path = "{sdk}" }}
serde = {{ version = "1", features = ["derive"] }}
schemars = "1"

[profile.release]
strip = "debuginfo"

# Its own workspace, so it builds wherever it is created.
[workspace]
"#,
        sdk = sdk.display().to_string().replace('\\', "/"),
    )
}

fn lib_rs(name: &str) -> String {
    format!(
        r#"//! The `{name}` operation.
//!
//! Build it into a component with
//! `cargo build --release --target wasm32-wasip2`, then run it with
//! `hane op run target/wasm32-wasip2/release/<crate>.wasm --input '{{"text": "..."}}'`.

use hane_guest::Error;
use schemars::JsonSchema;
use serde::{{Deserialize, Serialize}};

hane_guest::operation! {{
    name: "{name}",
    impact: Read,
    run: count,
}}

/// The text to count.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Input {{
    /// Any UTF-8 text.
    pub text: String,
}}

/// What was counted.
#[derive(Debug, PartialEq, Serialize, JsonSchema)]
pub struct Output {{
    /// Whitespace-separated words.
    pub words: usize,
    /// Lines, counting a last line without a newline.
    pub lines: usize,
    /// Unicode scalar values.
    pub characters: usize,
}}

/// Counts the words, lines and characters of `input.text`.
pub fn count(input: Input) -> Result<Output, Error> {{
    if input.text.is_empty() {{
        return Err(Error::InvalidInput("text is empty".into()));
    }}
    hane_guest::log::debug("counting");
    Ok(Output {{
        words: input.text.split_whitespace().count(),
        lines: input.text.lines().count(),
        characters: input.text.chars().count(),
    }})
}}

#[cfg(test)]
mod tests {{
    use super::*;

    #[test]
    fn counts_words_lines_and_characters() {{
        let out = count(Input {{ text: "one two\nthree".into() }}).unwrap();
        assert_eq!(out, Output {{ words: 3, lines: 2, characters: 13 }});
    }}

    #[test]
    fn empty_text_is_invalid_input() {{
        let err = count(Input {{ text: String::new() }}).unwrap_err();
        assert_eq!(err, Error::InvalidInput("text is empty".into()));
    }}
}}
"#
    )
}
