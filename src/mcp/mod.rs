//! The MCP 2026-07-28 server mount: a stateless streamable-HTTP endpoint that turns MCP
//! requests into the caller's own REST calls (RFC 0208 and RFC 0198, MCP 2026-07-28 Transports §Streamable HTTP; ext-tasks).

mod answer;
mod call;
mod catalog;
mod context;
mod create;
mod elicit;
mod envelope;
pub mod error;
mod follow;
mod legacy;
mod listen;
pub mod method;
mod mrtr;
mod origin;
mod params;
pub mod project;
mod request;
pub mod request_state;
mod resolve;
mod respond;
mod schema;
pub mod task_id;
mod tasks;
mod tools;
mod toolset;
pub mod watch;

use std::sync::Arc;

use futures_util::FutureExt as _;
use http::{HeaderMap, StatusCode};
use serde_json::{json, Map, Value};

use crate::body::{empty, BoxAnswer, Response};
use crate::config::Config;
use crate::telemetry::MethodLabel;
pub use context::{Lasting, McpContext};
#[doc(hidden)]
pub use envelope::parse_envelope_for_fuzz;
use envelope::{parse_envelope, Parsed};
pub use error::McpError;
use method::{Capability, Method};
pub use request::{
    server_info, McpRequest, META_CAPS, META_SERVER_INFO, META_SUBSCRIPTION, META_VERSION,
    TASKS_EXT,
};
pub use respond::{error_response, result_response};

/// Records the method (and the tool or task it names) on the request's access line
/// (src/stack/access_log.rs); a no-op outside the mount stack.
#[allow(
    clippy::ptr_arg,
    reason = "whether the name is borrowed (the mount's own) is what the line reads"
)]
fn name_line(method: &std::borrow::Cow<'static, str>, params: &Map<String, Value>) {
    crate::access::name(method, params);
}

/// `Ok` when the mount may serve a request with these headers (Host and Origin; the gate of
/// src/stack/gate.rs).
pub fn check_origin(cfg: &Config, headers: &HeaderMap) -> Result<(), McpError> {
    origin::check(cfg, headers)
}

/// Serves one mount request whose head passed the gate and whose body was read whole
/// (src/stack/): the era, the envelope, the method. The server and `openwop-mcp-sidecar
/// stdio` (src/stdio.rs) both reach it through the mount stack.
///
/// The envelope is read here, before anything is boxed, and only the method's own future is
/// boxed: a box of the whole `async` request (2,024 bytes: the head, the body and the
/// envelope's fields beside the method's future) was past the 1,032 bytes glibc's
/// per-thread cache serves, so every request took the arena lock to allocate and free it.
pub fn serve(ctx: Arc<McpContext>, headers: HeaderMap, bytes: bytes::Bytes) -> BoxAnswer {
    let cfg = &ctx.cfg;
    // MCP 2026-07-28 Versioning §Backward Compatibility with Initialization-Based Versions:
    // the era is decided per request (src/mcp/legacy); one header lookup for a 2026-07-28
    // request.
    if let Some(message) = legacy::claim(cfg, &headers, &bytes) {
        if let Some((name, params)) = message.named() {
            name_line(&name, params.unwrap_or(&Map::new()));
        }
        return legacy::serve(ctx, headers, message);
    }
    let parsed = parse_envelope(cfg, &headers, &bytes);
    // Read: the map goes to the next answer this thread builds (src/body.rs).
    crate::body::recycle_headers(headers);
    let mut parsed = match parsed {
        Ok(Parsed::Request(r)) => {
            name_line(&r.method, &r.params);
            // Kept boxed: the request is a kilobyte, and the futures it travels into are moved
            // (copied whole) on their way to the connection.
            r
        }
        Ok(Parsed::Notification) => {
            let mut r = http::Response::new(empty());
            *r.status_mut() = StatusCode::ACCEPTED;
            return now(r);
        }
        Ok(Parsed::TooDeep(depth)) => {
            return now(error_response(
                &Value::Null,
                &McpError::InvalidRequest(format!("JSON nesting deeper than {depth} levels")),
            ));
        }
        Err(b) => {
            let (id, e) = *b;
            ctx.metrics.request(MethodLabel::UNREAD, e.label());
            return now(error_response(&id, &e));
        }
    };
    // One span per MCP request; the W3C trace context (from `_meta` or the HTTP header,
    // RFC 0207) is recorded here and continues into every upstream call via `Caller`. A task
    // poll (one host call, polled every few seconds by every client with a task) enters it
    // only when spans are exported or `debug` lines are on; otherwise it keeps the span's
    // fields and a `warn` line of the host call opens the span itself
    // (`access::spans_needed`).
    let fields = crate::access::SpanFields {
        method: crate::access::method_label(&parsed.method),
        rpc_id: parsed.id.clone(),
        traceparent: parsed.caller.traceparent.clone(),
    };
    let poll = matches!(
        parsed.known,
        Some(Method::TasksGet | Method::TasksUpdate | Method::TasksCancel)
    );
    if poll && !crate::access::spans_needed() {
        crate::access::keep_span_fields(fields);
        return crate::body::per_request(dispatch(ctx, parsed).map(Ok));
    }
    let span = fields.span();
    // With OTLP export on, the span joins the caller's trace and the host is told that this
    // span is its parent (W3C Trace Context §3.2), so the host's spans hang under an exported
    // span; with export off the caller's traceparent is relayed unchanged.
    if let Some(tp) = crate::otlp::continue_trace(
        &span,
        parsed.caller.traceparent.as_ref(),
        parsed.caller.tracestate.as_ref(),
    ) {
        parsed.caller.traceparent = Some(tp);
    }
    crate::body::per_request(tracing::Instrument::instrument(dispatch(ctx, parsed), span).map(Ok))
}

