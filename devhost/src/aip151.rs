// Over 700 lines: the flavour's whole wire (routes, handlers, Operation documents, google errors) and its unit tests, kept together so it reads as one API.
//! The AIP-151 flavour ([`crate::Flavor::Aip151`]): the same runs served as a Google-style
//! long-running-operations API (AIP-151 operations, AIP-155 request ids, AIP-136 custom
//! methods, AIP-158 paging, AIP-193 errors), so the sidecar's mapping has a job API that
//! no OpenWOP thinking went into. The wire is in the crate docs ("AIP-151 flavour").
//!
//! Like Google's front ends it is strict: an unknown body field or query parameter is
//! `400 INVALID_ARGUMENT` ("Unknown name"), and ids never carry the tenant: a project
//! is the caller's tenant, an operation is found only by its owner.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Method;
use serde_json::{json, Map, Value};

use crate::api::{json_object, ApiError, Reply};
use crate::auth::{authenticate, Caller};
use crate::faults::RouteClass;
use crate::ops::{self, GateMiss};
use crate::runs::{self, Run, RunState, RunStatus};
use crate::state::{faults_admin, HostState, Req};
use crate::util::lock;
use crate::util::{decode_segment, parse_query};

/// `@type` of the metadata and response `Any`s.
const METADATA_TYPE: &str = "type.googleapis.com/openwop.devhost.jobs.v1.RunJobMetadata";
const RESPONSE_TYPE: &str = "type.googleapis.com/openwop.devhost.jobs.v1.RunJobResponse";
/// `ErrorInfo.domain` of the errors a job ends with.
const DOMAIN: &str = "jobs.devhost.openwop.dev";
/// `jobTypes` page size when `pageSize` is absent or 0 (AIP-158), and its ceiling.
const DEFAULT_PAGE: usize = 25;
const MAX_PAGE: usize = 100;
/// `:wait` timeout when none is given, and its ceiling (the "default HTTP timeout").
const WAIT_DEFAULT: Duration = Duration::from_secs(30);
const WAIT_MAX: Duration = Duration::from_secs(60);

/// The flavour's own records: operations and the AIP-155 request ids seen.
#[derive(Default)]
pub(crate) struct Table {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    ops: HashMap<String, Arc<Op>>,
    /// Creation order (listOperations, newest first).
    order: Vec<Arc<Op>>,
    /// `(tenant, requestId)` → operation id.
    requests: HashMap<(String, String), String>,
}

struct Op {
    /// `op-<unix ms>-<16 hex>`: unique, but far from 128 bits of entropy.
    id: String,
    tenant: String,
    project: String,
    job_type: String,
    labels: Option<Value>,
    run: Arc<Run>,
}

