//! Evaluations in the registry: read back, listed newest first and by
//! suite; and a candidate release stored without becoming active until
//! it is made so.

use hane_store::{EvaluationRow, NewRelease, StoreError};

use crate::{Store, on_both};

fn evaluation(id: &str, suite: &str, release: u64, at: u64) -> EvaluationRow {
    EvaluationRow {
        id: id.to_owned(),
        suite: suite.to_owned(),
        release,
        created_at_ms: at,
        body: format!("body of {id}").into_bytes(),
    }
}

async fn evaluations_are_read_back_and_listed_newest_first_by_suite(place: Store) {
    let registry = place.open();
    for row in [
        evaluation("eval_a", "s", 1, 10),
        evaluation("eval_b", "t", 1, 30),
        evaluation("eval_c", "s", 2, 20),
    ] {
        registry.evaluations().add(row).await.unwrap();
    }
    assert_eq!(
        registry.evaluations().get("eval_c").await.unwrap(),
        Some(evaluation("eval_c", "s", 2, 20))
    );
    assert_eq!(registry.evaluations().get("eval_x").await.unwrap(), None);
    let ids = |rows: Vec<EvaluationRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        ids(registry.evaluations().list(None, 0).await.unwrap()),
        ["eval_b", "eval_c", "eval_a"]
    );
    assert_eq!(
        ids(registry
            .evaluations()
            .list(Some("s".to_owned()), 0)
            .await
            .unwrap()),
        ["eval_c", "eval_a"]
    );
    assert_eq!(
        ids(registry
            .evaluations()
            .list(Some("s".to_owned()), 1)
            .await
            .unwrap()),
        ["eval_c"]
    );
    // An id is stored once.
    assert!(
        registry
            .evaluations()
            .add(evaluation("eval_a", "s", 3, 40))
            .await
            .is_err()
    );
}

fn release(source: &str) -> NewRelease {
    NewRelease {
        source: source.to_owned(),
        summary: format!("summary of {source}"),
        body: source.as_bytes().to_vec(),
        components: vec![("sha256:c".to_owned(), b"component".to_vec())],
    }
}

async fn a_candidate_release_is_stored_inactive_until_made_active(place: Store) {
    let registry = place.open();
    let first = registry.releases().activate(release("one")).await.unwrap();
    let candidate = registry.releases().store(release("two")).await.unwrap();
    assert!(!candidate.active);
    assert_eq!(candidate.number, first.number + 1);
    // The active release is still the first; the candidate is listed.
    assert_eq!(
        registry.releases().active_number().await.unwrap(),
        Some(first.number)
    );
    let listed = registry.releases().list().await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|r| (r.number, r.active))
            .collect::<Vec<_>>(),
        [(first.number, true), (candidate.number, false)]
    );
    assert_eq!(
        registry
            .releases()
            .component("sha256:c")
            .await
            .unwrap()
            .as_deref(),
        Some(&b"component"[..])
    );
    let active = registry
        .releases()
        .activate_stored(candidate.number)
        .await
        .unwrap();
    assert!(active.active);
    assert_eq!(active.source, "two");
    let (info, body) = registry.releases().active().await.unwrap().unwrap();
    assert_eq!((info.number, body), (candidate.number, b"two".to_vec()));
    assert!(matches!(
        registry.releases().activate_stored(99).await,
        Err(StoreError::ReleaseNotFound(m)) if m.contains("release 99")
    ));
}

on_both!(
    evaluations_are_read_back_and_listed_newest_first_by_suite,
    a_candidate_release_is_stored_inactive_until_made_active,
);
