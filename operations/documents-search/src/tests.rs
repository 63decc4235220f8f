use std::fs;
use std::path::Path;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::*;

fn input(query: &str) -> SearchInput {
    SearchInput {
        query: query.to_owned(),
        limit: None,
        folder: None,
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn paths(output: &SearchOutput) -> Vec<String> {
    output.results.iter().map(|r| r.path.clone()).collect()
}

fn under(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

#[test]
fn ranks_by_bm25() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    write(root, "many.md", "wasm wasm wasm component\n");
    write(
        root,
        "once.txt",
        "wasm and a lot of other words that dilute the match\n",
    );
    write(root, "rare.txt", "sandbox\n");
    write(root, "none.txt", "nothing here\n");
    let out = search(&[root], input("WASM sandbox")).unwrap();
    assert_eq!(out.searched_documents, 4);
    // "sandbox" is in one document of four, "wasm" in two: the rarer word
    // weighs more, and repeating a word in a short document helps.
    assert_eq!(
        paths(&out),
        [
            under(root, "rare.txt"),
            under(root, "many.md"),
            under(root, "once.txt")
        ]
    );
    let scores: Vec<f64> = out.results.iter().map(|r| r.score).collect();
    assert!(scores.windows(2).all(|w| w[0] > w[1]), "{scores:?}");
    assert!(scores.iter().all(|s| *s > 0.0));
}

#[test]
fn ties_are_ordered_by_path() {
    let dir = TempDir::new().unwrap();
    for name in ["c.txt", "a.txt", "b/a.txt", "b.txt"] {
        write(dir.path(), name, "same words\n");
    }
    let out = search(&[dir.path()], input("same")).unwrap();
    let names: Vec<String> = out
        .results
        .iter()
        .map(|r| {
            Path::new(&r.path)
                .strip_prefix(dir.path())
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["a.txt", "b.txt", "b/a.txt", "c.txt"]);
}

#[test]
fn reports_title_line_and_snippet() {
    let dir = TempDir::new().unwrap();
    write(
        dir.path(),
        "guide.md",
        "---\ntitle: front\n---\n# Deploy   guide\n\nIntro.\nRun the   deploy script\nthen check.\n",
    );
    write(dir.path(), "notes.txt", "# not a title in text\ndeploy\n");
    let out = search(&[dir.path()], input("deploy script")).unwrap();
    let guide = &out.results[0];
    assert_eq!(guide.title, "Deploy guide");
    assert_eq!(guide.line, 7);
    assert_eq!(guide.snippet, "Run the deploy script then check.");
    let notes = &out.results[1];
    assert_eq!(notes.title, "notes.txt");
    assert_eq!(notes.line, 2);
}

#[test]
fn matches_unicode_words_without_regard_to_case() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "de.md", "Viel ÄRGER über Straße\n");
    write(dir.path(), "sub.txt", "ärgerlich\n");
    let out = search(&[dir.path()], input("ärger")).unwrap();
    assert_eq!(paths(&out), [under(dir.path(), "de.md")]);
}

#[test]
fn searches_only_documents_and_skips_hidden_and_large_files() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    write(root, "a.MD", "needle\n");
    write(root, "b.markdown", "needle\n");
    write(root, "code.rs", "needle\n");
    write(root, ".hidden.txt", "needle\n");
    write(root, ".git/notes.txt", "needle\n");
    let big = format!("needle {}", "x".repeat(MAX_FILE_BYTES as usize));
    write(root, "big.txt", &big);
    let out = search(&[root], input("needle")).unwrap();
    assert_eq!(
        paths(&out),
        [under(root, "a.MD"), under(root, "b.markdown")]
    );
    assert_eq!(out.searched_documents, 2);
    assert_eq!(out.skipped, 1);
    assert!(!out.truncated);
}

#[test]
fn limit_caps_results_and_is_validated() {
    let dir = TempDir::new().unwrap();
    for i in 0..15 {
        write(dir.path(), &format!("{i:02}.txt"), "word\n");
    }
    assert_eq!(
        search(&[dir.path()], input("word")).unwrap().results.len(),
        10
    );
    let mut three = input("word");
    three.limit = Some(3);
    assert_eq!(search(&[dir.path()], three).unwrap().results.len(), 3);
    for bad in [0, MAX_LIMIT + 1] {
        let mut i = input("word");
        i.limit = Some(bad);
        let err = search(&[dir.path()], i).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput(m) if m.contains("between 1 and 50")),
            "{err:?}"
        );
    }
}

