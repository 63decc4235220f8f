//! `cargo xtask architecture`: checks the dependency table of
//! `ARCHITECTURE.md` against `cargo metadata`.
//!
//! The table is the markdown table under the heading `## Dependencies`:
//! one row per workspace crate, `| crate | depends on |`, the second cell
//! listing, separated by commas, the workspace crates it depends on directly
//! as normal dependencies (`kind` null in the metadata: not dev- or
//! build-dependencies), or `—` for none. Backticks around names are
//! ignored. A crate missing from the table, a row naming no workspace
//! crate, a dependency claimed but absent and one present but unclaimed are
//! each a failure, all reported together.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use super::output;

/// The heading the table sits under.
const HEADING: &str = "## Dependencies";

/// Each workspace crate and the workspace crates it depends on directly.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// Runs the check in the repository at `root`, printing one line when the
/// table matches.
pub fn check(root: &Path) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let metadata = output(
        Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--no-deps"])
            .current_dir(root),
        "reading the workspace with cargo metadata",
    )?;
    let actual = workspace_graph(&metadata)?;
    let path = root.join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let claimed = claimed_graph(&text).map_err(|e| format!("ARCHITECTURE.md: {e}"))?;
    let problems = compare(&claimed, &actual);
    if problems.is_empty() {
        println!(
            "xtask: architecture: the dependencies in ARCHITECTURE.md match cargo metadata \
             ({} crates)",
            actual.len()
        );
        Ok(())
    } else {
        Err(format!(
            "ARCHITECTURE.md's \"{HEADING}\" does not match cargo metadata (change the table \
             in the same commit as the Cargo.toml):\n  {}",
            problems.join("\n  ")
        ))
    }
}

/// The graph `cargo metadata --format-version 1 --no-deps` describes: each
/// workspace member and its normal dependencies that are path dependencies
/// on workspace members.
fn workspace_graph(metadata: &str) -> Result<Graph, String> {
    let what = "the output of cargo metadata";
    let root = parse(metadata).map_err(|e| format!("{what} is not JSON: {e}"))?;
    let members: BTreeSet<&str> = root
        .get("workspace_members")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{what} has no workspace_members"))?
        .iter()
        .map(|id| {
            id.as_str()
                .ok_or_else(|| format!("{what}: a member id is not a string"))
        })
        .collect::<Result<_, _>>()?;
    let packages = root
        .get("packages")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{what} has no packages"))?;
    let field = |package: &Value, key: &str| {
        package
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("{what}: a package has no string `{key}`"))
    };
    let mut workspace = Vec::new();
    for package in packages {
        if members.contains(field(package, "id")?.as_str()) {
            workspace.push((field(package, "name")?, package));
        }
    }
    let names: BTreeSet<&str> = workspace.iter().map(|(name, _)| name.as_str()).collect();
    let mut graph = Graph::new();
    for (name, package) in &workspace {
        let dependencies = package
            .get("dependencies")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{what}: {name} has no dependencies list"))?;
        let mut direct = BTreeSet::new();
        for dependency in dependencies {
            let dep_name = field(dependency, "name")?;
            let normal = matches!(dependency.get("kind"), Some(Value::Null) | None);
            let on_path = dependency.get("path").and_then(Value::as_str).is_some();
            if normal && on_path && names.contains(dep_name.as_str()) {
                direct.insert(dep_name);
            }
        }
        graph.insert(name.clone(), direct);
    }
    Ok(graph)
}

