//! The azure flavour serves the same runs as an Azure-style async-operation API
//! (azure.rs): `api-version` on every call, `POST /jobs` → `202` with an empty body and
//! `Operation-Location`/`Location`/`Retry-After`, `PUT /jobs/{name}` → `201`, a status
//! monitor with `Retry-After` while it runs, approvals and input requests as nested
//! objects while the status stays `Running`, a `value[]`/`nextLink` catalog, Azure
//! errors, and a record of every status monitor read.

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
const V: &str = "api-version=2026-01-01";

async fn azure() -> H {
    H::with(DevHostConfig {
        flavor: Flavor::Azure,
        retry_after_secs: 0,
        ..Default::default()
    })
    .await
}

/// `path?api-version=…`.
fn v(path: &str) -> String {
    format!("{path}?{V}")
}

async fn put(h: &H, key: &str, name: &str, body: Value) -> Resp {
    h.send(
        h.http
            .put(h.url(&v(&format!("/jobs/{name}"))))
            .bearer_auth(key)
            .json(&body),
    )
    .await
}

/// `POST /jobs` → the `Operation-Location` and `Location` paths (base URL cut off).
async fn post_job(h: &H, job_type: &str, parameters: Value) -> (String, String) {
    let r = h
        .post(
            ACME,
            &v("/jobs"),
            json!({ "jobType": job_type, "parameters": parameters }),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let base = h.host.base_url();
    let cut = |name: &str| {
        r.header(name)
            .unwrap()
            .strip_prefix(&base)
            .unwrap()
            .to_owned()
    };
    (cut("operation-location"), cut("location"))
}

/// Read a document until `ok` holds.
async fn until(h: &H, path: &str, ok: impl Fn(&Value) -> bool) -> Resp {
    let deadline = Instant::now() + SOON;
    loop {
        let r = h.get(ACME, path).await;
        assert_eq!(r.status, 200, "{}", r.body);
        if ok(&r.body) {
            return r;
        }
        assert!(Instant::now() < deadline, "still {}", r.body);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn assert_azure_error(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status.as_u16(), status, "{}", r.body);
    assert_eq!(r.body["error"]["code"], code, "{}", r.body);
    assert!(!r.body["error"]["message"].as_str().unwrap().is_empty());
    assert_eq!(r.header("x-ms-error-code"), Some(code));
}

#[tokio::test]
async fn azure_post_is_202_with_an_empty_body_and_a_status_monitor() {
    let h = H::with(DevHostConfig {
        flavor: Flavor::Azure,
        ..Default::default()
    })
    .await;
    let r = h
        .post(
            ACME,
            &v("/jobs"),
            json!({ "jobType": "greet", "parameters": { "name": "azure" } }),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert!(r.raw.is_empty(), "an empty body");
    assert!(r.header("openwop-version").is_none(), "not an OpenWOP host");
    assert_eq!(r.header("retry-after"), Some("1"));
    let base = h.host.base_url();
    let monitor = r.header("operation-location").unwrap();
    let op = r.header("operation-id").unwrap();
    assert_eq!(monitor, format!("{base}/operations/{op}?{V}"));
    assert_eq!(op.len(), 36, "a GUID: {op}");
    let location = r.header("location").unwrap();
    assert!(
        location.starts_with(&format!("{base}/jobs/job-")),
        "{location}"
    );
    assert!(location.ends_with(&format!("?{V}")), "{location}");

    let monitor = monitor.strip_prefix(&base).unwrap();
    let done = until(&h, monitor, |m| m["status"] == "Succeeded").await;
    assert!(
        done.header("retry-after").is_none(),
        "terminal: no Retry-After"
    );
    assert_eq!(done.body["id"], op);
    assert_eq!(done.body["result"]["text"], "Hello, azure!");
    assert_eq!(done.body["properties"]["jobType"], "greet");
    assert_eq!(done.body["resourceLocation"].as_str().unwrap(), location);
    let job = h.get(ACME, location.strip_prefix(&base).unwrap()).await;
    assert_eq!(job.status, 200, "{}", job.body);
    assert_eq!(job.body["status"], "Succeeded");
    assert_eq!(job.body["operationId"], op);
    assert_eq!(job.body["parameters"], json!({ "name": "azure" }));
    assert_eq!(job.body["result"]["text"], "Hello, azure!");

    let (monitor, _) = post_job(&h, "conformance-delay", json!({ "delayMs": 2000 })).await;
    let r = h.get(ACME, &monitor).await;
    assert_eq!(r.body["status"], "Running");
    assert_eq!(
        r.header("retry-after"),
        Some("1"),
        "every non-terminal read"
    );
}

#[tokio::test]
async fn azure_api_version_is_required_on_every_call() {
    let h = azure().await;
    let (monitor, location) = post_job(&h, "conformance-noop", json!({})).await;
    let bare = |p: &str| p.split('?').next().unwrap().to_owned();
    for path in [
        bare(&monitor),
        bare(&location),
        "/jobTypes".into(),
        "/runs".into(),
    ] {
        let r = h.get(ACME, &path).await;
        assert_azure_error(&r, 400, "MissingApiVersionParameter");
        assert_eq!(
            r.body["error"]["message"],
            "The api-version query parameter (?api-version=) is required for all requests."
        );
    }
    let r = h
        .get(ACME, &format!("{}?api-version=2020-01-01", bare(&monitor)))
        .await;
    assert_azure_error(&r, 400, "UnsupportedApiVersionValue");
    // A second query glued on with another `?` breaks the version, as a real host sees it.
    let r = h.get(ACME, &format!("{monitor}?limit=1")).await;
    assert_azure_error(&r, 400, "UnsupportedApiVersionValue");
    // Other query parameters are ignored.
    assert_eq!(h.get(ACME, &format!("{monitor}&limit=1")).await.status, 200);
    let r = h.post(ACME, "/jobs", json!({ "jobType": "greet" })).await;
    assert_azure_error(&r, 400, "MissingApiVersionParameter");
}

#[tokio::test]
async fn azure_put_creates_a_named_job_and_an_identical_put_is_a_retry() {
    let h = azure().await;
    let body = json!({ "jobType": "conformance-delay", "parameters": { "delayMs": 2000 } });
    let r = put(&h, ACME, "nightly-1", body.clone()).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["name"], "nightly-1");
    assert_eq!(r.body["status"], "Running");
    let op = r.header("operation-id").unwrap().to_owned();
    assert_eq!(r.body["operationId"], op.as_str());
    assert_eq!(
        r.header("operation-location").unwrap(),
        format!("{}/operations/{op}?{V}", h.host.base_url())
    );
    assert!(r.header("retry-after").is_none());

    let again = put(&h, ACME, "nightly-1", body.clone()).await;
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(again.header("operation-id"), Some(op.as_str()));
    let other = put(
        &h,
        ACME,
        "nightly-1",
        json!({ "jobType": "conformance-noop" }),
    )
    .await;
    assert_azure_error(&other, 409, "Conflict");
    // Names are per tenant.
    let globex = put(&h, GLOBEX, "nightly-1", body).await;
    assert_eq!(globex.status, 201, "{}", globex.body);
    assert_ne!(globex.header("operation-id"), Some(op.as_str()));
    assert_eq!(h.host.faults().count(RouteClass::CreateRun), 4);
    assert_eq!(h.host.status_monitor_reads().len(), 2, "two jobs");

    // Read-only fields in the body are ignored; a different name is refused.
    let r = put(
        &h,
        ACME,
        "with-extras",
        json!({ "jobType": "conformance-noop", "status": "Succeeded", "etag": "x" }),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = put(
        &h,
        ACME,
        "mismatch",
        json!({ "jobType": "conformance-noop", "name": "other" }),
    )
    .await;
    assert_azure_error(&r, 400, "InvalidRequest");
    assert_eq!(r.body["error"]["target"], "name");
    let r = put(&h, ACME, "-bad", json!({ "jobType": "conformance-noop" })).await;
    assert_azure_error(&r, 400, "InvalidResourceName");
    let r = put(&h, ACME, "unknown-type", json!({ "jobType": "nope" })).await;
    assert_azure_error(&r, 400, "UnknownJobType");
    let r = put(&h, ACME, "no-type", json!({})).await;
    assert_azure_error(&r, 400, "InvalidRequest");
    assert_eq!(r.body["error"]["target"], "jobType");
}

#[tokio::test]
async fn azure_operation_id_makes_a_post_retryable_and_nothing_else_does() {
    let h = azure().await;
    let post = |op: &'static str, job_type: &'static str| {
        h.http
            .post(h.url(&v("/jobs")))
            .bearer_auth(ACME)
            .header("Operation-Id", op)
            .json(&json!({ "jobType": job_type }))
    };
    let first = h.send(post("retry-1", "conformance-noop")).await;
    let again = h.send(post("retry-1", "conformance-noop")).await;
    assert_eq!(first.status, 202);
    assert_eq!(again.status, 202);
    assert_eq!(first.header("location"), again.header("location"));
    assert!(first
        .header("operation-location")
        .unwrap()
        .contains("/operations/retry-1?"));
    let other = h.send(post("retry-1", "conformance-delay")).await;
    assert_azure_error(&other, 409, "Conflict");
    assert_eq!(h.host.status_monitor_reads().len(), 1, "one job");

    // Without it, a repeated POST is a second job; Idempotency-Key means nothing here.
    let with_key = || {
        h.http
            .post(h.url(&v("/jobs")))
            .bearer_auth(ACME)
            .header("Idempotency-Key", "azure-idem-key-0123456789abcdef")
            .json(&json!({ "jobType": "conformance-noop" }))
    };
    let a = h.send(with_key()).await;
    let b = h.send(with_key()).await;
    assert_ne!(a.header("location"), b.header("location"));
    assert_eq!(h.host.status_monitor_reads().len(), 3);
    let r = h
        .send(
            h.http
                .post(h.url(&v("/jobs")))
                .bearer_auth(ACME)
                .header(
                    "Repeatability-Request-ID",
                    "5f0c6a52-3b8e-4c1d-9a7e-2b4f6d8e0a13",
                )
                .header("Repeatability-First-Sent", "Tue, 01 Dec 2026 10:00:00 GMT")
                .json(&json!({ "jobType": "conformance-noop" })),
        )
        .await;
    assert_azure_error(&r, 501, "NotImplemented");
}

#[tokio::test]
async fn azure_approval_is_a_nested_object_while_the_status_stays_running() {
    let h = azure().await;
    let (monitor, location) = post_job(&h, "conformance-approval", json!({})).await;
    let m = until(&h, &monitor, |m| {
        m["properties"]["pendingApproval"].is_object()
    })
    .await;
    assert_eq!(m.body["status"], "Running");
    assert!(m.header("retry-after").is_some());
    let pending = m.body["properties"]["pendingApproval"].clone();
    assert_eq!(pending["step"], "gate");
    assert_eq!(pending["allowedDecisions"], json!(["Approve", "Reject"]));
    let job = h.get(ACME, &location).await;
    assert_eq!(job.body["status"], "Running");
    assert_eq!(job.body["pendingApproval"], pending);

    let approve = v(&format!("{}/approve", location.split('?').next().unwrap()));
    let r = h
        .post(ACME, &approve, json!({ "decision": "Approve" }))
        .await;
    assert_azure_error(&r, 400, "InvalidRequest");
    assert_eq!(r.body["error"]["target"], "approvalId");
    let r = h
        .post(
            ACME,
            &approve,
            json!({ "approvalId": "i-stale", "decision": "Approve" }),
        )
        .await;
    assert_azure_error(&r, 409, "NotPending");
    let r = h
        .post(
            ACME,
            &approve,
            json!({ "approvalId": pending["id"], "decision": "Maybe" }),
        )
        .await;
    assert_azure_error(&r, 400, "InvalidRequest");
    let r = h
        .post(
            ACME,
            &approve,
            json!({ "approvalId": pending["id"], "decision": "Approve", "comment": "ok" }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let done = until(&h, &monitor, |m| m["status"] == "Succeeded").await;
    assert!(done.body["properties"].get("pendingApproval").is_none());
    let r = h
        .post(
            ACME,
            &approve,
            json!({ "approvalId": pending["id"], "decision": "Approve" }),
        )
        .await;
    assert_azure_error(&r, 409, "NotPending");

    let (monitor, location) = post_job(&h, "conformance-approval", json!({})).await;
    let m = until(&h, &monitor, |m| {
        m["properties"]["pendingApproval"].is_object()
    })
    .await;
    let r = h
        .post(
            ACME,
            &v(&format!("{}/approve", location.split('?').next().unwrap())),
            json!({ "approvalId": m.body["properties"]["pendingApproval"]["id"], "decision": "Reject" }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let failed = until(&h, &monitor, |m| m["status"] == "Failed").await;
    assert_eq!(failed.body["error"]["code"], "ApprovalRejected");
}

#[tokio::test]
async fn azure_input_request_is_answered_on_the_job() {
    let h = azure().await;
    let (monitor, location) = post_job(&h, "conformance-clarification", json!({})).await;
    let m = until(&h, &monitor, |m| {
        m["properties"]["pendingInput"].is_object()
    })
    .await;
    assert_eq!(m.body["status"], "Running");
    let pending = m.body["properties"]["pendingInput"].clone();
    assert_eq!(pending["step"], "ask");
    assert!(
        pending["answerSchema"]["properties"]["q1"].is_object(),
        "{pending}"
    );
    let input = v(&format!("{}/input", location.split('?').next().unwrap()));
    let r = h
        .post(
            ACME,
            &input,
            json!({ "inputRequestId": pending["id"], "answers": { "q1": 1 } }),
        )
        .await;
    assert_azure_error(&r, 400, "InvalidRequest");
    assert_eq!(r.body["error"]["target"], "answers.q1");
    let r = h
        .post(
            ACME,
            &input,
            json!({ "inputRequestId": pending["id"], "answers": { "q1": "blue" } }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let done = until(&h, &monitor, |m| m["status"] == "Succeeded").await;
    assert_eq!(done.body["result"]["q1"], "blue");
}

#[tokio::test]
async fn azure_cancel_ends_canceled_and_a_finished_job_is_not_cancelable() {
    let h = azure().await;
    let (monitor, location) = post_job(&h, "conformance-cancellable", json!({})).await;
    let cancel = v(&format!("{}/cancel", location.split('?').next().unwrap()));
    // Lenient: a body it does not know is ignored.
    let r = h.post(ACME, &cancel, json!({ "reason": "stop" })).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body["status"] == "Canceling" || r.body["status"] == "Canceled",
        "{}",
        r.body
    );
    let done = until(&h, &monitor, |m| m["status"] == "Canceled").await;
    assert!(done.header("retry-after").is_none());
    assert!(done.body.get("error").is_none());
    let r = h.post(ACME, &cancel, json!({})).await;
    assert_azure_error(&r, 409, "OperationNotAllowed");
}

#[tokio::test]
async fn azure_jobs_and_monitors_are_the_owners_only() {
    let h = azure().await;
    let (monitor, location) = post_job(&h, "conformance-cancellable", json!({})).await;
    let job = location.split('?').next().unwrap();
    assert_azure_error(&h.get(GLOBEX, &monitor).await, 404, "NotFound");
    assert_azure_error(&h.get(GLOBEX, &location).await, 404, "NotFound");
    let r = h
        .post(GLOBEX, &v(&format!("{job}/cancel")), json!({}))
        .await;
    assert_azure_error(&r, 404, "NotFound");
    assert_eq!(h.get(ACME, &monitor).await.body["status"], "Running");
    let r = h
        .post(
            READONLY,
            &v("/jobs"),
            json!({ "jobType": "conformance-noop" }),
        )
        .await;
    assert_azure_error(&r, 403, "Forbidden");
    let r = h.send(h.http.get(h.url(&monitor))).await;
    assert_azure_error(&r, 401, "Unauthorized");
    assert!(r.header("www-authenticate").is_some());
    let r = h
        .send(h.http.delete(h.url(&location)).bearer_auth(ACME))
        .await;
    assert_azure_error(&r, 405, "MethodNotAllowed");
    assert_azure_error(&h.get(ACME, &v("/runs")).await, 404, "NotFound");
}

#[tokio::test]
async fn azure_catalog_is_value_with_next_links() {
    let h = azure().await;
    let total = H::new()
        .await
        .get(ACME, "/tools")
        .await
        .body
        .as_array()
        .unwrap()
        .len();
    let base = h.host.base_url();
    let mut names = Vec::new();
    let mut next = format!("{base}/jobTypes?{V}");
    loop {
        let r = h.send(h.http.get(&next).bearer_auth(ACME)).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let page = r.body["value"].as_array().unwrap();
        assert!(page.len() <= 10);
        for jt in page {
            names.push(jt["name"].as_str().unwrap().to_owned());
            assert_eq!(jt["schema"]["parameters"]["type"], "object", "{jt}");
        }
        match r.body["nextLink"].as_str() {
            Some(n) => {
                assert!(n.starts_with(&base) && n.contains(V), "{n}");
                next = n.to_owned();
            }
            None => break,
        }
    }
    assert_eq!(names.len(), total);
    let r = h.get(ACME, &v("/jobTypes/structured-greeting")).await;
    assert_eq!(r.body["schema"]["result"]["type"], "object");
    assert!(r.body["summary"].is_string());
    let r = h.get(ACME, &v("/jobTypes/failing_job")).await;
    assert_eq!(r.body["tags"]["mcp-task-support"], "required");
    let r = h.get(ACME, &format!("/jobTypes?{V}&maxpagesize=0")).await;
    assert_azure_error(&r, 400, "InvalidRequest");
}

#[tokio::test]
async fn azure_records_every_status_monitor_read_against_retry_after() {
    let h = H::with(DevHostConfig {
        flavor: Flavor::Azure,
        retry_after_secs: 1,
        ..Default::default()
    })
    .await;
    let (monitor, _) = post_job(&h, "conformance-delay", json!({ "delayMs": 1300 })).await;
    let early = h.get(ACME, &monitor).await;
    assert_eq!(early.header("retry-after"), Some("1"));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    h.get(ACME, &monitor).await;
    until(&h, &monitor, |m| m["status"] == "Succeeded").await;

    let reads = h.host.status_monitor_reads();
    assert_eq!(reads.len(), 1);
    let r = &reads[0];
    assert_eq!(r.tenant, "acme");
    assert!(monitor.contains(&r.operation_id));
    assert_eq!(r.announced.unwrap().1, Duration::from_secs(1));
    assert!(r.reads.len() >= 3, "{r:?}");
    assert_eq!(r.reads[0].retry_after, Some(Duration::from_secs(1)));
    assert_eq!(r.reads.last().unwrap().status, "Succeeded");
    assert_eq!(r.reads.last().unwrap().retry_after, None);
    // The first read came at once after the 202; the polls after the sleep came sooner
    // than the answer before them asked.
    assert!(r.early_reads() >= 2, "{r:?}");
    assert!(r.min_gap().unwrap() < Duration::from_secs(1));

    let admin = h.get(ACME, "/_devhost/status-reads").await;
    assert_eq!(admin.status, 200, "{}", admin.body);
    let op = &admin.body["operations"][0];
    assert_eq!(op["reads"], r.reads.len());
    assert_eq!(op["earlyReads"], r.early_reads());
    assert_eq!(op["announcedRetryAfterS"], 1);
    assert_eq!(op["entries"][0]["retryAfterS"], 1);
    let cleared = h.send(h.http.delete(h.url("/_devhost/status-reads"))).await;
    assert_eq!(cleared.body["operations"][0]["reads"], 0);
    assert!(h.host.status_monitor_reads()[0].reads.is_empty());
}

#[tokio::test]
async fn azure_faults_apply_by_route_class() {
    let h = azure().await;
    let (monitor, _) = post_job(&h, "conformance-noop", json!({})).await;
    let faults = h.host.faults();
    faults.fail_next(RouteClass::GetRun, 1, 503);
    let r = h.get(ACME, &monitor).await;
    assert_azure_error(&r, 503, "ServiceUnavailable");
    assert_eq!(h.get(ACME, &monitor).await.status, 200);
    assert_eq!(faults.count(RouteClass::CreateRun), 1);
    assert_eq!(faults.count(RouteClass::GetRun), 2);
    assert_eq!(
        h.host.status_monitor_reads()[0].reads.len(),
        1,
        "a faulted read never reached the monitor"
    );
}

#[tokio::test]
async fn azure_only_a_listed_approver_may_approve() {
    let h = azure().await;
    let (monitor, location) = post_job(&h, "conformance-approval-approvers", json!({})).await;
    let m = until(&h, &monitor, |m| {
        m["properties"]["pendingApproval"].is_object()
    })
    .await;
    let pending = &m.body["properties"]["pendingApproval"];
    assert_eq!(
        pending["approvers"],
        json!(["urn:conformance:listed-approver"])
    );
    let approve = v(&format!("{}/approve", location.split('?').next().unwrap()));
    let body = json!({ "approvalId": pending["id"], "decision": "Approve" });
    let r = h.post(ACME, &approve, body.clone()).await;
    assert_azure_error(&r, 403, "Forbidden");
    let r = h.post(APPROVER, &approve, body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    until(&h, &monitor, |m| m["status"] == "Succeeded").await;
}
