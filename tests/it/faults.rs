// Over 700 lines: the table rows docs/faults.md is built from, plus one-off scenarios (lost createRun, outages, cut streams) that read best spelled out.
//! "Upstream faults": every fault the devhost can inject (devhost/src/faults.rs),
//! seen through the real sidecar. Each fault must give a precise JSON-RPC or HTTP error within
//! the configured timeouts, never a panic or a hung request, and an owned run must still be
//! cancelled once the host is back within `ownership.cancelDeadline`.
//!
//! Every test prints its observations as `FAULT| fault | route | request | client sees |
//! took | owned run` rows (run with `--nocapture`); docs/faults.md is filled from them. Where
//! requests repeat a shape, a test is a table of [`Step`]s (tests/it/support/fault.rs: the
//! fault injected, the request, what the client must see, the row).

use std::sync::Arc;
use std::time::{Duration, Instant};

use openwop_devhost::RouteClass::*;
use openwop_mcp_sidecar::config::Config;
use serde_json::json;

use crate::support::fault::Inject::*;
use crate::support::fault::*;
use crate::support::*;

const HELD: Duration = Duration::from_secs(2);
const HELD_2S: &str = "answer held back 2 s (delay), route timeout 300 ms";
const CANCELLABLE: &str = "conformance-cancellable";

fn cancel_deadline(secs: u64) -> impl FnOnce(&mut Config) {
    move |c| c.ownership.cancel_deadline = Duration::from_secs(secs)
}

// Connection refused ------------------------------------------------------------------------------

#[tokio::test]
async fn connection_refused_is_502_on_rest_and_a_generic_32603_on_mcp() {
    let port = free_port();
    let env = fault_env(|c| c.upstream.url = format!("http://127.0.0.1:{port}")).await;
    let fault = "connection refused (closed port)";

    let (v, took) = passthrough_unavailable(&env).await;
    assert!(!v.to_string().contains(&port.to_string()), "{v}");
    let message = v["message"].as_str().unwrap_or("");
    let shown = format!("HTTP 502 {{\"error\":\"upstream_unavailable\"}} \"{message}\"");
    let route = "any passthrough path";
    row(fault, route, "GET /runs", &shown, took, "n/a");
    assert!(took < Duration::from_secs(2), "{took:?}");

    let task = task_id_for(A, "acme/r-0123456789abcdef0123");
    let noop = tool("conformance-noop", json!({}));
    let update = json!({"taskId": task, "inputResponses": {}});
    for (route, method, params) in [
        ("discovery", "server/discover", json!({})),
        ("discovery", "tools/list", json!({})),
        ("discovery", "tools/call", noop),
        ("getRun", "tasks/get", task_of(&task)),
        ("getRun", "tasks/cancel", task_of(&task)),
        ("getRun", "tasks/update", update),
    ] {
        let (r, took) = send(&env, method, params).await;
        assert_internal(&r, method);
        // Three attempts (retry: true) refused at once, 50 + 100 ms apart.
        assert!(took < BACKOFF + SLACK, "{method}: {took:?}");
        row(fault, route, method, &seen(&r), took, "n/a (no run)");
    }

    assert_readyz(&env, 503, fault, "GET /readyz").await;
    done(env).await;
}

// Answers slower than the timeouts ----------------------------------------------------------------

#[tokio::test]
async fn slow_reads_time_out_with_32603_within_one_route_timeout() {
    let env = fault_env(|c| c.upstream.ready_timeout = Duration::from_millis(500)).await;
    let (task, _) = waiting_task(&env).await;
    let noop = completed_task(&env).await;

    // A timed-out read is not repeated: a slow host is not made slower (only createRun, which
    // is idempotency-keyed, repeats after a timeout to learn its run's id).
    let get = Step::new(HELD_2S, Delay(GetRun, HELD), "tasks/get", task_of(&noop));
    check(&env, "", get.attempts(1).between(T, T + SLACK)).await;
    env.host.faults().clear();

    let list = Step::new(HELD_2S, Delay(Discovery, HELD), "tools/list", json!({}));
    check(&env, "", list.who(B).under(T + SLACK)).await;
    let request = "GET /readyz (readyTimeout 500 ms)";
    let took = assert_readyz(&env, 503, HELD_2S, request).await;
    assert!(took < Duration::from_millis(500) + SLACK, "{took:?}");
    env.host.faults().clear();

    let cancel = Step::new(HELD_2S, Delay(Cancel, HELD), "tasks/cancel", task_of(&task))
        .under(T * 4 + BACKOFF + SLACK)
        .owned("run cancelled (the held-back cancel took effect)");
    check(&env, "", cancel).await;
    env.host.faults().clear();
    let run_id = run_of(A, &task);
    let status = env.wait_status(A, &run_id, &["cancelled"], 5).await;
    assert_eq!(status, "cancelled");
    done(env).await;
}

#[tokio::test]
async fn slow_passthrough_is_relayed_however_slow() {
    // Passthrough requests have no request timeout (upstream.requestTimeoutMs bounds the
    // sidecar's own host API calls only): a slow host answer is relayed when it comes.
    let env = fault_env(|_| {}).await;
    // azure has no run list: the suite's `GET /runs` is its job type list there (`rest_path`),
    // and the delay goes on that route (`on_flavor`).
    env.host.faults().delay(on_flavor(ListRuns), HELD);
    let runs = env.rest_get(A, "/runs");
    let ((s, v), took) = timed(HANG, "passthrough", runs).await;
    env.host.faults().clear();
    assert_eq!(s, 200, "{v}");
    assert!(took >= HELD, "{took:?}");
    let route = format!("{} (passthrough)", route_path(ListRuns));
    let seen = "HTTP 200, the host's answer unchanged";
    row(HELD_2S, &route, "GET /runs", seen, took, "n/a");
    done(env).await;
}

