//! One tool call of a run: admitted by the Tool Gateway, translated,
//! committed with its operations, run, and summarized on the run.

use super::*;

/// A call the gateway admitted, translated and not yet run.
pub(super) struct PlannedCall {
    live: Arc<LiveRun>,
    session: SessionId,
    journal: Arc<Journal>,
    call: ToolCall,
    status: ToolCallStatus,
    operations: Vec<Operation>,
}

/// A run's door to its tools: every call goes through
/// [`AgentRuntime::call_tool`] with the run's token.
pub(super) struct RunTools<'a> {
    pub(super) runtime: &'a AgentRuntime,
    pub(super) token: &'a RunToken,
}

impl ToolCaller for RunTools<'_> {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        input: Value,
    ) -> BoxFuture<'a, Result<ToolResult, GatewayError>> {
        Box::pin(self.runtime.call_tool(self.token, tool, input))
    }
}

impl AgentRuntime {
    /// Calls `tool` with `input` for the run `token` names. This is the
    /// one way any driver reaches a tool: the gateway checks the token,
    /// the tool and the limits; the translator validates the input; the
    /// call and its operations are committed to the run's session before
    /// anything runs.
    ///
    /// # Errors
    ///
    /// The gateway refused the call. A call that was let through and
    /// failed is an `Ok` [`ToolResult::Error`], which the driver can act
    /// on.
    #[tracing::instrument(name = "tool_call", skip_all, fields(tool = tool, run, call))]
    pub async fn call_tool(
        &self,
        token: &RunToken,
        tool: &str,
        input: Value,
    ) -> Result<ToolResult, GatewayError> {
        let started = Instant::now();
        let admitted = match self.inner.gateway.admit(token, tool) {
            Ok(admitted) => admitted,
            Err(e) => {
                tracing::warn!(tool, "tool call refused: {e}");
                if let Ok(run) = self.inner.gateway.key().verify(token) {
                    ToolCalls::of(self).summarize(
                        &run,
                        tool,
                        ToolCallEnd::Rejected,
                        e.to_string(),
                        None,
                        started,
                    );
                }
                return Err(e);
            }
        };
        // A resumed run's call it had made is answered, not made again.
        if let Some(result) = Replaying::of(self)
            .replay_call(&admitted, tool, &input)
            .await?
        {
            ToolCalls::of(self).summarize_result(&admitted.run, tool, &result, None, started);
            return Ok(result);
        }
        let planned = ToolCalls::of(self).plan_call(&admitted, tool, &input)?;
        let span = tracing::Span::current();
        span.record("run", tracing::field::display(&admitted.run));
        span.record("call", tracing::field::display(&planned.call.id));
        let operation = planned.operations.first().map(|op| op.id.to_string());
        let result = if planned
            .operations
            .iter()
            .all(|op| op.impact == Impact::Read)
        {
            ToolCalls::of(self)
                .run_reads(&admitted, &input, planned)
                .await
        } else {
            ToolCalls::of(self).run_effects(&admitted, planned).await
        };
        match &result {
            ToolResult::Output(_) => tracing::info!("tool call succeeded"),
            ToolResult::Error { kind, message } => {
                tracing::info!(error = kind.as_str(), "tool call failed: {message}");
            }
        }
        ToolCalls::of(self).summarize_result(&admitted.run, tool, &result, operation, started);
        Ok(result)
    }
}

/// The path of one tool call after the gateway admitted it: translated,
/// committed with its operations, run, and summarized on the run.
pub(crate) struct ToolCalls<'a> {
    pub(crate) kernel: &'a AgentRuntime,
}

impl<'a> ToolCalls<'a> {
    pub(crate) fn of(kernel: &'a AgentRuntime) -> Self {
        Self { kernel }
    }

    /// Finds the run of an admitted call and translates the call into its
    /// status and operations; nothing runs yet.
    pub(super) fn plan_call(
        &self,
        admitted: &Admitted,
        tool: &str,
        input: &Value,
    ) -> Result<PlannedCall, GatewayError> {
        let not_running = || GatewayError::NotRunning(admitted.run.clone());
        let live = lock(&self.kernel.inner.live)
            .get(&admitted.run)
            .cloned()
            .ok_or_else(not_running)?;
        let session = lock(&live.session).clone().ok_or_else(not_running)?;
        let call = ToolCall {
            id: ToolCallId::new(),
            tool: tool.to_owned(),
            input: translate::input_text(input),
        };
        let (status, operations) = translate::translate(&admitted.tool, &session, &call, input);
        let journal = live.journal.get().cloned().ok_or_else(not_running)?;
        Ok(PlannedCall {
            live,
            session,
            journal,
            call,
            status,
            operations,
        })
    }

