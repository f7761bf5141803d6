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

use http::{Request, StatusCode};
use http_body_util::Limited;
use serde_json::{json, Map, Value};

use crate::body::{empty, Response};
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

/// Entry point for every request on the mount path: the request, then its access line
/// (src/access.rs). The server passes hyper's `Incoming`; `openwop-mcp-sidecar stdio`
/// (src/stdio.rs) passes each line it read as a whole body, so both transports share the one
/// mount.
pub async fn handle<B>(ctx: Arc<McpContext>, req: Request<B>) -> Response
where
    B: http_body::Body<Data = bytes::Bytes>,
    B::Error: Into<crate::body::BoxError>,
{
    // The scope runs even without access lines: it also keeps the span fields a `warn` line
    // of the request is written under (`access::in_request`).
    let on = crate::access::enabled();
    let started = std::time::Instant::now();
    let mut names = crate::access::Names::new(on);
    let (resp, stats) = crate::access::scope(serve(ctx, req, &mut names)).await;
    if !on {
        return resp;
    }
    crate::access::log(names, resp, stats, started)
}

async fn serve<B>(
    ctx: Arc<McpContext>,
    req: Request<B>,
    names: &mut crate::access::Names,
) -> Response
where
    B: http_body::Body<Data = bytes::Bytes>,
    B::Error: Into<crate::body::BoxError>,
{
    let cfg = ctx.cfg.clone();
    if req.method() != http::Method::POST {
        // MCP 2026-07-28 Transports §Streamable HTTP: a 2026-07-28-only server answers GET and DELETE with 405.
        let mut r = http::Response::new(empty());
        *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        r.headers_mut()
            .insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
        return r;
    }
    if let Err(e) = origin::check(&cfg, req.headers()) {
        ctx.metrics.request(MethodLabel::UNREAD, e.label());
        return error_response(&Value::Null, &e);
    }
    // With `auth.requireToken`, no Authorization is refused here, before any host call
    // (src/auth.rs), but after the Host/Origin check: a foreign Origin stays a 403.
    if let Some(refused) = crate::auth::refuse_unauthenticated(&cfg, &req) {
        ctx.metrics.request(MethodLabel::UNREAD, "unauthorized");
        return refused;
    }
    // Only the head's fields are read; its target and extensions are dropped here, not
    // carried through the request's awaits.
    let (http::request::Parts { headers, .. }, body) = req.into_parts();
    let max = cfg.limits.max_body_bytes;
    let mut whole = std::pin::pin!(crate::body::whole(Limited::new(body, max)));
    // A body sent with its head (every SDK's request) is whole at the first look: no timer
    // is made for it (a clock read and the timer's entry, per request; issue 21). Any other
    // body is read against `limits.bodyReadTimeoutMs`; the look registered no waker of ours,
    // and the timed read polls the same future again with the task's own.
    let read = match futures_util::FutureExt::now_or_never(whole.as_mut()) {
        Some(done) => Ok(done),
        None => tokio::time::timeout(cfg.limits.body_read_timeout, whole).await,
    };
    let bytes = match read {
        Ok(Ok(b)) => b,
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            crate::access::rpc_error(error::INVALID_REQUEST);
            return crate::body::json(
                StatusCode::PAYLOAD_TOO_LARGE,
                &json!({"jsonrpc":"2.0","id":null,"error":{"code":error::INVALID_REQUEST,"message":format!("Invalid Request: the body exceeds {max} bytes")}}),
            );
        }
        Ok(Err(_)) => {
            return error_response(
                &Value::Null,
                &McpError::InvalidRequest("the body could not be read".into()),
            );
        }
        // A client that trickles its body cannot pin the request (issue 10).
        Err(_) => {
            crate::access::rpc_error(error::INVALID_REQUEST);
            return crate::body::json(
                StatusCode::REQUEST_TIMEOUT,
                &json!({"jsonrpc":"2.0","id":null,"error":{"code":error::INVALID_REQUEST,"message":"Invalid Request: the body was not sent in time"}}),
            );
        }
    };
    // MCP 2026-07-28 Versioning §Backward Compatibility with Initialization-Based Versions:
    // the era is decided per request (src/mcp/legacy); one header lookup for a 2026-07-28
    // request.
    if let Some(message) = legacy::claim(&cfg, &headers, &bytes) {
        if let Some(m) = message.get("method").and_then(Value::as_str) {
            let params = message.get("params").and_then(Value::as_object);
            let name = match Method::from_name(m) {
                Some(k) => std::borrow::Cow::Borrowed(k.name()),
                None => std::borrow::Cow::Owned(m.to_string()),
            };
            names.set(&name, params.unwrap_or(&Map::new()));
        }
        return Box::pin(legacy::serve(ctx, headers, message)).await;
    }
    let parsed = parse_envelope(&cfg, &headers, &bytes);
    // Read: the map goes to the next answer this thread builds (src/body.rs).
    crate::body::recycle_headers(headers);
    let mut parsed = match parsed {
        Ok(Parsed::Request(r)) => {
            names.set(&r.method, &r.params);
            // Kept boxed: the request is a kilobyte, and the futures it travels into are moved
            // (copied whole) on their way to the connection (issue 21).
            r
        }
        Ok(Parsed::Notification) => {
            let mut r = http::Response::new(empty());
            *r.status_mut() = StatusCode::ACCEPTED;
            return r;
        }
        Ok(Parsed::TooDeep(depth)) => {
            return error_response(
                &Value::Null,
                &McpError::InvalidRequest(format!("JSON nesting deeper than {depth} levels")),
            );
        }
        Err(b) => {
            let (id, e) = *b;
            ctx.metrics.request(MethodLabel::UNREAD, e.label());
            return error_response(&id, &e);
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
        return dispatch(ctx, parsed).await;
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
    tracing::Instrument::instrument(dispatch(ctx, parsed), span).await
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
        // needs none of it; issue 21).
        Method::ServerDiscover => Box::pin(discover(&ctx, &req)).await,
        Method::ToolsList => Box::pin(tools::list(&ctx, &req)).await,
        Method::ToolsCall => return Box::pin(call::call(ctx, *req)).await,
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel if !tasks_on => not_found(),
        Method::TasksGet => tasks::get(&ctx, &req).await,
        Method::TasksUpdate => tasks::update(&ctx, &req).await,
        Method::TasksCancel => tasks::cancel(&ctx, &req).await,
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
