// Over 500 lines: the flavour's whole wire (routes, handlers, template and workflow documents, gRPC-gateway errors) and its unit tests, kept together so it reads as one API.
//! The argo flavour ([`crate::Flavor::Argo`]): the same runs served as Argo Workflows'
//! REST API (the argo-server's `/api/v1` gRPC gateway: WorkflowTemplateService and
//! WorkflowService, api/openapi-spec/swagger.json of argoproj/argo-workflows), so the
//! sidecar's mapping has a family whose JSON must be reshaped rather than pointed at: a
//! catalog whose inputs are a parameter list, a submit that takes arguments as
//! `"key=value"` strings, a waiting state found only by searching the map of a workflow's
//! nodes, and outputs as a list of `{name, value}`. The wire is in the crate docs ("Argo
//! flavour").
//!
//! A WorkflowTemplate is a workflow of the fixtures; its parameters are the workflow's
//! inputs (strings, as Argo's are: a submitted value is read per the input's type, as a
//! program reads its arguments). An open approval is a `Suspend` node in `Running` phase
//! while the workflow stays `Running`; an open question is one too, with the answers it
//! wants as supplied output parameters (Argo's "intermediate parameters").

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use http::Method;
use serde_json::{json, Map, Value};

use crate::api::{json_object, ApiError, Reply};
use crate::auth::{authenticate, Caller};
use crate::faults::RouteClass;
use crate::fixtures::{VarType, Workflow};
use crate::ops;
use crate::runs::{OpenInterrupt, OpenKind, Run, RunStatus};
use crate::state::{faults_admin, HostState, Req};
use crate::util::lock;
use crate::util::parse_query;

/// The label Argo puts on a workflow submitted from a template.
const TEMPLATE_LABEL: &str = "workflows.argoproj.io/workflow-template";

/// The flavour's workflows by `(namespace, name)`.
#[derive(Default)]
pub(crate) struct Table {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    workflows: HashMap<(String, String), Arc<Wf>>,
    order: Vec<Arc<Wf>>,
    next_version: u64,
}

impl Table {
    /// The run behind workflow `name`, whichever namespace's it is: the devhost's own view.
    pub(crate) fn run_of(&self, name: &str) -> Option<Arc<Run>> {
        lock(&self.inner)
            .order
            .iter()
            .rev()
            .find(|w| w.name == name)
            .map(|w| w.run.clone())
    }
}

struct Wf {
    name: String,
    namespace: String,
    uid: String,
    resource_version: u64,
    template: String,
    labels: Map<String, Value>,
    /// The arguments as submitted, `[{name, value}]`.
    parameters: Vec<Value>,
    /// How a stop or terminate ended it (`spec.shutdown`).
    shutdown: Mutex<Option<&'static str>>,
    run: Arc<Run>,
}

