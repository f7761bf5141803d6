//! The HTTP request path as tower layers. The server (src/server/route.rs) answers the admin
//! paths (`/healthz`, `/readyz`, `/metrics`) first, so probes see the truth even when the
//! sidecar sheds; every other request goes through, outermost first:
//!
//! ```text
//! CatchPanic      a panic while the answer is made becomes a 500, not a dropped connection
//! Shed            limits.maxConcurrentRequests: a request over it is answered 503 at once
//! (router)        the mount path → the mount stack; anything else → discovery, the
//!                 protected-resource metadata or the passthrough (src/server/route.rs)
//!
//! the mount stack (also what `openwop-mcp-sidecar stdio` serves each line with):
//! AccessLog       the request's access line, its names and its host-call counter
//!                 (src/obs/access.rs)
//! Challenge       the login challenge on every answer of the mount (src/stack/gate.rs)
//! ValidateRequestHeader
//!                 tower-http, with the gate's refusals: 405 for anything but POST, the
//!                 Host/Origin check, a missing credential
//! ReadBody        limits.maxBodyBytes and limits.bodyReadTimeoutMs, the body read whole
//! Mount           the JSON-RPC envelope and its method (src/mcp), inside the request's
//!                 span and trace context (opened there: its fields are the JSON-RPC
//!                 method and id, known only once the body is parsed)
//! ```
//!
//! Every layer is always ready: shedding is decided in `call`, so a request never waits in
//! `poll_ready`, and a layer that refuses answers at once with the exact status, body and
//! headers the mount answered before it was a layer. Futures are boxed only at the stack's
//! boundaries: the connection's service future (src/server/listen.rs), each branch of the
//! router (the mount stack's access line, the passthrough) and the mount's handler; the
//! layers between them hold their inner future inline. The handler stays boxed: inline, the
//! body reader's state would hold it and move it (a copy of kilobytes) when the body is in,
//! which cost more than the box (docs/benchmarks.md).
//!
//! tower-http's request validator carries the gate's refusals: it answers with the mount's own
//! responses. Its CatchPanic, body limit and timeout layers are not used: they answer with
//! bodies of their own (plain text, an empty 408) where the mount answers JSON-RPC errors, and
//! CatchPanic boxes every answer's body a second time. Its `SetSensitiveRequestHeaders` is
//! not used either: three header lookups per request, about 440 instructions of every request
//! (docs/benchmarks.md), where no request is ever Debug-printed.

mod access_log;
mod answer;
mod catch_panic;
mod gate;
mod mount;
mod read_body;
mod shed;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::Request;
use tower::{Service, ServiceBuilder, ServiceExt as _};
use tower_http::validate_request::ValidateRequestHeaderLayer;

use crate::body::{BoxError, Response};
use crate::mcp::McpContext;
pub use access_log::{AccessLog, AccessLogLayer};
pub use answer::{Answer, BoxAnswer};
pub use catch_panic::{CatchPanic, CatchPanicLayer};
pub use gate::{Challenge, ChallengeLayer, Refuse};
pub use mount::Mount;
pub use read_body::{ReadBody, ReadBodyLayer};
pub use shed::{Refusal, Shed, ShedLayer};

/// The mount stack for one request: access line → gate → body read → mount.
pub fn mount<B>(
    ctx: Arc<McpContext>,
) -> impl Service<Request<B>, Response = Response, Error = Infallible, Future = BoxAnswer>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let limits = &ctx.cfg.limits;
    let read = ReadBodyLayer::new(limits.max_body_bytes, limits.body_read_timeout);
    ServiceBuilder::new()
        .layer(AccessLogLayer)
        .layer(ChallengeLayer::new(&ctx.cfg))
        .layer(ValidateRequestHeaderLayer::custom(Refuse::new(ctx.clone())))
        .layer(read)
        .service(Mount::new(ctx))
}

/// Serves one request on the mount: the server's mount path and each line of
/// `openwop-mcp-sidecar stdio` (src/stdio.rs), which passes the line as a whole body.
pub async fn serve_mount<B>(ctx: Arc<McpContext>, req: Request<B>) -> Response
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    match mount(ctx).oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}
