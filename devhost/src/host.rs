// Over 700 lines: one handler per v2 route, all sharing the route table and its path decoding; the host state is state.rs, the other flavours live in their own files.
//! The OpenWOP REST surface (OpenWOP v2 api/v2/openapi.yaml): the v2 routes and handlers,
//! which also serve the legacy flavour's job API (legacy.rs).

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Method, Response, StatusCode};
use serde_json::{json, Map, Value};

use crate::api::{closed, json_object, ApiError, Body, Reply};
use crate::auth::{authenticate, Caller};
use crate::config::Flavor;
use crate::faults::RouteClass;
use crate::fixtures::Workflow;
use crate::idempotency::{fingerprint, idempotent};
use crate::runs::{self, NewRun, Run, RunStatus};
use crate::state::{
    faults_admin, run_from_path, start_run, Answer, Cursor, HostState, Req, MAX_PAGE,
};
use crate::tokens::{self, Claims};
use crate::util::{id_chars, lock, parse_query, random_token};
use crate::{sse, wire_id};

/// Routes of the v2 surface (bare paths, OpenWOP v2 headers.md and errors.md). Ids stay raw here;
/// they are decoded by the handlers so `%2F` survives routing (§2.2).
enum Route<'a> {
    Discovery,
    Workflow(&'a str),
    Tools,
    Tool(&'a str),
    Runs,
    Run(&'a str),
    Cancel(&'a str),
    Interrupt(&'a str, &'a str),
    InterruptToken(&'a str),
    Events(&'a str),
    Poll(&'a str),
    /// `/_devhost/faults`, the fault switches' admin endpoint (devhost only).
    Faults,
}

impl Route<'_> {
    fn allowed(&self, flavor: Flavor) -> &'static [Method] {
        match self {
            Route::Faults => &[Method::GET, Method::POST, Method::DELETE],
            Route::Runs => &[Method::GET, Method::POST],
            // The legacy API has no token minting: approvals are POST only.
            Route::Interrupt(..) if flavor == Flavor::Legacy => &[Method::POST],
            Route::Interrupt(..) | Route::InterruptToken(_) => &[Method::GET, Method::POST],
            Route::Cancel(_) => &[Method::POST],
            _ => &[Method::GET],
        }
    }
}

fn route(flavor: Flavor, path: &str) -> Option<Route<'_>> {
    let segs: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    let r = match flavor {
        Flavor::V2 => v2_route(&segs)?,
        Flavor::Legacy => legacy_route(&segs)?,
        Flavor::Aip151 | Flavor::Azure | Flavor::K8s | Flavor::Argo => return None,
    };
    let empty_id = match &r {
        Route::Workflow(id)
        | Route::Tool(id)
        | Route::Run(id)
        | Route::Cancel(id)
        | Route::Events(id)
        | Route::Poll(id)
        | Route::InterruptToken(id) => id.is_empty(),
        Route::Interrupt(id, node) => id.is_empty() || node.is_empty(),
        _ => false,
    };
    (!empty_id).then_some(r)
}

/// The legacy flavour's paths (legacy.rs); every v2 path is unknown there.
fn legacy_route<'a>(segs: &[&'a str]) -> Option<Route<'a>> {
    Some(match *segs {
        [".well-known", "openwop"] => Route::Discovery,
        ["_devhost", "faults"] => Route::Faults,
        ["api", "v1", "workflows", id] => Route::Workflow(id),
        ["api", "v1", "jobs"] => Route::Runs,
        ["api", "v1", "jobs", id] => Route::Run(id),
        ["api", "v1", "jobs", id, "cancel"] => Route::Cancel(id),
        ["api", "v1", "jobs", id, "approvals", node] => Route::Interrupt(id, node),
        ["api", "v1", "jobs", id, "events"] => Route::Events(id),
        ["api", "v1", "jobs", id, "events", "poll"] => Route::Poll(id),
        _ => return None,
    })
}

