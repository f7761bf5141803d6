//! The argo flavour serves the same runs as Argo Workflows' REST API (argo.rs): templates
//! whose inputs are a parameter list, a submit taking `"key=value"` arguments (a required
//! one missing is a 400), approvals as a running `Suspend` node while the workflow stays
//! `Running`, resume and stop by node field selector, outputs as `[{name, value}]`, one
//! namespace per tenant, and the gateway's `{code, message}` errors.

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

const WF: &str = "/api/v1/workflows/acme";

async fn argo() -> H {
    H::with(DevHostConfig {
        flavor: Flavor::Argo,
        ..Default::default()
    })
    .await
}

fn submit(template: &str, params: &[&str]) -> Value {
    json!({
        "resourceKind": "WorkflowTemplate",
        "resourceName": template,
        "submitOptions": { "parameters": params },
    })
}

async fn put(h: &H, key: &str, path: &str, body: Value) -> Resp {
    h.send(h.http.put(h.url(path)).bearer_auth(key).json(&body))
        .await
}

async fn until(h: &H, name: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = h.get(ACME, &format!("{WF}/{name}")).await;
        if pred(&r.body) {
            return r.body;
        }
        assert!(
            Instant::now() < deadline,
            "workflow {name} never matched: {}",
            r.body
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The running Suspend nodes of a workflow.
fn suspended(wf: &Value) -> Vec<Value> {
    wf["status"]["nodes"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, n)| n.clone())
        .filter(|n| n["type"] == "Suspend" && n["phase"] == "Running")
        .collect()
}

#[tokio::test]
async fn templates_declare_inputs_as_a_parameter_list_with_required_ones_valueless() {
    let h = argo().await;
    let r = h.get(ACME, "/api/v1/workflow-templates/acme").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let items = r.body["items"].as_array().unwrap();
    let delay = items
        .iter()
        .find(|t| t["metadata"]["name"] == "conformance-delay")
        .expect("a template per workflow");
    let params = delay["spec"]["arguments"]["parameters"].as_array().unwrap();
    let p = params.iter().find(|p| p["name"] == "delayMs").unwrap();
    assert_eq!(p["value"], "1000", "the default, as a string");
    assert!(delay["metadata"]["annotations"]["workflows.argoproj.io/title"].is_string());
    let greet = items
        .iter()
        .find(|t| t["metadata"]["name"] == "greet")
        .unwrap();
    let name = &greet["spec"]["arguments"]["parameters"][0];
    assert_eq!(name["name"], "name");
    assert!(name.get("value").is_none(), "required: no value: {name}");
    let other = h.get(ACME, "/api/v1/workflow-templates/globex").await;
    assert_eq!(other.status, 403);
    assert_eq!(other.body["code"], 7);
}

#[tokio::test]
async fn a_submit_reads_key_value_strings_per_type_and_refuses_a_missing_required_one() {
    let h = argo().await;
    let missing = h
        .post(ACME, &format!("{WF}/submit"), submit("greet", &[]))
        .await;
    assert_eq!(missing.status, 400, "{}", missing.body);
    assert_eq!(missing.body["code"], 3);
    assert_eq!(
        missing.body["message"],
        "spec.arguments.name.value is required"
    );
    let bad = h
        .post(ACME, &format!("{WF}/submit"), submit("greet", &["name"]))
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);

    let r = h
        .post(
            ACME,
            &format!("{WF}/submit"),
            submit("structured-greeting", &["name=Ada=Lovelace", "delayMs=0"]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let name = r.body["metadata"]["name"].as_str().unwrap().to_owned();
    assert_eq!(
        r.body["metadata"]["labels"]["workflows.argoproj.io/workflow-template"],
        "structured-greeting"
    );
    let done = until(&h, &name, |w| w["status"]["phase"] == "Succeeded").await;
    let outs = done["status"]["outputs"]["parameters"].as_array().unwrap();
    let greeting = outs
        .iter()
        .find(|p| {
            p["value"]
                .as_str()
                .is_some_and(|v| v.contains("Ada=Lovelace"))
        })
        .expect("the greeting among the outputs");
    assert!(greeting["name"].is_string(), "{done}");
    // A number arrives as its text and is read as a number: a 300 ms delay, not the default.
    let t0 = Instant::now();
    let r = h
        .post(
            ACME,
            &format!("{WF}/submit"),
            submit("conformance-delay", &["delayMs=300"]),
        )
        .await;
    let name = r.body["metadata"]["name"].as_str().unwrap().to_owned();
    until(&h, &name, |w| w["status"]["phase"] == "Succeeded").await;
    assert!(
        t0.elapsed() < Duration::from_millis(900),
        "{:?}",
        t0.elapsed()
    );
}

#[tokio::test]
async fn a_chosen_name_is_taken_once_and_another_namespace_is_forbidden() {
    let h = argo().await;
    let mut body = submit("conformance-noop", &[]);
    body["submitOptions"]["name"] = json!("mcp-one");
    body["submitOptions"]["labels"] = json!("openwop.dev/call=c1");
    let r = h.post(ACME, &format!("{WF}/submit"), body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["metadata"]["labels"]["openwop.dev/call"], "c1");
    let again = h.post(ACME, &format!("{WF}/submit"), body.clone()).await;
    assert_eq!(again.status, 409);
    assert_eq!(again.body["code"], 6);
    let theirs = h.post(GLOBEX, &format!("{WF}/submit"), body.clone()).await;
    assert_eq!(theirs.status, 403);
    let read = h.get(GLOBEX, "/api/v1/workflows/globex/mcp-one").await;
    assert_eq!(
        read.status, 404,
        "another namespace's workflow is not there"
    );
    assert_eq!(read.body["code"], 5);
    let anon = h.get("nope", &format!("{WF}/mcp-one")).await;
    assert_eq!(anon.status, 401);
}

#[tokio::test]
async fn an_approval_is_a_running_suspend_node_resumed_by_its_id() {
    let h = argo().await;
    let r = h
        .post(
            ACME,
            &format!("{WF}/submit"),
            submit("conformance-approval", &[]),
        )
        .await;
    let name = r.body["metadata"]["name"].as_str().unwrap().to_owned();
    let waiting = until(&h, &name, |w| !suspended(w).is_empty()).await;
    assert_eq!(waiting["status"]["phase"], "Running");
    let node = &suspended(&waiting)[0];
    let id = node["id"].as_str().unwrap();
    assert!(id.starts_with(&format!("{name}-")), "{id}");
    let path = format!("{WF}/{name}/resume");
    let wrong = put(&h, ACME, &path, json!({ "nodeFieldSelector": "id=nope" })).await;
    assert_eq!(wrong.status, 400, "{}", wrong.body);
    assert_eq!(wrong.body["code"], 9);
    let ok = put(
        &h,
        ACME,
        &path,
        json!({ "nodeFieldSelector": format!("id={id}") }),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    until(&h, &name, |w| w["status"]["phase"] == "Succeeded").await;
    let again = put(
        &h,
        ACME,
        &path,
        json!({ "nodeFieldSelector": format!("id={id}") }),
    )
    .await;
    assert_eq!(again.status, 400, "an answered gate is answered once");
}

#[tokio::test]
async fn stop_on_a_node_rejects_it_and_stop_or_terminate_ends_the_workflow() {
    let h = argo().await;
    let r = h
        .post(
            ACME,
            &format!("{WF}/submit"),
            submit("conformance-approval", &[]),
        )
        .await;
    let name = r.body["metadata"]["name"].as_str().unwrap().to_owned();
    let waiting = until(&h, &name, |w| !suspended(w).is_empty()).await;
    let id = suspended(&waiting)[0]["id"].as_str().unwrap().to_owned();
    let stop = put(
        &h,
        ACME,
        &format!("{WF}/{name}/stop"),
        json!({ "nodeFieldSelector": format!("id={id}"), "message": "no" }),
    )
    .await;
    assert_eq!(stop.status, 200, "{}", stop.body);
    let failed = until(&h, &name, |w| w["status"]["phase"] == "Failed").await;
    assert!(failed["status"]["message"].is_string(), "{failed}");

    let r = h
        .post(
            ACME,
            &format!("{WF}/submit"),
            submit("conformance-cancellable", &[]),
        )
        .await;
    let name = r.body["metadata"]["name"].as_str().unwrap().to_owned();
    let t = put(&h, ACME, &format!("{WF}/{name}/terminate"), json!({})).await;
    assert_eq!(t.status, 200, "{}", t.body);
    let ended = until(&h, &name, |w| w["status"]["phase"] == "Failed").await;
    assert_eq!(ended["spec"]["shutdown"], "Terminate");
    assert_eq!(
        ended["status"]["message"],
        "Stopped with strategy 'Terminate'"
    );
    let late = put(&h, ACME, &format!("{WF}/{name}/terminate"), json!({})).await;
    assert_eq!(late.status, 500, "{}", late.body);
    assert_eq!(late.body["code"], 13);
    assert_eq!(late.body["message"], "cannot shutdown a completed workflow");
}

#[tokio::test]
async fn a_failed_workflow_says_why_in_its_message() {
    let h = argo().await;
    let r = h
        .post(
            ACME,
            &format!("{WF}/submit"),
            submit("conformance-failure", &[]),
        )
        .await;
    let name = r.body["metadata"]["name"].as_str().unwrap().to_owned();
    let failed = until(&h, &name, |w| w["status"]["phase"] == "Failed").await;
    assert_eq!(
        failed["status"]["message"],
        "conformance-failure always fails"
    );
    assert!(failed["spec"].get("shutdown").is_none());
}
