//! The initialize-era revisions (2025-11-25, 2025-06-18, 2025-03-26) on the mount's endpoint,
//! beside 2026-07-28, chosen per request (MCP 2026-07-28 Versioning §Backward Compatibility
//! with Initialization-Based Versions):
//!
//! - a POST whose `MCP-Protocol-Version` is 2026-07-28, or whose body carries the 2026-07-28
//!   `_meta` protocol version, takes the modern path unchanged ([`claim`] says `None`);
//! - `initialize`, and any POST whose `MCP-Protocol-Version` names a served initialize-era
//!   revision, or that names no revision at all (2025-06-18 Basic Transports §Protocol Version
//!   Header: assume 2025-03-26), is served here.
//!
//! Nothing is kept per session on any replica: what the handshake negotiated travels in the
//! session id the client sends back (`session.rs`), every host call carries the caller's own
//! credential, and a task is the same run, under the same taskId, in either era.

mod call;
mod era;
mod follow;
mod inflight;
mod session;
mod tasks;

use std::borrow::Cow;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde_json::{json, Map, Value};

use super::elicit::effect_of;
use super::envelope::{legacy_request, scan_legacy, too_deep, LegacyScan};
use super::method::Method;
use super::{McpContext, McpError, McpRequest};
use crate::body::{empty, BoxAnswer, Response};
use crate::config::Config;
use futures_util::FutureExt as _;

use era::{answer_error, tasks_served, TASKS_REVISION, UNNAMED_REVISION};
pub use inflight::InFlight;

static MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// The body of a POST the initialize era claims, parsed; `None` for one the 2026-07-28 path
/// answers (also every body that is not JSON, or nests too deep: the modern path refuses it
/// exactly as before, whichever era sent it).
pub(super) fn claim(cfg: &Config, headers: &HeaderMap, bytes: &[u8]) -> Option<Claimed> {
    if cfg.mcp.legacy_revisions.is_empty() {
        return None;
    }
    if let Some(v) = headers.get(&MCP_PROTOCOL_VERSION) {
        let v = v.as_bytes();
        if !cfg.mcp.legacy_revisions.iter().any(|r| r.as_bytes() == v) {
            return None;
        }
    }
    if too_deep(bytes, cfg.limits.max_json_depth).is_some() {
        return None;
    }
    // The common message is read by the strict scanner, as a 2026-07-28 envelope is; any other
    // body as a `Value`, which answers its refusals.
    match scan_legacy(bytes) {
        Some(LegacyScan::Modern) => return None,
        Some(LegacyScan::Message(id, method, params)) => {
            return Some(Claimed::Scanned(Message {
                id,
                method: Some(method_name(&method)),
                params,
                rest: Map::new(),
            }))
        }
        None => {}
    }
    let body: Value = serde_json::from_slice(bytes).ok()?;
    let modern = |m: &Value| {
        m.get("params")
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(super::META_VERSION))
            .is_some()
    };
    let carries_modern_meta = match &body {
        Value::Array(items) => items.iter().any(modern),
        other => modern(other),
    };
    (!carries_modern_meta).then_some(Claimed::Parsed(body))
}

/// A body the initialize era claimed: read by the scanner, or as a `Value` still to be read
/// as a message.
pub(super) enum Claimed {
    Scanned(Message),
    Parsed(Value),
}

/// A method's name and its params, as the access line is named with them.
pub(super) type Named<'a> = (Cow<'static, str>, Option<&'a Map<String, Value>>);

impl Claimed {
    /// The method and params the access line is named with, when the body names a method.
    pub(super) fn named(&self) -> Option<Named<'_>> {
        match self {
            Claimed::Scanned(m) => m.method.clone().map(|n| (n, Some(&m.params))),
            Claimed::Parsed(v) => {
                let m = v.get("method").and_then(Value::as_str)?;
                Some((method_name(m), v.get("params").and_then(Value::as_object)))
            }
        }
    }
}

