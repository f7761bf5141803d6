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

#[tokio::test]
async fn progress_token_gets_progress_notifications_before_the_result() {
    // tools-call-with-progress: progress on the request's SSE stream, one per completed node.
    let env = env().await;
    let body = json!({
        "jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": { "name": "test_tool_with_progress", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": "progress-test-1" } }
    });
    let headers = [
        ("MCP-Protocol-Version", V.to_string()),
        ("Mcp-Method", "tools/call".to_string()),
        ("Mcp-Name", "test_tool_with_progress".to_string()),
        ("Authorization", format!("Bearer {A}")),
    ];
    // The client lists JSON first: the progress token alone makes the answer SSE.
    let r = env.raw(&headers, body.to_string()).await;
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"),
        "{:?}",
        r.headers
    );
    let msgs = sse_messages(&r.text);
    let progress: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 3, "{}", r.text);
    let values: Vec<u64> = progress
        .iter()
        .map(|p| {
            assert_eq!(p["params"]["progressToken"], "progress-test-1");
            p["params"]["progress"].as_u64().unwrap()
        })
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    let last = msgs.last().unwrap();
    assert_eq!(last["id"], 9);
    assert_eq!(last["result"]["isError"], false, "{}", r.text);
    // Without a token, the same call is a plain JSON answer.
    let mut plain = body.clone();
    plain["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("progressToken");
    let r = env.raw(&headers, plain.to_string()).await;
    assert!(r.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    env.shutdown().await;
}