fn v2_route<'a>(segs: &[&'a str]) -> Option<Route<'a>> {
    let r = match *segs {
        [".well-known", "openwop"] => Route::Discovery,
        ["workflows", id] => Route::Workflow(id),
        ["tools"] => Route::Tools,
        ["tools", id] => Route::Tool(id),
        ["runs"] => Route::Runs,
        ["runs", id] => Route::Run(id),
        ["runs", id, "cancel"] => Route::Cancel(id),
        ["runs", id, "interrupts", node] => Route::Interrupt(id, node),
        ["interrupts", token] => Route::InterruptToken(token),
        ["runs", id, "events"] => Route::Events(id),
        ["runs", id, "events", "poll"] => Route::Poll(id),
        ["_devhost", "faults"] => Route::Faults,
        _ => return None,
    };
    Some(r)
}

/// The fault-switch class of a request to the OpenWOP surface (`None` for the admin
/// endpoint, which is never counted nor faulted).
pub(crate) fn classify(flavor: Flavor, method: &Method, path: &str) -> Option<RouteClass> {
    let Some(route) = route(flavor, path) else {
        return Some(RouteClass::Other);
    };
    let m = method.clone();
    Some(match route {
        Route::Faults => return None,
        Route::Discovery if m == Method::GET => RouteClass::Discovery,
        Route::Runs if m == Method::POST => RouteClass::CreateRun,
        Route::Runs if m == Method::GET => RouteClass::ListRuns,
        Route::Run(_) if m == Method::GET => RouteClass::GetRun,
        Route::Cancel(_) if m == Method::POST => RouteClass::Cancel,
        Route::Interrupt(..) | Route::InterruptToken(_) if m == Method::POST => RouteClass::Resolve,
        Route::Poll(_) if m == Method::GET => RouteClass::Poll,
        Route::Events(_) if m == Method::GET => RouteClass::Stream,
        _ => RouteClass::Other,
    })
}

/// Dispatch one request to the OpenWOP surface; buffered answers leave in the host's
/// dialect (legacy.rs rewrites v2 shapes). The caller adds `OpenWOP-Version` to whatever
/// comes back.
pub(crate) async fn handle(host: &Arc<HostState>, req: &Req<'_>) -> Response<Body> {
    let class = classify(host.config.flavor, req.method, req.path).unwrap_or(RouteClass::Other);
    let outgoing = host.dialect.outgoing;
    match dispatch(host, req).await {
        Ok(Answer::Reply(r)) => outgoing(class, r).into_response(),
        Ok(Answer::Stream(resp)) => resp,
        Err(e) => outgoing(class, e.into_reply()).into_response(),
    }
}

