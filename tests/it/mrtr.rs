//! MRTR (RFC 0208 mcp.mrtr, M7, M8): InputRequiredResult keyed by interruptId and
//! a sealed, single-use requestState.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

async fn suspended_interrupts(env: &Env, run_id: &str) -> Vec<String> {
    env.suspended_interrupt_ids(A, run_id).await
}

async fn retry(
    env: &Env,
    key: &str,
    tool: &str,
    args: Value,
    state: &Value,
    responses: Value,
    caps: Value,
) -> Rpc {
    env.rpc(Some(key), "tools/call", json!({"name": tool, "arguments": args, "requestState": state, "inputResponses": responses}), caps).await
}

#[tokio::test]
async fn suspending_tool_without_elicitation_is_missing_capability() {
    if foreign() {
        // The aip151 and azure examples list the host's own job type catalog, which does not
        // say which job types can stop for a person (config/sidecar.example.yaml, tools.source:
        // toolCatalog): nothing is refused up front there.
        return;
    }
    let env = env().await;
    env.host.clear_requests();
    let r = env
        .call(A, "conformance-approval", json!({}), json!({}))
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32021)));
    assert_eq!(
        r.body["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}}),
        "an object, never an array"
    );
    assert!(
        !env.host.requests().iter().any(|q| q.method == "POST"),
        "no run before the check"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn input_requests_are_keyed_by_the_open_interrupt_id() {
    let env = env().await;
    let r1 = env
        .call(A, "conformance-approval", json!({}), elicit())
        .await;
    let r2 = env
        .call(A, "conformance-approval", json!({}), elicit())
        .await;
    let mut keys = Vec::new();
    for r in [&r1, &r2] {
        let res = r.result();
        assert_eq!(res["resultType"], "input_required", "{}", r.text);
        assert!(res["requestState"].is_string());
        let reqs = res["inputRequests"].as_object().unwrap();
        assert_eq!(reqs.len(), 1);
        let (k, v) = reqs.iter().next().unwrap();
        // An OpenWOP interruptId is tenant-bound; a foreign host's gate id has its own shape,
        // and the loop below checks every key is an interrupt id the run opened.
        assert!(
            foreign() || openwop_mcp_sidecar::wire_id::is_tenant_bound(k),
            "key is an interruptId, not a nodeId: {k}"
        );
        assert_eq!(v["method"], "elicitation/create");
        assert_eq!(v["params"]["mode"], "form");
        assert_eq!(
            v["params"]["requestedSchema"]["properties"]["action"]["enum"],
            json!(["accept", "reject"])
        );
        keys.push(k.clone());
    }
    assert_ne!(
        keys[0], keys[1],
        "two runs at the same node get different keys"
    );
    let runs = env.run_ids(A, "conformance-approval").await;
    let mut suspended = Vec::new();
    for r in &runs {
        suspended.extend(suspended_interrupts(&env, r).await);
    }
    for k in &keys {
        assert!(suspended.contains(k), "{k} is a node.suspended interruptId");
    }
    env.shutdown().await;
}

#[tokio::test]
async fn accepted_retry_completes_once_and_the_state_is_single_use() {
    let env = env().await;
    let r = env
        .call(A, "conformance-approval", json!({}), elicit())
        .await;
    let state = r.result()["requestState"].clone();
    let key = first_input_key(r.result());
    let answer = json!({ key.clone(): approval() });
    let ok = retry(
        &env,
        A,
        "conformance-approval",
        json!({}),
        &state,
        answer.clone(),
        elicit(),
    )
    .await;
    assert_eq!(
        (
            ok.body.get("error"),
            ok.result()["resultType"].as_str(),
            ok.result()["isError"].as_bool()
        ),
        (None, Some("complete"), Some(false)),
        "{}",
        ok.text
    );
    let run_id = run_id_of(ok.result());
    assert_eq!(env.resolved_count(A, &run_id).await, 1);
    let again = retry(
        &env,
        A,
        "conformance-approval",
        json!({}),
        &state,
        answer,
        elicit(),
    )
    .await;
    assert_eq!(
        again.error_code(),
        Some(-32602),
        "single use: {}",
        again.text
    );
    assert!(again.body["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("requestState refused: "));
    assert_eq!(env.resolved_count(A, &run_id).await, 1);
    env.shutdown().await;
}

#[tokio::test]
async fn forged_foreign_and_rebound_states_are_refused() {
    let env = env().await;
    let r = env
        .call(A, "conformance-approval", json!({}), elicit())
        .await;
    let state = r.result()["requestState"].as_str().unwrap().to_string();
    let key = first_input_key(r.result());
    let answer = json!({ key.clone(): approval() });
    let cases = [
        (A, json!({}), json!(format!("{state}x")), "integrity"),
        (B, json!({}), json!(state), "another principal"),
        (A, json!({"x": 1}), json!(state), "another request"),
        (A, json!({}), json!(12), "not a string"),
    ];
    for (k, args, st, why) in cases {
        let x = retry(
            &env,
            k,
            "conformance-approval",
            args,
            &st,
            answer.clone(),
            elicit(),
        )
        .await;
        assert_eq!(x.error_code(), Some(-32602), "{why}: {}", x.text);
        assert!(
            x.body["error"]["message"].as_str().unwrap().contains(why),
            "{why}: {}",
            x.text
        );
    }
    let run_id = env.run_ids(A, "conformance-approval").await[0].clone();
    assert_eq!(
        env.status(A, &run_id).await,
        "waiting-approval",
        "nothing was resolved"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn expired_state_is_refused() {
    let env = env_with(|c| c.mcp.request_state_ttl = Duration::from_millis(1)).await;
    let r = env
        .call(A, "conformance-approval", json!({}), elicit())
        .await;
    let state = r.result()["requestState"].clone();
    let key = first_input_key(r.result());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let x = retry(
        &env,
        A,
        "conformance-approval",
        json!({}),
        &state,
        json!({ key: {"action":"accept"} }),
        elicit(),
    )
    .await;
    assert_eq!(x.error_code(), Some(-32602));
    assert!(x.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("expired"));
    env.shutdown().await;
}

#[tokio::test]
async fn decline_fails_the_run_as_an_error_result() {
    let env = env().await;
    let r = env
        .call(A, "conformance-approval", json!({}), elicit())
        .await;
    let state = r.result()["requestState"].clone();
    let key = first_input_key(r.result());
    let x = retry(
        &env,
        A,
        "conformance-approval",
        json!({}),
        &state,
        json!({ key: {"action":"decline"} }),
        elicit(),
    )
    .await;
    assert_eq!(x.result()["isError"], true, "{}", x.text);
    assert_eq!(env.status(A, &run_id_of(x.result())).await, "failed");
    env.shutdown().await;
}

#[tokio::test]
async fn cancel_cancels_the_run_with_the_elicitation_reason() {
    let env = env().await;
    let r = env
        .call(A, "conformance-approval", json!({}), elicit())
        .await;
    let state = r.result()["requestState"].clone();
    let key = first_input_key(r.result());
    let x = retry(
        &env,
        A,
        "conformance-approval",
        json!({}),
        &state,
        json!({ key: {"action":"cancel"} }),
        elicit(),
    )
    .await;
    assert_eq!(x.result()["isError"], true, "{}", x.text);
    let run_id = run_id_of(x.result());
    assert_eq!(
        env.wait_status(A, &run_id, &["cancelled"], 5).await,
        "cancelled"
    );
    assert_cancel_reason(&env, &run_id, "mcp-elicitation-cancelled").await;
    env.shutdown().await;
}

#[tokio::test]
async fn a_retry_without_the_answer_is_asked_again_not_refused() {
    let env = env().await;
    let r = env
        .call(A, "conformance-approval", json!({}), elicit())
        .await;
    let state = r.result()["requestState"].clone();
    let x = retry(
        &env,
        A,
        "conformance-approval",
        json!({}),
        &state,
        json!({}),
        elicit(),
    )
    .await;
    assert_eq!(x.result()["resultType"], "input_required", "{}", x.text);
    let bad = retry(
        &env,
        A,
        "conformance-approval",
        json!({}),
        &state,
        json!({"k": 1}),
        elicit(),
    )
    .await;
    assert_eq!(
        bad.result()["resultType"],
        "input_required",
        "unknown keys are ignored: {}",
        bad.text
    );
    let key = first_input_key(r.result());
    let malformed = retry(
        &env,
        A,
        "conformance-approval",
        json!({}),
        &state,
        json!({ key: {"action": 5} }),
        elicit(),
    )
    .await;
    assert_eq!(
        malformed.error_code(),
        Some(-32602),
        "a malformed ElicitResult is a protocol error"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn clarification_is_a_form_per_question_and_the_answer_completes_the_run() {
    let env = env().await;
    let r = env
        .call(A, "conformance-clarification", json!({}), elicit())
        .await;
    assert_eq!(r.result()["resultType"], "input_required", "{}", r.text);
    let (key, req) = r.result()["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert_eq!(req["params"]["mode"], "form");
    assert_eq!(req["params"]["requestedSchema"]["required"], json!(["q1"]));
    let state = r.result()["requestState"].clone();
    let x = retry(
        &env,
        A,
        "conformance-clarification",
        json!({}),
        &state,
        json!({ key: {"action":"accept","content":{"q1":"blue"}} }),
        elicit(),
    )
    .await;
    assert_eq!(x.result()["isError"], false, "{}", x.text);
    env.shutdown().await;
}

#[tokio::test]
async fn nested_or_sensitive_questions_never_become_forms() {
    if flavor() == openwop_devhost::Flavor::Argo {
        // Argo's supplied output parameters are strings with no schema: a nested or a
        // sensitive question cannot be told from a plain one on that wire.
        return;
    }
    let env = env().await;
    for tool in [
        "conformance-clarification-nested",
        "conformance-clarification-sensitive",
    ] {
        let r = env.call(A, tool, json!({}), elicit()).await;
        assert!(r.body.get("error").is_none(), "{tool}: {}", r.text);
        assert_eq!(r.result()["isError"], true, "{tool}: {}", r.text);
        let u = env
            .call(A, tool, json!({}), json!({"elicitation":{"url":{}}}))
            .await;
        let reqs = u.result()["inputRequests"]
            .as_object()
            .expect("url mode request");
        assert!(
            reqs.values().all(|v| v["params"]["mode"] == "url"),
            "{tool}: {}",
            u.text
        );
    }
    env.shutdown().await;
}

// ---- inputRequestKey: interruptKey (tools.overrides) -------------------------------------
// The SEP-2322 fixtures name their input request (`user_name`); the OpenWOP default keys it by
// the interruptId. An operator's per-tool `inputRequestKey: interruptKey` puts the interrupt's
// own key (`node.suspended.key`) on the wire, bound to the interruptId by the requestState.

const ASK_NAME: &str = "test_input_required_result_elicitation";

async fn keyed_env() -> Env {
    env_with(|c| {
        for tool in [ASK_NAME, "test_input_required_result_multi_round"] {
            c.tools.overrides.insert(
                tool.into(),
                openwop_mcp_sidecar::config::ToolOverride {
                    input_request_key: Some(
                        openwop_mcp_sidecar::config::InputRequestKey::InterruptKey,
                    ),
                    ..Default::default()
                },
            );
        }
    })
    .await
}

fn name_answer(name: &str) -> Value {
    json!({"action": "accept", "content": {"name": name}})
}

/// A first call that carries `inputResponses` (no requestState).
async fn call_with_responses(env: &Env, tool: &str, responses: Value) -> Rpc {
    env.rpc(
        Some(A),
        "tools/call",
        json!({"name": tool, "arguments": {}, "inputResponses": responses}),
        elicit(),
    )
    .await
}

fn only_key(r: &Rpc) -> String {
    let res = r.result();
    assert_eq!(res["resultType"], "input_required", "{}", r.text);
    let reqs = res["inputRequests"].as_object().unwrap();
    assert_eq!(reqs.len(), 1, "{}", r.text);
    reqs.keys().next().unwrap().clone()
}

#[tokio::test]
async fn an_interrupt_key_tool_names_its_input_request_by_the_interrupts_own_key() {
    if foreign() {
        // The aip151 and azure hosts show an open gate by its id and step only, never the
        // workflow's own key for it (devhost/src/lib.rs, "AIP-151 flavour", "Azure flavour"):
        // there is no interrupt key to put on the wire.
        return;
    }
    let env = keyed_env().await;
    let r = env.call(A, ASK_NAME, json!({}), elicit()).await;
    assert_eq!(only_key(&r), "user_name");
    assert_eq!(
        r.result()["inputRequests"]["user_name"]["method"],
        "elicitation/create"
    );
    let done = retry(
        &env,
        A,
        ASK_NAME,
        json!({}),
        &r.result()["requestState"],
        json!({"user_name": name_answer("Alice")}),
        elicit(),
    )
    .await;
    assert_eq!(done.result()["resultType"], "complete", "{}", done.text);
    assert_eq!(done.result()["content"][0]["text"], "Hello, Alice!");
    env.shutdown().await;
}

#[tokio::test]
async fn without_the_override_the_same_tool_is_keyed_by_interrupt_id() {
    let env = env().await;
    let r = env.call(A, ASK_NAME, json!({}), elicit()).await;
    let key = only_key(&r);
    // An OpenWOP interruptId is tenant-bound; on a foreign host the next check alone says it.
    assert!(
        foreign() || openwop_mcp_sidecar::wire_id::is_tenant_bound(&key),
        "default key is the interruptId: {key}"
    );
    let run = env.run_ids(A, ASK_NAME).await[0].clone();
    assert!(suspended_interrupts(&env, &run).await.contains(&key));
    // An answer under the workflow's key means nothing here: no client can know an
    // interruptId before it is minted, so nothing is answered ahead.
    let r = call_with_responses(&env, ASK_NAME, json!({"user_name": name_answer("Alice")})).await;
    let again = only_key(&r);
    assert_ne!(again, "user_name");
    assert!(foreign() || openwop_mcp_sidecar::wire_id::is_tenant_bound(&again));
    env.shutdown().await;
}

#[tokio::test]
async fn two_runs_with_the_same_key_each_resume_their_own_interrupt() {
    if foreign() {
        // The aip151 and azure hosts show an open gate by its id and step only, never the
        // workflow's own key for it (devhost/src/lib.rs, "AIP-151 flavour", "Azure flavour"):
        // there is no interrupt key to put on the wire.
        return;
    }
    let env = keyed_env().await;
    let first = env.call(A, ASK_NAME, json!({}), elicit()).await;
    let run1 = env.fresh_run(A, ASK_NAME, &[]).await;
    let second = env.call(A, ASK_NAME, json!({}), elicit()).await;
    let run2 = env
        .fresh_run(A, ASK_NAME, std::slice::from_ref(&run1))
        .await;
    assert_eq!(
        (only_key(&first), only_key(&second)),
        ("user_name".into(), "user_name".into())
    );
    // Answered in the other order: each requestState names its own run and interrupt.
    for (r, name, run) in [(&second, "Bob", &run2), (&first, "Alice", &run1)] {
        let done = retry(
            &env,
            A,
            ASK_NAME,
            json!({}),
            &r.result()["requestState"],
            json!({"user_name": name_answer(name)}),
            elicit(),
        )
        .await;
        assert_eq!(
            done.result()["content"][0]["text"],
            format!("Hello, {name}!"),
            "{}",
            done.text
        );
        assert_eq!(
            &done.result()["structuredContent"]["runId"],
            run,
            "{}",
            done.text
        );
    }
    env.shutdown().await;
}

#[tokio::test]
async fn a_keyed_state_is_single_use_and_the_next_round_gets_the_next_key() {
    if foreign() {
        // The aip151 and azure hosts show an open gate by its id and step only, never the
        // workflow's own key for it (devhost/src/lib.rs, "AIP-151 flavour", "Azure flavour"):
        // there is no interrupt key to put on the wire.
        return;
    }
    let env = keyed_env().await;
    let tool = "test_input_required_result_multi_round";
    let r1 = env.call(A, tool, json!({}), elicit()).await;
    assert_eq!(only_key(&r1), "step1");
    let s1 = r1.result()["requestState"].clone();
    let r2 = retry(
        &env,
        A,
        tool,
        json!({}),
        &s1,
        json!({"step1": name_answer("Alice")}),
        elicit(),
    )
    .await;
    assert_eq!(only_key(&r2), "step2");
    let again = retry(
        &env,
        A,
        tool,
        json!({}),
        &s1,
        json!({"step1": name_answer("Mallory")}),
        elicit(),
    )
    .await;
    assert_eq!(again.error_code(), Some(-32602), "{}", again.text);
    // The round-2 state answered under the round-1 key answers nothing: it is asked again.
    let s2 = r2.result()["requestState"].clone();
    let wrong = retry(
        &env,
        A,
        tool,
        json!({}),
        &s2,
        json!({"step1": name_answer("x")}),
        elicit(),
    )
    .await;
    assert_eq!(only_key(&wrong), "step2");
    let done = retry(
        &env,
        A,
        tool,
        json!({}),
        &wrong.result()["requestState"],
        json!({"step2": {"action": "accept", "content": {"color": "blue"}}}),
        elicit(),
    )
    .await;
    assert_eq!(
        done.result()["content"][0]["text"],
        "Hello, Alice! Your favorite color is blue.",
        "{}",
        done.text
    );
    env.shutdown().await;
}

#[tokio::test]
async fn a_first_call_answering_the_interrupt_key_completes_at_once_ignoring_extra_keys() {
    if foreign() {
        // The aip151 and azure hosts show an open gate by its id and step only, never the
        // workflow's own key for it (devhost/src/lib.rs, "AIP-151 flavour", "Azure flavour"):
        // there is no interrupt key to put on the wire.
        return;
    }
    let env = keyed_env().await;
    let r = call_with_responses(
        &env,
        ASK_NAME,
        json!({
            "user_name": name_answer("Alice"),
            "unknown_extra_key": {"action": "accept", "content": {"foo": "bar"}},
            "another_unexpected": {"action": "accept", "content": {"baz": 123}},
        }),
    )
    .await;
    assert_eq!(r.result()["resultType"], "complete", "{}", r.text);
    assert_eq!(r.result()["content"][0]["text"], "Hello, Alice!");
    let runs = env.run_ids(A, ASK_NAME).await;
    assert_eq!(runs.len(), 1, "one run, answered through its own interrupt");
    assert_eq!(env.status(A, &runs[0]).await, "completed");
    env.shutdown().await;
}

#[tokio::test]
async fn a_first_call_with_a_wrong_or_malformed_answer_is_asked_again() {
    if foreign() {
        // The aip151 and azure hosts show an open gate by its id and step only, never the
        // workflow's own key for it (devhost/src/lib.rs, "AIP-151 flavour", "Azure flavour"):
        // there is no interrupt key to put on the wire.
        return;
    }
    let env = keyed_env().await;
    for responses in [
        json!({"wrong_key": name_answer("Alice")}),
        json!({"user_name": 12345}),
        json!({}),
    ] {
        let r = call_with_responses(&env, ASK_NAME, responses.clone()).await;
        assert_eq!(only_key(&r), "user_name", "{responses}");
    }
    env.shutdown().await;
}

#[tokio::test]
async fn input_responses_that_are_not_an_object_are_invalid_params_before_any_run() {
    let env = keyed_env().await;
    for responses in [Value::Null, json!(42), json!(["user_name"])] {
        let r = call_with_responses(&env, ASK_NAME, responses.clone()).await;
        assert_eq!(r.error_code(), Some(-32602), "{responses}: {}", r.text);
    }
    assert!(
        env.run_ids(A, ASK_NAME).await.is_empty(),
        "no run was created"
    );
    env.shutdown().await;
}
