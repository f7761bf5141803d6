//! The fault tests' harness (tests/it/faults.rs): a sidecar whose host routes time out fast,
//! the bounds a faulted request must answer within, what the client may see, and the rows
//! docs/faults.md is filled from.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openwop_devhost::{Fault, FaultKind, RouteClass};
use openwop_mcp_sidecar::config::{Config, Readiness, ReadyCredential, Secret};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::*;

mod step;
// tests/rmcp_client.rs includes the support module too and uses none of this.
#[allow(unused_imports)]
pub use step::*;

/// The per-attempt timeout the fault tests configure for every host route.
pub const T: Duration = Duration::from_millis(300);
/// Retry backoff of a retried route: 50 ms, then 100 ms (src/host/retry.rs).
pub const BACKOFF: Duration = Duration::from_millis(150);
/// What the test machine may add on top of a computed bound.
pub const SLACK: Duration = Duration::from_millis(700);
/// No request may take longer than this, whatever the fault.
pub const HANG: Duration = Duration::from_secs(30);

pub const GENERIC: &str = "the host failed to serve the request";
pub const RATE: &str = "the host is rate limiting; retry later";

/// Every host route gets the per-attempt timeout `t`.
pub fn timeouts(c: &mut Config, t: Duration) {
    c.upstream.request_timeout = t;
    let routes = Arc::make_mut(&mut c.routes);
    for route in routes.by_op.values_mut() {
        route.timeout = t;
    }
}

/// A sidecar whose host routes all time out after [`T`].
pub async fn fault_env(f: impl FnOnce(&mut Config)) -> Env {
    watch_panics();
    env_with(|c| {
        timeouts(c, T);
        // The fault rows read tasks of quick runs (conformance-noop): without the
        // immediate-result window every tasked call is a task, as these rows expect.
        c.mcp.task_immediate_window = Duration::ZERO;
        if foreign() {
            ready_on_catalog(c);
        }
        f(c);
    })
    .await
}

/// `/readyz` asks the flavour's catalog route with [`A`]'s credential, as the aip151 and azure
/// examples suggest under `host.readiness` (those hosts have no discovery document and every
/// route needs a credential): readiness follows the same start-up dependency as the tools.
fn ready_on_catalog(c: &mut Config) {
    let path = match flavor() {
        Flavor::Aip151 => "/v1/projects/acme/jobTypes?pageSize=1".to_string(),
        // No catalog route: the Job list the credential probe reads
        // (config/kubernetes.example.yaml `host.readiness`).
        Flavor::K8s => "/apis/batch/v1/namespaces/acme/jobs?limit=1".to_string(),
        Flavor::Argo => "/api/v1/workflow-templates/acme?listOptions.limit=1".to_string(),
        _ => format!("/jobTypes?api-version={AZURE_API}&maxpagesize=1"),
    };
    let token = http::HeaderValue::from_str(&format!("Bearer {A}")).unwrap();
    let mapping = Arc::make_mut(&mut c.mapping);
    mapping.wire.readiness = Readiness {
        fixed: Some((http::Method::GET, path)),
        credential: Some(ReadyCredential::Value(Secret::new(token))),
    };
}

/// Runs `f`, failing the test if it takes longer than `limit` (a hung request).
pub async fn timed<F: Future>(limit: Duration, what: &str, f: F) -> (F::Output, Duration) {
    let t = Instant::now();
    match tokio::time::timeout(limit, f).await {
        Ok(v) => (v, t.elapsed()),
        Err(_) => panic!("{what}: no answer within {limit:?}: the request hung"),
    }
}

/// One observation for docs/faults.md.
pub fn row(fault: &str, route: &str, request: &str, seen: &str, took: Duration, owned: &str) {
    eprintln!(
        "FAULT| {fault} | {route} | {request} | {seen} | {} ms | {owned}",
        took.as_millis()
    );
}

