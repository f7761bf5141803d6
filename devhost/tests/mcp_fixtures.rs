//! The workflows named after the MCP conformance suite's tools (the official MCP conformance suite)
//! behave as the suite's scenarios need, and publish their text where a mount can
//! find it: `RunSnapshot.variables.text` and `run.completed.payload.outputs.text`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const SOON: Duration = Duration::from_secs(5);

async fn completed_text(h: &H, run: &str) -> String {
    let snap = h.wait_status(ACME, run, &["completed"], SOON).await;
    let text = snap["variables"]["text"].as_str().unwrap().to_owned();
    let events = h.events(ACME, run).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "run.completed");
    assert_eq!(last["payload"]["outputs"]["text"], text.as_str());
    text
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

#[tokio::test]
async fn every_suite_fixture_is_advertised_and_readable() {
    let h = H::new().await;
    let d = h.get(ACME, "/.well-known/openwop").await;
    let fixtures = d.body["fixtures"].as_array().unwrap();
    for id in [
        "test_simple_text",
        "test_error_handling",
        "greet",
        "slow_compute",
        "failing_job",
        "protocol_error_job",
        "confirm_delete",
        "multi_input",
        "test_tool_with_task",
        "test_input_required_result_elicitation",
        "test_input_required_result_request_state",
        "test_input_required_result_multi_round",
        "test_input_required_result_tampered_state",
        "test_streaming_elicitation",
        "test_logging_tool",
        "test_tool_with_progress",
        "conformance-approval-delay",
        "json_schema_2020_12_tool",
        "test_custom_header_tool",
    ] {
        assert!(fixtures.contains(&json!(id)), "{id} not advertised");
        let wf = h.get(ACME, &format!("/workflows/{id}")).await;
        assert_eq!(wf.status, 200, "{id}");
        let tool = h.get(ACME, &format!("/tools/{id}")).await;
        assert_eq!(tool.status, 200, "{id}");
    }
}

#[tokio::test]
async fn suite_fixtures_carry_the_task_support_the_suite_registers() {
    let h = H::new().await;
    // The tools of tasks-lifecycle and tasks-dispatch-and-envelope carry no hint, as on a
    // real host (the sidecar's immediate-result window decides); the rest keep theirs.
    for (id, support) in [
        ("greet", Value::Null),
        ("slow_compute", Value::Null),
        ("protocol_error_job", Value::Null),
        ("confirm_delete", Value::Null),
        ("test_simple_text", json!("forbidden")),
        ("failing_job", json!("required")),
        ("multi_input", json!("optional")),
        ("test_tool_with_task", json!("required")),
    ] {
        let wf = h.get(ACME, &format!("/workflows/{id}")).await.body;
        assert_eq!(
            wf["metadata"]["customProperties"]["mcp"]["taskSupport"], support,
            "{id}"
        );
    }
}

#[tokio::test]
async fn simple_text_completes_with_the_suite_text() {
    let h = H::new().await;
    let run = h.create(ACME, "test_simple_text", json!({})).await;
    assert_eq!(
        completed_text(&h, &run).await,
        "This is a simple text response for testing."
    );
}

#[tokio::test]
async fn error_handling_fails_with_the_suite_message() {
    let h = H::new().await;
    let run = h.create(ACME, "test_error_handling", json!({})).await;
    let snap = h.wait_status(ACME, &run, &["failed"], SOON).await;
    assert_eq!(
        snap["error"],
        json!({"code": "tool_error", "message": "This tool intentionally returns an error for testing"})
    );
}

#[tokio::test]
async fn greet_renders_the_name_and_requires_it() {
    let h = H::new().await;
    let run = h.create(ACME, "greet", json!({ "name": "sep-2243" })).await;
    assert_eq!(completed_text(&h, &run).await, "Hello, sep-2243!");
    let r = h
        .post(
            ACME,
            "/runs",
            json!({ "workflowId": "greet", "inputs": {} }),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["details"]["field"], "inputs.name");
}