enum Route<'a> {
    Templates(&'a str),
    Template(&'a str, &'a str),
    Submit(&'a str),
    Workflows(&'a str),
    Workflow(&'a str, &'a str),
    Action(&'a str, &'a str, Action),
    Faults,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    Resume,
    Stop,
    Terminate,
    Set,
}

fn route(path: &str) -> Option<Route<'_>> {
    let segs: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    if segs.iter().skip(1).any(|s| s.is_empty()) {
        return None;
    }
    Some(match segs[..] {
        ["_devhost", "faults"] => Route::Faults,
        ["api", "v1", "workflow-templates", ns] => Route::Templates(ns),
        ["api", "v1", "workflow-templates", ns, name] => Route::Template(ns, name),
        ["api", "v1", "workflows", ns] => Route::Workflows(ns),
        ["api", "v1", "workflows", ns, "submit"] => Route::Submit(ns),
        ["api", "v1", "workflows", ns, name] => Route::Workflow(ns, name),
        ["api", "v1", "workflows", ns, name, action] => {
            let a = match action {
                "resume" => Action::Resume,
                "stop" => Action::Stop,
                "terminate" => Action::Terminate,
                "set" => Action::Set,
                _ => return None,
            };
            Route::Action(ns, name, a)
        }
        _ => return None,
    })
}

/// The fault-switch class of a request (`None` for the admin endpoint).
pub(crate) fn classify(method: &Method, path: &str) -> Option<RouteClass> {
    Some(match route(path) {
        Some(Route::Faults) => return None,
        Some(Route::Submit(_)) if *method == Method::POST => RouteClass::CreateRun,
        Some(Route::Workflow(..)) if *method == Method::GET => RouteClass::GetRun,
        // A stop is a cancel unless its body selects a node (read before the body is):
        // both count as cancels here.
        Some(Route::Action(_, _, Action::Terminate | Action::Stop)) => RouteClass::Cancel,
        Some(Route::Action(..)) if *method == Method::PUT => RouteClass::Resolve,
        _ => RouteClass::Other,
    })
}

/// A gRPC-gateway error: `{code: <google.rpc.Code number>, message, details: []}` with the
/// HTTP status the gateway maps that code to.
fn grpc(code: u16, message: impl Into<String>) -> ApiError {
    let (status, name) = match code {
        3 => (400, "InvalidArgument"),
        5 => (404, "NotFound"),
        6 => (409, "AlreadyExists"),
        7 => (403, "PermissionDenied"),
        9 => (400, "FailedPrecondition"),
        12 => (501, "Unimplemented"),
        16 => (401, "Unauthenticated"),
        _ => (500, "Internal"),
    };
    ApiError::new(status, name, message)
}

/// Serve one request; errors come back in the gateway's form ([`outgoing`]).
pub(crate) fn handle(host: &HostState, table: &Table, req: &Req<'_>) -> Reply {
    let reply = serve(host, table, req).unwrap_or_else(ApiError::into_reply);
    outgoing(reply)
}

fn serve(host: &HostState, table: &Table, req: &Req<'_>) -> Result<Reply, ApiError> {
    let Some(route) = route(req.path) else {
        return Err(grpc(5, "Not Found"));
    };
    if let Route::Faults = route {
        return faults_admin(host, req);
    }
    let caller = authenticate(&host.config, &host.oauth, req.headers)?;
    let m = req.method;
    let (ns, scope) = match (&route, m) {
        (Route::Templates(ns) | Route::Template(ns, _), &Method::GET) => (*ns, "manifest:read"),
        (Route::Submit(ns), &Method::POST) => (*ns, "runs:create"),
        (Route::Workflows(ns) | Route::Workflow(ns, _), &Method::GET) => (*ns, "runs:read"),
        (Route::Action(ns, _, Action::Terminate), &Method::PUT) => (*ns, "runs:cancel"),
        (Route::Action(ns, _, Action::Stop), &Method::PUT) => (*ns, "runs:cancel"),
        (Route::Action(ns, _, _), &Method::PUT) => (*ns, "approvals:respond"),
        _ => return Err(grpc(12, format!("Method {m} is not allowed here"))),
    };
    // RBAC: a credential may use its own namespace (its tenant) only.
    if ns != caller.tenant {
        return Err(grpc(
            7,
            format!(
                "workflows.argoproj.io is forbidden: User \"{}\" cannot access resources in the namespace \"{ns}\"",
                caller.subject_id
            ),
        ));
    }
    caller.require(scope)?;
    match route {
        Route::Faults => unreachable!("answered above"),
        Route::Templates(ns) => {
            let limit = parse_query(req.query)
                .iter()
                .find(|(k, _)| k == "listOptions.limit")
                .and_then(|(_, v)| v.parse::<usize>().ok())
                .filter(|n| *n > 0);
            let mut items: Vec<Value> = ops::catalog(host)
                .unwrap_or_default()
                .iter()
                .map(|w| template(w, ns))
                .collect();
            if let Some(n) = limit {
                items.truncate(n);
            }
            Ok(Reply::json(
                200,
                &json!({ "metadata": { "resourceVersion": "1" }, "items": items }),
            ))
        }
        Route::Template(ns, name) => ops::catalog(host)
            .unwrap_or_default()
            .iter()
            .find(|w| w.id == name)
            .map(|w| Reply::json(200, &template(w, ns)))
            .ok_or_else(|| {
                grpc(
                    5,
                    format!("workflowtemplates.argoproj.io \"{name}\" not found"),
                )
            }),
        Route::Submit(_) => submit(host, table, &caller, req),
        Route::Workflows(_) => {
            let t = lock(&table.inner);
            let items: Vec<Value> = t
                .order
                .iter()
                .filter(|w| w.namespace == caller.tenant)
                .rev()
                .map(|w| document(w))
                .collect();
            Ok(Reply::json(
                200,
                &json!({ "metadata": { "resourceVersion": t.next_version.to_string() }, "items": items }),
            ))
        }
        Route::Workflow(_, name) => Ok(Reply::json(200, &document(&*wf_of(table, &caller, name)?))),
        Route::Action(_, name, action) => {
            let wf = wf_of(table, &caller, name)?;
            act(host, &caller, &wf, action, req.body)?;
            Ok(Reply::json(200, &document(&wf)))
        }
    }
}

fn wf_of(table: &Table, caller: &Caller, name: &str) -> Result<Arc<Wf>, ApiError> {
    lock(&table.inner)
        .workflows
        .get(&(caller.tenant.clone(), name.to_owned()))
        .cloned()
        .ok_or_else(|| grpc(5, format!("workflows.argoproj.io \"{name}\" not found")))
}

/// A parameter's value as Argo holds it: a string (JSON text for anything else).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One WorkflowTemplate: the workflow's inputs as `spec.arguments.parameters` (`value` is
/// the default; none means the submit must give one), the title and description in the
/// annotations Argo's UI reads.
fn template(w: &Workflow, ns: &str) -> Value {
    let e = ops::entry(w);
    let schema = &e.parameters;
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut params = Vec::new();
    for (name, prop) in schema["properties"].as_object().into_iter().flatten() {
        let mut p = json!({ "name": name });
        if let Some(d) = prop.get("default") {
            p["value"] = json!(text(d));
        } else if !required.contains(&name.as_str()) {
            // Optional without a default: an empty value Argo passes on as given.
            p["value"] = json!("");
        }
        if let Some(Value::Array(en)) = prop.get("enum") {
            p["enum"] = Value::Array(en.iter().map(|v| json!(text(v))).collect());
        }
        if let Some(d) = prop.get("description") {
            p["description"] = d.clone();
        }
        params.push(p);
    }
    let mut annotations = json!({ "workflows.argoproj.io/title": w.name });
    if !w.description.is_empty() {
        annotations["workflows.argoproj.io/description"] = json!(w.description);
    }
    json!({
        "metadata": {
            "name": w.id,
            "namespace": ns,
            "uid": format!("00000000-0000-4000-8000-{:012x}", fnv(&w.id) as u64),
            "annotations": annotations,
        },
        "spec": {
            "entrypoint": "main",
            "arguments": { "parameters": params },
        },
    })
}

/// `POST /api/v1/workflows/{ns}/submit {resourceKind: WorkflowTemplate, resourceName,
/// submitOptions: {name?, generateName?, labels?, parameters?: ["key=value"]}}`: a
/// workflow from the template; a template parameter without a value that the submit does
/// not give is `400` (`spec.arguments.NAME.value is required`), a taken name `409`.
fn submit(
    host: &HostState,
    table: &Table,
    caller: &Caller,
    req: &Req<'_>,
) -> Result<Reply, ApiError> {
    let body = json_object(req.body, false)?;
    match body.get("resourceKind").and_then(Value::as_str) {
        Some("WorkflowTemplate" | "workflowtemplate") => {}
        Some(k) => return Err(grpc(3, format!("resourceKind {k} is not supported"))),
        None => return Err(grpc(3, "resourceKind is required")),
    }
    let Some(tpl) = body.get("resourceName").and_then(Value::as_str) else {
        return Err(grpc(3, "resourceName is required"));
    };
    let Some(workflow) = host.workflow(tpl) else {
        return Err(grpc(
            5,
            format!("workflowtemplates.argoproj.io \"{tpl}\" not found"),
        ));
    };
    let opts = body.get("submitOptions").cloned().unwrap_or(json!({}));
    // The template's parameters, then the submitted ones over them (Argo's ApplySubmitOpts).
    let declared = template(&workflow, &caller.tenant)["spec"]["arguments"]["parameters"].clone();
    let mut given: Vec<(String, String)> = Vec::new();
    for p in opts["parameters"].as_array().into_iter().flatten() {
        let Some(s) = p.as_str() else {
            return Err(grpc(3, "submitOptions.parameters must be strings"));
        };
        let Some((k, v)) = s.split_once('=') else {
            return Err(grpc(
                3,
                format!("expected parameter of the form: NAME=VALUE. Received: {s}"),
            ));
        };
        given.retain(|(g, _)| g != k);
        given.push((k.to_owned(), v.to_owned()));
    }
    for d in declared.as_array().into_iter().flatten() {
        let name = d["name"].as_str().unwrap_or_default();
        if d.get("value").is_none() && !given.iter().any(|(k, _)| k == name) {
            return Err(grpc(3, format!("spec.arguments.{name}.value is required")));
        }
    }
    // The workflow's inputs: the submitted values, read per the input's type.
    let mut inputs = Map::new();
    for (k, v) in &given {
        let Some(var) = workflow.variables.iter().find(|x| &x.name == k) else {
            continue;
        };
        let value = match var.ty {
            VarType::String => Value::String(v.clone()),
            _ => serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.clone())),
        };
        inputs.insert(k.clone(), value);
    }
    let mut labels = Map::new();
    if let Some(l) = opts["labels"].as_str() {
        for kv in l.split(',').filter(|s| !s.is_empty()) {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(grpc(3, format!("labels must be key=value: {kv}")));
            };
            labels.insert(k.to_owned(), json!(v));
        }
    }
    labels.insert(TEMPLATE_LABEL.into(), json!(tpl));
    let name = match (opts["name"].as_str(), opts["generateName"].as_str()) {
        (Some(n), _) if !n.is_empty() => n.to_owned(),
        (_, Some(g)) if !g.is_empty() => format!("{g}{}", suffix()),
        _ => format!("{tpl}-{}", suffix()),
    };
    if !dns_subdomain(&name) {
        return Err(grpc(
            3,
            format!("Workflow.argoproj.io \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"),
        ));
    }
    let tenant = caller.tenant.clone();
    // Locked from the lookup to the insert: two submits of one name make one workflow.
    let mut t = lock(&table.inner);
    if t.workflows.contains_key(&(tenant.clone(), name.clone())) {
        return Err(grpc(
            6,
            format!("workflows.argoproj.io \"{name}\" already exists"),
        ));
    }
    let Some(run) = ops::start_job(host, caller, tpl, inputs)? else {
        return Err(grpc(
            5,
            format!("workflowtemplates.argoproj.io \"{tpl}\" not found"),
        ));
    };
    let parameters = declared
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            let n = d["name"].as_str().unwrap_or_default();
            let v = given
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| json!(v))
                .unwrap_or_else(|| d["value"].clone());
            json!({ "name": n, "value": v })
        })
        .collect();
    t.next_version += 1;
    let wf = Arc::new(Wf {
        uid: ops::uuid_v4(),
        resource_version: t.next_version,
        template: tpl.to_owned(),
        labels,
        parameters,
        shutdown: Mutex::new(None),
        name,
        namespace: tenant.clone(),
        run,
    });
    t.workflows.insert((tenant, wf.name.clone()), wf.clone());
    t.order.push(wf.clone());
    Ok(Reply::json(200, &document(&wf)))
}

