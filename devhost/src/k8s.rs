//! The k8s flavour ([`crate::Flavor::K8s`]): the same runs served as Kubernetes `batch/v1`
//! Jobs (Kubernetes API reference, "Job v1 batch"; API concepts, "Resource names", "Status"
//! errors), so the sidecar's mapping has a family with a client-chosen name, a conditions
//! list and a cancel by `DELETE`. The wire is in the crate docs ("Kubernetes flavour").
//!
//! A Job runs the workflow its first container's image names (the image's last path segment,
//! without tag or digest: `registry.example/jobs/greet:1` runs `greet`), with the
//! workflow's variables taken from that container's `env` (strings, read per the variable's
//! type as a program reads its environment). There is no catalog route: the operator keeps
//! the job types (container templates) in a file of their own. Jobs have no waiting state:
//! a workflow that would wait for a person stays active.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use http::Method;
use serde_json::{json, Map, Value};

use crate::api::{json_object, ApiError, Reply};
use crate::auth::{authenticate, Caller};
use crate::faults::RouteClass;
use crate::fixtures::VarType;
use crate::runs::{self, Run, RunStatus};
use crate::state::{faults_admin, HostState, Req};
use crate::util::lock;
use crate::util::parse_query;

/// The flavour's jobs by `(namespace, name)`; a deleted job is gone.
#[derive(Default)]
pub(crate) struct Table {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    jobs: HashMap<(String, String), Arc<Job>>,
    /// Every job ever created, deleted ones included (the devhost's own view).
    order: Vec<Arc<Job>>,
    next_version: u64,
}

/// One Job the host made, deleted or not: the devhost's own record
/// ([`crate::DevHost::k8s_jobs`]).
#[derive(Debug, Clone)]
pub struct JobRecord {
    pub namespace: String,
    pub name: String,
    /// The workflow its image named.
    pub workflow: String,
    /// Whether a `DELETE` removed it.
    pub deleted: bool,
}

impl Table {
    /// Every Job made so far, in creation order, deleted ones included.
    pub(crate) fn records(&self) -> Vec<JobRecord> {
        let t = lock(&self.inner);
        t.order
            .iter()
            .map(|j| JobRecord {
                namespace: j.namespace.clone(),
                name: j.name.clone(),
                workflow: j.run.workflow.id.clone(),
                deleted: !t.jobs.contains_key(&(j.namespace.clone(), j.name.clone())),
            })
            .collect()
    }

    /// The run behind job `name`, whichever namespace's it is, deleted or not.
    pub(crate) fn run_of(&self, name: &str) -> Option<Arc<Run>> {
        lock(&self.inner)
            .order
            .iter()
            .rev()
            .find(|j| j.name == name)
            .map(|j| j.run.clone())
    }
}

struct Job {
    name: String,
    namespace: String,
    uid: String,
    resource_version: u64,
    created: String,
    labels: Value,
    annotations: Value,
    /// The `spec` as given, with the defaults the API server fills in.
    spec: Value,
    run: Arc<Run>,
}

enum Route<'a> {
    Jobs(&'a str),
    Job(&'a str, &'a str),
    Faults,
}

fn route(path: &str) -> Option<Route<'_>> {
    let segs: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    let r = match segs[..] {
        ["_devhost", "faults"] => Route::Faults,
        ["apis", "batch", "v1", "namespaces", ns, "jobs"] if !ns.is_empty() => Route::Jobs(ns),
        ["apis", "batch", "v1", "namespaces", ns, "jobs", name]
            if !ns.is_empty() && !name.is_empty() =>
        {
            Route::Job(ns, name)
        }
        _ => return None,
    };
    Some(r)
}

/// The fault-switch class of a request (`None` for the admin endpoint).
pub(crate) fn classify(method: &Method, path: &str) -> Option<RouteClass> {
    Some(match route(path) {
        Some(Route::Faults) => return None,
        Some(Route::Jobs(_)) if *method == Method::POST => RouteClass::CreateRun,
        Some(Route::Job(..)) if *method == Method::GET => RouteClass::GetRun,
        Some(Route::Job(..)) if *method == Method::DELETE => RouteClass::Cancel,
        _ => RouteClass::Other,
    })
}

/// A Kubernetes `Status` error (API concepts, "Status"): `reason` is the machine code.
fn status(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(code, reason, message)
}

/// Serve one request; errors come back as `Status` objects ([`outgoing`]).
pub(crate) fn handle(host: &HostState, table: &Table, req: &Req<'_>) -> Reply {
    let reply = serve(host, table, req).unwrap_or_else(ApiError::into_reply);
    outgoing(reply)
}

