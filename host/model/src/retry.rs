//! Trying a model call again after an error that may pass.

use std::time::Duration;

use tokio::time::Instant;

use crate::{EventSink, ModelAdapter, ModelError, ModelRequest, ModelResponse};

/// How [`send_with_retry`] retries.
///
/// Defaults: 4 attempts in all, backoff from 500 ms doubling up to 8 s, with
/// jitter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The wait after the first failed attempt; it doubles after each.
    pub base_delay: Duration,
    /// The longest wait between attempts (a provider's `Retry-After` may ask
    /// for more, and is honoured).
    pub max_delay: Duration,
    /// Waits are drawn at random from the upper half of the backoff, so
    /// many runs that failed together do not retry together.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// The backoff after failed attempt `attempt` (1-based), before jitter.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }

    fn wait(&self, attempt: u32, error: &ModelError) -> Duration {
        let mut wait = self.backoff(attempt);
        if self.jitter && !wait.is_zero() {
            let mut bytes = [0u8; 8];
            let fraction = match getrandom::fill(&mut bytes) {
                Ok(()) => u64::from_le_bytes(bytes) as f64 / u64::MAX as f64,
                Err(_) => 1.0,
            };
            wait = wait.mul_f64(0.5 + fraction / 2.0);
        }
        wait.max(error.retry_after().unwrap_or(Duration::ZERO))
    }
}