#[tokio::test]
async fn slow_compute_sleeps_its_seconds_and_zero_is_immediate() {
    let h = H::new().await;
    let t0 = Instant::now();
    let run = h
        .create(
            ACME,
            "slow_compute",
            json!({ "seconds": 0, "label": "instant" }),
        )
        .await;
    assert_eq!(
        completed_text(&h, &run).await,
        "slow_compute instant finished after 0 s"
    );
    assert!(t0.elapsed() < Duration::from_secs(1));

    let t0 = Instant::now();
    let run = h
        .create(ACME, "slow_compute", json!({ "seconds": 0.4 }))
        .await;
    assert_eq!(h.run(ACME, &run).await.body["status"], "running");
    completed_text(&h, &run).await;
    assert!(t0.elapsed() >= Duration::from_millis(400));
}

#[tokio::test]
async fn slow_compute_settles_to_cancelled_when_cancelled_mid_sleep() {
    let h = H::new().await;
    let run = h
        .create(ACME, "slow_compute", json!({ "seconds": 60 }))
        .await;
    let r = h.cancel(ACME, &run, json!({})).await;
    assert_eq!(r.status, 200);
    h.wait_status(ACME, &run, &["cancelled"], SOON).await;
}

#[tokio::test]
async fn failing_job_fails_with_a_tool_error_after_about_a_second() {
    let h = H::new().await;
    let t0 = Instant::now();
    let run = h.create(ACME, "failing_job", json!({})).await;
    assert_eq!(h.run(ACME, &run).await.body["status"], "running");
    let snap = h.wait_status(ACME, &run, &["failed"], SOON).await;
    assert!(t0.elapsed() >= Duration::from_millis(900));
    assert_eq!(snap["error"]["code"], "tool_error");
    assert_eq!(snap["error"]["message"], "failing_job always fails");
}

#[tokio::test]
async fn protocol_error_job_fails_with_internal_error() {
    let h = H::new().await;
    let run = h.create(ACME, "protocol_error_job", json!({})).await;
    let snap = h.wait_status(ACME, &run, &["failed"], SOON).await;
    assert_eq!(snap["error"]["code"], "internal_error");
}

#[tokio::test]
async fn confirm_delete_names_the_file_and_completes_on_accept() {
    let h = H::new().await;
    let run = h
        .create(ACME, "confirm_delete", json!({ "filename": "rt.txt" }))
        .await;
    let snap = h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    assert_eq!(snap["currentNodeId"], "confirm");
    let events = h.events(ACME, &run).await;
    let asked = of_type(&events, "interrupt.requested")[0];
    assert_eq!(asked["payload"]["data"]["title"], "Confirm delete");
    assert_eq!(asked["payload"]["data"]["description"], "Delete rt.txt?");
    let r = h
        .resolve(ACME, &run, "confirm", json!({ "action": "accept" }))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(completed_text(&h, &run).await, "Deleted rt.txt.");
}

#[tokio::test]
async fn confirm_delete_reject_fails_the_run() {
    let h = H::new().await;
    let run = h.create(ACME, "confirm_delete", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    h.resolve(ACME, &run, "confirm", json!({ "action": "reject" }))
        .await;
    let snap = h.wait_status(ACME, &run, &["failed"], SOON).await;
    assert_eq!(snap["error"]["code"], "approval_rejected");
}

#[tokio::test]
async fn multi_input_keeps_two_interrupts_open_until_both_are_answered() {
    let h = H::new().await;
    let run = h.create(ACME, "multi_input", json!({})).await;
    let snap = h.wait_status(ACME, &run, &["waiting-input"], SOON).await;
    assert_eq!(snap["currentNodeId"], "ask_name");
    let events = h.events(ACME, &run).await;
    let suspended = of_type(&events, "node.suspended");
    assert_eq!(suspended.len(), 2);
    assert_eq!(suspended[0]["nodeId"], "ask_name");
    assert_eq!(suspended[1]["nodeId"], "ask_confirm");
    assert_ne!(
        suspended[0]["payload"]["interruptId"],
        suspended[1]["payload"]["interruptId"]
    );

    // The suite answers every key with the same content; extra keys are ignored.
    let answer = json!({ "name": "partial-1", "confirm": true });
    let r = h.resolve(ACME, &run, "ask_name", answer.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "waiting-input");
    let snap = h.run(ACME, &run).await.body;
    assert_eq!(snap["status"], "waiting-input");
    assert_eq!(snap["currentNodeId"], "ask_confirm");

    let r = h.resolve(ACME, &run, "ask_confirm", answer).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        completed_text(&h, &run).await,
        "Hello, partial-1! confirm=true"
    );
    let events = h.events(ACME, &run).await;
    assert_eq!(of_type(&events, "interrupt.resolved").len(), 2);
}

