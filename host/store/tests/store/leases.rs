//! Leases and the runs held under them: renewal, lapse, take-over by one
//! process of many, and the fence that keeps a lapsed holder from
//! writing a run it no longer holds.

use std::collections::HashSet;
use std::time::Duration;

use hane_core::{Lifecycle as _, RunStatus};
use hane_store::{Registry, RunRow, StoreError};

use crate::{Store, on_both};

const SHORT: Duration = Duration::from_millis(150);
const LONG: Duration = Duration::from_secs(60);

fn run(id: &str, status: RunStatus, holder: Option<&str>) -> RunRow {
    RunRow {
        id: id.to_owned(),
        agent: "agent".to_owned(),
        status,
        created_at_ms: 1,
        updated_at_ms: 1,
        body: id.as_bytes().to_vec(),
        holder: holder.map(str::to_owned),
    }
}

/// Stores `row` as the processes running it would have: new and
/// `queued`, then started, then ended, each move under `row.holder`.
async fn put(registry: &Registry, row: RunRow) {
    let queued = RunRow {
        status: RunStatus::Queued,
        ..row.clone()
    };
    registry.runs().insert(queued).await.unwrap();
    let mut from = RunStatus::Queued;
    if row.status == from {
        return;
    }
    if !from.can_become(row.status) {
        let running = RunRow {
            status: RunStatus::Running,
            ..row.clone()
        };
        registry.runs().update(from, running).await.unwrap();
        from = RunStatus::Running;
    }
    registry.runs().update(from, row).await.unwrap();
}

fn ids(runs: &[hane_store::TakenRun]) -> Vec<&str> {
    runs.iter().map(|t| t.run.id.as_str()).collect()
}

async fn a_live_lease_is_renewed_and_a_lapsed_one_never_again(store: Store) {
    let registry = store.open();
    let live = registry.leases().acquire("h/1/a", "h", 1, LONG).unwrap();
    assert!(registry.leases().is_live("h/1/a").await.unwrap());
    assert!(registry.leases().renew("h/1/a", LONG).await.unwrap());
    let renewed = registry.leases().get("h/1/a").await.unwrap().unwrap();
    assert!(renewed.expires_at_ms >= live.expires_at_ms);
    assert_eq!((renewed.host.as_str(), renewed.pid), ("h", 1));

    registry.leases().acquire("h/2/b", "h", 2, SHORT).unwrap();
    tokio::time::sleep(SHORT * 2).await;
    assert!(!registry.leases().is_live("h/2/b").await.unwrap());
    assert!(
        !registry.leases().renew("h/2/b", LONG).await.unwrap(),
        "a lapsed lease is not revived"
    );
    assert!(!registry.leases().is_live("h/2/b").await.unwrap());

    registry.leases().give_up("h/1/a").await.unwrap();
    assert!(registry.leases().get("h/1/a").await.unwrap().is_none());
    assert!(!registry.leases().renew("h/1/a", LONG).await.unwrap());
    assert!(!registry.leases().is_live("nobody").await.unwrap());

    let again = registry
        .leases()
        .acquire("h/2/b", "h", 2, LONG)
        .unwrap_err();
    assert!(matches!(again, StoreError::Database(_)), "{again:?}");
}