async fn dispatch(host: &Arc<HostState>, req: &Req<'_>) -> Result<Answer, ApiError> {
    // OpenWOP v2 headers.md and errors.md: only 2.0 is served; an unlisted version is 406.
    if let Some(v) = req.headers.get("openwop-version") {
        if v.as_bytes() != b"2.0" {
            return Err(ApiError::new(
                406,
                "protocol_version_unsupported",
                "this host serves OpenWOP-Version 2.0 only",
            )
            .detail("protocolVersions", json!(["2.0"])));
        }
    }
    if req.method == Method::OPTIONS {
        return Ok(Answer::Reply(preflight()));
    }
    let flavor = host.config.flavor;
    let Some(route) = route(flavor, req.path) else {
        return crate::history::handle(host, req);
    };
    if !route.allowed(flavor).contains(req.method) {
        let allow = route
            .allowed(flavor)
            .iter()
            .map(Method::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        return Err(ApiError::new(
            405,
            "method_not_allowed",
            format!("{} is not allowed here", req.method),
        )
        .with_header("allow", allow));
    }
    if let Route::Discovery = route {
        return Ok(Answer::Reply(discovery(host, req.headers)));
    }
    if let Route::Faults = route {
        return faults_admin(host, req).map(Answer::Reply);
    }
    if let Route::InterruptToken(token) = route {
        // Token surfaces authenticate with the token itself, no bearer (§1.7).
        return interrupt_by_token(host, req, token).map(Answer::Reply);
    }
    let caller = authenticate(&host.config, &host.oauth, req.headers)?;
    let query = parse_query(req.query);
    match route {
        Route::Discovery | Route::InterruptToken(_) | Route::Faults => {
            unreachable!("answered above")
        }
        Route::Workflow(raw) => {
            caller.require("manifest:read")?;
            let wf = workflow_from_path(host, raw)?;
            Ok(Answer::Reply(Reply::json(200, &wf.definition())))
        }
        Route::Tools | Route::Tool(_) if !host.config.tool_catalog => {
            Err(ApiError::not_found("no tool catalog on this host"))
        }
        Route::Tools => {
            caller.require("manifest:read")?;
            let omits = &host.config.catalog_omits;
            let tools: Vec<Value> = host
                .workflows
                .iter()
                .filter(|w| !omits.contains(&w.id))
                .map(|w| w.tool_descriptor())
                .collect();
            let compact = query.iter().any(|(k, v)| k == "view" && v == "compact");
            let body = if compact {
                json!({ "tools": tools })
            } else {
                Value::Array(tools)
            };
            Ok(Answer::Reply(Reply::json(200, &body)))
        }
        Route::Tool(raw) => {
            caller.require("manifest:read")?;
            let wf = workflow_from_path(host, raw)?;
            if host.config.catalog_omits.contains(&wf.id) {
                return Err(ApiError::not_found("no such tool"));
            }
            Ok(Answer::Reply(Reply::json(200, &wf.tool_descriptor())))
        }
        Route::Runs if *req.method == Method::POST => {
            caller.require("runs:create")?;
            let transport = transport_of(req.headers)?;
            let fp = fingerprint("createRun", transport, req.body);
            let reply = idempotent(
                &host.idempotency,
                &caller,
                "createRun",
                req.headers,
                fp,
                || create_run(host, &caller, req.body, transport),
            )?;
            Ok(Answer::Reply(reply))
        }
        Route::Runs => {
            caller.require("runs:read")?;
            Ok(Answer::Reply(list_runs(host, &caller, &query)?))
        }
        Route::Run(raw) => {
            caller.require("runs:read")?;
            let run = run_from_path(host, &caller, raw)?;
            Ok(Answer::Reply(get_run(&run, req.headers)))
        }
        Route::Cancel(raw) => {
            caller.require("runs:cancel")?;
            let run = run_from_path(host, &caller, raw)?;
            let fp = fingerprint("cancelRun", &run.id, req.body);
            let reply = idempotent(
                &host.idempotency,
                &caller,
                "cancelRun",
                req.headers,
                fp,
                || cancel_run(&run, req.body),
            )?;
            Ok(Answer::Reply(reply))
        }
        Route::Interrupt(raw, raw_node) if *req.method == Method::GET => {
            caller.require("approvals:respond")?;
            let run = run_from_path(host, &caller, raw)?;
            let node = node_from_path(host, raw_node)?;
            Ok(Answer::Reply(mint_token(host, &run, &caller, &node)?))
        }
        Route::Interrupt(raw, raw_node) => {
            caller.require("approvals:respond")?;
            let run = run_from_path(host, &caller, raw)?;
            let node = node_from_path(host, raw_node)?;
            // Legacy `{value}` is the v2 `{resumeValue}` (legacy.rs).
            let body = (host.dialect.resolve_body)(req.body)?;
            let fp = fingerprint(
                "resolveInterruptByRun",
                &format!("{}\n{node}", run.id),
                &body,
            );
            let reply = idempotent(
                &host.idempotency,
                &caller,
                "resolveInterruptByRun",
                req.headers,
                fp,
                || resolve_interrupt(host, &run, &caller, &node, None, &body),
            )?;
            Ok(Answer::Reply(reply))
        }
        Route::Poll(raw) => {
            caller.require("runs:read")?;
            let run = run_from_path(host, &caller, raw)?;
            Ok(Answer::Reply(poll_events(host, &run, &query).await?))
        }
        Route::Events(raw) => {
            caller.require("runs:read")?;
            let run = run_from_path(host, &caller, raw)?;
            Ok(Answer::Stream(sse::stream(host, run, &query, req.headers)?))
        }
    }
}

/// CORS preflight (OpenWOP v2 headers.md and errors.md): admit the methods and the declared headers.
fn preflight() -> Reply {
    Reply {
        status: StatusCode::NO_CONTENT,
        headers: Vec::new(),
        body: None,
    }
    .header("access-control-allow-origin", "*")
    .header("access-control-allow-methods", "GET, POST, OPTIONS")
    .header(
        "access-control-allow-headers",
        "Authorization, Content-Type, OpenWOP-Version, OpenWOP-Client-Version, \
         OpenWOP-Dedup, Idempotency-Key, If-None-Match, Last-Event-ID, traceparent, tracestate, \
         X-OpenWOP-Transport",
    )
    .header("access-control-max-age", "600")
}

/// Does an `If-None-Match` header match `etag` (weak comparison, RFC 9110 §13.1.2)?
fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(http::header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || t.trim_start_matches("W/") == etag)
}

