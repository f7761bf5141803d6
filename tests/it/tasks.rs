//! The Tasks extension (OpenWOP conformance v2-mcp-tasks T1–T10, ext-tasks).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

/// After `delay`, answers the task's open input request with an approval (as the owner).
async fn approve_after(env: &Env, task: &str, delay: Duration) {
    tokio::time::sleep(delay).await;
    let g = env.task_rpc(A, "tasks/get", &task).await;
    let key = first_input_key(g.result());
    let answer = json!({ key: approval() });
    env.rpc(
        Some(A),
        "tasks/update",
        json!({"taskId": task, "inputResponses": answer}),
        task_caps(),
    )
    .await;
}

/// The task once [`open_tool`]'s run is open: waiting for its answer, or on a host without a
/// waiting state, running.
async fn until_open(env: &Env, task: &str) -> Value {
    let want = open_status().0;
    let b = env.poll_task(A, task, |r| r["status"] == want, 10).await;
    b["result"].clone()
}

async fn until_input_required(env: &Env, task: &str) -> Value {
    let b = env
        .poll_task(A, task, |r| r["status"] == "input_required", 10)
        .await;
    b["result"].clone()
}

#[tokio::test]
async fn tasked_call_answers_a_flat_task_and_untasked_never_does() {
    // T2
    let env = env().await;
    let r = env.call(A, open_tool(), json!({}), task_caps()).await;
    let res = r.result();
    assert_eq!(res["resultType"], "task", "{}", r.text);
    assert!(["working", "input_required"].contains(&res["status"].as_str().unwrap()));
    assert!(res["ttlMs"].is_null() && res.get("ttlMs").is_some());
    assert!(res["pollIntervalMs"].as_u64().is_some());
    for k in ["result", "error", "inputRequests", "requestState"] {
        assert!(res.get(k).is_none(), "CreateTaskResult carries no {k}");
    }
    let task = res["taskId"].as_str().unwrap().to_string();
    let g = env.task_rpc(A, "tasks/get", &task).await;
    assert!(g.body.get("error").is_none(), "durable at once: {}", g.text);
    // The Jobs example sends string arguments only (config/kubernetes.example.yaml).
    let quick = if waits() {
        json!({"delayMs": 200})
    } else {
        json!({})
    };
    let plain = env.call(A, "conformance-delay", quick, json!({})).await;
    assert_ne!(plain.result()["resultType"], "task");
    let nocap = env
        .rpc(Some(A), "tasks/get", json!({"taskId": task}), json!({}))
        .await;
    assert_eq!((nocap.status, nocap.error_code()), (400, Some(-32021)));
    assert_eq!(
        nocap.body["error"]["data"]["requiredCapabilities"],
        json!({"extensions": {TASKS: {}}})
    );
    env.shutdown().await;
}

#[tokio::test]
async fn task_id_is_the_projected_run_id() {
    // T3
    let env = env().await;
    let task = tasked(&env, A, open_tool(), json!({})).await;
    let bound = run_of(A, &task);
    if foreign() {
        // A host whose run ids are neither tenant-bound nor 128 bits random gets sealed
        // taskIds (config/aip151.example.yaml, config/azure.example.yaml host.ids.taskId):
        // the taskId opens to the run (run_of) and does not show its id.
        let opaque = bound.rsplit('/').next().unwrap();
        assert!(!task.contains(opaque), "{task} shows {bound}");
    } else {
        let (tenant, opaque) = bound.split_once('/').unwrap();
        assert_eq!(tenant, "acme");
        assert!(opaque.len() >= 22, "≥128 bits: {opaque}");
        assert_eq!(task, openwop_mcp_sidecar::wire_id::project(&bound));
    }
    let run = env.run(A, &bound).await;
    assert_eq!(run["workflowId"], open_tool());
    env.shutdown().await;
}