/// What the client saw, in one line.
pub fn seen(r: &Rpc) -> String {
    let retry_after = r
        .headers
        .get("retry-after")
        .map(|v| format!(" Retry-After: {}", v.to_str().unwrap_or("?")))
        .unwrap_or_default();
    match r.error_code() {
        Some(code) => format!(
            "HTTP {}{retry_after}, {code} \"{}\"",
            r.status,
            r.body["error"]["message"].as_str().unwrap_or("")
        ),
        None => {
            let res = r.result();
            let what = match res["resultType"].as_str() {
                Some("task") => format!("CreateTaskResult status {}", res["status"]),
                Some("complete") if res.get("isError").is_some() => {
                    format!("CallToolResult isError {}", res["isError"])
                }
                Some("complete") if res.get("status").is_some() => {
                    format!("task status {}", res["status"])
                }
                Some("complete") if res.get("tools").is_some() => "tools".to_string(),
                Some(other) => other.to_string(),
                None => format!("{}", r.body),
            };
            format!("HTTP {}{retry_after}, result {what}", r.status)
        }
    }
}

/// `-32603` with the generic message, HTTP 200, and nothing of the host in the answer.
pub fn assert_internal(r: &Rpc, what: &str) {
    assert_eq!(
        (r.status, r.error_code()),
        (200, Some(-32603)),
        "{what}: {}",
        r.text
    );
    assert_eq!(r.body["error"]["message"], GENERIC, "{what}: {}", r.text);
    assert_no_leak(r, what);
}

/// No upstream detail (address, OS error, host error code or body) reaches the MCP client.
pub fn assert_no_leak(r: &Rpc, what: &str) {
    let lower = r.text.to_ascii_lowercase();
    for bad in [
        "127.0.0.1",
        "refused",
        "connection",
        "injected",
        "devhost",
        "runner_unavailable",
        "internal_error",
        "rate_limited",
        "truncated",
        "tcp",
        "os error",
    ] {
        assert!(!lower.contains(bad), "{what} leaks {bad:?}: {}", r.text);
    }
    assert!(r.body["error"].get("data").is_none(), "{what}: {}", r.text);
}

pub fn assert_rate_limited(r: &Rpc, retry_after: &str, what: &str) {
    assert_eq!(
        (r.status, r.error_code()),
        (429, Some(-32603)),
        "{what}: {}",
        r.text
    );
    assert_eq!(r.body["error"]["message"], RATE, "{what}");
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some(retry_after),
        "{what}: Retry-After passes through"
    );
    assert_no_leak(r, what);
}

/// The ack of tasks/update and tasks/cancel.
pub fn assert_ack(r: &Rpc, what: &str) {
    assert_eq!(r.status, 200, "{what}: {}", r.text);
    assert_eq!(
        r.result(),
        &json!({"resultType": "complete"}),
        "{what}: {}",
        r.text
    );
}

/// A fault env whose sidecar reaches the devhost through an [`Outage`] forwarder.
pub async fn outage_env(f: impl FnOnce(&mut Config)) -> (Env, Outage) {
    let outage = Outage::start();
    let env = fault_env(|c| {
        outage.route(c);
        f(c);
    })
    .await;
    (env, outage)
}

/// The route class a logical host route is faulted and counted on under the suite's flavour
/// ([`flavor`]), so one fault table serves every flavour.
pub fn on_flavor(route: RouteClass) -> RouteClass {
    match (flavor(), route) {
        // The aip151 and azure hosts have no discovery document: what the sidecar needs from
        // them first is their own job type catalog ([`route_path`]), which their devhost
        // classes `other` (devhost/src/aip151.rs, devhost/src/azure.rs; nothing else the
        // sidecar calls there is in that class).
        (Flavor::Aip151 | Flavor::Azure, RouteClass::Discovery) => RouteClass::Other,
        // The k8s host has neither a discovery document nor a catalog: what the sidecar needs
        // from it first is the credential probe, its Job list, which its devhost classes
        // `other` (devhost/src/k8s.rs).
        (Flavor::K8s, RouteClass::Discovery | RouteClass::ListRuns) => RouteClass::Other,
        // azure has no run list: the suite's run list path is its job type list (`rest_path`).
        (Flavor::Azure, RouteClass::ListRuns) => RouteClass::Other,
        _ => route,
    }
}

