//! The mount's gate: what is refused from the request's head alone, before its body is read.
//! MCP 2026-07-28 Transports §Streamable HTTP: a 2026-07-28-only server answers anything but
//! POST with 405; the Host and Origin checks (DNS-rebinding protection, src/mcp/origin.rs);
//! with `auth.requireToken`, a request without `Authorization` is refused before any host
//! call (src/auth.rs), after the Origin check so that a foreign Origin stays a 403. Every
//! answer of the mount, refused here or not, then gets the login challenge of a 401 (or a 403
//! insufficient_scope) pointing to the protected-resource metadata (RFC 9728 §5.1).
//!
//! Two layers: [`Refuse`] is tower-http's `ValidateRequestHeader` with the mount's own
//! refusals (the 405 with its `Allow`, the JSON-RPC errors), and [`Challenge`], outside it,
//! adds the challenge to whatever comes back.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, StatusCode};
use tower::{Layer, Service};
use tower_http::validate_request::ValidateRequest;

use super::answer::Answer;
use crate::body::{empty, Body, Response};
use crate::config::Config;
use crate::mcp::McpContext;
use crate::telemetry::MethodLabel;

/// The refusals of the gate, as tower-http's `ValidateRequestHeaderLayer::custom` validator
/// (see the module).
#[derive(Clone)]
pub struct Refuse {
    ctx: Arc<McpContext>,
}

impl Refuse {
    pub fn new(ctx: Arc<McpContext>) -> Refuse {
        Refuse { ctx }
    }
}

impl<B> ValidateRequest<B> for Refuse {
    type ResponseBody = Body;

    fn validate(&mut self, req: &mut Request<B>) -> Result<(), Response> {
        let cfg = &self.ctx.cfg;
        if req.method() != http::Method::POST {
            let mut r = http::Response::new(empty());
            *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            r.headers_mut()
                .insert(http::header::ALLOW, HeaderValue::from_static("POST"));
            return Err(r);
        }
        if let Err(e) = crate::mcp::check_origin(cfg, req.headers()) {
            self.ctx.metrics.request(MethodLabel::UNREAD, e.label());
            return Err(crate::mcp::error_response(&serde_json::Value::Null, &e));
        }
        if let Some(refused) = crate::auth::refuse_unauthenticated(cfg, req) {
            self.ctx
                .metrics
                .request(MethodLabel::UNREAD, "unauthorized");
            return Err(refused);
        }
        Ok(())
    }
}

/// See the module: the login challenge on every answer of the layers inside it, when `auth`
/// is configured.
#[derive(Clone)]
pub struct ChallengeLayer {
    /// `None` without `auth`: nothing is copied per request then.
    cfg: Option<Arc<Config>>,
}

impl ChallengeLayer {
    pub fn new(cfg: &Arc<Config>) -> ChallengeLayer {
        ChallengeLayer {
            cfg: cfg.auth.is_some().then(|| cfg.clone()),
        }
    }
}

impl<S> Layer<S> for ChallengeLayer {
    type Service = Challenge<S>;

    fn layer(&self, inner: S) -> Challenge<S> {
        Challenge {
            cfg: self.cfg.clone(),
            inner,
        }
    }
}

/// See [`ChallengeLayer`].
#[derive(Clone)]
pub struct Challenge<S> {
    cfg: Option<Arc<Config>>,
    inner: S,
}

impl<S, B> Service<Request<B>> for Challenge<S>
where
    S: Service<Request<B>, Response = Response, Error = std::convert::Infallible>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Challenged<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), std::convert::Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The challenge needs the request's Host; a copy is made only while `auth` is on.
        let challenge = self.cfg.as_ref().map(|cfg| {
            let host = req.headers().get(http::header::HOST).cloned();
            (cfg.clone(), host)
        });
        Challenged {
            fut: self.inner.call(req),
            challenge,
        }
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
        Poll::Ready(Ok(match this.challenge.take() {
            Some((cfg, host)) => crate::auth::challenge(&cfg, host.as_ref(), resp),
            None => resp,
        }))
    }
}
