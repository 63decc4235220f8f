use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::*;

/// A ledger folder under the system's temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "hane-ledger-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, path: &str, text: impl AsRef<[u8]>) -> &Self {
        let path = self.0.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    fn load(&self) -> Result<Ledger, LedgerError> {
        Ledger::load_dir(&self.0)
    }

    /// The error of loading, as `FILE:LINE: problem` with FILE relative to
    /// the folder.
    fn error(&self) -> String {
        let err = self.load().unwrap_err();
        let text = err.to_string();
        text.strip_prefix(&format!("{}/", self.0.display()))
            .unwrap_or(&text)
            .to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn examples() -> Ledger {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ledger");
    Ledger::load_dir(&dir).unwrap()
}

fn fields(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn ids(found: &Found<'_>) -> Vec<String> {
    found.records.iter().map(|r| r.id.clone()).collect()
}

#[test]
fn the_example_ledger_loads() {
    let ledger = examples();
    assert_eq!(
        ledger.collections.keys().collect::<Vec<_>>(),
        ["drivers", "leases", "vehicles"]
    );
    assert_eq!(ledger.collections["drivers"].records.len(), 3);
    assert_eq!(ledger.collections["vehicles"].records.len(), 5);
    assert_eq!(ledger.collections["leases"].records.len(), 3);
    let set = &ledger.document_sets["leases"];
    assert_eq!(
        set.documents.keys().collect::<Vec<_>>(),
        ["c-1001.txt", "c-1002.txt", "c-1003.txt"]
    );
    let c1001 = &set.documents["c-1001.txt"];
    assert_eq!(c1001.pages.len(), 2);
    assert!(
        c1001.pages[1].starts_with("3. Mileage."),
        "{:?}",
        c1001.pages[1]
    );
    assert!(c1001.summary.starts_with("Lease contract C-1001 between"));
    assert!(
        c1001.summary.ends_with("by the lessor."),
        "{}",
        c1001.summary
    );
    // The first line is the paragraph; as a title it is cut.
    assert_eq!(c1001.title.chars().count(), MAX_TITLE_CHARS);
    assert!(c1001.title.starts_with("Lease contract C-1001") && c1001.title.ends_with('…'));
}

#[test]
fn csv_records_keep_the_header_order_and_are_strings() {
    let ledger = examples();
    let v1 = ledger.get("vehicles", "V-001").unwrap().unwrap();
    assert_eq!(
        v1.json.as_str(),
        r#"{"id":"V-001","registration":"架空 300 あ 10-02","model":"Toyota Hiace Van","inspection_expiry":"2027-03-31","mileage_km":"48210","depot":"Shinagawa"}"#
    );
    assert_eq!(ledger.get("vehicles", "V-999").unwrap(), None);
    assert_eq!(
        ledger.get("trucks", "V-001").unwrap_err(),
        QueryError::NoCollection("trucks".into())
    );
}

#[test]
fn find_matches_every_field_in_file_order() {
    let ledger = examples();
    let found = ledger
        .find(
            "vehicles",
            &fields(&[("registration", json!("架空 300 あ 10-02"))]),
            10,
        )
        .unwrap();
    assert_eq!(ids(&found), ["V-001"]);
    assert!(!found.truncated);

    let shinagawa = fields(&[("depot", json!("Shinagawa"))]);
    let found = ledger.find("vehicles", &shinagawa, 10).unwrap();
    assert_eq!(ids(&found), ["V-001", "V-002"]);
    let found = ledger.find("vehicles", &shinagawa, 1).unwrap();
    assert_eq!(ids(&found), ["V-001"]);
    assert!(found.truncated);

    let both = fields(&[
        ("depot", json!("Kawasaki")),
        ("model", json!("Honda N-VAN")),
    ]);
    assert_eq!(ids(&ledger.find("vehicles", &both, 10).unwrap()), ["V-003"]);

    let none = fields(&[("registration", json!("架空 999 ん 00-00"))]);
    let found = ledger.find("vehicles", &none, 10).unwrap();
    assert!(found.records.is_empty() && !found.truncated);
    let missing_field = fields(&[("colour", json!("red"))]);
    assert!(
        ledger
            .find("vehicles", &missing_field, 10)
            .unwrap()
            .records
            .is_empty()
    );
}

#[test]
fn find_compares_numbers_by_value_and_csv_strings_as_numbers() {
    let ledger = examples();
    // JSONL numbers.
    for months in [json!(36), json!(36.0)] {
        let found = ledger
            .find("leases", &fields(&[("months", months)]), 10)
            .unwrap();
        assert_eq!(ids(&found), ["L-01"]);
    }
    // Strings are not numbers' text unless they parse as one.
    let found = ledger
        .find("leases", &fields(&[("months", json!("36"))]), 10)
        .unwrap();
    assert_eq!(ids(&found), ["L-01"]);
    // CSV cells are strings; a number finds the cell with its text.
    let found = ledger
        .find("vehicles", &fields(&[("mileage_km", json!(48210))]), 10)
        .unwrap();
    assert_eq!(ids(&found), ["V-001"]);
    let found = ledger
        .find("vehicles", &fields(&[("mileage_km", json!("48210"))]), 10)
        .unwrap();
    assert_eq!(ids(&found), ["V-001"]);
    // Strings compare exactly.
    let found = ledger
        .find("vehicles", &fields(&[("depot", json!("shinagawa"))]), 10)
        .unwrap();
    assert!(found.records.is_empty());
    assert!(!json_equal(&json!(true), &json!("true")));
    assert!(json_equal(&json!([1, {"a": 2.0}]), &json!([1.0, {"a": 2}])));
}

#[test]
fn find_needs_a_field_and_a_collection() {
    let ledger = examples();
    assert!(matches!(
        ledger.find("vehicles", &[], 10),
        Err(QueryError::Invalid(_))
    ));
    let err = ledger
        .find("boats", &fields(&[("id", json!("B-1"))]), 10)
        .unwrap_err();
    assert!(err.is_not_found());
    assert_eq!(err.to_string(), "the ledger has no collection `boats`");
}

#[test]
fn search_ranks_by_matching_words_then_name() {
    let ledger = examples();
    let hits = ledger.search("leases", "refrigeration unit", 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].document, "c-1002.txt");
    assert_eq!(hits[0].matched_words, 2);
    assert!(hits[0].title.starts_with("Lease contract C-1002"));
    assert!(
        hits[0].snippet.to_lowercase().contains("refrigeration"),
        "{}",
        hits[0].snippet
    );

    // All three mention months; only C-1003 mentions early return.
    let hits = ledger.search("leases", "EARLY months", 10).unwrap();
    let order: Vec<_> = hits.iter().map(|h| h.document.as_str()).collect();
    assert_eq!(order, ["c-1003.txt", "c-1001.txt", "c-1002.txt"]);
    assert_eq!(hits[0].matched_words, 2);
    assert_eq!(hits[1].matched_words, 1);

    let hits = ledger.search("leases", "months", 2).unwrap();
    assert_eq!(hits.len(), 2);
    assert!(ledger.search("leases", "zeppelin", 10).unwrap().is_empty());
    assert!(matches!(
        ledger.search("leases", " ,.! ", 10),
        Err(QueryError::Invalid(_))
    ));
    assert!(
        ledger
            .search("manuals", "x", 10)
            .unwrap_err()
            .is_not_found()
    );
}

#[test]
fn search_reports_the_best_page_and_a_snippet_around_the_word() {
    let mut set = DocumentSet::default();
    let long = "filler ".repeat(100);
    set.documents.insert(
        "manual.txt".into(),
        Document::from_text(
            &format!("Manual\n\nabout tyres\x0c{long}tyre pressure and tread\x0cend"),
            false,
        ),
    );
    let ledger = Ledger {
        document_sets: [("docs".to_owned(), set)].into(),
        ..Ledger::default()
    };
    let hits = ledger.search("docs", "tread pressure", 5).unwrap();
    assert_eq!(hits[0].page, 2);
    assert!(hits[0].snippet.starts_with('…'), "{}", hits[0].snippet);
    assert!(hits[0].snippet.contains("filler tyre pressure and tread"));
    assert!(hits[0].snippet.chars().count() <= MAX_SNIPPET_CHARS);
    // A snippet from a long stretch of text is cut with `…`.
    let text = format!("{} needle {}", "a ".repeat(1000), "b ".repeat(1000));
    let doc = Document::from_text(&text, false);
    let ledger_long = Ledger {
        document_sets: [(
            "s".to_owned(),
            DocumentSet {
                documents: [("long.txt".to_owned(), doc)].into(),
            },
        )]
        .into(),
        ..Ledger::default()
    };
    let hit = &ledger_long.search("s", "needle", 1).unwrap()[0];
    assert!(
        hit.snippet.starts_with('…') && hit.snippet.ends_with('…'),
        "{}",
        hit.snippet
    );
    assert!(hit.snippet.contains("a a needle b b"), "{}", hit.snippet);
    assert_eq!(hit.snippet.chars().count(), MAX_SNIPPET_CHARS);
    // Whole words only: "tyres" is not "tyre".
    let hits = ledger.search("docs", "tyre", 5).unwrap();
    assert_eq!(hits[0].page, 2);
}

#[test]
fn pages_are_read_from_one_up_to_the_cap() {
    let ledger = examples();
    let pages = ledger.read_pages("leases", "c-1001.txt", 1, 5).unwrap();
    assert_eq!(
        (pages.first, pages.total_pages, pages.pages.len()),
        (1, 2, 2)
    );
    let pages = ledger.read_pages("leases", "c-1001", 2, 1).unwrap();
    assert_eq!(pages.document, "c-1001.txt");
    assert!(pages.pages[0].starts_with("3. Mileage"));
    let err = ledger.read_pages("leases", "c-1001.txt", 3, 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "page 3 is out of range: `c-1001.txt` has 2 pages"
    );
    assert!(matches!(
        ledger.read_pages("leases", "c-1001.txt", 0, 1),
        Err(QueryError::Invalid(_))
    ));
    assert!(matches!(
        ledger.read_pages("leases", "c-1001.txt", 1, 0),
        Err(QueryError::Invalid(_))
    ));
    let err = ledger.read_pages("leases", "c-9999.txt", 1, 1).unwrap_err();
    assert!(err.is_not_found());

    let many = "p\x0c".repeat(30);
    let mut set = DocumentSet::default();
    set.documents
        .insert("long.txt".into(), Document::from_text(&many, false));
    let ledger = Ledger {
        document_sets: [("docs".to_owned(), set)].into(),
        ..Ledger::default()
    };
    let pages = ledger.read_pages("docs", "long.txt", 25, 100).unwrap();
    assert_eq!((pages.total_pages, pages.pages.len()), (30, 6));
    let pages = ledger.read_pages("docs", "long.txt", 1, 100).unwrap();
    assert_eq!(pages.pages.len(), MAX_PAGES_PER_READ as usize);
}

#[test]
fn summaries_come_from_the_sidecar_or_the_first_paragraph() {
    let ledger = examples();
    let summary = ledger.summary("leases", "c-1001.txt").unwrap();
    assert_eq!(summary.pages, 2);
    assert!(summary.summary.contains("68,000 yen a month"));

    let scratch = Scratch::new();
    scratch
        .write(
            "documents/guides/a.md",
            "# Tyres\n\n## Intro\nFirst\nparagraph.\n\nSecond.",
        )
        .write(
            "documents/guides/b.txt",
            "Title line\nstill the first paragraph\n\nnext",
        )
        .write("documents/guides/b.summary.txt", "  A written\nsummary. \n")
        .write("documents/guides/empty.txt", "");
    let ledger = scratch.load().unwrap();
    let a = ledger.summary("guides", "a.md").unwrap();
    assert_eq!((a.title, a.summary), ("Tyres", "First paragraph."));
    let b = ledger.summary("guides", "b").unwrap();
    assert_eq!((b.title, b.summary), ("Title line", "A written summary."));
    let empty = ledger.summary("guides", "empty.txt").unwrap();
    assert_eq!((empty.title, empty.summary, empty.pages), ("", "", 1));
}

#[test]
fn long_summaries_and_titles_are_cut_at_a_character() {
    let text = format!("{}\n\nrest", "語".repeat(MAX_SUMMARY_CHARS + 10));
    let doc = Document::from_text(&text, false);
    assert_eq!(doc.summary.chars().count(), MAX_SUMMARY_CHARS);
    assert!(doc.summary.ends_with('…'));
    assert_eq!(doc.title.chars().count(), MAX_TITLE_CHARS);
    let doc = Document::from_text("one\x0ctwo\x0c\n", false);
    assert_eq!(doc.pages, ["one", "two"]);
}

#[test]
fn a_ledger_round_trips_through_postcard() {
    let ledger = examples();
    let bytes = postcard::to_allocvec(&ledger).unwrap();
    let back: Ledger = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(back, ledger);
}

#[test]
fn missing_folders_mean_nothing_and_a_missing_ledger_is_an_error() {
    let scratch = Scratch::new();
    assert_eq!(scratch.load().unwrap(), Ledger::default());
    let err = Ledger::load_dir(&scratch.0.join("nope")).unwrap_err();
    assert!(err.to_string().ends_with("nope: not a folder"), "{err}");
}

#[test]
fn jsonl_lines_are_objects_with_unique_string_ids() {
    let cases = [
        (
            "{\"id\":\"a\"}\n\n[1,2]\n",
            "records/c.jsonl:3: a record must be a JSON object",
        ),
        (
            "{\"id\":\"a\"}\n{\"name\":\"x\"}\n",
            "records/c.jsonl:2: the record has no `id`; every record needs a non-empty string `id`",
        ),
        (
            "{\"id\":7}\n",
            "records/c.jsonl:1: `id` must be a non-empty string",
        ),
        (
            "{\"id\":\"a\"}\n{\"id\":\"b\"}\n\n{\"id\":\"a\"}\n",
            "records/c.jsonl:4: duplicate id `a` (first at line 1)",
        ),
        (
            "{\"id\":\"a\",}\n",
            "records/c.jsonl:1: not JSON: trailing comma at column 11",
        ),
    ];
    for (text, expected) in cases {
        let scratch = Scratch::new();
        scratch.write("records/c.jsonl", text);
        assert_eq!(scratch.error(), expected, "{text:?}");
    }
}

#[test]
fn csv_follows_rfc_4180() {
    let scratch = Scratch::new();
    scratch.write(
        "records/notes.csv",
        "id,text,n\r\n\"N-1\",\"a, \"\"quoted\"\"\nline\",1\r\n\r\nN-2,,\"\"\nN-3,plain,3",
    );
    let ledger = scratch.load().unwrap();
    let records = &ledger.collections["notes"].records;
    let values: Vec<Value> = records.iter().map(|r| r.json.to_value().unwrap()).collect();
    assert_eq!(
        values,
        [
            json!({"id": "N-1", "text": "a, \"quoted\"\nline", "n": "1"}),
            json!({"id": "N-2", "text": "", "n": ""}),
            json!({"id": "N-3", "text": "plain", "n": "3"}),
        ]
    );
}

#[test]
fn csv_errors_name_the_line() {
    let cases = [
        (
            "id,a\nV-1,\"x\"y\n",
            "records/c.csv:2: bad CSV quoting: text after a closing quote; write a quote inside a quoted cell as `\"\"`",
        ),
        (
            "id,a\nV-1,x\"y\n",
            "records/c.csv:2: bad CSV quoting: a quote in an unquoted cell; quote the whole cell and write the quote as `\"\"`",
        ),
        (
            "id,a\nV-1,ok\nV-2,\"never\nclosed\n",
            "records/c.csv:3: bad CSV quoting: a quoted cell is not closed",
        ),
        (
            "id,a\nV-1,\"two\nlines\"\nV-2\n",
            "records/c.csv:4: 1 cell but the header has 2",
        ),
        (
            "id,a\nV-1,1,2\n",
            "records/c.csv:2: 3 cells but the header has 2",
        ),
        (
            "name,a\nV-1,1\n",
            "records/c.csv:1: the header has no `id` column",
        ),
        (
            "id,a,a\n",
            "records/c.csv:1: column 3 of the header is a second `a`",
        ),
        (
            "id,,a\n",
            "records/c.csv:1: column 2 of the header is empty",
        ),
        (
            "id,a\nV-1,1\n\nV-1,2\n",
            "records/c.csv:4: duplicate id `V-1` (first at line 2)",
        ),
        (
            "id,a\n,1\n",
            "records/c.csv:2: `id` must be a non-empty string",
        ),
    ];
    for (text, expected) in cases {
        let scratch = Scratch::new();
        scratch.write("records/c.csv", text);
        assert_eq!(scratch.error(), expected, "{text:?}");
    }
}

#[test]
fn names_and_stray_files_are_refused() {
    let cases = [
        (
            "records/Vehicles.csv",
            "id\n",
            "records/Vehicles.csv: invalid name `Vehicles`: names are 1 to 64 of a-z, 0-9, `_` and `-`",
        ),
        (
            "records/v.json",
            "{}",
            "records/v.json: unexpected file: records/ holds `<collection>.jsonl` and `<collection>.csv` files",
        ),
        (
            "documents/readme.txt",
            "x",
            "documents/readme.txt: unexpected file: documents/ holds one folder per document set",
        ),
        (
            "documents/My Set/a.txt",
            "x",
            "documents/My Set: invalid name `My Set`: names are 1 to 64 of a-z, 0-9, `_` and `-`",
        ),
        (
            "documents/set/a.pdf",
            "x",
            "documents/set/a.pdf: unexpected file: a document set holds `.txt` and `.md` documents and `<name>.summary.txt` summaries",
        ),
        (
            "documents/set/a.summary.txt",
            "x",
            "documents/set/a.summary.txt: a summary of no document: expected `a.txt` or `a.md` beside it",
        ),
    ];
    for (path, text, expected) in cases {
        let scratch = Scratch::new();
        scratch.write(path, text);
        assert_eq!(scratch.error(), expected, "{path}");
    }
    let scratch = Scratch::new();
    scratch.write("documents/set/bad.txt", [0xffu8, 0xfe]);
    assert_eq!(scratch.error(), "documents/set/bad.txt: not UTF-8 text");

    let scratch = Scratch::new();
    scratch
        .write("records/v.csv", "id\nV-1\n")
        .write("records/v.jsonl", "{\"id\":\"V-1\"}\n");
    assert_eq!(
        scratch.error(),
        "records/v.jsonl: collection `v` is also defined by `v.csv`"
    );
    // Dotfiles are left alone.
    let scratch = Scratch::new();
    scratch
        .write("records/.gitkeep", "")
        .write("documents/set/.DS_Store", [0u8]);
    assert!(scratch.load().is_ok());
}

#[test]
fn sizes_are_capped() {
    let scratch = Scratch::new();
    let big = format!(
        "{{\"id\":\"a\",\"x\":\"{}\"}}\n",
        "x".repeat(MAX_RECORD_BYTES)
    );
    scratch.write("records/c.jsonl", format!("{{\"id\":\"z\"}}\n{big}"));
    assert_eq!(
        scratch.error(),
        format!(
            "records/c.jsonl:2: the record is {} bytes; at most {MAX_RECORD_BYTES} are allowed",
            big.trim_end().len()
        )
    );

    let scratch = Scratch::new();
    let row = format!("a,{}\n", "x".repeat(MAX_RECORD_BYTES));
    scratch.write("records/c.csv", format!("id,x\n{row}"));
    assert!(
        scratch
            .error()
            .starts_with("records/c.csv:2: the record is ")
    );

    let scratch = Scratch::new();
    let mut rows = String::from("id\n");
    for i in 0..=MAX_RECORDS_PER_COLLECTION {
        rows.push_str(&format!("r{i}\n"));
    }
    scratch.write("records/c.csv", rows);
    assert_eq!(
        scratch.error(),
        format!(
            "records/c.csv:{}: more than {MAX_RECORDS_PER_COLLECTION} records in one collection",
            MAX_RECORDS_PER_COLLECTION + 2
        )
    );

    let scratch = Scratch::new();
    let size = MAX_DOCUMENT_BYTES + 1;
    scratch.write("documents/set/huge.txt", vec![b'a'; size as usize]);
    assert_eq!(
        scratch.error(),
        "documents/set/huge.txt: larger than the 8 MiB cap on documents"
    );

    // A collection that is not a regular file is refused before it is
    // read: a FIFO would wait for a writer.
    let scratch = Scratch::new();
    scratch.write("records/ok.jsonl", "");
    let fifo = scratch.0.join("records/v.jsonl");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(
        scratch.error(),
        "records/v.jsonl: a FIFO, not a regular file; ledger collections are read from regular files"
    );
}

#[test]
fn names_are_lowercase_letters_digits_dashes_and_underscores() {
    for good in ["vehicles", "a", "fleet_2024-q2", &"x".repeat(MAX_NAME_LEN)] {
        assert!(is_valid_name(good), "{good}");
    }
    for bad in [
        "",
        "Vehicles",
        "a b",
        "a.b",
        "../x",
        "é",
        &"x".repeat(MAX_NAME_LEN + 1),
    ] {
        assert!(!is_valid_name(bad), "{bad}");
    }
}
