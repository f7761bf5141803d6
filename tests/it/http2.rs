//! `upstream.http2`: the sidecar's own host API calls travel as HTTP/2 streams on a pool that
//! never puts more streams on one connection than its budget (src/host/h2pool.rs).

use std::collections::BTreeSet;
use std::time::Duration;

use openwop_devhost::RecordedRequest;
use serde_json::{json, Value};

use crate::support::*;

/// Requests the sidecar itself made (passthrough adds `X-Forwarded-For`; the REST client
/// never does).
fn own_requests(env: &Env) -> Vec<RecordedRequest> {
    env.host
        .requests()
        .into_iter()
        .filter(|r| r.header("x-forwarded-for").is_none())
        .collect()
}

/// Event-stream opens the host received, one per run id.
fn event_streams(env: &Env) -> Vec<RecordedRequest> {
    own_requests(env)
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/events"))
        .collect()
}

fn is_for(r: &RecordedRequest, run_id: &str) -> bool {
    let wire = openwop_mcp_sidecar::wire_id::project(run_id);
    r.path.contains(&wire) || r.path.contains(&run_id.replace('/', "%2F"))
}

/// A run that lasts a minute unless cancelled.
const LONG: &str = "conformance-cancellable";

fn long_call() -> Value {
    body_of(
        11,
        "tools/call",
        json!({"name": LONG, "arguments": {"delayMs": 60_000}}),
        json!({}),
    )
}