#[tokio::test]
async fn slow_events_poll_times_out_within_the_route_timeout() {
    if foreign() {
        // The aip151 and azure hosts have no event log to poll or stream (host.follow: poll).
        return;
    }
    let env = fault_env(|_| {}).await;
    let fault = "answer held back 10 s (delay), route timeout 300 ms";
    let (task, _) = waiting_task(&env).await;
    let held = Delay(Poll, Duration::from_secs(10));
    // tasks/get asks for a 1 s long-poll: 3 attempts of (1 s + route timeout) at most.
    let bound = (Duration::from_secs(1) + T) * 3 + BACKOFF + SLACK;
    let get = Step::new(fault, held, "tasks/get", task_of(&task))
        .request("tasks/get (input_required task)")
        .under(bound);
    check(&env, "", get).await;
    env.host.faults().clear();
    done(env).await;
}

#[tokio::test]
async fn slow_event_stream_open_falls_back_to_polling_within_the_route_timeout() {
    let env = fault_env(|_| {}).await;
    let fault = "event stream head held back 8 s (delay), route timeout 300 ms";
    let mut problems = Vec::new();
    env.host.faults().delay(Stream, Duration::from_secs(8));
    let delay = json!({"delayMs": 800});
    let (r, took) = blocking(&env, "conformance-delay", delay.clone()).await;
    let request = "tools/call conformance-delay 800 ms (JSON)";
    row(fault, "stream", request, &seen(&r), took, "completed");
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    // The run ends after 800 ms; the stream should be given up after its route timeout.
    let bound = Duration::from_millis(800) + T + SLACK + SLACK;
    if took > bound {
        problems.push(format!(
            "blocking call answered after {took:?}, wanted under {bound:?}"
        ));
    }

    // A listen follows the same stream: without a bound on its head, nothing is notified.
    let task = tasked(&env, A, "conformance-delay", delay).await;
    let (l, took) = listen_to(&env, &task, 5).await;
    let (n, notified, ended) = (l.msgs.len(), l.notified, l.ended);
    let shown = format!("SSE: {n} messages, completed notified: {notified}, final result: {ended}");
    let request = "subscriptions/listen (one 800 ms task), read for 5 s";
    row(fault, "stream", request, &shown, took, "completed");
    if !(notified && ended) {
        problems.push(format!("listen: no completion within 5 s: {:?}", l.msgs));
    }
    env.host.faults().clear();
    assert!(problems.is_empty(), "{problems:#?}");
    done(env).await;
}

#[tokio::test]
async fn lost_create_run_answer_leaves_no_run_behind() {
    let env = fault_env(cancel_deadline(3)).await;
    let mut problems = Vec::new();
    for (fault, damage) in [
        (HELD_2S, Delay(CreateRun, HELD)),
        ("truncated JSON answer (badJson)", BadJson(CreateRun, 1)),
        (
            "connection reset after 5 body bytes x3",
            Reset(CreateRun, 3, 5),
        ),
    ] {
        let before = env.run_ids(A, CANCELLABLE).await;
        damage.apply(&env);
        let long = json!({"delayMs": 20000});
        let call = env.call(A, CANCELLABLE, long, task_caps());
        let (r, took) = timed(HANG, "tools/call", call).await;
        env.host.faults().clear();
        let created = env.run_ids(A, CANCELLABLE).await;
        let fresh: Vec<&String> = created.iter().filter(|i| !before.contains(i)).collect();
        assert_eq!(fresh.len(), 1, "one run for all attempts (Idempotency-Key)");
        let run_id = fresh[0].clone();
        // Either the repeated createRun (same Idempotency-Key) recovered the answer and the
        // client holds the task, or the client was told the call failed and the run is
        // cancelled: never a run nobody knows about.
        let answered = r.result()["resultType"] == "task";
        if answered {
            assert_eq!(run_of(A, r.result()["taskId"].as_str().unwrap()), run_id);
        } else {
            assert_internal(&r, "tools/call");
        }
        tokio::time::sleep(Duration::from_secs(4)).await;
        let fate = fate(&env, &run_id).await;
        let owned = format!("run created; after the cancel deadline: {fate}");
        let request = "tools/call (tasked)";
        row(fault, "createRun", request, &seen(&r), took, &owned);
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
            let task = json!({"taskId": r.result()["taskId"]});
            let _ = env.rpc(Some(A), "tasks/cancel", task, task_caps()).await;
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    done(env).await;
}

// 5xx ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn create_run_5xx_is_retried_and_persistent_5xx_is_32603() {
    let env = fault_env(|_| {}).await;
    // Warm the catalog so only createRun is counted.
    let _ = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    let call = |fault: String, status, times| {
        let noop = tool("conformance-noop", json!({}));
        let inject = Fail(CreateRun, times, status);
        Step::new(fault, inject, "tools/call", noop).request("tools/call (blocking)")
    };

    // 2 failures, then success: exactly one run.
    let before = env.run_ids(A, "conformance-noop").await;
    let ok = call("503 x2".into(), 503, 2).want(Want::Result("isError", json!(false)));
    check(&env, "", ok.attempts(3).owned("run completed")).await;
    let after = env.run_ids(A, "conformance-noop").await;
    assert_eq!(after.len(), before.len() + 1, "exactly one run");

    for status in [503, 500] {
        let before = env.run_ids(A, "conformance-noop").await;
        let step = call(format!("{status} x3 (persistent)"), status, 3).attempts(3);
        let step = step.under(BACKOFF + SLACK).owned("no run created");
        check(&env, "", step).await;
        assert_eq!(env.run_ids(A, "conformance-noop").await, before, "no run");
    }
    // The same through the tasked path.
    let step = call("502 x3 (persistent)".into(), 502, 3).caps(task_caps());
    let step = step.request("tools/call (tasked)").owned("no run created");
    check(&env, "", step).await;
    done(env).await;
}

