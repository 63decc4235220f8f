use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::*;

fn numbered_lines(n: usize) -> String {
    let mut text = String::new();
    for i in 1..=n {
        writeln!(text, "line {i}").unwrap();
    }
    text
}

fn doc(text: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new().unwrap();
    fs::write(dir.path().join("doc.txt"), text).unwrap();
    let root = dir.path().to_path_buf();
    (dir, root)
}

fn read(root: &Path, page: Option<u32>, lines: Option<&str>) -> Result<ReadPagesOutput, Error> {
    read_pages(
        &[root],
        ReadPagesInput {
            path: "doc.txt".into(),
            page,
            lines: lines.map(str::to_owned),
        },
    )
}

#[test]
fn pages_are_fifty_lines_without_form_feeds() {
    let (_dir, root) = doc(&numbered_lines(120));
    let first = read(&root, None, None).unwrap();
    assert_eq!(first.page, Some(1));
    assert_eq!(first.total_pages, 3);
    assert_eq!(first.total_lines, 120);
    assert_eq!((first.start_line, first.end_line), (1, 50));
    assert!(first.text.starts_with("line 1\n"));
    assert!(first.text.ends_with("line 50\n"));
    assert_eq!(first.text.lines().count(), 50);

    let last = read(&root, Some(3), None).unwrap();
    assert_eq!((last.start_line, last.end_line), (101, 120));
    assert!(last.text.starts_with("line 101\n"));
    assert!(last.text.ends_with("line 120\n"));
    assert!(!last.truncated);
}

#[test]
fn pages_are_split_at_form_feeds() {
    let (_dir, root) = doc("title page\n\x0cone\ntwo\n\x0c\x0cthree\n\x0c");
    let out = read(&root, Some(2), None).unwrap();
    assert_eq!(out.text, "one\ntwo\n");
    assert_eq!(out.total_pages, 4);
    assert_eq!((out.start_line, out.end_line), (2, 3));
    // An empty page between two form feeds is still a page.
    assert_eq!(read(&root, Some(3), None).unwrap().text, "");
    let four = read(&root, Some(4), None).unwrap();
    assert_eq!(four.text, "three\n");
    assert_eq!((four.start_line, four.end_line), (4, 4));
    // The final form feed opens no fifth page.
    let err = read(&root, Some(5), None).unwrap_err();
    assert_eq!(
        err,
        Error::InvalidInput("page 5 is out of range: doc.txt has 4 pages".into())
    );
}

#[test]
fn reads_line_ranges() {
    let (_dir, root) = doc(&numbered_lines(30));
    let out = read(&root, None, Some("10-12")).unwrap();
    assert_eq!(out.text, "line 10\nline 11\nline 12\n");
    assert_eq!(out.page, None);
    assert_eq!(
        (out.start_line, out.end_line, out.total_lines),
        (10, 12, 30)
    );
    assert_eq!(out.total_pages, 1);

    let one = read(&root, None, Some(" 30 ")).unwrap();
    assert_eq!(one.text, "line 30\n");
    assert_eq!((one.start_line, one.end_line), (30, 30));
}

#[test]
fn last_line_without_newline_is_read() {
    let (_dir, root) = doc("a\nb");
    let out = read(&root, None, Some("2-2")).unwrap();
    assert_eq!(out.text, "b");
    assert_eq!(out.total_lines, 2);
}

#[test]
fn out_of_range_lines_name_the_range_and_the_size() {
    let (_dir, root) = doc(&numbered_lines(30));
    let err = read(&root, None, Some("10-40")).unwrap_err();
    assert_eq!(
        err,
        Error::InvalidInput("lines 10-40 are out of range: doc.txt has 30 lines".into())
    );
    let err = read(&root, Some(2), None).unwrap_err();
    assert_eq!(
        err,
        Error::InvalidInput("page 2 is out of range: doc.txt has 1 page".into())
    );
}

#[test]
fn refuses_malformed_selections() {
    let (_dir, root) = doc("x\n");
    for lines in ["", "a-b", "3-1", "0-2", "1-2-3", "-4", "1..2"] {
        let err = read(&root, None, Some(lines)).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{lines:?}: {err:?}");
    }
    let too_many = format!("1-{}", MAX_LINES_PER_READ + 1);
    assert!(
        matches!(read(&root, None, Some(&too_many)), Err(Error::InvalidInput(m)) if m.contains("at most 1000"))
    );
    assert!(matches!(
        read(&root, Some(0), None),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        read(&root, Some(1), Some("1-2")),
        Err(Error::InvalidInput(m)) if m.contains("not both")
    ));
}