/// The mount's own text for a method name it knows: no copy per request.
fn method_name(m: &str) -> Cow<'static, str> {
    match Method::from_name(m) {
        Some(k) => Cow::Borrowed(k.name()),
        None => match m {
            "initialize" => Cow::Borrowed("initialize"),
            other => Cow::Owned(other.to_string()),
        },
    }
}

/// Serves one POST of the initialize era. The message is read and the request built before
/// anything is boxed, and a task poll (the era's common request) is boxed alone: one `async`
/// function for the whole POST was a 3,448-byte box, past the 1,032 bytes glibc's per-thread
/// cache serves, so every poll allocated it under the allocator's arena lock.
pub(super) fn serve(ctx: Arc<McpContext>, headers: HeaderMap, body: Claimed) -> BoxAnswer {
    let call = match prepare(&ctx, &headers, body) {
        Prepared::Done(r) => return Box::pin(std::future::ready(Ok(r))),
        Prepared::FromClient(id, msg) => {
            return Box::pin(
                async move { Ok(response_from_client(&ctx, &headers, id, &msg).await) },
            )
        }
        Prepared::Poll(req) => {
            crate::body::recycle_headers(headers);
            return crate::body::per_request(tasks::serve(ctx, req).map(Ok));
        }
        Prepared::Call(call) => call,
    };
    // Read: the map goes to the next answer this thread builds (src/body.rs).
    crate::body::recycle_headers(headers);
    Box::pin(answer(ctx, call).map(Ok))
}

/// What [`prepare`] made of a POST.
#[allow(
    clippy::large_enum_variant,
    reason = "made once per POST and taken apart at once; a box would be one more allocation per poll"
)]
enum Prepared {
    /// Answered without a handler: a refusal, or a notification's `202`.
    Done(Response),
    /// A response from the client (no method): its id and the rest of the message.
    FromClient(Value, Map<String, Value>),
    /// A task method of a revision that serves Tasks, its request boxed as the 2026-07-28
    /// dispatch takes it.
    Poll(Box<McpRequest>),
    Call(Call),
}

/// A request of the era, ready for its handler.
struct Call {
    req: McpRequest,
    id: Value,
    method: Cow<'static, str>,
    revision: String,
    session_id: Option<String>,
}

/// The message read, its request built with the revision and capabilities its header or
/// session carries; a notification handled here.
fn prepare(ctx: &McpContext, headers: &HeaderMap, body: Claimed) -> Prepared {
    let header_revision = headers
        .get(&MCP_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok());
    let Message {
        id,
        method,
        params,
        rest: msg,
    } = match body {
        Claimed::Scanned(m) => m,
        Claimed::Parsed(v) => match Message::read(v) {
            Ok(m) => m,
            Err(refused) => return Prepared::Done(refused),
        },
    };
    let Some(method) = method else {
        // A response from the client: the answer to an elicitation this mount sent
        // (2025-11-25 Basic Transports §Sending Messages to the Server: 202 for a response).
        return match id {
            Some(id) => Prepared::FromClient(id, msg),
            None => Prepared::Done(transport_error(
                StatusCode::BAD_REQUEST,
                &McpError::InvalidRequest("method must be a string".into()),
            )),
        };
    };
    let mut req = legacy_request(
        &ctx.cfg,
        headers,
        id.clone().unwrap_or(Value::Null),
        &method,
        params,
        no_capabilities(),
    );
    let session_id = headers.get(&MCP_SESSION_ID).and_then(|v| v.to_str().ok());
    // Opened only where it tells something the request does not: the revision of a request
    // without the header, the capabilities a call or a result stream may ask with. A task
    // poll carries its revision and needs no capability (two HMACs fewer on the hot path).
    let needs_session =
        header_revision.is_none() || matches!(method.as_ref(), "tools/call" | "tasks/result");
    let session = session_id
        .filter(|_| needs_session)
        .and_then(|t| session::open(&ctx.state_key, &req.caller, t));
    // Borrowed from the headers until a handler other than the poll needs them owned: a poll
    // builds neither string.
    let revision: Cow<'_, str> = match (header_revision, &session) {
        (Some(r), _) => Cow::Borrowed(r),
        (None, Some(s)) => Cow::Owned(s.revision.clone()),
        (None, None) => Cow::Borrowed(UNNAMED_REVISION),
    };
    if let Some(s) = session {
        req.caps = s.caps;
    }
    let Some(id) = id else {
        notification(ctx, &req, session_id);
        return Prepared::Done(accepted());
    };
    let poll = matches!(
        method.as_ref(),
        "tasks/get" | "tasks/result" | "tasks/cancel"
    );
    if poll && tasks_served(ctx, &revision) {
        return Prepared::Poll(Box::new(req));
    }
    Prepared::Call(Call {
        req,
        id,
        method,
        revision: revision.into_owned(),
        session_id: session_id.map(str::to_string),
    })
}