#[tokio::test]
async fn get_run_5xx_is_retried_and_persistent_5xx_is_32603() {
    let env = fault_env(|_| {}).await;
    let task = completed_task(&env).await;
    let get = |fault: &str, times, status| {
        let inject = Fail(GetRun, times, status);
        Step::new(fault, inject, "tasks/get", task_of(&task)).attempts(3)
    };
    let completed = Want::Result("status", json!("completed"));
    check(&env, "", get("503 x2", 2, 503).want(completed)).await;
    check(&env, "", get("500 x3 (persistent)", 3, 500)).await;

    // A tasked call still answers its task when the read after createRun fails: the run is
    // durable once created.
    let (fault, noop) = ("503 x3 (persistent)", tool("conformance-noop", json!({})));
    let step = Step::new(fault, Fail(GetRun, 3, 503), "tools/call", noop)
        .caps(task_caps())
        .request("tools/call (tasked)")
        .want(Want::Result("resultType", json!("task")));
    check(&env, "", step.owned("run completed")).await;

    // A blocking call whose final read fails: -32603 (the run itself completed).
    always(&env, GetRun, 503);
    let (r, took, run_id) = blocking_run(&env, "conformance-delay", json!({"delayMs": 300})).await;
    assert_internal(&r, "blocking tools/call");
    let fate = fate(&env, &run_id).await;
    let (fault, request) = ("503 persistent", "tools/call (blocking, 300 ms run)");
    row(fault, "getRun", request, &seen(&r), took, &fate);
    done(env).await;
}