/// The graph the table under [`HEADING`] in `text` claims.
fn claimed_graph(text: &str) -> Result<Graph, String> {
    let mut lines = text.lines().enumerate();
    lines
        .by_ref()
        .find(|(_, line)| line.trim_end() == HEADING)
        .ok_or_else(|| format!("no \"{HEADING}\" heading"))?;
    let mut graph = Graph::new();
    let mut header_seen = false;
    for (index, line) in lines {
        let number = index + 1;
        let line = line.trim();
        if line.starts_with("## ") || line == "##" {
            break;
        }
        if !line.starts_with('|') {
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if !header_seen {
            // The header row, then the separator row.
            header_seen = true;
            continue;
        }
        if cells
            .iter()
            .all(|c| c.chars().all(|ch| matches!(ch, '-' | ':')))
        {
            continue;
        }
        let [krate, dependencies] = cells[..] else {
            return Err(format!(
                "line {number}: a row of the dependency table has {} cells, not 2: {line}",
                cells.len()
            ));
        };
        let krate = name(krate);
        if krate.is_empty() {
            return Err(format!("line {number}: a row names no crate: {line}"));
        }
        let listed: BTreeSet<String> = match name(dependencies) {
            "" | "—" | "-" | "none" => BTreeSet::new(),
            list => list
                .split(',')
                .map(|d| name(d).to_owned())
                .filter(|d| !d.is_empty())
                .collect(),
        };
        if graph.insert(krate.to_owned(), listed).is_some() {
            return Err(format!("line {number}: {krate} has a second row"));
        }
    }
    if graph.is_empty() {
        return Err(format!("no table rows under \"{HEADING}\""));
    }
    Ok(graph)
}

/// A cell's name without its backticks and spaces.
fn name(cell: &str) -> &str {
    cell.trim().trim_matches('`').trim()
}

/// Every difference between the claimed and the actual graph, one line
/// each, by crate.
fn compare(claimed: &Graph, actual: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    for (krate, present) in actual {
        let Some(claims) = claimed.get(krate) else {
            let deps = if present.is_empty() {
                "—".to_owned()
            } else {
                present
                    .iter()
                    .map(|d| format!("`{d}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            problems.push(format!(
                "{krate} is missing from the table; its row: | `{krate}` | {deps} |"
            ));
            continue;
        };
        let absent: Vec<&String> = claims.difference(present).collect();
        if !absent.is_empty() {
            problems.push(format!(
                "{krate}: claimed but absent: {}",
                list(absent.into_iter())
            ));
        }
        let unclaimed: Vec<&String> = present.difference(claims).collect();
        if !unclaimed.is_empty() {
            problems.push(format!(
                "{krate}: present but unclaimed: {}",
                list(unclaimed.into_iter())
            ));
        }
    }
    for krate in claimed.keys().filter(|k| !actual.contains_key(*k)) {
        problems.push(format!(
            "{krate} is in the table but is not a workspace crate"
        ));
    }
    problems
}

/// `names` joined by commas.
fn list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    names.map(String::as_str).collect::<Vec<_>>().join(", ")
}

/// A JSON value: what [`parse`] reads, with no more than the checks above
/// need (numbers are kept as their text).
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Value>),
    /// Members in the order written.
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member `key` of an object (the last, if given twice).
    fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// Parses one JSON text (RFC 8259), whitespace around it allowed.
fn parse(text: &str) -> Result<Value, String> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        at: 0,
        depth: 0,
    };
    let value = parser.value()?;
    parser.whitespace();
    if parser.at != parser.bytes.len() {
        return Err(parser.error("text after the value"));
    }
    Ok(value)
}