/// The flavour's routes. Segments stay raw until a handler decodes them.
enum Route<'a> {
    JobTypes(&'a str),
    JobType(&'a str, &'a str),
    Run(&'a str, &'a str),
    Operations,
    Operation(&'a str),
    Verb(&'a str, Verb),
    /// `GET /v1/userinfo`: who the credential is, its project included (an OpenID Connect
    /// UserInfo-style read; the sidecar's `host.templates.callerFrom` asks it).
    UserInfo,
    Faults,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verb {
    Cancel,
    Wait,
    Approve,
    Reject,
    ProvideInput,
}

fn route<'a>(method: &Method, path: &'a str) -> Option<Route<'a>> {
    let segs: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    let get = *method == Method::GET;
    let post = *method == Method::POST;
    let r = match segs[..] {
        ["_devhost", "faults"] => Route::Faults,
        ["v1", "userinfo"] if get => Route::UserInfo,
        ["v1", "projects", p, "jobTypes"] if get => Route::JobTypes(p),
        ["v1", "projects", p, "jobTypes", jt] if get => Route::JobType(p, jt),
        ["v1", "projects", p, "jobTypes", last] if post => match last.rsplit_once(':') {
            Some((jt, "run")) => Route::Run(p, jt),
            _ => return None,
        },
        ["v1", "operations"] if get => Route::Operations,
        ["v1", "operations", id] if get => Route::Operation(id),
        ["v1", "operations", last] if post => {
            let (id, verb) = last.rsplit_once(':')?;
            let verb = match verb {
                "cancel" => Verb::Cancel,
                "wait" => Verb::Wait,
                "approve" => Verb::Approve,
                "reject" => Verb::Reject,
                "provideInput" => Verb::ProvideInput,
                _ => return None,
            };
            Route::Verb(id, verb)
        }
        _ => return None,
    };
    Some(r)
}

/// The fault-switch class of a request (`None` for the admin endpoint).
pub(crate) fn classify(method: &Method, path: &str) -> Option<RouteClass> {
    Some(match route(method, path) {
        Some(Route::Faults) => return None,
        Some(Route::Run(..)) => RouteClass::CreateRun,
        Some(Route::Operations) => RouteClass::ListRuns,
        Some(Route::Operation(_)) => RouteClass::GetRun,
        Some(Route::Verb(_, Verb::Cancel)) => RouteClass::Cancel,
        Some(Route::Verb(_, Verb::Wait)) => RouteClass::Poll,
        Some(Route::Verb(..)) => RouteClass::Resolve,
        _ => RouteClass::Other,
    })
}

/// Serve one request; errors come back in the google form ([`outgoing`]).
pub(crate) async fn handle(host: &Arc<HostState>, table: &Table, req: &Req<'_>) -> Reply {
    let reply = match serve(host, table, req).await {
        Ok(r) => r,
        Err(e) => e.into_reply(),
    };
    outgoing(reply)
}

async fn serve(host: &Arc<HostState>, table: &Table, req: &Req<'_>) -> Result<Reply, ApiError> {
    let Some(route) = route(req.method, req.path) else {
        return Err(ApiError::new(
            404,
            "NOT_FOUND",
            format!("Method not found: {} {}", req.method, req.path),
        ));
    };
    if let Route::Faults = route {
        return faults_admin(host, req);
    }
    let caller = authenticate(&host.config, &host.oauth, req.headers)?;
    let query = parse_query(req.query);
    let q = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    match route {
        Route::Faults => unreachable!("answered above"),
        Route::UserInfo => {
            known_query(&query, &[])?;
            Ok(Reply::json(
                200,
                &serde_json::json!({ "project": caller.tenant }),
            ))
        }
        Route::JobTypes(p) => {
            known_query(&query, &["pageSize", "pageToken"])?;
            caller.require("manifest:read")?;
            let project = project(&caller, p)?;
            job_types(host, &project, q("pageSize"), q("pageToken"))
        }
        Route::JobType(p, jt) => {
            known_query(&query, &[])?;
            caller.require("manifest:read")?;
            let project = project(&caller, p)?;
            let id = decode_segment(jt, "name")?;
            let found = ops::catalog(host)
                .unwrap_or_default()
                .into_iter()
                .find(|w| w.id == id);
            match found {
                Some(w) => Ok(Reply::json(200, &job_type(&project, &w))),
                None => Err(not_found(&format!("projects/{project}/jobTypes/{id}"))),
            }
        }
        Route::Run(p, jt) => {
            known_query(&query, &[])?;
            caller.require("runs:create")?;
            let project = project(&caller, p)?;
            let job_type = decode_segment(jt, "name")?;
            run_job(host, table, &caller, &project, &job_type, req.body)
        }
        Route::Operations => {
            known_query(&query, &["pageSize", "pageToken", "filter"])?;
            caller.require("runs:read")?;
            list_operations(table, &caller, q("pageSize"), q("pageToken"), q("filter"))
        }
        Route::Operation(raw) => {
            known_query(&query, &[])?;
            caller.require("runs:read")?;
            let op = operation_of(table, &caller, raw)?;
            Ok(Reply::json(200, &operation(&op)))
        }
        Route::Verb(raw, verb) => {
            known_query(&query, &[])?;
            let scope = match verb {
                Verb::Cancel => "runs:cancel",
                Verb::Wait => "runs:read",
                _ => "approvals:respond",
            };
            caller.require(scope)?;
            let op = operation_of(table, &caller, raw)?;
            match verb {
                Verb::Cancel => {
                    strict_body(req.body, &[])?;
                    // google.longrunning CancelOperation: best effort, answered with
                    // Empty; the operation then ends with `error.code` 1 (CANCELLED).
                    runs::cancel(&op.run, "caller-requested")?;
                    Ok(Reply::json(200, &json!({})))
                }
                Verb::Wait => {
                    let body = strict_body(req.body, &["timeout"])?;
                    wait(host, &op, body.get("timeout")).await
                }
                _ => resolve(host, &caller, &op, verb, req.body),
            }
        }
    }
}

/// The query parameters a route binds (plus the system parameters `alt` and
/// `prettyPrint`); any other is refused as Google's front ends refuse it.
fn known_query(query: &[(String, String)], allowed: &[&str]) -> Result<(), ApiError> {
    match query
        .iter()
        .map(|(k, _)| k)
        .find(|k| !allowed.contains(&k.as_str()) && *k != "alt" && *k != "prettyPrint")
    {
        Some(k) => Err(ApiError::validation(
            k,
            format!(
                "Invalid JSON payload received. Unknown name \"{k}\": Cannot bind query \
                 parameter. Field '{k}' could not be found in request message."
            ),
        )),
        None => Ok(()),
    }
}

/// A request body with only `allowed` fields (an empty body is `{}`).
fn strict_body(body: &[u8], allowed: &[&str]) -> Result<Map<String, Value>, ApiError> {
    let obj = json_object(body, true)?;
    if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::validation(
            k,
            format!("Invalid JSON payload received. Unknown name \"{k}\": Cannot find field."),
        ));
    }
    Ok(obj)
}

