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
