//! Driving a run: its session opened, its driver run within the agent's
//! limits, and its end recorded once, however it ends.

use super::*;

impl AgentRuntime {
    /// Drives `live` in a task of its own, from now on a run of this
    /// process.
    pub(crate) fn spawn_drive(&self, live: Arc<LiveRun>) {
        let run = live.snapshot();
        lock(&self.inner.live).insert(run.id.clone(), live.clone());
        let runtime = self.clone();
        let span = tracing::info_span!("run", run = %run.id, agent = %run.agent);
        let driving = {
            let live = live.clone();
            tokio::spawn(async move { Drive::of(&runtime).drive(live).await }.instrument(span))
        };
        // A driver that panics (a bug, or a model's answer no code
        // expected) ends its run `failed`; nothing waits for it forever.
        let runtime = self.clone();
        tokio::spawn(async move {
            if let Err(e) = driving.await
                && e.is_panic()
            {
                let message = panic_message(e.into_panic());
                Drive::of(&runtime).end_after_panic(&live, message).await;
            }
        });
    }
}

/// Drives one run after another: its session opened, its driver run
/// within the agent's limits, its end recorded once.
pub(crate) struct Drive<'a> {
    pub(crate) kernel: &'a AgentRuntime,
}

impl<'a> Drive<'a> {
    pub(crate) fn of(kernel: &'a AgentRuntime) -> Self {
        Self { kernel }
    }

    pub(crate) async fn drive(&self, live: Arc<LiveRun>) {
        let ended = self.drive_inner(&live).await;
        self.finish(&live, ended).await;
    }

    /// Ends a run whose driver panicked: as `failed`, through
    /// [`AgentRuntime::finish`] when it had not begun, else in memory, so
    /// waiters hear of it.
    pub(super) async fn end_after_panic(&self, live: &Arc<LiveRun>, message: String) {
        tracing::error!(run = %live.run_id(), "the run's driver panicked: {message}");
        let ended = Err(RunEnd::Failed(format!(
            "the run's driver panicked: {message}"
        )));
        if !live.ending.load(Ordering::SeqCst) {
            self.finish(live, ended).await;
            return;
        }
        let run = live.update(|r| {
            if !r.status.is_final() {
                r.status = RunStatus::Failed;
                r.error = Some(format!("the run's driver panicked while ending: {message}"));
            }
        });
        self.kernel.inner.gateway.close(&run.id);
        lock(&self.kernel.inner.live).remove(&run.id);
        // The store has its end already when the panic came after
        // `finish` stored it.
        if *lock(&live.stored) != run.status {
            let _ = self.kernel.persist_live(live, &run).await;
        }
    }