/// Every method but a task poll: its handler, and the JSON-RPC answer.
async fn answer(ctx: Arc<McpContext>, call: Call) -> Response {
    let Call {
        req,
        id,
        method,
        revision,
        session_id,
    } = call;
    let label = super::method::metric_of(req.known);
    let res = match method.as_ref() {
        // Boxed, as the 2026-07-28 dispatch boxes its big handlers: the catalog's lookup is a
        // 4 kB future, and inline it would make every request's future a block above the
        // allocator's per-thread cache (docs/benchmarks.md).
        "initialize" => Box::pin(initialize(&ctx, &req)).await,
        "ping" => Ok(result(json!({}))),
        // 2025-11-25 Server Utilities Logging: the level is accepted; the mount has no log
        // messages of its own for a client (a run's log stays on the host).
        "logging/setLevel" if req.str_param("level").is_some() => Ok(result(json!({}))),
        "tools/list" => Box::pin(tools_list(&ctx, &req, &revision)).await,
        "tools/call" => return Box::pin(call::call(ctx, req, revision, session_id)).await,
        // A task method whose revision does not serve Tasks ([`serve`] took the others).
        other => Err(McpError::MethodNotFound(other.to_string())),
    };
    match res {
        Ok(Answer { result, session }) => {
            ctx.metrics.request(label, "ok");
            let mut r = crate::body::json(
                StatusCode::OK,
                &json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            );
            if let Some(s) = session.and_then(|s| HeaderValue::from_str(&s).ok()) {
                r.headers_mut().insert(MCP_SESSION_ID.clone(), s);
            }
            r
        }
        Err(e) => {
            ctx.metrics.request(label, e.label());
            answer_error(&id, &e)
        }
    }
}

/// One initialize-era JSON-RPC message, read from the POST's body: a request, a
/// notification, or a response from the client (no method).
pub(super) struct Message {
    id: Option<Value>,
    method: Option<Cow<'static, str>>,
    params: Map<String, Value>,
    /// What is left of the message: a response's `result` or `error`.
    rest: Map<String, Value>,
}

impl Message {
    /// The message, or the answer that refuses it.
    // The refusal is the mount's answer as it goes out, made once and never moved again.
    #[allow(clippy::result_large_err)]
    fn read(body: Value) -> Result<Message, Response> {
        let mut msg = match body {
            Value::Object(o) => o,
            // 2025-03-26 Basic §Batching allowed arrays; no client in use sends them and the
            // later revisions removed them (2025-06-18 changelog), so one message per POST.
            Value::Array(_) => {
                return Err(transport_error(
                    StatusCode::BAD_REQUEST,
                    &McpError::InvalidRequest(
                        "batches are not supported: send one JSON-RPC message per POST".into(),
                    ),
                ))
            }
            _ => {
                return Err(transport_error(
                    StatusCode::BAD_REQUEST,
                    &McpError::InvalidRequest("expected a JSON-RPC message object".into()),
                ))
            }
        };
        if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(transport_error(
                StatusCode::BAD_REQUEST,
                &McpError::InvalidRequest("jsonrpc must be \"2.0\"".into()),
            ));
        }
        let id = msg.remove("id");
        if let Some(i) = &id {
            if !(i.is_string() || i.is_i64() || i.is_u64()) {
                return Err(transport_error(
                    StatusCode::BAD_REQUEST,
                    &McpError::InvalidRequest("id must be a string or an integer".into()),
                ));
            }
        }
        let method = msg.get("method").and_then(Value::as_str).map(method_name);
        let params = match msg.remove("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p,
            Some(_) if method.is_some() && id.is_none() => Map::new(),
            Some(_) => {
                return Err(answer_error(
                    id.as_ref().unwrap_or(&Value::Null),
                    &McpError::InvalidParams("Invalid params: params must be an object".into()),
                ))
            }
        };
        Ok(Message {
            id,
            method,
            params,
            rest: msg,
        })
    }
}