fn serve(host: &HostState, table: &Table, req: &Req<'_>) -> Result<Reply, ApiError> {
    let Some(route) = route(req.path) else {
        return Err(status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    };
    if let Route::Faults = route {
        return faults_admin(host, req);
    }
    let caller = authenticate(&host.config, &host.oauth, req.headers)?;
    let (ns, verb) = match (&route, req.method) {
        (Route::Jobs(ns), &Method::POST) => (*ns, "create"),
        (Route::Jobs(ns), &Method::GET) => (*ns, "list"),
        (Route::Job(ns, _), &Method::GET) => (*ns, "get"),
        (Route::Job(ns, _), &Method::DELETE) => (*ns, "delete"),
        _ => {
            return Err(status(
                405,
                "MethodNotAllowed",
                format!(
                    "the server does not allow this method on the requested resource ({})",
                    req.method
                ),
            ))
        }
    };
    // RBAC: a credential may use its own namespace (its tenant) only.
    if ns != caller.tenant {
        return Err(status(
            403,
            "Forbidden",
            format!(
                "jobs.batch is forbidden: User \"{}\" cannot {verb} resource \"jobs\" in API group \"batch\" in the namespace \"{ns}\"",
                caller.subject_id
            ),
        ));
    }
    let scope = match verb {
        "create" => "runs:create",
        "delete" => "runs:cancel",
        _ => "runs:read",
    };
    caller.require(scope)?;
    match route {
        Route::Faults => unreachable!("answered above"),
        Route::Jobs(_) if verb == "create" => create(host, table, &caller, req),
        Route::Jobs(_) => {
            let t = lock(&table.inner);
            let mut items: Vec<Value> = t
                .order
                .iter()
                .filter(|j| {
                    j.namespace == caller.tenant
                        && t.jobs.contains_key(&(j.namespace.clone(), j.name.clone()))
                })
                .map(|j| document(j))
                .collect();
            let limit = parse_query(req.query)
                .iter()
                .find(|(k, _)| k == "limit")
                .and_then(|(_, v)| v.parse::<usize>().ok())
                .filter(|n| *n > 0);
            if let Some(n) = limit {
                items.truncate(n);
            }
            Ok(Reply::json(
                200,
                &json!({
                    "kind": "JobList",
                    "apiVersion": "batch/v1",
                    "metadata": { "resourceVersion": t.next_version.to_string() },
                    "items": items,
                }),
            ))
        }
        Route::Job(_, name) if verb == "get" => {
            let job = job_of(table, &caller, name)?;
            Ok(Reply::json(200, &document(&job)))
        }
        Route::Job(_, name) => delete(table, &caller, req, name),
    }
}

fn not_found(name: &str) -> ApiError {
    status(404, "NotFound", format!("jobs.batch \"{name}\" not found"))
        .detail("name", json!(name))
        .detail("group", json!("batch"))
        .detail("kind", json!("jobs"))
}

fn job_of(table: &Table, caller: &Caller, name: &str) -> Result<Arc<Job>, ApiError> {
    lock(&table.inner)
        .jobs
        .get(&(caller.tenant.clone(), name.to_owned()))
        .cloned()
        .ok_or_else(|| not_found(name))
}

/// A DNS-1123 label (RFC 1123): what a Job's name must be (its pods carry it in a label).
fn dns_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn invalid(field: &str, message: impl Into<String>) -> ApiError {
    let message = message.into();
    status(
        422,
        "Invalid",
        format!("Job.batch is invalid: {field}: {message}"),
    )
    .detail("field", json!(field))
}

/// `POST .../jobs`: a Job with a client-chosen `metadata.name` (or a `generateName`); a name
/// taken in the namespace is `409 AlreadyExists`, whatever the rest of the Job says.
fn create(
    host: &HostState,
    table: &Table,
    caller: &Caller,
    req: &Req<'_>,
) -> Result<Reply, ApiError> {
    let body = json_object(req.body, false)?;
    for (k, want) in [("apiVersion", "batch/v1"), ("kind", "Job")] {
        if let Some(v) = body.get(k) {
            if v.as_str() != Some(want) {
                return Err(status(
                    400,
                    "BadRequest",
                    format!("the body's {k} must be {want}"),
                ));
            }
        }
    }
    let meta = body.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let spec = match body.get("spec") {
        Some(Value::Object(s)) => s.clone(),
        _ => return Err(invalid("spec.template", "Required value")),
    };
    let pod = &spec.get("template").cloned().unwrap_or(Value::Null)["spec"];
    match pod["restartPolicy"].as_str() {
        Some("Never" | "OnFailure") => {}
        _ => {
            return Err(invalid(
                "spec.template.spec.restartPolicy",
                "Required value: valid values: \"OnFailure\", \"Never\"",
            ))
        }
    }
    let container = match pod["containers"].as_array().and_then(|a| a.first()) {
        Some(c) => c.clone(),
        None => return Err(invalid("spec.template.spec.containers", "Required value")),
    };
    let image = container["image"].as_str().unwrap_or_default();
    let workflow_id = image
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .split(['@', ':'])
        .next()
        .unwrap_or_default()
        .to_owned();
    let Some(workflow) = host.workflow(&workflow_id) else {
        return Err(invalid(
            "spec.template.spec.containers[0].image",
            format!("Invalid value: \"{image}\": no such image in this cluster's registry"),
        ));
    };
    // The workflow's variables from the container's environment, read per their type.
    let mut parameters = Map::new();
    for e in container["env"].as_array().into_iter().flatten() {
        let (Some(name), Some(value)) = (e["name"].as_str(), e.get("value")) else {
            continue;
        };
        let Some(text) = value.as_str() else {
            return Err(status(
                400,
                "BadRequest",
                format!("json: cannot unmarshal {value} into Go struct field EnvVar.spec.template.spec.containers.env.value of type string"),
            ));
        };
        let Some(var) = workflow.variables.iter().find(|v| v.name == name) else {
            continue;
        };
        let v = match var.ty {
            VarType::String => Value::String(text.to_owned()),
            _ => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())),
        };
        parameters.insert(name.to_owned(), v);
    }
    let name = match (meta["name"].as_str(), meta["generateName"].as_str()) {
        (Some(n), _) => n.to_owned(),
        (None, Some(g)) => format!("{g}{:05x}", rand::random::<u32>() & 0xf_ffff),
        (None, None) => {
            return Err(invalid(
                "metadata.name",
                "Required value: name or generateName is required",
            ))
        }
    };
    if !dns_label(&name) {
        return Err(invalid(
            "metadata.name",
            format!("Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"),
        ));
    }
    let tenant = caller.tenant.clone();
    // Locked from the lookup to the insert: two creates of one name make one job.
    let mut t = lock(&table.inner);
    if t.jobs.contains_key(&(tenant.clone(), name.clone())) {
        return Err(status(
            409,
            "AlreadyExists",
            format!("jobs.batch \"{name}\" already exists"),
        )
        .detail("name", json!(name))
        .detail("group", json!("batch"))
        .detail("kind", json!("jobs")));
    }
    let Some(run) = crate::ops::start_job(host, caller, &workflow_id, parameters)? else {
        return Err(invalid(
            "spec.template.spec.containers[0].image",
            "no such image",
        ));
    };
    let mut spec = Value::Object(spec);
    for (k, d) in [
        ("backoffLimit", json!(6)),
        ("completions", json!(1)),
        ("parallelism", json!(1)),
        ("suspend", json!(false)),
        ("completionMode", json!("NonIndexed")),
    ] {
        if spec.get(k).is_none() {
            spec[k] = d;
        }
    }
    t.next_version += 1;
    let job = Arc::new(Job {
        uid: crate::ops::uuid_v4(),
        resource_version: t.next_version,
        created: crate::util::now_rfc3339(),
        labels: meta.get("labels").cloned().unwrap_or(Value::Null),
        annotations: meta.get("annotations").cloned().unwrap_or(Value::Null),
        spec,
        name,
        namespace: tenant.clone(),
        run,
    });
    t.jobs.insert((tenant, job.name.clone()), job.clone());
    t.order.push(job.clone());
    Ok(Reply::json(201, &document(&job)))
}

