//! The mount's gate: what is refused from the request's head alone, before its body is read.
//! MCP 2026-07-28 Transports §Streamable HTTP: a 2026-07-28-only server answers anything but
//! POST with 405; the Host and Origin checks (DNS-rebinding protection, src/mcp/origin.rs);
//! with `auth.requireToken`, a request without `Authorization` is refused before any host
//! call (src/auth.rs), after the Origin check so that a foreign Origin stays a 403. Every
//! answer of the mount, refused here or not, then gets the login challenge of a 401 (or a 403
//! insufficient_scope) pointing to the protected-resource metadata (RFC 9728 §5.1).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::{Either, Ready};
use http::{HeaderValue, Request, StatusCode};
use tower::{Layer, Service};

use super::answer::Answer;
use crate::body::{empty, Response};
use crate::config::Config;
use crate::mcp::McpContext;
use crate::telemetry::MethodLabel;

/// See the module.
#[derive(Clone)]
pub struct GateLayer {
    ctx: Arc<McpContext>,
}

impl GateLayer {
    pub fn new(ctx: Arc<McpContext>) -> GateLayer {
        GateLayer { ctx }
    }
}

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            ctx: self.ctx.clone(),
            inner,
        }
    }
}

/// See the module.
#[derive(Clone)]
pub struct Gate<S> {
    ctx: Arc<McpContext>,
    inner: S,
}

impl<S, B> Service<Request<B>> for Gate<S>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Either<Ready<Answer>, Challenged<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), std::convert::Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let cfg = &self.ctx.cfg;
        // The challenge needs the request's Host; a copy is made only while `auth` is on.
        let challenge = cfg.auth.is_some().then(|| {
            let host = req.headers().get(http::header::HOST).cloned();
            (cfg.clone(), host)
        });
        let refused = if req.method() != http::Method::POST {
            let mut r = http::Response::new(empty());
            *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            r.headers_mut()
                .insert(http::header::ALLOW, HeaderValue::from_static("POST"));
            Some(r)
        } else if let Err(e) = crate::mcp::check_origin(cfg, req.headers()) {
            self.ctx.metrics.request(MethodLabel::UNREAD, e.label());
            Some(crate::mcp::error_response(&serde_json::Value::Null, &e))
        } else if let Some(refused) = crate::auth::refuse_unauthenticated(cfg, &req) {
            self.ctx
                .metrics
                .request(MethodLabel::UNREAD, "unauthorized");
            Some(refused)
        } else {
            None
        };
        match refused {
            Some(r) => Either::Left(futures_util::future::ready(Ok(challenged(challenge, r)))),
            None => Either::Right(Challenged {
                fut: self.inner.call(req),
                challenge,
            }),
        }
    }
}

fn challenged(challenge: Option<(Arc<Config>, Option<HeaderValue>)>, resp: Response) -> Response {
    match challenge {
        Some((cfg, host)) => crate::auth::challenge(&cfg, host.as_ref(), resp),
        None => resp,
    }
}

pin_project_lite::pin_project! {
    /// The inner answer, with the login challenge added when `auth` is on.
    pub struct Challenged<F> {
        #[pin]
        fut: F,
        challenge: Option<(Arc<Config>, Option<HeaderValue>)>,
    }
}

impl<F: Future<Output = Answer>> Future for Challenged<F> {
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        let this = self.project();
        let resp = std::task::ready!(this.fut.poll(cx))?;
        Poll::Ready(Ok(challenged(this.challenge.take(), resp)))
    }
}
