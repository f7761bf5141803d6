//! The mount's access line (src/obs/access.rs): the request's host calls are counted in a
//! task-local scope around everything inside this layer, and the line is written when the
//! answer is ready (a JSON answer) or when its stream ends (an SSE answer). The names on the
//! line (method, tool, task) are the mount's reading of the body, recorded in the same scope
//! (`crate::access::name`).

use std::task::{Context, Poll};
use std::time::Instant;

use http::Request;
use tower::{Layer, Service};

use super::answer::BoxAnswer;
use crate::body::Response;

/// See the module.
#[derive(Clone, Copy, Debug, Default)]
pub struct AccessLogLayer;

impl<S> Layer<S> for AccessLogLayer {
    type Service = AccessLog<S>;

    fn layer(&self, inner: S) -> AccessLog<S> {
        AccessLog { inner }
    }
}

/// See the module.
#[derive(Clone, Debug)]
pub struct AccessLog<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for AccessLog<S>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = BoxAnswer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), std::convert::Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> BoxAnswer {
        use futures_util::FutureExt as _;
        // The ready service goes into the future (tower's rule: a clone of it stays here, not
        // ready), and is called there, on the first poll: what the inner layers refuse in
        // `call` (a 405, a foreign Origin) is recorded inside the request's scope too.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let on = crate::access::enabled();
        let started = Instant::now();
        // The boundary box of the mount stack: the request future of a mount request is
        // kilobytes, and the router's future (the passthrough's too) stays small. Combinators,
        // not an `async` block: a block keeps what it captured beside the future it awaits, so
        // the request would be held twice.
        crate::body::per_request(crate::access::scope(on, Deferred::Call { inner, req }).map(
            move |(resp, names, stats)| {
                if !on {
                    return Ok(resp);
                }
                Ok(crate::access::log(names, resp, stats, started))
            },
        ))
    }
}

pin_project_lite::pin_project! {
    /// The inner service, called on the first poll (inside the request's scope).
    #[project = DeferredProj]
    #[project_replace = DeferredOwn]
    enum Deferred<S, B>
    where
        S: Service<Request<B>>,
    {
        Call { inner: S, req: Request<B> },
        Called { #[pin] fut: S::Future },
        Taken,
    }
}

impl<S, B> std::future::Future for Deferred<S, B>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>,
{
    type Output = Response;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        loop {
            match self.as_mut().project() {
                DeferredProj::Called { fut } => {
                    return fut.poll(cx).map(|r| match r {
                        Ok(r) => r,
                        Err(never) => match never {},
                    })
                }
                DeferredProj::Call { .. } => {
                    if let DeferredOwn::Call { mut inner, req } =
                        self.as_mut().project_replace(Deferred::Taken)
                    {
                        let fut = inner.call(req);
                        self.as_mut().set(Deferred::Called { fut });
                    }
                }
                DeferredProj::Taken => return Poll::Pending,
            }
        }
    }
}
