//! A job API with no catalog, no idempotency key and a client-chosen name: the devhost's
//! Kubernetes `batch/v1` Jobs flavour through config/kubernetes.example.yaml. The tools come
//! from the operator's catalog file (and follow its edits), each Job carries its tool's
//! catalog entry, a create is repeated only under its name (so a lost answer or a repeat is
//! the same Job, never a second), a create whose request went away is found by name and
//! deleted, and a cancel answered "not found" is done at once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use openwop_devhost::{DevHost, Flavor, RouteClass};
use openwop_mcp_sidecar::config::{Config, Secret};
use openwop_mcp_sidecar::server::{ConfigSource, Server};
use serde_json::{json, Value};

use crate::support::fault::cancel_outcome;
use crate::support::*;

const OUTCOMES: [&str; 4] = ["cancelled", "already_terminal", "refused", "gave_up"];

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/kubernetes.example.yaml")
}

/// The example and its catalog file copied into a folder of their own, `edit` applied to the
/// configuration's text; the path of the copied configuration.
fn copied(tag: &str, edit: impl FnOnce(String) -> String) -> PathBuf {
    let dir = scratch_dir(tag);
    let src = example();
    let text = std::fs::read_to_string(&src).unwrap();
    std::fs::write(dir.join("kubernetes.example.yaml"), edit(text)).unwrap();
    std::fs::create_dir_all(dir.join("catalogs")).unwrap();
    std::fs::copy(
        src.parent().unwrap().join("catalogs/kubernetes-jobs.yaml"),
        dir.join("catalogs/kubernetes-jobs.yaml"),
    )
    .unwrap();
    dir.join("kubernetes.example.yaml")
}

/// The devhost's k8s flavour and the sidecar loaded from `path` (reloadable), with the
/// suites' timings.
async fn k8s_env(path: &Path, f: impl FnOnce(&mut Config)) -> Env {
    let host = devhost_of(Flavor::K8s).await;
    let overrides = openwop_mcp_sidecar::config::Overrides {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream: Some(host.base_url()),
    };
    let mut cfg = Config::load(path, &overrides)
        .unwrap_or_else(|e| panic!("{} is valid: {e}", path.display()));
    cfg.mcp.request_state_key = Some(Secret::new(SUITE_STATE_KEY.to_vec()));
    cfg.mcp.sse_keepalive = Duration::from_millis(200);
    cfg.ownership.cancel_deadline = Duration::from_secs(5);
    cfg.shutdown.drain_timeout = Duration::from_secs(2);
    f(&mut cfg);
    let source = ConfigSource {
        path: path.to_path_buf(),
        overrides,
    };
    let server = Server::start_with_source(cfg, Some(source))
        .await
        .expect("sidecar starts");
    Env::new(host, server)
}

