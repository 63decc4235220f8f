//! Every lifecycle's table, enforced by the store: each pair the table
//! does not have is refused before anything is written, each pair it has
//! is applied only from its expected state, and an item is created only
//! in an initial state.

use std::collections::VecDeque;

use hane_core::{
    ActionState, IllegalTransition, Impact, Lifecycle, OperationState, RunStatus, TaskState,
    workflow::CaseStatus,
};
use hane_store::{ActionRow, CaseRow, Registry, RunRow, StoreError, TaskRow};

use crate::{Store, completed, failed, on_both, operation, started, tool_call, unknown};

/// What goes through a lifecycle in the registry, as the store's callers
/// create, move and read it.
trait Subject {
    type State: Lifecycle;

    /// Stores a new item `id` in `state`.
    async fn create(&self, id: &str, state: Self::State) -> Result<(), StoreError>;

    /// Moves item `id` from `from` to `to`.
    async fn change(&self, id: &str, from: Self::State, to: Self::State) -> Result<(), StoreError>;

    /// Where item `id` is, if it is stored.
    async fn state(&self, id: &str) -> Option<Self::State>;
}

/// The shortest way to `state` through the table, from an initial state:
/// the states in order, `state` last.
fn way_to<S: Lifecycle>(state: S) -> Vec<S> {
    let mut ways: VecDeque<Vec<S>> = S::INITIAL.iter().map(|s| vec![*s]).collect();
    while let Some(way) = ways.pop_front() {
        let last = *way.last().expect("a way has a state");
        if last == state {
            return way;
        }
        for (from, to) in S::TRANSITIONS {
            if *from == last && !way.contains(to) {
                ways.push_back([way.as_slice(), &[*to]].concat());
            }
        }
    }
    panic!("{} {state:?} is not reached", S::KIND)
}

/// A new item, brought to `state` the way its callers would.
async fn item_in<T: Subject>(subject: &T, id: &str, state: T::State) {
    let way = way_to(state);
    subject.create(id, way[0]).await.unwrap();
    for pair in way.windows(2) {
        subject.change(id, pair[0], pair[1]).await.unwrap();
    }
    assert_eq!(subject.state(id).await, Some(state));
}

fn is_refused<S: Lifecycle>(err: &StoreError, from: Option<S>, to: S) -> bool {
    let expected = IllegalTransition {
        kind: S::KIND,
        from: from.map(Lifecycle::name),
        to: to.name(),
    };
    matches!(err, StoreError::IllegalTransition(refused) if *refused == expected)
}

/// Tries every pair on a real store: the ones the table lacks are refused
/// and change nothing; each one it has is applied from its state and
/// refused as [`StoreError::StateChanged`] from any other.
async fn the_table_holds<T: Subject>(subject: &T) {
    let kind = T::State::KIND.replace(' ', "-");
    for &from in T::State::ALL {
        let id = format!("{kind}-in-{}", from.name());
        item_in(subject, &id, from).await;
        for &to in T::State::ALL {
            if from.can_become(to) {
                continue;
            }
            let err = subject.change(&id, from, to).await.unwrap_err();
            assert!(
                is_refused(&err, Some(from), to),
                "{from:?} -> {to:?}: {err:?}"
            );
            assert_eq!(subject.state(&id).await, Some(from), "{from:?} -> {to:?}");
        }
        if !from.is_initial() {
            let new = format!("{kind}-new-{}", from.name());
            let err = subject.create(&new, from).await.unwrap_err();
            assert!(is_refused(&err, None, from), "new {from:?}: {err:?}");
            assert_eq!(subject.state(&new).await, None);
        }
    }
    for (n, &(from, to)) in T::State::TRANSITIONS.iter().enumerate() {
        // Asked from a state it is not in: nothing changes.
        for &other in T::State::ALL.iter().filter(|s| **s != from) {
            let id = format!("{kind}-{n}-stale-{}", other.name());
            item_in(subject, &id, other).await;
            let err = subject.change(&id, from, to).await.unwrap_err();
            let StoreError::StateChanged {
                kind,
                id: named,
                expected,
                found,
            } = &err
            else {
                panic!("{from:?} -> {to:?} of one {other:?}: {err:?}");
            };
            assert_eq!(
                (*kind, named.as_str(), *expected, found.as_deref()),
                (T::State::KIND, id.as_str(), from.name(), Some(other.name()))
            );
            assert_eq!(subject.state(&id).await, Some(other));
        }
        // From the state it is in, it applies.
        let id = format!("{kind}-{n}");
        item_in(subject, &id, from).await;
        subject.change(&id, from, to).await.unwrap();
        assert_eq!(subject.state(&id).await, Some(to));
    }
    // An item that is not stored is not changed, nor created by a change.
    let (from, to) = T::State::TRANSITIONS[0];
    let err = subject.change("nothing", from, to).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::StateChanged { found: None, .. }),
        "{err:?}"
    );
    assert_eq!(subject.state("nothing").await, None);
    // Nor is one created twice.
    let initial = T::State::INITIAL[0];
    let id = format!("{kind}-twice");
    subject.create(&id, initial).await.unwrap();
    let err = subject.create(&id, initial).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::AlreadyExists { kind, id: named } if *kind == T::State::KIND && *named == id),
        "{err:?}"
    );
}

