//! The k8s flavour serves the same runs as Kubernetes `batch/v1` Jobs (k8s.rs): a Job made
//! under a client-chosen name (a second create of it is `409 AlreadyExists`), its status as
//! counts and a conditions list, `DELETE` that stops it and leaves nothing (`404 NotFound`
//! afterwards), one namespace per tenant, and `Status` errors.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use openwop_devhost::{DevHostConfig, Flavor};
use serde_json::{json, Value};

const JOBS: &str = "/apis/batch/v1/namespaces/acme/jobs";

async fn k8s() -> H {
    H::with(DevHostConfig {
        flavor: Flavor::K8s,
        ..Default::default()
    })
    .await
}

fn job(name: &str, image: &str, env: Value) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": { "name": name, "labels": { "app": "t" } },
        "spec": {
            "backoffLimit": 0,
            "template": { "spec": {
                "restartPolicy": "Never",
                "containers": [{ "name": "job", "image": image, "env": env }]
            } }
        }
    })
}

async fn until(h: &H, name: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = h.get(ACME, &format!("{JOBS}/{name}")).await;
        if pred(&r.body) {
            return r.body;
        }
        assert!(
            Instant::now() < deadline,
            "job {name} never matched: {}",
            r.body
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn a_named_job_runs_its_images_workflow_once_and_a_repeat_is_already_exists() {
    let h = k8s().await;
    let env = json!([{ "name": "name", "value": "Ada" }, { "name": "unrelated", "value": "x" }]);
    let body = job("greet-1", "registry.example/jobs/greet:1.0", env);
    let r = h.post(ACME, JOBS, body.clone()).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["metadata"]["name"], "greet-1");
    assert_eq!(r.body["metadata"]["namespace"], "acme");
    assert_eq!(r.body["spec"]["completions"], 1, "defaults filled in");
    let again = h.post(ACME, JOBS, body).await;
    assert_eq!(again.status, 409);
    assert_eq!(again.body["kind"], "Status");
    assert_eq!(again.body["reason"], "AlreadyExists");
    assert_eq!(again.body["code"], 409);
    assert_eq!(again.body["details"]["name"], "greet-1");
    let done = until(&h, "greet-1", |j| !j["status"]["conditions"].is_null()).await;
    let st = &done["status"];
    assert_eq!(st["conditions"][0]["type"], "Complete");
    assert_eq!(st["conditions"][0]["status"], "True");
    assert_eq!(st["succeeded"], 1);
    assert!(st["completionTime"].is_string() && st["startTime"].is_string());
    let result: Value = serde_json::from_str(
        done["metadata"]["annotations"]["devhost.openwop.dev/result"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(result["text"], "Hello, Ada!");
    let list = h.get(ACME, &format!("{JOBS}?limit=1")).await;
    assert_eq!(list.body["kind"], "JobList");
    assert_eq!(list.body["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_failed_job_says_so_in_its_conditions() {
    let h = k8s().await;
    let r = h
        .post(
            ACME,
            JOBS,
            job(
                "f-1",
                "registry.example/jobs/conformance-failure",
                json!([]),
            ),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let done = until(&h, "f-1", |j| !j["status"]["conditions"].is_null()).await;
    let c = &done["status"]["conditions"][0];
    assert_eq!(c["type"], "Failed");
    assert_eq!(c["reason"], "BackoffLimitExceeded");
    assert!(
        c["message"].as_str().unwrap().contains("always fails"),
        "{c}"
    );
    assert_eq!(done["status"]["failed"], 1);
    assert!(done["status"]["completionTime"].is_null(), "success only");
}

#[tokio::test]
async fn delete_stops_the_job_and_leaves_nothing() {
    let h = k8s().await;
    let image = "registry.example/jobs/conformance-cancellable:1";
    assert_eq!(
        h.post(ACME, JOBS, job("c-1", image, json!([])))
            .await
            .status,
        201
    );
    let running = until(&h, "c-1", |j| j["status"]["active"] == 1).await;
    assert!(running["status"]["conditions"].is_null());
    let del = |q: &str| {
        h.send(
            h.http
                .delete(h.url(&format!("{JOBS}/c-1{q}")))
                .bearer_auth(ACME),
        )
    };
    let bad = del("?propagationPolicy=Sometimes").await;
    assert_eq!(
        (bad.status.as_u16(), bad.body["reason"].clone()),
        (400, json!("BadRequest"))
    );
    let r = del("?propagationPolicy=Background").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "Success");
    let gone = h.get(ACME, &format!("{JOBS}/c-1")).await;
    assert_eq!(
        (gone.status.as_u16(), gone.body["reason"].clone()),
        (404, json!("NotFound"))
    );
    let again = del("?propagationPolicy=Background").await;
    assert_eq!(
        (again.status.as_u16(), again.body["reason"].clone()),
        (404, json!("NotFound"))
    );
    let events = h.host.run_events("c-1");
    assert!(
        events.iter().any(|e| e["type"] == "run.cancelled"),
        "the run stopped"
    );
}

#[tokio::test]
async fn jobs_are_checked_as_the_api_server_checks_them() {
    let h = k8s().await;
    let image = "registry.example/jobs/conformance-noop";
    // Another tenant's namespace.
    let r = h.post(GLOBEX, JOBS, job("n-1", image, json!([]))).await;
    assert_eq!(
        (r.status.as_u16(), r.body["reason"].clone()),
        (403, json!("Forbidden"))
    );
    // Not an RFC 1123 label.
    let r = h.post(ACME, JOBS, job("Bad_Name", image, json!([]))).await;
    assert_eq!(
        (r.status.as_u16(), r.body["reason"].clone()),
        (422, json!("Invalid"))
    );
    // A Job's pods must not restart for ever.
    let mut b = job("n-2", image, json!([]));
    b["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    let r = h.post(ACME, JOBS, b).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .contains("restartPolicy"));
    // An environment value is a string.
    let r = h
        .post(
            ACME,
            JOBS,
            job("n-3", image, json!([{ "name": "x", "value": 5 }])),
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["reason"].clone()),
        (400, json!("BadRequest"))
    );
    // An image no workflow has.
    let r = h
        .post(ACME, JOBS, job("n-4", "registry.example/nope:1", json!([])))
        .await;
    assert_eq!(
        (r.status.as_u16(), r.body["reason"].clone()),
        (422, json!("Invalid"))
    );
    // No credential.
    let r = h.send(h.http.get(h.url(JOBS))).await;
    assert_eq!(
        (r.status.as_u16(), r.body["reason"].clone()),
        (401, json!("Unauthorized"))
    );
    // generateName makes a fresh name.
    let mut b = job("", image, json!([]));
    b["metadata"] = json!({ "generateName": "gen-" });
    let r = h.post(ACME, JOBS, b).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body["metadata"]["name"]
        .as_str()
        .unwrap()
        .starts_with("gen-"));
}
