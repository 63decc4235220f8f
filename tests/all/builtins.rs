//! The built-in operations, run through the sandbox as a host runs them.

use hane_core::{Limits, Policy};
use hane_sandbox::{CallError, GuestError};
use serde_json::{Value, json};

use crate::harness::{allow_loopback, builtin, examples, http_server};

fn documents() -> Policy {
    Policy {
        files: vec![
            format!("{}:/documents", examples().join("documents").display())
                .parse()
                .unwrap(),
        ],
        ..Policy::default()
    }
}

async fn run(op: &hane_sandbox::LoadedOperation, input: Value) -> Result<Value, CallError> {
    let call = op.call(&input.to_string(), &Limits::default()).await;
    call.result.map(|out| serde_json::from_str(&out).unwrap())
}

#[tokio::test]
async fn every_builtin_loads_and_describes_itself() {
    let names: Vec<_> = hane_builtins::names().collect();
    assert_eq!(
        names,
        [
            "data.find_record",
            "data.get_record",
            "documents.read_pages",
            "documents.read_summary",
            "documents.search",
            "http.get",
            "image.view",
            "ontology.knowledge",
            "ontology.query"
        ]
    );
    for name in names {
        let policy = Policy {
            http: vec!["https://example.com".parse().unwrap()],
            records: vec!["vehicles".into()],
            documents: vec!["leases".into()],
            ..Policy::default()
        };
        let op = builtin(name, &policy).await;
        assert_eq!(op.descriptor().name, name);
        assert_eq!(op.descriptor().impact, hane_core::Impact::Read);
        assert!(!op.descriptor().description.is_empty());
    }
}

#[tokio::test]
async fn documents_search_ranks_the_inspection_procedure_first_for_tread_depth() {
    let op = builtin("documents.search", &documents()).await;
    let out = run(&op, json!({"query": "tyre tread depth", "limit": 3}))
        .await
        .unwrap();
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["path"], "/documents/inspection-procedure.md");
    assert_eq!(results[0]["title"], "Vehicle Inspection Procedure");
    assert!(
        results[0]["snippet"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("tyre")
    );
    let scores: Vec<f64> = results
        .iter()
        .map(|r| r["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert_eq!(out["searched_documents"], 6);

    let none = run(&op, json!({"query": "zeppelin"})).await.unwrap();
    assert_eq!(none["results"], json!([]));

    let err = run(&op, json!({"query": ""})).await.unwrap_err();
    assert!(
        matches!(err, CallError::Operation(GuestError::InvalidInput(_))),
        "{err:?}"
    );
}

#[tokio::test]
async fn documents_read_pages_reads_form_feed_pages_and_line_ranges() {
    let op = builtin("documents.read_pages", &documents()).await;
    let page = run(
        &op,
        json!({"path": "/documents/leasing-terms.txt", "page": 2}),
    )
    .await
    .unwrap();
    assert_eq!(page["page"], 2);
    assert_eq!(page["total_pages"], 5);
    assert!(!page["text"].as_str().unwrap().contains('\u{c}'));

    let lines = run(&op, json!({"path": "/documents/faq.md", "lines": "1-3"}))
        .await
        .unwrap();
    assert_eq!(lines["start_line"], 1);
    assert_eq!(lines["end_line"], 3);
    assert_eq!(lines["text"].as_str().unwrap().lines().count(), 3);

    let err = run(
        &op,
        json!({"path": "/documents/leasing-terms.txt", "page": 99}),
    )
    .await
    .unwrap_err();
    match err {
        CallError::Operation(GuestError::InvalidInput(m)) => assert!(m.contains("99"), "{m}"),
        other => panic!("{other:?}"),
    }
    let err = run(&op, json!({"path": "/documents/missing.md"}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CallError::Operation(GuestError::NotFound(_))),
        "{err:?}"
    );
    let err = run(&op, json!({"path": "/etc/passwd"})).await.unwrap_err();
    assert!(
        matches!(err, CallError::Operation(GuestError::Denied(_))),
        "{err:?}"
    );
}

/// A FIFO in a granted folder would hold a thread of the blocking pool
/// for good (opening it waits for a writer), past the call's time limit:
/// it is refused as a denial, at once.
#[tokio::test]
async fn a_fifo_in_a_granted_folder_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(dir.path().join("notes.md"))
        .status()
        .unwrap();
    assert!(made.success());
    let policy = Policy {
        files: vec![
            format!("{}:/documents", dir.path().display())
                .parse()
                .unwrap(),
        ],
        ..Policy::default()
    };
    let op = builtin("documents.read_pages", &policy).await;
    let started = std::time::Instant::now();
    let call = op
        .call(
            &json!({"path": "/documents/notes.md"}).to_string(),
            &Limits::default(),
        )
        .await;
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    match call.result {
        Err(CallError::Denied { denial, .. }) => assert_eq!(
            denial,
            "filesystem: opening `notes.md` was refused: it is a FIFO or a socket, not a regular file or folder"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(call.receipt.outcome, hane_core::Outcome::Denied);
}

#[tokio::test]
async fn image_view_reports_dimensions_and_a_bounded_thumbnail() {
    let policy = Policy {
        files: vec![
            format!("{}:/images", examples().join("images").display())
                .parse()
                .unwrap(),
        ],
        ..Policy::default()
    };
    let op = builtin("image.view", &policy).await;
    let out = run(
        &op,
        json!({"path": "/images/gradient-640x400.png", "max_dimension": 128, "max_bytes": 32768}),
    )
    .await
    .unwrap();
    assert_eq!(out["media_type"], "image/png");
    assert_eq!(out["width"], 640);
    assert_eq!(out["height"], 400);
    let thumb = &out["thumbnail"];
    assert_eq!(thumb["width"], 128);
    assert_eq!(thumb["height"], 80);
    assert!(thumb["bytes"].as_u64().unwrap() <= 32768);
    assert!(
        thumb["data_base64"]
            .as_str()
            .unwrap()
            .starts_with("iVBORw0KGgo")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_get_fetches_an_allowed_url_and_nothing_else() {
    let addr = http_server("fleet status: all green").await;
    let policy = allow_loopback(addr);
    let op = builtin("http.get", &policy).await;
    let out = run(
        &op,
        json!({"url": format!("http://127.0.0.1:{}/status", addr.port())}),
    )
    .await
    .unwrap();
    assert_eq!(out["status"], 200);
    assert_eq!(out["body"], "fleet status: all green");
    assert_eq!(out["headers"]["x-hane-test"], "yes");
    assert_eq!(out["truncated"], false);

    let err = run(
        &op,
        json!({"url": "http://169.254.169.254/latest/meta-data"}),
    )
    .await
    .unwrap_err();
    match err {
        CallError::Denied { denial, .. } => assert_eq!(
            denial,
            "http request to http://169.254.169.254:80 is not on the allow-list"
        ),
        other => panic!("{other:?}"),
    }
}