async fn only_the_live_runs_of_dead_holders_are_taken_over(store: Store) {
    let registry = store.open();
    registry.leases().acquire("alive", "h", 1, LONG).unwrap();
    registry.leases().acquire("lapsed", "h", 2, SHORT).unwrap();
    registry.leases().acquire("released", "h", 3, LONG).unwrap();
    registry.leases().acquire("me", "h", 4, LONG).unwrap();
    for row in [
        run("r-alive", RunStatus::Running, Some("alive")),
        run("r-lapsed", RunStatus::Running, Some("lapsed")),
        run("r-lapsed-queued", RunStatus::Queued, Some("lapsed")),
        run("r-lapsed-done", RunStatus::Succeeded, Some("lapsed")),
        run("r-released", RunStatus::Running, Some("released")),
        run("r-vanished", RunStatus::Running, Some("never-stored")),
        run("r-older", RunStatus::Running, None),
        run("r-mine", RunStatus::Running, Some("me")),
    ] {
        put(&registry, row).await;
    }
    registry.leases().give_up("released").await.unwrap();
    tokio::time::sleep(SHORT * 2).await;

    let taken = registry
        .leases()
        .take_over_runs("me", |_: &RunRow| true)
        .await
        .unwrap();
    let mut got = ids(&taken);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            "r-lapsed",
            "r-lapsed-queued",
            "r-older",
            "r-released",
            "r-vanished"
        ]
    );
    let lapsed = taken.iter().find(|t| t.run.id == "r-lapsed").unwrap();
    assert_eq!(lapsed.from.as_deref(), Some("lapsed"));
    assert_eq!(lapsed.lease.as_ref().unwrap().pid, 2);
    assert_eq!(lapsed.run.holder.as_deref(), Some("me"));
    let older = taken.iter().find(|t| t.run.id == "r-older").unwrap();
    assert_eq!((older.from.as_deref(), older.lease.as_ref()), (None, None));
    for t in &taken {
        let stored = registry.runs().get(&t.run.id).await.unwrap().unwrap();
        assert_eq!(stored.holder.as_deref(), Some("me"), "{}", t.run.id);
    }
    let done = registry.runs().get("r-lapsed-done").await.unwrap().unwrap();
    assert_eq!(done.holder.as_deref(), Some("lapsed"), "an ended run stays");

    // Nothing is left to take, and the lapsed lease, holding nothing
    // live any more, is gone.
    let again = registry
        .leases()
        .take_over_runs("me", |_: &RunRow| true)
        .await
        .unwrap();
    assert!(again.is_empty(), "{:?}", ids(&again));
    assert!(registry.leases().get("lapsed").await.unwrap().is_none());
    assert!(registry.leases().get("alive").await.unwrap().is_some());

    // Only the statuses asked for are taken.
    registry.leases().acquire("short", "h", 5, SHORT).unwrap();
    put(&registry, run("q", RunStatus::Queued, Some("short"))).await;
    tokio::time::sleep(SHORT * 2).await;
    let running_only = registry
        .leases()
        .take_over_runs("me", |run: &RunRow| run.status == RunStatus::Running)
        .await
        .unwrap();
    assert!(running_only.is_empty());
    assert!(
        registry.leases().get("short").await.unwrap().is_some(),
        "a lapsed lease still holding a live run is kept"
    );
}

async fn a_lapsed_holder_cannot_write_a_run_taken_from_it(store: Store) {
    let registry = store.open();
    registry.leases().acquire("old", "h", 1, SHORT).unwrap();
    registry.leases().acquire("new", "h", 2, LONG).unwrap();
    put(&registry, run("r", RunStatus::Running, Some("old"))).await;
    // While it holds the run, its holder writes it.
    registry
        .runs()
        .update(
            RunStatus::Running,
            run("r", RunStatus::Running, Some("old")),
        )
        .await
        .unwrap();
    tokio::time::sleep(SHORT * 2).await;
    let taken = registry
        .leases()
        .take_over_runs("new", |run: &RunRow| run.status == RunStatus::Running)
        .await
        .unwrap();
    assert_eq!(ids(&taken), ["r"]);

    let mut late = run("r", RunStatus::Succeeded, Some("old"));
    late.body = b"the old holder's end".to_vec();
    let err = registry
        .runs()
        .update(RunStatus::Running, late)
        .await
        .unwrap_err();
    let StoreError::NotHolder { run: id, holder } = &err else {
        panic!("expected NotHolder, got {err:?}");
    };
    assert_eq!((id.as_str(), holder.as_deref()), ("r", Some("new")));
    assert_eq!(
        err.to_string(),
        "run `r` is held by `new`; this process no longer holds it"
    );
    let stored = registry.runs().get("r").await.unwrap().unwrap();
    assert_eq!(
        stored.status,
        RunStatus::Running,
        "the late write changed nothing"
    );
    assert_eq!(stored.body, b"r");

    registry
        .runs()
        .update(RunStatus::Running, run("r", RunStatus::Failed, Some("new")))
        .await
        .unwrap();
    assert_eq!(
        registry.runs().get("r").await.unwrap().unwrap().status,
        RunStatus::Failed
    );
}