/// The project of a path: the caller's tenant, nothing else.
fn project(caller: &Caller, raw: &str) -> Result<String, ApiError> {
    let p = decode_segment(raw, "parent")?;
    if p != caller.tenant {
        return Err(ApiError::new(
            403,
            "PERMISSION_DENIED",
            format!("Permission denied on resource project {p} (or it may not exist)."),
        ));
    }
    Ok(p)
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(
        404,
        "NOT_FOUND",
        format!("Resource '{name}' was not found."),
    )
}

impl Table {
    /// The run behind operation `id` (`op-…`), whoever's it is: the devhost's own view.
    pub(crate) fn run_of(&self, id: &str) -> Option<Arc<Run>> {
        lock(&self.inner).ops.get(id).map(|op| op.run.clone())
    }
}

/// The caller's operation `raw` names; another tenant's is as absent as a missing one.
fn operation_of(table: &Table, caller: &Caller, raw: &str) -> Result<Arc<Op>, ApiError> {
    let id = decode_segment(raw, "name")?;
    let t = lock(&table.inner);
    match t.ops.get(&id) {
        Some(op) if op.tenant == caller.tenant => Ok(op.clone()),
        _ => Err(not_found(&format!("operations/{id}"))),
    }
}

/// `GET /v1/projects/{p}/jobTypes` (AIP-132 list, AIP-158 paging).
fn job_types(
    host: &HostState,
    project: &str,
    page_size: Option<&str>,
    page_token: Option<&str>,
) -> Result<Reply, ApiError> {
    let Some(all) = ops::catalog(host) else {
        return Err(not_found(&format!("projects/{project}/jobTypes")));
    };
    let (size, offset) = page(page_size, page_token, &format!("jobTypes\n{project}"))?;
    let items: Vec<Value> = all
        .iter()
        .skip(offset)
        .take(size)
        .map(|w| job_type(project, w))
        .collect();
    let mut body = json!({ "jobTypes": items });
    if offset + size < all.len() {
        body["nextPageToken"] = json!(ops::page_token(
            &format!("jobTypes\n{project}"),
            offset + size
        ));
    }
    Ok(Reply::json(200, &body))
}