/// Argo's five-character name suffix.
fn suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHA[rand::random::<u32>() as usize % ALPHA.len()] as char)
        .collect()
}

/// A DNS-1123 subdomain (RFC 1123): what a Kubernetes object's name must be.
fn dns_subdomain(s: &str) -> bool {
    (1..=253).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// FNV-1a (32 bits): Argo names a node `<workflow>-<hash of the node's name>`.
fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// The id of the node an open gate is.
fn node_id(wf: &Wf, o: &OpenInterrupt) -> String {
    format!("{}-{}", wf.name, fnv(&o.interrupt_id))
}

/// Does `o` (a node of `wf`) match a node field selector (`field=value`, comma-separated,
/// all must hold; fields `id`, `displayName`, `name`, `templateName`, `phase`)?
fn selects(wf: &Wf, o: &OpenInterrupt, selector: &str) -> Result<bool, ApiError> {
    let mut all = true;
    for term in selector.split(',').filter(|t| !t.is_empty()) {
        let (field, want, negate) = match term.split_once("!=") {
            Some((f, v)) => (f, v, true),
            None => match term.split_once('=') {
                Some((f, v)) => (f, v.strip_prefix('=').unwrap_or(v), false),
                None => return Err(grpc(3, format!("invalid node field selector: {term}"))),
            },
        };
        let have = match field {
            "id" => node_id(wf, o),
            "displayName" | "templateName" => o.node_id.clone(),
            "name" => format!("{}[0].{}", wf.name, o.node_id),
            "phase" => "Running".to_owned(),
            other => return Err(grpc(3, format!("unsupported node field selector {other}"))),
        };
        all &= (have == want) != negate;
    }
    Ok(all)
}

/// `resume`, `stop`, `terminate` and `set` of a workflow.
///
/// * `resume {nodeFieldSelector?}`: every open approval it selects (all, without one) is
///   approved; none selected is `400` (FailedPrecondition).
/// * `stop {nodeFieldSelector?, message?}`: with a selector, the selected approval is
///   rejected or the selected question declined (the node fails, and the workflow with
///   it); without one the workflow stops
///   (`spec.shutdown: Stop`).
/// * `terminate {}`: the workflow stops at once (`spec.shutdown: Terminate`).
/// * `set {nodeFieldSelector, outputParameters: "<JSON object text>", phase?: Succeeded}`:
///   answers the selected open question with the supplied output parameters.
///
/// Stopping or terminating a workflow that has completed is `500` (Argo's
/// `cannot shutdown a completed workflow`).
fn act(
    host: &HostState,
    caller: &Caller,
    wf: &Arc<Wf>,
    action: Action,
    body: &[u8],
) -> Result<(), ApiError> {
    let obj = json_object(body, true)?;
    let selector = obj
        .get("nodeFieldSelector")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if matches!(action, Action::Terminate) || (action == Action::Stop && selector.is_empty()) {
        if wf.run.lock().status.is_terminal() {
            return Err(grpc(13, "cannot shutdown a completed workflow"));
        }
        let how = if action == Action::Stop {
            "Stop"
        } else {
            "Terminate"
        };
        *lock(&wf.shutdown) = Some(how);
        // The stop's message is what the devhost records as the cancel's reason.
        let reason = match obj.get("message").and_then(Value::as_str) {
            Some(m) if !m.is_empty() => m.to_owned(),
            _ => format!("Stopped with strategy '{how}'"),
        };
        crate::runs::cancel(&wf.run, &reason)?;
        return Ok(());
    }
    // resume answers approvals, set questions, stop either (a question stopped is declined).
    let open: Vec<OpenInterrupt> = wf
        .run
        .lock()
        .open
        .iter()
        .filter(|o| {
            let approval = matches!(o.kind, OpenKind::Approval { .. });
            match action {
                Action::Resume => approval,
                Action::Set => !approval,
                _ => true,
            }
        })
        .cloned()
        .collect();
    let mut chosen = Vec::new();
    for o in open {
        if selects(wf, &o, &selector)? {
            chosen.push(o);
        }
    }
    if chosen.is_empty() || (action == Action::Set && selector.is_empty()) {
        return Err(grpc(
            9,
            format!("no suspended node matches the node field selector \"{selector}\""),
        ));
    }
    for gate in chosen {
        let value = match action {
            Action::Resume => json!({ "action": "accept" }),
            Action::Stop if matches!(gate.kind, OpenKind::Clarification { .. }) => {
                json!({ "declined": true })
            }
            Action::Stop => {
                let mut v = json!({ "action": "reject" });
                if let Some(m) = obj.get("message") {
                    v["comment"] = m.clone();
                }
                v
            }
            _ => {
                let raw = obj
                    .get("outputParameters")
                    .and_then(Value::as_str)
                    .unwrap_or("{}");
                match serde_json::from_str::<Value>(raw) {
                    Ok(Value::Object(m)) => Value::Object(m),
                    _ => return Err(grpc(3, "outputParameters must be a JSON object")),
                }
            }
        };
        ops::answer_gate(host, &wf.run, caller, &gate, value)?;
    }
    Ok(())
}

/// The Workflow as `GET` answers it: `status.phase` (`Pending`, `Running`, `Succeeded`,
/// `Failed`, `Error`), `status.nodes` (the root `Steps` node and one `Suspend` node per open
/// gate), `status.outputs.parameters` once it succeeded, `status.message` once it failed.
fn document(wf: &Wf) -> Value {
    let st = wf.run.lock();
    let shutdown = *lock(&wf.shutdown);
    let phase = match st.status {
        RunStatus::Pending => "Pending",
        RunStatus::Completed => "Succeeded",
        RunStatus::Failed | RunStatus::Cancelled => "Failed",
        _ => "Running",
    };
    let mut nodes = Map::new();
    let mut children = Vec::new();
    for o in &st.open {
        let id = node_id(wf, o);
        children.push(json!(id));
        let mut n = json!({
            "id": id,
            "name": format!("{}[0].{}", wf.name, o.node_id),
            "displayName": o.node_id,
            "type": "Suspend",
            "templateName": o.node_id,
            "phase": "Running",
            "startedAt": st.started_at,
        });
        match &o.kind {
            OpenKind::Approval { .. } => {
                let (title, description, _, _) = ops::approval_facts(o);
                if !title.is_null() {
                    n["message"] = title;
                }
                if !description.is_null() {
                    n["inputs"] = json!({ "parameters": [{ "name": "description", "value": text(&description) }] });
                }
            }
            OpenKind::Clarification { .. } => {
                let (questions, schema) = ops::input_facts(o);
                n["message"] = json!(ops::input_message(&questions));
                let outs: Vec<Value> = schema["properties"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, s)| {
                        json!({ "name": k, "valueFrom": { "supplied": {} }, "description": s.get("description") })
                    })
                    .collect();
                n["outputs"] = json!({ "parameters": outs });
            }
        }
        nodes.insert(id, n);
    }
    let root = json!({
        "id": wf.name,
        "name": wf.name,
        "displayName": wf.name,
        "type": "Steps",
        "templateName": "main",
        "phase": phase,
        "startedAt": st.started_at,
        "children": children,
    });
    nodes.insert(wf.name.clone(), root);
    let mut status = json!({
        "phase": phase,
        "startedAt": st.started_at,
        "finishedAt": st.completed_at,
        "nodes": nodes,
    });
    if st.status == RunStatus::Completed {
        let params: Vec<Value> = st
            .variables
            .iter()
            .map(|(k, v)| json!({ "name": k, "value": text(v) }))
            .collect();
        status["outputs"] = json!({ "parameters": params });
    }
    match st.status {
        RunStatus::Failed => {
            status["message"] = st
                .error
                .as_ref()
                .map(|e| e["message"].clone())
                .unwrap_or_else(|| json!("child failed"));
        }
        RunStatus::Cancelled => {
            status["message"] = json!(format!(
                "Stopped with strategy '{}'",
                shutdown.unwrap_or("Terminate")
            ));
        }
        _ => {}
    }
    let mut labels = wf.labels.clone();
    labels.insert("workflows.argoproj.io/phase".into(), json!(phase));
    labels.insert(
        "workflows.argoproj.io/completed".into(),
        json!(if st.status.is_terminal() {
            "true"
        } else {
            "false"
        }),
    );
    let mut spec = json!({
        "workflowTemplateRef": { "name": wf.template },
        "arguments": { "parameters": wf.parameters },
    });
    if let Some(s) = shutdown {
        spec["shutdown"] = json!(s);
    }
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "name": wf.name,
            "namespace": wf.namespace,
            "uid": wf.uid,
            "resourceVersion": wf.resource_version.to_string(),
            "creationTimestamp": st.started_at,
            "labels": labels,
        },
        "spec": spec,
        "status": status,
    })
}

