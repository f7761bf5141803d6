//! Panic isolation: a panic while a request's answer is made (in a layer's `call` or while its
//! future is polled) is answered with a 500 on the connection it came on, instead of
//! unwinding the connection's task and dropping every request on it. What the request owned
//! is dropped as the panic unwinds, so a run it owned is cancelled as for any request that
//! ends unanswered (RFC 0198 §G.12). A panic while an answer's body streams is not caught
//! here: the head is already sent, and only closing the stream can tell the client.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Request;
use tower::{Layer, Service};

use super::answer::Answer;
use crate::body::Response;

/// See the module. `answer` makes the 500 (the mount's is a JSON-RPC error, the
/// passthrough's an OpenWOP one).
#[derive(Clone, Copy, Debug)]
pub struct CatchPanicLayer {
    answer: fn() -> Response,
}

impl CatchPanicLayer {
    pub fn new(answer: fn() -> Response) -> CatchPanicLayer {
        CatchPanicLayer { answer }
    }
}

impl<S> Layer<S> for CatchPanicLayer {
    type Service = CatchPanic<S>;

    fn layer(&self, inner: S) -> CatchPanic<S> {
        CatchPanic {
            inner,
            answer: self.answer,
        }
    }
}

/// See the module.
#[derive(Clone, Debug)]
pub struct CatchPanic<S> {
    inner: S,
    answer: fn() -> Response,
}

impl<S, B> Service<Request<B>> for CatchPanic<S>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Caught<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), std::convert::Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Caught<S::Future> {
        let answer = self.answer;
        match catch_unwind(AssertUnwindSafe(|| self.inner.call(req))) {
            Ok(fut) => Caught {
                fut: Some(fut),
                answer,
            },
            Err(panic) => {
                report(&*panic);
                Caught { fut: None, answer }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`CatchPanic`]: the inner future, polled inside `catch_unwind`.
    pub struct Caught<F> {
        #[pin]
        fut: Option<F>,
        answer: fn() -> Response,
    }
}

impl<F: Future<Output = Answer>> Future for Caught<F> {
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        let mut this = self.project();
        let Some(fut) = this.fut.as_mut().as_pin_mut() else {
            return Poll::Ready(Ok((this.answer)()));
        };
        match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(p) => p,
            Err(panic) => {
                report(&*panic);
                // What the request held is released now, not when the connection ends.
                this.fut.set(None);
                Poll::Ready(Ok((this.answer)()))
            }
        }
    }
}

fn report(panic: &(dyn Any + Send)) {
    let what = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    tracing::error!(panic = what, "a request's handler panicked; answered 500");
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    fn answer() -> Response {
        let mut r = http::Response::new(crate::body::full("caught"));
        *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        r
    }

    #[tokio::test]
    async fn a_handler_that_panics_is_answered_500() {
        // Panicking in `call`.
        let svc = CatchPanicLayer::new(answer).layer(tower::service_fn(
            |_: Request<()>| -> std::future::Ready<Answer> { panic!("in call") },
        ));
        let r = svc.oneshot(Request::new(())).await.unwrap();
        assert_eq!(r.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
        // Panicking while its future is polled, after a first pending poll.
        let svc = CatchPanicLayer::new(answer).layer(tower::service_fn(|_: Request<()>| async {
            tokio::task::yield_now().await;
            if true {
                panic!("in the future");
            }
            Ok::<_, std::convert::Infallible>(http::Response::new(crate::body::empty()))
        }));
        let r = svc.oneshot(Request::new(())).await.unwrap();
        assert_eq!(r.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
    }

    /// Over a real connection: the panicking request is answered 500 and the connection
    /// serves the next request, where an unwinding handler would have closed it.
    #[tokio::test]
    async fn a_panicking_handler_leaves_its_connection_serving() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Served on this task (not spawned): the server's future need not be `Send`.
        let server = async move {
            let (stream, _) = listener.accept().await.unwrap();
            let svc = hyper::service::service_fn(|req: Request<hyper::body::Incoming>| {
                let inner = tower::service_fn(|req: Request<hyper::body::Incoming>| async move {
                    if req.uri().path() == "/panic" {
                        panic!("a handler's bug");
                    }
                    Ok::<_, std::convert::Infallible>(http::Response::new(crate::body::full("ok")))
                });
                CatchPanicLayer::new(answer).layer(inner).oneshot(req)
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, svc)
                .await;
        };
        let client = async move {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (mut send, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            let get = |path: &str| {
                http::Request::get(path)
                    .header(http::header::HOST, "test")
                    .body(crate::body::empty())
                    .unwrap()
            };
            let r = send.send_request(get("/panic")).await.unwrap();
            assert_eq!(r.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
            drop(r);
            send.ready().await.unwrap();
            let r = send.send_request(get("/fine")).await.unwrap();
            assert_eq!(r.status(), http::StatusCode::OK);
        };
        tokio::select! {
            _ = server => panic!("the connection ended before the client's second answer"),
            _ = client => {}
        }
    }
}
