// Over 700 lines: the flavour's whole wire (routes, handlers, job and status monitor documents, Azure errors, the read record) and its unit tests, kept together so it reads as one API.
//! The azure flavour ([`crate::Flavor::Azure`]): the same runs served as an Azure-style
//! data-plane API with async operations (Microsoft Azure REST API Guidelines,
//! "Long-Running Operations & Jobs", "API Versioning", "Repeatability of requests"), so
//! the sidecar's mapping has a second foreign family to front. The wire is in the crate
//! docs ("Azure flavour").
//!
//! It is lenient where Azure services are (unknown and read-only body fields are
//! ignored) and strict where they are (`api-version` on every call). It records every
//! status monitor read with the `Retry-After` it answered, so a test can prove a client
//! never polls faster than it was asked ([`MonitorReads`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue, Method, StatusCode};
use serde_json::{json, Map, Value};

use crate::api::{json_object, ApiError, Reply};
use crate::auth::{authenticate, Caller};
use crate::faults::RouteClass;
use crate::ops::{self, GateMiss};
use crate::runs::{self, Run, RunState, RunStatus};
use crate::state::{faults_admin, HostState, Req};
use crate::util::lock;
use crate::util::parse_query;

/// The one `api-version` this host serves.
pub const API_VERSION: &str = "2026-01-01";
/// Job type page size when `maxpagesize` is absent, and its ceiling.
const DEFAULT_PAGE: usize = 10;
const MAX_PAGE: usize = 100;

/// One read of a status monitor.
#[derive(Debug, Clone)]
pub struct MonitorRead {
    /// When the host answered it.
    pub at: Instant,
    /// The `status` it answered (`NotStarted`, `Running`, `Succeeded`, ...).
    pub status: String,
    /// The `Retry-After` it carried (none once the operation is terminal).
    pub retry_after: Option<Duration>,
}

/// Every read of one operation's status monitor, and of its job resource.
#[derive(Debug, Clone)]
pub struct MonitorReads {
    pub tenant: String,
    pub operation_id: String,
    pub job: String,
    /// When the job was created.
    pub created: Instant,
    /// When the create answer carrying a `Retry-After` (the `202` of `POST /jobs`) left,
    /// and what it asked for; the last one when the request was retried.
    pub announced: Option<(Instant, Duration)>,
    pub reads: Vec<MonitorRead>,
    /// Every `GET /jobs/{name}` of the job, which also answers `Retry-After` while the job
    /// is not terminal.
    pub resource_reads: Vec<MonitorRead>,
}

impl MonitorReads {
    /// Reads that came sooner after the answer before them (the `202` included) than
    /// its `Retry-After` asked.
    pub fn early_reads(&self) -> usize {
        early(self.announced, &self.reads)
    }

    /// Job resource reads that came sooner after the resource read before them than its
    /// `Retry-After` asked.
    pub fn early_resource_reads(&self) -> usize {
        early(None, &self.resource_reads)
    }

    /// The shortest time between two reads.
    pub fn min_gap(&self) -> Option<Duration> {
        self.reads
            .windows(2)
            .map(|w| w[1].at.duration_since(w[0].at))
            .min()
    }

    fn to_json(&self) -> Value {
        let ms = |d: Duration| d.as_millis() as u64;
        let entries: Vec<Value> = self
            .reads
            .iter()
            .map(|r| {
                json!({
                    "atMs": ms(r.at.duration_since(self.created)),
                    "status": r.status,
                    "retryAfterS": r.retry_after.map(|d| d.as_secs()),
                })
            })
            .collect();
        json!({
            "tenant": self.tenant,
            "operationId": self.operation_id,
            "job": self.job,
            "announcedRetryAfterS": self.announced.map(|(_, d)| d.as_secs()),
            "reads": self.reads.len(),
            "earlyReads": self.early_reads(),
            "minGapMs": self.min_gap().map(ms),
            "entries": entries,
            "resourceReads": self.resource_reads.len(),
            "earlyResourceReads": self.early_resource_reads(),
        })
    }
}

