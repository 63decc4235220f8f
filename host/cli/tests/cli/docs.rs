//! The documentation as a new user meets it: the README's tour and every
//! shell block of the book run as written, the book built with mdBook, and
//! every relative link in the README and the book leading somewhere.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A shell block of the docs: ```sh runs as written; ```sh norun: WHY
/// does not, and says why.
#[derive(Debug)]
struct Block {
    /// Why it is not run, for a `norun` block.
    norun: Option<String>,
    text: String,
    /// Its first line in the file, from 1.
    line: usize,
}

/// The ```sh blocks of `text`, in order.
fn blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut inside: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        match &mut inside {
            None => {
                let Some(info) = line.strip_prefix("```sh") else {
                    continue;
                };
                let norun = match info.trim() {
                    "" => None,
                    info => Some(
                        info.strip_prefix("norun:")
                            .unwrap_or_else(|| {
                                panic!(
                                    "line {}: ```sh takes `norun: WHY` only, not {info:?}",
                                    i + 1
                                )
                            })
                            .trim()
                            .to_owned(),
                    ),
                };
                inside = Some(Block {
                    norun,
                    text: String::new(),
                    line: i + 1,
                });
            }
            Some(_) if line == "```" => blocks.extend(inside.take()),
            Some(block) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
        }
    }
    blocks
}

fn sh_blocks(text: &str) -> Vec<String> {
    blocks(text).into_iter().map(|b| b.text).collect()
}

/// Runs `script` with bash from the repository, with the binary these
/// tests built first on `PATH`, in a home of its own; prepared by
/// `prelude`. Stdout and stderr, or why it failed.
fn run_shell(prelude: &str, script: &str) -> Result<(String, String), String> {
    let bin = Path::new(env!("CARGO_BIN_EXE_hane")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &format!("{prelude}\n{script}")])
        .current_dir(repo())
        .env("PATH", path)
        .env("HOME", home.path())
        .env("TMPDIR", home.path())
        .env("HANE_CACHE_DIR", hane_test_support::component_cache())
        .env_remove("HANE_STORE")
        .env_remove("HANE_WORKER")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok((stdout, stderr))
    } else {
        Err(format!(
            "{}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status
        ))
    }
}

/// Every ```sh block of the book, each file's in one shell after a store
/// of its own with the examples active; a block that cannot run as
/// written says why (```sh norun: WHY).
#[test]
fn every_shell_block_of_the_book_runs_as_written() {
    let repo = repo();
    let mut files = Vec::new();
    markdown_files(&repo.join("docs"), &mut files);
    files.sort();
    let prelude = "export HANE_STORE=\"$HOME/hane.db\"\nhane release activate examples >/dev/null";
    let mut failed = Vec::new();
    let mut ran = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let mut script = String::new();
        for block in blocks(&text) {
            match &block.norun {
                Some(why) => assert!(
                    !why.is_empty(),
                    "{}:{}: a norun block says why",
                    file.display(),
                    block.line
                ),
                None => {
                    script.push_str(&block.text);
                    ran += 1;
                }
            }
        }
        if script.is_empty() {
            continue;
        }
        if let Err(e) = run_shell(prelude, &script) {
            failed.push(format!("{}:\n{script}\n{e}", file.display()));
        }
    }
    assert!(ran >= 10, "only {ran} blocks ran");
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// The README's five-minute tour, every line as written, with the binary
/// these tests built first on `PATH` (the tour puts `target/debug` there
/// itself).
#[test]
fn the_readme_tour_runs_as_written() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let blocks = sh_blocks(&readme);
    assert_eq!(
        blocks[0], "cargo run --bin hane -- demo\ncargo xtask test\n",
        "the README starts with its two commands (CI runs them)"
    );
    let tour = blocks.get(1).expect("a tour after the two commands");
    let (stdout, stderr) =
        run_shell("", tour).unwrap_or_else(|e| panic!("the tour failed:\n{tour}\n{e}"));
    // What the tour says each step shows.
    for shown in [
        "brake fluid",
        "would_start  vehicle-check-llm",
        "2/2 passed",
    ] {
        assert!(
            stdout.contains(shown) || stderr.contains(shown),
            "the tour shows no {shown:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    }
}

/// A heading's anchor as GitHub and mdBook make it: lower case, spaces to
/// hyphens, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.starts_with("```") {
                fenced = !fenced;
            }
            !fenced
        })
        .filter_map(|line| line.strip_prefix('#'))
        .map(|heading| anchor(heading.trim_start_matches('#')))
        .collect()
}

/// The targets of `[text](target)` links in `text`, outside code.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            found.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    found
}

fn markdown_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            markdown_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "md") {
            into.push(path);
        }
    }
}

#[test]
fn every_relative_link_in_the_docs_leads_somewhere() {
    let repo = repo();
    let mut files: Vec<PathBuf> = ["README.md", "BENCHMARKS.md", "ARCHITECTURE.md"]
        .iter()
        .map(|f| repo.join(f))
        .collect();
    markdown_files(&repo.join("docs"), &mut files);
    assert!(files.len() > 10, "the book is under docs/: {files:?}");
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match link.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {link}: no such file", file.display()));
                continue;
            }
            if let Some(fragment) = fragment
                && target.extension().is_some_and(|e| e == "md")
                && !anchors(&std::fs::read_to_string(&target).unwrap()).contains(fragment)
            {
                broken.push(format!("{}: {link}: no such heading", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The book builds with the mdBook `cargo xtask` provisions, a page for
/// every chapter of its summary.
#[test]
fn the_book_builds() {
    let repo = repo();
    let mdbook = std::env::var_os("HANE_TEST_MDBOOK")
        .filter(|m| !m.is_empty())
        .map_or_else(
            || repo.join("target/test-env/mdbook/bin/mdbook"),
            PathBuf::from,
        );
    assert!(
        mdbook.is_file(),
        "the book is built by the mdBook that cargo xtask test (or `cargo xtask provision`, then plain cargo test) provisions; {} is not there",
        mdbook.display()
    );
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new(&mdbook)
        .arg("build")
        .arg(repo.join("docs"))
        .arg("--dest-dir")
        .arg(out_dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mdbook build failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = std::fs::read_to_string(repo.join("docs/SUMMARY.md")).unwrap();
    let chapters: Vec<String> = links(&summary);
    assert!(chapters.len() > 20, "{chapters:?}");
    for chapter in chapters {
        let page = out_dir.path().join(chapter.replace(".md", ".html"));
        assert!(page.is_file(), "no page {} for {chapter}", page.display());
    }
}