/// Sends `request` through `adapter`, retrying errors for which
/// [`ModelError::is_retryable`] holds as `policy` says, and never past
/// `deadline` (the run's time limit): an attempt still running at the
/// deadline ends with [`ModelError::Timeout`], and when the wait before the
/// next attempt would pass the deadline the last error is returned at once.
/// A wait is at least the provider's `Retry-After`.
///
/// A streamed attempt that fails after it passed [`crate::StreamEvent`]s
/// to `events` is not retried: whoever reads the events has seen part of
/// an answer that a second attempt would not continue.
///
/// # Errors
///
/// The last attempt's error, or the first that is not retryable.
pub async fn send_with_retry(
    adapter: &dyn ModelAdapter,
    request: &ModelRequest,
    events: Option<EventSink<'_>>,
    deadline: std::time::Instant,
    policy: &RetryPolicy,
) -> Result<ModelResponse, ModelError> {
    let deadline = Instant::from_std(deadline);
    let started = Instant::now();
    let mut attempt = 0;
    let delivered = std::sync::atomic::AtomicBool::new(false);
    let forward = |event: crate::StreamEvent| {
        delivered.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(events) = events {
            events(event);
        }
    };
    let forward: Option<EventSink<'_>> = events.map(|_| &forward as EventSink<'_>);
    loop {
        attempt += 1;
        let result = match tokio::time::timeout_at(deadline, adapter.send(request, forward)).await {
            Ok(result) => result,
            Err(_) => Err(ModelError::Timeout(started.elapsed())),
        };
        let error = match result {
            Ok(response) => return Ok(response),
            Err(error) => error,
        };
        if !error.is_retryable()
            || attempt >= policy.max_attempts.max(1)
            || delivered.load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err(error);
        }
        let wait = policy.wait(attempt, &error);
        if Instant::now() + wait >= deadline {
            return Err(error);
        }
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::{StopReason, Usage};
    use hane_core::BoxFuture;

    /// An adapter answering from a script, noting when each call came.
    #[derive(Debug)]
    struct Scripted {
        script: Mutex<Vec<Result<ModelResponse, ModelError>>>,
        calls: Mutex<Vec<Instant>>,
    }

    impl Scripted {
        fn new(mut script: Vec<Result<ModelResponse, ModelError>>) -> Self {
            script.reverse();
            Self {
                script: Mutex::new(script),
                calls: Mutex::new(Vec::new()),
            }
        }

        fn gaps(&self, start: Instant) -> Vec<Duration> {
            let calls = self.calls.lock().unwrap();
            let mut last = start;
            calls
                .iter()
                .map(|&at| {
                    let gap = at - last;
                    last = at;
                    gap
                })
                .collect()
        }
    }

    impl ModelAdapter for Scripted {
        fn send<'a>(
            &'a self,
            _: &'a ModelRequest,
            _: Option<EventSink<'a>>,
        ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
            self.calls.lock().unwrap().push(Instant::now());
            let next = self
                .script
                .lock()
                .unwrap()
                .pop()
                .expect("a scripted answer");
            Box::pin(async move { next })
        }
    }

    fn ok() -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse {
            content: Vec::new(),
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            model: "m".into(),
            request_id: None,
        })
    }

    fn overloaded(retry_after: Option<Duration>) -> Result<ModelResponse, ModelError> {
        Err(ModelError::Overloaded {
            retry_after,
            message: "busy".into(),
        })
    }

    fn in_secs(s: u64) -> std::time::Instant {
        (Instant::now() + Duration::from_secs(s)).into_std()
    }

    const EXACT: RetryPolicy = RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(500),
        max_delay: Duration::from_secs(8),
        jitter: false,
    };

    #[tokio::test(start_paused = true)]
    async fn backs_off_exponentially_then_succeeds() {
        let adapter = Scripted::new(vec![
            overloaded(None),
            overloaded(None),
            overloaded(None),
            ok(),
        ]);
        let start = Instant::now();
        let request = ModelRequest::new("m");
        send_with_retry(&adapter, &request, None, in_secs(60), &EXACT)
            .await
            .unwrap();
        let ms = |m| Duration::from_millis(m);
        assert_eq!(adapter.gaps(start), [ms(0), ms(500), ms(1000), ms(2000)]);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_the_last_attempt_and_on_errors_that_will_not_pass() {
        let adapter = Scripted::new(vec![overloaded(None); 4]);
        let request = ModelRequest::new("m");
        let error = send_with_retry(&adapter, &request, None, in_secs(60), &EXACT).await;
        assert!(matches!(error, Err(ModelError::Overloaded { .. })));
        assert_eq!(adapter.calls.lock().unwrap().len(), 4);

        let adapter = Scripted::new(vec![Err(ModelError::Authentication {
            message: "no".into(),
        })]);
        let error = send_with_retry(&adapter, &request, None, in_secs(60), &EXACT).await;
        assert!(matches!(error, Err(ModelError::Authentication { .. })));
        assert_eq!(adapter.calls.lock().unwrap().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn waits_at_least_retry_after_and_never_past_the_deadline() {
        let adapter = Scripted::new(vec![overloaded(Some(Duration::from_secs(5))), ok()]);
        let start = Instant::now();
        let request = ModelRequest::new("m");
        send_with_retry(&adapter, &request, None, in_secs(60), &EXACT)
            .await
            .unwrap();
        assert_eq!(
            adapter.gaps(start),
            [Duration::ZERO, Duration::from_secs(5)]
        );

        // A wait that would pass the deadline returns the error at once.
        let adapter = Scripted::new(vec![overloaded(Some(Duration::from_secs(30))), ok()]);
        let start = Instant::now();
        let error = send_with_retry(&adapter, &request, None, in_secs(10), &EXACT).await;
        assert!(matches!(error, Err(ModelError::Overloaded { .. })));
        assert_eq!(Instant::now(), start);
        assert_eq!(adapter.calls.lock().unwrap().len(), 1);
    }

    /// Streams a piece of text, then fails as an overloaded provider does.
    #[derive(Debug, Default)]
    struct FailsMidway {
        calls: Mutex<u32>,
    }

    impl ModelAdapter for FailsMidway {
        fn send<'a>(
            &'a self,
            _: &'a ModelRequest,
            events: Option<EventSink<'a>>,
        ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
            *self.calls.lock().unwrap() += 1;
            if let Some(events) = events {
                events(crate::StreamEvent::TextDelta {
                    index: 0,
                    text: "Hel".into(),
                });
            }
            Box::pin(async { overloaded(None) })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_streamed_part_of_an_answer_is_not_retried() {
        let request = ModelRequest::new("m");
        let adapter = FailsMidway::default();
        let seen = Mutex::new(Vec::new());
        let sink = |event| seen.lock().unwrap().push(event);
        let error = send_with_retry(&adapter, &request, Some(&sink), in_secs(60), &EXACT).await;
        assert!(matches!(error, Err(ModelError::Overloaded { .. })));
        assert_eq!(*adapter.calls.lock().unwrap(), 1);
        assert_eq!(seen.lock().unwrap().len(), 1);

        // Without a reader of the pieces, the same failure is retried.
        let adapter = FailsMidway::default();
        let error = send_with_retry(&adapter, &request, None, in_secs(60), &EXACT).await;
        assert!(matches!(error, Err(ModelError::Overloaded { .. })));
        assert_eq!(*adapter.calls.lock().unwrap(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn jittered_waits_stay_in_the_upper_half_of_the_backoff() {
        let policy = RetryPolicy::default();
        let adapter = Scripted::new(vec![
            overloaded(None),
            overloaded(None),
            overloaded(None),
            ok(),
        ]);
        let start = Instant::now();
        let request = ModelRequest::new("m");
        send_with_retry(&adapter, &request, None, in_secs(60), &policy)
            .await
            .unwrap();
        let gaps = adapter.gaps(start);
        for (attempt, gap) in (1..).zip(&gaps[1..]) {
            let full = policy.backoff(attempt);
            assert!(
                *gap >= full / 2 && *gap <= full,
                "{attempt}: {gap:?} of {full:?}"
            );
        }
        assert_eq!(policy.backoff(10), Duration::from_secs(8));
    }
}
