//! The load of the rolling-restart tests (mod.rs and chart.rs): clients that keep up tasked
//! calls, `tasks/get`, short blocking calls and open listens through the balancer, what they
//! saw ([`Tally`]), and the restart itself ([`rolling_restart_under_load`]).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::stack::*;
use crate::support::*;

/// What a client saw during the rolling restart.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) requests: std::sync::atomic::AtomicUsize,
    pub(super) failures: std::sync::Mutex<Vec<String>>,
    pub(super) tasks: std::sync::Mutex<Vec<String>>,
    pub(super) listens_ended: std::sync::atomic::AtomicUsize,
    pub(super) listens_clean: std::sync::atomic::AtomicUsize,
}

impl Tally {
    fn fail(&self, what: String) {
        self.failures.lock().unwrap().push(what);
    }
}

/// One MCP request through the balancer; any refused or reset connection, 5xx, unreadable
/// body or JSON-RPC error is a client-visible failure.
pub(super) async fn mcp(
    env: &Env,
    t: &Tally,
    method: &str,
    params: Value,
    caps: Value,
) -> Option<Value> {
    t.requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut rb = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {A}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", method);
    if let Some(n) = name_of(method, &params) {
        rb = rb.header("Mcp-Name", n);
    }
    let resp = match rb
        .body(body_of(9, method, params, caps).to_string())
        .send()
        .await
    {
        Ok(r) => r,
        Err(e) => {
            t.fail(format!("{method}: {e:?}"));
            return None;
        }
    };
    let status = resp.status().as_u16();
    let who = replica_of(resp.headers());
    let sse = resp
        .headers()
        .get("content-type")
        .is_some_and(|c| c.to_str().unwrap_or("").starts_with("text/event-stream"));
    let text = match resp.text().await {
        Ok(t) => t,
        Err(e) => {
            t.fail(format!("{method} on {who}: body cut: {e:?}"));
            return None;
        }
    };
    let body = if sse {
        sse_messages(&text)
            .into_iter()
            .rev()
            .find(|m| m.get("id").is_some())
            .unwrap_or(Value::Null)
    } else {
        serde_json::from_str(&text).unwrap_or(Value::Null)
    };
    if status >= 500 || body.get("result").is_none() {
        t.fail(format!("{method} on {who}: HTTP {status} {text}"));
        return None;
    }
    Some(body["result"].clone())
}

/// Opens a listen on a fresh task and reads it until the server ends it or 2 s pass; a listen
/// the server ends must end with its result (RFC 0198 §G.14), never a cut.
pub(super) async fn one_listen(env: &Env, t: &Tally) {
    let Some(res) = mcp(
        env,
        t,
        "tools/call",
        json!({"name": "conformance-delay", "arguments": {"delayMs": 1500}}),
        task_caps(),
    )
    .await
    else {
        return;
    };
    let Some(task) = res["taskId"].as_str().map(str::to_string) else {
        return t.fail(format!("not a task: {res}"));
    };
    t.tasks.lock().unwrap().push(task.clone());
    t.requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let sent = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {A}"))
        .header("Accept", "text/event-stream, application/json")
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "subscriptions/listen")
        .body(
            body_of(
                77,
                "subscriptions/listen",
                json!({"notifications": {"taskIds": [task]}}),
                task_caps(),
            )
            .to_string(),
        )
        .send()
        .await;
    let mut resp = match sent {
        Ok(r) if r.status() == 200 => r,
        Ok(r) => return t.fail(format!("listen: HTTP {}", r.status())),
        Err(e) => return t.fail(format!("listen: {e:?}")),
    };
    let who = replica_of(resp.headers());
    let mut text = String::new();
    let ended = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => text.push_str(&String::from_utf8_lossy(&c)),
                Ok(None) => return Ok(()),
                Err(e) => return Err(format!("{e:?}")),
            }
        }
    })
    .await;
    match ended {
        // Still open after 2 s: the client closes it, as a client that is done does.
        Err(_) => {}
        Ok(Ok(())) => {
            t.listens_ended
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let last = sse_messages(&text).pop().unwrap_or(Value::Null);
            if last["id"] == json!(77) && last.get("result").is_some() {
                t.listens_clean
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            } else {
                t.fail(format!("listen on {who} ended without its result: {text}"));
            }
        }
        Ok(Err(e)) => {
            t.listens_ended
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            t.fail(format!("listen on {who} cut: {e} after {text}"));
        }
    }
}

