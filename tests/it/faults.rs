//! Issue 10 "Upstream faults": every fault the devhost can inject (devhost/src/faults.rs),
//! seen through the real sidecar. Each fault must give a precise JSON-RPC or HTTP error within
//! the configured timeouts, never a panic or a hung request, and an owned run must still be
//! cancelled once the host is back within `ownership.cancelDeadline`.
//!
//! Every test prints its observations as `FAULT| fault | route | request | client sees |
//! took | owned run` rows (run with `--nocapture`); docs/faults.md is filled from them.

use std::time::{Duration, Instant};

use openwop_devhost::RouteClass;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::support::fault::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Connection refused
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn connection_refused_is_502_on_rest_and_a_generic_32603_on_mcp() {
    let port = free_port();
    let env = fault_env(|c| c.upstream.url = format!("http://127.0.0.1:{port}")).await;
    let fault = "connection refused (closed port)";

    let ((s, v), took) = timed(HANG, "passthrough", env.rest_get(A, "/runs")).await;
    assert_eq!(
        (s, v["error"].as_str()),
        (502, Some("upstream_unavailable"))
    );
    assert!(!v.to_string().contains(&port.to_string()), "{v}");
    row(
        fault,
        "any passthrough path",
        "GET /runs",
        &format!(
            "HTTP 502 {{\"error\":\"upstream_unavailable\"}} \"{}\"",
            v["message"].as_str().unwrap_or("")
        ),
        took,
        "n/a",
    );
    assert!(took < Duration::from_secs(2), "{took:?}");

    let task = openwop_mcp_sidecar::wire_id::project("acme/r-0123456789abcdef0123");
    let cases: Vec<(&str, &str, Value, Value)> = vec![
        ("discovery", "server/discover", json!({}), json!({})),
        ("discovery", "tools/list", json!({}), json!({})),
        (
            "discovery",
            "tools/call",
            json!({"name": "conformance-noop", "arguments": {}}),
            json!({}),
        ),
        ("getRun", "tasks/get", json!({"taskId": task}), task_caps()),
        (
            "getRun",
            "tasks/cancel",
            json!({"taskId": task}),
            task_caps(),
        ),
        (
            "getRun",
            "tasks/update",
            json!({"taskId": task, "inputResponses": {}}),
            task_caps(),
        ),
    ];
    for (route, method, params, caps) in cases {
        let (r, took) = timed(HANG, method, env.rpc(Some(A), method, params, caps)).await;
        assert_internal(&r, method);
        // Three attempts (retry: true) refused at once, 50 + 100 ms apart.
        assert!(took < BACKOFF + SLACK, "{method}: {took:?}");
        row(fault, route, method, &seen(&r), took, "n/a (no run)");
    }

    let (status, took) = timed(HANG, "/readyz", readyz(&env)).await;
    assert_eq!(status, 503);
    row(fault, "discovery", "GET /readyz", "HTTP 503", took, "n/a");
    assert_no_panic();
    env.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Answers slower than the timeouts
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn slow_reads_time_out_with_32603_within_one_route_timeout() {
    let env = fault_env(|c| c.upstream.ready_timeout = Duration::from_millis(500)).await;
    let fault = "answer held back 2 s (delay), route timeout 300 ms";
    let (task, _) = waiting_task(&env).await;
    let noop = tasked(&env, A, "conformance-noop", json!({})).await;
    env.poll_task(A, &noop, |r| r["status"] == "completed", 10)
        .await;

    env.host
        .faults()
        .delay(RouteClass::GetRun, Duration::from_secs(2));
    let n = count(&env, RouteClass::GetRun);
    let (r, took) = timed(HANG, "tasks/get", get(&env, &noop)).await;
    assert_internal(&r, "tasks/get");
    // A timed-out read is not repeated: a slow host is not made slower (only createRun, which
    // is idempotency-keyed, repeats after a timeout to learn its run's id).
    assert_eq!(count(&env, RouteClass::GetRun) - n, 1, "not retried");
    assert!(took >= T, "{took:?}");
    assert!(took < T + SLACK, "{took:?}");
    row(fault, "getRun", "tasks/get", &seen(&r), took, "n/a");
    env.host.faults().clear();

    env.host
        .faults()
        .delay(RouteClass::Discovery, Duration::from_secs(2));
    let (r, took) = timed(
        HANG,
        "tools/list",
        env.rpc(Some(B), "tools/list", json!({}), json!({})),
    )
    .await;
    assert_internal(&r, "tools/list");
    assert!(took < T + SLACK, "{took:?}");
    row(fault, "discovery", "tools/list", &seen(&r), took, "n/a");
    let (status, took) = timed(HANG, "/readyz", readyz(&env)).await;
    assert_eq!(status, 503);
    assert!(took < Duration::from_millis(500) + SLACK, "{took:?}");
    row(
        fault,
        "discovery",
        "GET /readyz (readyTimeout 500 ms)",
        "HTTP 503",
        took,
        "n/a",
    );
    env.host.faults().clear();

    env.host
        .faults()
        .delay(RouteClass::Cancel, Duration::from_secs(2));
    let (r, took) = timed(
        HANG,
        "tasks/cancel",
        env.rpc(
            Some(A),
            "tasks/cancel",
            json!({"taskId": task}),
            task_caps(),
        ),
    )
    .await;
    assert_internal(&r, "tasks/cancel");
    assert!(took < T * 4 + BACKOFF + SLACK, "{took:?}");
    row(
        fault,
        "cancel",
        "tasks/cancel",
        &seen(&r),
        took,
        "run cancelled (the held-back cancel took effect)",
    );
    env.host.faults().clear();
    assert_eq!(
        env.wait_status(A, &unproject(&task), &["cancelled"], 5)
            .await,
        "cancelled"
    );
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]
async fn slow_passthrough_is_relayed_however_slow() {
    // Passthrough requests have no request timeout (upstream.requestTimeoutMs bounds the
    // sidecar's own host API calls only): a slow host answer is relayed when it comes.
    let env = fault_env(|_| {}).await;
    env.host
        .faults()
        .delay(RouteClass::ListRuns, Duration::from_secs(2));
    let ((s, v), took) = timed(HANG, "passthrough", env.rest_get(A, "/runs")).await;
    env.host.faults().clear();
    assert_eq!(s, 200, "{v}");
    assert!(took >= Duration::from_secs(2), "{took:?}");
    row(
        "answer held back 2 s (delay), route timeout 300 ms",
        "listRuns (passthrough)",
        "GET /runs",
        "HTTP 200, the host's answer unchanged",
        took,
        "n/a",
    );
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]

async fn slow_events_poll_times_out_within_the_route_timeout() {
    let env = fault_env(|_| {}).await;
    let fault = "answer held back 10 s (delay), route timeout 300 ms";
    let (task, _) = waiting_task(&env).await;
    env.host
        .faults()
        .delay(RouteClass::Poll, Duration::from_secs(10));
    let (r, took) = timed(HANG, "tasks/get", get(&env, &task)).await;
    row(
        fault,
        "poll",
        "tasks/get (input_required task)",
        &seen(&r),
        took,
        "n/a",
    );
    assert_internal(&r, "tasks/get");
    // tasks/get asks for a 1 s long-poll: 3 attempts of (1 s + route timeout) at most.
    let bound = (Duration::from_secs(1) + T) * 3 + BACKOFF + SLACK;
    assert!(took < bound, "took {took:?}, wanted under {bound:?}");
    env.host.faults().clear();
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]

async fn slow_event_stream_open_falls_back_to_polling_within_the_route_timeout() {
    let env = fault_env(|_| {}).await;
    let fault = "event stream head held back 8 s (delay), route timeout 300 ms";
    let mut problems = Vec::new();
    env.host
        .faults()
        .delay(RouteClass::Stream, Duration::from_secs(8));
    let (r, took) = timed(
        HANG,
        "tools/call",
        env.call(A, "conformance-delay", json!({"delayMs": 800}), json!({})),
    )
    .await;
    row(
        fault,
        "stream",
        "tools/call conformance-delay 800 ms (JSON)",
        &seen(&r),
        took,
        "completed",
    );
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    // The run ends after 800 ms; the stream should be given up after its route timeout.
    let bound = Duration::from_millis(800) + T + SLACK + SLACK;
    if took > bound {
        problems.push(format!(
            "blocking call answered after {took:?}, wanted under {bound:?}"
        ));
    }

    // A listen follows the same stream: without a bound on its head, nothing is notified.
    let task = tasked(&env, A, "conformance-delay", json!({"delayMs": 800})).await;
    let (msgs, took) = timed(
        HANG,
        "subscriptions/listen",
        env.listen(A, vec![task.clone()], Duration::from_secs(5)),
    )
    .await;
    let done = msgs
        .iter()
        .any(|m| m["method"] == "notifications/tasks" && m["params"]["status"] == "completed");
    let ended = msgs
        .last()
        .is_some_and(|m| m["result"]["resultType"] == "complete");
    row(
        fault,
        "stream",
        "subscriptions/listen (one 800 ms task), read for 5 s",
        &format!(
            "SSE: {} messages, completed notified: {done}, final result: {ended}",
            msgs.len()
        ),
        took,
        "completed",
    );
    if !(done && ended) {
        problems.push(format!("listen: no completion within 5 s: {msgs:?}"));
    }
    env.host.faults().clear();
    assert!(problems.is_empty(), "{problems:#?}");
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]
async fn lost_create_run_answer_leaves_no_run_behind() {
    let env = fault_env(|c| c.ownership.cancel_deadline = Duration::from_secs(3)).await;
    let mut problems = Vec::new();
    for (fault, damage) in [
        ("answer held back 2 s (delay), route timeout 300 ms", 0),
        ("truncated JSON answer (badJson)", 1),
        ("connection reset after 5 body bytes x3", 2),
    ] {
        let before = env.run_ids(A, "conformance-cancellable").await;
        match damage {
            0 => env
                .host
                .faults()
                .delay(RouteClass::CreateRun, Duration::from_secs(2)),
            1 => env.host.faults().bad_json_next(RouteClass::CreateRun, 1),
            _ => env.host.faults().reset_next(RouteClass::CreateRun, 3, 5),
        }
        let (r, took) = timed(
            HANG,
            "tools/call",
            env.call(
                A,
                "conformance-cancellable",
                json!({"delayMs": 20000}),
                task_caps(),
            ),
        )
        .await;
        env.host.faults().clear();
        let created = env.run_ids(A, "conformance-cancellable").await;
        let fresh: Vec<&String> = created.iter().filter(|i| !before.contains(i)).collect();
        assert_eq!(fresh.len(), 1, "one run for all attempts (Idempotency-Key)");
        let run_id = fresh[0].clone();
        // Either the repeated createRun (same Idempotency-Key) recovered the answer and the
        // client holds the task, or the client was told the call failed and the run is
        // cancelled: never a run nobody knows about.
        let answered = r.result()["resultType"] == "task";
        if answered {
            assert_eq!(unproject(r.result()["taskId"].as_str().unwrap()), run_id);
        } else {
            assert_internal(&r, "tools/call");
        }
        tokio::time::sleep(Duration::from_secs(4)).await;
        let fate = fate(&env, &run_id).await;
        row(
            fault,
            "createRun",
            "tools/call (tasked)",
            &seen(&r),
            took,
            &format!("run created; after the cancel deadline: {fate}"),
        );
        let status = env.status(A, &run_id).await;
        if answered && status == "cancelled" {
            problems.push(format!(
                "{fault}: the task the client holds was cancelled: {fate}"
            ));
        }
        if !answered && status != "cancelled" {
            problems.push(format!(
                "{fault}: the run the client never heard of is {fate}"
            ));
        }
        if answered {
            let _ = env
                .rpc(
                    Some(A),
                    "tasks/cancel",
                    json!({"taskId": r.result()["taskId"]}),
                    task_caps(),
                )
                .await;
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert_no_panic();
    env.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// 5xx
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn create_run_5xx_is_retried_and_persistent_5xx_is_32603() {
    let env = fault_env(|_| {}).await;
    // Warm the catalog so only createRun is counted.
    let _ = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;

    let before = env.run_ids(A, "conformance-noop").await;
    env.host.faults().fail_next(RouteClass::CreateRun, 2, 503);
    let n = count(&env, RouteClass::CreateRun);
    let (r, took) = timed(
        HANG,
        "tools/call",
        env.call(A, "conformance-noop", json!({}), json!({})),
    )
    .await;
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    assert_eq!(
        count(&env, RouteClass::CreateRun) - n,
        3,
        "2 failures, then success"
    );
    let after = env.run_ids(A, "conformance-noop").await;
    assert_eq!(after.len(), before.len() + 1, "exactly one run");
    row(
        "503 x2",
        "createRun",
        "tools/call (blocking)",
        &seen(&r),
        took,
        "run completed",
    );

    for status in [503, 500] {
        let before = env.run_ids(A, "conformance-noop").await;
        env.host
            .faults()
            .fail_next(RouteClass::CreateRun, 3, status);
        let n = count(&env, RouteClass::CreateRun);
        let (r, took) = timed(
            HANG,
            "tools/call",
            env.call(A, "conformance-noop", json!({}), json!({})),
        )
        .await;
        assert_internal(&r, "tools/call");
        assert_eq!(count(&env, RouteClass::CreateRun) - n, 3, "three attempts");
        assert_eq!(env.run_ids(A, "conformance-noop").await, before, "no run");
        assert!(took < BACKOFF + SLACK, "{took:?}");
        row(
            &format!("{status} x3 (persistent)"),
            "createRun",
            "tools/call (blocking)",
            &seen(&r),
            took,
            "no run created",
        );
    }
    // The same through the tasked path.
    env.host.faults().fail_next(RouteClass::CreateRun, 3, 502);
    let (r, took) = timed(
        HANG,
        "tools/call",
        env.call(A, "conformance-noop", json!({}), task_caps()),
    )
    .await;
    assert_internal(&r, "tasked tools/call");
    row(
        "502 x3 (persistent)",
        "createRun",
        "tools/call (tasked)",
        &seen(&r),
        took,
        "no run created",
    );
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]
async fn get_run_5xx_is_retried_and_persistent_5xx_is_32603() {
    let env = fault_env(|_| {}).await;
    let task = tasked(&env, A, "conformance-noop", json!({})).await;
    env.poll_task(A, &task, |r| r["status"] == "completed", 10)
        .await;

    env.host.faults().fail_next(RouteClass::GetRun, 2, 503);
    let n = count(&env, RouteClass::GetRun);
    let (r, took) = timed(HANG, "tasks/get", get(&env, &task)).await;
    assert_eq!(r.result()["status"], "completed", "{}", r.text);
    assert_eq!(count(&env, RouteClass::GetRun) - n, 3);
    row("503 x2", "getRun", "tasks/get", &seen(&r), took, "n/a");

    env.host.faults().fail_next(RouteClass::GetRun, 3, 500);
    let n = count(&env, RouteClass::GetRun);
    let (r, took) = timed(HANG, "tasks/get", get(&env, &task)).await;
    assert_internal(&r, "tasks/get");
    assert_eq!(count(&env, RouteClass::GetRun) - n, 3);
    row(
        "500 x3 (persistent)",
        "getRun",
        "tasks/get",
        &seen(&r),
        took,
        "n/a",
    );

    // A tasked call still answers its task when the read after createRun fails: the run is
    // durable once created.
    env.host.faults().fail_next(RouteClass::GetRun, 3, 503);
    let (r, took) = timed(
        HANG,
        "tools/call",
        env.call(A, "conformance-noop", json!({}), task_caps()),
    )
    .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    row(
        "503 x3 (persistent)",
        "getRun",
        "tools/call (tasked)",
        &seen(&r),
        took,
        "run completed",
    );

    // A blocking call whose final read fails: -32603 (the run itself completed).
    let before = env.run_ids(A, "conformance-delay").await;
    always(&env, RouteClass::GetRun, 503);
    let (r, took) = timed(
        HANG,
        "tools/call",
        env.call(A, "conformance-delay", json!({"delayMs": 300}), json!({})),
    )
    .await;
    env.host.faults().clear();
    assert_internal(&r, "blocking tools/call");
    let run_id = env.fresh_run(A, "conformance-delay", &before).await;
    let fate = fate(&env, &run_id).await;
    row(
        "503 persistent",
        "getRun",
        "tools/call (blocking, 300 ms run)",
        &seen(&r),
        took,
        &fate,
    );
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]

async fn blocking_call_failing_after_create_run_does_not_lose_the_run() {
    let mut problems = Vec::new();
    {
        let env = fault_env(|c| c.ownership.cancel_deadline = Duration::from_secs(3)).await;
        let before = env.run_ids(A, "conformance-cancellable").await;
        env.host.faults().cut_stream_next(1, 0);
        always(&env, RouteClass::Poll, 503);
        let (r, took) = timed(
            HANG,
            "tools/call",
            env.call(
                A,
                "conformance-cancellable",
                json!({"delayMs": 20000}),
                json!({}),
            ),
        )
        .await;
        env.host.faults().clear();
        let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let fate = fate(&env, &run_id).await;
        row(
            "stream cut + 503 persistent",
            "stream + poll",
            "tools/call (blocking)",
            &seen(&r),
            took,
            &format!("after the cancel deadline: {fate}"),
        );
        assert_internal(&r, "tools/call");
        if !r.text.contains(&run_id) && env.status(A, &run_id).await != "cancelled" {
            problems.push(format!(
                "poll 503: the run is neither named nor cancelled: {fate}"
            ));
        }
        env.shutdown().await;
    }
    {
        let (env, outage) =
            outage_env(|c| c.ownership.cancel_deadline = Duration::from_secs(3)).await;
        let before = env.run_ids(A, "conformance-cancellable").await;
        let call = timed(HANG, "tools/call", async {
            let r = env
                .call(
                    A,
                    "conformance-cancellable",
                    json!({"delayMs": 20000}),
                    json!({}),
                )
                .await;
            (r, Instant::now())
        });
        let cut = async {
            let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
            env.wait_status(A, &run_id, &["running"], 5).await;
            outage.down();
            let at = Instant::now();
            tokio::time::sleep(Duration::from_secs(1)).await;
            outage.up();
            (run_id, at)
        };
        let (((r, answered_at), _), (run_id, down_at)) = tokio::join!(call, cut);
        let took = answered_at.saturating_duration_since(down_at);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let fate = fate(&env, &run_id).await;
        row(
            "host down (connection refused) 1 s mid-call",
            "stream + poll",
            "tools/call (blocking)",
            &seen(&r),
            took,
            &format!("host back, after the cancel deadline: {fate}"),
        );
        assert_internal(&r, "tools/call");
        if !r.text.contains(&run_id) && env.status(A, &run_id).await != "cancelled" {
            problems.push(format!(
                "outage: the run is neither named nor cancelled: {fate}"
            ));
        }
        env.shutdown().await;
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert_no_panic();
}

// ---------------------------------------------------------------------------------------------
// 429 with Retry-After
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn rate_limits_pass_through_as_429_with_retry_after() {
    let env = fault_env(|_| {}).await;
    let step = |inject, route, request, method, params, caps, secs, attempts, run, owned| Step {
        fault: "429 + Retry-After".into(),
        inject,
        route,
        request,
        method,
        params,
        caps,
        want: Want::RateLimited(secs),
        attempts,
        run,
        owned,
    };
    let before_task = [
        step(
            Inject::RateLimit(RouteClass::Discovery, 1, 2),
            "discovery",
            "tools/list",
            "tools/list",
            json!({}),
            json!({}),
            "2",
            None,
            Run::Unchecked,
            "n/a",
        ),
        // A 429 is not retried.
        step(
            Inject::RateLimit(RouteClass::CreateRun, 1, 7),
            "createRun",
            "tools/call",
            "tools/call",
            json!({"name": "conformance-noop", "arguments": {}}),
            json!({}),
            "7",
            Some(1),
            Run::Unchecked,
            "no run created",
        ),
    ];
    for s in before_task {
        check(&env, "", s).await;
    }

    let (task, key) = waiting_task(&env).await;
    let run_id = unproject(&task);
    let on_task = [
        step(
            Inject::RateLimit(RouteClass::GetRun, 1, 3),
            "getRun",
            "tasks/get",
            "tasks/get",
            json!({"taskId": task}),
            task_caps(),
            "3",
            None,
            Run::Unchecked,
            "n/a",
        ),
        step(
            Inject::RateLimit(RouteClass::Poll, 1, 4),
            "poll",
            "tasks/get (input_required task)",
            "tasks/get",
            json!({"taskId": task}),
            task_caps(),
            "4",
            None,
            Run::Unchecked,
            "n/a",
        ),
        step(
            Inject::RateLimit(RouteClass::Resolve, 1, 5),
            "resolve",
            "tasks/update",
            "tasks/update",
            approve(&task, &key),
            task_caps(),
            "5",
            None,
            Run::Unchecked,
            "n/a (interrupt still open)",
        ),
        step(
            Inject::RateLimit(RouteClass::Cancel, 1, 6),
            "cancel",
            "tasks/cancel",
            "tasks/cancel",
            json!({"taskId": task}),
            task_caps(),
            "6",
            None,
            Run::Still("waiting-approval"),
            "n/a (run still waiting)",
        ),
    ];
    for s in on_task {
        check(&env, &run_id, s).await;
    }
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]
async fn rate_limit_during_a_blocking_call_is_precise() {
    let env = fault_env(|_| {}).await;
    let before = env.run_ids(A, "conformance-cancellable").await;
    env.host.faults().cut_stream_next(1, 0);
    env.host.faults().rate_limit_next(RouteClass::Poll, 1, 5);
    let (r, took) = timed(
        HANG,
        "tools/call",
        env.call(
            A,
            "conformance-cancellable",
            json!({"delayMs": 20000}),
            json!({}),
        ),
    )
    .await;
    let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let fate = fate(&env, &run_id).await;
    row(
        "stream cut + 429 Retry-After: 5",
        "stream + poll",
        "tools/call (blocking)",
        &seen(&r),
        took,
        &fate,
    );
    // Either the sidecar waits the Retry-After out itself (the run is its own), or it tells the
    // client precisely and gives the run up.
    if r.error_code().is_some() {
        assert_rate_limited(&r, "5", "tools/call");
        assert_eq!(env.status(A, &run_id).await, "cancelled", "{fate}");
    }
    assert_no_panic();
    env.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Connection reset mid-body, truncated JSON
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn reset_and_truncated_answers_on_reads_are_retried_or_32603() {
    let env = fault_env(|_| {}).await;
    let done = tasked(&env, A, "conformance-noop", json!({})).await;
    env.poll_task(A, &done, |r| r["status"] == "completed", 10)
        .await;
    let (waiting, _) = waiting_task(&env).await;

    // getRun: one reset is absorbed by the retry; three are not.
    for (times, route, class, task) in [
        (1, "getRun", RouteClass::GetRun, &done),
        (3, "getRun", RouteClass::GetRun, &done),
        (1, "poll", RouteClass::Poll, &waiting),
        (3, "poll", RouteClass::Poll, &waiting),
    ] {
        env.host.faults().reset_next(class, times, 10);
        let n = count(&env, class);
        let (r, took) = timed(HANG, "tasks/get", get(&env, task)).await;
        let attempts = count(&env, class) - n;
        let fault = format!("connection reset after 10 body bytes x{times}");
        let request = if class == RouteClass::Poll {
            "tasks/get (input_required task)"
        } else {
            "tasks/get"
        };
        if times == 1 {
            assert!(
                r.body.get("error").is_none(),
                "{fault} on {route}: {}",
                r.text
            );
            assert_eq!(attempts, 2, "{fault}: retried once");
        } else {
            assert_internal(&r, &fault);
            assert_eq!(attempts, 3, "{fault}: three attempts");
        }
        row(
            &fault,
            route,
            request,
            &format!("{} ({attempts} attempts)", seen(&r)),
            took,
            "n/a",
        );
        env.host.faults().clear();
    }

    // Truncated JSON with 200: a damaged answer is read again, like a reset one.
    for (route, class, task) in [
        ("getRun", RouteClass::GetRun, &done),
        ("poll", RouteClass::Poll, &waiting),
    ] {
        env.host.faults().bad_json_next(class, 1);
        let n = count(&env, class);
        let (r, took) = timed(HANG, "tasks/get", get(&env, task)).await;
        let attempts = count(&env, class) - n;
        assert!(
            r.body.get("error").is_none(),
            "truncated JSON x1 on {route}: {}",
            r.text
        );
        assert_eq!(attempts, 2, "a 200 with a broken body is read again");
        let request = if class == RouteClass::Poll {
            "tasks/get (input_required task)"
        } else {
            "tasks/get"
        };
        row(
            "truncated JSON, 200 (badJson) x1",
            route,
            request,
            &format!("{} ({attempts} attempts)", seen(&r)),
            took,
            "n/a",
        );
        assert!(took < BACKOFF + SLACK, "{took:?}");
        env.host.faults().clear();
    }

    // A reset createRun answer: the retry replays the Idempotency-Key, one run, success.
    let before = env.run_ids(A, "conformance-noop").await;
    env.host.faults().reset_next(RouteClass::CreateRun, 1, 5);
    let (r, took) = timed(
        HANG,
        "tools/call",
        env.call(A, "conformance-noop", json!({}), json!({})),
    )
    .await;
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    let after = env.run_ids(A, "conformance-noop").await;
    assert_eq!(after.len(), before.len() + 1, "one run despite the retry");
    row(
        "connection reset after 5 body bytes x1",
        "createRun",
        "tools/call (blocking)",
        &seen(&r),
        took,
        "one run (Idempotency-Key replay), completed",
    );

    // A blocking call whose events poll breaks once (after the stream was cut).
    for (fault, damage) in [
        ("stream cut + poll reset x1", 0),
        ("stream cut + poll badJson x1", 1),
    ] {
        env.host.faults().cut_stream_next(1, 0);
        match damage {
            0 => env.host.faults().reset_next(RouteClass::Poll, 1, 10),
            _ => env.host.faults().bad_json_next(RouteClass::Poll, 1),
        }
        let before = env.run_ids(A, "conformance-delay").await;
        let (r, took) = timed(
            HANG,
            "tools/call",
            env.call(A, "conformance-delay", json!({"delayMs": 500}), json!({})),
        )
        .await;
        env.host.faults().clear();
        let run_id = env.fresh_run(A, "conformance-delay", &before).await;
        env.wait_status(A, &run_id, &["completed", "cancelled"], 5)
            .await;
        let fate = fate(&env, &run_id).await;
        row(
            fault,
            "stream + poll",
            "tools/call (blocking, 500 ms run)",
            &seen(&r),
            took,
            &fate,
        );
        // A reset or damaged poll answer is read again: the call still gets its answer.
        let _ = damage;
        assert_eq!(r.result()["isError"], false, "{fault}: {}", r.text);
    }
    assert_no_panic();
    env.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Event stream cut mid-event
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn cut_event_stream_falls_back_to_polling() {
    let env = fault_env(|_| {}).await;
    for after in [0, 1, 2] {
        env.host.faults().cut_stream_next(1, after);
        let (s, p) = (
            count(&env, RouteClass::Stream),
            count(&env, RouteClass::Poll),
        );
        let (r, took) = timed(
            HANG,
            "tools/call",
            env.call(A, "conformance-delay", json!({"delayMs": 800}), json!({})),
        )
        .await;
        assert_eq!(r.result()["isError"], false, "{}", r.text);
        assert!(r.result()["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("completed"));
        assert_eq!(
            count(&env, RouteClass::Stream) - s,
            1,
            "the stream is not reopened"
        );
        assert!(count(&env, RouteClass::Poll) > p, "the fallback polled");
        assert!(env.host.faults().active().is_empty(), "the cut was used");
        assert!(
            took < Duration::from_millis(800) + SLACK + SLACK,
            "{took:?}"
        );
        row(
            &format!("stream cut mid-event after {after} event(s)"),
            "stream",
            "tools/call conformance-delay 800 ms (JSON)",
            &seen(&r),
            took,
            "completed",
        );
    }
    env.host.faults().cut_stream_next(1, 1);
    let (r, took) = timed(
        HANG,
        "tools/call (SSE)",
        sse_call(&env, "conformance-delay", json!({"delayMs": 800})),
    )
    .await;
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    row(
        "stream cut mid-event after 1 event",
        "stream",
        "tools/call conformance-delay 800 ms (SSE)",
        &seen(&r),
        took,
        "completed",
    );

    // A listen whose task stream is cut keeps following the task by polling.
    let task = tasked(&env, A, "conformance-delay", json!({"delayMs": 800})).await;
    env.host.faults().cut_stream_next(1, 0);
    let (msgs, took) = timed(
        HANG,
        "subscriptions/listen",
        env.listen(A, vec![task.clone()], Duration::from_secs(10)),
    )
    .await;
    let last = msgs.last().cloned().unwrap_or(Value::Null);
    assert_eq!(last["result"]["resultType"], "complete", "{msgs:#?}");
    assert!(
        msgs.iter()
            .any(|m| m["method"] == "notifications/tasks" && m["params"]["status"] == "completed"),
        "{msgs:#?}"
    );
    row(
        "stream cut mid-event after 0 events",
        "stream",
        "subscriptions/listen (one 800 ms task)",
        "SSE: notifications/tasks completed, then the final result",
        took,
        "completed",
    );
    assert_no_panic();
    env.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Discovery down at start-up
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn discovery_down_at_start_up_then_recovering() {
    let env = fault_env(|c| c.upstream.ready_timeout = Duration::from_millis(500)).await;
    assert_eq!(
        count(&env, RouteClass::Discovery),
        0,
        "nothing asked the host yet"
    );
    always(&env, RouteClass::Discovery, 503);
    let fault = "503 on every discovery (host starting)";

    let (status, took) = timed(HANG, "/readyz", readyz(&env)).await;
    assert_eq!(status, 503);
    row(fault, "discovery", "GET /readyz", "HTTP 503", took, "n/a");
    for method in ["server/discover", "tools/list"] {
        let (r, took) = timed(HANG, method, env.rpc(Some(A), method, json!({}), json!({}))).await;
        assert_internal(&r, method);
        row(fault, "discovery", method, &seen(&r), took, "n/a");
    }
    let (r, took) = timed(
        HANG,
        "tools/call",
        env.call(A, "conformance-noop", json!({}), json!({})),
    )
    .await;
    assert_internal(&r, "tools/call");
    row(
        fault,
        "discovery",
        "tools/call",
        &seen(&r),
        took,
        "no run created",
    );
    let (resp, took) = timed(
        HANG,
        "GET /.well-known/openwop",
        env.http
            .get(format!("{}/.well-known/openwop", env.url))
            .send(),
    )
    .await;
    let resp = resp.unwrap();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert!(status >= 500, "{status} {body}");
    row(
        fault,
        "discovery",
        "GET /.well-known/openwop",
        &format!("HTTP {status} {}", body["error"]),
        took,
        "n/a",
    );

    // The host comes up: nothing of the failure was cached.
    env.host.faults().clear();
    let (status, took) = timed(HANG, "/readyz", readyz(&env)).await;
    assert_eq!(status, 200);
    row(
        "discovery recovered",
        "discovery",
        "GET /readyz",
        "HTTP 200",
        took,
        "n/a",
    );
    let (r, took) = timed(
        HANG,
        "tools/list",
        env.rpc(Some(A), "tools/list", json!({}), json!({})),
    )
    .await;
    assert!(
        r.result()["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{}",
        r.text
    );
    row(
        "discovery recovered",
        "discovery",
        "tools/list",
        &seen(&r),
        took,
        "n/a",
    );
    let r = env.call(A, "conformance-noop", json!({}), json!({})).await;
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    assert_no_panic();
    env.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Owned-run cancels while the host fails them
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn owned_run_cancel_is_delivered_once_the_host_accepts_it() {
    let env = fault_env(|c| c.ownership.cancel_deadline = Duration::from_secs(5)).await;
    // The fault must be in place before the first attempt: the dispatcher starts at once.
    env.host.faults().fail_next(RouteClass::Cancel, 3, 503);
    let (run_id, gone) = orphan_a_run(&env).await;
    let (status, _) = timed(
        HANG,
        "cancel",
        env.wait_status(A, &run_id, &["cancelled", "completed"], 10),
    )
    .await;
    let took = gone.elapsed();
    assert_eq!(status, "cancelled");
    assert_eq!(
        cancel_reason(&env, &run_id).await.as_deref(),
        Some("mcp-request-cancelled")
    );
    let attempts = env.host_cancels(&run_id).len();
    assert!(attempts >= 2, "{attempts}");
    assert!(
        took < Duration::from_secs(5),
        "within the cancel deadline: {took:?}"
    );
    assert_eq!(env.metric(&cancel_sample("cancelled")).await, 1.0);
    row(
        "503 on the next 3 cancels",
        "cancel",
        "client disconnects from a blocking tools/call",
        &format!("(client gone) {attempts} cancel attempts, metric outcome=\"cancelled\""),
        took,
        "cancelled (mcp-request-cancelled)",
    );
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]
async fn owned_run_cancel_survives_a_slow_host() {
    let env = fault_env(|c| c.ownership.cancel_deadline = Duration::from_secs(5)).await;
    env.host
        .faults()
        .delay(RouteClass::Cancel, Duration::from_secs(2));
    let (run_id, gone) = orphan_a_run(&env).await;
    // The host is slow for a second, then answers in time again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    env.host.faults().clear();
    let (status, _) = timed(
        HANG,
        "cancel",
        env.wait_status(A, &run_id, &["cancelled", "completed"], 10),
    )
    .await;
    assert_eq!(status, "cancelled");
    assert_eq!(
        cancel_reason(&env, &run_id).await.as_deref(),
        Some("mcp-request-cancelled")
    );
    // Let the dispatcher finish: its last attempt meets a terminal run.
    let mut outcome = String::new();
    for _ in 0..100 {
        for o in ["cancelled", "already_terminal", "refused", "gave_up"] {
            if env.metric(&cancel_sample(o)).await > 0.0 {
                outcome = o.to_string();
            }
        }
        if !outcome.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = gone.elapsed();
    let attempts = env.host_cancels(&run_id).len();
    assert!(
        ["cancelled", "already_terminal"].contains(&outcome.as_str()),
        "{outcome}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    row(
        "cancel answers held back 2 s for 1 s (delay), route timeout 300 ms",
        "cancel",
        "client disconnects from a blocking tools/call",
        &format!("(client gone) {attempts} cancel attempts, metric outcome=\"{outcome}\""),
        took,
        "cancelled (mcp-request-cancelled)",
    );
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]
async fn owned_run_cancel_refused_past_the_deadline_is_counted_as_gave_up() {
    let deadline = Duration::from_secs(1);
    let env = fault_env(|c| c.ownership.cancel_deadline = deadline).await;
    always(&env, RouteClass::Cancel, 503);
    let (run_id, gone) = orphan_a_run(&env).await;
    let sample = cancel_sample("gave_up");
    let mut took = Duration::ZERO;
    for _ in 0..200 {
        if env.metric(&sample).await == 1.0 {
            took = gone.elapsed();
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        !took.is_zero(),
        "no gave_up outcome: {}",
        env.metrics().await
    );
    assert!(took < deadline + SLACK, "{took:?}");
    let attempts = env.host_cancels(&run_id).len();
    let status = env.status(A, &run_id).await;
    assert_eq!(status, "running", "nobody cancelled it");
    row(
        "503 on every cancel, cancel deadline 1 s",
        "cancel",
        "client disconnects from a blocking tools/call",
        &format!("(client gone) {attempts} cancel attempts, metric outcome=\"gave_up\" 1"),
        took,
        "not cancelled (still running), counted as gave_up",
    );
    env.host.faults().clear();
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]
async fn owned_run_cancel_is_delivered_when_the_host_comes_back_from_an_outage() {
    let (env, outage) = outage_env(|c| c.ownership.cancel_deadline = Duration::from_secs(5)).await;
    let before = env.run_ids(A, "conformance-cancellable").await;
    let mut s = raw_call(&env, "conformance-cancellable", json!({"delayMs": 20000})).await;
    let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
    env.wait_status(A, &run_id, &["running"], 5).await;
    // Host down and client gone in the same instant: no await in between, so the sidecar sees
    // the client's FIN before its own host calls fail.
    outage.down();
    s.shutdown().await.unwrap();
    drop(s);
    let gone = Instant::now();
    let fault = "host down (connection refused) for 1 s";

    let task = openwop_mcp_sidecar::wire_id::project(&run_id);
    let (r, took) = timed(HANG, "tasks/get", get(&env, &task)).await;
    assert_internal(&r, "tasks/get during the outage");
    row(fault, "getRun", "tasks/get", &seen(&r), took, "n/a");
    let ((st, v), took) = timed(HANG, "passthrough", env.rest_get(A, "/runs")).await;
    assert_eq!(
        (st, v["error"].as_str()),
        (502, Some("upstream_unavailable"))
    );
    row(
        fault,
        "any passthrough path",
        "GET /runs",
        "HTTP 502 upstream_unavailable",
        took,
        "n/a",
    );

    tokio::time::sleep(Duration::from_secs(1).saturating_sub(gone.elapsed())).await;
    outage.up();
    let (status, _) = timed(
        HANG,
        "cancel",
        env.wait_status(A, &run_id, &["cancelled", "completed"], 10),
    )
    .await;
    let took = gone.elapsed();
    assert_eq!(status, "cancelled");
    assert_eq!(
        cancel_reason(&env, &run_id).await.as_deref(),
        Some("mcp-request-cancelled")
    );
    assert!(
        took < Duration::from_secs(5),
        "within the cancel deadline: {took:?}"
    );
    let mut outcome = 0.0;
    for _ in 0..40 {
        outcome = env.metric(&cancel_sample("cancelled")).await;
        if outcome == 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(outcome, 1.0, "{}", env.metrics().await);
    let attempts = env.host_cancels(&run_id).len();
    row(
        fault,
        "cancel",
        "client disconnects from a blocking tools/call during the outage",
        &format!("(client gone) refused attempts, then {attempts} reaching the host; metric outcome=\"cancelled\""),
        took,
        "cancelled (mcp-request-cancelled) once the host is back",
    );
    assert_no_panic();
    env.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// tasks/update and tasks/cancel when resolve and cancel fail
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn tasks_update_is_32603_on_resolve_5xx_and_acked_on_4xx() {
    let env = fault_env(|_| {}).await;
    let (task, key) = waiting_task(&env).await;
    let run_id = unproject(&task);
    let update = |fault: String, inject, want, attempts| Step {
        fault,
        inject,
        route: "resolve",
        request: "tasks/update (accept)",
        method: "tasks/update",
        params: approve(&task, &key),
        caps: task_caps(),
        want,
        attempts,
        run: Run::Still("waiting-approval"),
        owned: "n/a (interrupt still open)",
    };
    let mut table = Vec::new();
    // A 5xx resolve is -32603 and never retried.
    for status in [503, 500] {
        table.push(update(
            format!("{status} x1"),
            Inject::Fail(RouteClass::Resolve, 1, status),
            Want::Internal,
            Some(1),
        ));
    }
    // A 4xx resolve (the interrupt already answered, or not the caller's) is acknowledged.
    for status in [400, 403, 404, 409] {
        table.push(update(
            format!("{status} x1"),
            Inject::Fail(RouteClass::Resolve, 1, status),
            Want::Ack,
            None,
        ));
    }
    // The action "cancel" on an input request cancels the run: a 5xx cancel is -32603.
    table.push(Step {
        fault: "503 x3 (persistent)".into(),
        inject: Inject::Fail(RouteClass::Cancel, 3, 503),
        route: "cancel",
        request: "tasks/update (action cancel)",
        method: "tasks/update",
        params: json!({"taskId": task, "inputResponses": { key.clone(): {"action": "cancel"} }}),
        caps: task_caps(),
        want: Want::Internal,
        attempts: None,
        run: Run::Still("waiting-approval"),
        owned: "n/a (run still waiting)",
    });
    for step in table {
        check(&env, &run_id, step).await;
    }

    // The host healthy again: the same answer resolves the interrupt.
    let r = env
        .rpc(Some(A), "tasks/update", approve(&task, &key), task_caps())
        .await;
    assert_ack(&r, "healthy");
    env.wait_status(A, &run_id, &["completed"], 5).await;
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]
async fn tasks_cancel_is_32603_on_cancel_5xx_and_acked_on_4xx() {
    let env = fault_env(|_| {}).await;
    let (task, _) = waiting_task(&env).await;
    let run_id = unproject(&task);
    let cancel = |fault: String, inject, want, attempts, run, owned| Step {
        fault,
        inject,
        route: "cancel",
        request: "tasks/cancel",
        method: "tasks/cancel",
        params: json!({"taskId": task}),
        caps: task_caps(),
        want,
        attempts,
        run,
        owned,
    };
    let mut table = vec![cancel(
        "503 x3 (persistent)".into(),
        Inject::Fail(RouteClass::Cancel, 3, 503),
        Want::Internal,
        Some(3),
        Run::Still("waiting-approval"),
        "n/a (run still waiting: no false ack)",
    )];
    for status in [400, 403, 404, 409] {
        table.push(cancel(
            format!("{status} x1"),
            Inject::Fail(RouteClass::Cancel, 1, status),
            Want::Ack,
            None,
            Run::Still("waiting-approval"),
            "run not cancelled (host refused)",
        ));
    }
    // Two 5xx then success: the retried cancel is acknowledged and takes effect.
    table.push(cancel(
        "503 x2".into(),
        Inject::Fail(RouteClass::Cancel, 2, 503),
        Want::Ack,
        Some(3),
        Run::Becomes("cancelled"),
        "cancelled (third attempt)",
    ));
    for step in table {
        check(&env, &run_id, step).await;
    }
    assert_no_panic();
    env.shutdown().await;
}

#[tokio::test]
async fn mrtr_retry_with_a_failed_resolve_can_be_retried() {
    let env = fault_env(|_| {}).await;
    let caps = json!({"elicitation": {}});
    let first = env
        .call(A, "conformance-approval", json!({}), caps.clone())
        .await;
    let res = first.result().clone();
    assert_eq!(res["resultType"], "input_required", "{}", first.text);
    let key = first_input_key(&res);
    let params = json!({
        "name": "conformance-approval",
        "arguments": {},
        "requestState": res["requestState"],
        "inputResponses": { key: approval() },
    });
    env.host.faults().fail_next(RouteClass::Resolve, 1, 503);
    let (r, took) = timed(
        HANG,
        "MRTR retry",
        env.rpc(Some(A), "tools/call", params.clone(), caps.clone()),
    )
    .await;
    let run_id = env.run_ids(A, "conformance-approval").await[0].clone();
    row(
        "503 x1",
        "resolve",
        "tools/call MRTR retry (accept)",
        &seen(&r),
        took,
        &fate(&env, &run_id).await,
    );
    assert_internal(&r, "MRTR retry");
    let (again, took) = timed(
        HANG,
        "MRTR retry again",
        env.rpc(Some(A), "tools/call", params, caps),
    )
    .await;
    row(
        "host healthy again",
        "resolve",
        "the same MRTR retry, sent again",
        &seen(&again),
        took,
        &fate(&env, &run_id).await,
    );
    assert!(
        again.body.get("error").is_none() || env.status(A, &run_id).await == "cancelled",
        "the client can neither retry nor is the run released: {}",
        again.text
    );
    assert_no_panic();
    env.shutdown().await;
}
