//! What a run does, as it happens, for whoever follows it (a reply in a
//! conversation streamed to a client, `hane chat`): the model's text as it
//! streams, each tool call as it ends, an action waiting for a person, and
//! the end. Only runs started to be followed keep them
//! ([`super::RunContext::follow`]); a follower that comes late is given
//! what happened so far first.

use std::sync::Mutex;

use hane_core::{ActionId, AgentRun, run::ToolCallSummary};
use tokio::sync::mpsc;

use super::lock;

/// One thing a followed run did.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// More of the model's text, as it streamed.
    Text(String),
    /// A tool call ended.
    ToolCall(ToolCallSummary),
    /// An outbound action waits for a person's decision; the run waits
    /// with it.
    ActionPending {
        /// The action.
        action: ActionId,
        /// Its tool.
        tool: String,
        /// Its recipient.
        recipient: String,
        /// The digest of what it sends, which the decision binds.
        digest: String,
        /// The group whose people decide it.
        assignment: Option<String>,
    },
    /// The run ended; nothing follows.
    End(Box<AgentRun>),
}

/// A followed run's events so far and its followers.
#[derive(Debug, Default)]
pub(crate) struct Events {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    past: Vec<RunEvent>,
    followers: Vec<mpsc::UnboundedSender<RunEvent>>,
    ended: bool,
}

impl Events {
    /// Keeps `event` and gives it to every follower. After the end,
    /// nothing more is kept.
    pub(crate) fn send(&self, event: RunEvent) {
        let mut inner = lock(&self.inner);
        if inner.ended {
            return;
        }
        // Consecutive pieces of text are kept as one.
        match (inner.past.last_mut(), &event) {
            (Some(RunEvent::Text(kept)), RunEvent::Text(more)) => kept.push_str(more),
            _ => inner.past.push(event.clone()),
        }
        let end = matches!(event, RunEvent::End(_));
        inner.followers.retain(|f| f.send(event.clone()).is_ok());
        if end {
            inner.ended = true;
            inner.followers.clear();
        }
    }

    /// A new follower: what happened so far, then what happens, until the
    /// end.
    pub(crate) fn follow(&self) -> mpsc::UnboundedReceiver<RunEvent> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut inner = lock(&self.inner);
        for event in &inner.past {
            let _ = sender.send(event.clone());
        }
        if !inner.ended {
            inner.followers.push(sender);
        }
        receiver
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_follower_gets_the_past_and_the_end_closes_every_follower() {
        let events = Events::default();
        let early = events.follow();
        events.send(RunEvent::Text("Hel".to_owned()));
        events.send(RunEvent::Text("lo".to_owned()));
        let mut late = events.follow();
        assert_eq!(late.try_recv().unwrap(), RunEvent::Text("Hello".to_owned()));
        let run: AgentRun = serde_json::from_value(serde_json::json!({
            "id": hane_core::RunId::new(), "agent": "a", "release": 1, "status": "succeeded",
            "shadow": false, "input": {}, "result": null, "error": null, "toolCalls": [],
            "tokensUsed": 0, "tasks": [], "session": null, "createdAtMs": 0, "updatedAtMs": 0
        }))
        .unwrap();
        events.send(RunEvent::End(Box::new(run.clone())));
        events.send(RunEvent::Text("after the end".to_owned()));
        assert_eq!(
            late.try_recv().unwrap(),
            RunEvent::End(Box::new(run.clone()))
        );
        assert!(late.try_recv().is_err());
        let mut early = early;
        let got: Vec<_> = std::iter::from_fn(|| early.try_recv().ok()).collect();
        assert_eq!(got.len(), 3, "{got:?}");
        let mut after = events.follow();
        assert_eq!(
            after.try_recv().unwrap(),
            RunEvent::Text("Hello".to_owned())
        );
        assert_eq!(after.try_recv().unwrap(), RunEvent::End(Box::new(run)));
        assert!(matches!(
            after.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }
}