/// The capabilities of a request whose session declared none (shared: one per process).
fn no_capabilities() -> Arc<Value> {
    static NONE: std::sync::OnceLock<Arc<Value>> = std::sync::OnceLock::new();
    NONE.get_or_init(|| Arc::new(json!({}))).clone()
}

/// A result, and the session id to send with it (only `initialize` mints one).
struct Answer {
    result: Value,
    session: Option<String>,
}

fn result(result: Value) -> Answer {
    Answer {
        result,
        session: None,
    }
}

/// `initialize` (2025-11-25 Basic Lifecycle §Initialization, §Version Negotiation): the
/// client's revision when it is served, else the newest served; the capabilities of that
/// revision; a session id carrying what later requests need of the handshake.
async fn initialize(ctx: &McpContext, req: &McpRequest) -> Result<Answer, McpError> {
    // Authorized like server/discover: the credential must be one the host accepts, so an
    // OAuth client is challenged (401) at its first request, before it thinks it connected.
    ctx.tools.tools_for(ctx, &req.caller).await?;
    let cfg = &ctx.cfg;
    let asked = req.str_param("protocolVersion").unwrap_or_default();
    let revision = cfg
        .mcp
        .legacy_revisions
        .iter()
        .find(|r| **r == asked)
        .or(cfg.mcp.legacy_revisions.first())
        .copied()
        .unwrap_or(TASKS_REVISION);
    let mut caps = json!({ "tools": { "listChanged": false }, "logging": {} });
    if cfg.tasks.enabled && revision == TASKS_REVISION {
        // 2025-11-25 Basic Utilities Tasks §Server Capabilities: `tasks/list` is not offered
        // (a run API lists no caller's runs), so `list` is absent.
        caps["tasks"] = json!({ "cancel": {}, "requests": { "tools": { "call": {} } } });
    }
    let client_caps = req.params.get("capabilities").cloned().unwrap_or(json!({}));
    let session = session::mint(&ctx.state_key, &req.caller, revision, &client_caps);
    Ok(Answer {
        result: json!({
            "protocolVersion": revision,
            "capabilities": caps,
            "serverInfo": super::server_info(cfg),
            "instructions": cfg.mcp.instructions.as_deref().unwrap_or("Starts and tracks OpenWOP workflow runs. Long runs can be called as tasks (2025-11-25) and followed with tasks/get and tasks/result."),
        }),
        session: Some(session),
    })
}

/// `tools/list` in the shape of `revision` (2025-11-25 Server Tools §Tool): no `resultType`
/// or cache hints; `execution.taskSupport` from the same knowledge that decides the modern
/// answer mode (2025-11-25 only); `outputSchema` and `title` from 2025-06-18 on.
async fn tools_list(
    ctx: &McpContext,
    req: &McpRequest,
    revision: &str,
) -> Result<Answer, McpError> {
    if req.params.get("cursor").is_some_and(|c| !c.is_null()) {
        return Err(McpError::InvalidParams(
            "Invalid params: unknown cursor (the list has one page)".into(),
        ));
    }
    let set = ctx.tools.tools_for(ctx, &req.caller).await?;
    let tasks = tasks_served(ctx, revision);
    let structured = revision != UNNAMED_REVISION;
    let tools: Vec<Value> = set
        .sorted
        .iter()
        .map(|wire| {
            let mut t = wire.clone();
            let Some(o) = t.as_object_mut() else {
                return t;
            };
            o.remove("execution");
            if !structured {
                o.remove("outputSchema");
                o.remove("title");
            }
            if tasks {
                let support = o
                    .get("name")
                    .and_then(Value::as_str)
                    .and_then(|n| set.by_name.get(n))
                    .map(|d| d.task);
                if let Some(s) = support {
                    o.insert(
                        "execution".into(),
                        json!({ "taskSupport": call::task_support_name(s) }),
                    );
                }
            }
            t
        })
        .collect();
    Ok(result(json!({ "tools": tools })))
}