/// Reads that came sooner after the answer before them (`announced` included) than its
/// `Retry-After` asked.
fn early(announced: Option<(Instant, Duration)>, reads: &[MonitorRead]) -> usize {
    let mut asked = announced;
    let mut early = 0;
    for r in reads {
        if let Some((at, wait)) = asked {
            if r.at.duration_since(at) < wait {
                early += 1;
            }
        }
        asked = r.retry_after.map(|w| (r.at, w));
    }
    early
}

/// The flavour's own records: jobs by `(tenant, name)` and by `(tenant, operation id)`.
#[derive(Default)]
pub(crate) struct Table {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    jobs: HashMap<(String, String), Arc<Job>>,
    ops: HashMap<(String, String), Arc<Job>>,
    /// Creation order ([`Table::reads`]).
    order: Vec<Arc<Job>>,
}

impl Table {
    pub(crate) fn reads(&self) -> Vec<MonitorReads> {
        lock(&self.inner)
            .order
            .iter()
            .map(|j| lock(&j.reads).clone())
            .collect()
    }

    /// The run behind job `name`, whichever tenant's it is: the devhost's own view.
    pub(crate) fn run_of(&self, name: &str) -> Option<Arc<Run>> {
        lock(&self.inner)
            .order
            .iter()
            .find(|j| j.name == name)
            .map(|j| j.run.clone())
    }

    pub(crate) fn clear_reads(&self) {
        for j in &lock(&self.inner).order {
            let mut r = lock(&j.reads);
            r.reads.clear();
            r.resource_reads.clear();
            r.announced = None;
        }
    }
}

struct Job {
    name: String,
    job_type: String,
    parameters: Value,
    /// `PUT /jobs/{name}` (false) or `POST /jobs` (true): an `Operation-Id` retry must
    /// be the same request.
    posted: bool,
    operation_id: String,
    run: Arc<Run>,
    reads: Mutex<MonitorReads>,
}

enum Route<'a> {
    JobTypes,
    JobType(&'a str),
    Jobs,
    Job(&'a str),
    Action(&'a str, Action),
    Operation(&'a str),
    Faults,
    StatusReads,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    Cancel,
    Approve,
    Input,
}

fn route(path: &str) -> Option<Route<'_>> {
    let segs: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    let r = match segs[..] {
        ["_devhost", "faults"] => Route::Faults,
        ["_devhost", "status-reads"] => Route::StatusReads,
        ["jobTypes"] => Route::JobTypes,
        ["jobTypes", name] => Route::JobType(name),
        ["jobs"] => Route::Jobs,
        ["jobs", name] => Route::Job(name),
        ["jobs", name, "cancel"] => Route::Action(name, Action::Cancel),
        ["jobs", name, "approve"] => Route::Action(name, Action::Approve),
        ["jobs", name, "input"] => Route::Action(name, Action::Input),
        ["operations", id] => Route::Operation(id),
        _ => return None,
    };
    let empty = match r {
        Route::JobType(s) | Route::Job(s) | Route::Action(s, _) | Route::Operation(s) => {
            s.is_empty()
        }
        _ => false,
    };
    (!empty).then_some(r)
}

impl Route<'_> {
    fn allowed(&self) -> &'static [Method] {
        match self {
            Route::Faults => &[Method::GET, Method::POST, Method::DELETE],
            Route::StatusReads => &[Method::GET, Method::DELETE],
            Route::Jobs | Route::Action(..) => &[Method::POST],
            Route::Job(_) => &[Method::GET, Method::PUT],
            Route::JobTypes | Route::JobType(_) | Route::Operation(_) => &[Method::GET],
        }
    }
}

