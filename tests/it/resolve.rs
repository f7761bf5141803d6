//! A run waiting on its client at a host without an event log (`host.follow:
//! poll`) is answered through the host's own routes per waiting status and action
//! (`host.resolve`, src/config/resolve.rs), with no `{nodeId}`: the AIP-151 flavour's
//! `:approve`, `:reject` and `:provideInput` custom methods and the Azure-style flavour's
//! `/approve` and `/input` actions (devhost/src/aip151.rs, devhost/src/azure.rs), both strict
//! about the fields a body may carry. Every guarantee is checked against both.

use openwop_devhost::{Flavor, RecordedRequest};
use serde_json::{json, Value};

use crate::follow::{AIP151, AZURE};
use crate::support::*;

/// Each flavour with its mapping. The Azure-style job names are short and carry no tenant,
/// so its taskIds are `opaque` (src/mcp/task_id.rs); tasks answer at once (no immediate
/// window), so a tasked call is always a task.
fn flavours() -> [(Flavor, String); 2] {
    [
        (Flavor::Aip151, AIP151.to_string()),
        (
            Flavor::Azure,
            format!(
                "{}mcp: {{ taskImmediateWindowMs: 0 }}\n",
                AZURE.replace("host:\n", "host:\n  ids: { taskId: opaque }\n")
            ),
        ),
    ]
}

/// The resolve requests the host received (every POST to an answer route).
fn resolves(env: &Env, flavour: Flavor) -> Vec<RecordedRequest> {
    let ends: &[&str] = match flavour {
        Flavor::Aip151 => &[":approve", ":reject", ":provideInput"],
        _ => &["/approve", "/input"],
    };
    env.host
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && ends.iter().any(|e| r.path.ends_with(e)))
        .collect()
}

fn body(r: &RecordedRequest) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

/// The task once it waits on its client: its `tasks/get` result.
async fn waiting(env: &Env, task: &str) -> Value {
    let b = env
        .poll_task(A, task, |r| r["status"] == "input_required", 15)
        .await;
    assert_eq!(b["result"]["status"], "input_required", "{b}");
    b["result"].clone()
}

/// The task once it is done: its `tasks/get` result.
async fn done(env: &Env, task: &str) -> Value {
    let b = env
        .poll_task(A, task, |r| r["status"] == "completed", 15)
        .await;
    assert_eq!(b["result"]["status"], "completed", "{b}");
    b["result"].clone()
}

async fn update(env: &Env, task: &str, key: &str, answer: Value) {
    let r = env
        .rpc(
            Some(A),
            "tasks/update",
            json!({ "taskId": task, "inputResponses": { key: answer } }),
            task_caps(),
        )
        .await;
    assert_eq!(
        r.result(),
        &json!({ "resultType": "complete" }),
        "{}",
        r.text
    );
}