#[tokio::test]
async fn blocking_call_failing_after_create_run_does_not_lose_the_run() {
    let mut problems = Vec::new();
    let route = match foreign() {
        false => "stream + poll",
        true => "getRun (follow: poll)",
    };
    let request = "tools/call (blocking)";
    let long = json!({"delayMs": 20000});
    {
        let env = fault_env(cancel_deadline(3)).await;
        // Without an event log (aip151, azure) there is no stream to cut: the run is followed
        // by reading it, and that read fails.
        env.host.faults().cut_stream_next(1, 0);
        always(&env, follow_route(), 503);
        let (r, took, run_id) = blocking_run(&env, CANCELLABLE, long.clone()).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let fate = fate(&env, &run_id).await;
        let fault = match foreign() {
            false => "stream cut + 503 persistent",
            true => "503 persistent",
        };
        let owned = format!("after the cancel deadline: {fate}");
        row(fault, route, request, &seen(&r), took, &owned);
        assert_internal(&r, "tools/call");
        if !named_or_cancelled(&env, &r, &run_id).await {
            problems.push(format!(
                "poll 503: the run is neither named nor cancelled: {fate}"
            ));
        }
        env.shutdown().await;
    }
    {
        // Followed by reading the run (aip151, azure: host.follow: poll), the outage must meet
        // a read: reads at most 400 ms apart, and azure's no sooner than its 1 s Retry-After
        // (config/azure.example.yaml), so the host stays down 2 s there, and the owned-run
        // cancel, backing off up to 2 s between attempts (src/ownership.rs), is given 5 s.
        let (down_for, deadline) = match foreign() {
            false => (Duration::from_secs(1), 3),
            true => (Duration::from_secs(2), 5),
        };
        let (env, outage) = outage_env(|c| {
            cancel_deadline(deadline)(c);
            if foreign() {
                Arc::make_mut(&mut c.mapping).follow.max = Duration::from_millis(400);
            }
        })
        .await;
        let before = env.run_ids(A, CANCELLABLE).await;
        let call = async {
            let (r, _) = blocking(&env, CANCELLABLE, long).await;
            (r, Instant::now())
        };
        let cut = async {
            let run_id = env.fresh_run(A, CANCELLABLE, &before).await;
            env.wait_status(A, &run_id, &["running"], 5).await;
            outage.down();
            let at = Instant::now();
            tokio::time::sleep(down_for).await;
            outage.up();
            (run_id, at)
        };
        let ((r, answered_at), (run_id, down_at)) = tokio::join!(call, cut);
        let took = answered_at.saturating_duration_since(down_at);
        tokio::time::sleep(Duration::from_secs(deadline)).await;
        let fate = fate(&env, &run_id).await;
        let fault = format!(
            "host down (connection refused) {} s mid-call",
            down_for.as_secs()
        );
        let fault = fault.as_str();
        let owned = format!("host back, after the cancel deadline: {fate}");
        row(fault, route, request, &seen(&r), took, &owned);
        assert_internal(&r, "tools/call");
        if !named_or_cancelled(&env, &r, &run_id).await {
            problems.push(format!(
                "outage: the run is neither named nor cancelled: {fate}"
            ));
        }
        env.shutdown().await;
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert_no_panic();
}

// 429 with Retry-After ----------------------------------------------------------------------------

/// `host.routes.getRun.retry` sets which statuses a read repeats and how often, and a 429
/// whose `Retry-After` is within the policy's wait is waited out and the poll answered.
#[tokio::test]
async fn a_route_retry_policy_sets_which_statuses_repeat_and_how_often() {
    use openwop_mcp_sidecar::config::{Operation, RetryPolicy};
    let env = fault_env(|c| {
        let routes = Arc::make_mut(&mut c.routes);
        let get = routes.by_op.get_mut(&Operation::GetRun).unwrap();
        get.retry = RetryPolicy {
            attempts: 4,
            backoff: Duration::from_millis(10),
            statuses: Some(vec![http::StatusCode::BAD_GATEWAY]),
            retry_after_max: Duration::from_secs(2),
        };
    })
    .await;
    let task = completed_task(&env).await;
    let completed = || Want::Result("status", json!("completed"));
    let get = |fault: &str, inject| Step::new(fault, inject, "tasks/get", task_of(&task));
    let step = get(
        "502 x3 (retry: statuses [502], attempts 4)",
        Fail(GetRun, 3, 502),
    );
    check(&env, "", step.attempts(4).want(completed())).await;
    let step = get("500 (not among the route's statuses)", Fail(GetRun, 1, 500));
    check(&env, "", step.attempts(1)).await;
    let step = get(
        "429 + Retry-After: 1 (retryAfterMaxMs 2000)",
        RateLimit(GetRun, 1, 1),
    );
    let (_, took) = check(&env, "", step.attempts(2).want(completed())).await;
    assert!(
        took >= Duration::from_secs(1),
        "the pause was waited out: {took:?}"
    );
    done(env).await;
}

#[tokio::test]
async fn rate_limits_pass_through_as_429_with_retry_after() {
    let env = fault_env(|_| {}).await;
    let limit = |class, secs, method, params| {
        let inject = RateLimit(class, 1, secs);
        let step = Step::new("429 + Retry-After", inject, method, params);
        step.want(Want::RateLimited(secs))
    };
    let noop = tool("conformance-noop", json!({}));
    for step in [
        limit(Discovery, 2, "tools/list", json!({})),
        // A 429 is not retried.
        limit(CreateRun, 7, "tools/call", noop)
            .attempts(1)
            .owned("no run created"),
    ] {
        check(&env, "", step).await;
    }

    let (task, key) = waiting_task(&env).await;
    for step in [
        limit(GetRun, 3, "tasks/get", task_of(&task)),
        limit(Poll, 4, "tasks/get", task_of(&task)).request("tasks/get (input_required task)"),
        limit(Resolve, 5, "tasks/update", approve(&task, &key)).owned("n/a (interrupt still open)"),
        limit(Cancel, 6, "tasks/cancel", task_of(&task))
            .run(Run::Still(open_status().1))
            .owned("n/a (run still waiting)"),
    ] {
        if foreign() && step.inject.route() == Poll {
            // The aip151 and azure hosts have no event log: an input_required task's
            // tasks/get reads the run itself (host.follow: poll), the getRun row above.
            continue;
        }
        if !waits() && step.inject.route() == Resolve {
            // Kubernetes Jobs have no gate to answer: no resolve reaches the host.
            continue;
        }
        check(&env, &run_of(A, &task), step).await;
    }
    done(env).await;
}

/// A host that asks for a pause (`429` with `Retry-After` as an HTTP-date, then `503` with
/// `Retry-After` in seconds, RFC 9110 §10.2.3) while a blocking call follows its run is waited
/// out: the call goes on following and answers the run's result. The pauses never cost the
/// user the run (no error, no cancel), and the host is not read again before the date it named.
#[tokio::test]
async fn a_429_while_a_blocking_call_follows_its_run_is_waited_out_and_the_run_answered() {
    let env = fault_env(|_| {}).await;
    let route = follow_route();
    let before = env.run_ids(A, "conformance-delay").await;
    if !foreign() {
        // The run's event stream breaks at once: the long-poll follows the run.
        env.host.faults().cut_stream_next(1, 0);
    }
    env.host.faults().rate_limit_next_until(route, 1, 2);
    env.host.faults().add(openwop_devhost::Fault {
        route,
        kind: openwop_devhost::FaultKind::Status {
            status: 503,
            retry_after: Some(2),
        },
        times: Some(1),
    });
    env.host.faults().reset_counts();
    let call = blocking(&env, "conformance-delay", json!({"delayMs": 1000}));
    let early = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        env.host.faults().count(route)
    };
    let ((r, took), early) = tokio::join!(call, early);
    env.host.faults().clear();
    let run_id = env.fresh_run(A, "conformance-delay", &before).await;
    let fate = fate(&env, &run_id).await;
    let fault = "429 Retry-After: <HTTP-date 2 s on>, then 503 Retry-After: 2";
    let request = "tools/call (blocking, 1 s run)";
    row(fault, route_path(route), request, &seen(&r), took, &fate);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.error_code(), None, "{}", r.text);
    assert_eq!(r.result()["isError"], false, "the run's result: {}", r.text);
    assert_eq!(fate, "completed", "the run was not cancelled");
    assert!(env.host_cancels(&run_id).is_empty(), "no cancel was sent");
    assert_eq!(
        early, 1,
        "the host was read again before its Retry-After date"
    );
    assert!(
        took >= Duration::from_secs(3),
        "two pauses were waited out: {took:?}"
    );
    done(env).await;
}