/// How deeply arrays and objects may nest (cargo's output nests a few
/// levels; this bounds the recursion).
const MAX_DEPTH: usize = 128;

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!("{what} at byte {}", self.at)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected `{}`", byte as char)))
        }
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Value, String> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error("unexpected character"))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.whitespace();
        match self.peek() {
            None => Err(self.error("unexpected end")),
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("unexpected character")),
        }
    }

    fn nested(&mut self, read: fn(&mut Self) -> Result<Value, String>) -> Result<Value, String> {
        if self.depth == MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        self.depth += 1;
        let value = read(self);
        self.depth -= 1;
        value
    }

    fn object(&mut self) -> Result<Value, String> {
        self.expect(b'{')?;
        let mut members = Vec::new();
        self.whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a string key"));
            }
            let key = self.string()?;
            self.whitespace();
            self.expect(b':')?;
            members.push((key, self.value()?));
            self.whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    fn array(&mut self) -> Result<Value, String> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.whitespace();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.at;
        let digits = |p: &mut Self| {
            let from = p.at;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.at += 1;
            }
            p.at > from
        };
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        if self.peek() == Some(b'0') {
            self.at += 1;
        } else if !digits(self) {
            return Err(self.error("expected a digit"));
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if !digits(self) {
                return Err(self.error("expected a digit after `.`"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if !digits(self) {
                return Err(self.error("expected a digit in the exponent"));
            }
        }
        // Only ASCII was consumed, so this is a character boundary.
        Ok(Value::Number(
            String::from_utf8_lossy(&self.bytes[start..self.at]).into_owned(),
        ))
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            // Copy the run of plain characters up to the next quote or
            // backslash whole: the input is a `str`, so it is valid UTF-8
            // and both bytes are ASCII, never inside a character.
            let from = self.at;
            while let Some(byte) = self.peek() {
                if byte == b'"' || byte == b'\\' {
                    break;
                }
                if byte < 0x20 {
                    return Err(self.error("control character in a string"));
                }
                self.at += 1;
            }
            out.push_str(std::str::from_utf8(&self.bytes[from..self.at]).expect("a str's slice"));
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                _ => {
                    self.at += 1;
                    self.escape(&mut out)?;
                }
            }
        }
    }

    /// The escape after a backslash.
    fn escape(&mut self, out: &mut String) -> Result<(), String> {
        let Some(byte) = self.peek() else {
            return Err(self.error("unterminated string"));
        };
        self.at += 1;
        let c = match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let high = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&high) {
                    if !self.bytes[self.at..].starts_with(b"\\u") {
                        return Err(self.error("a high surrogate without its low one"));
                    }
                    self.at += 2;
                    let low = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return Err(self.error("a high surrogate without its low one"));
                    }
                    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    high
                };
                char::from_u32(code).ok_or_else(|| self.error("a lone low surrogate"))?
            }
            _ => return Err(self.error("unknown escape")),
        };
        out.push(c);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .ok_or_else(|| self.error("a short \\u escape"))?;
        let mut code = 0;
        for &d in digits {
            let v = (d as char)
                .to_digit(16)
                .ok_or_else(|| self.error("a \\u escape that is not hex"))?;
            code = code * 16 + v;
        }
        self.at += 4;
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn parses_json() {
        let value =
            parse(r#" {"a": [1, -2.5e3, true, false, null], "b": {"c": "d"}, "e": {}, "f": []} "#)
                .unwrap();
        assert_eq!(
            value.get("a"),
            Some(&Value::Array(vec![
                Value::Number("1".into()),
                Value::Number("-2.5e3".into()),
                Value::Bool(true),
                Value::Bool(false),
                Value::Null,
            ]))
        );
        assert_eq!(
            value
                .get("b")
                .and_then(|b| b.get("c"))
                .and_then(Value::as_str),
            Some("d")
        );
        assert_eq!(value.get("e"), Some(&Value::Object(vec![])));
        assert_eq!(value.get("f").and_then(Value::as_array), Some(&[][..]));
        assert_eq!(value.get("g"), None);
    }

    #[test]
    fn parses_string_escapes() {
        let value = parse(r#""a\"b\\c\/d\n\t\u00e9\ud83d\ude00 é😀""#).unwrap();
        assert_eq!(value, Value::String("a\"b\\c/d\n\té😀 é😀".into()));
    }

    #[test]
    fn refuses_malformed_json() {
        for text in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "{a: 1}",
            "\"open",
            "\"\\x\"",
            "\"\\ud83d\"",
            "\"\\ude00\"",
            "\"a\nb\"",
            "01x",
            "-",
            "1.",
            "1e",
            "tru",
            "{} {}",
            "nul",
        ] {
            assert!(parse(text).is_err(), "{text:?} was accepted");
        }
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(parse(&deep).unwrap_err().contains("nested too deeply"));
        let fine = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(&fine).is_ok());
    }

    /// The shape `cargo metadata --format-version 1 --no-deps` has, cut
    /// down: a dev-dependency, a build-dependency, a registry crate, a
    /// target-specific normal one, and a package not a member.
    const METADATA: &str = r#"{
      "packages": [
        {"name": "a", "id": "path+file:///r/a#0.1.0", "dependencies": [
          {"name": "b", "kind": null, "path": "/r/b", "source": null, "target": null},
          {"name": "c", "kind": "dev", "path": "/r/c", "source": null},
          {"name": "c", "kind": "build", "path": "/r/c", "source": null},
          {"name": "serde", "kind": null, "source": "registry+https://github.com/rust-lang/crates.io-index"},
          {"name": "d", "kind": null, "path": "/r/d", "source": null, "target": "cfg(unix)"},
          {"name": "outside", "kind": null, "path": "/elsewhere", "source": null}
        ]},
        {"name": "b", "id": "path+file:///r/b#0.1.0", "dependencies": []},
        {"name": "c", "id": "path+file:///r/c#0.1.0", "dependencies": [
          {"name": "b", "kind": null, "path": "/r/b", "source": null}
        ]},
        {"name": "d", "id": "path+file:///r/d#0.1.0", "dependencies": []},
        {"name": "outside", "id": "path+file:///elsewhere#0.1.0", "dependencies": []}
      ],
      "workspace_members": ["path+file:///r/a#0.1.0", "path+file:///r/b#0.1.0",
                            "path+file:///r/c#0.1.0", "path+file:///r/d#0.1.0"],
      "version": 1
    }"#;

    #[test]
    fn reads_the_workspace_graph() {
        let graph = workspace_graph(METADATA).unwrap();
        assert_eq!(graph.len(), 4);
        assert_eq!(graph["a"], set(&["b", "d"]));
        assert_eq!(graph["b"], set(&[]));
        assert_eq!(graph["c"], set(&["b"]));
        assert!(
            workspace_graph("{}")
                .unwrap_err()
                .contains("workspace_members")
        );
    }

    const DOC: &str = "\
# Architecture