    /// Records how a run ended, once.
    pub(super) async fn finish(&self, live: &Arc<LiveRun>, ended: Result<(), RunEnd>) {
        if live.ending.swap(true, Ordering::SeqCst) {
            return;
        }
        let id = live.run_id();
        let (status, error) = match ended {
            Ok(()) => (RunStatus::Succeeded, None),
            Err(RunEnd::Gateway(GatewayError::Cancelled(_))) => {
                (RunStatus::Cancelled, Some("cancelled".to_owned()))
            }
            Err(RunEnd::Gateway(GatewayError::LimitExceeded { message, .. })) => {
                (RunStatus::LimitExceeded, Some(message))
            }
            Err(RunEnd::Gateway(e)) => (RunStatus::Failed, Some(e.to_string())),
            Err(RunEnd::Failed(message)) => (RunStatus::Failed, Some(message)),
        };
        // A cancel or limit wins over what the driver made of it (a
        // cancelled operation is an error to the driver).
        let (status, error) = match self.kernel.inner.gateway.stopped(&id) {
            Some(Stop::Cancelled) => (RunStatus::Cancelled, Some("cancelled".to_owned())),
            Some(Stop::LimitExceeded(message)) => (RunStatus::LimitExceeded, Some(message)),
            Some(Stop::Failed(message)) => (RunStatus::Failed, Some(message)),
            None => (status, error),
        };
        // Model calls still in flight end now, and what they used counts.
        if let Some(used) = self.kernel.inner.gateway.end_model_calls(&id).await {
            live.amend(|r| r.tokens_used = used);
        }
        self.kernel.inner.gateway.close(&id);
        // What the run did is stored before its end is.
        let (status, error) = match live.journal.get() {
            Some(journal) => match journal.flush().await {
                Ok(()) => (status, error),
                Err(e) => (RunStatus::Failed, Some(e.to_string())),
            },
            None => (status, error),
        };
        let result = lock(&live.submitted).take();
        let session = lock(&live.session).clone();
        if let Some(session) = &session {
            let _ = self
                .kernel
                .inner
                .coordinator
                .commit(
                    session,
                    vec![SessionEvent::RunStateChanged {
                        run: id.to_string(),
                        state: status.as_str().to_owned(),
                    }],
                )
                .await;
        }
        let mut run = {
            let mut run = lock(&live.run);
            run.status = status;
            run.error = error;
            run.result = match status {
                RunStatus::Succeeded => result.as_ref().map(JsonText::from_value),
                _ => None,
            };
            run.updated_at_ms = now_ms();
            run.clone()
        };
        // Stored before waiters hear of the end, so a read or a list after
        // `wait` finds it. A store failure leaves the run `running` in the
        // store; the run in memory says so.
        if let Err(e) = self.kernel.persist_live(live, &run).await {
            tracing::error!(run = %id, "the run ended but could not be stored: {e}");
            run.error = Some(format!("the run ended but could not be stored: {e}"));
            *lock(&live.run) = run.clone();
        }
        match run.status {
            RunStatus::Succeeded => tracing::info!(status = run.status.as_str(), "run ended"),
            _ => tracing::warn!(
                status = run.status.as_str(),
                error = run.error.as_deref().unwrap_or_default(),
                "run ended"
            ),
        }
        if let Some((day, tokens)) = &live.reservation {
            DayBudget::of(self.kernel)
                .give_back(day, *tokens, run.tokens_used, true)
                .await;
        }
        // A run stopped by its time limit or a cancel while an action
        // waited (the driver dropped mid-call) leaves it pending: nothing
        // waits for it any more, so it must not go out later.
        let why = format!("the run ended {}", run.status);
        if let Err(e) = self.kernel.inner.actions.withdraw_run(&id, &why).await {
            tracing::error!(run = %id, "withdrawing the run's pending actions: {e}");
        }
        lock(&self.kernel.inner.live).remove(&id);
        self.kernel.inner.room.notify_one();
        live.changes.send_replace(run.status);
        live.tell(|| RunEvent::End(Box::new(run)));
    }

    pub(super) async fn drive_inner(&self, live: &Arc<LiveRun>) -> Result<(), RunEnd> {
        let run = live.snapshot();
        if live.cancelled.load(Ordering::SeqCst) {
            return Err(RunEnd::Gateway(GatewayError::Cancelled(run.id)));
        }
        // A run resumed after its process died has its session already.
        let session = match &run.session {
            Some(session) => session.clone(),
            None => self
                .open_session(&run)
                .await
                .map_err(|e| RunEnd::Failed(e.to_string()))?,
        };
        *lock(&live.session) = Some(session.clone());
        let _ = live.journal.set(Arc::new(Journal::new(
            self.kernel.inner.coordinator.store().clone(),
            session.clone(),
        )));
        let token = self.kernel.inner.gateway.open(&run.id, live.agent.clone());
        // A cancel that came while the session was being made.
        if live.cancelled.load(Ordering::SeqCst) {
            self.kernel.inner.gateway.stop(&run.id, Stop::Cancelled);
        }
        let running = live.update(|r| {
            r.status = RunStatus::Running;
            r.session = Some(session);
        });
        self.kernel
            .persist_live(live, &running)
            .await
            .map_err(|e| RunEnd::Failed(e.to_string()))?;
        let input = run
            .input
            .to_value()
            .map_err(|e| RunEnd::Failed(e.to_string()))?;
        self.drive_within_limit(live, &token, input).await
    }

    /// The run's session: created with the run's input as its first,
    /// handled input (the run's id is the input's id) and the run marked
    /// running in it.
    pub(super) async fn open_session(&self, run: &AgentRun) -> Result<SessionId, RunError> {
        let coordinator = &self.kernel.inner.coordinator;
        let session = coordinator.store().create_session().await?.id;
        let input = Input {
            id: run
                .id
                .as_str()
                .parse::<InputId>()
                .expect("a run id is a valid input id"),
            kind: InputKind::External {
                payload: run.input.clone(),
            },
        };
        coordinator.deliver(&session, input.clone()).await?;
        let handled = vec![
            SessionEvent::InputHandled { input: input.id },
            SessionEvent::RunStateChanged {
                run: run.id.to_string(),
                state: RunStatus::Running.as_str().to_owned(),
            },
        ];
        coordinator.commit(&session, handled).await?;
        Ok(session)
    }