/// A host that asks for a pause longer than the call's answer cap: the call answers at the
/// cap that its run goes on (with how to follow it), never an error, and the run is not
/// cancelled; the host is not read again before the pause is over, not even for the answer.
#[tokio::test]
async fn a_host_rate_limiting_past_the_answer_cap_leaves_the_run_running_and_says_so() {
    use openwop_devhost::{Fault, FaultKind};
    let env = fault_env(|c| {
        c.mcp.json_answer_cap = Duration::from_millis(500);
        c.mcp.sse_answer_cap = Duration::from_secs(3);
    })
    .await;
    let route = follow_route();
    let before = env.run_ids(A, CANCELLABLE).await;
    if !foreign() {
        env.host.faults().cut_stream_next(1, 0);
    }
    env.host.faults().add(Fault {
        route,
        kind: FaultKind::Status {
            status: 429,
            retry_after: Some(10),
        },
        times: None,
    });
    env.host.faults().reset_counts();
    let (r, took) = blocking(&env, CANCELLABLE, json!({"delayMs": 20000})).await;
    let reads = env.host.faults().count(route);
    let run_reads = env.host.faults().count(GetRun);
    env.host.faults().clear();
    let run_id = env.fresh_run(A, CANCELLABLE, &before).await;
    let fate = fate(&env, &run_id).await;
    let fault = "429 Retry-After: 10 on every read";
    let request = "tools/call (blocking, 20 s run, answer cap 3 s)";
    row(fault, route_path(route), request, &seen(&r), took, &fate);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.error_code(), None, "{}", r.text);
    let body = &r.result()["structuredContent"];
    assert_eq!(body["status"], "running", "{}", r.text);
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("was not cancelled")),
        "{}",
        r.text
    );
    assert!(took < Duration::from_secs(3) + SLACK, "{took:?}");
    assert_eq!(reads, 1, "read again within a 10 s pause");
    if !foreign() {
        assert_eq!(run_reads, 0, "the run read within the pause");
    }
    assert_eq!(fate, "running", "the run goes on");
    assert!(env.host_cancels(&run_id).is_empty(), "no cancel was sent");
    done(env).await;
}

/// The cancel owed for an orphaned run, refused with `429` and `Retry-After: 1`, is sent again
/// only once each pause is over: a cancel must not hammer a host that is shedding load.
#[tokio::test]
async fn an_owed_cancel_is_not_sent_again_before_the_hosts_retry_after() {
    let env = fault_env(cancel_deadline(10)).await;
    let (run_id, _) =
        orphan_a_run_after(&env, || env.host.faults().rate_limit_next(Cancel, 2, 1)).await;
    let status = env.wait_status(A, &run_id, &["cancelled"], 10).await;
    assert_eq!(status, "cancelled");
    let cancels = env.host_cancels(&run_id);
    assert_eq!(cancels.len(), 3, "two refused, the third taken");
    for w in cancels.windows(2) {
        let gap = w[1].at.duration_since(w[0].at);
        assert!(
            gap >= Duration::from_millis(950),
            "a cancel {gap:?} after a 429 asking for 1 s"
        );
    }
    done(env).await;
}

// Connection reset mid-body, truncated JSON -------------------------------------------------------