#[tokio::test]
async fn status_projection_follows_the_run() {
    // T4. Without the immediate-result window, so quick runs are tasks too.
    let env = env_with(|c| c.mcp.task_immediate_window = Duration::ZERO).await;
    if waits() {
        waiting_projection(&env).await;
    }
    let failing = tasked(&env, A, "conformance-failure", json!({})).await;
    let done = env
        .poll_task(
            A,
            &failing,
            |r| ["completed", "failed", "cancelled"].contains(&r["status"].as_str().unwrap_or("")),
            10,
        )
        .await;
    assert_eq!(
        done["result"]["status"], "completed",
        "a failed run is a completed task"
    );
    assert_eq!(done["result"]["result"]["isError"], true);
    assert_eq!(done["result"]["result"]["resultType"], "complete");
    let ok = tasked(&env, A, "conformance-noop", json!({})).await;
    let done = env
        .poll_task(A, &ok, |r| r["status"] == "completed", 10)
        .await;
    assert_eq!(done["result"]["result"]["isError"], false);
    assert!(done["result"]["result"]["content"][0]["text"].is_string());
    env.shutdown().await;
}

/// A waiting run's task is `input_required` with one input request per open interrupt, each
/// an elicitation, and no requestState.
async fn waiting_projection(env: &Env) {
    let task = tasked(env, A, "conformance-approval", json!({})).await;
    let res = until_input_required(env, &task).await;
    assert_eq!(res["resultType"], "complete");
    let keys: Vec<String> = res["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let suspended = env.suspended_interrupt_ids(A, &run_of(A, &task)).await;
    assert_eq!(keys, suspended);
    assert_eq!(
        res["inputRequests"][&keys[0]]["method"],
        "elicitation/create"
    );
    assert!(res.get("requestState").is_none());
}

#[tokio::test]
async fn update_resolves_an_interrupt_once_however_often_answered() {
    // T5
    if !waits() {
        return; // Kubernetes Jobs have no waiting state to answer.
    }
    let env = env().await;
    let task = tasked(&env, A, "conformance-approval", json!({})).await;
    let res = until_input_required(&env, &task).await;
    let key = first_input_key(&res);
    let upd = json!({"taskId": task, "inputResponses": { key.clone(): approval() }});
    let (u1, u2) = tokio::join!(
        env.rpc(Some(A), "tasks/update", upd.clone(), task_caps()),
        env.rpc(Some(A), "tasks/update", upd.clone(), task_caps())
    );
    for u in [&u1, &u2] {
        assert!(u.body.get("error").is_none(), "{}", u.text);
        assert_eq!(u.result(), &json!({"resultType": "complete"}));
    }
    let done = env
        .poll_task(A, &task, |r| r["status"] == "completed", 10)
        .await;
    assert_eq!(done["result"]["result"]["isError"], false);
    assert_eq!(env.resolved_count(A, &run_of(A, &task)).await, 1);
    // A key never issued, or answered again later, resolves nothing and is still acknowledged.
    let again = env.rpc(Some(A), "tasks/update", json!({"taskId": task, "inputResponses": { key: {"action":"decline"}, "acme/i-never": {"action":"accept"} }}), task_caps()).await;
    assert_eq!(again.result(), &json!({"resultType": "complete"}));
    assert_eq!(env.resolved_count(A, &run_of(A, &task)).await, 1);
    let bad = env
        .rpc(
            Some(A),
            "tasks/update",
            json!({"taskId": task, "inputResponses": []}),
            task_caps(),
        )
        .await;
    assert_eq!(bad.error_code(), Some(-32602));
    env.shutdown().await;
}

#[tokio::test]
async fn update_goes_through_the_hosts_approver_check() {
    // T6
    if !waits() {
        return; // Kubernetes Jobs have no waiting state to answer.
    }
    let env = env().await;
    let task = tasked(&env, A, "conformance-approval-approvers", json!({})).await;
    let res = until_input_required(&env, &task).await;
    let key = first_input_key(&res);
    let upd = json!({"taskId": task, "inputResponses": { key.clone(): approval() }});
    let u = env
        .rpc(Some(A), "tasks/update", upd.clone(), task_caps())
        .await;
    assert!(
        u.body.get("error").is_none() || u.error_code() == Some(-32602),
        "never internal: {}",
        u.text
    );
    tokio::time::sleep(Duration::from_millis(750)).await;
    let run_id = run_of(A, &task);
    assert_eq!(env.status(A, &run_id).await, "waiting-approval");
    assert_eq!(env.resolved_count(A, &run_id).await, 0);
    // The listed approver, same tenant, can resolve it through the same mount. A sealed
    // taskId (the foreign flavours) opens only for the credential it was issued to (README
    // "Task ids"): there the approver names the run by its own.
    let upd = if foreign() {
        json!({"taskId": task_id_for(APPROVER, &run_id), "inputResponses": { key: approval() }})
    } else {
        upd
    };
    let ok = env
        .rpc(Some(APPROVER), "tasks/update", upd, task_caps())
        .await;
    assert_eq!(
        ok.result(),
        &json!({"resultType": "complete"}),
        "{}",
        ok.text
    );
    assert_eq!(
        env.wait_status(A, &run_id, &["completed"], 5).await,
        "completed"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn get_only_reads_upstream() {
    // T7
    let env = env().await;
    let task = tasked(&env, A, open_tool(), json!({})).await;
    until_open(&env, &task).await;
    let run_id = run_of(A, &task);
    let before = env.trail(A, &run_id).await;
    env.host.clear_requests();
    for _ in 0..3 {
        let g = env.task_rpc(A, "tasks/get", &task).await;
        assert_eq!(g.result()["status"], open_status().0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let writes: Vec<String> = env
        .host
        .requests()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "tasks/get wrote upstream: {writes:?}");
    assert_eq!(env.trail(A, &run_id).await, before);
    env.shutdown().await;
}

#[tokio::test]
async fn unreadable_tasks_are_indistinguishable_from_missing_ones() {
    // T8 (+ the id shapes of docs/hardening.md)
    let env = env().await;
    let task = tasked(&env, A, open_tool(), json!({})).await;
    until_open(&env, &task).await;
    let bound = run_of(A, &task);
    // A foreign host's run id names no tenant (azure: job-…): the OpenWOP-shaped forgeries
    // use the caller's tenant, and a sealed taskId with one byte changed is added.
    let (tenant, opaque) = bound.split_once('/').unwrap_or(("acme", &bound));
    let fabricated = format!("{tenant}~2F{}", "Z".repeat(opaque.len()));
    let foreign_id = format!("conformance-foreign-tenant~2F{opaque}");
    let mut cases: Vec<(&str, String)> = vec![
        (A, fabricated),
        (A, foreign_id),
        (B, task.clone()),
        (A, "t-42".into()),
        (A, "acme~2".into()),
        (A, bound.replace('/', "%2F")),
        (A, format!("acme~2F{}", "x".repeat(4000))),
    ];
    if foreign() {
        cases.push((A, tampered(&task)));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (key, id) in &cases {
        let r = env
            .rpc_with_id(key, "tasks/get", json!({"taskId": id}))
            .await;
        assert_eq!(r.error_code(), Some(-32602), "{id}: {}", r.text);
        assert!(r.body.get("result").is_none());
        seen.insert(format!("{} {}", r.status, r.text));
    }
    let ids: Vec<&str> = seen.iter().map(String::as_str).collect();
    assert_eq!(
        seen.len(),
        1,
        "byte-identical including HTTP status: {ids:#?}"
    );
    assert_eq!(
        env.rpc_with_id(A, "tasks/get", json!({"taskId": "acme~2Fx"}))
            .await
            .body["error"],
        json!({"code": -32602, "message": "task not found"})
    );
    env.host.clear_requests();
    let c = env.task_rpc(B, "tasks/cancel", &task).await;
    assert_eq!(c.error_code(), Some(-32602));
    assert!(
        env.host.requests().iter().all(|r| r.method == "GET"),
        "a foreign cancel touches nothing but the refusing read"
    );
    assert_eq!(env.status(A, &bound).await, open_status().1);
    env.shutdown().await;
}

#[tokio::test]
async fn cancel_cancels_the_run_and_a_second_cancel_changes_nothing() {
    // T10
    if !waits() {
        // Kubernetes cancels a Job by deleting it: a cancelled task reads as not found
        // (tests/it/job_names.rs proves the cancel and its second, answered 404).
        return;
    }
    let env = env().await;
    let task = tasked(&env, A, "conformance-approval", json!({})).await;
    until_input_required(&env, &task).await;
    let c = env.task_rpc(A, "tasks/cancel", &task).await;
    assert_eq!(c.result(), &json!({"resultType": "complete"}), "{}", c.text);
    let run_id = run_of(A, &task);
    env.wait_status(A, &run_id, &["cancelled"], 10).await;
    let g = env.task_rpc(A, "tasks/get", &task).await;
    assert_eq!(g.result()["status"], "cancelled");
    let before = env.trail(A, &run_id).await;
    let c2 = env.task_rpc(A, "tasks/cancel", &task).await;
    assert_eq!(c2.result(), &json!({"resultType": "complete"}));
    assert_eq!(env.trail(A, &run_id).await, before);
    env.shutdown().await;
}

#[tokio::test]
async fn listen_acknowledges_only_readable_tasks_and_notifies_until_the_end() {
    // T9
    if !waits() {
        return; // Kubernetes Jobs have no waiting state to notify about or answer.
    }
    let env = env().await;
    let task = tasked(&env, A, "conformance-approval", json!({})).await;
    until_input_required(&env, &task).await;
    // Tenant B: acknowledged with [], never notified.
    let b = env
        .listen(B, vec![task.clone()], Duration::from_millis(1200))
        .await;
    let ack = &b[0];
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([]));
    assert!(!b.iter().any(|m| m["method"] == "notifications/tasks"));
    // Owner: ack lists it; a status change is pushed; the stream ends with a complete result.
    let env2 = &env;
    let t2 = task.clone();
    let listener = async move { env2.listen(A, vec![t2], Duration::from_secs(8)).await };
    let resolver = approve_after(&env, &task, Duration::from_millis(600));
    let (msgs, _) = tokio::join!(listener, resolver);
    assert_eq!(msgs[0]["params"]["notifications"]["taskIds"], json!([task]));
    let notes: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/tasks")
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n["params"]["status"] == "input_required"),
        "{msgs:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n["params"]["status"] == "completed"
                && n["params"]["result"]["isError"] == false),
        "{msgs:#?}"
    );
    assert!(notes
        .iter()
        .all(|n| n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 77));
    let last = msgs.last().unwrap();
    assert_eq!(
        last["result"]["resultType"], "complete",
        "ends with the listen's result: {last}"
    );
    assert!(!msgs
        .iter()
        .any(|m| m["method"] == "notifications/cancelled"));
    env.shutdown().await;
}

/// Listens following one task with the same credential share one host event stream; a
/// listen with another credential never rides on it (10,000 listens on one task
/// held 10,000 host connections; RFC 0208, subscriptions/listen: a taskId is never a credential).
#[tokio::test]
async fn listens_share_one_host_event_stream_per_credential_and_run() {
    if !waits() {
        return; // Kubernetes Jobs have no waiting state to answer.
    }
    let env = env().await;
    let task = tasked(&env, A, "conformance-approval", json!({})).await;
    until_input_required(&env, &task).await;
    let run_id = run_of(A, &task);
    let t0 = std::time::Instant::now();
    // A sealed taskId (the foreign flavours) opens only for the credential it was issued to
    // (README "Task ids"): the read-only caller of the same tenant follows the run by its own.
    let ro_task = if foreign() {
        task_id_for(READONLY, &run_id)
    } else {
        task.clone()
    };
    let listen = |key: &'static str, task: String| {
        let env = &env;
        async move {
            let msgs = env
                .listen(key, vec![task.clone()], Duration::from_secs(8))
                .await;
            (task, msgs)
        }
    };
    let resolver = approve_after(&env, &task, Duration::from_millis(800));
    let (a1, a2, a3, ro, _) = tokio::join!(
        listen(A, task.clone()),
        listen(A, task.clone()),
        listen(A, task.clone()),
        listen(READONLY, ro_task),
        resolver
    );
    // Every listen still sees the whole story with its own credential.
    for (task, msgs) in [&a1, &a2, &a3, &ro] {
        assert_eq!(msgs[0]["params"]["notifications"]["taskIds"], json!([task]));
        assert!(
            msgs.iter()
                .any(|m| m["method"] == "notifications/tasks"
                    && m["params"]["status"] == "completed"),
            "{msgs:#?}"
        );
        assert_eq!(msgs.last().unwrap()["result"]["resultType"], "complete");
    }
    if foreign() {
        // No event log (config/*.example.yaml `follow: poll`): a listen follows the task by
        // reading the run, so the guarantee is that no listen holds a host connection open
        // for it at all: not one event stream, whatever the number of listens.
        let streams: Vec<String> = event_streams_since(&env, t0)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert!(
            streams.is_empty(),
            "poll opens no event stream: {streams:?}"
        );
        env.shutdown().await;
        return;
    }
    let wire = openwop_mcp_sidecar::wire_id::project(&run_id);
    let streams: Vec<String> = event_streams_since(&env, t0)
        .filter(|r| {
            r.method == "GET"
                && (r.path.contains(&wire) || r.path.contains(&run_id.replace('/', "%2F")))
        })
        .map(|r| r.header("authorization").unwrap_or_default().to_string())
        .collect();
    let mut keys = streams.clone();
    keys.sort();
    assert_eq!(
        keys,
        vec![format!("Bearer {A}"), format!("Bearer {READONLY}")],
        "one host event stream per credential, not one per listen: {streams:?}"
    );
    env.shutdown().await;
}