/// `(pageSize, offset)` of a list request (AIP-158: 0 or absent is the default, larger
/// than the maximum is the maximum, negative is INVALID_ARGUMENT).
fn page(size: Option<&str>, token: Option<&str>, scope: &str) -> Result<(usize, usize), ApiError> {
    let size = match size.map(str::parse::<i64>) {
        None | Some(Ok(0)) => DEFAULT_PAGE,
        Some(Ok(n)) if n > 0 => (n as usize).min(MAX_PAGE),
        _ => {
            return Err(ApiError::validation(
                "pageSize",
                "pageSize must be a non-negative integer",
            ))
        }
    };
    let offset = match token.filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => ops::page_offset(scope, t)
            .ok_or_else(|| ApiError::validation("pageToken", "Invalid page token."))?,
    };
    Ok((size, offset))
}

/// One catalog entry: `projects/{p}/jobTypes/{id}` with JSON Schemas for the
/// parameters and the result.
fn job_type(project: &str, w: &crate::fixtures::Workflow) -> Value {
    let e = ops::entry(w);
    let mut o = json!({
        "name": format!("projects/{project}/jobTypes/{}", w.id),
        "displayName": w.name,
        "description": w.description,
        "parameters": e.parameters,
        "readOnly": e.read_only,
    });
    if let Some(r) = e.result {
        o["result"] = r;
    }
    if let Some(t) = e.task_support {
        o["labels"] = json!({ "mcp-task-support": t });
    }
    o
}

/// `POST /v1/projects/{p}/jobTypes/{jt}:run` `{requestId?, parameters?, labels?}`: a new
/// operation, or (AIP-155) the one an earlier request with the same `requestId` made,
/// whatever that request's body was.
fn run_job(
    host: &HostState,
    table: &Table,
    caller: &Caller,
    project: &str,
    job_type: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let obj = strict_body(body, &["requestId", "parameters", "labels"])?;
    let request_id = match obj.get("requestId") {
        None => None,
        Some(Value::String(s)) if ops::is_uuid(s) => Some(s.to_ascii_lowercase()),
        Some(_) => {
            return Err(ApiError::validation(
                "requestId",
                "requestId must be a UUID (AIP-155), not the nil UUID",
            ))
        }
    };
    let parameters = match obj.get("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            return Err(ApiError::validation(
                "parameters",
                "parameters must be an object",
            ))
        }
    };
    let labels = match obj.get("labels") {
        None => None,
        Some(Value::Object(m)) if m.values().all(Value::is_string) => {
            Some(Value::Object(m.clone()))
        }
        Some(_) => {
            return Err(ApiError::validation(
                "labels",
                "labels must map strings to strings",
            ))
        }
    };
    // The table stays locked from the lookup to the insert so two requests with one
    // requestId cannot both start a job (nothing else locks it while holding a run).
    let mut t = lock(&table.inner);
    if let Some(rid) = &request_id {
        let seen = t.requests.get(&(caller.tenant.clone(), rid.clone()));
        if let Some(op) = seen.and_then(|id| t.ops.get(id)) {
            return Ok(Reply::json(200, &operation(op)));
        }
    }
    let Some(run) = ops::start_job(host, caller, job_type, parameters)? else {
        return Err(not_found(&format!(
            "projects/{project}/jobTypes/{job_type}"
        )));
    };
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let op = Arc::new(Op {
        id: format!("op-{ms}-{}", hex8()),
        tenant: caller.tenant.clone(),
        project: project.to_owned(),
        job_type: job_type.to_owned(),
        labels,
        run,
    });
    t.ops.insert(op.id.clone(), op.clone());
    t.order.push(op.clone());
    if let Some(rid) = request_id {
        t.requests
            .insert((caller.tenant.clone(), rid), op.id.clone());
    }
    Ok(Reply::json(200, &operation(&op)))
}