/// The gRPC code of a v2 error code; a code this flavour made keeps its own.
fn grpc_code(status: u16, code: &str) -> (u16, u16) {
    let c = match code {
        "InvalidArgument" => 3,
        "NotFound" | "not_found" => 5,
        "AlreadyExists" => 6,
        "PermissionDenied" | "forbidden" | "id_tenant_mismatch" => 7,
        "FailedPrecondition" | "interrupt_already_resolved" | "run_terminal" => 9,
        "Unimplemented" => 12,
        "Unauthenticated" | "unauthenticated" => 16,
        "validation_error" => 3,
        "rate_limited" => 8,
        "runner_unavailable" => 14,
        "Internal" => 13,
        _ => match status {
            400 => 3,
            404 => 5,
            409 => 10,
            429 => 8,
            503 => 14,
            504 => 4,
            _ => 13,
        },
    };
    let http = match c {
        3 | 9 => 400,
        4 => 504,
        5 => 404,
        6 | 10 => 409,
        7 => 403,
        8 => 429,
        12 => 501,
        14 => 503,
        16 => 401,
        _ => 500,
    };
    (http, c)
}

/// Re-dress a v2 error as the gateway's `{code, message, details: []}`.
pub(crate) fn outgoing(reply: Reply) -> Reply {
    let Some(e) = ops::v2_error(&reply, &[("inputs.", "spec.arguments.")]) else {
        return reply;
    };
    let (status, code) = grpc_code(e.status, &e.code);
    ops::redress(
        reply,
        status,
        &json!({ "code": code, "message": e.message, "details": [] }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_rfc_1123_subdomains() {
        assert!(dns_subdomain("greet-x7k2p"));
        assert!(dns_subdomain("mcp.0f1e2d3c-aaaa"));
        for bad in ["", "-a", "a-", "A", "a_b"] {
            assert!(!dns_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn errors_carry_the_gateway_code_and_status() {
        assert_eq!(grpc_code(404, "not_found"), (404, 5));
        assert_eq!(grpc_code(400, "InvalidArgument"), (400, 3));
        assert_eq!(grpc_code(409, "run_terminal"), (400, 9));
        assert_eq!(grpc_code(500, "Internal"), (500, 13));
        assert_eq!(grpc_code(503, "devhost.injected_fault"), (503, 14));
    }
}