/// The fault-switch class of a request (`None` for the admin endpoints).
pub(crate) fn classify(method: &Method, path: &str) -> Option<RouteClass> {
    let post = *method == Method::POST;
    Some(match route(path) {
        Some(Route::Faults | Route::StatusReads) => return None,
        Some(Route::Jobs) if post => RouteClass::CreateRun,
        Some(Route::Job(_)) if *method == Method::PUT => RouteClass::CreateRun,
        Some(Route::Job(_) | Route::Operation(_)) if *method == Method::GET => RouteClass::GetRun,
        Some(Route::Action(_, Action::Cancel)) if post => RouteClass::Cancel,
        Some(Route::Action(..)) if post => RouteClass::Resolve,
        _ => RouteClass::Other,
    })
}

/// Serve one request; errors come back in the Azure form ([`outgoing`]).
pub(crate) fn handle(host: &HostState, table: &Table, req: &Req<'_>) -> Reply {
    let reply = serve(host, table, req).unwrap_or_else(ApiError::into_reply);
    outgoing(reply)
}

fn serve(host: &HostState, table: &Table, req: &Req<'_>) -> Result<Reply, ApiError> {
    let route = route(req.path);
    if !matches!(route, Some(Route::Faults | Route::StatusReads)) {
        api_version(req.query)?;
    }
    let Some(route) = route else {
        return Err(ApiError::new(
            404,
            "NotFound",
            format!("The requested path {} was not found.", req.path),
        ));
    };
    if !route.allowed().contains(req.method) {
        let allow: Vec<&str> = route.allowed().iter().map(Method::as_str).collect();
        return Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{} is not allowed here.", req.method),
        )
        .with_header("allow", allow.join(", ")));
    }
    match route {
        Route::Faults => return faults_admin(host, req),
        Route::StatusReads => {
            if *req.method == Method::DELETE {
                table.clear_reads();
            }
            let all: Vec<Value> = table.reads().iter().map(MonitorReads::to_json).collect();
            return Ok(Reply::json(200, &json!({ "operations": all })));
        }
        _ => {}
    }
    let caller = authenticate(&host.config, &host.oauth, req.headers)?;
    let query = parse_query(req.query);
    let base = host.oauth.issuer();
    match route {
        Route::Faults | Route::StatusReads => unreachable!("answered above"),
        Route::JobTypes => {
            caller.require("manifest:read")?;
            job_types(host, base, &query)
        }
        Route::JobType(raw) => {
            caller.require("manifest:read")?;
            let name = crate::util::decode_segment(raw, "name")?;
            ops::catalog(host)
                .unwrap_or_default()
                .iter()
                .find(|w| w.id == name)
                .map(|w| Reply::json(200, &job_type(w)))
                .ok_or_else(|| {
                    ApiError::new(404, "NotFound", format!("Job type '{name}' was not found."))
                })
        }
        Route::Jobs => {
            caller.require("runs:create")?;
            create(host, table, &caller, req, None)
        }
        Route::Job(raw) if *req.method == Method::PUT => {
            caller.require("runs:create")?;
            let name = crate::util::decode_segment(raw, "name")?;
            create(host, table, &caller, req, Some(&name))
        }
        Route::Job(raw) => {
            caller.require("runs:read")?;
            let job = job_of(table, &caller, raw)?;
            let body = resource(&job);
            // Like the status monitor: `Retry-After` while the job is not terminal, and every
            // read recorded with it.
            let status = body["status"].as_str().unwrap_or("").to_owned();
            let terminal = matches!(status.as_str(), "Succeeded" | "Failed" | "Canceled");
            let wait = (!terminal).then(|| Duration::from_secs(host.config.retry_after_secs));
            lock(&job.reads).resource_reads.push(MonitorRead {
                at: Instant::now(),
                status,
                retry_after: wait,
            });
            let reply = Reply::json(200, &body);
            Ok(match wait {
                Some(w) => reply.header("retry-after", &w.as_secs().to_string()),
                None => reply,
            })
        }
        Route::Operation(raw) => {
            caller.require("runs:read")?;
            monitor(host, table, &caller, raw, base)
        }
        Route::Action(raw, action) => {
            let scope = match action {
                Action::Cancel => "runs:cancel",
                _ => "approvals:respond",
            };
            caller.require(scope)?;
            let job = job_of(table, &caller, raw)?;
            if action == Action::Cancel {
                // The body, if any, is ignored: the action takes no parameters.
                runs::cancel(&job.run, "caller-requested")?;
            } else {
                resolve(host, &caller, &job, action, req.body)?;
            }
            Ok(Reply::json(200, &resource(&job)))
        }
    }
}

