//! Small MCP helpers more than one module needs: reading an answer's parts, starting a task.

use std::time::Duration;

use serde_json::{json, Value};

use super::{body_of, name_of, sse_messages, task_caps, Env, Rpc, A, V};

/// Client capabilities with elicitation and without the Tasks extension.
pub fn elicit() -> Value {
    json!({ "elicitation": {} })
}

/// The answer that approves a `conformance-approval` gate (an accepted elicitation whose
/// content accepts).
pub fn approval() -> Value {
    json!({"action": "accept", "content": {"action": "accept"}})
}

/// The key of the first open input request of an `input_required` result (an MRTR answer or a
/// `tasks/get` result); panics, showing the result, when there is none.
pub fn first_input_key(result: &Value) -> String {
    input_key(result).unwrap_or_else(|| panic!("no open inputRequests in {result}"))
}

/// [`first_input_key`] for a result that may not ask for input yet.
pub fn input_key(result: &Value) -> Option<String> {
    result["inputRequests"]
        .as_object()
        .and_then(|o| o.keys().next().cloned())
}

impl Env {
    /// A request on one task (`tasks/get`, `tasks/cancel`) as `key`, declaring the Tasks
    /// extension.
    pub async fn task_rpc(&self, key: &str, method: &str, task: impl serde::Serialize) -> Rpc {
        self.rpc(Some(key), method, json!({ "taskId": task }), task_caps())
            .await
    }
}

/// A tasked `tools/call` as `key`; asserts the answer is a task and returns its id.
pub async fn tasked(env: &Env, key: &str, tool: &str, args: Value) -> String {
    let r = env.call(key, tool, args, task_caps()).await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    r.result()["taskId"].as_str().unwrap().to_string()
}

/// The reason the run was cancelled with, if it was: its `run.cancelled` event; on a host
/// without an event log, the reason the cancel that reached it carried.
pub async fn cancel_reason(env: &Env, run_id: &str) -> Option<String> {
    if super::flavor() == openwop_devhost::Flavor::Argo {
        // The stop's message is the reason; the devhost records it as the run's.
        return env
            .host
            .run_events(run_id)
            .iter()
            .find(|e| e["type"] == "run.cancelled")
            .and_then(|e| e["payload"]["reason"].as_str().map(str::to_string));
    }
    if super::foreign() {
        return env.host_cancels(run_id).iter().rev().find_map(|r| {
            serde_json::from_slice::<Value>(&r.body).ok()?["reason"]
                .as_str()
                .map(str::to_string)
        });
    }
    env.events(A, run_id)
        .await
        .iter()
        .find(|e| e["type"] == "run.cancelled")
        .and_then(|e| e["payload"]["reason"].as_str().map(str::to_string))
}

/// The run was cancelled with `reason`. AIP-151 CancelOperation has no field for a reason (the
/// strict host refuses one, config/aip151.example.yaml `bodies.cancelRun: {}`), nor has a
/// Kubernetes DELETE: there, the cancel reaching the host is all there is to see.
pub async fn assert_cancel_reason(env: &Env, run_id: &str, reason: &str) {
    if matches!(
        super::flavor(),
        openwop_devhost::Flavor::Aip151 | openwop_devhost::Flavor::K8s
    ) {
        assert!(
            !env.host_cancels(run_id).is_empty(),
            "no cancel reached the host"
        );
        return;
    }
    assert_eq!(cancel_reason(env, run_id).await.as_deref(), Some(reason));
}

/// The run ends `cancelled` (not `completed`) within 15 s, with the reason the sidecar gives
/// when the request that owned the run went away (RFC 0198 §G.12).
pub async fn assert_cancelled_because_the_client_left(env: &Env, run_id: &str) {
    assert_eq!(
        env.wait_status(A, run_id, &["cancelled", "completed"], 15)
            .await,
        "cancelled"
    );
    assert_cancel_reason(env, run_id, "mcp-request-cancelled").await;
}

/// `A`'s `conformance-delay` call (8 s) posted raw, whose client closes the connection once
/// the run exists: the run ends `cancelled`, not `completed` or `failed` (RFC 0198 §G.12).
/// Its id, for what each test checks of the cancel the host received.
pub async fn a_disconnected_delay_call_is_cancelled(env: &Env) -> String {
    let before = env.run_ids(A, "conformance-delay").await;
    let call = body_of(
        11,
        "tools/call",
        json!({"name":"conformance-delay","arguments":{"delayMs": 8000}}),
        json!({}),
    );
    let mut s = super::raw_post(env, &call, "application/json, text/event-stream", A).await;
    let run_id = env.fresh_run(A, "conformance-delay", &before).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::io::AsyncWriteExt::shutdown(&mut s).await.unwrap();
    drop(s);
    assert_eq!(
        env.wait_status(A, &run_id, &["cancelled", "completed", "failed"], 15)
            .await,
        "cancelled"
    );
    run_id
}

// subscriptions/listen and fixed-id requests (tasks.rs, faults.rs).
impl Env {
    /// Opens a listen and collects its messages until it ends or `for_` passes.
    pub async fn listen(&self, key: &str, ids: Vec<String>, for_: Duration) -> Vec<Value> {
        let body = body_of(
            77,
            "subscriptions/listen",
            json!({"notifications":{"taskIds": ids}}),
            task_caps(),
        );
        let mut resp = self
            .http
            .post(self.mcp_url())
            .header("Authorization", format!("Bearer {key}"))
            .header("Accept", "text/event-stream, application/json")
            .header("MCP-Protocol-Version", V)
            .header("Mcp-Method", "subscriptions/listen")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        let mut text = String::new();
        let _ = tokio::time::timeout(for_, async {
            while let Ok(Some(c)) = resp.chunk().await {
                text.push_str(&String::from_utf8_lossy(&c));
            }
        })
        .await;
        sse_messages(&text)
    }

    /// A request whose JSON-RPC id is fixed, for byte comparisons.
    pub async fn rpc_with_id(&self, key: &str, method: &str, params: Value) -> Rpc {
        let mut hd = vec![
            ("MCP-Protocol-Version", V.to_string()),
            ("Mcp-Method", method.to_string()),
            ("Authorization", format!("Bearer {key}")),
        ];
        if let Some(n) = name_of(method, &params) {
            hd.push(("Mcp-Name", n));
        }
        self.raw(&hd, body_of(1, method, params, task_caps()).to_string())
            .await
    }
}
