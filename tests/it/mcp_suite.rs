//! Issue 8: behaviours the official MCP conformance suite checks through the demo host's
//! fixture workflows named after its tools (tests/conformance/, docs/conformance.md).

use serde_json::json;

use crate::support::*;

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