/// Waits until `n` runs of [`LONG`] exist that are not in `before`.
async fn new_runs(env: &Env, before: &[String], n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let fresh: Vec<String> = env
            .run_ids(A, LONG)
            .await
            .into_iter()
            .filter(|i| !before.contains(i))
            .collect();
        if fresh.len() >= n {
            return fresh;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {n} runs appeared",
            fresh.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn with_upstream_http2_every_host_api_call_is_an_http2_request() {
    let env = env_with(|c| c.upstream.http2 = true).await;
    // Blocking call (createRun, event stream or poll, getRun), a task and its reads.
    let r = env
        .call(A, "conformance-delay", json!({"delayMs": 100}), json!({}))
        .await;
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    // Long enough to outlast the immediate-result window: a task, not a direct result.
    let t = env
        .call(
            A,
            "conformance-delay",
            json!({"delayMs": 1000}),
            task_caps(),
        )
        .await;
    let task = t.result()["taskId"].as_str().expect("a task").to_string();
    let done = env
        .poll_task(A, &task, |r| r["status"] == "completed", 20)
        .await;
    assert!(done.get("error").is_none(), "{done}");
    let own = own_requests(&env);
    let methods: BTreeSet<&str> = own.iter().map(|r| r.method.as_str()).collect();
    assert!(
        methods.contains("POST") && methods.contains("GET"),
        "createRun and reads went to the host: {own:?}"
    );
    for r in &own {
        assert_eq!(
            r.version,
            http::Version::HTTP_2,
            "{} {} came over {:?}",
            r.method,
            r.path,
            r.version
        );
    }
    // Passthrough is not the REST client: it keeps HTTP/1.1.
    let (s, _) = env.rest_get(A, "/runs?limit=1").await;
    assert_eq!(s, 200);
    let forwarded = env
        .host
        .requests()
        .into_iter()
        .rfind(|r| r.header("x-forwarded-for").is_some())
        .expect("the passthrough request");
    assert_eq!(forwarded.version, http::Version::HTTP_11);
    env.shutdown().await;
}

#[tokio::test]
async fn http2_pool_opens_another_connection_instead_of_queueing_beyond_the_stream_limit() {
    // The host takes 4 streams per connection. Were a fifth queued behind them (hyper-util's
    // single-connection client), the host would see at most 4 event streams open at once and
    // the other calls would sit in the queue until their route timeout.
    let env = env_with_host(
        |h| h.http2_max_concurrent_streams = Some(4),
        |c| {
            c.upstream.http2 = true;
            c.upstream.http2_max_streams_per_connection = 4;
        },
    )
    .await;
    let before = env.run_ids(A, LONG).await;
    // Six calls whose clients will go away, six whose runs the host will cancel.
    let mut sockets = Vec::new();
    for _ in 0..6 {
        // A blocking call over its own HTTP/1.1 connection, asking for SSE; the socket is the
        // call (closing it is the client going away).
        sockets.push(raw_post(&env, &long_call(), "application/json, text/event-stream", A).await);
    }
    let leaving = new_runs(&env, &before, 6).await;
    let mut calls = Vec::new();
    for _ in 0..6 {
        let http = env.http.clone();
        let url = env.mcp_url();
        let body = long_call().to_string();
        calls.push(tokio::spawn(async move {
            http.post(url)
                .header("Authorization", format!("Bearer {A}"))
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .header("MCP-Protocol-Version", V)
                .header("Mcp-Method", "tools/call")
                .header("Mcp-Name", LONG)
                .body(body)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }));
    }
    let all = new_runs(&env, &before, 12).await;
    let staying: Vec<String> = all
        .iter()
        .filter(|i| !leaving.contains(i))
        .cloned()
        .collect();
    assert_eq!(staying.len(), 6);

    // Every one of the 12 calls holds its own event stream at the host at the same time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let streams = loop {
        let s = event_streams(&env);
        if all.iter().all(|id| s.iter().any(|r| is_for(r, id))) {
            break s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "event streams opened for {} of 12 runs",
            all.iter()
                .filter(|id| s.iter().any(|r| is_for(r, id)))
                .count()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(streams.iter().all(|r| r.version == http::Version::HTTP_2));
    let conns: BTreeSet<u64> = streams.iter().map(|r| r.connection).collect();
    assert!(
        conns.len() >= 3,
        "12 streams at 4 per connection need at least 3 connections, the host saw {conns:?}"
    );

    // Clients that go away get their runs cancelled (the cancel travels over the pool too).
    drop(sockets);
    for id in &leaving {
        assert_eq!(
            env.wait_status(A, id, &["cancelled", "completed", "failed"], 30)
                .await,
            "cancelled"
        );
    }
    // Runs cancelled at the host end their blocking calls with a tool error.
    for id in &staying {
        let (s, _) = env
            .rest_post(
                A,
                &format!("/runs/{}/cancel", id.replace('/', "%2F")),
                json!({}),
            )
            .await;
        assert_eq!(s, 200, "cancel {id}");
    }
    for c in calls {
        let text = tokio::time::timeout(Duration::from_secs(30), c)
            .await
            .expect("the blocking call ends once its run is cancelled")
            .unwrap();
        // JSON or SSE, as the sidecar chose for this answer.
        let last = serde_json::from_str::<Value>(&text).unwrap_or_else(|_| {
            sse_messages(&text)
                .into_iter()
                .rev()
                .find(|m| m.get("id").is_some())
                .unwrap_or(Value::Null)
        });
        assert_eq!(last["result"]["isError"], true, "{text}");
    }
    env.shutdown().await;
}

#[tokio::test]
async fn a_host_that_drops_its_connections_does_not_fail_the_next_request() {
    let env = env_with(|c| c.upstream.http2 = true).await;
    let t = env
        .call(A, LONG, json!({"delayMs": 60_000}), task_caps())
        .await;
    let task = t.result()["taskId"].as_str().expect("a task").to_string();
    for round in 0..3 {
        let g = env.task_rpc(A, "tasks/get", &task).await;
        assert_eq!(g.result()["status"], "working", "round {round}: {}", g.text);
        let last_conn = own_requests(&env)
            .iter()
            .map(|r| r.connection)
            .max()
            .unwrap();
        // Like a host restart seen from the sidecar: every connection closes without GOAWAY.
        env.host.drop_connections();
        let g = env.task_rpc(A, "tasks/get", &task).await;
        assert_eq!(
            g.result()["status"],
            "working",
            "round {round}, after the drop: {}",
            g.text
        );
        let after = own_requests(&env).last().map(|r| r.connection).unwrap();
        assert!(after > last_conn, "the answer came over a new connection");
    }
    env.shutdown().await;
}