#[test]
fn refuses_queries_without_words_or_too_long() {
    let dir = TempDir::new().unwrap();
    for query in ["", "  ", "?!"] {
        let err = search(&[dir.path()], input(query)).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{query:?}");
    }
    let long = "a".repeat(MAX_QUERY_BYTES + 1);
    assert!(matches!(
        search(&[dir.path()], input(&long)),
        Err(Error::InvalidInput(_))
    ));
    let many: Vec<String> = (0..=MAX_QUERY_TERMS).map(|i| format!("w{i}")).collect();
    let err = search(&[dir.path()], input(&many.join(" "))).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.contains("33 distinct words")),
        "{err:?}"
    );
}

#[test]
fn folder_narrows_the_search_and_must_be_inside_a_root() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    write(root, "top.txt", "needle\n");
    write(root, "sub/inner.txt", "needle\n");
    let mut i = input("needle");
    i.folder = Some("sub".into());
    assert_eq!(
        paths(&search(&[root], i).unwrap()),
        [under(root, "sub/inner.txt")]
    );

    let mut i = input("needle");
    i.folder = Some(under(root, "sub"));
    assert_eq!(search(&[root], i).unwrap().results.len(), 1);

    let mut i = input("needle");
    i.folder = Some("../".into());
    assert!(matches!(search(&[root], i), Err(Error::Denied(_))));

    let mut i = input("needle");
    i.folder = Some("missing".into());
    assert!(matches!(search(&[root], i), Err(Error::NotFound(m)) if m.starts_with("missing")));

    let mut i = input("needle");
    i.folder = Some("top.txt".into());
    assert!(matches!(search(&[root], i), Err(Error::InvalidInput(_))));
}

#[test]
fn searches_every_root_once() {
    let a = TempDir::new().unwrap();
    let b = TempDir::new().unwrap();
    write(a.path(), "x.txt", "needle\n");
    write(a.path(), "nested/y.txt", "needle\n");
    write(b.path(), "z.txt", "needle\n");
    let nested = a.path().join("nested");
    let roots = [a.path(), nested.as_path(), b.path()];
    let out = search(&roots, input("needle")).unwrap();
    assert_eq!(out.searched_documents, 3);
    assert_eq!(out.results.len(), 3);
}

#[test]
fn no_roots_is_denied() {
    let none: [&Path; 0] = [];
    assert!(matches!(search(&none, input("x")), Err(Error::Denied(_))));
    // The exported run uses the grants, which are empty off wasm.
    assert!(matches!(run(input("x")), Err(Error::Denied(_))));
}

#[test]
fn stops_after_max_files() {
    let dir = TempDir::new().unwrap();
    for i in 0..=MAX_FILES {
        fs::write(dir.path().join(format!("{i:05}.dat")), "").unwrap();
    }
    let out = search(&[dir.path()], input("x")).unwrap();
    assert!(out.truncated);
    assert_eq!(out.searched_documents, 0);
}

#[test]
fn json_shapes_match_the_schemas() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "a.md", "# A\nneedle\n");
    let out = search(&[dir.path()], input("needle")).unwrap();
    let value = serde_json::to_value(&out).unwrap();
    assert_eq!(
        value,
        json!({
            "query": "needle",
            "results": [{
                "path": under(dir.path(), "a.md"),
                "title": "A",
                "score": out.results[0].score,
                "line": 2,
                "snippet": "needle",
            }],
            "searched_documents": 1,
            "skipped": 0,
            "truncated": false,
        })
    );

    let d =
        hane_guest::__private::describe(run, "documents.search", "0", "", hane_guest::Impact::Read);
    let input_schema: Value = serde_json::from_str(&d.input_schema).unwrap();
    assert_eq!(input_schema["required"], json!(["query"]));
    assert_eq!(input_schema["properties"]["limit"]["maximum"], 50);
    let output_schema: Value = serde_json::from_str(&d.output_schema).unwrap();
    assert_eq!(
        output_schema["required"],
        json!([
            "query",
            "results",
            "searched_documents",
            "skipped",
            "truncated"
        ])
    );

    let err = hane_guest::__private::run_json(r#"{"limit": 3}"#, run).unwrap_err();
    assert!(matches!(err, Error::InvalidInput(m) if m.contains("missing field `query`")));
}