/// The route a run is followed on once its event stream is gone: the event poll, or on the
/// aip151 and azure hosts, which have no event log (`host.follow: poll`), the run itself.
pub fn follow_route() -> RouteClass {
    match foreign() {
        false => RouteClass::Poll,
        true => RouteClass::GetRun,
    }
}

/// The host path of a logical route under the suite's flavour, for the rows' route column.
pub fn route_path(route: RouteClass) -> &'static str {
    match (flavor(), route) {
        (Flavor::Aip151, RouteClass::Discovery | RouteClass::Other) => {
            "catalog (GET /v1/projects/{p}/jobTypes)"
        }
        (Flavor::Azure, RouteClass::Discovery | RouteClass::ListRuns | RouteClass::Other) => {
            "catalog (GET /jobTypes)"
        }
        (Flavor::K8s, RouteClass::Discovery | RouteClass::ListRuns | RouteClass::Other) => {
            "probe (GET .../jobs?limit=1)"
        }
        _ => route.as_str(),
    }
}

/// A fault on every request of `route` ([`on_flavor`]) until
/// [`openwop_devhost::Faults::clear`].
pub fn always(env: &Env, route: RouteClass, status: u16) {
    env.host.faults().add(Fault {
        route: on_flavor(route),
        kind: FaultKind::Status {
            status,
            retry_after: None,
        },
        times: None,
    });
}

/// How many requests of `route` ([`on_flavor`]) the host has seen.
pub fn count(env: &Env, route: RouteClass) -> u64 {
    env.host.faults().count(on_flavor(route))
}

pub fn cancel_sample(outcome: &str) -> String {
    format!(
        "openwop_sidecar_owned_run_cancels_total{{phase=\"before_head\",outcome=\"{outcome}\"}} "
    )
}

/// A task of `conformance-approval` waiting on its gate, and the key of its input request; on
/// a host without a waiting state ([`waits`]), a running task and a key nothing asked about.
pub async fn waiting_task(env: &Env) -> (String, String) {
    let task = tasked(env, A, open_tool(), json!({})).await;
    let want = open_status().0;
    let b = env.poll_task(A, &task, |r| r["status"] == want, 10).await;
    let key = if waits() {
        first_input_key(&b["result"])
    } else {
        "acme/i-never-asked".to_string()
    };
    (task, key)
}

pub fn approve(task: &str, key: &str) -> Value {
    json!({"taskId": task, "inputResponses": { key: approval() }})
}

pub async fn get(env: &Env, task: &str) -> Rpc {
    env.task_rpc(A, "tasks/get", task).await
}

/// A blocking `tools/call` answered as SSE (first Accept entry `text/event-stream`).
pub async fn sse_call(env: &Env, tool: &str, args: Value) -> Rpc {
    let body = body_of(
        9,
        "tools/call",
        json!({"name": tool, "arguments": args}),
        json!({}),
    );
    let resp = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {A}"))
        .header("Content-Type", "application/json")
        .header("Accept", "text/event-stream, application/json")
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", tool)
        .body(body.to_string())
        .send()
        .await
        .expect("sidecar answers");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    let body = sse_messages(&text)
        .into_iter()
        .rev()
        .find(|m| m.get("id").is_some())
        .unwrap_or(Value::Null);
    Rpc {
        status,
        headers,
        text,
        body,
    }
}