/// Every run of `workflow` in the host, with its status (all pages).
pub(super) async fn all_runs(env: &Env, workflow: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/runs?workflowId={workflow}&limit=100");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, v) = env.rest_get(A, &path).await;
        assert_eq!(status, 200, "{v}");
        for r in v["runs"].as_array().into_iter().flatten() {
            out.push((
                r["runId"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
            ));
        }
        match v["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
}

/// What a rolling restart under load showed.
pub(super) struct Restart {
    pub(super) took: Duration,
    pub(super) during: usize,
    pub(super) requests: usize,
    pub(super) failures: Vec<String>,
    pub(super) runs: usize,
    pub(super) cancelled: Vec<(String, String)>,
    pub(super) listens_ended: usize,
    pub(super) listens_clean: usize,
}

/// Keeps up the mixed load (tasked calls, `tasks/get`, short blocking calls, open listens)
/// through the balancer while each replica in turn gets SIGTERM, exits, starts again and
/// becomes ready in HAProxy's view; then reads every run's final status from the host.
pub(super) async fn rolling_restart_under_load(s: &mut Stack, t: Timings) -> Restart {
    let env = std::sync::Arc::new(Env {
        host: openwop_devhost::spawn(Default::default(), "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap(),
        server: None,
        url: s.env.url.clone(),
        http: s.env.http.clone(),
    });
    let tally = std::sync::Arc::new(Tally::default());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = tokio::task::JoinSet::new();
    for kind in [
        "tasked", "tasked", "get", "blocking", "blocking", "listen", "listen",
    ] {
        let (env, tally, stop) = (env.clone(), tally.clone(), stop.clone());
        workers.spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match kind {
                    "tasked" => {
                        if let Some(r) = mcp(
                            &env,
                            &tally,
                            "tools/call",
                            // Longer than the immediate-result window (mcp.taskImmediateWindowMs), even
                            // on a loaded machine, so each call gets its task.
                            json!({"name": "conformance-delay", "arguments": {"delayMs": 1500}}),
                            task_caps(),
                        )
                        .await
                        {
                            match r["taskId"].as_str() {
                                Some(id) => tally.tasks.lock().unwrap().push(id.to_string()),
                                None => tally.fail(format!("not a task: {r}")),
                            }
                        }
                    }
                    "get" => {
                        let task = tally.tasks.lock().unwrap().last().cloned();
                        if let Some(task) = task {
                            if let Some(r) = mcp(
                                &env,
                                &tally,
                                "tasks/get",
                                json!({"taskId": task}),
                                task_caps(),
                            )
                            .await
                            {
                                if !matches!(r["status"].as_str(), Some("working" | "completed")) {
                                    tally.fail(format!("tasks/get: {r}"));
                                }
                            }
                        }
                    }
                    "blocking" => {
                        if let Some(r) = mcp(
                            &env,
                            &tally,
                            "tools/call",
                            json!({"name": "conformance-delay", "arguments": {"delayMs": 300}}),
                            json!({}),
                        )
                        .await
                        {
                            if r["isError"] != false {
                                tally.fail(format!("blocking call: {r}"));
                            }
                        }
                    }
                    _ => one_listen(&env, &tally).await,
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
    }
    // Load first, then the restart.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t0 = Instant::now();
    let before = tally.requests.load(std::sync::atomic::Ordering::Relaxed);
    for i in 0..3 {
        s.replicas[i].sigterm();
        let st = s.replicas[i]
            .wait_exit(Duration::from_millis(t.lame_duck_ms + t.drain_ms + 5_000))
            .await;
        assert!(st.success(), "r{i} exited with {st:?}");
        s.replicas[i].restart().await;
        s.wait_status(i, "UP", Duration::from_secs(10)).await;
    }
    let restart = t0.elapsed();
    let during = tally.requests.load(std::sync::atomic::Ordering::Relaxed) - before;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    while let Some(r) = workers.join_next().await {
        r.unwrap();
    }
    // Every run the load started, as the host has it: none cancelled (no client cancelled
    // anything, so a cancelled run is one the sidecar cut).
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let runs = all_runs(&s.env, "conformance-delay").await;
    let cancelled: Vec<_> = runs.iter().filter(|(_, st)| st == "cancelled").collect();
    let failures = tally.failures.lock().unwrap().clone();
    let (ended, clean) = (
        tally
            .listens_ended
            .load(std::sync::atomic::Ordering::Relaxed),
        tally
            .listens_clean
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    let env = std::sync::Arc::into_inner(env).unwrap();
    env.host.shutdown().await;
    Restart {
        took: restart,
        during,
        requests: tally.requests.load(std::sync::atomic::Ordering::Relaxed),
        failures,
        runs: runs.len(),
        cancelled: cancelled.into_iter().cloned().collect(),
        listens_ended: ended,
        listens_clean: clean,
    }
}

/// The figures docs/hardening.md reports, and the guarantees: no failure, no cancelled run,
/// every listen a replica ended ended with its result, and the load kept up.
pub(super) fn assert_no_client_visible_failure(r: &Restart, what: &str) {
    eprintln!(
        "{what}: rolling restart of 3 replicas in {:?}: {} requests during it ({} in all), \
         {} failures, {} runs ({} cancelled), listens ended by a replica: {}/{} with their result",
        r.took,
        r.during,
        r.requests,
        r.failures.len(),
        r.runs,
        r.cancelled.len(),
        r.listens_clean,
        r.listens_ended
    );
    assert!(
        r.failures.is_empty(),
        "client-visible failures: {:#?}",
        r.failures
    );
    assert!(r.cancelled.is_empty(), "runs cancelled: {:?}", r.cancelled);
    assert_eq!(
        r.listens_ended, r.listens_clean,
        "every listen a replica ended ended with its result"
    );
    assert!(
        r.listens_ended >= 1,
        "the restart ended at least one listen"
    );
    assert!(
        r.during >= 50,
        "the load kept up during the restart: {}",
        r.during
    );
}