#[tokio::test]
async fn reset_and_truncated_answers_on_reads_are_retried_or_32603() {
    let env = fault_env(|_| {}).await;
    let completed = completed_task(&env).await;
    let (waiting, _) = waiting_task(&env).await;
    let get = |fault: String, inject: Inject| {
        let (task, request) = match inject.route() {
            Poll => (&waiting, "tasks/get (input_required task)"),
            _ => (&completed, "tasks/get"),
        };
        Step::new(fault, inject, "tasks/get", task_of(task)).request(request)
    };

    // One reset is absorbed by the retry; three are not.
    for (class, times) in [(GetRun, 1), (GetRun, 3), (Poll, 1), (Poll, 3)] {
        if foreign() && class == Poll {
            // The aip151 and azure hosts have no event log to poll: an input_required task's
            // tasks/get reads the run itself (host.follow: poll), the getRun rows.
            continue;
        }
        let fault = format!("connection reset after 10 body bytes x{times}");
        let step = get(fault, Reset(class, times, 10));
        let step = match times {
            1 => step.want(Want::NoError).attempts_shown(2),
            _ => step.attempts_shown(3),
        };
        check(&env, "", step).await;
        env.host.faults().clear();
    }

    // Truncated JSON with 200: a damaged answer is read again, like a reset one.
    for class in [GetRun, Poll] {
        if foreign() && class == Poll {
            // No event log on the aip151 and azure hosts (as above).
            continue;
        }
        let step = get("truncated JSON, 200 (badJson) x1".into(), BadJson(class, 1));
        let step = step.want(Want::NoError).attempts_shown(2);
        check(&env, "", step.under(BACKOFF + SLACK)).await;
        env.host.faults().clear();
    }

    // A reset createRun answer: the retry replays the Idempotency-Key, one run, success.
    let before = env.run_ids(A, "conformance-noop").await;
    let fault = "connection reset after 5 body bytes x1";
    let noop = tool("conformance-noop", json!({}));
    let call = Step::new(fault, Reset(CreateRun, 1, 5), "tools/call", noop)
        .request("tools/call (blocking)")
        .want(Want::Result("isError", json!(false)))
        .owned("one run (Idempotency-Key replay), completed");
    check(&env, "", call).await;
    let after = env.run_ids(A, "conformance-noop").await;
    assert_eq!(after.len(), before.len() + 1, "one run despite the retry");

    // A blocking call whose events poll breaks once (after the stream was cut).
    for (fault, damage) in [
        ("stream cut + poll reset x1", Reset(Poll, 1, 10)),
        ("stream cut + poll badJson x1", BadJson(Poll, 1)),
    ] {
        env.host.faults().cut_stream_next(1, 0);
        damage.apply(&env);
        let (r, took, run_id) =
            blocking_run(&env, "conformance-delay", json!({"delayMs": 500})).await;
        env.wait_status(A, &run_id, &["completed", "cancelled"], 5)
            .await;
        let fate = fate(&env, &run_id).await;
        let (route, request) = ("stream + poll", "tools/call (blocking, 500 ms run)");
        row(fault, route, request, &seen(&r), took, &fate);
        // A reset or damaged poll answer is read again: the call still gets its answer.
        assert_eq!(r.result()["isError"], false, "{fault}: {}", r.text);
    }
    done(env).await;
}

// Event stream cut mid-event ----------------------------------------------------------------------

#[tokio::test]
async fn cut_event_stream_falls_back_to_polling() {
    if foreign() {
        // The aip151 and azure hosts have no event log to poll or stream (host.follow: poll).
        return;
    }
    let env = fault_env(|_| {}).await;
    let delay = json!({"delayMs": 800});
    let request = "tools/call conformance-delay 800 ms";
    for after in [0, 1, 2] {
        env.host.faults().cut_stream_next(1, after);
        let (s, p) = (count(&env, Stream), count(&env, Poll));
        let (r, took) = blocking(&env, "conformance-delay", delay.clone()).await;
        assert_eq!(r.result()["isError"], false, "{}", r.text);
        let text = r.result()["content"][0]["text"].as_str().unwrap_or("");
        assert!(text.contains("completed"));
        assert_eq!(count(&env, Stream) - s, 1, "the stream is not reopened");
        assert!(count(&env, Poll) > p, "the fallback polled");
        assert!(env.host.faults().active().is_empty(), "the cut was used");
        let bound = Duration::from_millis(800) + SLACK + SLACK;
        assert!(took < bound, "{took:?}");
        let fault = format!("stream cut mid-event after {after} event(s)");
        let request = format!("{request} (JSON)");
        row(&fault, "stream", &request, &seen(&r), took, "completed");
    }
    env.host.faults().cut_stream_next(1, 1);
    let call = sse_call(&env, "conformance-delay", delay.clone());
    let (r, took) = timed(HANG, "tools/call (SSE)", call).await;
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    let fault = "stream cut mid-event after 1 event";
    let request = format!("{request} (SSE)");
    row(fault, "stream", &request, &seen(&r), took, "completed");

    // A listen whose task stream is cut keeps following the task by polling.
    let task = tasked(&env, A, "conformance-delay", delay).await;
    env.host.faults().cut_stream_next(1, 0);
    let (l, took) = listen_to(&env, &task, 10).await;
    let last = l.msgs.last().cloned().unwrap_or_default();
    assert_eq!(last["result"]["resultType"], "complete", "{:#?}", l.msgs);
    assert!(l.notified, "{:#?}", l.msgs);
    let fault = "stream cut mid-event after 0 events";
    let request = "subscriptions/listen (one 800 ms task)";
    let shown = "SSE: notifications/tasks completed, then the final result";
    row(fault, "stream", request, shown, took, "completed");
    done(env).await;
}

// Discovery down at start-up ----------------------------------------------------------------------

#[tokio::test]
async fn discovery_down_at_start_up_then_recovering() {
    // On the aip151 and azure hosts the start-up dependency is the catalog route, not a
    // discovery document: the same guarantee with the fault there (`on_flavor`).
    let env = fault_env(|c| c.upstream.ready_timeout = Duration::from_millis(500)).await;
    let asked = count(&env, Discovery);
    assert_eq!(asked, 0, "nothing asked the host yet");
    always(&env, Discovery, 503);
    let route = route_path(Discovery);
    let fault = match foreign() {
        false => "503 on every discovery (host starting)",
        true => "503 on every catalog read (host starting)",
    };

    assert_readyz(&env, 503, fault, "GET /readyz").await;
    let noop = tool("conformance-noop", json!({}));
    for (method, params, owned) in [
        ("server/discover", json!({}), "n/a"),
        ("tools/list", json!({}), "n/a"),
        ("tools/call", noop, "no run created"),
    ] {
        let (r, took) = send(&env, method, params).await;
        assert_internal(&r, method);
        row(fault, route, method, &seen(&r), took, owned);
    }
    let (status, body, took) = discovery_document(&env).await;
    assert!(status >= 500, "{status} {body}");
    let shown = format!("HTTP {status} {}", body["error"]);
    let request = "GET /.well-known/openwop";
    row(fault, route, request, &shown, took, "n/a");

    // The host comes up: nothing of the failure was cached.
    env.host.faults().clear();
    let fault = match foreign() {
        false => "discovery recovered",
        true => "catalog recovered",
    };
    assert_readyz(&env, 200, fault, "GET /readyz").await;
    let (r, took) = send(&env, "tools/list", json!({})).await;
    let tools = r.result()["tools"].as_array();
    assert!(tools.is_some_and(|t| !t.is_empty()), "{}", r.text);
    row(fault, route, "tools/list", &seen(&r), took, "n/a");
    let r = env.call(A, "conformance-noop", json!({}), json!({})).await;
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    done(env).await;
}