/// 8 random bytes as 16 hex digits.
fn hex8() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// `GET /v1/operations` (google.longrunning ListOperations): the caller's, newest first.
/// Only an empty `filter` is supported.
fn list_operations(
    table: &Table,
    caller: &Caller,
    page_size: Option<&str>,
    page_token: Option<&str>,
    filter: Option<&str>,
) -> Result<Reply, ApiError> {
    if filter.is_some_and(|f| !f.trim().is_empty()) {
        return Err(ApiError::validation(
            "filter",
            "filter is not supported by this service",
        ));
    }
    let scope = format!("operations\n{}", caller.tenant);
    let (size, offset) = page(page_size, page_token, &scope)?;
    let mine: Vec<Arc<Op>> = lock(&table.inner)
        .order
        .iter()
        .rev()
        .filter(|o| o.tenant == caller.tenant)
        .cloned()
        .collect();
    let items: Vec<Value> = mine
        .iter()
        .skip(offset)
        .take(size)
        .map(|o| operation(o))
        .collect();
    let mut body = json!({ "operations": items });
    if offset + size < mine.len() {
        body["nextPageToken"] = json!(ops::page_token(&scope, offset + size));
    }
    Ok(Reply::json(200, &body))
}

/// `metadata.state`.
fn state_of(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Pending => "PENDING",
        RunStatus::Running => "RUNNING",
        RunStatus::WaitingApproval => "AWAITING_APPROVAL",
        RunStatus::WaitingInput => "AWAITING_INPUT",
        RunStatus::WaitingExternal | RunStatus::Paused => "SUSPENDED",
        RunStatus::Cancelling => "CANCELLING",
        RunStatus::Completed => "SUCCEEDED",
        RunStatus::Failed => "FAILED",
        RunStatus::Cancelled => "CANCELLED",
    }
}

/// The google.rpc.Code a failed job ends with, by the run's error code.
fn rpc_code(code: &str) -> i64 {
    match code {
        "approval_rejected" | "clarification_declined" => 10, // ABORTED
        "validation_error" => 3,                              // INVALID_ARGUMENT
        "node_type_unsupported" => 12,                        // UNIMPLEMENTED
        _ => 2,                                               // UNKNOWN
    }
}

/// The google.longrunning.Operation of `op` now.
fn operation(op: &Op) -> Value {
    let st = op.run.lock();
    let mut metadata = json!({
        "@type": METADATA_TYPE,
        "jobType": format!("projects/{}/jobTypes/{}", op.project, op.job_type),
        "state": state_of(st.status),
        "createTime": st.started_at,
        "updateTime": ops::updated_at(&st),
        "requestedCancellation": matches!(st.status, RunStatus::Cancelling | RunStatus::Cancelled),
    });
    if let Some(t) = &st.completed_at {
        metadata["endTime"] = json!(t);
    }
    if let Some(l) = &op.labels {
        metadata["labels"] = l.clone();
    }
    gates(&st, &mut metadata);
    let mut o = json!({
        "name": format!("operations/{}", op.id),
        "metadata": metadata,
        "done": st.status.is_terminal(),
    });
    match st.status {
        RunStatus::Completed => {
            o["response"] = json!({ "@type": RESPONSE_TYPE, "result": st.variables });
        }
        RunStatus::Cancelled => {
            o["error"] = json!({ "code": 1, "message": "The operation was cancelled." });
        }
        RunStatus::Failed => {
            let code = st
                .error
                .as_ref()
                .and_then(|e| e["code"].as_str())
                .unwrap_or("");
            let message = st.error.as_ref().and_then(|e| e["message"].as_str());
            o["error"] = json!({
                "code": rpc_code(code),
                "message": message.unwrap_or("The job failed."),
                "details": [{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": ops::upper_snake(code),
                    "domain": DOMAIN,
                }],
            });
        }
        _ => {}
    }
    o
}

