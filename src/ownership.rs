//! Request-owned runs (RFC 0198 §G.12–§G.13, RFC 0198 §G).
//!
//! Until the sidecar has handed the last byte of its answer to the connection, the request
//! that started or continued a run owns it. [`RunGuard`] holds that ownership: it lives in the
//! handler future (so dropping the future before the response head cancels) and then moves
//! into [`GuardedBody`] (so dropping the body before its end cancels). It is disarmed only when
//! the body yields its final frame. The cancel itself is a separate upstream request with the
//! caller's own credential, dispatched on its own task so a drop never blocks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Body as HttpBody;
use tokio::sync::Notify;

use crate::body::BoxError;
use crate::host::{Caller, HostClient, HostError};
use crate::telemetry::Metrics;

/// Sends the cancels of orphaned runs, retrying until a deadline.
#[derive(Clone)]
pub struct CancelDispatcher {
    inner: Arc<DispatcherInner>,
}

struct DispatcherInner {
    deadline: Duration,
    reason: String,
    inflight: AtomicUsize,
    idle: Notify,
    metrics: Metrics,
}

/// How one orphan cancel ended (also the metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    Cancelled,
    AlreadyTerminal,
    Refused,
    GaveUp,
}

impl CancelOutcome {
    pub fn label(self) -> &'static str {
        match self {
            CancelOutcome::Cancelled => "cancelled",
            CancelOutcome::AlreadyTerminal => "already_terminal",
            CancelOutcome::Refused => "refused",
            CancelOutcome::GaveUp => "gave_up",
        }
    }
}

impl CancelDispatcher {
    pub fn new(deadline: Duration, reason: String, metrics: Metrics) -> Self {
        CancelDispatcher {
            inner: Arc::new(DispatcherInner {
                deadline,
                reason,
                inflight: AtomicUsize::new(0),
                idle: Notify::new(),
                metrics,
            }),
        }
    }

    /// Starts the cancel of `run_id` and returns at once (called from `Drop`).
    pub fn dispatch(&self, host: HostClient, run_id: String, caller: Caller, phase: &'static str) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::error!(run_id = %run_id, "no runtime to cancel an orphaned run");
            return;
        };
        self.inner.inflight.fetch_add(1, Ordering::SeqCst);
        let me = self.clone();
        rt.spawn(async move {
            let outcome = me.cancel_with_retries(&host, &run_id, &caller).await;
            me.inner.metrics.owned_cancel(phase, outcome.label());
            match outcome {
                CancelOutcome::Cancelled | CancelOutcome::AlreadyTerminal => {
                    tracing::info!(run_id = %run_id, phase, outcome = outcome.label(), "owned run released after client disconnect")
                }
                _ => tracing::warn!(run_id = %run_id, phase, outcome = outcome.label(), "could not cancel an orphaned run"),
            }
            if me.inner.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
                me.inner.idle.notify_waiters();
            }
        });
    }

    /// `host` is the client of the configuration generation the owning request began with, so
    /// a mapping reload never redirects an owed cancel.
    async fn cancel_with_retries(
        &self,
        host: &HostClient,
        run_id: &str,
        caller: &Caller,
    ) -> CancelOutcome {
        let start = Instant::now();
        let mut backoff = Duration::from_millis(25);
        loop {
            match host
                .cancel_run_once(caller, run_id, &self.inner.reason)
                .await
            {
                Ok(_) => return CancelOutcome::Cancelled,
                // OpenWOP v2 runs.md, cancelRun: a terminal run answers 409 run_terminal; nothing is owed.
                Err(e) if e.class().run_is_terminal() => return CancelOutcome::AlreadyTerminal,
                Err(HostError::Status { status, .. })
                    if status.is_client_error() && status.as_u16() != 429 =>
                {
                    // A host whose error rules do not name "already ended" may refuse the
                    // cancel of a run that ended with any 4xx (a 409, a 400
                    // FAILED_PRECONDITION): the run's own status says whether a cancel is
                    // still owed. One read, never a retry.
                    return match Box::pin(host.get_run(caller, run_id)).await {
                        Ok(run) if run.status.is_terminal() => CancelOutcome::AlreadyTerminal,
                        _ => CancelOutcome::Refused,
                    };
                }
                Err(e) => {
                    // A host that asks for a pause (429, or 503 with `Retry-After`; RFC 9110
                    // §10.2.3, seconds or a date) is not asked again before it is over: a
                    // cancel must not add to the load it is shedding. A pause that ends past
                    // the deadline is not waited for.
                    let wait = e.retry_after().map_or(backoff, |r| r.max(backoff));
                    if start.elapsed() + wait > self.inner.deadline {
                        tracing::warn!(run_id, error = %e, "cancel retries exhausted");
                        return CancelOutcome::GaveUp;
                    }
                    tracing::debug!(run_id, error = %e, "cancel failed, retrying");
                    tokio::time::sleep(wait).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Runs a background job that shutdown must wait for like a cancel (e.g. finding the run
    /// of a lost createRun answer so it can be cancelled).
    pub fn track(&self, job: impl std::future::Future<Output = ()> + Send + 'static) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        self.inner.inflight.fetch_add(1, Ordering::SeqCst);
        let me = self.clone();
        rt.spawn(async move {
            job.await;
            if me.inner.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
                me.inner.idle.notify_waiters();
            }
        });
    }

    /// Number of cancels still being delivered.
    pub fn inflight(&self) -> usize {
        self.inner.inflight.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until every dispatched cancel has finished: shutdown must not drop them.
    pub async fn drain(&self, timeout: Duration) {
        let wait = async {
            loop {
                let notified = self.inner.idle.notified();
                if self.inflight() == 0 {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(timeout, wait).await;
    }
}

/// Ownership of one run by one request. Dropped while armed → the run is cancelled.
pub struct RunGuard {
    run: Option<(String, Caller)>,
    dispatcher: CancelDispatcher,
    host: HostClient,
    phase: &'static str,
}

impl RunGuard {
    pub fn new(dispatcher: CancelDispatcher, host: HostClient) -> RunGuard {
        RunGuard {
            run: None,
            dispatcher,
            host,
            phase: "before_head",
        }
    }

    /// The request now owns `run_id` (set right after createRun or requestState verification).
    pub fn own(&mut self, run_id: &str, caller: &Caller) {
        self.run = Some((run_id.to_string(), caller.clone()));
    }

    pub fn owns(&self) -> Option<&str> {
        self.run.as_ref().map(|(r, _)| r.as_str())
    }

    /// Gives up ownership without cancelling (the answer is delivered, or the run is terminal).
    pub fn release(&mut self) {
        self.run = None;
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if let Some((run_id, caller)) = self.run.take() {
            self.dispatcher
                .dispatch(self.host.clone(), run_id, caller, self.phase);
        }
    }
}

/// A response body that carries the guard until its last frame is handed to the connection
/// (src/eos.rs): the answer is then delivered and the run handed over (§G.13). A body that
/// fails mid-stream, or is dropped before its end, drops the guard armed, which cancels.
pub type GuardedBody<B> = crate::eos::WithEos<B, RunGuard>;

/// [`GuardedBody`] of `inner`.
pub fn guarded<B>(inner: B, mut guard: RunGuard) -> GuardedBody<B>
where
    B: HttpBody<Data = Bytes, Error = BoxError> + Unpin,
{
    guard.phase = "after_head";
    crate::eos::WithEos::new(inner, guard)
}

impl crate::eos::OnEos for RunGuard {
    fn on_eos(mut self, eos: crate::eos::Eos) {
        if eos == crate::eos::Eos::End {
            self.release();
        }
    }
}