/// `api-version` must be given exactly once, and be the one this host serves (Azure
/// guidelines, "API Versioning").
fn api_version(query: Option<&str>) -> Result<(), ApiError> {
    let q = parse_query(query);
    let given: Vec<&str> = q
        .iter()
        .filter(|(k, _)| k == "api-version")
        .map(|(_, v)| v.as_str())
        .collect();
    match given[..] {
        [] => Err(ApiError::new(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        )),
        [v] if v == API_VERSION => Ok(()),
        _ => Err(ApiError::new(
            400,
            "UnsupportedApiVersionValue",
            format!(
                "Unsupported api-version '{}'. The supported api-versions are '{API_VERSION}'.",
                given.join(",")
            ),
        )),
    }
}

fn job_not_found(name: &str) -> ApiError {
    ApiError::new(404, "NotFound", format!("Job '{name}' was not found."))
}

/// The caller's job `raw` names; another tenant's is as absent as a missing one.
fn job_of(table: &Table, caller: &Caller, raw: &str) -> Result<Arc<Job>, ApiError> {
    let name = crate::util::decode_segment(raw, "name")?;
    lock(&table.inner)
        .jobs
        .get(&(caller.tenant.clone(), name.clone()))
        .cloned()
        .ok_or_else(|| job_not_found(&name))
}

/// `GET /jobTypes` (`maxpagesize`, `skipToken`): `{value, nextLink?}` with an absolute
/// `nextLink` that carries `api-version` (Azure guidelines, "Collections").
fn job_types(host: &HostState, base: &str, query: &[(String, String)]) -> Result<Reply, ApiError> {
    let Some(all) = ops::catalog(host) else {
        return Err(ApiError::new(
            404,
            "NotFound",
            "This service has no job type catalog.",
        ));
    };
    let get = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.as_str());
    let size = match get("maxpagesize").map(str::parse::<usize>) {
        None => DEFAULT_PAGE,
        Some(Ok(n)) if n > 0 => n.min(MAX_PAGE),
        _ => {
            return Err(ApiError::validation(
                "maxpagesize",
                "maxpagesize must be a positive integer",
            ))
        }
    };
    let offset = match get("skipToken") {
        None => 0,
        Some(t) => ops::page_offset("jobTypes", t)
            .ok_or_else(|| ApiError::validation("skipToken", "The skipToken is not valid."))?,
    };
    let value: Vec<Value> = all
        .iter()
        .skip(offset)
        .take(size)
        .map(|w| job_type(w))
        .collect();
    let mut body = json!({ "value": value });
    if offset + size < all.len() {
        body["nextLink"] = json!(format!(
            "{base}/jobTypes?api-version={API_VERSION}&maxpagesize={size}&skipToken={}",
            ops::page_token("jobTypes", offset + size)
        ));
    }
    Ok(Reply::json(200, &body))
}

/// One job type: `{name, summary, description, schema: {parameters, result?}, readOnly,
/// tags?}`.
fn job_type(w: &crate::fixtures::Workflow) -> Value {
    let e = ops::entry(w);
    let mut schema = json!({ "parameters": e.parameters });
    if let Some(r) = e.result {
        schema["result"] = r;
    }
    let mut o = json!({
        "name": w.id,
        "summary": w.name,
        "description": w.description,
        "schema": schema,
        "readOnly": e.read_only,
    });
    if let Some(t) = e.task_support {
        o["tags"] = json!({ "mcp-task-support": t });
    }
    o
}

