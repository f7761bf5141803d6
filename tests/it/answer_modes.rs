//! How a `tools/call` is answered. A blocking call from a client that accepts
//! SSE anywhere in `Accept` (as every official SDK does) is answered as JSON when its run
//! settles within the JSON window and switches to SSE otherwise, following the run up to the
//! SSE cap; a tasked call whose run ends within the immediate-result window gets the plain
//! `CallToolResult` (RFC 0198 §B.4). Ownership (RFC 0198 §G.12–§G.13) holds in every phase.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncReadExt;

use crate::support::*;

/// What the official SDKs send (TypeScript and Python alike).
const SDK_ACCEPT: &str = "application/json, text/event-stream";

fn call(tool: &str, args: Value, caps: Value) -> Value {
    body_of(
        21,
        "tools/call",
        json!({ "name": tool, "arguments": args }),
        caps,
    )
}

/// A POST as an SDK sends it, timed: (seconds until the head, content type, the body).
async fn sdk_post(env: &Env, body: &Value, accept: &str) -> (Duration, String, String) {
    let start = Instant::now();
    let resp = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {A}"))
        .header("Content-Type", "application/json")
        .header("Accept", accept)
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", body["params"]["name"].as_str().unwrap())
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let head = start.elapsed();
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    (head, ct, resp.text().await.unwrap())
}

#[tokio::test]
async fn a_slow_run_switches_an_sdk_accept_to_sse_and_answers_its_result() {
    let env = env_with(|c| c.mcp.json_answer_cap = Duration::from_millis(500)).await;
    let body = call("conformance-delay", json!({"delayMs": 3000}), json!({}));
    let start = Instant::now();
    let (head, ct, text) = sdk_post(&env, &body, SDK_ACCEPT).await;
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    // The head goes out when the JSON window closes, long before the run ends.
    assert!(head >= Duration::from_millis(450), "head after {head:?}");
    assert!(head < Duration::from_millis(2500), "head after {head:?}");
    assert!(start.elapsed() >= Duration::from_millis(2900));
    assert!(
        text.contains(": keep-alive"),
        "keep-alives while it runs: {text}"
    );
    let msgs = sse_messages(&text);
    assert_eq!(msgs.len(), 1, "one message, the result: {text}");
    assert_eq!(msgs[0]["id"], 21);
    assert_eq!(msgs[0]["result"]["isError"], false, "{text}");
    let run_id = run_id_of(&msgs[0]["result"]);
    assert_eq!(env.status(A, &run_id).await, "completed");
    assert!(env.host_cancels(&run_id).is_empty());
    env.shutdown().await;
}

/// A client with a read timeout between bytes (httpx: 5 s) must never wait that long: the
/// switch to SSE sends the head and a first comment together, then a comment every
/// `mcp.sseKeepaliveMs`, until the result.
#[tokio::test]
async fn the_switch_to_sse_sends_a_byte_at_once_and_then_one_every_keepalive_period() {
    let period = Duration::from_millis(1_000);
    let env = env_with(|c| {
        c.mcp.json_answer_cap = Duration::from_millis(300);
        c.mcp.sse_keepalive = period;
    })
    .await;
    let body = call("conformance-delay", json!({"delayMs": 4000}), json!({}));
    let start = Instant::now();
    let mut resp = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {A}"))
        .header("Content-Type", "application/json")
        .header("Accept", SDK_ACCEPT)
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "conformance-delay")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let head = start.elapsed();
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut last = Instant::now();
    let mut gaps = Vec::new();
    let mut text = String::new();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        gaps.push(last.elapsed());
        last = Instant::now();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(
        head < Duration::from_millis(1_500),
        "the head when the window closes: {head:?}"
    );
    assert!(
        text.starts_with(": keep-alive"),
        "the first byte is a comment: {text}"
    );
    assert!(
        gaps[0] < Duration::from_millis(250),
        "the first comment comes with the head, not a period later: {gaps:?}"
    );
    // Scheduling slack on a loaded machine, but never near two periods of silence.
    let longest = gaps.iter().max().unwrap();
    assert!(
        *longest < period + Duration::from_millis(600),
        "no gap longer than the keep-alive period: {gaps:?}"
    );
    let msgs = sse_messages(&text);
    assert_eq!(msgs.len(), 1, "{text}");
    assert_eq!(msgs[0]["result"]["isError"], false, "{text}");
    env.shutdown().await;
}