/// The run's outcome as the task's result says it (`"status":"…"` in its text).
fn run_status(result: &Value) -> String {
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    v["status"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_waiting_approval_is_input_required_and_an_accept_resumes_it_to_completed() {
    for (flavour, yaml) in flavours() {
        let env = env_with_yaml(flavour, &yaml, |_| {}).await;
        let task = tasked(&env, A, "approval", json!({})).await;
        let t = waiting(&env, &task).await;
        let requests = t["inputRequests"].as_object().expect("inputRequests");
        assert_eq!(requests.len(), 1, "{flavour:?}: {t}");
        let key = first_input_key(&t);
        assert_eq!(requests[&key]["method"], "elicitation/create", "{t}");
        update(&env, &task, &key, approval()).await;
        let t = done(&env, &task).await;
        assert_eq!(t["result"]["isError"], false, "{flavour:?}: {t}");
        // One request, to the accept route, naming the interrupt and nothing the host does
        // not know (`{content.feedback}` was absent, so `comment` is left out).
        let sent = resolves(&env, flavour);
        assert_eq!(sent.len(), 1, "{flavour:?}");
        let want = match flavour {
            Flavor::Aip151 => {
                assert!(sent[0].path.ends_with(":approve"), "{:?}", sent[0].path);
                json!({ "approvalId": key })
            }
            _ => {
                assert!(sent[0].path.ends_with("/approve"), "{:?}", sent[0].path);
                assert_eq!(sent[0].query.as_deref(), Some("api-version=2026-01-01"));
                json!({ "approvalId": key, "decision": "Approve" })
            }
        };
        assert_eq!(body(&sent[0]), want, "{flavour:?}");
        env.shutdown().await;
    }
}

#[tokio::test]
async fn a_rejected_approval_ends_the_run_failed_as_openwop_approval_rejected_does() {
    // A rejection is the job refusing to go on: `failed` (AIP-151 `error.code` 10 ABORTED,
    // Azure `ApprovalRejected`), the same as OpenWOP's `approval_rejected`; ext-tasks shows a
    // failed run as a completed task whose result is an error. The form's `action: reject`
    // and a declined approval both take the reject route.
    for (flavour, yaml) in flavours() {
        let env = env_with_yaml(flavour, &yaml, |_| {}).await;
        for answer in [
            json!({"action": "accept", "content": {"action": "reject", "feedback": "not now"}}),
            json!({"action": "decline"}),
        ] {
            env.host.clear_requests();
            let task = tasked(&env, A, "approval", json!({})).await;
            let key = first_input_key(&waiting(&env, &task).await);
            update(&env, &task, &key, answer.clone()).await;
            let t = done(&env, &task).await;
            assert_eq!(t["result"]["isError"], true, "{flavour:?} {answer}: {t}");
            assert_eq!(run_status(&t), "failed", "{flavour:?} {answer}: {t}");
            assert!(
                t.to_string().contains("the approval was rejected"),
                "the host's reason: {t}"
            );
            let sent = resolves(&env, flavour);
            assert_eq!(sent.len(), 1, "{flavour:?}");
            let feedback = answer["content"]["feedback"].as_str();
            let want = match flavour {
                Flavor::Aip151 => {
                    assert!(sent[0].path.ends_with(":reject"), "{:?}", sent[0].path);
                    let mut b = json!({ "approvalId": key });
                    if let Some(f) = feedback {
                        b["reason"] = json!(f);
                    }
                    b
                }
                _ => {
                    let mut b = json!({ "approvalId": key, "decision": "Reject" });
                    if let Some(f) = feedback {
                        b["comment"] = json!(f);
                    }
                    b
                }
            };
            assert_eq!(body(&sent[0]), want, "{flavour:?} {answer}");
        }
        if flavour == Flavor::Aip151 {
            let ops = crate::templates::operations(&env.host).await;
            assert!(ops.iter().any(|o| o["error"]["code"] == 10), "{ops:?}");
        }
        env.shutdown().await;
    }
}

#[tokio::test]
async fn an_input_request_answered_with_values_completes_with_those_values() {
    for (flavour, yaml) in flavours() {
        let env = env_with_yaml(flavour, &yaml, |_| {}).await;
        let task = tasked(&env, A, "clarification", json!({})).await;
        let t = waiting(&env, &task).await;
        let key = first_input_key(&t);
        let schema = &t["inputRequests"][&key]["params"]["requestedSchema"];
        assert!(schema["properties"]["q1"].is_object(), "{flavour:?}: {t}");
        let values = json!({ "q1": "teal" });
        update(
            &env,
            &task,
            &key,
            json!({"action": "accept", "content": values}),
        )
        .await;
        let t = done(&env, &task).await;
        assert_eq!(t["result"]["isError"], false, "{flavour:?}: {t}");
        assert!(t.to_string().contains("teal"), "{flavour:?}: {t}");
        let sent = resolves(&env, flavour);
        assert_eq!(sent.len(), 1, "{flavour:?}");
        let field = if flavour == Flavor::Aip151 {
            "values"
        } else {
            "answers"
        };
        assert_eq!(
            body(&sent[0]),
            json!({ "inputRequestId": key, field: values }),
            "{flavour:?}"
        );
        env.shutdown().await;
    }
}

#[tokio::test]
async fn a_declined_input_request_sends_the_hosts_decline_and_ends_the_run() {
    for (flavour, yaml) in flavours() {
        let env = env_with_yaml(flavour, &yaml, |_| {}).await;
        let task = tasked(&env, A, "clarification", json!({})).await;
        let key = first_input_key(&waiting(&env, &task).await);
        update(&env, &task, &key, json!({"action": "decline"})).await;
        let t = done(&env, &task).await;
        assert_eq!(t["result"]["isError"], true, "{flavour:?}: {t}");
        assert_eq!(run_status(&t), "failed", "{flavour:?}: {t}");
        let sent = resolves(&env, flavour);
        assert_eq!(sent.len(), 1, "{flavour:?}");
        assert_eq!(
            body(&sent[0]),
            json!({ "inputRequestId": key, "decline": true }),
            "{flavour:?}"
        );
        env.shutdown().await;
    }
}

#[tokio::test]
async fn answering_the_same_interrupt_twice_resolves_it_once() {
    for (flavour, yaml) in flavours() {
        let env = env_with_yaml(flavour, &yaml, |_| {}).await;
        // The same answer twice at once: both acknowledged, the run resumed once.
        let task = tasked(&env, A, "approval", json!({})).await;
        let key = first_input_key(&waiting(&env, &task).await);
        tokio::join!(
            update(&env, &task, &key, approval()),
            update(&env, &task, &key, approval())
        );
        let t = done(&env, &task).await;
        assert_eq!(t["result"]["isError"], false, "{flavour:?}: {t}");
        // A later, different answer to the same interrupt is acknowledged and changes
        // nothing: the run stays completed, not rejected.
        update(&env, &task, &key, json!({"action": "decline"})).await;
        let t = done(&env, &task).await;
        assert_eq!(run_status(&t), "completed", "{flavour:?}: {t}");

        // An input request answered, then answered otherwise: the first answer stands.
        let task = tasked(&env, A, "clarification", json!({})).await;
        let key = first_input_key(&waiting(&env, &task).await);
        update(
            &env,
            &task,
            &key,
            json!({"action": "accept", "content": {"q1": "blue"}}),
        )
        .await;
        update(
            &env,
            &task,
            &key,
            json!({"action": "accept", "content": {"q1": "red"}}),
        )
        .await;
        let t = done(&env, &task).await;
        let text = t.to_string();
        assert!(text.contains(r#"\"blue\""#), "{flavour:?}: {t}");
        assert!(!text.contains(r#"\"red\""#), "{flavour:?}: {t}");
        env.shutdown().await;
    }
}

#[tokio::test]
async fn a_blocking_call_waiting_for_approval_asks_for_it_and_the_retry_completes() {
    // MRTR without an event log: the open approval is read from the run document, so the
    // first answer is `input_required` (never "still running"), and the retry carrying the
    // answer resolves it through the accept route and follows the run to its result.
    for (flavour, yaml) in flavours() {
        let env = env_with_yaml(flavour, &yaml, |_| {}).await;
        let r = env.call(A, "approval", json!({}), elicit()).await;
        let res = r.result();
        assert_eq!(
            res["resultType"], "input_required",
            "{flavour:?}: {}",
            r.text
        );
        let state = res["requestState"].clone();
        assert!(state.is_string(), "{}", r.text);
        let key = first_input_key(res);
        assert_eq!(
            res["inputRequests"][&key]["params"]["requestedSchema"]["properties"]["action"]["enum"],
            json!(["accept", "reject"]),
            "{}",
            r.text
        );
        let retry = json!({
            "name": "approval",
            "arguments": {},
            "requestState": state,
            "inputResponses": { key.clone(): approval() },
        });
        let done = env
            .rpc(Some(A), "tools/call", retry.clone(), elicit())
            .await;
        assert_eq!(
            done.result()["resultType"],
            "complete",
            "{flavour:?}: {}",
            done.text
        );
        assert_eq!(done.result()["isError"], false, "{}", done.text);
        let sent = resolves(&env, flavour);
        assert_eq!(sent.len(), 1, "{flavour:?}");
        assert_eq!(body(&sent[0])["approvalId"], json!(key), "{flavour:?}");
        // The requestState is spent: the same retry again resolves nothing more.
        let again = env.rpc(Some(A), "tools/call", retry, elicit()).await;
        assert_eq!(again.error_code(), Some(-32602), "{}", again.text);
        assert_eq!(resolves(&env, flavour).len(), 1, "{flavour:?}");
        env.shutdown().await;
    }
}

#[tokio::test]
async fn the_openwop_resolve_route_is_unchanged_without_host_resolve() {
    // No `host.resolve`: the answer goes to resolveInterrupt with the v2 body, byte for byte.
    if legacy() {
        return;
    }
    let env = env().await;
    let task = tasked(&env, A, "conformance-approval", json!({})).await;
    let key = first_input_key(
        &env.poll_task(A, &task, |r| r["status"] == "input_required", 10)
            .await["result"],
    );
    env.host.clear_requests();
    update(&env, &task, &key, approval()).await;
    let sent: Vec<RecordedRequest> = env
        .host
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.contains("/interrupts/"))
        .collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body, br#"{"resumeValue":{"action":"accept"}}"#);
    assert!(sent[0].header("idempotency-key").is_some());
    env.shutdown().await;
}

#[tokio::test]
async fn a_pending_answer_names_the_hosts_accept_route() {
    // A client that cannot be asked (no elicitation declared) is told where the interrupt is
    // resolved: the `host.resolve` accept route, not the OpenWOP one.
    for (flavour, yaml) in flavours() {
        let env = env_with_yaml(flavour, &yaml, |_| {}).await;
        let r = env.call(A, "approval", json!({}), json!({})).await;
        let text = r.result()["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let want = match flavour {
            Flavor::Aip151 => ":approve",
            _ => "/approve?api-version=2026-01-01",
        };
        assert!(text.contains(want), "{flavour:?}: {}", r.text);
        assert!(text.contains("POST "), "{flavour:?}: {}", r.text);
        assert!(!text.contains("/interrupts/"), "{flavour:?}: {}", r.text);
        env.shutdown().await;
    }
}
