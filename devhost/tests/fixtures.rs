//! Every conformance fixture behaves as OpenWOP conformance/fixtures.md specifies.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const SOON: Duration = Duration::from_secs(5);

#[tokio::test]
async fn noop_completes_with_started_and_completed_events() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    let snap = h.wait_status(ACME, &run, &["completed"], SOON).await;
    assert!(snap["completedAt"].is_string());
    assert_eq!(
        h.event_types(ACME, &run).await,
        [
            "run.started",
            "node.started",
            "node.completed",
            "run.completed"
        ]
    );
    let events = h.events(ACME, &run).await;
    assert_eq!(events[0]["payload"]["transport"], "rest");
    assert_eq!(events[0]["payload"]["owner"]["tenant"], "acme");
    assert!(events[3]["payload"]["outputs"].is_object());
}

#[tokio::test]
async fn failure_fails_with_fixture_failure_error() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-failure", json!({})).await;
    let snap = h.wait_status(ACME, &run, &["failed"], SOON).await;
    assert_eq!(
        snap["error"],
        json!({"code": "fixture_failure", "message": "conformance-failure always fails"})
    );
    let types = h.event_types(ACME, &run).await;
    assert_eq!(types.first().unwrap(), "run.started");
    assert_eq!(count(&types, "node.failed"), 1);
    assert_eq!(types.last().unwrap(), "run.failed");
}

#[tokio::test]
async fn delay_is_running_during_the_sleep_then_completes() {
    let h = H::new().await;
    let run = h
        .create(ACME, "conformance-delay", json!({ "delayMs": 400 }))
        .await;
    let snap = h.run(ACME, &run).await;
    assert_eq!(snap.body["status"], "running");
    assert_eq!(snap.body["variables"]["delayMs"], 400);
    h.wait_status(ACME, &run, &["completed"], SOON).await;
}

#[tokio::test]
async fn delay_fills_its_default_input() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-delay", json!({})).await;
    let snap = h.run(ACME, &run).await.body;
    assert_eq!(snap["inputs"], json!({}));
    assert_eq!(snap["variables"], json!({ "delayMs": 1000 }));
}

#[tokio::test]
async fn delay_inputs_are_validated_against_type_and_bounds() {
    let h = H::new().await;
    for bad in [
        json!({"delayMs": "soon"}),
        json!({"delayMs": 30001}),
        json!({"delayMs": -1}),
    ] {
        let r = h
            .post(
                ACME,
                "/runs",
                json!({"workflowId": "conformance-delay", "inputs": bad}),
            )
            .await;
        assert_eq!(r.status, 400, "{bad}");
        assert_eq!(r.error(), "validation_error");
        assert_eq!(r.body["details"]["field"], "inputs.delayMs");
    }
}

#[tokio::test]
async fn approval_suspends_with_interrupt_events_in_order() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    let snap = h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    assert_eq!(snap["currentNodeId"], "gate");
    let events = h.events(ACME, &run).await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "run.started",
            "node.started",
            "interrupt.requested",
            "approval.requested",
            "node.suspended"
        ]
    );
    let requested = &events[2];
    assert_eq!(requested["nodeId"], "gate");
    assert_eq!(requested["payload"]["kind"], "approval");
    assert_eq!(
        requested["payload"]["data"]["actions"],
        json!(["accept", "reject"])
    );
    assert_eq!(
        requested["payload"]["data"]["title"],
        "Conformance approval"
    );
    let suspended = &events[4]["payload"];
    assert_eq!(suspended["nodeId"], "gate");
    assert_eq!(suspended["kind"], "approval");
    let iid = suspended["interruptId"].as_str().unwrap();
    let (tenant, opaque) = iid.split_once('/').unwrap();
    assert_eq!(tenant, "acme");
    assert!(opaque.starts_with("i-") && opaque.len() >= 24, "{iid}");
}

#[tokio::test]
async fn interrupt_ids_differ_per_suspension() {
    let h = H::new().await;
    let a = h.create(ACME, "conformance-approval", json!({})).await;
    let b = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &a, &["waiting-approval"], SOON).await;
    h.wait_status(ACME, &b, &["waiting-approval"], SOON).await;
    let iid = |evs: Vec<serde_json::Value>| {
        evs.iter().find(|e| e["type"] == "node.suspended").unwrap()["payload"]["interruptId"]
            .clone()
    };
    assert_ne!(iid(h.events(ACME, &a).await), iid(h.events(ACME, &b).await));
}