// Owned-run cancels while the host fails them -----------------------------------------------------

#[tokio::test]
async fn owned_run_cancel_is_delivered_once_the_host_accepts_it() {
    let env = fault_env(cancel_deadline(5)).await;
    // The fault must be in place before the first attempt: the dispatcher starts at once.
    env.host.faults().fail_next(Cancel, 3, 503);
    let (run_id, gone) = orphan_a_run(&env).await;
    let took = assert_cancelled_by_mcp(&env, &run_id).await - gone;
    let attempts = env.host_cancels(&run_id).len();
    assert!(attempts >= 2, "{attempts}");
    assert!(
        took < Duration::from_secs(5),
        "past the cancel deadline: {took:?}"
    );
    assert_eq!(env.metric(&cancel_sample("cancelled")).await, 1.0);
    let fault = "503 on the next 3 cancels";
    orphan_row(
        &env,
        fault,
        &run_id,
        "cancelled",
        took,
        "cancelled (mcp-request-cancelled)",
    );
    done(env).await;
}

#[tokio::test]
async fn owned_run_cancel_survives_a_slow_host() {
    let env = fault_env(cancel_deadline(5)).await;
    env.host.faults().delay(Cancel, HELD);
    let (run_id, gone) = orphan_a_run(&env).await;
    // The host is slow for a second, then answers in time again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    env.host.faults().clear();
    assert_cancelled_by_mcp(&env, &run_id).await;
    // Let the dispatcher finish: its last attempt meets a terminal run.
    let outcomes = ["cancelled", "already_terminal", "refused", "gave_up"];
    let outcome = cancel_outcome(&env, &outcomes, Duration::from_secs(5)).await;
    let outcome = outcome.map(|(o, _)| o).unwrap_or_default();
    let took = gone.elapsed();
    assert!(outcomes[..2].contains(&outcome.as_str()), "{outcome}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let fault = "cancel answers held back 2 s for 1 s (delay), route timeout 300 ms";
    orphan_row(
        &env,
        fault,
        &run_id,
        &outcome,
        took,
        "cancelled (mcp-request-cancelled)",
    );
    done(env).await;
}

#[tokio::test]
async fn owned_run_cancel_refused_past_the_deadline_is_counted_as_gave_up() {
    let deadline = Duration::from_secs(1);
    let env = fault_env(cancel_deadline(1)).await;
    always(&env, Cancel, 503);
    let (run_id, gone) = orphan_a_run(&env).await;
    let outcome = cancel_outcome(&env, &["gave_up"], Duration::from_secs(5)).await;
    let took = gone.elapsed();
    let gave_up = outcome.map(|(_, n)| n);
    assert_eq!(gave_up, Some(1.0), "gave_up: {}", env.metrics().await);
    assert!(took < deadline + SLACK, "{took:?}");
    let status = env.status(A, &run_id).await;
    assert_eq!(status, "running", "nobody cancelled it");
    let fault = "503 on every cancel, cancel deadline 1 s";
    let owned = "not cancelled (still running), counted as gave_up";
    orphan_row(&env, fault, &run_id, "gave_up\" 1", took, owned);
    env.host.faults().clear();
    done(env).await;
}

#[tokio::test]
async fn owned_run_cancel_is_delivered_when_the_host_comes_back_from_an_outage() {
    let (env, outage) = outage_env(cancel_deadline(5)).await;
    // Host down and client gone in the same instant: no await in between, so the sidecar sees
    // the client's FIN before its own host calls fail.
    let (run_id, gone) = orphan_a_run_after(&env, || outage.down()).await;
    let fault = "host down (connection refused) for 1 s";

    let task = task_id_for(A, &run_id);
    let (r, took) = send(&env, "tasks/get", task_of(&task)).await;
    assert_internal(&r, "tasks/get during the outage");
    row(fault, "getRun", "tasks/get", &seen(&r), took, "n/a");
    let (_, took) = passthrough_unavailable(&env).await;
    let (route, seen) = ("any passthrough path", "HTTP 502 upstream_unavailable");
    row(fault, route, "GET /runs", seen, took, "n/a");

    tokio::time::sleep(Duration::from_secs(1).saturating_sub(gone.elapsed())).await;
    outage.up();
    let took = assert_cancelled_by_mcp(&env, &run_id).await - gone;
    assert!(
        took < Duration::from_secs(5),
        "past the cancel deadline: {took:?}"
    );
    let outcome = cancel_outcome(&env, &["cancelled"], Duration::from_secs(1)).await;
    let cancelled = outcome.map(|(_, n)| n);
    assert_eq!(cancelled, Some(1.0), "{}", env.metrics().await);
    let attempts = env.host_cancels(&run_id).len();
    let request = "client disconnects from a blocking tools/call during the outage";
    let seen = format!(
        "(client gone) refused attempts, then {attempts} reaching the host; \
         metric outcome=\"cancelled\""
    );
    let owned = "cancelled (mcp-request-cancelled) once the host is back";
    row(fault, "cancel", request, &seen, took, owned);
    done(env).await;
}

// tasks/update and tasks/cancel when resolve and cancel fail --------------------------------------

#[tokio::test]
async fn tasks_update_is_32603_on_resolve_5xx_and_acked_on_4xx() {
    if !waits() {
        return; // Kubernetes Jobs have no waiting state to answer.
    }
    let env = fault_env(|_| {}).await;
    let (task, key) = waiting_task(&env).await;
    let still = Run::Still(open_status().1);
    let update = |status| {
        let (fault, inject) = (format!("{status} x1"), Fail(Resolve, 1, status));
        Step::new(fault, inject, "tasks/update", approve(&task, &key))
            .request("tasks/update (accept)")
            .run(still)
            .owned("n/a (interrupt still open)")
    };
    // A 5xx resolve is -32603 and never retried.
    let mut table: Vec<Step> = [503, 500].map(|s| update(s).attempts(1)).into();
    // A 4xx resolve (the interrupt already answered, or not the caller's) is acknowledged.
    table.extend([400, 403, 404, 409].map(|s| update(s).want(Want::Ack)));
    // The action "cancel" on an input request cancels the run: a 5xx cancel is -32603.
    let decline = json!({"taskId": task, "inputResponses": { key.clone(): {"action": "cancel"} }});
    let fault = "503 x3 (persistent)";
    let cancel = Step::new(fault, Fail(Cancel, 3, 503), "tasks/update", decline)
        .request("tasks/update (action cancel)")
        .run(still)
        .owned("n/a (run still waiting)");
    table.push(cancel);
    for step in table {
        check(&env, &run_of(A, &task), step).await;
    }

    // The host healthy again: the same answer resolves the interrupt.
    let (r, _) = send(&env, "tasks/update", approve(&task, &key)).await;
    assert_ack(&r, "healthy");
    env.wait_status(A, &run_of(A, &task), &["completed"], 5)
        .await;
    done(env).await;
}

#[tokio::test]
async fn tasks_cancel_is_32603_on_cancel_5xx_and_acked_on_4xx() {
    let env = fault_env(|_| {}).await;
    let (task, _) = waiting_task(&env).await;
    let still = Run::Still(open_status().1);
    let cancel = |fault: String, times, status| {
        let inject = Fail(Cancel, times, status);
        Step::new(fault, inject, "tasks/cancel", task_of(&task))
    };
    let persistent = cancel("503 x3 (persistent)".into(), 3, 503)
        .attempts(3)
        .run(still);
    let mut table = vec![persistent.owned("n/a (run still waiting: no false ack)")];
    for status in [400, 403, 404, 409] {
        let refused = cancel(format!("{status} x1"), 1, status).want(Want::Ack);
        table.push(refused.run(still).owned("run not cancelled (host refused)"));
    }
    // Two 5xx then success: the retried cancel is acknowledged and takes effect.
    let retried = cancel("503 x2".into(), 2, 503).want(Want::Ack).attempts(3);
    let retried = retried.run(Run::Becomes("cancelled"));
    table.push(retried.owned("cancelled (third attempt)"));
    for step in table {
        check(&env, &run_of(A, &task), step).await;
    }
    done(env).await;
}

#[tokio::test]
async fn mrtr_retry_with_a_failed_resolve_can_be_retried() {
    if !waits() {
        return; // Kubernetes Jobs have no waiting state to answer.
    }
    let env = fault_env(|_| {}).await;
    let caps = json!({"elicitation": {}});
    let first = env.call(A, "conformance-approval", json!({}), caps.clone());
    let first = first.await;
    let res = first.result().clone();
    assert_eq!(res["resultType"], "input_required", "{}", first.text);
    let key = first_input_key(&res);
    let params = json!({
        "name": "conformance-approval",
        "arguments": {},
        "requestState": res["requestState"],
        "inputResponses": { key: approval() },
    });
    env.host.faults().fail_next(Resolve, 1, 503);
    let retry = env.rpc(Some(A), "tools/call", params.clone(), caps.clone());
    let (r, took) = timed(HANG, "MRTR retry", retry).await;
    let run_id = env.run_ids(A, "conformance-approval").await[0].clone();
    let (owned, request) = (fate(&env, &run_id).await, "tools/call MRTR retry (accept)");
    row("503 x1", "resolve", request, &seen(&r), took, &owned);
    assert_internal(&r, "MRTR retry");
    let again = env.rpc(Some(A), "tools/call", params, caps);
    let (again, took) = timed(HANG, "MRTR retry again", again).await;
    let (fault, request) = ("host healthy again", "the same MRTR retry, sent again");
    let owned = fate(&env, &run_id).await;
    row(fault, "resolve", request, &seen(&again), took, &owned);
    assert!(
        again.body.get("error").is_none() || env.status(A, &run_id).await == "cancelled",
        "the client can neither retry nor is the run released: {}",
        again.text
    );
    done(env).await;
}