fn not_modified(etag: &str) -> Reply {
    Reply {
        status: StatusCode::NOT_MODIFIED,
        headers: Vec::new(),
        body: None,
    }
    .header("etag", etag)
}

/// `GET /.well-known/openwop` (§1.1): unauthenticated, strong ETag, 304 on match.
fn discovery(host: &HostState, headers: &HeaderMap) -> Reply {
    let d = &host.discovery;
    let reply = if if_none_match(headers, &d.etag) {
        not_modified(&d.etag)
    } else {
        Reply {
            status: StatusCode::OK,
            headers: Vec::new(),
            body: Some(d.body.clone()),
        }
        .header("etag", &d.etag)
    };
    reply.header("cache-control", "public, max-age=300")
}

/// Decode an author id (workflow, node) from a path segment: `~`/`%` in v2 (§2.2),
/// `%` only in the legacy flavour.
fn decode_segment(host: &HostState, raw: &str, field: &str) -> Result<String, ApiError> {
    (host.dialect.decode_segment)(raw, field)
}

fn workflow_from_path(host: &HostState, raw: &str) -> Result<Arc<Workflow>, ApiError> {
    let id = decode_segment(host, raw, "workflowId")?;
    if !id_chars(&id, 1, 128, true) {
        return Err(ApiError::validation(
            "workflowId",
            "workflowId does not match ^[A-Za-z0-9._~:-]{1,128}$",
        ));
    }
    host.workflow(&id)
        .ok_or_else(|| ApiError::not_found(format!("no workflow {id}")))
}

fn node_from_path(host: &HostState, raw: &str) -> Result<String, ApiError> {
    let id = decode_segment(host, raw, "nodeId")?;
    if !id_chars(&id, 1, 128, true) {
        return Err(ApiError::validation(
            "nodeId",
            "nodeId does not match ^[A-Za-z0-9._~:-]{1,128}$",
        ));
    }
    Ok(id)
}

/// The devhost-private `X-OpenWOP-Transport: mcp|rest|a2a|ui` request header of
/// `POST /runs`, which sets `run.started.payload.transport` (default `rest`). A REST
/// createRun has no transport field (OpenWOP v2 runs.md, createRun; docs/architecture.md, deliberate differences), so this is the
/// devhost's hook for a mount that wants its runs recorded as `mcp`; a real host
/// ignores the header. Unknown values are `400 validation_error`.
pub const TRANSPORT_HEADER: &str = "x-openwop-transport";

fn transport_of(headers: &HeaderMap) -> Result<&'static str, ApiError> {
    let Some(raw) = headers.get(TRANSPORT_HEADER) else {
        return Ok("rest");
    };
    let value = raw.to_str().unwrap_or("").trim().to_ascii_lowercase();
    ["mcp", "rest", "a2a", "ui"]
        .into_iter()
        .find(|t| *t == value)
        .ok_or_else(|| {
            ApiError::validation(
                "X-OpenWOP-Transport",
                "X-OpenWOP-Transport must be one of mcp, rest, a2a, ui",
            )
        })
}