fn header<'a>(req: &'a Req<'_>, name: &str) -> Option<&'a str> {
    req.headers.get(name).map(|v| v.to_str().unwrap_or(""))
}

/// `PUT /jobs/{name}` (201 with the job, `Operation-Id` and `Operation-Location`) or
/// `POST /jobs` (202 with an empty body, `Operation-Location`, `Location`,
/// `Retry-After`). An `Operation-Id` request header names the status monitor: a retry
/// of the same request with it gets the same answer, another request 409 (Azure
/// guidelines, "Patterns to Initiate a Long-Running Operation"); an identical `PUT` of
/// an existing name gets the same answer too, a different one 409 (jobs cannot be
/// replaced). `POST /jobs` without `Operation-Id` is not idempotent.
fn create(
    host: &HostState,
    table: &Table,
    caller: &Caller,
    req: &Req<'_>,
    name: Option<&str>,
) -> Result<Reply, ApiError> {
    if req.headers.contains_key("repeatability-request-id") {
        // Azure guidelines, "Repeatability of requests": an operation without support
        // for the repeatability headers answers 501 to a request that carries them.
        return Err(ApiError::new(
            501,
            "NotImplemented",
            "Repeatability-Request-ID is not supported; use Operation-Id.",
        ));
    }
    if let Some(n) = name {
        if !job_name_ok(n) {
            return Err(ApiError::new(
                400,
                "InvalidResourceName",
                "A job name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit.",
            ));
        }
    }
    let body = json_object(req.body, false)?;
    if let (Some(n), Some(given)) = (name, body.get("name")) {
        if given.as_str() != Some(n) {
            return Err(ApiError::validation(
                "name",
                "The name in the body does not match the name in the URL.",
            ));
        }
    }
    let job_type = match body.get("jobType") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(ApiError::validation("jobType", "jobType must be a string.")),
        None => return Err(ApiError::validation("jobType", "jobType is required.")),
    };
    let parameters = match body.get("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            return Err(ApiError::validation(
                "parameters",
                "parameters must be an object.",
            ))
        }
    };
    let operation_id = match header(req, "operation-id") {
        None => None,
        Some(h) if job_name_ok(h) => Some(h.to_owned()),
        Some(_) => {
            return Err(ApiError::new(
                400,
                "InvalidHeaderValue",
                "Operation-Id is 1 to 64 letters, digits, '.', '_' or '-'.",
            ))
        }
    };
    let params = Value::Object(parameters.clone());
    let same = |j: &Job| {
        j.job_type == job_type
            && j.parameters == params
            && j.posted == name.is_none()
            && name.is_none_or(|n| n == j.name)
    };
    let tenant = caller.tenant.clone();
    // Locked from the lookups to the insert, so a retry racing its original cannot
    // start a second job (nothing else locks the table while holding a run).
    let mut t = lock(&table.inner);
    if let Some(op) = &operation_id {
        if let Some(j) = t.ops.get(&(tenant.clone(), op.clone())) {
            if !same(j) {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!("Operation-Id '{op}' was used for a different request."),
                ));
            }
            return Ok(created(host, j));
        }
    }
    if let Some(n) = name {
        if let Some(j) = t.jobs.get(&(tenant.clone(), n.to_owned())) {
            if !same(j) || operation_id.is_some() {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!("A job named '{n}' already exists; jobs cannot be replaced."),
                ));
            }
            return Ok(created(host, j));
        }
    }
    let Some(run) = ops::start_job(host, caller, &job_type, parameters)? else {
        return Err(ApiError::new(
            400,
            "UnknownJobType",
            format!("Job type '{job_type}' does not exist."),
        ));
    };
    let name = match name {
        Some(n) => n.to_owned(),
        None => loop {
            let n = format!("job-{:012x}", rand::random::<u64>() >> 16);
            if !t.jobs.contains_key(&(tenant.clone(), n.clone())) {
                break n;
            }
        },
    };
    let operation_id = operation_id.unwrap_or_else(ops::uuid_v4);
    let job = Arc::new(Job {
        reads: Mutex::new(MonitorReads {
            tenant: tenant.clone(),
            operation_id: operation_id.clone(),
            job: name.clone(),
            created: Instant::now(),
            announced: None,
            reads: Vec::new(),
            resource_reads: Vec::new(),
        }),
        name,
        job_type,
        parameters: params,
        posted: req.method == Method::POST,
        operation_id,
        run,
    });
    t.jobs
        .insert((tenant.clone(), job.name.clone()), job.clone());
    t.ops
        .insert((tenant, job.operation_id.clone()), job.clone());
    t.order.push(job.clone());
    Ok(created(host, &job))
}

