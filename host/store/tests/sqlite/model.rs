//! Any interleaving of appends, forks, redelivered inputs and reopenings
//! reads back exactly like a naive model: a vector of events per session,
//! where a fork is its parent's first `at` events and `forked`.

use hane_core::{InputId, SessionEvent, SessionId};
use hane_store::{ForkPoint, SessionStore, SqliteStore, StoreError};
use proptest::prelude::*;
use proptest::sample::Index;

use crate::{Scratch, accepted, forked};

#[derive(Debug, Clone)]
enum Action {
    Create,
    /// `count` new events, every third an input.
    Append {
        session: Index,
        count: usize,
    },
    Fork {
        session: Index,
        at: Index,
    },
    /// An input accepted somewhere before, delivered to a session again:
    /// refused if the session's history holds it.
    Redeliver {
        session: Index,
        input: Index,
    },
    Read {
        session: Index,
        from: Index,
        to: Index,
    },
    Reopen,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        1 => Just(Action::Create),
        6 => (any::<Index>(), 1..5usize)
            .prop_map(|(session, count)| Action::Append { session, count }),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(session, at)| Action::Fork { session, at }),
        2 => (any::<Index>(), any::<Index>())
            .prop_map(|(session, input)| Action::Redeliver { session, input }),
        2 => (any::<Index>(), any::<Index>(), any::<Index>())
            .prop_map(|(session, from, to)| Action::Read { session, from, to }),
        1 => Just(Action::Reopen),
    ]
}

/// What the store should hold.
#[derive(Default)]
struct Model {
    sessions: Vec<(SessionId, Vec<SessionEvent>, Option<ForkPoint>)>,
    inputs: Vec<InputId>,
    made: usize,
}

impl Model {
    fn fresh(&mut self) -> SessionEvent {
        self.made += 1;
        if self.made.is_multiple_of(3) {
            let id = format!("input-{}", self.made);
            self.inputs.push(id.parse().unwrap());
            accepted(&id)
        } else {
            SessionEvent::RunStateChanged {
                run: "run".into(),
                state: format!("state-{}", self.made),
            }
        }
    }

    fn holds(&self, session: usize, input: &InputId) -> bool {
        self.sessions[session]
            .1
            .iter()
            .any(|e| matches!(e, SessionEvent::InputAccepted { input: i } if i.id == *input))
    }
}

async fn check_all(store: &SqliteStore, model: &Model) {
    let listed = store.list_sessions().await.unwrap();
    assert_eq!(listed.len(), model.sessions.len());
    for (info, (id, events, parent)) in listed.iter().zip(&model.sessions) {
        assert_eq!(&info.id, id);
        assert_eq!(info.len, events.len() as u64, "{id}");
        assert_eq!(&info.parent, parent, "{id}");
        let read = store.read(id, 0..u64::MAX).await.unwrap();
        let seqs: Vec<u64> = read.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>(), "{id}");
        let read: Vec<_> = read.into_iter().map(|r| r.event).collect();
        assert_eq!(&read, events, "{id}");
    }
}

async fn play(scratch: &Scratch, actions: Vec<Action>) {
    let mut store = scratch.open();
    let mut model = Model::default();
    let first = store.create_session().await.unwrap();
    model.sessions.push((first.id, Vec::new(), None));

    for action in actions {
        match action {
            Action::Create => {
                let info = store.create_session().await.unwrap();
                assert_eq!(info.len, 0);
                model.sessions.push((info.id, Vec::new(), None));
            }
            Action::Append { session, count } => {
                let s = session.index(model.sessions.len());
                let batch: Vec<_> = (0..count).map(|_| model.fresh()).collect();
                let id = model.sessions[s].0.clone();
                let appended = store.append(&id, batch.clone()).await.unwrap();
                let events = &mut model.sessions[s].1;
                assert_eq!(appended.first_seq, events.len() as u64);
                events.extend(batch);
                assert_eq!(appended.len, events.len() as u64);
            }
            Action::Fork { session, at } => {
                let s = session.index(model.sessions.len());
                let (parent, events, _) = &model.sessions[s];
                let at = at.index(events.len() + 1);
                let info = store.fork(parent, at as u64).await.unwrap();
                let mut own = events[..at].to_vec();
                own.push(forked(parent, at as u64));
                assert_eq!(info.len, own.len() as u64);
                let point = ForkPoint {
                    session: parent.clone(),
                    at: at as u64,
                };
                assert_eq!(info.parent.as_ref(), Some(&point));
                model.sessions.push((info.id, own, Some(point)));
            }
            Action::Redeliver { session, input } => {
                if model.inputs.is_empty() {
                    continue;
                }
                let s = session.index(model.sessions.len());
                let input = model.inputs[input.index(model.inputs.len())].clone();
                let id = model.sessions[s].0.clone();
                let duplicate = model.holds(s, &input);
                assert_eq!(store.input_accepted(&id, &input).await.unwrap(), duplicate);
                let event = accepted(input.as_str());
                let result = store.append(&id, vec![event.clone()]).await;
                if duplicate {
                    assert!(
                        matches!(result, Err(StoreError::DuplicateInput { .. })),
                        "{result:?}"
                    );
                } else {
                    result.unwrap();
                    model.sessions[s].1.push(event);
                }
            }
            Action::Read { session, from, to } => {
                let s = session.index(model.sessions.len());
                let (id, events, _) = &model.sessions[s];
                // Up to one past the end, to see clamping.
                let from = from.index(events.len() + 2) as u64;
                let to = to.index(events.len() + 2) as u64;
                let read = store.read(id, from..to).await.unwrap();
                let expected: Vec<_> = (from..to.min(events.len() as u64))
                    .map(|seq| (seq, events[seq as usize].clone()))
                    .collect();
                let read: Vec<_> = read.into_iter().map(|r| (r.seq, r.event)).collect();
                assert_eq!(read, expected);
            }
            Action::Reopen => {
                drop(store);
                store = scratch.open();
            }
        }
    }
    check_all(&store, &model).await;
    drop(store);
    check_all(&scratch.open(), &model).await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_store_reads_back_like_a_model(actions in prop::collection::vec(action(), 1..40)) {
        let scratch = Scratch::fast();
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(play(&scratch, actions));
    }
}