/// The requests the host got since `t0` that asked for an event stream.
fn event_streams_since(
    env: &Env,
    t0: std::time::Instant,
) -> impl Iterator<Item = openwop_devhost::RecordedRequest> {
    env.host.requests().into_iter().filter(move |r| {
        r.at >= t0
            && r.header("accept")
                .is_some_and(|a| a.contains("text/event-stream"))
    })
}

#[tokio::test]
async fn listen_without_the_extension_or_with_too_many_ids_is_refused() {
    let env = env_with(|c| c.tasks.max_listen_task_ids = 2).await;
    let body = body_of(
        1,
        "subscriptions/listen",
        json!({"notifications":{"taskIds":["a~2Fb"]}}),
        json!({}),
    );
    let r = env
        .raw(
            &[
                ("MCP-Protocol-Version", V.into()),
                ("Mcp-Method", "subscriptions/listen".into()),
                ("Authorization", format!("Bearer {A}")),
            ],
            body.to_string(),
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32021)));
    let body = body_of(
        1,
        "subscriptions/listen",
        json!({"notifications":{"taskIds":["a","b","c"]}}),
        task_caps(),
    );
    let r = env
        .raw(
            &[
                ("MCP-Protocol-Version", V.into()),
                ("Mcp-Method", "subscriptions/listen".into()),
                ("Authorization", format!("Bearer {A}")),
            ],
            body.to_string(),
        )
        .await;
    assert_eq!(r.error_code(), Some(-32602));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("at most 2"));
    env.shutdown().await;
}