/// Writes one raw blocking `tools/call` and returns the open socket (closed by the test).
pub async fn raw_call(env: &Env, tool: &str, args: Value) -> TcpStream {
    let body = body_of(
        11,
        "tools/call",
        json!({"name": tool, "arguments": args}),
        json!({}),
    );
    raw_post(env, &body, "application/json", A).await
}

/// Starts a long blocking call, waits for its run, then closes the connection: the run is
/// owned and must be cancelled. Returns the run id and when the client went away.
pub async fn orphan_a_run(env: &Env) -> (String, Instant) {
    orphan_a_run_after(env, || {}).await
}

/// [`orphan_a_run`], calling `at_close` right before the connection is closed, with no await
/// in between (so the sidecar sees the client's FIN before anything `at_close` sets off).
pub async fn orphan_a_run_after(env: &Env, at_close: impl FnOnce()) -> (String, Instant) {
    let before = env.run_ids(A, "conformance-cancellable").await;
    let mut s = raw_call(env, "conformance-cancellable", json!({"delayMs": 20000})).await;
    let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
    env.wait_status(A, &run_id, &["running"], 5).await;
    at_close();
    s.shutdown().await.unwrap();
    drop(s);
    (run_id, Instant::now())
}

/// How a run created by a failed request ended up: what the table's last column says.
pub async fn fate(env: &Env, run_id: &str) -> String {
    let status = env.status(A, run_id).await;
    match cancel_reason(env, run_id).await {
        Some(reason) => format!("{status} ({reason})"),
        None => status,
    }
}

/// `assert_no_panic`, then the environment shut down: how every fault test ends.
pub async fn done(env: Env) {
    assert_no_panic();
    env.shutdown().await;
}

/// The capabilities a request declares: the tasks extension for `tasks/*`, none otherwise.
pub fn caps_for(method: &str) -> Value {
    if method.starts_with("tasks/") {
        task_caps()
    } else {
        json!({})
    }
}

/// `params` naming one task.
pub fn task_of(task: &str) -> Value {
    json!({ "taskId": task })
}

/// `params` of a `tools/call`.
pub fn tool(name: &str, args: Value) -> Value {
    json!({ "name": name, "arguments": args })
}

/// One request as [`A`], timed against [`HANG`].
pub async fn send(env: &Env, method: &str, params: Value) -> (Rpc, Duration) {
    let caps = caps_for(method);
    timed(HANG, method, env.rpc(Some(A), method, params, caps)).await
}

/// A blocking `tools/call` as [`A`] (no task capability), timed against [`HANG`].
pub async fn blocking(env: &Env, name: &str, args: Value) -> (Rpc, Duration) {
    timed(HANG, "tools/call", env.call(A, name, args, json!({}))).await
}

/// A task of `conformance-noop`, polled until it completed.
pub async fn completed_task(env: &Env) -> String {
    let task = tasked(env, A, "conformance-noop", json!({})).await;
    env.poll_task(A, &task, |r| r["status"] == "completed", 10)
        .await;
    task
}

/// A blocking `tools/call` made while faults are in place, the faults cleared once it is
/// answered: the answer, how long it took and the run it created.
pub async fn blocking_run(env: &Env, name: &str, args: Value) -> (Rpc, Duration, String) {
    let before = env.run_ids(A, name).await;
    let (r, took) = blocking(env, name, args).await;
    env.host.faults().clear();
    let run_id = env.fresh_run(A, name, &before).await;
    (r, took, run_id)
}

/// `GET /readyz`: its status, timed against [`HANG`].
pub async fn readyz(env: &Env) -> (u16, Duration) {
    let get = env.http.get(format!("{}/readyz", env.url)).send();
    let (resp, took) = timed(HANG, "/readyz", get).await;
    (resp.unwrap().status().as_u16(), took)
}

/// `GET /readyz` answers `want`; prints its row (route `discovery`). Returns how long it took.
pub async fn assert_readyz(env: &Env, want: u16, fault: &str, request: &str) -> Duration {
    let (status, took) = readyz(env).await;
    assert_eq!(status, want);
    row(
        fault,
        route_path(RouteClass::Discovery),
        request,
        &format!("HTTP {want}"),
        took,
        "n/a",
    );
    took
}