#[tokio::test]
async fn a_quick_run_with_an_sdk_accept_is_answered_as_plain_json() {
    let env = env().await;
    let body = call("conformance-delay", json!({"delayMs": 100}), json!({}));
    let (_, ct, text) = sdk_post(&env, &body, SDK_ACCEPT).await;
    assert!(ct.starts_with("application/json"), "{ct}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["result"]["isError"], false, "{text}");
    assert_eq!(v["result"]["resultType"], "complete");
    env.shutdown().await;
}

#[tokio::test]
async fn a_json_only_client_gets_a_still_running_answer_in_mcp_terms_and_the_run_goes_on() {
    let env = env_with(|c| c.mcp.json_answer_cap = Duration::from_millis(400)).await;
    let body = call("conformance-delay", json!({"delayMs": 1500}), json!({}));
    let (_, ct, text) = sdk_post(&env, &body, "application/json").await;
    assert!(ct.starts_with("application/json"), "{ct}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let res = &v["result"];
    assert_eq!(res["isError"], true, "{text}");
    let said = res["content"][0]["text"].as_str().unwrap();
    // Something a model can act on: no REST route, a task to follow, a warning about a rerun.
    assert!(!said.contains("GET /runs"), "{said}");
    assert!(said.contains("tasks/get"), "{said}");
    assert!(said.contains("second run"), "{said}");
    let task_id = res["structuredContent"]["taskId"].as_str().unwrap();
    let run_id = run_id_of(res);
    assert_eq!(unproject(task_id), run_id);
    // The task it names is real: a Tasks client follows the run to its result.
    let done = env
        .poll_task(A, task_id, |t| t["status"] == "completed", 10)
        .await;
    assert_eq!(done["result"]["result"]["isError"], false, "{done}");
    assert!(env.host_cancels(&run_id).is_empty(), "never cancelled");
    env.shutdown().await;
}

#[tokio::test]
async fn the_sse_cap_answers_in_mcp_terms_and_leaves_the_run_going() {
    let env = env_with(|c| {
        c.mcp.json_answer_cap = Duration::from_millis(300);
        c.mcp.sse_answer_cap = Duration::from_millis(1200);
    })
    .await;
    let body = call("conformance-delay", json!({"delayMs": 2500}), json!({}));
    let (_, ct, text) = sdk_post(&env, &body, SDK_ACCEPT).await;
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    let msgs = sse_messages(&text);
    let res = &msgs[0]["result"];
    assert_eq!(res["isError"], true, "{text}");
    let said = res["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("not cancelled"), "{said}");
    assert!(!said.contains("GET /runs"), "{said}");
    let run_id = run_id_of(res);
    assert_eq!(
        env.wait_status(A, &run_id, &["completed", "cancelled"], 10)
            .await,
        "completed",
        "the final event was delivered: the run is no longer the request's"
    );
    assert!(env.host_cancels(&run_id).is_empty());
    env.shutdown().await;
}

#[tokio::test]
async fn a_disconnect_during_the_json_window_cancels_the_run() {
    let env = env_with(|c| c.mcp.json_answer_cap = Duration::from_secs(3)).await;
    let before = env.run_ids(A, "conformance-delay").await;
    let s = raw_post(
        &env,
        &call("conformance-delay", json!({"delayMs": 8000}), json!({})),
        SDK_ACCEPT,
        A,
    )
    .await;
    let run_id = env.fresh_run(A, "conformance-delay", &before).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(s);
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    env.shutdown().await;
}

#[tokio::test]
async fn a_disconnect_during_the_sse_phase_cancels_the_run() {
    let env = env_with(|c| c.mcp.json_answer_cap = Duration::from_millis(300)).await;
    let before = env.run_ids(A, "conformance-delay").await;
    let mut s = raw_post(
        &env,
        &call("conformance-delay", json!({"delayMs": 8000}), json!({})),
        SDK_ACCEPT,
        A,
    )
    .await;
    let head = read_head(&mut s, 5).await;
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    let run_id = env.fresh_run(A, "conformance-delay", &before).await;
    drop(s);
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    env.shutdown().await;
}

#[tokio::test]
async fn a_disconnect_after_the_final_sse_event_never_cancels() {
    let env = env_with(|c| c.mcp.json_answer_cap = Duration::from_millis(300)).await;
    let mut s = raw_post(
        &env,
        &call("conformance-delay", json!({"delayMs": 1200}), json!({})),
        SDK_ACCEPT,
        A,
    )
    .await;
    let mut text = read_head(&mut s, 5).await;
    let mut chunk = [0u8; 4096];
    while sse_messages(&text).is_empty() {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed before the final event: {text}");
        text.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }
    drop(s);
    let msgs = sse_messages(&text);
    let run_id = run_id_of(&msgs[0]["result"]);
    assert_eq!(env.status(A, &run_id).await, "completed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        env.host_cancels(&run_id).is_empty(),
        "no cancel after the answer"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn a_tasked_call_of_a_quick_tool_gets_the_call_tool_result() {
    let env = env().await;
    let r = env
        .call(A, "conformance-noop", json!({}), task_caps())
        .await;
    let res = r.result();
    assert_eq!(res["resultType"], "complete", "{}", r.text);
    assert!(res.get("taskId").is_none(), "{}", r.text);
    assert_eq!(res["isError"], false);
    let run_id = run_id_of(res);
    assert_eq!(env.status(A, &run_id).await, "completed");
    env.shutdown().await;
}

#[tokio::test]
async fn a_tasked_call_of_a_slow_tool_gets_its_task_well_before_the_run_ends() {
    let env = env().await;
    let start = Instant::now();
    let r = env
        .call(
            A,
            "conformance-delay",
            json!({"delayMs": 3000}),
            task_caps(),
        )
        .await;
    assert!(
        start.elapsed() < Duration::from_millis(1500),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    assert_eq!(r.result()["status"], "working", "{}", r.text);
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let done = env
        .poll_task(A, &task, |t| t["status"] == "completed", 10)
        .await;
    assert_eq!(done["result"]["result"]["isError"], false, "{done}");
    env.shutdown().await;
}

#[tokio::test]
async fn a_tasked_call_of_a_suspending_tool_gets_an_input_required_task() {
    let env = env().await;
    let r = env
        .call(A, "conformance-approval", json!({}), task_caps())
        .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let got = env
        .poll_task(A, &task, |t| t["status"] == "input_required", 5)
        .await;
    let requests = got["result"]["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{got}");
    env.shutdown().await;
}

#[tokio::test]
async fn a_zero_window_always_answers_a_task() {
    let env = env_with(|c| c.mcp.task_immediate_window = Duration::ZERO).await;
    let r = env
        .call(A, "conformance-noop", json!({}), task_caps())
        .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    assert!(r.result()["taskId"].is_string());
    env.shutdown().await;
}

#[tokio::test]
async fn a_disconnect_during_the_task_window_cancels_the_run() {
    let env = env_with(|c| c.mcp.task_immediate_window = Duration::from_secs(3)).await;
    let before = env.run_ids(A, "conformance-delay").await;
    let s = raw_post(
        &env,
        &call("conformance-delay", json!({"delayMs": 8000}), task_caps()),
        SDK_ACCEPT,
        A,
    )
    .await;
    let run_id = env.fresh_run(A, "conformance-delay", &before).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(s);
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    env.shutdown().await;
}
