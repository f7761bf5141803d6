//! The aip151 flavour serves the same runs as a Google AIP-151 long-running-operations
//! API (aip151.rs): `jobTypes/{id}:run` answered with an `Operation`, `done`/`error`/
//! `response`, `:cancel`, `:wait`, AIP-155 `requestId` dedupe, approvals and input
//! requests in `metadata`, a paged catalog, google errors, strict bodies and queries.

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

async fn aip() -> H {
    H::with(DevHostConfig {
        flavor: Flavor::Aip151,
        ..Default::default()
    })
    .await
}

fn run_path(job_type: &str) -> String {
    format!("/v1/projects/acme/jobTypes/{job_type}:run")
}

/// `/v1/operations/op-…` from an operation's `name`.
fn op_path(op: &Value) -> String {
    format!("/v1/{}", op["name"].as_str().unwrap())
}

async fn start(h: &H, job_type: &str, parameters: Value) -> Value {
    let r = h
        .post(
            ACME,
            &run_path(job_type),
            json!({ "parameters": parameters }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

/// Read the operation until `ok` holds.
async fn wait_for(h: &H, op: &Value, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + SOON;
    loop {
        let r = h.get(ACME, &op_path(op)).await;
        assert_eq!(r.status, 200, "{}", r.body);
        if ok(&r.body) {
            return r.body;
        }
        assert!(Instant::now() < deadline, "still {}", r.body);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_state(h: &H, op: &Value, state: &str) -> Value {
    wait_for(h, op, |o| o["metadata"]["state"] == state).await
}

fn assert_google_error(r: &Resp, status: u16, name: &str) {
    assert_eq!(r.status.as_u16(), status, "{}", r.body);
    let e = &r.body["error"];
    assert_eq!(e["code"], status, "{}", r.body);
    assert_eq!(e["status"], name, "{}", r.body);
    assert!(!e["message"].as_str().unwrap().is_empty());
    assert!(e["details"][0]["@type"].is_string(), "{}", r.body);
}

#[tokio::test]
async fn aip151_run_is_an_operation_that_ends_with_a_response() {
    let h = aip().await;
    let r = h
        .post(
            ACME,
            &run_path("greet"),
            json!({ "parameters": { "name": "aip" } }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.header("openwop-version").is_none(), "not an OpenWOP host");
    let name = r.body["name"].as_str().unwrap();
    assert!(name.starts_with("operations/op-"), "{name}");
    assert!(!name.contains("acme"), "ids never carry the tenant: {name}");
    let md = &r.body["metadata"];
    assert_eq!(
        md["@type"],
        "type.googleapis.com/openwop.devhost.jobs.v1.RunJobMetadata"
    );
    assert_eq!(md["jobType"], "projects/acme/jobTypes/greet");
    assert!(md["createTime"].is_string());

    let done = wait_for(&h, &r.body, |o| o["done"] == true).await;
    assert_eq!(done["metadata"]["state"], "SUCCEEDED");
    assert!(done["metadata"]["endTime"].is_string());
    assert!(done.get("error").is_none());
    assert_eq!(done["response"]["result"]["text"], "Hello, aip!");
    assert_eq!(
        done["response"]["@type"],
        "type.googleapis.com/openwop.devhost.jobs.v1.RunJobResponse"
    );

    let slow = start(&h, "conformance-delay", json!({ "delayMs": 2000 })).await;
    assert_eq!(slow["done"], false);
    assert_eq!(slow["metadata"]["state"], "RUNNING");
    assert!(slow.get("response").is_none() && slow.get("error").is_none());
}

#[tokio::test]
async fn aip151_failures_carry_a_numeric_code_and_an_error_info() {
    let h = aip().await;
    let op = start(&h, "conformance-failure", json!({})).await;
    let done = wait_for(&h, &op, |o| o["done"] == true).await;
    assert_eq!(done["metadata"]["state"], "FAILED");
    assert_eq!(done["error"]["code"], 2, "UNKNOWN: {done}");
    assert_eq!(done["error"]["message"], "conformance-failure always fails");
    assert_eq!(done["error"]["details"][0]["reason"], "FIXTURE_FAILURE");
    assert!(done.get("response").is_none());
}

#[tokio::test]
async fn aip151_approval_is_a_state_with_metadata_answered_by_approve() {
    let h = aip().await;
    let op = start(&h, "conformance-approval", json!({})).await;
    let waiting = wait_state(&h, &op, "AWAITING_APPROVAL").await;
    assert_eq!(waiting["done"], false);
    let approval = &waiting["metadata"]["approval"];
    assert_eq!(approval["step"], "gate");
    assert_eq!(approval["canReject"], true);
    assert!(approval["message"].is_string(), "{approval}");
    let id = approval["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("i-") && !id.contains('/'), "{id}");

    let approve = format!("{}:approve", op_path(&op));
    let r = h
        .post(ACME, &approve, json!({ "approvalId": "i-stale" }))
        .await;
    assert_google_error(&r, 409, "ABORTED");
    let r = h
        .post(ACME, &approve, json!({ "approvalId": id, "comment": "ok" }))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["name"], op["name"]);
    let done = wait_for(&h, &op, |o| o["done"] == true).await;
    assert_eq!(done["metadata"]["state"], "SUCCEEDED");
    assert!(done["metadata"].get("approval").is_none());
    let r = h.post(ACME, &approve, json!({})).await;
    assert_google_error(&r, 400, "FAILED_PRECONDITION");

    // Without an approvalId the open approval is the one answered; reject fails the job.
    let op = start(&h, "conformance-approval", json!({})).await;
    wait_state(&h, &op, "AWAITING_APPROVAL").await;
    let r = h
        .post(
            ACME,
            &format!("{}:reject", op_path(&op)),
            json!({ "reason": "no" }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let done = wait_for(&h, &op, |o| o["done"] == true).await;
    assert_eq!(done["error"]["code"], 10, "ABORTED: {done}");
    assert_eq!(done["error"]["details"][0]["reason"], "APPROVAL_REJECTED");
}

#[tokio::test]
async fn aip151_input_request_is_answered_by_provide_input() {
    let h = aip().await;
    let op = start(&h, "conformance-clarification", json!({})).await;
    let waiting = wait_state(&h, &op, "AWAITING_INPUT").await;
    let req = &waiting["metadata"]["inputRequest"];
    assert_eq!(req["step"], "ask");
    assert_eq!(req["schema"]["type"], "object");
    assert!(req["schema"]["properties"]["q1"].is_object(), "{req}");
    assert_eq!(req["schema"]["required"], json!(["q1"]));
    assert!(req["message"].as_str().unwrap().contains('?'), "{req}");

    let provide = format!("{}:provideInput", op_path(&op));
    let r = h
        .post(ACME, &provide, json!({ "values": { "q1": 7 } }))
        .await;
    assert_google_error(&r, 400, "INVALID_ARGUMENT");
    assert_eq!(
        r.body["error"]["details"][0]["fieldViolations"][0]["field"],
        "values.q1"
    );
    let r = h
        .post(
            ACME,
            &provide,
            json!({ "inputRequestId": req["id"], "values": { "q1": "blue" } }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let done = wait_for(&h, &op, |o| o["done"] == true).await;
    assert_eq!(done["response"]["result"]["q1"], "blue");

    let op = start(&h, "conformance-clarification", json!({})).await;
    wait_state(&h, &op, "AWAITING_INPUT").await;
    let r = h
        .post(
            ACME,
            &format!("{}:provideInput", op_path(&op)),
            json!({ "decline": true }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let done = wait_for(&h, &op, |o| o["done"] == true).await;
    assert_eq!(
        done["error"]["details"][0]["reason"],
        "CLARIFICATION_DECLINED"
    );
}

#[tokio::test]
async fn aip151_cancel_takes_an_empty_body_and_ends_with_code_1() {
    let h = aip().await;
    let op = start(&h, "conformance-cancellable", json!({})).await;
    let cancel = format!("{}:cancel", op_path(&op));
    // A strict host: the cancel request has no `reason`, so one is refused and the
    // job runs on.
    let r = h.post(ACME, &cancel, json!({ "reason": "stop" })).await;
    assert_google_error(&r, 400, "INVALID_ARGUMENT");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown name \"reason\""),
        "{}",
        r.body
    );
    let still = h.get(ACME, &op_path(&op)).await;
    assert_eq!(still.body["done"], false);

    let r = h.post(ACME, &cancel, json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, json!({}));
    let done = wait_for(&h, &op, |o| o["done"] == true).await;
    assert_eq!(done["error"]["code"], 1, "CANCELLED: {done}");
    assert_eq!(done["metadata"]["state"], "CANCELLED");
    assert_eq!(done["metadata"]["requestedCancellation"], true);
    // An empty body is `{}` too; a finished operation cannot be cancelled.
    let r = h.send(h.http.post(h.url(&cancel)).bearer_auth(ACME)).await;
    assert_google_error(&r, 400, "FAILED_PRECONDITION");
}

#[tokio::test]
async fn aip151_request_id_dedupes_creates_and_idempotency_key_does_not() {
    let h = aip().await;
    let body = json!({
        "requestId": "5f0c6a52-3b8e-4c1d-9a7e-2b4f6d8e0a13",
        "parameters": { "delayMs": 2000 },
    });
    let first = h
        .post(ACME, &run_path("conformance-delay"), body.clone())
        .await;
    let again = h.post(ACME, &run_path("conformance-delay"), body).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(again.body["name"], first.body["name"]);
    // AIP-155: a repeat is recognised by its id alone.
    let other_body = h
        .post(
            ACME,
            &run_path("conformance-noop"),
            json!({ "requestId": "5F0C6A52-3B8E-4C1D-9A7E-2B4F6D8E0A13" }),
        )
        .await;
    assert_eq!(other_body.body["name"], first.body["name"]);
    // Another tenant's identical requestId is another request.
    let globex = h
        .post(
            GLOBEX,
            "/v1/projects/globex/jobTypes/conformance-noop:run",
            json!({ "requestId": "5f0c6a52-3b8e-4c1d-9a7e-2b4f6d8e0a13" }),
        )
        .await;
    assert_eq!(globex.status, 200, "{}", globex.body);
    assert_ne!(globex.body["name"], first.body["name"]);

    let with_key = || {
        h.http
            .post(h.url(&run_path("conformance-noop")))
            .bearer_auth(ACME)
            .header("Idempotency-Key", "aip-idem-key-0123456789abcdef")
            .json(&json!({}))
    };
    let a = h.send(with_key()).await;
    let b = h.send(with_key()).await;
    assert_ne!(a.body["name"], b.body["name"], "no header idempotency here");

    let list = h.get(ACME, "/v1/operations").await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(list.body["operations"].as_array().unwrap().len(), 3);
    assert_eq!(list.body["operations"][2]["name"], first.body["name"]);

    for bad in [
        json!("abc"),
        json!(7),
        json!("00000000-0000-0000-0000-000000000000"),
    ] {
        let r = h
            .post(
                ACME,
                &run_path("conformance-noop"),
                json!({ "requestId": bad }),
            )
            .await;
        assert_google_error(&r, 400, "INVALID_ARGUMENT");
        assert_eq!(
            r.body["error"]["details"][0]["fieldViolations"][0]["field"],
            "requestId"
        );
    }
}

#[tokio::test]
async fn aip151_wait_returns_when_done_or_at_the_timeout() {
    let h = aip().await;
    let op = start(&h, "conformance-delay", json!({ "delayMs": 300 })).await;
    let t0 = Instant::now();
    let r = h
        .post(
            ACME,
            &format!("{}:wait", op_path(&op)),
            json!({ "timeout": "10s" }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["done"], true);
    assert!(t0.elapsed() < Duration::from_secs(5));

    let gate = start(&h, "conformance-approval", json!({})).await;
    let t0 = Instant::now();
    let r = h
        .post(
            ACME,
            &format!("{}:wait", op_path(&gate)),
            json!({ "timeout": "0.3s" }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["done"], false);
    assert_eq!(r.body["metadata"]["state"], "AWAITING_APPROVAL");
    assert!(t0.elapsed() >= Duration::from_millis(300));
    let r = h
        .post(
            ACME,
            &format!("{}:wait", op_path(&gate)),
            json!({ "timeout": 3 }),
        )
        .await;
    assert_google_error(&r, 400, "INVALID_ARGUMENT");
}

#[tokio::test]
async fn aip151_catalog_pages_job_types_with_their_schemas() {
    let h = aip().await;
    let tools = H::new().await.get(ACME, "/tools").await;
    let total = tools.body.as_array().unwrap().len();
    assert!(total > 25, "the fixtures fill more than one page");

    let mut names = Vec::new();
    let mut path = "/v1/projects/acme/jobTypes".to_owned();
    loop {
        let r = h.get(ACME, &path).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let page = r.body["jobTypes"].as_array().unwrap();
        assert!(page.len() <= 25);
        for jt in page {
            names.push(jt["name"].as_str().unwrap().to_owned());
            assert!(jt["parameters"]["type"] == "object", "{jt}");
            assert!(jt["displayName"].is_string() && jt["description"].is_string());
        }
        match r.body["nextPageToken"].as_str() {
            Some(t) => path = format!("/v1/projects/acme/jobTypes?pageToken={t}"),
            None => break,
        }
    }
    assert_eq!(names.len(), total);
    assert!(names.contains(&"projects/acme/jobTypes/greet".to_owned()));

    let r = h
        .get(ACME, "/v1/projects/acme/jobTypes/structured-greeting")
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["result"]["type"], "object");
    let r = h.get(ACME, "/v1/projects/acme/jobTypes/failing_job").await;
    assert_eq!(r.body["labels"]["mcp-task-support"], "required");
    let r = h.get(ACME, "/v1/projects/acme/jobTypes?pageSize=2").await;
    assert_eq!(r.body["jobTypes"].as_array().unwrap().len(), 2);
    let token = r.body["nextPageToken"].as_str().unwrap().to_owned();
    let r = h
        .get(
            GLOBEX,
            &format!("/v1/projects/globex/jobTypes?pageToken={token}"),
        )
        .await;
    assert_google_error(&r, 400, "INVALID_ARGUMENT");
    let r = h.get(ACME, "/v1/projects/acme/jobTypes?pageSize=-1").await;
    assert_google_error(&r, 400, "INVALID_ARGUMENT");
    let r = h.get(ACME, "/v1/projects/acme/jobTypes/nope").await;
    assert_google_error(&r, 404, "NOT_FOUND");
}

#[tokio::test]
async fn aip151_operations_are_the_owners_only() {
    let h = aip().await;
    let op = start(&h, "conformance-cancellable", json!({})).await;
    let r = h.get(GLOBEX, &op_path(&op)).await;
    assert_google_error(&r, 404, "NOT_FOUND");
    let r = h
        .post(GLOBEX, &format!("{}:cancel", op_path(&op)), json!({}))
        .await;
    assert_google_error(&r, 404, "NOT_FOUND");
    assert_eq!(h.get(ACME, &op_path(&op)).await.body["done"], false);
    let r = h.get(GLOBEX, "/v1/operations").await;
    assert_eq!(r.body["operations"], json!([]));
    // A project is the caller's tenant.
    let r = h
        .post(GLOBEX, &run_path("conformance-noop"), json!({}))
        .await;
    assert_google_error(&r, 403, "PERMISSION_DENIED");
    let r = h
        .post(READONLY, &run_path("conformance-noop"), json!({}))
        .await;
    assert_google_error(&r, 403, "PERMISSION_DENIED");
    let r = h.send(h.http.get(h.url(&op_path(&op)))).await;
    assert_google_error(&r, 401, "UNAUTHENTICATED");
    assert!(r.header("www-authenticate").is_some());
}

#[tokio::test]
async fn aip151_refuses_unknown_fields_and_query_parameters() {
    let h = aip().await;
    let r = h
        .post(
            ACME,
            &run_path("conformance-noop"),
            json!({ "workflowId": "conformance-noop" }),
        )
        .await;
    assert_google_error(&r, 400, "INVALID_ARGUMENT");
    let v = &r.body["error"]["details"][0]["fieldViolations"][0];
    assert_eq!(v["field"], "workflowId");
    assert_eq!(
        r.body["error"]["message"],
        "Invalid JSON payload received. Unknown name \"workflowId\": Cannot find field."
    );
    let op = start(&h, "conformance-noop", json!({})).await;
    let r = h.get(ACME, &format!("{}?limit=1", op_path(&op))).await;
    assert_google_error(&r, 400, "INVALID_ARGUMENT");
    assert_eq!(
        h.get(ACME, &format!("{}?prettyPrint=true", op_path(&op)))
            .await
            .status,
        200
    );
    let r = h
        .post(
            ACME,
            &run_path("conformance-delay"),
            json!({ "parameters": { "delayMs": "soon" } }),
        )
        .await;
    assert_eq!(
        r.body["error"]["details"][0]["fieldViolations"][0]["field"],
        "parameters.delayMs"
    );
    let r = h.post(ACME, &run_path("nope"), json!({})).await;
    assert_google_error(&r, 404, "NOT_FOUND");
    for path in [
        "/runs",
        "/.well-known/openwop",
        "/tools",
        "/v1/operations/x:pause",
    ] {
        let r = h.get(ACME, path).await;
        assert_google_error(&r, 404, "NOT_FOUND");
    }
}

#[tokio::test]
async fn aip151_faults_apply_by_route_class() {
    let h = aip().await;
    let op = start(&h, "conformance-noop", json!({})).await;
    let faults = h.host.faults();
    faults.fail_next(RouteClass::GetRun, 1, 503);
    let r = h.get(ACME, &op_path(&op)).await;
    assert_google_error(&r, 503, "UNAVAILABLE");
    assert!(r.header("openwop-version").is_none());
    assert_eq!(h.get(ACME, &op_path(&op)).await.status, 200);
    h.post(ACME, &format!("{}:wait", op_path(&op)), json!({}))
        .await;
    assert_eq!(faults.count(RouteClass::CreateRun), 1);
    assert_eq!(faults.count(RouteClass::GetRun), 2);
    assert_eq!(faults.count(RouteClass::Poll), 1);
    let admin = h.get(ACME, "/_devhost/faults").await;
    assert_eq!(admin.body["counts"]["getRun"], 2);
}

#[tokio::test]
async fn aip151_only_a_listed_approver_may_approve() {
    let h = aip().await;
    let op = start(&h, "conformance-approval-approvers", json!({})).await;
    let waiting = wait_state(&h, &op, "AWAITING_APPROVAL").await;
    assert_eq!(
        waiting["metadata"]["approval"]["eligibleApprovers"],
        json!(["urn:conformance:listed-approver"])
    );
    let approve = format!("{}:approve", op_path(&op));
    let r = h.post(ACME, &approve, json!({})).await;
    assert_google_error(&r, 403, "PERMISSION_DENIED");
    assert_eq!(
        h.get(ACME, &op_path(&op)).await.body["metadata"]["state"],
        "AWAITING_APPROVAL"
    );
    let r = h.post(APPROVER, &approve, json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    wait_state(&h, &op, "SUCCEEDED").await;
}
