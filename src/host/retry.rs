//! A host call as tower services, innermost first: [`Exchange`] (one request sent, its answer
//! read whole and parsed), tower's `Timeout` (the route's `timeoutMs` per attempt, head and
//! body), [`Attempts`] (the request built for each attempt, each attempt counted in the
//! metrics and the access line) and tower's `Retry` with [`HostRetry`], the route's
//! `host.routes.<op>.retry` policy (src/config/retry.rs), which honours `Retry-After`
//! (RFC 9110 §10.2.3).
//!
//! These stay inside src/host/ rather than a room of their own: the pools, the request
//! builder and the error classification they wrap are the host client's, and every layer
//! borrows the client and the call's closures (no clone, no box but the exchange's own).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{HeaderMap, Request, StatusCode};
use tower::Service;

use super::client::HostClient;
use super::error::BadTarget;
use super::HostError;
use crate::body::{Body, BoxError};
use crate::config::{Operation, RetryPolicy};
use crate::telemetry::UpstreamStatus;

impl HostClient {
    /// [`HostClient::send_json_within`] with the answer's bytes read by `parse` (getRun is
    /// read straight into a RunSnapshot, not through a `Value`).
    pub(super) async fn send_within<T: Send>(
        &self,
        op: Operation,
        timeout: Duration,
        build: impl Fn() -> Result<Request<Body>, BadTarget> + Sync,
        parse: impl Fn(&[u8]) -> Result<T, serde_json::Error> + Sync,
    ) -> Result<T, HostError> {
        self.send_within_head(op, timeout, build, |_, _, b| parse(b))
            .await
    }

    /// [`HostClient::send_within`] whose reader also sees the answer's headers (a createRun
    /// answered `202` with the run in `Location`, a `Retry-After`).
    ///
    /// The call is a tower stack (src/host/retry.rs): the route's retry policy over the
    /// attempts, each built, counted and bounded by `timeout`.
    pub(super) async fn send_within_head<T: Send>(
        &self,
        op: Operation,
        timeout: Duration,
        build: impl Fn() -> Result<Request<Body>, BadTarget> + Sync,
        parse: impl Fn(StatusCode, &HeaderMap, &[u8]) -> Result<T, serde_json::Error> + Sync,
    ) -> Result<T, HostError> {
        use tower::ServiceExt as _;
        let route = self.routes.get(op);
        let policy = HostRetry {
            policy: &route.retry,
            op,
            read: route.method.is_safe(),
        };
        let exchange = Exchange {
            client: self,
            parse: &parse,
        };
        let attempts = Attempts {
            client: self,
            op,
            build: &build,
            inner: tower::timeout::Timeout::new(exchange, timeout),
        };
        // Boxed as a `Send` future here, where the closures' bounds are in scope: the callers'
        // futures then hold no projection of the stack's types, whose `Send` the compiler
        // cannot prove through their higher-ranked closure signatures.
        let call: BoxCall<'_, T> =
            crate::body::per_request(tower::retry::Retry::new(policy, attempts).oneshot(0));
        match call.await {
            Ok((_, v)) => Ok(v),
            // Nothing was sent: the caller's mistake, logged where it was found.
            Err(e @ HostError::NotSent(_)) => Err(e),
            Err(e) => {
                // The failure path only: the target is built again to name its path.
                let path = build().ok();
                let path = path.as_ref().map_or("", |r| r.uri().path());
                super::error::host_failure(op, &route.method, path, &e);
                Err(e)
            }
        }
    }
}

/// What an attempt answers: the status and the parsed body.
type Answered<T> = Result<(StatusCode, T), HostError>;

/// A whole host call (every attempt), boxed where the closures' bounds are in scope.
pub(super) type BoxCall<'a, T> = Pin<Box<dyn Future<Output = Answered<T>> + Send + 'a>>;

/// One exchange (see the module). Boxed per attempt: the exchange (client future, body
/// collection) is several kB, and inline it would be held by every future that awaits a host
/// call (a blocked call or a listen keeps those alive for the run's lifetime).
pub(super) struct Exchange<'a, P> {
    pub client: &'a HostClient,
    pub parse: &'a P,
}

impl<P> Clone for Exchange<'_, P> {
    fn clone(&self) -> Self {
        Exchange {
            client: self.client,
            parse: self.parse,
        }
    }
}

