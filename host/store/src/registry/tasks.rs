//! Tasks for people, such as a run's handover, in the states
//! [`TaskState`]'s table allows.

use hane_core::{Lifecycle, TaskState};

use super::{TaskTable, state};
use crate::StoreError;
use crate::sql::{Query, Sql, args, failed};

/// A task for people, such as a handover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    /// The task's id.
    pub id: String,
    /// The run that created it.
    pub run: String,
    /// What kind of task, such as `handover`.
    pub kind: String,
    /// The group it is assigned to.
    pub assignment: String,
    /// Its state, stored as its name (`open`).
    pub state: TaskState,
    /// When it was created.
    pub created_at_ms: u64,
    /// The whole task, sealed by the caller.
    pub body: Vec<u8>,
}

impl TaskTable<'_> {
    /// Stores a new task, in an initial state (`open`).
    ///
    /// # Errors
    ///
    /// [`StoreError::IllegalTransition`] for a state a task does not
    /// start in, [`StoreError::AlreadyExists`] when a task has this id, or
    /// the database failed.
    pub async fn create(&self, task: TaskRow) -> Result<(), StoreError> {
        task.state.check_initial()?;
        self.registry
            .on("creating a task", move |db| insert_task(db, &task))
            .await
    }

    /// The tasks a run created, oldest first.
    ///
    /// # Errors
    ///
    /// The database failed.
    pub async fn of_run(&self, run: &str) -> Result<Vec<TaskRow>, StoreError> {
        let run = run.to_owned();
        self.registry
            .on("listing tasks", move |db| {
                db.rows(
                    "SELECT id, run, kind, assignment, state, created_at, body FROM tasks
                 WHERE run = ?1 ORDER BY created_at, id",
                    args![&run],
                    |row| {
                        Ok(TaskRow {
                            id: row.text(0)?,
                            run: row.text(1)?,
                            kind: row.text(2)?,
                            assignment: row.text(3)?,
                            state: state(row, 4)?,
                            created_at_ms: row.int(5)? as u64,
                            body: row.blob(6)?,
                        })
                    },
                )
                .map_err(failed("listing tasks"))
            })
            .await
    }
}

pub(crate) fn insert_task(db: &mut dyn Sql, task: &TaskRow) -> Result<(), StoreError> {
    task.state.check_initial()?;
    let inserted = db
        .execute(
            "INSERT INTO tasks (id, run, kind, assignment, state, created_at, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (id) DO NOTHING",
            args![
                &task.id,
                &task.run,
                &task.kind,
                &task.assignment,
                task.state.as_str(),
                task.created_at_ms as i64,
                &task.body
            ],
        )
        .map_err(failed("creating a task"))?;
    if inserted == 0 {
        return Err(StoreError::AlreadyExists {
            kind: TaskState::KIND,
            id: task.id.clone(),
        });
    }
    Ok(())
}