#[tokio::test]
async fn approval_accept_completes_the_run() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let r = h
        .resolve(ACME, &run, "gate", json!({"action": "accept"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["runId"], run.as_str());
    assert_eq!(r.body["nodeId"], "gate");
    let snap = h.wait_status(ACME, &run, &["completed"], SOON).await;
    assert!(snap.get("currentNodeId").is_none());
    let events = h.events(ACME, &run).await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        &types[5..],
        [
            "interrupt.resolved",
            "approval.resolved",
            "node.resumed",
            "node.completed",
            "run.completed"
        ]
    );
    let resolved = &events[5]["payload"];
    assert_eq!(resolved["decision"], "granted");
    assert_eq!(resolved["action"], "accept");
    assert_eq!(resolved["kind"], "approval");
    assert_eq!(resolved["resumeValue"], json!({"action": "accept"}));
    assert_eq!(
        resolved["resolvedBy"]["subjectId"],
        "urn:devhost:acme:alice"
    );
    assert_eq!(resolved["resolvedBy"]["lane"], "api-key");
    assert_eq!(resolved["interruptId"], events[4]["payload"]["interruptId"]);
}

#[tokio::test]
async fn approval_reject_fails_the_run_with_approval_rejected() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let r = h
        .resolve(ACME, &run, "gate", json!({"action": "reject"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let snap = h.wait_status(ACME, &run, &["failed"], SOON).await;
    assert_eq!(snap["error"]["code"], "approval_rejected");
    let events = h.events(ACME, &run).await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        &types[5..],
        [
            "interrupt.resolved",
            "approval.rejected",
            "node.failed",
            "run.failed"
        ]
    );
    assert_eq!(events[5]["payload"]["decision"], "rejected");
    assert_eq!(events[5]["payload"]["action"], "reject");
    assert_eq!(events[7]["payload"]["error"]["code"], "approval_rejected");
    assert_eq!(events[8]["payload"]["error"]["code"], "approval_rejected");
}

#[tokio::test]
async fn approval_refuses_other_resume_shapes_with_400() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    for bad in [
        json!({"action": "maybe"}),
        json!("accept"),
        json!({}),
        json!({"action": "accept", "x": 1}),
    ] {
        let r = h.resolve(ACME, &run, "gate", bad.clone()).await;
        assert_eq!(r.status, 400, "{bad}");
        assert_eq!(r.error(), "validation_error");
    }
    // Body is closed and resumeValue is required.
    let path = format!("/runs/{}/interrupts/gate", pct(&run));
    let r = h.post(ACME, &path, json!({})).await;
    assert_eq!((r.status.as_u16(), r.error()), (400, "validation_error"));
    let r = h
        .post(
            ACME,
            &path,
            json!({"resumeValue": {"action": "accept"}, "extra": true}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["details"]["field"], "extra");
    // Nothing was resolved by the refusals.
    assert_eq!(
        count(&h.event_types(ACME, &run).await, "interrupt.resolved"),
        0
    );
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
}

#[tokio::test]
async fn approvers_list_refuses_an_unlisted_resolver_and_appends_nothing() {
    let h = H::new().await;
    let run = h
        .create(ACME, "conformance-approval-approvers", json!({}))
        .await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let before = h.events(ACME, &run).await.len();
    let r = h
        .resolve(ACME, &run, "gate", json!({"action": "accept"}))
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.error(), "forbidden");
    let types = h.event_types(ACME, &run).await;
    assert_eq!(types.len(), before);
    assert_eq!(count(&types, "interrupt.resolved"), 0);
    assert_eq!(h.run(ACME, &run).await.body["status"], "waiting-approval");
    let requested = h.events(ACME, &run).await[2].clone();
    assert_eq!(
        requested["payload"]["data"]["approversList"],
        json!(["urn:conformance:listed-approver"])
    );
}