impl<'a, P, T> Service<Request<Body>> for Exchange<'a, P>
where
    P: Fn(StatusCode, &HeaderMap, &[u8]) -> Result<T, serde_json::Error> + Sync + 'a,
    T: Send + 'a,
{
    type Response = (StatusCode, T);
    type Error = HostError;
    type Future = Pin<Box<dyn Future<Output = Answered<T>> + Send + 'a>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), HostError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        crate::body::per_request(self.client.exchange(req, self.parse))
    }
}

/// Builds the request of each attempt (the attempt's number is the service's request) and
/// counts each attempt in the metrics and the access line (see the module).
pub(super) struct Attempts<'a, B, S> {
    pub client: &'a HostClient,
    pub op: Operation,
    pub build: &'a B,
    pub inner: S,
}

impl<B, S: Clone> Clone for Attempts<'_, B, S> {
    fn clone(&self) -> Self {
        Attempts {
            client: self.client,
            op: self.op,
            build: self.build,
            inner: self.inner.clone(),
        }
    }
}

impl<'a, B, S, T> Service<u32> for Attempts<'a, B, S>
where
    B: Fn() -> Result<Request<Body>, BadTarget>,
    S: Service<Request<Body>, Response = (StatusCode, T), Error = BoxError>,
{
    type Response = (StatusCode, T);
    type Error = HostError;
    type Future = Recorded<'a, S::Future, T>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), HostError>> {
        self.inner.poll_ready(cx).map_err(host_error)
    }

    fn call(&mut self, _attempt: u32) -> Self::Future {
        let started = Instant::now();
        let state = match (self.build)() {
            Ok(req) => State::Sent {
                fut: self.inner.call(req),
            },
            // Nothing was sent, so this is no host call (no metric, no access line).
            Err(BadTarget::Caller(m)) => {
                return Recorded {
                    state: State::Done {
                        res: Some(Err(HostError::NotSent(m))),
                    },
                    client: self.client,
                    op: self.op,
                    started: None,
                }
            }
            Err(e) => State::Done {
                res: Some(Err(e.into())),
            },
        };
        Recorded {
            state,
            client: self.client,
            op: self.op,
            started: Some(started),
        }
    }
}

pin_project_lite::pin_project! {
    /// An attempt's answer, counted when it is ready (unless nothing was sent).
    pub(super) struct Recorded<'a, F, T> {
        #[pin]
        state: State<F, T>,
        client: &'a HostClient,
        op: Operation,
        started: Option<Instant>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F, T> {
        Sent { #[pin] fut: F },
        Done { res: Option<Answered<T>> },
    }
}

impl<F, T> Future for Recorded<'_, F, T>
where
    F: Future<Output = Result<(StatusCode, T), BoxError>>,
{
    type Output = Answered<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answered<T>> {
        let this = self.project();
        let res = match this.state.project() {
            StateProj::Sent { fut } => std::task::ready!(fut.poll(cx)).map_err(host_error),
            StateProj::Done { res } => match res.take() {
                Some(r) => r,
                None => return Poll::Pending,
            },
        };
        if let Some(started) = this.started.take() {
            let status = match &res {
                Ok((s, _)) => UpstreamStatus::Http(*s),
                Err(HostError::Status { status, .. }) => UpstreamStatus::Http(*status),
                Err(HostError::Timeout) => UpstreamStatus::Timeout,
                Err(HostError::Unavailable(_)) => UpstreamStatus::Unavailable,
                Err(HostError::BadBody(_)) => UpstreamStatus::BadBody,
                Err(HostError::NotSent(_)) => UpstreamStatus::Unavailable,
            };
            let took = started.elapsed();
            this.client.record(*this.op, status, took);
            crate::access::host_call(status, took);
        }
        Poll::Ready(res)
    }
}

/// The host's error again, from the timeout layer's boxed one (its own elapsed deadline is
/// [`HostError::Timeout`]).
fn host_error(e: BoxError) -> HostError {
    match e.downcast::<HostError>() {
        Ok(h) => *h,
        Err(e) if e.is::<tower::timeout::error::Elapsed>() => HostError::Timeout,
        Err(e) => HostError::Unavailable(super::error::root_cause(&*e)),
    }
}

/// The route's retry policy as a tower `Policy` (see [`pause`]).
#[derive(Clone, Copy)]
pub(super) struct HostRetry<'a> {
    pub policy: &'a RetryPolicy,
    pub op: Operation,
    /// A GET or HEAD route: a read, where a 429 or 503 that names its pause is waited out.
    pub read: bool,
}