/// A listen that names no task holds no task of its own in the sidecar; it must
/// still send keep-alives while open and end with its result, not a cut, on shutdown
/// (RFC 0198 §G.14).
#[tokio::test]
async fn listen_without_tasks_keeps_alive_and_ends_with_its_result_on_shutdown() {
    let env = env().await;
    let body = body_of(
        91,
        "subscriptions/listen",
        json!({"notifications": {}}),
        json!({}),
    );
    let msgs = listen_until_shutdown(env, body).await;
    assert_eq!(msgs.len(), 2, "{msgs:?}");
}

/// A listen that follows a task is produced by its response body as the connection polls
/// it: it sends the task's state, keep-alives while the task waits, and, when the
/// sidecar shuts down, its result — never a cut, never notifications/cancelled.
#[tokio::test]
async fn listen_following_a_task_keeps_alive_and_ends_with_its_result_on_shutdown() {
    let env = env().await;
    let task = tasked(
        &env,
        A,
        "conformance-cancellable",
        json!({"delayMs": 60000}),
    )
    .await;
    let body = body_of(
        91,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [task]}}),
        task_caps(),
    );
    let msgs = listen_until_shutdown(env, body).await;
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert_eq!(msgs[1]["method"], json!("notifications/tasks"));
    assert_eq!(msgs[1]["params"]["taskId"], json!(task));
    assert_eq!(msgs[1]["params"]["status"], json!("working"));
}