/// `DELETE .../jobs/{name}[?propagationPolicy=Background|Foreground|Orphan]`: the job is
/// gone at once (its pods are stopped, the run cancelled); answered with a `Status` of
/// `Success`. A job that is gone is `404 NotFound`.
fn delete(table: &Table, caller: &Caller, req: &Req<'_>, name: &str) -> Result<Reply, ApiError> {
    let q = parse_query(req.query);
    if let Some((_, p)) = q.iter().find(|(k, _)| k == "propagationPolicy") {
        if !matches!(p.as_str(), "Background" | "Foreground" | "Orphan") {
            return Err(status(
                400,
                "BadRequest",
                format!("propagationPolicy {p} is not one of Background, Foreground, Orphan"),
            ));
        }
    }
    let job = lock(&table.inner)
        .jobs
        .remove(&(caller.tenant.clone(), name.to_owned()))
        .ok_or_else(|| not_found(name))?;
    // The pods stop: a run that is still going ends cancelled; a finished one stays as it was.
    let _ = runs::cancel(&job.run, "job deleted");
    Ok(Reply::json(
        200,
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": { "name": job.name, "group": "batch", "kind": "jobs", "uid": job.uid },
        }),
    ))
}

/// The Job as `GET` answers it. `status` follows the run: `startTime` and `active: 1` while
/// it runs, `succeeded: 1` with `completionTime` and a `Complete` condition, or `failed: 1`
/// with a `Failed` condition whose `message` is the run's error (Kubernetes 1.30's
/// conditions; later releases add `SuccessCriteriaMet` / `FailureTarget` before them). The
/// run's result, which Kubernetes keeps in no field, is the devhost's annotation
/// `devhost.openwop.dev/result` (JSON text).
fn document(job: &Job) -> Value {
    let st = job.run.lock();
    let mut status = Map::new();
    status.insert("startTime".into(), json!(st.started_at));
    let (active, succeeded, failed) = match st.status {
        RunStatus::Completed => (0, 1, 0),
        RunStatus::Failed => (0, 0, 1),
        RunStatus::Cancelled => (0, 0, 0),
        _ => (1, 0, 0),
    };
    if active > 0 {
        status.insert("active".into(), json!(active));
        status.insert("ready".into(), json!(active));
    }
    if succeeded > 0 {
        status.insert("succeeded".into(), json!(succeeded));
    }
    if failed > 0 {
        status.insert("failed".into(), json!(failed));
    }
    let now = st
        .completed_at
        .clone()
        .unwrap_or_else(|| st.started_at.clone());
    match st.status {
        RunStatus::Completed => {
            status.insert("completionTime".into(), json!(now));
            status.insert(
                "conditions".into(),
                json!([{ "type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now }]),
            );
        }
        RunStatus::Failed => {
            let message = st
                .error
                .as_ref()
                .and_then(|e| e["message"].as_str())
                .unwrap_or("Job has reached the specified backoff limit")
                .to_owned();
            status.insert(
                "conditions".into(),
                json!([{ "type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": message, "lastProbeTime": now, "lastTransitionTime": now }]),
            );
        }
        _ => {}
    }
    let mut annotations = match &job.annotations {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    if st.status == RunStatus::Completed {
        annotations.insert(
            "devhost.openwop.dev/result".into(),
            json!(Value::Object(st.variables.clone()).to_string()),
        );
    }
    let mut metadata = json!({
        "name": job.name,
        "namespace": job.namespace,
        "uid": job.uid,
        "resourceVersion": job.resource_version.to_string(),
        "generation": 1,
        "creationTimestamp": job.created,
    });
    if !job.labels.is_null() {
        metadata["labels"] = job.labels.clone();
    }
    if !annotations.is_empty() {
        metadata["annotations"] = Value::Object(annotations);
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": job.spec,
        "status": status,
    })
}

/// The Kubernetes `reason` and HTTP status of a v2 error code; a code already in
/// PascalCase keeps the status it came with.
fn reason(status: u16, code: &str) -> (u16, String) {
    if code.bytes().next().is_some_and(|b| b.is_ascii_uppercase()) {
        return (status, code.to_owned());
    }
    let (s, c) = match code {
        "validation_error" => (422, "Invalid"),
        "not_found" => (404, "NotFound"),
        "unauthenticated" => (401, "Unauthorized"),
        "forbidden" | "id_tenant_mismatch" => (403, "Forbidden"),
        "rate_limited" => (429, "TooManyRequests"),
        "runner_unavailable" => (503, "ServiceUnavailable"),
        "payload_too_large" => (413, "RequestEntityTooLarge"),
        // Any other code (an injected fault) takes the reason of its status.
        _ => (
            status,
            match status {
                404 => "NotFound",
                409 => "Conflict",
                429 => "TooManyRequests",
                503 => "ServiceUnavailable",
                504 => "Timeout",
                s if s >= 500 => "InternalError",
                _ => "BadRequest",
            },
        ),
    };
    (s, c.to_owned())
}

/// Re-dress a v2 error as a Kubernetes `Status` (`{kind: Status, status: Failure, message,
/// reason, details?, code}`).
pub(crate) fn outgoing(reply: Reply) -> Reply {
    let Some(e) = crate::ops::v2_error(
        &reply,
        &[("inputs.", "spec.template.spec.containers[0].env.")],
    ) else {
        return reply;
    };
    let (code, reason) = reason(e.status, &e.code);
    let details: Value = reply
        .body
        .as_ref()
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .map(|v| v["details"].clone())
        .filter(|d| d.is_object())
        .unwrap_or(Value::Null);
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": e.message,
        "reason": reason,
        "code": code,
    });
    if !details.is_null() {
        body["details"] = details;
    }
    crate::ops::redress(reply, code, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_rfc_1123_labels() {
        assert!(dns_label("mcp-0f1e2d3c-aaaa-4bbb-8ccc-0123456789ab"));
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn v2_codes_become_status_reasons() {
        assert_eq!(reason(400, "validation_error"), (422, "Invalid".into()));
        assert_eq!(reason(409, "AlreadyExists"), (409, "AlreadyExists".into()));
        assert_eq!(reason(500, "devhost.injected_fault").1, "InternalError");
        assert_eq!(reason(404, "devhost.injected_fault").1, "NotFound");
    }
}
