//! Ticks of schedules, in the registry: a tick is claimed once, even by
//! two handles on one store racing for it (as two `hane serve` processes
//! do); its outcome recorded; the last tick and the ticks listed newest
//! first.

use hane_core::schedule::TickOutcome;
use hane_store::{Registry, TickEnd, TickRow};

use crate::{Store, on_both};

async fn a_tick_is_claimed_once_and_its_outcome_recorded(place: Store) {
    let registry = place.open();
    assert!(registry.ticks().claim("nightly", 2_000, "a").await.unwrap());
    assert!(!registry.ticks().claim("nightly", 2_000, "b").await.unwrap());
    assert!(!registry.ticks().claim("nightly", 2_000, "a").await.unwrap());
    // Another schedule's tick at the same time is its own.
    assert!(registry.ticks().claim("hourly", 2_000, "b").await.unwrap());

    let claimed = &registry.ticks().list(Some("nightly"), 0).await.unwrap()[0];
    assert_eq!(
        (claimed.claimed_by.as_str(), claimed.outcome),
        ("a", TickOutcome::Claimed)
    );
    assert!(claimed.claimed_at_ms > 0);

    registry
        .ticks()
        .finish(
            "nightly",
            2_000,
            TickEnd {
                run: Some("run_1".to_owned()),
                ..TickEnd::new(TickOutcome::Started)
            },
        )
        .await
        .unwrap();
    registry
        .ticks()
        .finish(
            "hourly",
            2_000,
            TickEnd {
                error: Some("the day's budget is used up".to_owned()),
                ..TickEnd::new(TickOutcome::Refused)
            },
        )
        .await
        .unwrap();
    let nightly = &registry.ticks().list(Some("nightly"), 0).await.unwrap()[0];
    assert_eq!(
        nightly,
        &TickRow {
            schedule: "nightly".to_owned(),
            tick_ms: 2_000,
            claimed_at_ms: claimed.claimed_at_ms,
            claimed_by: "a".to_owned(),
            outcome: TickOutcome::Started,
            run: Some("run_1".to_owned()),
            workflow_case: None,
            error: None,
        }
    );
    let hourly = &registry.ticks().list(Some("hourly"), 0).await.unwrap()[0];
    assert_eq!(hourly.outcome, TickOutcome::Refused);
    assert_eq!(hourly.error.as_deref(), Some("the day's budget is used up"));

    // Only a claimed tick can be finished.
    let never = registry
        .ticks()
        .finish(
            "nightly",
            4_000,
            TickEnd {
                run: Some("run_2".to_owned()),
                ..TickEnd::new(TickOutcome::Started)
            },
        )
        .await
        .unwrap_err();
    assert!(
        never
            .to_string()
            .contains("tick 4000 of schedule `nightly` was never claimed"),
        "{never}"
    );
}

async fn the_last_tick_and_the_ticks_newest_first(place: Store) {
    let registry = place.open();
    assert_eq!(registry.ticks().last("nightly").await.unwrap(), None);
    for (schedule, tick) in [("nightly", 3_000), ("nightly", 1_000), ("hourly", 2_000)] {
        assert!(registry.ticks().claim(schedule, tick, "a").await.unwrap());
    }
    assert_eq!(registry.ticks().last("nightly").await.unwrap(), Some(3_000));
    assert_eq!(registry.ticks().last("hourly").await.unwrap(), Some(2_000));
    assert_eq!(registry.ticks().last("weekly").await.unwrap(), None);

    let listed = |rows: Vec<TickRow>| -> Vec<(String, u64)> {
        rows.into_iter().map(|r| (r.schedule, r.tick_ms)).collect()
    };
    assert_eq!(
        listed(registry.ticks().list(None, 0).await.unwrap()),
        [
            ("nightly".to_owned(), 3_000),
            ("hourly".to_owned(), 2_000),
            ("nightly".to_owned(), 1_000)
        ]
    );
    assert_eq!(
        listed(registry.ticks().list(Some("nightly"), 1).await.unwrap()),
        [("nightly".to_owned(), 3_000)]
    );
    assert!(
        registry
            .ticks()
            .list(Some("weekly"), 0)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn two_handles_on_one_store_racing_for_each_tick_claim_it_once(place: Store) {
    // Two handles, each with its own connection, as two processes have.
    let first = place.open();
    let second = place.open();
    const TICKS: u64 = 40;
    // Each handle claims every tick from its own thread and runtime, so
    // the two inserts of a tick race in the database, not in one
    // process's lock.
    let claim_all = |registry: Registry, who: &'static str| {
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut won = Vec::new();
                for tick in 0..TICKS {
                    if registry
                        .ticks()
                        .claim("race", tick * 1000, who)
                        .await
                        .unwrap()
                    {
                        won.push(tick * 1000);
                    }
                }
                won
            })
        })
    };
    let a = claim_all(first.clone(), "a");
    let b = claim_all(second, "b");
    let (a, b) = tokio::task::spawn_blocking(move || (a.join().unwrap(), b.join().unwrap()))
        .await
        .unwrap();
    assert_eq!(
        a.len() + b.len(),
        TICKS as usize,
        "a won {a:?}, b won {b:?}"
    );
    let mut all: Vec<u64> = a.iter().chain(&b).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), TICKS as usize, "a tick won twice: {a:?} {b:?}");

    // The store agrees on who won each one.
    let rows = first.ticks().list(Some("race"), 0).await.unwrap();
    assert_eq!(rows.len(), TICKS as usize);
    for row in rows {
        let winner = if a.contains(&row.tick_ms) { "a" } else { "b" };
        assert_eq!(row.claimed_by, winner, "{row:?}");
    }
}

on_both!(
    a_tick_is_claimed_once_and_its_outcome_recorded,
    the_last_tick_and_the_ticks_newest_first,
    two_handles_on_one_store_racing_for_each_tick_claim_it_once,
);