struct Runs(Registry);

fn run_row(id: &str, status: RunStatus) -> RunRow {
    RunRow {
        id: id.to_owned(),
        agent: "agent".to_owned(),
        status,
        created_at_ms: 1,
        updated_at_ms: 1,
        body: status.as_str().as_bytes().to_vec(),
        holder: Some("me".to_owned()),
    }
}

impl Subject for Runs {
    type State = RunStatus;

    async fn create(&self, id: &str, state: RunStatus) -> Result<(), StoreError> {
        self.0.runs().insert(run_row(id, state)).await
    }

    async fn change(&self, id: &str, from: RunStatus, to: RunStatus) -> Result<(), StoreError> {
        self.0.runs().update(from, run_row(id, to)).await
    }

    async fn state(&self, id: &str) -> Option<RunStatus> {
        let row = self.0.runs().get(id).await.unwrap()?;
        assert_eq!(row.body, row.status.as_str().as_bytes(), "written whole");
        Some(row.status)
    }
}

struct Actions(Registry);

fn action_row(id: &str, state: ActionState) -> ActionRow {
    ActionRow {
        id: id.to_owned(),
        run: "run".to_owned(),
        tool: "communication.send_sms".to_owned(),
        state,
        owner: (state == ActionState::Executing).then(|| "me".to_owned()),
        created_at_ms: 1,
        updated_at_ms: 1,
        body: state.as_str().as_bytes().to_vec(),
    }
}

impl Subject for Actions {
    type State = ActionState;

    async fn create(&self, id: &str, state: ActionState) -> Result<(), StoreError> {
        let row = action_row(id, state);
        self.0.transact(move |tx| tx.insert_action(&row)).await
    }

    async fn change(&self, id: &str, from: ActionState, to: ActionState) -> Result<(), StoreError> {
        let row = action_row(id, to);
        self.0
            .transact(move |tx| tx.update_action(from, &row))
            .await
    }

    async fn state(&self, id: &str) -> Option<ActionState> {
        let row = self.0.actions().get(id).await.unwrap()?;
        assert_eq!(row.body, row.state.as_str().as_bytes(), "written whole");
        assert_eq!(row.owner.is_some(), row.state == ActionState::Executing);
        Some(row.state)
    }
}

struct Tasks(Registry);

impl Subject for Tasks {
    type State = TaskState;

    async fn create(&self, id: &str, state: TaskState) -> Result<(), StoreError> {
        self.0
            .tasks()
            .create(TaskRow {
                id: id.to_owned(),
                run: "run".to_owned(),
                kind: "approval".to_owned(),
                assignment: "desk".to_owned(),
                state,
                created_at_ms: 1,
                body: Vec::new(),
            })
            .await
    }

    async fn change(&self, id: &str, from: TaskState, to: TaskState) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.0
            .transact(move |tx| tx.set_task_state(&id, from, to))
            .await
    }

    async fn state(&self, id: &str) -> Option<TaskState> {
        let tasks = self.0.tasks().of_run("run").await.unwrap();
        tasks.into_iter().find(|t| t.id == id).map(|t| t.state)
    }
}

struct Cases(Registry);

fn case_row(id: &str, status: CaseStatus) -> CaseRow {
    CaseRow {
        id: id.to_owned(),
        workflow: "lease-inquiry".to_owned(),
        status,
        created_at_ms: 1,
        updated_at_ms: 1,
        body: status.as_str().as_bytes().to_vec(),
    }
}