/// Opens `body` as a listen, reads until a keep-alive, shuts the sidecar down and returns the
/// stream's messages once it ended cleanly; checks it began with the ack and ended with the
/// listen's result.
async fn listen_until_shutdown(env: Env, body: Value) -> Vec<Value> {
    let mut resp = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {A}"))
        .header("Accept", "text/event-stream, application/json")
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut text = String::new();
    // The ack, then keep-alives (every 200 ms in the test config).
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while !text.contains(": keep-alive") {
            match resp.chunk().await {
                Ok(Some(c)) => text.push_str(&String::from_utf8_lossy(&c)),
                _ => break,
            }
        }
    })
    .await;
    assert!(text.contains(": keep-alive"), "no keep-alive: {text}");
    let shutdown = tokio::spawn(env.shutdown());
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => text.push_str(&String::from_utf8_lossy(&c)),
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    })
    .await;
    assert_eq!(ended, Ok(true), "the stream did not end cleanly: {text}");
    shutdown.await.unwrap();
    let msgs = sse_messages(&text);
    assert_eq!(
        msgs.first().map(|m| m["method"].clone()),
        Some(json!("notifications/subscriptions/acknowledged"))
    );
    let last = msgs.last().unwrap();
    assert_eq!(last["id"], json!(91));
    assert_eq!(last["result"]["resultType"], json!("complete"));
    assert_eq!(
        last["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!(91)
    );
    assert!(
        msgs.iter()
            .all(|m| m["method"] != json!("notifications/cancelled")),
        "{msgs:?}"
    );
    msgs
}