    /// Reads and control tools: recorded behind the call (see `Journal`),
    /// so the call waits on the operation, not the disk; both are safe to
    /// run again after a crash.
    pub(super) async fn run_reads(
        &self,
        admitted: &Admitted,
        input: &Value,
        planned: PlannedCall,
    ) -> ToolResult {
        let PlannedCall {
            live,
            journal,
            call,
            status,
            operations,
            ..
        } = planned;
        let mut events = vec![SessionEvent::ToolCallRecorded {
            call,
            status: status.clone(),
            operations: operations.clone(),
        }];
        events.extend(operations.iter().map(|op| SessionEvent::OperationStarted {
            operation: op.id.clone(),
            attempt: 1,
        }));
        journal.record(events);
        match (&status, &admitted.tool.kind) {
            (ToolCallStatus::Rejected { .. }, _) => translate::format(&status, None),
            (_, ToolKind::Control(control)) => {
                Controls::of(self.kernel)
                    .control(&live, *control, input)
                    .await
            }
            (_, ToolKind::Api(api)) => Controls::of(self.kernel).api(&live, api, input).await,
            (_, ToolKind::Operation(_)) => {
                let mut ending = None;
                for op in &operations {
                    ending = Some(self.execute_read(&journal, op).await);
                }
                translate::format(&status, ending.as_ref())
            }
        }
    }

    /// Runs read operation `op`, again where that may help, and journals
    /// its further attempts and its ending.
    pub(super) async fn execute_read(&self, journal: &Journal, op: &Operation) -> Ending {
        match self.kernel.inner.coordinator.execute_read(op).await {
            Ok((done, attempts)) => {
                let mut events: Vec<SessionEvent> = (2..=attempts)
                    .map(|attempt| SessionEvent::OperationStarted {
                        operation: op.id.clone(),
                        attempt,
                    })
                    .collect();
                events.push(ending_event(&op.id, &done).1);
                journal.record(events);
                done
            }
            Err(e) => Ending::failed(Outcome::HostError, e.to_string()),
        }
    }

    /// A call whose operation may change something: it is on disk as
    /// `running` before it starts, everything journaled before it first;
    /// an outbound operation's proposals then become actions of the run.
    pub(super) async fn run_effects(
        &self,
        admitted: &Admitted,
        planned: PlannedCall,
    ) -> ToolResult {
        let PlannedCall {
            live,
            session,
            journal,
            call,
            status,
            operations,
        } = planned;
        if let Err(e) = journal.flush().await {
            return ToolResult::error("failed", e.to_string());
        }
        let recorded = vec![SessionEvent::ToolCallRecorded {
            call,
            status: status.clone(),
            operations,
        }];
        let dispatched = match self
            .kernel
            .inner
            .coordinator
            .commit(&session, recorded)
            .await
        {
            Ok(dispatched) => dispatched,
            Err(e) => {
                return ToolResult::error("failed", format!("the call could not be recorded: {e}"));
            }
        };
        let mut ending = None;
        for d in dispatched {
            ending = Some(match d.settled().await {
                Ok(settled) => settled.ending,
                Err(e) => Ending::failed(Outcome::HostError, e.to_string()),
            });
        }
        let result = translate::format(&status, ending.as_ref());
        match (&admitted.tool.kind, ending) {
            (ToolKind::Operation(op), Some(Ending::Succeeded(output)))
                if op.operation.impact == Impact::Outbound =>
            {
                Proposals::of(self.kernel)
                    .operation_actions(&live, result, &output.proposals)
                    .await
            }
            _ => result,
        }
    }

    pub(super) fn summarize_result(
        &self,
        run: &RunId,
        tool: &str,
        result: &ToolResult,
        operation: Option<String>,
        started: Instant,
    ) {
        let (status, detail) = match result {
            ToolResult::Output(value) => (
                ToolCallEnd::Succeeded,
                value
                    .get("summary")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_default(),
            ),
            ToolResult::Error { kind, message } => {
                (ToolCallEnd::Failed, format!("{kind}: {message}"))
            }
        };
        self.summarize(run, tool, status, detail, operation, started);
    }

    pub(super) fn summarize(
        &self,
        run: &RunId,
        tool: &str,
        status: ToolCallEnd,
        detail: String,
        operation: Option<String>,
        started: Instant,
    ) {
        let Some(live) = lock(&self.kernel.inner.live).get(run).cloned() else {
            return;
        };
        let summary = ToolCallSummary {
            tool: tool.to_owned(),
            status,
            detail,
            operation,
            duration_us: started.elapsed().as_micros() as u64,
        };
        if live.events.is_some() {
            live.tell(|| RunEvent::ToolCall(summary.clone()));
        }
        live.amend(|run| run.tool_calls.push(summary));
    }
}