/// acme's Jobs as the API server lists them.
async fn jobs(env: &Env) -> Vec<Value> {
    env.host_get(A, "/apis/batch/v1/namespaces/acme/jobs").await["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn requests(host: &DevHost, method: &str, suffix: &str) -> usize {
    host.requests()
        .iter()
        .filter(|r| r.method == method && r.path.ends_with(suffix))
        .count()
}

/// How the owed cancel of a create whose request went away ended (its metric), once it has.
async fn lost_create_outcome(env: &Env, within: Duration) -> Option<String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let m = env.metrics().await;
        for o in OUTCOMES {
            let sample = format!(
                "openwop_sidecar_owned_run_cancels_total{{phase=\"lost_create\",outcome=\"{o}\"}} "
            );
            if sample_value(&m, &sample) > 0.0 {
                return Some(o.to_string());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn tool_names(env: &Env) -> Vec<String> {
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_catalog_file_is_the_tool_list_and_each_job_carries_its_tools_entry() {
    let env = k8s_env(&example(), |_| {}).await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    let tools = r.result()["tools"].as_array().unwrap().clone();
    let greet = tools.iter().find(|t| t["name"] == "greet").expect("greet");
    assert_eq!(greet["inputSchema"]["required"], json!(["name"]));
    assert_eq!(greet["description"], "Returns 'Hello, <name>!'.");
    let call = env
        .call(A, "greet", json!({"name": "Ada"}), json!({}))
        .await;
    assert_eq!(call.result()["isError"], false, "{}", call.text);
    // The Job runs the image the catalog entry names, with the argument in its environment.
    let job = &jobs(&env).await[0];
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example/openwop/greet:1.0");
    assert_eq!(container["env"], json!([{"name": "name", "value": "Ada"}]));
    assert_eq!(job["metadata"]["labels"]["openwop.dev/tool"], "greet");
    env.shutdown().await;
}

#[tokio::test]
async fn an_edit_to_the_catalog_file_is_served_after_the_reload_poll() {
    let path = copied("k8s-catalog", |t| {
        format!("{t}\nreload:\n  pollIntervalMs: 100\n")
    });
    let env = k8s_env(&path, |_| {}).await;
    assert!(tool_names(&env).await.contains(&"greet".to_string()));
    let catalog = path.parent().unwrap().join("catalogs/kubernetes-jobs.yaml");
    let text = std::fs::read_to_string(&catalog).unwrap();
    // The operator adds a job type and removes one; the configuration file is untouched.
    let edited = text.replace("  - name: greet\n", "  - name: hello\n")
        + "  - name: slow-noop\n    description: The no-op, once more.\n    image: registry.example/openwop/conformance-noop:2.0\n";
    std::fs::write(&catalog, edited).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let names = loop {
        let names = tool_names(&env).await;
        if names.contains(&"slow-noop".to_string()) || tokio::time::Instant::now() > deadline {
            break names;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(names.contains(&"slow-noop".to_string()), "{names:?}");
    assert!(!names.contains(&"greet".to_string()), "{names:?}");
    // The new entry's template is what its Job runs.
    let call = env.call(A, "slow-noop", json!({}), json!({})).await;
    assert_eq!(call.result()["isError"], false, "{}", call.text);
    let image = jobs(&env).await[0]["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    assert_eq!(image, "registry.example/openwop/conformance-noop:2.0");
    // A broken catalog file is refused like a broken configuration: the last good one serves.
    std::fs::write(&catalog, "jobTypes: [\n").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(tool_names(&env).await.contains(&"slow-noop".to_string()));
    env.shutdown().await;
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}

#[tokio::test]
async fn a_lost_create_answer_is_settled_by_name_as_the_same_job() {
    let env = k8s_env(&example(), |_| {}).await;
    // Warm the catalog so the fault meets the create.
    tool_names(&env).await;
    // The Job is made, but its answer arrives cut short.
    env.host.faults().bad_json_next(RouteClass::CreateRun, 1);
    let call = env.call(A, "conformance-delay", json!({}), json!({})).await;
    assert_eq!(call.result()["isError"], false, "{}", call.text);
    let all = jobs(&env).await;
    assert_eq!(all.len(), 1, "one Job, not a second: {all:#?}");
    // Sent again only under the same name, which the host refused to make twice, and read
    // back by that name.
    let name = all[0]["metadata"]["name"].as_str().unwrap();
    let creates: Vec<Value> = env
        .host
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/jobs"))
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["metadata"]["name"].clone())
        .collect();
    assert!(creates.iter().all(|n| n == name), "{creates:?}");
    assert!(requests(&env.host, "GET", &format!("/jobs/{name}")) >= 1);
    env.shutdown().await;
}

#[tokio::test]
async fn a_create_repeated_after_a_timeout_finds_its_name_taken_and_runs_on_that_job() {
    // The create's answer is held past the route's timeout: the create is sent again under
    // the same name, the host says the name is taken, and the call goes on with that Job.
    let path = copied("k8s-timeout", |t| {
        t.replace(
            "createRun: { path: /apis/batch/v1/namespaces/acme/jobs }",
            "createRun: { path: /apis/batch/v1/namespaces/acme/jobs, timeoutMs: 300 }",
        )
    });
    let env = k8s_env(&path, |_| {}).await;
    tool_names(&env).await;
    env.host
        .faults()
        .delay(RouteClass::CreateRun, Duration::from_millis(500));
    let r = env
        .call(A, "conformance-cancellable", json!({}), task_caps())
        .await;
    env.host.faults().clear();
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    let all = jobs(&env).await;
    assert_eq!(all.len(), 1, "one Job for every attempt: {all:#?}");
    let name = all[0]["metadata"]["name"].as_str().unwrap().to_string();
    assert!(
        requests(&env.host, "POST", "/jobs") >= 2,
        "the create was repeated"
    );
    let task = r.result()["taskId"].as_str().unwrap();
    assert_eq!(sealed_run_of(A, task), name, "the task is that Job");
    let c = env.task_rpc(A, "tasks/cancel", task).await;
    assert_eq!(c.result(), &json!({"resultType": "complete"}), "{}", c.text);
    assert!(jobs(&env).await.is_empty(), "cancel deleted the Job");
    env.shutdown().await;
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}

#[tokio::test]
async fn a_named_create_whose_request_is_gone_is_found_by_name_and_deleted() {
    let env = k8s_env(&example(), |_| {}).await;
    tool_names(&env).await;
    // The Job is made at once; its answer is held, and the client leaves meanwhile.
    env.host
        .faults()
        .delay(RouteClass::CreateRun, Duration::from_millis(1500));
    let body = body_of(
        1,
        "tools/call",
        json!({"name": "conformance-cancellable", "arguments": {}}),
        json!({}),
    );
    let s = raw_post(&env, &body, "application/json", A).await;
    let mut made = Vec::new();
    for _ in 0..100 {
        made = jobs(&env).await;
        if !made.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let name = made[0]["metadata"]["name"].as_str().unwrap().to_string();
    drop(s);
    let outcome = lost_create_outcome(&env, Duration::from_secs(8)).await;
    env.host.faults().clear();
    assert_eq!(outcome.as_deref(), Some("cancelled"));
    assert!(jobs(&env).await.is_empty(), "the orphan was deleted");
    assert_eq!(requests(&env.host, "DELETE", &format!("/jobs/{name}")), 1);
    assert_eq!(
        requests(&env.host, "POST", "/jobs"),
        1,
        "never created again"
    );
    let events = env.host.run_events(&name);
    assert!(
        events.iter().any(|e| e["type"] == "run.cancelled"),
        "its run was stopped"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn a_cancel_answered_not_found_means_the_job_already_ended_and_is_not_retried() {
    let env = k8s_env(&example(), |_| {}).await;
    tool_names(&env).await;
    let body = body_of(
        1,
        "tools/call",
        json!({"name": "conformance-cancellable", "arguments": {}}),
        json!({}),
    );
    let s = raw_post(&env, &body, "application/json", A).await;
    let mut made = Vec::new();
    for _ in 0..100 {
        made = jobs(&env).await;
        if !made.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let name = made[0]["metadata"]["name"].as_str().unwrap().to_string();
    // The Job is gone by the time the owed cancel arrives (another client deleted it).
    env.host.faults().fail_next(RouteClass::Cancel, 5, 404);
    drop(s);
    let outcome = cancel_outcome(&env, &OUTCOMES, Duration::from_secs(6)).await;
    assert_eq!(
        outcome.map(|(o, _)| o).as_deref(),
        Some("already_terminal"),
        "cancelRun.alreadyEnded: 404 NotFound is done"
    );
    assert_eq!(
        requests(&env.host, "DELETE", &format!("/jobs/{name}")),
        1,
        "one DELETE, no retry"
    );
    env.host.faults().clear();
    env.shutdown().await;
}

#[tokio::test]
async fn a_cancel_answered_with_a_routes_ended_code_is_acknowledged_and_sent_once() {
    // A host whose cancel of a run that already ended answers a 5xx with a code of its own:
    // the route says so, and the answer is final, not a fault to retry.
    let path = copied("k8s-ended-5xx", |t| {
        t.replace(
            "        - { status: 404, code: NotFound }\n",
            "        - { status: 404, code: NotFound }\n        - { status: 500, code: InternalError }\n",
        )
    });
    let env = k8s_env(&path, |_| {}).await;
    tool_names(&env).await;
    let r = env
        .call(A, "conformance-cancellable", json!({}), task_caps())
        .await;
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let name = sealed_run_of(A, &task);
    env.host.faults().fail_next(RouteClass::Cancel, 3, 500);
    let c = env.task_rpc(A, "tasks/cancel", &task).await;
    assert_eq!(c.result(), &json!({"resultType": "complete"}), "{}", c.text);
    assert_eq!(
        requests(&env.host, "DELETE", &format!("/jobs/{name}")),
        1,
        "not retried"
    );
    // Without the rule the same answer is a host fault, retried and then -32603.
    env.host.faults().clear();
    env.shutdown().await;
    std::fs::remove_dir_all(path.parent().unwrap()).ok();

    let env = k8s_env(&example(), |_| {}).await;
    tool_names(&env).await;
    let r = env
        .call(A, "conformance-cancellable", json!({}), task_caps())
        .await;
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let name = sealed_run_of(A, &task);
    env.host.faults().fail_next(RouteClass::Cancel, 3, 500);
    let c = env.task_rpc(A, "tasks/cancel", &task).await;
    assert_eq!(c.error_code(), Some(-32603), "{}", c.text);
    assert!(requests(&env.host, "DELETE", &format!("/jobs/{name}")) > 1);
    env.host.faults().clear();
    env.shutdown().await;
}

#[tokio::test]
async fn a_named_create_that_cannot_be_settled_fails_and_its_job_is_deleted() {
    // Every create answer is held past the route's timeout and every read by name fails:
    // the call fails, and once the host reads again the Job is found by name and deleted.
    let path = copied("k8s-unsettled", |t| {
        t.replace(
            "createRun: { path: /apis/batch/v1/namespaces/acme/jobs }",
            "createRun: { path: /apis/batch/v1/namespaces/acme/jobs, timeoutMs: 200 }",
        )
    });
    let env = k8s_env(&path, |_| {}).await;
    tool_names(&env).await;
    let f = env.host.faults();
    f.delay(RouteClass::CreateRun, Duration::from_millis(400));
    f.fail_next(RouteClass::GetRun, 1000, 500);
    let r = env
        .call(A, "conformance-cancellable", json!({}), json!({}))
        .await;
    assert_eq!(r.error_code(), Some(-32603), "{}", r.text);
    env.host.faults().clear();
    let outcome = lost_create_outcome(&env, Duration::from_secs(6)).await;
    assert_eq!(outcome.as_deref(), Some("cancelled"));
    assert!(
        jobs(&env).await.is_empty(),
        "no Job outlives the failed call"
    );
    env.shutdown().await;
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
}