| crate | what |
|---|---|
| `x` | not this table |

## Dependencies

Some words.

| crate | depends on |
|---|---|
| `a` | `b`, `d` |
| `b` | — |
| c | b |

## Next

| `z` | `a` |
";

    #[test]
    fn reads_the_table() {
        let graph = claimed_graph(DOC).unwrap();
        assert_eq!(graph.len(), 3);
        assert_eq!(graph["a"], set(&["b", "d"]));
        assert_eq!(graph["b"], set(&[]));
        assert_eq!(graph["c"], set(&["b"]));
        assert!(claimed_graph("# Architecture\n").is_err());
        assert!(claimed_graph("## Dependencies\n\nnone\n").is_err());
        let twice = "## Dependencies\n| crate | depends on |\n|---|---|\n| a | — |\n| a | b |\n";
        assert!(
            claimed_graph(twice)
                .unwrap_err()
                .contains("a has a second row")
        );
        let three = "## Dependencies\n| crate | depends on |\n|---|---|\n| a | b | c |\n";
        assert!(claimed_graph(three).unwrap_err().contains("3 cells"));
    }

    #[test]
    fn the_table_matching_is_no_problem() {
        let actual = workspace_graph(METADATA).unwrap();
        let claimed = claimed_graph(&DOC.replace("| c | b |", "| c | b |\n| d | — |")).unwrap();
        assert_eq!(compare(&claimed, &actual), Vec::<String>::new());
    }

    #[test]
    fn names_each_drift() {
        let actual = workspace_graph(METADATA).unwrap();
        let doc = DOC
            .replace("| `a` | `b`, `d` |", "| `a` | `b`, `c` |")
            .replace("| c | b |", "| c | — |\n| e | a |");
        let problems = compare(&claimed_graph(&doc).unwrap(), &actual);
        assert_eq!(
            problems,
            [
                "a: claimed but absent: c",
                "a: present but unclaimed: d",
                "c: present but unclaimed: b",
                "d is missing from the table; its row: | `d` | — |",
                "e is in the table but is not a workspace crate",
            ]
        );
    }
}
