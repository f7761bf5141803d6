//! The request body, read whole before the mount parses it: at most `limits.maxBodyBytes`
//! (413 beyond), within `limits.bodyReadTimeoutMs` (408 after: a client that trickles its body
//! cannot pin the request), each refusal a JSON-RPC error with a null id (MCP 2026-07-28
//! Transports §Streamable HTTP: the server answers what it cannot read with an error).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Limited;
use serde_json::{json, Value};
use tower::{Layer, Service};

use super::answer::Answer;
use crate::body::{BoxError, Response, Whole};
use crate::mcp::error::INVALID_REQUEST;
use crate::mcp::McpError;

/// See the module.
#[derive(Clone, Copy, Debug)]
pub struct ReadBodyLayer {
    max: usize,
    timeout: Duration,
}

impl ReadBodyLayer {
    pub fn new(max: usize, timeout: Duration) -> ReadBodyLayer {
        ReadBodyLayer { max, timeout }
    }
}

impl<S> Layer<S> for ReadBodyLayer {
    type Service = ReadBody<S>;

    fn layer(&self, inner: S) -> ReadBody<S> {
        ReadBody {
            max: self.max,
            timeout: self.timeout,
            inner,
        }
    }
}

/// See the module: `Request<B>` in, `Request<Bytes>` to the inner service.
#[derive(Clone, Debug)]
pub struct ReadBody<S> {
    max: usize,
    timeout: Duration,
    inner: S,
}

impl<S, B> Service<Request<B>> for ReadBody<S>
where
    S: Service<Request<Bytes>, Response = Response, Error = std::convert::Infallible> + Clone,
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Reading<B, S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), std::convert::Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Reading<B, S> {
        // The ready service is called once the body is in (tower's rule: a clone stays here).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let (parts, body) = req.into_parts();
        Reading {
            state: State::Body {
                whole: crate::body::whole(Limited::new(body, self.max)),
                parts: Some((parts, inner)),
                max: self.max,
                timeout: self.timeout,
                timer: None,
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`ReadBody`]: the body, then the inner service's answer.
    pub struct Reading<B, S: Service<Request<Bytes>>> {
        #[pin]
        state: State<B, S>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<B, S: Service<Request<Bytes>>> {
        Body {
            #[pin]
            whole: Whole<Limited<B>>,
            parts: Option<(http::request::Parts, S)>,
            max: usize,
            timeout: Duration,
            // Made only for a body that is not whole at the first look.
            timer: Option<Pin<Box<tokio::time::Sleep>>>,
        },
        Inner {
            #[pin]
            fut: S::Future,
        },
    }
}

impl<B, S> Future for Reading<B, S>
where
    S: Service<Request<Bytes>, Response = Response, Error = std::convert::Infallible>,
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        let mut state = self.project().state;
        loop {
            let bytes = match state.as_mut().project() {
                StateProj::Inner { fut } => return fut.poll(cx),
                StateProj::Body {
                    whole,
                    parts,
                    max,
                    timeout,
                    timer,
                } => match whole.poll(cx) {
                    Poll::Ready(Ok(b)) => Ok((b, parts.take())),
                    Poll::Ready(Err(e)) => Err(refusal(&e, *max)),
                    Poll::Pending => {
                        // A body sent with its head (every SDK's request) is whole at the first
                        // look: no timer is made for it (a clock read and a timer entry per
                        // request). Any other body is read against the timeout from here.
                        let t = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(*timeout)));
                        if t.as_mut().poll(cx).is_pending() {
                            return Poll::Pending;
                        }
                        crate::access::rpc_error(INVALID_REQUEST);
                        return Poll::Ready(Ok(crate::body::json(
                            StatusCode::REQUEST_TIMEOUT,
                            &json!({"jsonrpc":"2.0","id":null,"error":{"code":INVALID_REQUEST,"message":"Invalid Request: the body was not sent in time"}}),
                        )));
                    }
                },
            };
            match bytes {
                Ok((bytes, Some((parts, mut inner)))) => {
                    let fut = inner.call(Request::from_parts(parts, bytes));
                    state.set(State::Inner { fut });
                }
                // Polled again after its answer: nothing more to read.
                Ok((_, None)) => return Poll::Pending,
                Err(r) => return Poll::Ready(Ok(r)),
            }
        }
    }
}

/// The answer to a body that could not be read: too large, or broken off.
fn refusal(e: &BoxError, max: usize) -> Response {
    if e.downcast_ref::<http_body_util::LengthLimitError>()
        .is_some()
    {
        crate::access::rpc_error(INVALID_REQUEST);
        return crate::body::json(
            StatusCode::PAYLOAD_TOO_LARGE,
            &json!({"jsonrpc":"2.0","id":null,"error":{"code":INVALID_REQUEST,"message":format!("Invalid Request: the body exceeds {max} bytes")}}),
        );
    }
    crate::mcp::error_response(
        &Value::Null,
        &McpError::InvalidRequest("the body could not be read".into()),
    )
}