/// The value of the sample line `name{labels}` in a Prometheus text page (0 when absent).
fn sample(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn metrics_count_each_get_and_the_host_call_behind_it() {
    let env = env().await;
    let task = tasked(
        &env,
        A,
        "conformance-cancellable",
        json!({"delayMs": 60000}),
    )
    .await;
    let gets = "openwop_sidecar_mcp_requests_total{method=\"tasks/get\",outcome=\"ok\"}";
    // A poll of a task that has not changed is revalidated: the host answers it `304`
    // (src/host/revalidate.rs); either way each poll is one read of the run at the host.
    let reads = "openwop_sidecar_upstream_request_duration_seconds_count{operation=\"getRun\",status=\"200\"}";
    let revalidated = "openwop_sidecar_upstream_request_duration_seconds_count{operation=\"getRun\",status=\"304\"}";
    let missing =
        "openwop_sidecar_mcp_requests_total{method=\"tasks/get\",outcome=\"task_not_found\"}";
    let before = env.metrics().await;
    for _ in 0..3 {
        let g = env.task_rpc(A, "tasks/get", &task).await;
        assert_eq!(g.result()["status"], "working", "{}", g.text);
    }
    let g = env
        .rpc(
            Some(A),
            "tasks/get",
            json!({"taskId": "acme~2Fnope"}),
            task_caps(),
        )
        .await;
    assert!(g.body.get("error").is_some(), "{}", g.text);
    let after = env.metrics().await;
    assert_eq!(sample(&after, gets) - sample(&before, gets), 3.0, "{after}");
    assert_eq!(
        sample(&after, missing) - sample(&before, missing),
        1.0,
        "{after}"
    );
    let read = |page: &str| sample(page, reads) + sample(page, revalidated);
    assert!(
        read(&after) - read(&before) >= 3.0,
        "each tasks/get reads the run: {after}"
    );
    env.rpc(
        Some(A),
        "tasks/cancel",
        json!({"taskId": task}),
        task_caps(),
    )
    .await;
    env.shutdown().await;
}

/// A host refusal that asks for a pause (`503` with `Retry-After`, RFC 9110 §10.2.3) is not
/// sent again 50 and 100 ms later: the caller hears of it at once, with one request to the
/// host. A 5xx without one keeps the quick retries (docs/faults.md).
#[tokio::test]
async fn a_5xx_that_asks_for_a_pause_is_not_retried_at_once() {
    use openwop_devhost::{Fault, FaultKind, RouteClass};
    let env = env().await;
    let task = tasked(
        &env,
        A,
        "conformance-cancellable",
        json!({"delayMs": 60000}),
    )
    .await;
    for (retry_after, requests) in [(Some(2), 1), (None, 3)] {
        env.host.faults().reset_counts();
        env.host.faults().add(Fault {
            route: RouteClass::GetRun,
            kind: FaultKind::Status {
                status: 503,
                retry_after,
            },
            times: None,
        });
        let g = env.task_rpc(A, "tasks/get", &task).await;
        let reads = env.host.faults().count(RouteClass::GetRun);
        env.host.faults().clear();
        assert_eq!(g.body["error"]["code"], -32603, "{}", g.text);
        assert_eq!(
            reads, requests,
            "getRun requests for one tasks/get, Retry-After {retry_after:?}"
        );
    }
    env.rpc(
        Some(A),
        "tasks/cancel",
        json!({"taskId": task}),
        task_caps(),
    )
    .await;
    env.shutdown().await;
}

/// A task of `A` whose run keeps running (a minute-long delay), and its run id.
async fn running_task(env: &Env) -> (String, String) {
    let task = tasked(env, A, "conformance-cancellable", json!({"delayMs": 60000})).await;
    let run_id = run_of(A, &task);
    (task, run_id)
}

/// The host's own answer to getRun of `run_id` as `key`: its strong `ETag`, if it sends one.
async fn host_etag(env: &Env, key: &str, run_id: &str) -> Option<String> {
    let r = env
        .http
        .get(format!(
            "{}/runs/{}",
            env.host.base_url(),
            run_id.replace('/', "~2F")
        ))
        .bearer_auth(key)
        .header("OpenWOP-Version", "2.0")
        .send()
        .await
        .unwrap();
    let etag = r.headers().get("etag")?.to_str().ok()?.to_string();
    (!etag.starts_with("W/")).then_some(etag)
}

/// The `If-None-Match` of each getRun of `run_id` the host saw since its log was cleared.
fn validators(env: &Env, run_id: &str) -> Vec<Option<String>> {
    let wire = run_id.replace('/', "~2F");
    env.host
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == format!("/runs/{wire}"))
        .map(|r| r.header("if-none-match").map(str::to_string))
        .collect()
}