#[tokio::test]
async fn approvers_list_accepts_the_listed_approver() {
    let h = H::new().await;
    let run = h
        .create(ACME, "conformance-approval-approvers", json!({}))
        .await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let r = h
        .resolve(APPROVER, &run, "gate", json!({"action": "accept"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let events = h.events(ACME, &run).await;
    let resolved = events
        .iter()
        .find(|e| e["type"] == "interrupt.resolved")
        .unwrap();
    assert_eq!(
        resolved["payload"]["resolvedBy"]["subjectId"],
        "urn:conformance:listed-approver"
    );
}

#[tokio::test]
async fn cancellable_is_cancelled_promptly_with_the_given_reason() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-cancellable", json!({})).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(h.run(ACME, &run).await.body["status"], "running");
    let t0 = Instant::now();
    let r = h
        .cancel(ACME, &run, json!({"reason": "mcp-request-cancelled"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(["cancelling", "cancelled"].contains(&r.body["status"].as_str().unwrap()));
    h.wait_status(ACME, &run, &["cancelled"], SOON).await;
    assert!(t0.elapsed() < Duration::from_secs(5));
    let events = h.events(ACME, &run).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "run.cancelled");
    assert_eq!(last["payload"]["reason"], "mcp-request-cancelled");
    assert_eq!(last["payload"]["cancelledBy"], "caller");
    assert!(events.iter().any(|e| e["type"] == "node.cancelled"));
}

#[tokio::test]
async fn cancel_of_a_suspended_run_is_immediate_with_default_reason() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let r = h.cancel(ACME, &run, json!({})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["status"], "cancelled");
    let types = h.event_types(ACME, &run).await;
    assert_eq!(
        &types[types.len() - 2..],
        ["node.cancelled", "run.cancelled"]
    );
    let events = h.events(ACME, &run).await;
    assert_eq!(
        events.last().unwrap()["payload"]["reason"],
        "caller-requested"
    );
    // The interrupt is gone with the run.
    let r = h
        .resolve(ACME, &run, "gate", json!({"action": "accept"}))
        .await;
    assert_eq!(
        (r.status.as_u16(), r.error()),
        (409, "interrupt_already_resolved")
    );
}

#[tokio::test]
async fn cancel_on_a_terminal_run_is_409_run_terminal_and_appends_nothing() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let before = h.events(ACME, &run).await.len();
    let r = h.cancel(ACME, &run, json!({})).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.error(), "run_terminal");
    assert_eq!(h.events(ACME, &run).await.len(), before);
}

#[tokio::test]
async fn double_resolve_has_exactly_one_winner() {
    let h = H::new().await;
    for _ in 0..5 {
        let run = h.create(ACME, "conformance-approval", json!({})).await;
        h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
        let (a, b) = tokio::join!(
            h.resolve(ACME, &run, "gate", json!({"action": "accept"})),
            h.resolve(ACME, &run, "gate", json!({"action": "accept"})),
        );
        let mut codes = [a.status.as_u16(), b.status.as_u16()];
        codes.sort();
        assert_eq!(codes, [200, 409]);
        let loser = if a.status == 409 { &a } else { &b };
        assert_eq!(loser.error(), "interrupt_already_resolved");
        h.wait_status(ACME, &run, &["completed"], SOON).await;
        assert_eq!(
            count(&h.event_types(ACME, &run).await, "interrupt.resolved"),
            1
        );
    }
}

#[tokio::test]
async fn resolve_on_an_unknown_node_is_404() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let r = h
        .resolve(ACME, &run, "nope", json!({"action": "accept"}))
        .await;
    assert_eq!((r.status.as_u16(), r.error()), (404, "not_found"));
}

#[tokio::test]
async fn clarification_answers_merge_into_variables_and_complete() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-clarification", json!({})).await;
    let snap = h.wait_status(ACME, &run, &["waiting-input"], SOON).await;
    assert_eq!(snap["currentNodeId"], "ask");
    let events = h.events(ACME, &run).await;
    let requested = events
        .iter()
        .find(|e| e["type"] == "interrupt.requested")
        .unwrap();
    assert_eq!(requested["payload"]["kind"], "clarification");
    assert_eq!(
        requested["payload"]["data"]["questions"],
        json!([{"id": "q1", "question": "What is your favorite color?"}])
    );
    assert!(events
        .iter()
        .any(|e| e["type"] == "clarification.requested"));
    // A missing answer is refused.
    let r = h.resolve(ACME, &run, "ask", json!({})).await;
    assert_eq!((r.status.as_u16(), r.error()), (400, "validation_error"));
    let r = h.resolve(ACME, &run, "ask", json!({"q1": "blue"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let snap = h.wait_status(ACME, &run, &["completed"], SOON).await;
    assert_eq!(snap["variables"]["q1"], "blue");
}

#[tokio::test]
async fn clarification_decline_fails_the_run() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-clarification", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-input"], SOON).await;
    let r = h
        .resolve(ACME, &run, "ask", json!({"declined": true}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let snap = h.wait_status(ACME, &run, &["failed"], SOON).await;
    assert_eq!(snap["error"]["code"], "clarification_declined");
}

#[tokio::test]
async fn clarification_nested_and_sensitive_carry_their_schemas() {
    let h = H::new().await;
    for (wf, schema) in [
        (
            "conformance-clarification-nested",
            json!({"type": "object", "properties": {"street": {"type": "string"}}}),
        ),
        (
            "conformance-clarification-sensitive",
            json!({"type": "string", "format": "password", "writeOnly": true}),
        ),
    ] {
        let run = h.create(ACME, wf, json!({})).await;
        h.wait_status(ACME, &run, &["waiting-input"], SOON).await;
        let events = h.events(ACME, &run).await;
        let requested = events
            .iter()
            .find(|e| e["type"] == "interrupt.requested")
            .unwrap();
        assert_eq!(
            requested["payload"]["data"]["questions"][0]["schema"], schema,
            "{wf}"
        );
    }
    // The nested answer must be an object.
    let run = h
        .create(ACME, "conformance-clarification-nested", json!({}))
        .await;
    h.wait_status(ACME, &run, &["waiting-input"], SOON).await;
    let r = h.resolve(ACME, &run, "ask", json!({"q1": "Main St"})).await;
    assert_eq!(r.status, 400);
    let r = h
        .resolve(ACME, &run, "ask", json!({"q1": {"street": "Main St"}}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    h.wait_status(ACME, &run, &["completed"], SOON).await;
}