/// An answer known before any host call (a refusal, a notification's 202).
fn now(r: Response) -> BoxAnswer {
    Box::pin(std::future::ready(Ok(r)))
}

async fn dispatch(ctx: Arc<McpContext>, req: Box<McpRequest>) -> Response {
    let label = method::metric_of(req.known);
    let Some(method) = req.known else {
        // ext-tasks §Errors: like initialize, ping and every name this mount does not know.
        let e = McpError::MethodNotFound(req.method.to_string());
        ctx.metrics.request(label, e.label());
        return error_response(&req.id, &e);
    };
    let tasks_on = ctx.cfg.tasks.enabled;
    // Params are checked once the method exists and the capability it needs is declared
    // (-32601, then -32021, then -32602): a task method the mount does not serve, or one sent
    // without the Tasks extension, keeps its handler's answer.
    let checked = !method.of_tasks_extension() || (tasks_on && req.declares_tasks());
    if checked {
        if let Err(e) = params::check(method, &req) {
            ctx.metrics.request(label, e.label());
            return error_response(&req.id, &e);
        }
    }
    let not_found = || Err(McpError::MethodNotFound(req.method.to_string()));
    let res: Result<Response, McpError> = match method {
        // The big handlers are boxed so their state machines are not part of every request's
        // future, which is moved (copied whole) several times on its way to the connection
        // (tools/call with MRTR is kilobytes, the catalog's cache lookup 4 kB; a `tasks/get`
        // needs none of it).
        Method::ServerDiscover => Box::pin(discover(&ctx, &req)).await,
        Method::ToolsList => Box::pin(tools::list(&ctx, &req)).await,
        Method::ToolsCall => return Box::pin(call::call(ctx, *req)).await,
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel if !tasks_on => not_found(),
        Method::TasksGet => tasks::get(&ctx, &req).await,
        // Boxed too: inline, `tasks/update` (1.4 kB) and `tasks/cancel` (1 kB) made every
        // request's box larger than glibc's per-thread cache serves ([`serve`]).
        Method::TasksUpdate => crate::body::per_request(tasks::update(&ctx, &req)).await,
        Method::TasksCancel => crate::body::per_request(tasks::cancel(&ctx, &req)).await,
        Method::SubscriptionsListen => return Box::pin(listen::listen(ctx, *req)).await,
        // ext-tasks §Errors: tasks/result and tasks/list are removed → -32601; prompts and
        // resources are not offered.
        Method::PromptsGet | Method::ResourcesRead | Method::TasksResult | Method::TasksList => {
            not_found()
        }
    };
    match res {
        Ok(r) => {
            ctx.metrics.request(label, "ok");
            r
        }
        Err(e) => {
            ctx.metrics.request(label, e.label());
            error_response(&req.id, &e)
        }
    }
}

/// `server/discover` (MCP 2026-07-28 server/discover, RFC 0208, server/discover).
async fn discover(ctx: &McpContext, req: &McpRequest) -> Result<Response, McpError> {
    // The answer depends on nothing of the caller, but discovery is still authorized like any
    // mount request: the caller's credential must be one the host accepts (§3.1).
    ctx.tools.tools_for(ctx, &req.caller).await?;
    let cfg = &ctx.cfg;
    // Each capability once, in the order of the methods that serve it.
    let mut caps = Map::new();
    for m in Method::ALL {
        match m.capability() {
            Some(Capability::Tools) => {
                caps.entry("tools")
                    .or_insert_with(|| json!({ "listChanged": false }));
            }
            // ext-tasks 0.2.2 enables its 2026-07-28 mode only on exactly `{}` (MCP 2026-07-28 server/discover).
            Some(Capability::Tasks) if cfg.tasks.enabled => {
                caps.entry("extensions")
                    .or_insert_with(|| json!({ TASKS_EXT: {} }));
            }
            Some(Capability::Tasks) | None => {}
        }
    }
    let result = json!({
        "resultType": "complete",
        "supportedVersions": cfg.mcp.revisions,
        "capabilities": caps,
        "serverInfo": server_info(cfg),
        "instructions": cfg.mcp.instructions.as_deref().unwrap_or("Starts and tracks OpenWOP workflow runs. Long runs return a task handle when the client declares io.modelcontextprotocol/tasks."),
        "ttlMs": cfg.mcp.discover_ttl.as_millis() as u64,
        "cacheScope": "private",
    });
    Ok(result_response(cfg, &req.id, result))
}
