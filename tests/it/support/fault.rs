//! The fault tests' harness (tests/it/faults.rs): a sidecar whose host routes time out fast,
//! the bounds a faulted request must answer within, what the client may see, and the rows
//! docs/faults.md is filled from.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openwop_devhost::{Fault, FaultKind, RouteClass};
use openwop_mcp_sidecar::config::Config;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::*;

/// The per-attempt timeout the fault tests configure for every host route.
pub const T: Duration = Duration::from_millis(300);
/// Retry backoff of a retried route: 50 ms, then 100 ms (src/host/mod.rs).
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
        f(c);
    })
    .await
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

/// A fault on every request of `route` until [`openwop_devhost::Faults::clear`].
pub fn always(env: &Env, route: RouteClass, status: u16) {
    env.host.faults().add(Fault {
        route,
        kind: FaultKind::Status {
            status,
            retry_after: None,
        },
        times: None,
    });
}

pub fn count(env: &Env, route: RouteClass) -> u64 {
    env.host.faults().count(route)
}

pub fn cancel_sample(outcome: &str) -> String {
    format!(
        "openwop_sidecar_owned_run_cancels_total{{phase=\"before_head\",outcome=\"{outcome}\"}} "
    )
}

pub async fn readyz(env: &Env) -> u16 {
    env.http
        .get(format!("{}/readyz", env.url))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A task of `conformance-approval` waiting on its gate, and the key of its input request.
pub async fn waiting_task(env: &Env) -> (String, String) {
    let task = tasked(env, A, "conformance-approval", json!({})).await;
    let b = env
        .poll_task(A, &task, |r| r["status"] == "input_required", 10)
        .await;
    (task, first_input_key(&b["result"]))
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
    let before = env.run_ids(A, "conformance-cancellable").await;
    let mut s = raw_call(env, "conformance-cancellable", json!({"delayMs": 20000})).await;
    let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
    env.wait_status(A, &run_id, &["running"], 5).await;
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

/// The fault a [`Step`] injects on its route before its request.
#[derive(Clone, Copy)]
pub enum Inject {
    /// `fail_next(route, times, status)`.
    Fail(RouteClass, u32, u16),
    /// `rate_limit_next(route, times, retry_after_secs)`: a 429 with `Retry-After`.
    RateLimit(RouteClass, u32, u64),
}

impl Inject {
    fn route(self) -> RouteClass {
        match self {
            Inject::Fail(route, ..) | Inject::RateLimit(route, ..) => route,
        }
    }
}

/// What a faulted request must get.
#[derive(Clone, Copy)]
pub enum Want<'a> {
    /// `-32603` with the generic message ([`assert_internal`]).
    Internal,
    /// The empty ack of tasks/update and tasks/cancel ([`assert_ack`]).
    Ack,
    /// HTTP 429 with this `Retry-After` ([`assert_rate_limited`]).
    RateLimited(&'a str),
}

/// What the run behind the task must look like after the request.
#[derive(Clone, Copy)]
pub enum Run<'a> {
    /// No run to look at (or the row does not say).
    Unchecked,
    /// Still in this status, at once (no false ack, no lost interrupt).
    Still(&'a str),
    /// In this status within 5 s (the request took effect).
    Becomes(&'a str),
}

/// One row of a table-driven fault test: a fault injected on a route, one request, what the
/// client must see and what becomes of the run.
pub struct Step<'a> {
    /// The fault column of the row, e.g. `503 x3 (persistent)`.
    pub fault: String,
    pub inject: Inject,
    /// The route column of the row.
    pub route: &'a str,
    /// The request column of the row.
    pub request: &'a str,
    pub method: &'a str,
    pub params: Value,
    /// The client capabilities the request declares.
    pub caps: Value,
    pub want: Want<'a>,
    /// How many times the faulted route must have been called (when the row says).
    pub attempts: Option<u64>,
    pub run: Run<'a>,
    /// The owned-run column of the row.
    pub owned: &'a str,
}

/// Runs one [`Step`] (its run, when it has one, is `run_id`), asserting what it says and
/// printing its row.
pub async fn check(env: &Env, run_id: &str, s: Step<'_>) {
    let route = s.inject.route();
    match s.inject {
        Inject::Fail(route, times, status) => env.host.faults().fail_next(route, times, status),
        Inject::RateLimit(route, times, secs) => {
            env.host.faults().rate_limit_next(route, times, secs)
        }
    }
    let n = count(env, route);
    let what = format!("{} on {}: {}", s.fault, s.route, s.request);
    let (r, took) = timed(HANG, s.method, env.rpc(Some(A), s.method, s.params, s.caps)).await;
    match s.want {
        Want::Internal => assert_internal(&r, &what),
        Want::Ack => assert_ack(&r, &what),
        Want::RateLimited(retry_after) => assert_rate_limited(&r, retry_after, &what),
    }
    if let Some(want) = s.attempts {
        assert_eq!(count(env, route) - n, want, "{what}: attempts");
    }
    match s.run {
        Run::Unchecked => {}
        Run::Still(status) => assert_eq!(env.status(A, run_id).await, status, "{what}"),
        Run::Becomes(status) => {
            env.wait_status(A, run_id, &[status], 5).await;
        }
    }
    row(&s.fault, s.route, s.request, &seen(&r), took, s.owned);
}