async fn each_dead_run_is_taken_by_one_of_many_processes(store: Store) {
    let setup = store.open();
    setup.leases().acquire("dead", "h", 1, SHORT).unwrap();
    for i in 0..200 {
        put(
            &setup,
            run(&format!("r{i:03}"), RunStatus::Running, Some("dead")),
        )
        .await;
    }
    tokio::time::sleep(SHORT * 2).await;
    // Eight processes' registries, each its own connection to the file.
    let mut takers = Vec::new();
    for p in 0..8 {
        let registry = store.open();
        let holder = format!("taker-{p}");
        registry
            .leases()
            .acquire(&holder, "h", 10 + p, LONG)
            .unwrap();
        takers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for _ in 0..5 {
                let taken = registry
                    .leases()
                    .take_over_runs(&holder, |run: &RunRow| run.status == RunStatus::Running)
                    .await
                    .unwrap();
                mine.extend(taken.into_iter().map(|t| (t.run.id, holder.clone())));
            }
            mine
        }));
    }
    let mut seen = HashSet::new();
    let mut total = 0;
    for taker in takers {
        for (id, holder) in taker.await.unwrap() {
            total += 1;
            assert!(seen.insert(id.clone()), "{id} taken twice");
            let stored = setup.runs().get(&id).await.unwrap().unwrap();
            assert_eq!(stored.holder.as_deref(), Some(holder.as_str()));
        }
    }
    assert_eq!(total, 200);
}

async fn runs_queued_for_any_process_are_claimed_each_by_one_and_never_taken_over(store: Store) {
    let setup = store.open();
    for i in 0..120 {
        let mut row = run(&format!("q{i:03}"), RunStatus::Queued, None);
        row.created_at_ms = i;
        put(&setup, row).await;
    }
    put(&setup, run("held", RunStatus::Queued, Some("someone"))).await;
    put(&setup, run("done", RunStatus::Succeeded, None)).await;
    // Waiting for room is not being left by a dead process.
    setup.leases().acquire("looker", "h", 1, LONG).unwrap();
    let taken = setup
        .leases()
        .take_over_runs("looker", |_: &RunRow| true)
        .await
        .unwrap();
    assert_eq!(ids(&taken), ["held"], "only the run a dead holder held");
    // Oldest first, at most as many as asked for.
    let first = setup.runs().claim_queued("looker", 3).await.unwrap();
    let first: Vec<&str> = first.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(first, ["q000", "q001", "q002"]);
    // Eight processes claiming at once, a few at a time: each run once.
    let mut claimers = Vec::new();
    for p in 0..8 {
        let registry = store.open();
        let holder = format!("claimer-{p}");
        claimers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let claimed = registry.runs().claim_queued(&holder, 4).await.unwrap();
                if claimed.is_empty() {
                    return mine;
                }
                mine.extend(claimed.into_iter().map(|r| (r.id, holder.clone())));
            }
        }));
    }
    let mut seen = HashSet::new();
    for claimer in claimers {
        for (id, holder) in claimer.await.unwrap() {
            assert!(seen.insert(id.clone()), "{id} claimed twice");
            let stored = setup.runs().get(&id).await.unwrap().unwrap();
            assert_eq!(stored.holder.as_deref(), Some(holder.as_str()));
        }
    }
    assert_eq!(seen.len(), 117);
    assert!(
        setup
            .runs()
            .claim_queued("looker", 10)
            .await
            .unwrap()
            .is_empty()
    );
}

on_both!(
    a_live_lease_is_renewed_and_a_lapsed_one_never_again,
    runs_queued_for_any_process_are_claimed_each_by_one_and_never_taken_over,
    only_the_live_runs_of_dead_holders_are_taken_over,
    a_lapsed_holder_cannot_write_a_run_taken_from_it,
    each_dead_run_is_taken_by_one_of_many_processes,
);
