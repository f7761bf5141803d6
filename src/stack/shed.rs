//! Load shedding at `limits.maxConcurrentRequests`: a request beyond it is answered at once
//! (503 with `Retry-After`) rather than queued, so a saturated sidecar stays responsive and
//! a balancer sees the refusal. The permit is held until the answer's head is ready; a stream
//! that follows counts against `limits.maxStreams` instead (src/mcp/respond.rs).
//!
//! Ours, not tower's `ConcurrencyLimit` with `LoadShed`: that pair waits for a permit in
//! `poll_ready` through a boxed acquire future made for every clone of the service, which is
//! an allocation per request; `try_acquire_owned` in `call` is one atomic operation.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::{Either, Ready};
use http::Request;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{Layer, Service};

use super::answer::Answer;
use crate::body::Response;

/// The answer to a request that is shed.
pub trait Refusal {
    fn refuse(&self) -> Response;
}

/// See the module. `refuse` makes the 503 for a request that is shed.
#[derive(Clone)]
pub struct ShedLayer<F> {
    permits: Arc<Semaphore>,
    refuse: F,
}

impl<F> ShedLayer<F> {
    pub fn new(permits: Arc<Semaphore>, refuse: F) -> ShedLayer<F> {
        ShedLayer { permits, refuse }
    }
}

impl<S, F: Clone> Layer<S> for ShedLayer<F> {
    type Service = Shed<S, F>;

    fn layer(&self, inner: S) -> Shed<S, F> {
        Shed {
            permits: self.permits.clone(),
            refuse: self.refuse.clone(),
            inner,
        }
    }
}

/// See the module.
#[derive(Clone)]
pub struct Shed<S, F> {
    permits: Arc<Semaphore>,
    refuse: F,
    inner: S,
}

impl<S, F, B> Service<Request<B>> for Shed<S, F>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>,
    F: Refusal,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Either<Ready<Answer>, Permitted<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), std::convert::Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => Either::Right(Permitted {
                fut: self.inner.call(req),
                _permit: permit,
            }),
            Err(_) => Either::Left(futures_util::future::ready(Ok(self.refuse.refuse()))),
        }
    }
}

pin_project_lite::pin_project! {
    /// The inner answer, holding its permit until it is ready.
    pub struct Permitted<F> {
        #[pin]
        fut: F,
        _permit: OwnedSemaphorePermit,
    }
}

impl<F: Future<Output = Answer>> Future for Permitted<F> {
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        self.project().fut.poll(cx)
    }
}