fn job_name_ok(s: &str) -> bool {
    crate::util::id_chars(s, 1, 64, false)
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && !s.contains('~')
}

/// The answer to a create (or its retry).
fn created(host: &HostState, job: &Job) -> Reply {
    let base = host.oauth.issuer();
    let monitor = format!(
        "{base}/operations/{}?api-version={API_VERSION}",
        job.operation_id
    );
    if !job.posted {
        return Reply::json(201, &resource(job))
            .header("operation-id", &job.operation_id)
            .header("operation-location", &monitor);
    }
    let wait = host.config.retry_after_secs;
    lock(&job.reads).announced = Some((Instant::now(), Duration::from_secs(wait)));
    Reply {
        status: StatusCode::ACCEPTED,
        headers: Vec::new(),
        body: None,
    }
    .header("operation-id", &job.operation_id)
    .header("operation-location", &monitor)
    .header(
        "location",
        &format!("{base}/jobs/{}?api-version={API_VERSION}", job.name),
    )
    .header("retry-after", &wait.to_string())
}

/// A job's `status`: the status monitor's five values, plus `Canceling` on the job.
fn job_status(s: RunStatus, monitor: bool) -> &'static str {
    match s {
        RunStatus::Pending => "NotStarted",
        RunStatus::Cancelling if !monitor => "Canceling",
        RunStatus::Completed => "Succeeded",
        RunStatus::Failed => "Failed",
        RunStatus::Cancelled => "Canceled",
        _ => "Running",
    }
}

/// `pendingApproval` and `pendingInput` of the first open gate of each kind, added to `o`.
fn gates(st: &RunState, o: &mut Value) {
    if let Some(g) = ops::open_approval(st) {
        let (title, description, actions, approvers) = ops::approval_facts(g);
        let mut decisions = vec!["Approve"];
        if actions.iter().any(|a| a == "reject") {
            decisions.push("Reject");
        }
        let mut a = json!({
            "id": ops::gate_id(g),
            "step": g.node_id,
            "title": title,
            "allowedDecisions": decisions,
        });
        if !description.is_null() {
            a["description"] = description;
        }
        if !approvers.is_null() {
            a["approvers"] = approvers;
        }
        o["pendingApproval"] = a;
    }
    if let Some(g) = ops::open_input(st) {
        let (questions, schema) = ops::input_facts(g);
        o["pendingInput"] = json!({
            "id": ops::gate_id(g),
            "step": g.node_id,
            "prompt": ops::input_message(&questions),
            "answerSchema": schema,
        });
    }
}

/// `error` of a failed job: `{code, message}` with the run's code in PascalCase.
fn failure(st: &RunState) -> Option<Value> {
    let e = st.error.as_ref()?;
    Some(json!({
        "code": ops::pascal(e["code"].as_str().unwrap_or("JobFailed")),
        "message": e["message"],
    }))
}

