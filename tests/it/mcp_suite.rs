//! Behaviours the official MCP conformance suite checks through the demo host's
//! fixture workflows named after its tools (tests/conformance/, docs/conformance.md).

use std::time::Duration;

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
    // A `forbidden` tool stays synchronous for a Tasks client, even with the immediate-result
    // window off.
    env.shutdown().await;
    let env = env_with(|c| c.mcp.task_immediate_window = Duration::ZERO).await;
    let r = env
        .call(A, "test_simple_text", json!({}), task_caps())
        .await;
    assert_eq!(r.result()["resultType"], "complete", "{}", r.text);
    assert!(r.result().get("taskId").is_none());
    env.shutdown().await;
    // tasks-lifecycle: `greet` carries no hint; the window answers it directly, while a tool
    // still running when the window closes gets its task.
    let env = crate::support::env().await;
    let r = env
        .call(A, "greet", json!({"name": "World"}), task_caps())
        .await;
    assert_eq!(r.result()["resultType"], "complete", "{}", r.text);
    assert!(r.result().get("taskId").is_none());
    assert_eq!(r.result()["content"][0]["text"], "Hello, World!");
    let r = env
        .call(A, "slow_compute", json!({"seconds": 2}), task_caps())
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

#[tokio::test]
async fn missing_required_arguments_are_asked_for_before_any_run() {
    // tasks-mrtr-composition: MRTR rounds before the task; the answer becomes the argument.
    let env = env().await;
    let form = json!({ "elicitation": {} });
    let before = env.run_ids(A, "greet").await;
    let r1 = env.call(A, "greet", json!({}), form.clone()).await;
    let res = r1.result();
    assert_eq!(res["resultType"], "input_required", "{}", r1.text);
    let ask = &res["inputRequests"]["name"];
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(ask["params"]["mode"], "form");
    assert_eq!(ask["params"]["message"], "Who to greet.");
    assert_eq!(
        ask["params"]["requestedSchema"]["properties"]["name"]["type"],
        "string"
    );
    assert_eq!(
        ask["params"]["requestedSchema"]["required"],
        json!(["name"])
    );
    assert_eq!(
        env.run_ids(A, "greet").await,
        before,
        "no run before the answer"
    );
    let token = res["requestState"].as_str().unwrap().to_string();
    let retry = |token: &str, answer: Value| json!({ "name": "greet", "arguments": {}, "requestState": token, "inputResponses": { "name": answer } });
    let accept = json!({"action": "accept", "content": {"name": "Ada"}});
    let r2 = env
        .rpc(
            Some(A),
            "tools/call",
            retry(&token, accept.clone()),
            form.clone(),
        )
        .await;
    assert_eq!(
        r2.result()["content"][0]["text"],
        "Hello, Ada!",
        "{}",
        r2.text
    );
    // The round's state is single use, and a tampered one is refused.
    let again = env
        .rpc(
            Some(A),
            "tools/call",
            retry(&token, accept.clone()),
            form.clone(),
        )
        .await;
    assert_eq!(again.error_code(), Some(-32602), "{}", again.text);
    let tampered = env
        .rpc(
            Some(A),
            "tools/call",
            retry(&format!("{token}x"), accept.clone()),
            form.clone(),
        )
        .await;
    assert_eq!(tampered.error_code(), Some(-32602), "{}", tampered.text);
    // Answers keyed by the argument also count on a first call; a decline starts nothing.
    let r = env
        .rpc(
            Some(A),
            "tools/call",
            json!({ "name": "greet", "arguments": {}, "inputResponses": { "name": {"action": "accept", "content": {"name": "Bo"}} } }),
            form.clone(),
        )
        .await;
    assert_eq!(r.result()["content"][0]["text"], "Hello, Bo!", "{}", r.text);
    let n = env.run_ids(A, "greet").await.len();
    let r = env
        .rpc(
            Some(A),
            "tools/call",
            json!({ "name": "greet", "arguments": {}, "inputResponses": { "name": {"action": "decline"} } }),
            form.clone(),
        )
        .await;
    assert_eq!(r.result()["isError"], true, "{}", r.text);
    assert_eq!(env.run_ids(A, "greet").await.len(), n);
    // Without form elicitation nothing is asked: -32602 as before.
    let r = env.call(A, "greet", json!({}), json!({})).await;
    assert_eq!(r.error_code(), Some(-32602), "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn the_final_argument_round_of_a_task_tool_answers_the_task() {
    // tasks-mrtr-composition: round 1 input_required without taskId, round 2 CreateTaskResult
    // without requestState, and the task's result carries the answer.
    let env = env_with(|cfg| {
        cfg.tools.overrides.insert(
            "greet".into(),
            openwop_mcp_sidecar::config::ToolOverride {
                task: Some(openwop_mcp_sidecar::config::TaskSupport::Must),
                ..Default::default()
            },
        );
    })
    .await;
    let r1 = env.call(A, "greet", json!({}), task_caps()).await;
    assert_eq!(r1.result()["resultType"], "input_required", "{}", r1.text);
    assert!(r1.result().get("taskId").is_none());
    let token = r1.result()["requestState"].as_str().unwrap();
    let r2 = env
        .rpc(
            Some(A),
            "tools/call",
            json!({ "name": "greet", "arguments": {}, "requestState": token,
                    "inputResponses": { "name": {"action": "accept", "content": {"name": "Alice"}} } }),
            task_caps(),
        )
        .await;
    let res = r2.result();
    assert_eq!(res["resultType"], "task", "{}", r2.text);
    assert!(res.get("requestState").is_none() && res.get("inputRequests").is_none());
    let task = res["taskId"].as_str().unwrap();
    let b = env
        .poll_task(A, task, |t| t["status"] == "completed", 10)
        .await;
    assert_eq!(
        b["result"]["result"]["content"][0]["text"], "Hello, Alice!",
        "{b}"
    );
    env.shutdown().await;
}