/// Every poll of a task is one read at the host with the caller's credential; a poll of a task
/// whose document has not changed carries the strong ETag read before (`If-None-Match`), and
/// the host's `304` answers it exactly as the whole document would (OpenWOP v2 §1.4).
#[tokio::test]
async fn an_unchanged_task_is_revalidated_and_answers_the_same() {
    if foreign() || legacy() {
        return; // the OpenWOP v2 getRun (its ETag) is what this reads
    }
    let env = env().await;
    let (task, run_id) = running_task(&env).await;
    let first = env.task_rpc(A, "tasks/get", &task).await;
    let etag = host_etag(&env, A, &run_id)
        .await
        .expect("the host's strong ETag");
    env.host.clear_requests();
    for _ in 0..3 {
        let again = env.task_rpc(A, "tasks/get", &task).await;
        assert_eq!(again.result(), first.result(), "{}", again.text);
    }
    assert_eq!(
        validators(&env, &run_id),
        vec![Some(etag); 3],
        "each poll asks the host, with the validator of the document read"
    );
    env.task_rpc(A, "tasks/cancel", &task).await;
    env.shutdown().await;
}

/// A task whose run changed is answered from the new document: its ETag no longer matches, so
/// the host sends it whole (a kept document never outlives the run state it was read in).
#[tokio::test]
async fn a_changed_task_is_answered_from_its_new_document() {
    if foreign() || legacy() {
        return;
    }
    let env = env().await;
    let (task, run_id) = running_task(&env).await;
    for _ in 0..2 {
        let g = env.task_rpc(A, "tasks/get", &task).await;
        assert_eq!(g.result()["status"], "working", "{}", g.text);
    }
    // Cancelled behind the mount's back, straight at the host.
    let (s, _) = env
        .rest_post(
            A,
            &format!("/runs/{}/cancel", run_id.replace('/', "%2F")),
            json!({}),
        )
        .await;
    assert!(s < 300, "cancel: {s}");
    env.wait_status(A, &run_id, &["cancelled"], 5).await;
    let g = env.task_rpc(A, "tasks/get", &task).await;
    assert_eq!(g.result()["status"], "cancelled", "{}", g.text);
    env.shutdown().await;
}

