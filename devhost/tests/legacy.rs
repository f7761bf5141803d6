//! The legacy flavour serves the same runs as v2 in an older job API's dialect
//! (legacy.rs): `/api/v1/jobs` paths, `%`-encoded ids, `jobId`/`state`/...
//! fields, upper-case states and `{code, detail}` errors.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use openwop_devhost::{DevHostConfig, Flavor, RouteClass};
use serde_json::{json, Value};

const SOON: Duration = Duration::from_secs(5);

async fn legacy() -> H {
    H::with(DevHostConfig {
        flavor: Flavor::Legacy,
        ..Default::default()
    })
    .await
}

/// `encodeURIComponent` of a job id.
fn job_path(job: &str) -> String {
    format!("/api/v1/jobs/{}", pct(job))
}

async fn create_job(h: &H, key: &str, workflow: &str, inputs: Value) -> String {
    let r = h
        .post(
            key,
            "/api/v1/jobs",
            json!({ "workflowId": workflow, "inputs": inputs }),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["jobId"].as_str().unwrap().to_owned()
}

async fn wait_state(h: &H, job: &str, want: &str) -> Value {
    let deadline = Instant::now() + SOON;
    loop {
        let r = h.get(ACME, &job_path(job)).await;
        assert_eq!(r.status, 200, "{}", r.body);
        if r.body["state"] == want {
            return r.body;
        }
        assert!(
            Instant::now() < deadline,
            "job {job} still {}, wanted {want}",
            r.body["state"]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn poll(h: &H, job: &str) -> Value {
    let r = h
        .get(ACME, &format!("{}/events/poll?timeout=1", job_path(job)))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

fn assert_legacy_error(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status.as_u16(), status, "{}", r.body);
    assert_eq!(keys(&r.body), ["code", "detail"], "{}", r.body);
    assert_eq!(r.body["code"], code);
    assert!(!r.body["detail"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn legacy_discovery_keeps_the_v2_root_and_says_legacy() {
    let h = legacy().await;
    let d = h.get(ACME, "/.well-known/openwop").await;
    assert_eq!(d.status, 200);
    assert_eq!(d.body["flavor"], "legacy");
    assert!(d.body["fixtures"]
        .as_array()
        .unwrap()
        .contains(&json!("conformance-approval")));
    assert!(d.body["runList"].is_object());
    let v2 = H::new().await;
    assert!(v2.get(ACME, "/.well-known/openwop").await.body["flavor"].is_null());
}

#[tokio::test]
async fn legacy_create_approve_complete_end_to_end() {
    let h = legacy().await;
    let r = h
        .post(
            ACME,
            "/api/v1/jobs",
            json!({ "workflowId": "conformance-approval" }),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(keys(&r.body), ["jobId", "state"]);
    assert_eq!(r.body["state"], "RUNNING");
    let job = r.body["jobId"].as_str().unwrap().to_owned();
    assert!(job.starts_with("acme/r-"), "{job}");
    let encoded = job.replace('/', "%2F");
    assert_eq!(
        r.header("location"),
        Some(format!("/api/v1/jobs/{encoded}").as_str())
    );

    let snap = wait_state(&h, &job, "NEEDS_APPROVAL").await;
    assert_eq!(snap["jobId"], job.as_str());
    assert_eq!(snap["currentNodeId"], "gate");
    assert!(snap["createdTime"].is_string());
    for v2_field in ["runId", "status", "startedAt", "completedAt", "error"] {
        assert!(snap.get(v2_field).is_none(), "{v2_field} leaked: {snap}");
    }

    let p = poll(&h, &job).await;
    assert_eq!(
        keys(&p),
        ["events", "isTerminal", "jobId", "lastSequence", "state"]
    );
    assert_eq!(p["state"], "NEEDS_APPROVAL");
    assert_eq!(p["isTerminal"], false);
    let events = p["events"].as_array().unwrap();
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
    for e in events {
        assert_eq!(e["jobId"], job.as_str());
        assert!(e.get("runId").is_none());
    }

    let r = h
        .post(
            ACME,
            &format!("{}/approvals/gate", job_path(&job)),
            json!({ "value": { "action": "accept" } }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body,
        json!({ "jobId": job, "nodeId": "gate", "state": "RUNNING" })
    );
    let snap = wait_state(&h, &job, "SUCCEEDED").await;
    assert!(snap["finishedTime"].is_string());
    let p = poll(&h, &job).await;
    assert_eq!(p["isTerminal"], true);
    assert_eq!(
        p["events"].as_array().unwrap().last().unwrap()["type"],
        "run.completed"
    );
}

#[tokio::test]
async fn legacy_reject_reports_error_state_with_failure() {
    let h = legacy().await;
    let job = create_job(&h, ACME, "conformance-approval", json!({})).await;
    wait_state(&h, &job, "NEEDS_APPROVAL").await;
    h.post(
        ACME,
        &format!("{}/approvals/gate", job_path(&job)),
        json!({ "value": { "action": "reject" } }),
    )
    .await;
    let snap = wait_state(&h, &job, "ERROR").await;
    assert_eq!(snap["failure"]["code"], "approval_rejected");
}

#[tokio::test]
async fn legacy_clarification_waits_in_needs_input() {
    let h = legacy().await;
    let job = create_job(&h, ACME, "greet", json!({ "name": "legacy" })).await;
    let snap = wait_state(&h, &job, "SUCCEEDED").await;
    assert_eq!(snap["variables"]["text"], "Hello, legacy!");
    let job = create_job(&h, ACME, "conformance-clarification", json!({})).await;
    wait_state(&h, &job, "NEEDS_INPUT").await;
    let r = h
        .post(
            ACME,
            &format!("{}/approvals/ask", job_path(&job)),
            json!({ "value": { "q1": "blue" } }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    wait_state(&h, &job, "SUCCEEDED").await;
}

#[tokio::test]
async fn legacy_cancel_then_cancel_again_is_conflict_terminal() {
    let h = legacy().await;
    let job = create_job(&h, ACME, "conformance-cancellable", json!({})).await;
    let r = h
        .post(
            ACME,
            &format!("{}/cancel", job_path(&job)),
            json!({ "reason": "legacy-test" }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(keys(&r.body), ["jobId", "state"]);
    assert!(
        r.body["state"] == "CANCELING" || r.body["state"] == "CANCELED",
        "{}",
        r.body
    );
    wait_state(&h, &job, "CANCELED").await;
    let last = poll(&h, &job).await["events"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["type"], "run.cancelled");
    assert_eq!(last["payload"]["reason"], "legacy-test");

    let r = h
        .post(ACME, &format!("{}/cancel", job_path(&job)), json!({}))
        .await;
    assert_legacy_error(&r, 409, "CONFLICT_TERMINAL");
}

#[tokio::test]
async fn legacy_foreign_tenant_job_is_403_tenant_mismatch() {
    let h = legacy().await;
    let job = create_job(&h, ACME, "conformance-noop", json!({})).await;
    let r = h.get(GLOBEX, &job_path(&job)).await;
    assert_legacy_error(&r, 403, "TENANT_MISMATCH");
    let r = h
        .post(GLOBEX, &format!("{}/cancel", job_path(&job)), json!({}))
        .await;
    assert_legacy_error(&r, 403, "TENANT_MISMATCH");
}

#[tokio::test]
async fn legacy_errors_are_code_and_detail_only() {
    let h = legacy().await;
    let r = h
        .get(ACME, "/api/v1/jobs/acme%2Fr-AAAAAAAAAAAAAAAAAAAAAAAA")
        .await;
    assert_legacy_error(&r, 404, "NOT_FOUND");
    let r = h.send(h.http.get(h.url("/api/v1/jobs"))).await;
    assert_legacy_error(&r, 401, "UNAUTHENTICATED");
    assert!(r.header("www-authenticate").is_some());
    let r = h
        .post(
            READONLY,
            "/api/v1/jobs",
            json!({ "workflowId": "conformance-noop" }),
        )
        .await;
    assert_legacy_error(&r, 403, "FORBIDDEN");
    let r = h
        .post(ACME, "/api/v1/jobs", json!({ "workflowId": 7 }))
        .await;
    assert_legacy_error(&r, 400, "VALIDATION");

    let job = create_job(&h, ACME, "conformance-approval", json!({})).await;
    wait_state(&h, &job, "NEEDS_APPROVAL").await;
    let approve = format!("{}/approvals/gate", job_path(&job));
    // The v2 body shape is not this API's.
    let r = h
        .post(
            ACME,
            &approve,
            json!({ "resumeValue": { "action": "accept" } }),
        )
        .await;
    assert_legacy_error(&r, 400, "VALIDATION");
    let r = h
        .post(ACME, &approve, json!({ "value": { "action": "maybe" } }))
        .await;
    assert_legacy_error(&r, 400, "VALIDATION");
    assert!(!r.body["detail"].as_str().unwrap().contains("resumeValue"));
    let ok = h
        .post(ACME, &approve, json!({ "value": { "action": "accept" } }))
        .await;
    assert_eq!(ok.status, 200);
    let r = h
        .post(ACME, &approve, json!({ "value": { "action": "accept" } }))
        .await;
    assert_legacy_error(&r, 409, "ALREADY_RESOLVED");
}

#[tokio::test]
async fn legacy_hides_the_v2_paths() {
    let h = legacy().await;
    let job = create_job(&h, ACME, "conformance-noop", json!({})).await;
    for path in [
        "/runs".to_owned(),
        format!("/runs/{}", pct(&job)),
        format!("/runs/{}/events/poll", pct(&job)),
        "/workflows/conformance-noop".to_owned(),
        "/tools".to_owned(),
        "/interrupts/ow2.hs256.x.y.z".to_owned(),
    ] {
        let r = h.get(ACME, &path).await;
        assert_legacy_error(&r, 404, "NOT_FOUND");
    }
    let r = h
        .post(ACME, "/runs", json!({ "workflowId": "conformance-noop" }))
        .await;
    assert_legacy_error(&r, 404, "NOT_FOUND");
    // And the legacy paths are unknown to a v2 host.
    let v2 = H::new().await;
    assert_eq!(v2.get(ACME, "/api/v1/jobs").await.status, 404);
}

#[tokio::test]
async fn legacy_job_ids_travel_percent_encoded_only() {
    let h = legacy().await;
    let job = create_job(&h, ACME, "conformance-noop", json!({})).await;
    let tilde = openwop_devhost::wire_id::project(&job);
    let r = h.get(ACME, &format!("/api/v1/jobs/{tilde}")).await;
    assert_legacy_error(&r, 404, "NOT_FOUND");
    assert_eq!(h.get(ACME, &job_path(&job)).await.status, 200);
    let lower = job.replace('/', "%2f");
    assert_eq!(
        h.get(ACME, &format!("/api/v1/jobs/{lower}")).await.status,
        200
    );
    let r = h.get(ACME, "/api/v1/jobs/acme%2").await;
    assert_legacy_error(&r, 400, "VALIDATION");
}

#[tokio::test]
async fn legacy_workflows_are_served_under_api_v1() {
    let h = legacy().await;
    let r = h.get(ACME, "/api/v1/workflows/conformance-delay").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["id"], "conformance-delay");
    let r = h.get(ACME, "/api/v1/workflows/nope").await;
    assert_legacy_error(&r, 404, "NOT_FOUND");
}

#[tokio::test]
async fn legacy_list_filters_by_legacy_state_and_pages_with_next() {
    let h = legacy().await;
    for _ in 0..3 {
        let job = create_job(&h, ACME, "conformance-noop", json!({})).await;
        wait_state(&h, &job, "SUCCEEDED").await;
    }
    let waiting = create_job(&h, ACME, "conformance-approval", json!({})).await;
    wait_state(&h, &waiting, "NEEDS_APPROVAL").await;

    let r = h.get(ACME, "/api/v1/jobs?status=NEEDS_APPROVAL").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let jobs = r.body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["jobId"], waiting.as_str());
    assert_eq!(jobs[0]["state"], "NEEDS_APPROVAL");

    let r = h.get(ACME, "/api/v1/jobs?status=waiting-approval").await;
    assert_legacy_error(&r, 400, "VALIDATION");

    let r = h.get(ACME, "/api/v1/jobs?status=SUCCEEDED&limit=2").await;
    assert_eq!(keys(&r.body), ["jobs", "next"]);
    assert_eq!(r.body["jobs"].as_array().unwrap().len(), 2);
    let next = r.body["next"].as_str().unwrap();
    let r = h
        .get(
            ACME,
            &format!("/api/v1/jobs?status=SUCCEEDED&limit=2&cursor={next}"),
        )
        .await;
    assert_eq!(keys(&r.body), ["jobs"]);
    assert_eq!(r.body["jobs"].as_array().unwrap().len(), 1);
    assert!(r.body.get("runs").is_none());
}

#[tokio::test]
async fn legacy_event_streams_carry_job_ids() {
    let h = legacy().await;
    let job = create_job(&h, ACME, "conformance-noop", json!({})).await;
    wait_state(&h, &job, "SUCCEEDED").await;
    let r = h
        .send(
            h.http
                .get(h.url(&format!("{}/events", job_path(&job))))
                .bearer_auth(ACME),
        )
        .await;
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let text = String::from_utf8(r.raw.to_vec()).unwrap();
    let data: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(data.len(), 3, "updates mode omits node.started: {text}");
    for e in &data {
        assert_eq!(e["jobId"], job.as_str());
        assert!(e.get("runId").is_none());
    }
    let r = h
        .send(
            h.http
                .get(h.url(&format!("{}/events?streamMode=values", job_path(&job))))
                .bearer_auth(ACME),
        )
        .await;
    let text = String::from_utf8(r.raw.to_vec()).unwrap();
    let snap: Value =
        serde_json::from_str(text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap()).unwrap();
    assert_eq!(snap["state"], "SUCCEEDED");
    assert_eq!(snap["jobId"], job.as_str());
}

#[tokio::test]
async fn legacy_idempotency_transport_and_faults_behave_as_in_v2() {
    let h = legacy().await;
    let key = "legacy-idem-key-0123456789abcdef";
    let create = || {
        h.http
            .post(h.url("/api/v1/jobs"))
            .bearer_auth(ACME)
            .header("Idempotency-Key", key)
            .header("X-OpenWOP-Transport", "mcp")
            .json(&json!({ "workflowId": "conformance-noop" }))
    };
    let first = h.send(create()).await;
    let again = h.send(create()).await;
    assert_eq!(first.status, 201);
    assert_eq!(again.body["jobId"], first.body["jobId"]);
    assert_eq!(again.header("openwop-idempotent-replay"), Some("true"));
    let job = first.body["jobId"].as_str().unwrap();
    assert_eq!(
        poll(&h, job).await["events"][0]["payload"]["transport"],
        "mcp"
    );

    let faults = h.host.faults();
    faults.fail_next(RouteClass::GetRun, 1, 503);
    let r = h.get(ACME, &job_path(job)).await;
    assert_legacy_error(&r, 503, "RUNNER_UNAVAILABLE");
    assert_eq!(faults.count(RouteClass::GetRun), 1);
    assert_eq!(faults.count(RouteClass::CreateRun), 2);
    assert_eq!(faults.count(RouteClass::Poll), 1);
}