#[tokio::test]
async fn multi_input_cancel_cancels_both_open_gates() {
    let h = H::new().await;
    let run = h.create(ACME, "multi_input", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-input"], SOON).await;
    let r = h.cancel(ACME, &run, json!({})).await;
    assert_eq!(r.body["status"], "cancelled");
    let events = h.events(ACME, &run).await;
    let cancelled: Vec<&Value> = of_type(&events, "node.cancelled");
    assert_eq!(cancelled.len(), 2);
    assert_eq!(events.last().unwrap()["type"], "run.cancelled");
}

#[tokio::test]
async fn tool_with_task_works_then_greets_the_given_name() {
    let h = H::new().await;
    // The name is a required variable (gathered by the sidecar before the run exists).
    let run = h
        .create(ACME, "test_tool_with_task", json!({ "name": "Alice" }))
        .await;
    assert_eq!(h.run(ACME, &run).await.body["status"], "running");
    assert_eq!(
        completed_text(&h, &run).await,
        "Hello, Alice! Your task is done."
    );
}

#[tokio::test]
async fn input_required_fixtures_ask_under_the_suite_keys() {
    let h = H::new().await;
    for (id, node, question, answer, text) in [
        (
            "test_input_required_result_elicitation",
            "user_name",
            "name",
            json!({ "name": "Alice" }),
            "Hello, Alice!",
        ),
        (
            "test_input_required_result_request_state",
            "confirm",
            "ok",
            json!({ "ok": true }),
            "state-ok (ok=true)",
        ),
        (
            "test_input_required_result_tampered_state",
            "user_name",
            "name",
            json!({ "name": "Alice" }),
            "Hello, Alice!",
        ),
        (
            "test_streaming_elicitation",
            "user_name",
            "name",
            json!({ "name": "Alice" }),
            "Hello, Alice!",
        ),
    ] {
        let run = h.create(ACME, id, json!({})).await;
        let snap = h.wait_status(ACME, &run, &["waiting-input"], SOON).await;
        assert_eq!(snap["currentNodeId"], node, "{id}");
        let events = h.events(ACME, &run).await;
        let asked = of_type(&events, "interrupt.requested")[0];
        assert_eq!(
            asked["payload"]["data"]["questions"][0]["id"], question,
            "{id}"
        );
        // The interrupt's own key is the suite's inputRequests key: a sidecar configured
        // with `inputRequestKey: interruptKey` names the input request by it.
        assert_eq!(asked["payload"]["key"], node, "{id}");
        let suspended = of_type(&events, "node.suspended")[0];
        assert_eq!(suspended["payload"]["key"], node, "{id}");
        let r = h.resolve(ACME, &run, node, answer).await;
        assert_eq!(r.status, 200, "{id}: {}", r.body);
        assert_eq!(completed_text(&h, &run).await, text, "{id}");
    }
}

#[tokio::test]
async fn multi_round_asks_step1_then_step2() {
    let h = H::new().await;
    let run = h
        .create(ACME, "test_input_required_result_multi_round", json!({}))
        .await;
    let snap = h.wait_status(ACME, &run, &["waiting-input"], SOON).await;
    assert_eq!(snap["currentNodeId"], "step1");
    h.resolve(ACME, &run, "step1", json!({ "name": "Alice" }))
        .await;
    let snap = h.wait_status(ACME, &run, &["waiting-input"], SOON).await;
    assert_eq!(snap["currentNodeId"], "step2");
    let events = h.events(ACME, &run).await;
    let asked = of_type(&events, "interrupt.requested");
    assert_eq!(
        asked[1]["payload"]["data"]["questions"][0]["question"],
        "Step 2: What is your favorite color?"
    );
    h.resolve(ACME, &run, "step2", json!({ "color": "blue" }))
        .await;
    assert_eq!(
        completed_text(&h, &run).await,
        "Hello, Alice! Your favorite color is blue."
    );
}

#[tokio::test]
async fn logging_and_progress_tools_complete_with_text() {
    let h = H::new().await;
    let run = h.create(ACME, "test_logging_tool", json!({})).await;
    assert_eq!(
        completed_text(&h, &run).await,
        "test_logging_tool completed"
    );
    let run = h.create(ACME, "test_tool_with_progress", json!({})).await;
    assert_eq!(
        completed_text(&h, &run).await,
        "test_tool_with_progress completed"
    );
    let events = h.events(ACME, &run).await;
    let steps: Vec<&str> = of_type(&events, "node.completed")
        .iter()
        .map(|e| e["nodeId"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["start", "half", "finish", "respond"]);
}

#[tokio::test]
async fn approval_delay_sleeps_after_the_accept() {
    let h = H::new().await;
    let run = h
        .create(
            ACME,
            "conformance-approval-delay",
            json!({ "delayMs": 400 }),
        )
        .await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let t0 = Instant::now();
    let r = h
        .resolve(ACME, &run, "gate", json!({ "action": "accept" }))
        .await;
    assert_eq!(r.body["status"], "running");
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    assert!(t0.elapsed() >= Duration::from_millis(400));
    let def = h
        .get(ACME, "/workflows/conformance-approval-delay")
        .await
        .body;
    assert_eq!(def["variables"][0]["defaultValue"], 3000);
}

#[tokio::test]
async fn parallel_branches_are_published_as_edges() {
    let h = H::new().await;
    let def = h.get(ACME, "/workflows/multi_input").await.body;
    assert_eq!(
        def["edges"],
        json!([
            {"id": "e1", "sourceNodeId": "ask_name", "targetNodeId": "respond"},
            {"id": "e2", "sourceNodeId": "ask_confirm", "targetNodeId": "respond"},
        ])
    );
}

// --- the X-OpenWOP-Transport hook (devhost only; docs/architecture.md, deliberate differences) ---

#[tokio::test]
async fn transport_header_sets_run_started_transport() {
    let h = H::new().await;
    for t in ["mcp", "a2a", "ui", "rest"] {
        let r = h
            .send(
                h.http
                    .post(h.url("/runs"))
                    .bearer_auth(ACME)
                    .header("X-OpenWOP-Transport", t)
                    .json(&json!({ "workflowId": "conformance-noop" })),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
        let run = r.body["runId"].as_str().unwrap();
        let events = h.events(ACME, run).await;
        assert_eq!(events[0]["payload"]["transport"], t);
    }
}

#[tokio::test]
async fn unknown_transport_is_a_validation_error() {
    let h = H::new().await;
    let r = h
        .send(
            h.http
                .post(h.url("/runs"))
                .bearer_auth(ACME)
                .header("X-OpenWOP-Transport", "carrier-pigeon")
                .json(&json!({ "workflowId": "conformance-noop" })),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["details"]["field"], "X-OpenWOP-Transport");
}

#[tokio::test]
async fn replaying_a_create_key_under_another_transport_is_a_mismatch() {
    let h = H::new().await;
    let key = "transport-key-0123456789abcdef";
    let create = |t: &'static str| {
        h.http
            .post(h.url("/runs"))
            .bearer_auth(ACME)
            .header("Idempotency-Key", key)
            .header("X-OpenWOP-Transport", t)
            .json(&json!({ "workflowId": "conformance-noop" }))
    };
    assert_eq!(h.send(create("mcp")).await.status, 201);
    let r = h.send(create("rest")).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.error(), "idempotency_key_mismatch");
}