    /// Runs the agent's driver until it ends or the run's `maxSeconds`
    /// pass, which stops the run as `limit_exceeded`.
    pub(super) async fn drive_within_limit(
        &self,
        live: &LiveRun,
        token: &RunToken,
        input: Value,
    ) -> Result<(), RunEnd> {
        let run = live.run_id();
        let max = Duration::from_secs(live.agent.manifest.spec.limits.max_seconds);
        let attached = lock(&live.attached).take();
        if let Some(sender) = attached {
            let _ = sender.send(token.clone());
            return match tokio::time::timeout(max, self.attached_until_end(live, &run)).await {
                Ok(ended) => ended,
                Err(_) => Err(self.out_of_time(&run, max)),
            };
        }
        let prepared = lock(&live.external).take();
        if let Some(prepared) = prepared {
            return self
                .drive_external(live, &run, token, input, prepared, max)
                .await;
        }
        let Some(drivers::Chosen::Driver(driver)) =
            drivers::for_agent(&live.agent, live.history.clone())
        else {
            return Err(RunEnd::Failed(format!(
                "driver `{}` is not available in this build",
                live.agent.manifest.spec.driver
            )));
        };
        let tools = RunTools {
            runtime: self.kernel,
            token,
        };
        let models = live.model.as_ref().map(|model| model::RunModels {
            runtime: self.kernel,
            token,
            info: model.info.clone(),
            live,
        });
        let models = models.as_ref().map(|m| m as &dyn drivers::ModelCaller);
        match tokio::time::timeout(max, driver.drive(&tools, models, input)).await {
            Ok(result) => result,
            Err(_) => Err(self.out_of_time(&run, max)),
        }
    }

    /// An external driver's run (a CLI in its container), until hane ends
    /// the run (its result accepted, a cancel, a limit, `maxSeconds`) or
    /// the driver stops; what it printed goes into the run's session.
    pub(super) async fn drive_external(
        &self,
        live: &LiveRun,
        run: &RunId,
        token: &RunToken,
        input: Value,
        prepared: Box<dyn drivers::ExternalDriver>,
        max: Duration,
    ) -> Result<(), RunEnd> {
        let Some(model) = live.model.as_ref() else {
            return Err(RunEnd::Failed(
                "an external driver's run needs a model".to_owned(),
            ));
        };
        let ended = async move {
            match tokio::time::timeout(max, self.attached_until_end(live, run)).await {
                Ok(ended) => ended,
                Err(_) => Err(self.out_of_time(run, max)),
            }
        };
        let (ended, output) = prepared
            .drive(drivers::ExternalRun {
                agent: &live.agent,
                token,
                input,
                history: &live.history,
                model: &model.info,
                ended: Box::pin(ended),
            })
            .await;
        if let Some(journal) = live.journal.get() {
            journal.record(vec![SessionEvent::CliOutput(Box::new(output))]);
        }
        ended
    }

    /// Stops `run` for running longer than `max`.
    pub(super) fn out_of_time(&self, run: &RunId, max: Duration) -> RunEnd {
        let message = format!("maxSeconds: the run took longer than {} s", max.as_secs());
        tracing::warn!(run = %run, "{message}");
        self.kernel
            .inner
            .gateway
            .stop(run, Stop::LimitExceeded(message.clone()));
        RunEnd::Gateway(GatewayError::LimitExceeded {
            run: run.clone(),
            message,
        })
    }

    /// An attached run, until `submit_result` accepts its result or the
    /// gateway stops it.
    pub(super) async fn attached_until_end(
        &self,
        live: &LiveRun,
        run: &RunId,
    ) -> Result<(), RunEnd> {
        tokio::select! {
            () = live.result_ready.notified() => Ok(()),
            stop = self.kernel.inner.gateway.wait_stopped(run) => Err(match stop {
                Some(Stop::Failed(message)) => RunEnd::Failed(message),
                Some(stop) => RunEnd::Gateway(GatewayError::from_stop(run.clone(), stop)),
                None => RunEnd::Failed("the run's gate closed while it was attached".to_owned()),
            }),
        }
    }
}