impl Subject for Cases {
    type State = CaseStatus;

    async fn create(&self, id: &str, state: CaseStatus) -> Result<(), StoreError> {
        self.0.cases().insert(case_row(id, state)).await
    }

    async fn change(&self, id: &str, from: CaseStatus, to: CaseStatus) -> Result<(), StoreError> {
        self.0.cases().update(from, case_row(id, to)).await
    }

    async fn state(&self, id: &str) -> Option<CaseStatus> {
        let row = self.0.cases().get(id).await.unwrap()?;
        assert_eq!(row.body, row.status.as_str().as_bytes(), "written whole");
        Some(row.status)
    }
}

async fn runs_move_only_as_their_table_says(store: Store) {
    the_table_holds(&Runs(store.open())).await;
}

async fn actions_move_only_as_their_table_says(store: Store) {
    the_table_holds(&Actions(store.open())).await;
}

async fn tasks_move_only_as_their_table_says(store: Store) {
    the_table_holds(&Tasks(store.open())).await;
}

async fn workflow_cases_move_only_as_their_table_says(store: Store) {
    the_table_holds(&Cases(store.open())).await;
}

/// Operations move by the events appended about them, so the store reads
/// the state they are in: an event whose move the table lacks is refused
/// as [`StoreError::InvalidTransition`], naming that state, and the batch
/// is not appended. No event moves one back to `pending`.
async fn operations_move_only_as_their_table_says(place: Store) {
    use OperationState::{Failed, Pending, Running, Succeeded, Unknown};
    let store = place.sessions();
    let session = store.create_session().await.unwrap().id;
    let event = |op: &hane_core::Operation, to: OperationState| match to {
        Running => Some(started(op, 1)),
        Succeeded => Some(completed(op)),
        Failed => Some(failed(op)),
        Unknown => Some(unknown(op)),
        Pending => None,
    };
    let mut refused = 0;
    for impact in [Impact::Read, Impact::Write] {
        for from in OperationState::ALL {
            let op = operation(&session, impact);
            let way = way_to(from);
            assert_eq!(way[0], Pending);
            store
                .append(&session, vec![tool_call([&op])])
                .await
                .unwrap();
            for &to in &way[1..] {
                let moved = event(&op, to).expect("an event moves it there");
                store.append(&session, vec![moved]).await.unwrap();
            }
            assert_eq!(store.operation(&op.id).await.unwrap().state, from);
            for to in OperationState::ALL {
                // A `read` operation runs again; others may have done
                // what they do.
                let again = (from, to) == (Running, Running) && impact != Impact::Read;
                if from.can_become(to) && !again {
                    continue;
                }
                let Some(moved) = event(&op, to) else {
                    continue;
                };
                let name = moved.name();
                let len = store.session(&session).await.unwrap().len;
                let err = store.append(&session, vec![moved]).await.unwrap_err();
                assert!(
                    matches!(&err, StoreError::InvalidTransition { operation, state, event }
                        if *operation == op.id && *state == from && *event == name),
                    "{impact:?} {from:?} -> {to:?}: {err:?}"
                );
                let record = store.operation(&op.id).await.unwrap();
                assert_eq!(record.state, from, "{impact:?} {from:?} -> {to:?}");
                assert_eq!(store.session(&session).await.unwrap().len, len);
                refused += 1;
            }
        }
    }
    // Of 5 × 4 pairs an event can ask for, 6 are legal (5 of them for a
    // `write` operation); the rest are refused for each impact.
    assert_eq!(refused, (20 - 6) + (20 - 5));
    // Each legal one applies.
    for &(from, to) in OperationState::TRANSITIONS {
        let op = operation(&session, Impact::Read);
        store
            .append(&session, vec![tool_call([&op])])
            .await
            .unwrap();
        for &step in &way_to(from)[1..] {
            let moved = event(&op, step).unwrap();
            store.append(&session, vec![moved]).await.unwrap();
        }
        let moved = event(&op, to).unwrap();
        store.append(&session, vec![moved]).await.unwrap();
        assert_eq!(store.operation(&op.id).await.unwrap().state, to);
    }
}

on_both!(
    runs_move_only_as_their_table_says,
    actions_move_only_as_their_table_says,
    tasks_move_only_as_their_table_says,
    workflow_cases_move_only_as_their_table_says,
    operations_move_only_as_their_table_says,
);