/// `metadata.approval` and `metadata.inputRequest` for the first open gate of each kind.
fn gates(st: &RunState, metadata: &mut Value) {
    if let Some(g) = ops::open_approval(st) {
        let (title, description, actions, approvers) = ops::approval_facts(g);
        let mut a = json!({
            "id": ops::gate_id(g),
            "step": g.node_id,
            "message": title,
            "canReject": actions.iter().any(|x| x == "reject"),
        });
        if !description.is_null() {
            a["description"] = description;
        }
        if !approvers.is_null() {
            a["eligibleApprovers"] = approvers;
        }
        metadata["approval"] = a;
    }
    if let Some(g) = ops::open_input(st) {
        let (questions, schema) = ops::input_facts(g);
        metadata["inputRequest"] = json!({
            "id": ops::gate_id(g),
            "step": g.node_id,
            "message": ops::input_message(&questions),
            "schema": schema,
        });
    }
}

/// `POST /v1/operations/{id}:wait` `{timeout?}` (google.longrunning WaitOperation):
/// the operation once it is done, or as it is when the timeout passes.
async fn wait(host: &HostState, op: &Op, timeout: Option<&Value>) -> Result<Reply, ApiError> {
    let timeout = match timeout {
        None => WAIT_DEFAULT,
        Some(v) => v
            .as_str()
            .and_then(duration)
            .ok_or_else(|| {
                ApiError::validation(
                    "timeout",
                    "timeout must be a google.protobuf.Duration such as \"10s\" or \"1.5s\"",
                )
            })?
            .min(WAIT_MAX),
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let mut changes = op.run.subscribe();
    let mut shutdown = host.shutdown.clone();
    loop {
        changes.borrow_and_update();
        if op.run.lock().status.is_terminal() || tokio::time::Instant::now() >= deadline {
            return Ok(Reply::json(200, &operation(op)));
        }
        tokio::select! {
            r = changes.changed() => if r.is_err() { return Ok(Reply::json(200, &operation(op))); },
            _ = tokio::time::sleep_until(deadline) => {}
            _ = crate::util::stopped(&mut shutdown) => {
                return Err(ApiError::new(503, "UNAVAILABLE", "The service is shutting down."));
            }
        }
    }
}

/// A `google.protobuf.Duration` in its JSON form: decimal seconds with an `s`.
fn duration(s: &str) -> Option<Duration> {
    let n = s.strip_suffix('s')?;
    let ok = !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && n.bytes().filter(|b| *b == b'.').count() <= 1;
    ok.then(|| n.parse::<f64>().ok())
        .flatten()
        .filter(|f| f.is_finite())
        .map(Duration::from_secs_f64)
}

/// `:approve {approvalId?, comment?}`, `:reject {approvalId?, reason?}`,
/// `:provideInput {inputRequestId?, values? | decline?}`: answer the open gate (the one
/// named, if a name is given) and return the operation.
fn resolve(
    host: &HostState,
    caller: &Caller,
    op: &Op,
    verb: Verb,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let (id_field, fields): (&str, &[&str]) = match verb {
        Verb::Approve => ("approvalId", &["approvalId", "comment"]),
        Verb::Reject => ("approvalId", &["approvalId", "reason"]),
        _ => ("inputRequestId", &["inputRequestId", "values", "decline"]),
    };
    let obj = strict_body(body, fields)?;
    let string = |k: &str| match obj.get(k) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::validation(k, format!("{k} must be a string"))),
    };
    let wanted = string(id_field)?;
    let approval = verb != Verb::ProvideInput;
    let gate = ops::find_gate(&op.run, approval, wanted.as_deref()).map_err(|m| match m {
        GateMiss::NonePending => ApiError::new(
            400,
            "FAILED_PRECONDITION",
            if approval {
                "The operation is not awaiting approval."
            } else {
                "The operation is not awaiting input."
            },
        ),
        GateMiss::Stale => ApiError::new(
            409,
            "ABORTED",
            format!(
                "{id_field} {} is not pending.",
                wanted.as_deref().unwrap_or("")
            ),
        ),
    })?;
    let value = match verb {
        Verb::Approve | Verb::Reject => {
            let action = if verb == Verb::Approve {
                "accept"
            } else {
                "reject"
            };
            let mut v = json!({ "action": action });
            let note = if verb == Verb::Approve {
                "comment"
            } else {
                "reason"
            };
            if let Some(c) = string(note)? {
                v["comment"] = json!(c);
            }
            v
        }
        _ => match (obj.get("values"), obj.get("decline")) {
            (Some(Value::Object(v)), None | Some(Value::Bool(false))) => Value::Object(v.clone()),
            (None, Some(Value::Bool(true))) => json!({ "declined": true }),
            _ => {
                return Err(ApiError::validation(
                    "values",
                    "give either values (an object) or decline: true",
                ))
            }
        },
    };
    ops::answer_gate(host, &op.run, caller, &gate, value)?;
    Ok(Reply::json(200, &operation(op)))
}

