//! More than one read per task (`host.reads`, src/config/reads.rs): the real sidecar in front
//! of the real devhost, whose v2 runs also have a Temporal-shaped history and query
//! (devhost/src/history.rs). What a run keeps only in another document reaches the task, and
//! a read that does not apply yet is no error.

use std::time::Duration;

use openwop_devhost::Flavor;
use serde_json::{json, Value};

use crate::support::*;

fn ended(r: &Value) -> bool {
    ["completed", "failed", "cancelled"].contains(&r["status"].as_str().unwrap_or(""))
}

/// The requests the devhost received for `method` on a path ending in `tail`.
fn sent(env: &Env, method: &str, tail: &str) -> Vec<openwop_devhost::RecordedRequest> {
    env.host
        .requests()
        .into_iter()
        .filter(|r| r.method == method && r.path.ends_with(tail))
        .collect()
}

#[tokio::test]
async fn a_failure_message_found_only_in_history_reaches_the_task() {
    // The run document's error is replaced by the message of the history's closing event,
    // read (newest first, one event) only once the run has ended.
    let yaml = r#"
host:
  reads:
    - name: history
      path: "/runs/{runId}/history?reverse=true&maximumPageSize=1"
      when: { status: [terminal] }
  fields:
    error:
      jq: '$reads.history.events[0] | select(.eventType == "RunFailed") | {code: "failed", message: .failure.message}'
"#;
    let env = env_with_yaml(Flavor::V2, yaml, |c| {
        c.mcp.task_immediate_window = Duration::ZERO
    })
    .await;
    let r = env
        .call(A, "conformance-failure", json!({}), task_caps())
        .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let done = env.poll_task(A, &task, ended, 10).await;
    let result = &done["result"]["result"];
    assert_eq!(result["isError"], true, "{done}");
    assert!(
        result.to_string().contains("history: "),
        "the message only the history holds: {done}"
    );
    let reads = sent(&env, "GET", "/history");
    assert!(!reads.is_empty(), "the history was read");
    assert!(
        reads
            .iter()
            .all(|r| r.query.as_deref() == Some("reverse=true&maximumPageSize=1")),
        "as configured"
    );
    assert!(
        reads.iter().all(|r| r
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && v.ends_with(A))),
        "with the caller's own credential"
    );
    // A run that has not ended is read without its history.
    let slow = env
        .call(
            A,
            "conformance-delay",
            json!({"delayMs": 3000}),
            task_caps(),
        )
        .await;
    let slow = slow.result()["taskId"].as_str().unwrap().to_string();
    let before = sent(&env, "GET", "/history").len();
    let g = env.task_rpc(A, "tasks/get", &slow).await;
    assert_eq!(g.result()["status"], "working", "{}", g.text);
    assert_eq!(sent(&env, "GET", "/history").len(), before, "not read yet");
    env.shutdown().await;
}

#[tokio::test]
async fn a_query_that_does_not_apply_yet_is_not_an_error() {
    // The host defines the query only once the run waits (400 before): the read is null
    // then, and the task reads as it would without it.
    let yaml = r#"
host:
  reads:
    - name: waiting
      path: "/runs/{runId}/query"
      method: POST
      body: { queryType: waitingFor }
      notApplicable: [400, 404]
"#;
    let env = env_with_yaml(Flavor::V2, yaml, |c| {
        c.mcp.task_immediate_window = Duration::ZERO
    })
    .await;
    let r = env
        .call(A, "conformance-delay", json!({"delayMs": 300}), task_caps())
        .await;
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let g = env.task_rpc(A, "tasks/get", &task).await;
    assert!(g.body.get("error").is_none(), "{}", g.text);
    assert_eq!(g.result()["status"], "working", "{}", g.text);
    let queries = sent(&env, "POST", "/query");
    assert!(!queries.is_empty(), "the query was sent");
    let body: Value = serde_json::from_slice(&queries[0].body).unwrap();
    assert_eq!(body, json!({"queryType": "waitingFor"}));
    let done = env.poll_task(A, &task, ended, 10).await;
    assert_eq!(done["result"]["result"]["isError"], false, "{done}");
    env.shutdown().await;
}

#[tokio::test]
async fn the_poll_interval_follows_the_retry_after_of_a_read() {
    // The run document carries no Retry-After; the history does while the run goes on.
    let yaml = r#"
host:
  reads:
    - name: history
      path: "/runs/{runId}/history"
"#;
    let env = env_with_yaml(Flavor::V2, yaml, |c| {
        c.mcp.task_immediate_window = Duration::ZERO;
        c.tasks.poll_interval_ms = 250;
    })
    .await;
    let r = env
        .call(
            A,
            "conformance-delay",
            json!({"delayMs": 3000}),
            task_caps(),
        )
        .await;
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let g = env.task_rpc(A, "tasks/get", &task).await;
    assert_eq!(g.result()["status"], "working", "{}", g.text);
    assert_eq!(g.result()["pollIntervalMs"], 1000, "{}", g.text);
    env.shutdown().await;
}

#[tokio::test]
async fn a_blocking_call_shows_the_failure_message_of_the_history_too() {
    let yaml = r#"
host:
  reads:
    - name: history
      path: "/runs/{runId}/history?reverse=true&maximumPageSize=1"
      when: { status: [terminal] }
  fields:
    error:
      jq: '$reads.history.events[0] | select(.eventType == "RunFailed") | {code: "failed", message: .failure.message}'
"#;
    let env = env_with_yaml(Flavor::V2, yaml, |_| {}).await;
    let r = env
        .call(A, "conformance-failure", json!({}), json!({}))
        .await;
    assert_eq!(r.result()["isError"], true, "{}", r.text);
    assert!(r.text.contains("history: "), "{}", r.text);
    env.shutdown().await;
}