impl<T> tower::retry::Policy<u32, (StatusCode, T), HostError> for HostRetry<'_> {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, attempt: &mut u32, result: &mut Answered<T>) -> Option<Self::Future> {
        let Err(e) = result else { return None };
        let wait = pause(self.policy, self.op, self.read, *attempt, e)?;
        *attempt += 1;
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, attempt: &u32) -> Option<u32> {
        Some(*attempt)
    }
}

/// The pause before sending a call again after its `attempt`-th try (from 0) failed with `e`,
/// or `None` when it is not sent again: the route's attempts are spent, the failure is not
/// one the policy retries, or the host's `Retry-After` asks for longer than the policy waits
/// (the host said when it can serve, and the caller is told now: a blocking call's follow
/// waits the pause out up to its answer cap, src/mcp/follow.rs). The n-th repeat waits n ×
/// the backoff, or the host's `Retry-After` when that is longer.
pub(super) fn pause(
    policy: &RetryPolicy,
    op: Operation,
    read: bool,
    attempt: u32,
    e: &HostError,
) -> Option<Duration> {
    if attempt + 1 >= policy.attempts {
        return None;
    }
    let asked = e.retry_after();
    let retriable = match e {
        // RFC 9110 §15.5.30 and §15.6.4: a 429 or a 503 with a `Retry-After` is a pause, not
        // a failure; on a read, sending it again after the pause changes nothing at the host.
        // A route may say an answer means the run has already ended (`alreadyEnded`,
        // src/config/answers.rs): final, whatever its status, never repeated.
        HostError::Status { class, .. } if class.run_is_terminal() => false,
        HostError::Status { status, .. } => {
            policy.retries_status(*status)
                || (read
                    && asked.is_some()
                    && matches!(
                        *status,
                        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
                    ))
        }
        _ => e.retriable(op),
    };
    if !retriable {
        return None;
    }
    let backoff = policy.backoff * (attempt + 1);
    match asked {
        Some(d) if d > policy.retry_after_max => None,
        Some(d) => Some(d.max(backoff)),
        None => Some(backoff),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, retry_after: Option<&'static str>) -> HostError {
        HostError::Status {
            status: StatusCode::from_u16(code).unwrap(),
            code: None,
            message: None,
            www_authenticate: None,
            retry_after: retry_after.map(http::HeaderValue::from_static),
            class: crate::config::ErrorClass::Internal,
        }
    }

    /// Today's default: a 5xx or an unreachable host is sent twice more, after 50 ms and
    /// 100 ms; a pause the host asks for beyond 100 ms is the caller's.
    #[test]
    fn the_default_policy_repeats_a_5xx_twice_after_50_then_100_ms() {
        let p = RetryPolicy::on();
        let op = Operation::GetRun;
        let e = status(502, None);
        assert_eq!(pause(&p, op, true, 0, &e), Some(Duration::from_millis(50)));
        assert_eq!(pause(&p, op, true, 1, &e), Some(Duration::from_millis(100)));
        assert_eq!(pause(&p, op, true, 2, &e), None);
        let down = HostError::Unavailable("refused".into());
        assert_eq!(
            pause(&p, op, true, 0, &down),
            Some(Duration::from_millis(50))
        );
        assert_eq!(pause(&p, op, true, 0, &status(404, None)), None);
        assert_eq!(pause(&p, op, true, 0, &status(503, Some("5"))), None);
        assert_eq!(pause(&RetryPolicy::off(), op, true, 0, &e), None);
    }

    /// A 429 or 503 with a short `Retry-After` on a read is waited out (the longer of the
    /// pause and the backoff); on a write a 429 is the caller's.
    #[test]
    fn a_read_refused_with_retry_after_is_waited_out() {
        let mut p = RetryPolicy::on();
        p.retry_after_max = Duration::from_secs(2);
        let e = status(429, Some("1"));
        assert_eq!(
            pause(&p, Operation::GetRun, true, 0, &e),
            Some(Duration::from_secs(1))
        );
        assert_eq!(pause(&p, Operation::CancelRun, false, 0, &e), None);
        assert_eq!(
            pause(&p, Operation::GetRun, true, 0, &status(429, None)),
            None
        );
        assert_eq!(
            pause(&p, Operation::GetRun, true, 0, &status(503, Some("3"))),
            None
        );
        // A route's own statuses replace "any 5xx".
        p.statuses = Some(vec![StatusCode::BAD_GATEWAY]);
        assert_eq!(
            pause(&p, Operation::GetRun, true, 0, &status(500, None)),
            None
        );
        assert!(pause(&p, Operation::GetRun, true, 0, &status(502, None)).is_some());
    }
}