/// A passthrough `GET /runs` while the host cannot be reached: HTTP 502
/// `upstream_unavailable`. Returns the body and how long it took.
pub async fn passthrough_unavailable(env: &Env) -> (Value, Duration) {
    let ((s, v), took) = timed(HANG, "passthrough", env.rest_get(A, "/runs")).await;
    assert_eq!(
        (s, v["error"].as_str()),
        (502, Some("upstream_unavailable"))
    );
    (v, took)
}

/// What a `subscriptions/listen` on one task read within its time.
pub struct Listened {
    pub msgs: Vec<Value>,
    /// A `notifications/tasks` said `completed`.
    pub notified: bool,
    /// The last message is the listen's final result.
    pub ended: bool,
}

/// Listens to one task for `secs`, timed against [`HANG`].
pub async fn listen_to(env: &Env, task: &str, secs: u64) -> (Listened, Duration) {
    let listen = env.listen(A, vec![task.to_string()], Duration::from_secs(secs));
    let (msgs, took) = timed(HANG, "subscriptions/listen", listen).await;
    let notified = msgs
        .iter()
        .any(|m| m["method"] == "notifications/tasks" && m["params"]["status"] == "completed");
    let ended = msgs
        .last()
        .is_some_and(|m| m["result"]["resultType"] == "complete");
    let l = Listened {
        msgs,
        notified,
        ended,
    };
    (l, took)
}

/// The failed call's answer names the run, or the run was cancelled: never a run nobody
/// knows about.
pub async fn named_or_cancelled(env: &Env, r: &Rpc, run_id: &str) -> bool {
    r.text.contains(run_id) || env.status(A, run_id).await == "cancelled"
}

/// The row of an owned run whose client went away: how many cancels reached the host, and
/// the metric's outcome.
pub fn orphan_row(
    env: &Env,
    fault: &str,
    run_id: &str,
    outcome: &str,
    took: Duration,
    owned: &str,
) {
    let attempts = env.host_cancels(run_id).len();
    let seen = format!("(client gone) {attempts} cancel attempts, metric outcome=\"{outcome}\"");
    let request = "client disconnects from a blocking tools/call";
    row(fault, "cancel", request, &seen, took, owned);
}

/// `GET /.well-known/openwop`: its status and body, timed against [`HANG`].
pub async fn discovery_document(env: &Env) -> (u16, Value, Duration) {
    let get = env
        .http
        .get(format!("{}/.well-known/openwop", env.url))
        .send();
    let (resp, took) = timed(HANG, "GET /.well-known/openwop", get).await;
    let resp = resp.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or_default(), took)
}

/// The owned run is cancelled, with the reason of a request that went away. Returns when it
/// was seen ended.
pub async fn assert_cancelled_by_mcp(env: &Env, run_id: &str) -> Instant {
    let wait = env.wait_status(A, run_id, &["cancelled", "completed"], 10);
    let (status, _) = timed(HANG, "cancel", wait).await;
    let ended = Instant::now();
    assert_eq!(status, "cancelled");
    assert_cancel_reason(env, run_id, "mcp-request-cancelled").await;
    ended
}

/// Polls the owned-run cancel metric every 25 ms until one of `outcomes` is counted or
/// `within` has passed: the last of `outcomes` counted, and its count.
pub async fn cancel_outcome(
    env: &Env,
    outcomes: &[&str],
    within: Duration,
) -> Option<(String, f64)> {
    let deadline = Instant::now() + within;
    loop {
        let mut seen = None;
        for o in outcomes {
            let n = env.metric(&cancel_sample(o)).await;
            if n > 0.0 {
                seen = Some((o.to_string(), n));
            }
        }
        if seen.is_some() || Instant::now() >= deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