/// `POST /runs` (OpenWOP v2 runs.md, createRun).
fn create_run(
    host: &HostState,
    caller: &Caller,
    body: &[u8],
    transport: &'static str,
) -> Result<Reply, ApiError> {
    let obj = json_object(body, false)?;
    closed(
        &obj,
        &[
            "workflowId",
            "inputs",
            "residency",
            "tenantId",
            "scopeId",
            "callbackUrl",
            "mode",
            "evalSuiteRef",
            "agentId",
            "configurable",
            "tags",
            "metadata",
        ],
    )?;
    if obj.contains_key("mode") || obj.contains_key("evalSuiteRef") || obj.contains_key("agentId") {
        return Err(ApiError::new(
            422,
            "capability_required",
            "eval runs are not offered by this host",
        )
        .detail("capability", json!("eval")));
    }
    if obj.contains_key("residency") {
        return Err(ApiError::new(
            422,
            "residency_unavailable",
            "this host does not offer data residency",
        ));
    }
    if obj.contains_key("callbackUrl") {
        return Err(ApiError::validation(
            "callbackUrl",
            "callbackUrl is refused: this host does not deliver signed-token callbacks",
        ));
    }
    if let Some(t) = obj.get("tenantId") {
        // The tenant always comes from the credential (§1.3); never trust the body.
        if t.as_str() != Some(caller.tenant.as_str()) {
            return Err(ApiError::new(
                403,
                "id_tenant_mismatch",
                "tenantId does not match the credential's tenant",
            ));
        }
    }
    if obj.get("scopeId").is_some_and(|s| !s.is_string()) {
        return Err(ApiError::validation("scopeId", "scopeId must be a string"));
    }
    let workflow_id = match obj.get("workflowId") {
        Some(Value::String(s)) if id_chars(s, 1, 128, true) => s.clone(),
        Some(_) => {
            return Err(ApiError::validation(
                "workflowId",
                "workflowId must match ^[A-Za-z0-9._~:-]{1,128}$",
            ))
        }
        None => return Err(ApiError::validation("workflowId", "workflowId is required")),
    };
    let inputs = match obj.get("inputs") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(ApiError::validation("inputs", "inputs must be an object")),
    };
    let tags = match obj.get("tags") {
        None => None,
        Some(Value::Array(a))
            if a.len() <= 100
                && a.iter()
                    .all(|t| t.as_str().is_some_and(|s| s.chars().count() <= 256)) =>
        {
            Some(Value::Array(a.clone()))
        }
        Some(_) => {
            return Err(ApiError::validation(
                "tags",
                "tags must be at most 100 strings of at most 256 characters",
            ))
        }
    };
    let metadata = match obj.get("metadata") {
        None => None,
        Some(m @ Value::Object(_)) => Some(m.clone()),
        Some(_) => {
            return Err(ApiError::validation(
                "metadata",
                "metadata must be an object",
            ))
        }
    };
    let configurable = match obj.get("configurable") {
        None => None,
        Some(c @ Value::Object(_)) => Some(c.clone()),
        Some(_) => {
            return Err(ApiError::validation(
                "configurable",
                "configurable must be an object",
            ))
        }
    };
    let workflow = host
        .workflow(&workflow_id)
        .ok_or_else(|| ApiError::not_found(format!("no workflow {workflow_id}")))?;
    let variables = runs::validate_inputs(&workflow, &inputs)?;
    let new = NewRun {
        inputs,
        variables,
        tags,
        metadata,
        configurable,
        transport,
    };
    let (run, status) = start_run(host, caller, workflow, new);
    let wire = wire_id::project(&run.id);
    let body = json!({
        "runId": run.id,
        "status": status.as_str(),
        "eventsUrl": format!("/runs/{wire}/events"),
        "statusUrl": format!("/runs/{wire}"),
    });
    Ok(Reply::json(201, &body).header("location", &format!("/runs/{wire}")))
}

/// `GET /runs/{id}` (§1.4) with a strong ETag and 304.
fn get_run(run: &Run, headers: &HeaderMap) -> Reply {
    let st = run.lock();
    let etag = run.etag(&st);
    if if_none_match(headers, &etag) {
        return not_modified(&etag);
    }
    Reply::json(200, &run.snapshot(&st)).header("etag", &etag)
}