/// `GET /jobs/{name}`: the job resource.
fn resource(job: &Job) -> Value {
    let st = job.run.lock();
    let mut o = json!({
        "name": job.name,
        "jobType": job.job_type,
        "parameters": job.parameters,
        "status": job_status(st.status, false),
        "operationId": job.operation_id,
        "createdDateTime": st.started_at,
        "lastUpdatedDateTime": ops::updated_at(&st),
    });
    if let Some(t) = &st.completed_at {
        o["completedDateTime"] = json!(t);
    }
    gates(&st, &mut o);
    if st.status == RunStatus::Completed {
        o["result"] = Value::Object(st.variables.clone());
    }
    if let Some(e) = failure(&st) {
        o["error"] = e;
    }
    o
}

/// `GET /operations/{id}`: the status monitor, `Retry-After` while it is not terminal;
/// every read is recorded.
fn monitor(
    host: &HostState,
    table: &Table,
    caller: &Caller,
    raw: &str,
    base: &str,
) -> Result<Reply, ApiError> {
    let id = crate::util::decode_segment(raw, "operationId")?;
    let job = lock(&table.inner)
        .ops
        .get(&(caller.tenant.clone(), id.clone()))
        .cloned()
        .ok_or_else(|| {
            ApiError::new(404, "NotFound", format!("Operation '{id}' was not found."))
        })?;
    let (body, terminal) = {
        let st = job.run.lock();
        let mut props = json!({ "jobName": job.name, "jobType": job.job_type });
        if st.status == RunStatus::Cancelling {
            props["cancelRequested"] = json!(true);
        }
        gates(&st, &mut props);
        let mut o = json!({
            "id": job.operation_id,
            "status": job_status(st.status, true),
            "createdDateTime": st.started_at,
            "lastUpdatedDateTime": ops::updated_at(&st),
            "resourceLocation": format!("{base}/jobs/{}?api-version={API_VERSION}", job.name),
            "properties": props,
        });
        if st.status == RunStatus::Completed {
            // Azure guidelines, "The Status Monitor Resource": `result` for an action.
            o["result"] = Value::Object(st.variables.clone());
        }
        if let Some(e) = failure(&st) {
            o["error"] = e;
        }
        (o, st.status.is_terminal())
    };
    let wait = (!terminal).then(|| Duration::from_secs(host.config.retry_after_secs));
    lock(&job.reads).reads.push(MonitorRead {
        at: Instant::now(),
        status: body["status"].as_str().unwrap_or("").to_owned(),
        retry_after: wait,
    });
    let reply = Reply::json(200, &body);
    Ok(match wait {
        Some(w) => reply.header("retry-after", &w.as_secs().to_string()),
        None => reply,
    })
}

/// `POST /jobs/{name}/approve {approvalId, decision: Approve|Reject, comment?}` and
/// `POST /jobs/{name}/input {inputRequestId, answers? | decline: true}`.
fn resolve(
    host: &HostState,
    caller: &Caller,
    job: &Arc<Job>,
    action: Action,
    body: &[u8],
) -> Result<(), ApiError> {
    let obj = json_object(body, false)?;
    let string = |k: &str| match obj.get(k) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(ApiError::validation(
            k,
            format!("{k} is required and must be a string."),
        )),
    };
    let approval = action == Action::Approve;
    let id_field = if approval {
        "approvalId"
    } else {
        "inputRequestId"
    };
    let wanted = string(id_field)?;
    let value = if approval {
        let action = match string("decision")?.as_str() {
            "Approve" => "accept",
            "Reject" => "reject",
            _ => {
                return Err(ApiError::validation(
                    "decision",
                    "decision must be Approve or Reject.",
                ))
            }
        };
        let mut v = json!({ "action": action });
        if let Some(c) = obj.get("comment") {
            v["comment"] = c.clone();
        }
        v
    } else {
        match (obj.get("answers"), obj.get("decline")) {
            (Some(Value::Object(a)), None | Some(Value::Bool(false))) => Value::Object(a.clone()),
            (None, Some(Value::Bool(true))) => json!({ "declined": true }),
            _ => {
                return Err(ApiError::validation(
                    "answers",
                    "Give either answers (an object) or decline: true.",
                ))
            }
        }
    };
    let gate = ops::find_gate(&job.run, approval, Some(&wanted)).map_err(|m| {
        let what = if approval {
            "approval"
        } else {
            "input request"
        };
        let msg = match m {
            GateMiss::NonePending => format!("Job '{}' has no pending {what}.", job.name),
            GateMiss::Stale => format!("The {what} '{wanted}' is not pending."),
        };
        ApiError::new(409, "NotPending", msg)
    })?;
    ops::answer_gate(host, &job.run, caller, &gate, value)?;
    Ok(())
}