/// A document kept for one caller is never offered for another, even one of the same tenant:
/// the other's read carries no validator, and is answered from what the host sent it.
#[tokio::test]
async fn a_document_kept_for_one_caller_is_not_offered_for_another() {
    if foreign() || legacy() {
        return;
    }
    let env = env().await;
    let (task, run_id) = running_task(&env).await;
    env.task_rpc(A, "tasks/get", &task).await;
    env.task_rpc(A, "tasks/get", &task).await;
    env.host.clear_requests();
    let other = env.task_rpc(READONLY, "tasks/get", &task).await;
    assert_eq!(other.result()["status"], "working", "{}", other.text);
    // Another tenant's read is refused by the host as before, whatever was kept.
    let foreign_read = env.task_rpc(B, "tasks/get", &task).await;
    assert_eq!(
        foreign_read.error_code(),
        Some(-32602),
        "{}",
        foreign_read.text
    );
    let seen = validators(&env, &run_id);
    assert_eq!(
        seen,
        vec![None, None],
        "no validator for another caller: {seen:?}"
    );
    env.task_rpc(A, "tasks/cancel", &task).await;
    env.shutdown().await;
}

/// `tasks.revalidate: false` reads the whole document on every poll, with no validator.
#[tokio::test]
async fn revalidation_off_reads_the_whole_document_every_poll() {
    if foreign() || legacy() {
        return;
    }
    let env = env_with(|c| c.tasks.revalidate = false).await;
    let (task, run_id) = running_task(&env).await;
    env.host.clear_requests();
    for _ in 0..3 {
        let g = env.task_rpc(A, "tasks/get", &task).await;
        assert_eq!(g.result()["status"], "working", "{}", g.text);
    }
    assert_eq!(validators(&env, &run_id), vec![None; 3]);
    env.task_rpc(A, "tasks/cancel", &task).await;
    env.shutdown().await;
}