/// `GET /runs` (§1.5): newest first, the caller's tenant only, opaque cursors.
fn list_runs(
    host: &HostState,
    caller: &Caller,
    query: &[(String, String)],
) -> Result<Reply, ApiError> {
    let get = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let limit = match get("limit") {
        None => 20,
        Some(v) => v
            .parse::<i64>()
            .map_err(|_| ApiError::validation("limit", "limit must be an integer"))?
            .clamp(1, MAX_PAGE as i64) as usize,
    };
    let status =
        match get("status") {
            None => None,
            Some(s) => Some((host.dialect.status_filter)(s).ok_or_else(|| {
                ApiError::validation("status", format!("{s} is not a run status"))
            })?),
        };
    let workflow_id = get("workflowId");
    let before = match get("cursor") {
        None => u64::MAX,
        Some(c) => {
            let cursors = lock(&host.cursors);
            match cursors.get(c) {
                Some(cur) if cur.tenant == caller.tenant => cur.before,
                _ => return Err(ApiError::validation("cursor", "unknown cursor")),
            }
        }
    };
    let candidates: Vec<Arc<Run>> = {
        let table = lock(&host.runs);
        table
            .order
            .iter()
            .rev()
            .filter(|r| r.tenant == caller.tenant && r.ordinal < before)
            .filter(|r| workflow_id.is_none_or(|w| r.workflow.id == w))
            .cloned()
            .collect()
    };
    let mut page = Vec::new();
    let mut last = None;
    let mut more = false;
    for run in candidates {
        let st = run.lock();
        if status.is_some_and(|s| s != st.status) {
            continue;
        }
        if page.len() == limit {
            more = true;
            break;
        }
        page.push(run.snapshot(&st));
        last = Some(run.ordinal);
    }
    let mut body = json!({ "runs": page });
    if let (true, Some(last)) = (more, last) {
        let token = random_token(18);
        lock(&host.cursors).insert(
            token.clone(),
            Cursor {
                tenant: caller.tenant.clone(),
                before: last,
            },
        );
        body["nextCursor"] = json!(token);
    }
    Ok(Reply::json(200, &body))
}

/// `POST /runs/{id}/cancel` (§1.6).
fn cancel_run(run: &Run, body: &[u8]) -> Result<Reply, ApiError> {
    let obj = json_object(body, true)?;
    closed(&obj, &["reason"])?;
    let reason = match obj.get("reason") {
        None => "caller-requested".to_owned(),
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= 512 => s.clone(),
        Some(_) => {
            return Err(ApiError::validation(
                "reason",
                "reason must be a non-empty string of at most 512 characters",
            ))
        }
    };
    let status = runs::cancel(run, &reason)?;
    Ok(Reply::json(
        200,
        &json!({ "runId": run.id, "status": status.as_str() }),
    ))
}

/// `POST /runs/{id}/interrupts/{nodeId}` (§1.7).
fn resolve_interrupt(
    host: &HostState,
    run: &Arc<Run>,
    caller: &Caller,
    node: &str,
    interrupt: Option<&str>,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let mut obj = json_object(body, false)?;
    closed(&obj, &["resumeValue"])?;
    let Some(value) = obj.remove("resumeValue") else {
        return Err(ApiError::validation(
            "resumeValue",
            "resumeValue is required",
        ));
    };
    let (status, continue_run) = runs::resolve(run, caller, node, interrupt, value)?;
    if continue_run {
        runs::start_executor(run.clone(), host.shutdown.clone());
    }
    Ok(Reply::json(
        200,
        &json!({ "runId": run.id, "nodeId": node, "status": status.as_str() }),
    ))
}

/// `GET /runs/{id}/events/poll` (§1.8): long-polls only while nothing newer exists
/// and the run is not terminal.
async fn poll_events(
    host: &HostState,
    run: &Run,
    query: &[(String, String)],
) -> Result<Reply, ApiError> {
    let get = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let after = match get("afterSequence") {
        None => -1,
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n >= -1 => n,
            _ => {
                return Err(ApiError::validation(
                    "afterSequence",
                    "afterSequence must be an integer >= -1",
                ))
            }
        },
    };
    let timeout = match get("timeout") {
        None => 30,
        Some(v) => match v.parse::<u64>() {
            Ok(n) if (1..=60).contains(&n) => n,
            _ => {
                return Err(ApiError::validation(
                    "timeout",
                    "timeout must be an integer in 1..60",
                ))
            }
        },
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let mut changes = run.subscribe();
    let mut shutdown = host.shutdown.clone();
    loop {
        changes.borrow_and_update();
        let answer = {
            let st = run.lock();
            let start = usize::try_from(after + 1).unwrap_or(0);
            let events: Vec<Value> = st.events.iter().skip(start).cloned().collect();
            let terminal = st.status.is_terminal();
            let timed_out = tokio::time::Instant::now() >= deadline;
            (!events.is_empty() || terminal || timed_out).then(|| {
                // lastSequence is the log's last sequence (-1 for an empty log), so a
                // client can always continue with afterSequence=lastSequence.
                json!({
                    "runId": run.id,
                    "events": events,
                    "lastSequence": st.events.len() as i64 - 1,
                    "status": st.status.as_str(),
                    "isTerminal": terminal,
                })
            })
        };
        if let Some(body) = answer {
            return Ok(Reply::json(200, &body));
        }
        tokio::select! {
            r = changes.changed() => { if r.is_err() { return Err(ApiError::not_found("no such run")); } }
            _ = tokio::time::sleep_until(deadline) => {}
            _ = crate::util::stopped(&mut shutdown) => {
                return Err(ApiError::new(503, "runner_unavailable", "the host is shutting down"));
            }
        }
    }
}