/// HTTP status and Azure error code of a v2 error code; a code already in PascalCase
/// keeps the status it came with.
fn azure_code(status: u16, code: &str) -> (u16, String) {
    if code.bytes().next().is_some_and(|b| b.is_ascii_uppercase()) {
        return (status, code.to_owned());
    }
    let (s, c) = match code {
        "validation_error" => (400, "InvalidRequest"),
        "not_found" => (404, "NotFound"),
        "unauthenticated" => (401, "Unauthorized"),
        "forbidden" | "id_tenant_mismatch" => (403, "Forbidden"),
        "run_terminal" => (409, "OperationNotAllowed"),
        "interrupt_already_resolved" => (409, "NotPending"),
        "rate_limited" => (429, "TooManyRequests"),
        "runner_unavailable" => (503, "ServiceUnavailable"),
        "internal_error" => (500, "InternalServerError"),
        "payload_too_large" => (413, "RequestEntityTooLarge"),
        other => return (status, ops::pascal(other)),
    };
    (s, c.to_owned())
}

/// Re-dress a v2 error as Azure's `{error: {code, message, target?}}` with the code in
/// `x-ms-error-code` too.
pub(crate) fn outgoing(reply: Reply) -> Reply {
    let renames = [
        ("resumeValue.", "answers."),
        ("resumeValue", "answers"),
        ("inputs.", "parameters."),
    ];
    let Some(e) = ops::v2_error(&reply, &renames) else {
        return reply;
    };
    let (status, code) = azure_code(e.status, &e.code);
    let mut error = json!({ "code": code, "message": e.message });
    if let Some(f) = e.field {
        error["target"] = json!(f);
    }
    let mut r = ops::redress(reply, status, &json!({ "error": error }));
    if let Ok(v) = HeaderValue::from_str(&code) {
        r.headers
            .push((HeaderName::from_static("x-ms-error-code"), v));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(at: Instant, after: Option<u64>) -> MonitorRead {
        MonitorRead {
            at,
            status: "Running".into(),
            retry_after: after.map(Duration::from_secs),
        }
    }

    #[test]
    fn early_reads_count_against_the_answer_before() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let reads = MonitorReads {
            tenant: "acme".into(),
            operation_id: "op".into(),
            job: "j".into(),
            created: t0,
            announced: Some((t0, s)),
            reads: vec![
                read(t0 + s / 2, Some(1)),      // early: the 202 asked for 1 s
                read(t0 + s * 2, Some(1)),      // on time
                read(t0 + s * 2 + s / 4, None), // early
                read(t0 + s * 2 + s / 2, None), // after a terminal answer: nothing asked
            ],
            resource_reads: vec![read(t0, Some(1)), read(t0 + s / 2, None)],
        };
        assert_eq!(reads.early_reads(), 2);
        assert_eq!(reads.early_resource_reads(), 1);
        assert_eq!(reads.min_gap(), Some(s / 4));
    }

    #[test]
    fn v2_codes_become_azure_codes() {
        assert_eq!(azure_code(409, "run_terminal").1, "OperationNotAllowed");
        assert_eq!(
            azure_code(503, "devhost.injected_fault").1,
            "DevhostInjectedFault"
        );
        assert_eq!(
            azure_code(400, "MissingApiVersionParameter").1,
            "MissingApiVersionParameter"
        );
    }
}