#[test]
fn empty_document_has_one_empty_page() {
    let (_dir, root) = doc("");
    let out = read(&root, None, None).unwrap();
    assert_eq!(out.text, "");
    assert_eq!((out.total_pages, out.total_lines), (1, 0));
    assert_eq!((out.start_line, out.end_line), (0, 0));
    assert!(matches!(
        read(&root, None, Some("1")),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn missing_outside_directory_and_binary_files() {
    let (dir, root) = doc("x");
    let missing = read_pages(
        &[&root],
        ReadPagesInput {
            path: "nope.txt".into(),
            page: None,
            lines: None,
        },
    );
    assert!(matches!(missing, Err(Error::NotFound(m)) if m.starts_with("nope.txt")));

    let outside = read_pages(
        &[&root],
        ReadPagesInput {
            path: "../doc.txt".into(),
            page: None,
            lines: None,
        },
    );
    assert!(matches!(outside, Err(Error::Denied(_))));

    fs::create_dir(dir.path().join("sub")).unwrap();
    let directory = read_pages(
        &[&root],
        ReadPagesInput {
            path: "sub".into(),
            page: None,
            lines: None,
        },
    );
    assert!(matches!(directory, Err(Error::InvalidInput(m)) if m.contains("directory")));

    fs::write(dir.path().join("bin.dat"), [1, 2, 0, 3]).unwrap();
    let binary = read_pages(
        &[&root],
        ReadPagesInput {
            path: dir.path().join("bin.dat").display().to_string(),
            page: None,
            lines: None,
        },
    );
    assert!(matches!(binary, Err(Error::InvalidInput(m)) if m.contains("binary")));
}

#[test]
fn long_pages_are_truncated_at_a_char_boundary() {
    // One line of multi-byte characters, longer than the text cap.
    let text = "é".repeat(MAX_TEXT_BYTES);
    let (_dir, root) = doc(&text);
    let out = read(&root, None, None).unwrap();
    assert!(out.truncated);
    assert_eq!(out.text.len(), MAX_TEXT_BYTES);
    assert_eq!((out.start_line, out.end_line), (1, 1));
}

#[test]
fn invalid_utf8_is_read_lossily() {
    let dir = TempDir::new().unwrap();
    fs::write(dir.path().join("doc.txt"), b"caf\xe9\n").unwrap();
    let out = read(dir.path(), None, None).unwrap();
    assert_eq!(out.text, "caf\u{fffd}\n");
}

#[test]
fn json_shapes_match_the_schemas() {
    let (_dir, root) = doc("one\ntwo\n");
    let by_page = serde_json::to_value(read(&root, None, None).unwrap()).unwrap();
    assert_eq!(
        by_page,
        json!({
            "path": root.join("doc.txt").display().to_string(),
            "text": "one\ntwo\n",
            "page": 1,
            "total_pages": 1,
            "start_line": 1,
            "end_line": 2,
            "total_lines": 2,
            "truncated": false,
        })
    );
    let by_lines = serde_json::to_value(read(&root, None, Some("2")).unwrap()).unwrap();
    assert!(by_lines.get("page").is_none());

    let d = hane_guest::__private::describe(
        run,
        "documents.read_pages",
        "0",
        "",
        hane_guest::Impact::Read,
    );
    let input: Value = serde_json::from_str(&d.input_schema).unwrap();
    assert_eq!(input["required"], json!(["path"]));
    assert_eq!(input["additionalProperties"], false);
    let output: Value = serde_json::from_str(&d.output_schema).unwrap();
    let required = output["required"].as_array().unwrap();
    assert!(!required.contains(&json!("page")));
    assert!(required.contains(&json!("total_pages")));

    // The exported run resolves against the grants, which are empty off wasm.
    let err = hane_guest::__private::run_json(r#"{"path": "a.txt"}"#, run).unwrap_err();
    assert!(matches!(err, Error::Denied(_)));
}