/// `GET /runs/{id}/interrupts/{nodeId}` (reference-host extra, OpenWOP v2 interrupt.md, resolveInterruptByRun):
/// mint a signed token for the open interrupt, bound to the calling principal.
fn mint_token(host: &HostState, run: &Run, caller: &Caller, node: &str) -> Result<Reply, ApiError> {
    if !run.workflow.nodes.iter().any(|n| n.id == node) {
        return Err(ApiError::not_found(format!(
            "workflow {} has no node {node}",
            run.workflow.id
        )));
    }
    let st = run.lock();
    let open = match st.open.iter().find(|o| o.node_id == node) {
        Some(o) => o,
        None => {
            return Err(ApiError::new(
                404,
                "interrupt_not_found",
                format!("node {node} has no open interrupt"),
            ))
        }
    };
    let expires_ms = tokens::now_ms() + tokens::TTL_MS;
    let token = host.tokens.mint(&Claims {
        run_id: run.id.clone(),
        node_id: node.to_owned(),
        interrupt_id: open.interrupt_id.clone(),
        subject: caller.subject.clone(),
        expires_ms,
    });
    let expires_at =
        time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(expires_ms) * 1_000_000)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            });
    let mut body = json!({
        "token": token,
        "expiresAt": expires_at,
        "runId": run.id,
        "nodeId": node,
        "interruptId": open.interrupt_id,
    });
    if let (Some(b), Some(p)) = (body.as_object_mut(), open.payload.as_object()) {
        for (k, v) in p {
            b.insert(k.clone(), v.clone());
        }
    }
    Ok(Reply::json(200, &body))
}

/// `GET|POST /interrupts/{token}` (§1.7): inspect or resolve with the token alone.
fn interrupt_by_token(host: &Arc<HostState>, req: &Req<'_>, raw: &str) -> Result<Reply, ApiError> {
    let claims = host.tokens.verify(raw, tokens::now_ms())?;
    let invalid = || {
        ApiError::new(
            401,
            "interrupt_token_invalid",
            "the interrupt token is not valid",
        )
    };
    let caller = Caller::from_token_subject(&claims.subject).ok_or_else(invalid)?;
    let run = host.run(&claims.run_id).ok_or_else(invalid)?;
    // The token never outlives its interrupt (§1.7): resolved, cancelled or completed
    // runs invalidate it.
    let payload = {
        let st = run.lock();
        match st
            .open
            .iter()
            .find(|o| o.interrupt_id == claims.interrupt_id)
        {
            Some(o) => o.payload.clone(),
            _ if st.status == RunStatus::Cancelled => {
                return Err(ApiError::new(
                    410,
                    "interrupt_cancelled",
                    "the run holding this interrupt was cancelled",
                ))
            }
            _ => {
                return Err(ApiError::new(
                    409,
                    "interrupt_already_resolved",
                    "the interrupt is no longer open",
                ))
            }
        }
    };
    if *req.method == Method::GET {
        return Ok(Reply::json(200, &payload));
    }
    let fp = fingerprint("resolveInterruptByToken", &claims.interrupt_id, req.body);
    idempotent(
        &host.idempotency,
        &caller,
        "resolveInterruptByToken",
        req.headers,
        fp,
        || {
            resolve_interrupt(
                host,
                &run,
                &caller,
                &claims.node_id,
                Some(&claims.interrupt_id),
                req.body,
            )
        },
    )
}
