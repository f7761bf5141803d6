//! Routing: the admin paths (`/healthz`, `/readyz`, `/metrics`) first, then the request path
//! of src/stack/ (panic isolation, load shedding) in front of the MCP mount,
//! `/.well-known/openwop` (augmented for an OpenWOP host), the protected-resource metadata and
//! everything else passed through to the host.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use tower::{Service, ServiceBuilder, ServiceExt as _};

use super::AppState;
use crate::body::{full, Response};
use crate::mcp::McpError;
use crate::stack::{BoxAnswer, CatchPanicLayer, Refusal, ShedLayer};

/// Routes one request.
pub(super) async fn route(
    state: Arc<AppState>,
    mut req: Request<Incoming>,
    peer: SocketAddr,
) -> Response {
    // HTTP/2 carries the host in `:authority`, not in a Host header; give every consumer (the
    // Host allow-list, serverUrls, X-Forwarded-Host) one place to read it.
    if !req.headers().contains_key(http::header::HOST) {
        if let Some(v) = req
            .uri()
            .authority()
            .and_then(|a| http::HeaderValue::from_str(a.as_str()).ok())
        {
            req.headers_mut().insert(http::header::HOST, v);
        }
    }
    let path = req.uri().path();
    // Health and metrics answer even when shedding, so probes see the truth. Any other
    // method on these paths is the host's, like every path the sidecar does not serve.
    if req.method() == Method::GET && matches!(path, "/healthz" | "/readyz" | "/metrics") {
        return admin(&state, path).await;
    }
    let mount = path == state.cfg.mount.path;
    let permits = state.requests.clone();
    let metrics = state.mcp.metrics.clone();
    let stack = ServiceBuilder::new()
        .layer(CatchPanicLayer::new(if mount {
            panicked_mount
        } else {
            panicked
        }))
        .layer(ShedLayer::new(permits, Shedding { metrics, mount }))
        .service(Paths {
            state: &state,
            peer,
            mount,
        });
    match stack.oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// The router's branches below the shedding: the mount stack, or one of the host's paths.
/// It borrows the generation the request pinned (held by the route's future), so a branch's
/// box holds only its own future.
struct Paths<'a> {
    state: &'a AppState,
    peer: SocketAddr,
    mount: bool,
}

/// A branch's answer, borrowing the generation.
type Branch<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Response, Infallible>> + Send + 'a>>;

impl<'a> Service<Request<Incoming>> for Paths<'a> {
    type Response = Response;
    type Error = Infallible;
    type Future = Branch<'a>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Branch<'a> {
        use futures_util::FutureExt as _;
        let state = self.state;
        if self.mount {
            // The mount stack's own boundary box (its access line) is this branch's.
            let fut: BoxAnswer = crate::stack::mount(state.mcp.clone()).call(req);
            return fut;
        }
        let peer = Some(self.peer);
        // Each branch's future is boxed on its own (a stack boundary): inline, every
        // request's future would be as large as the largest branch.
        match (req.method(), req.uri().path()) {
            // Augmented only for an OpenWOP host (`host.augmentDiscovery`, src/config/wire.rs);
            // otherwise the path is the host's like any other, passed through untouched.
            (&Method::GET | &Method::HEAD, "/.well-known/openwop")
                if state.cfg.mapping.wire.augment_discovery =>
            {
                Box::pin(crate::discovery::serve(&state.cfg, &state.proxy, req, peer).map(Ok))
            }
            (&Method::GET | &Method::HEAD, p) if crate::auth::is_metadata_path(&state.cfg, p) => {
                Box::pin(crate::auth::serve_metadata(&state.cfg, &state.proxy, req, peer).map(Ok))
            }
            _ => crate::body::per_request(
                state
                    .proxy
                    .forward_observed(
                        req,
                        peer,
                        &state.mcp.metrics,
                        state.cfg.logging.access_paths,
                    )
                    .map(Ok),
            ),
        }
    }
}

/// The admin paths, outside the request path's layers.
async fn admin(state: &AppState, path: &str) -> Response {
    match path {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        // Lame duck: not ready, so balancers stop sending here, while everything else is still
        // served (docs/operations.md).
        "/readyz" if *state.lame_duck.borrow() => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting down: finish what you sent, send new requests elsewhere\n",
        ),
        // Boxed: the readiness probe's future is 2.4 kB, and this one is inline in every
        // request's route future.
        "/readyz" => {
            if Box::pin(state.mcp.host.ready(state.cfg.upstream.ready_timeout)).await {
                text(StatusCode::OK, "ready\n")
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!(
                        "the host did not answer {} (host.readiness)\n",
                        state.mcp.host.readiness_route()
                    ),
                )
            }
        }
        _ => {
            let mut r = text(StatusCode::OK, &state.mcp.metrics.render());
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            r
        }
    }
}

/// A mount request whose handler panicked: HTTP 500 with a JSON-RPC internal error (null id:
/// the request's id may not have been read), the connection kept (src/stack/catch_panic.rs).
fn panicked_mount() -> Response {
    crate::body::json(
        StatusCode::INTERNAL_SERVER_ERROR,
        &serde_json::json!({"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}),
    )
}

/// Any other request whose handler panicked: an OpenWOP error envelope.
fn panicked() -> Response {
    crate::body::openwop_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "sidecar_internal",
        "the sidecar failed while answering; the request may be retried",
    )
}

/// A request over `limits.maxConcurrentRequests`: counted, and answered [`shed`].
#[derive(Clone)]
struct Shedding {
    metrics: crate::telemetry::Metrics,
    mount: bool,
}

impl Refusal for Shedding {
    fn refuse(&self) -> Response {
        self.metrics
            .request(crate::telemetry::MethodLabel::UNREAD, "shed");
        shed(self.mount)
    }
}

/// 503 with Retry-After: the sidecar is at its configured concurrency. The mount
/// answers its own way ([`McpError::Overloaded`]); everything else gets an OpenWOP error.
fn shed(mcp: bool) -> Response {
    if mcp {
        return crate::mcp::error_response(&serde_json::Value::Null, &McpError::Overloaded);
    }
    let mut r = crate::body::openwop_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "sidecar_overloaded",
        "the sidecar is at capacity; retry later",
    );
    r.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    r
}

fn text(status: StatusCode, s: &str) -> Response {
    let mut r = http::Response::new(full(s.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