/// A notification: `notifications/cancelled` naming a request in flight on this replica
/// cancels its run (RFC 0198 §G.12; 2025-11-25 Basic Utilities Cancellation); every other one
/// (`notifications/initialized`, progress, roots) needs nothing of a stateless mount.
fn notification(ctx: &McpContext, req: &McpRequest, session: Option<&str>) {
    if req.method == "notifications/cancelled" {
        if let Some(id) = req.params.get("requestId") {
            ctx.in_flight.cancel(&req.caller, session, id);
        }
    }
}

/// The client's answer to an `elicitation/create` this mount sent: the interrupt its id
/// names is resolved, once (the same resolve path as `tasks/update`), on whichever replica
/// the POST reached; the stream that asked sees the run move on. Always `202`: the client
/// expects nothing back (2025-11-25 Basic Transports §Sending Messages to the Server), and a
/// late, repeated or foreign answer resolves nothing.
async fn response_from_client(
    ctx: &McpContext,
    headers: &HeaderMap,
    id: Value,
    msg: &Map<String, Value>,
) -> Response {
    let Some(id_str) = id.as_str() else {
        return accepted();
    };
    let req = legacy_request(
        &ctx.cfg,
        headers,
        id.clone(),
        "",
        Map::new(),
        Arc::new(json!({})),
    );
    let Some(asked) = session::asked(&ctx.state_key, &req.caller, id_str) else {
        return accepted();
    };
    // A JSON-RPC error answer (the client refused the request) cancels nothing: the run keeps
    // waiting, and the stream that asked goes on following it.
    let Some(answer) = msg.get("result") else {
        return accepted();
    };
    if let Err(e) = answer_interrupt(ctx, &req, &asked.run_id, &asked.interrupt_id, answer).await {
        tracing::debug!(run_id = %asked.run_id, error = ?e, "an elicitation answer resolved nothing");
    }
    accepted()
}

/// Resolves `interrupt_id` of `run_id` with an ElicitResult, as `tasks/update` would.
async fn answer_interrupt(
    ctx: &McpContext,
    req: &McpRequest,
    run_id: &str,
    interrupt_id: &str,
    answer: &Value,
) -> Result<(), McpError> {
    let run = ctx
        .host
        .get_run(&req.caller, run_id)
        .await
        .map_err(|e| McpError::from_host_task_read(&e))?;
    if !run.status.awaits_client() {
        return Ok(());
    }
    let (open, _) = super::follow::open_now(ctx, &req.caller, &run)
        .await
        .map_err(|e| McpError::from_host_task_read(&e))?;
    let Some(i) = open.iter().find(|i| i.interrupt_id == interrupt_id) else {
        return Ok(());
    };
    let effect = effect_of(i, answer).map_err(McpError::InvalidParams)?;
    let outcome = match effect {
        super::elicit::Effect::Resolve(resume) => {
            super::resolve::resolve(ctx, &req.caller, run_id, i, &resume, answer)
                .await
                .map(|_| ())
        }
        super::elicit::Effect::CancelRun => ctx
            .host
            .cancel_run(&req.caller, run_id, Some("mcp-elicitation-cancelled"))
            .await
            .map(|_| ()),
    };
    outcome.map_err(|e| McpError::from_host(&e))
}

fn accepted() -> Response {
    let mut r = http::Response::new(empty());
    *r.status_mut() = StatusCode::ACCEPTED;
    r
}

/// A message that is not one JSON-RPC message at all: HTTP 400 with an id-less error
/// (2025-11-25 Basic Transports §Sending Messages to the Server 4).
fn transport_error(status: StatusCode, e: &McpError) -> Response {
    crate::body::json(status, &super::respond::envelope_error(&Value::Null, e))
}

#[cfg(test)]
mod scan_tests;
