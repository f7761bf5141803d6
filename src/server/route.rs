//! Routing: the MCP mount, `/.well-known/openwop` (augmented for an OpenWOP host), the protected-resource
//! metadata, the admin paths (`/healthz`, `/readyz`, `/metrics`) and everything else passed
//! through to the host; the request gate (load shedding) in front of all but the admin paths.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;

use super::AppState;
use crate::body::{full, Response};
use crate::mcp::McpError;

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
    // Health and metrics answer even when shedding, so probes see the truth.
    let admin = matches!(path, "/healthz" | "/readyz" | "/metrics");
    let _permit = if admin {
        None
    } else {
        match state.requests.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                state
                    .mcp
                    .metrics
                    .request(crate::telemetry::MethodLabel::UNREAD, "shed");
                return shed(path == state.cfg.mount.path);
            }
        }
    };
    if path == state.cfg.mount.path {
        // Login discovery (src/auth.rs): the challenge of a 401 (or 403 insufficient_scope)
        // points to the protected-resource metadata; a no-op while `auth` is off.
        let host = req.headers().get(http::header::HOST).cloned();
        // Boxed: the mount's future is kilobytes; inline, every request's route future (the
        // passthrough's too) was that size, copied whole when listen.rs boxed it (issue 21).
        let resp = Box::pin(crate::mcp::handle(state.mcp.clone(), req)).await;
        return crate::auth::challenge(&state.cfg, host.as_ref(), resp);
    }
    match (req.method(), path) {
        (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
        // Lame duck: not ready, so balancers stop sending here, while everything else is still
        // served (issue 20).
        (&Method::GET, "/readyz") if *state.lame_duck.borrow() => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting down: finish what you sent, send new requests elsewhere\n",
        ),
        // The rare routes' futures are boxed (the readiness probe's is 2.4 kB): inline, every
        // request's route future is as large as the largest, and it is allocated and moved
        // whole per request (listen.rs boxes it; issue 21).
        (&Method::GET, "/readyz") => {
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
        (&Method::GET, "/metrics") => {
            let mut r = text(StatusCode::OK, &state.mcp.metrics.render());
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            r
        }
        // Augmented only for an OpenWOP host (`host.augmentDiscovery`, src/config/wire.rs);
        // otherwise the path is the host's like any other, passed through untouched.
        (&Method::GET | &Method::HEAD, "/.well-known/openwop")
            if state.cfg.mapping.wire.augment_discovery =>
        {
            Box::pin(crate::discovery::serve(
                &state.cfg,
                &state.proxy,
                req,
                Some(peer),
            ))
            .await
        }
        (&Method::GET | &Method::HEAD, p) if crate::auth::is_metadata_path(&state.cfg, p) => {
            Box::pin(crate::auth::serve_metadata(
                &state.cfg,
                &state.proxy,
                req,
                Some(peer),
            ))
            .await
        }
        // Boxed too: then the route future, which listen.rs allocates per request, stays
        // small enough for the allocator's per-thread cache (about 1 kB for glibc's tcache),
        // and so does this one (issue 21).
        _ => {
            Box::pin(state.proxy.forward_observed(
                req,
                Some(peer),
                &state.mcp.metrics,
                state.cfg.logging.access_paths,
            ))
            .await
        }
    }
}

/// 503 with Retry-After: the sidecar is at its configured concurrency (issue 10). The mount
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