/// HTTP status and `google.rpc.Code` name of a v2 error code; a code that already is
/// a google name keeps the status it came with.
fn google_status(status: u16, code: &str) -> (u16, String) {
    if !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
        return (status, code.to_owned());
    }
    let (s, name) = match code {
        "validation_error" | "idempotency_key_invalid" => (400, "INVALID_ARGUMENT"),
        "run_terminal" => (400, "FAILED_PRECONDITION"),
        "interrupt_already_resolved" => (409, "ABORTED"),
        "not_found" | "interrupt_not_found" => (404, "NOT_FOUND"),
        "unauthenticated" => (401, "UNAUTHENTICATED"),
        "forbidden" | "id_tenant_mismatch" => (403, "PERMISSION_DENIED"),
        "rate_limited" => (429, "RESOURCE_EXHAUSTED"),
        "runner_unavailable" => (503, "UNAVAILABLE"),
        "internal_error" => (500, "INTERNAL"),
        _ => (
            status,
            match status {
                400 | 413 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 | 405 => "NOT_FOUND",
                409 => "ABORTED",
                429 => "RESOURCE_EXHAUSTED",
                501 => "UNIMPLEMENTED",
                503 => "UNAVAILABLE",
                504 => "DEADLINE_EXCEEDED",
                s if s >= 500 => "INTERNAL",
                _ => "FAILED_PRECONDITION",
            },
        ),
    };
    (s, name.to_owned())
}

/// Re-dress a v2 error as AIP-193 `{error: {code, message, status, details}}`: a
/// `BadRequest` naming the field for INVALID_ARGUMENT, an `ErrorInfo` otherwise.
pub(crate) fn outgoing(reply: Reply) -> Reply {
    let renames = [
        ("resumeValue.", "values."),
        ("resumeValue", "values"),
        ("inputs.", "parameters."),
    ];
    let Some(e) = ops::v2_error(&reply, &renames) else {
        return reply;
    };
    let (status, name) = google_status(e.status, &e.code);
    let detail = match (&e.field, name.as_str()) {
        (Some(f), "INVALID_ARGUMENT") => json!({
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{ "field": f, "description": e.message }],
        }),
        _ => json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": ops::upper_snake(&e.code),
            "domain": DOMAIN,
        }),
    };
    let body = json!({
        "error": {
            "code": status,
            "message": e.message,
            "status": name,
            "details": [detail],
        }
    });
    ops::redress(reply, status, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_seconds_with_an_s() {
        assert_eq!(duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(duration("1.5s"), Some(Duration::from_millis(1500)));
        for bad in ["10", "s", "-1s", "1.2.3s", "1e3s", "PT1S"] {
            assert_eq!(duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn v2_codes_become_google_statuses() {
        assert_eq!(google_status(400, "validation_error").1, "INVALID_ARGUMENT");
        assert_eq!(
            google_status(409, "run_terminal"),
            (400, "FAILED_PRECONDITION".into())
        );
        assert_eq!(
            google_status(403, "id_tenant_mismatch").1,
            "PERMISSION_DENIED"
        );
        assert_eq!(
            google_status(503, "devhost.injected_fault"),
            (503, "UNAVAILABLE".into())
        );
        assert_eq!(google_status(409, "ABORTED"), (409, "ABORTED".into()));
    }
}
