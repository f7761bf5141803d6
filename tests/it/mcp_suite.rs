//! Issue 8: behaviours the official MCP conformance suite checks through the demo host's
//! fixture workflows named after its tools (tests/conformance/, docs/conformance.md).

use serde_json::{json, Value};

use crate::support::*;

#[tokio::test]
async fn a_published_text_variable_is_the_answer_text() {
    // tasks-* (greet), tools-call-simple-text: the run's `text` variable is content[0].
    let env = env().await;
    let r = env
        .call(A, "greet", json!({"name": "sep-2243"}), json!({}))
        .await;
    let res = r.result();
    assert_eq!(res["isError"], false, "{}", r.text);
    assert_eq!(
        res["content"][0],
        json!({"type": "text", "text": "Hello, sep-2243!"})
    );
    // The JSON block still follows, and structuredContent names the run.
    let body: Value = serde_json::from_str(res["content"][1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(body["status"], "completed");
    assert_eq!(res["structuredContent"]["runId"], body["runId"]);
    env.shutdown().await;
}

#[tokio::test]
async fn workflow_declared_task_support_is_honoured() {
    // tasks-required-task-error: `required` refuses a client without the extension.
    let env = env().await;
    let r = env.call(A, "failing_job", json!({}), json!({})).await;
    assert_eq!(
        (r.status, r.error_code()),
        (400, Some(-32021)),
        "{}",
        r.text
    );
    assert_eq!(
        r.body["error"]["data"]["requiredCapabilities"],
        json!({"extensions": {TASKS: {}}})
    );
    // tasks-lifecycle: a `forbidden` tool stays synchronous for a Tasks client.
    let r = env
        .call(A, "greet", json!({"name": "World"}), task_caps())
        .await;
    assert_eq!(r.result()["resultType"], "complete", "{}", r.text);
    assert!(r.result().get("taskId").is_none());
    // `optional` gets a task when the client declares the extension.
    let r = env
        .call(A, "slow_compute", json!({"seconds": 0}), task_caps())
        .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn a_host_fault_is_a_failed_task_and_a_json_rpc_error() {
    // tasks-lifecycle sep-2663-tasks-get-status-failed.
    let env = env().await;
    let r = env
        .call(A, "protocol_error_job", json!({}), task_caps())
        .await;
    let task = r.result()["taskId"].as_str().expect("a task").to_string();
    let b = env
        .poll_task(
            A,
            &task,
            |t| ["completed", "failed", "cancelled"].contains(&t["status"].as_str().unwrap_or("")),
            10,
        )
        .await;
    let t = &b["result"];
    assert_eq!(t["status"], "failed", "{b}");
    assert_eq!(t["error"]["code"], -32603);
    assert!(t["error"]["message"].is_string());
    assert!(t.get("result").is_none(), "{b}");
    // Blocking: the JSON-RPC error itself.
    let r = env
        .call(A, "protocol_error_job", json!({}), json!({}))
        .await;
    assert_eq!(
        (r.status, r.error_code()),
        (200, Some(-32603)),
        "{}",
        r.text
    );
    // A tool error stays a completed task with isError (failing_job fails with tool_error).
    let r = env.call(A, "failing_job", json!({}), task_caps()).await;
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let b = env
        .poll_task(A, &task, |t| t["status"] == "completed", 10)
        .await;
    assert_eq!(b["result"]["result"]["isError"], true, "{b}");
    env.shutdown().await;
}
