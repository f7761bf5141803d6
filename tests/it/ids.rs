//! Any host id becomes a reversible, URL-safe taskId (`host.ids.taskId: opaque |
//! sealed`), against the devhost's AIP-151 flavour, whose operation ids
//! (`operations/op-<unix ms>-<16 hex>`) are neither tenant-bound nor 128 bits random. The
//! tasks flow runs through the real sidecar; the host id the getRun and cancel templates
//! received is read from the requests the devhost recorded.

use std::time::Duration;

use openwop_devhost::Flavor;
use openwop_mcp_sidecar::config::Secret;
use openwop_mcp_sidecar::server::Server;
use serde_json::{json, Value};

use crate::support::*;

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

/// The AIP-151 flavour behind the mount with `taskId` as its taskId form. The run is read
/// from its Operation (`name`, `metadata.state`); the tool is static and listRuns points at
/// the devhost's fault switches, as in tests/it/templates.rs.
fn aip151(task_id: &str) -> String {
    format!(
        "host:
  ids: {{ path: raw, taskId: {task_id} }}
  idempotency: {{ bodyField: /requestId }}
  fields:
    createdRunId: /name
    createdStatus: /metadata/state
    runId: /name
    status: /metadata/state
    workflowId: /metadata/jobType
    startedAt: /metadata/createTime
    completedAt: /metadata/endTime
    variables: /response/result
  statuses: {{ PENDING: pending, RUNNING: running, CANCELLING: cancelling, SUCCEEDED: completed, FAILED: failed, CANCELLED: cancelled }}
  routes:
    listRuns: {{ path: /_devhost/faults }}
    createRun: {{ path: '/v1/projects/acme/jobTypes/{{tool}}:run' }}
    getRun: {{ path: '/v1/{{runId}}' }}
    cancelRun: {{ path: '/v1/{{runId}}:cancel' }}
  bodies:
    createRun: {{ parameters: '{{arguments}}' }}
    cancelRun: {{}}
tools:
  source: static
  static:
    - {{ name: cancellable, workflowId: conformance-cancellable, task: must }}
"
    )
}

/// The Azure flavour behind the mount: jobs named by the call's own UUID (`PUT
/// /jobs/{callId}`), `api-version` on every route, the job read by its `name` and `status`.
fn azure(task_id: &str) -> String {
    format!(
        "host:
  ids: {{ path: raw, taskId: {task_id} }}
  fields:
    createdRunId: /name
    createdStatus: /status
    runId: /name
    status: /status
    workflowId: /jobType
    startedAt: /createdDateTime
    completedAt: /completedDateTime
    variables: /result
  statuses: {{ NotStarted: pending, Running: running, Canceling: cancelling, Succeeded: completed, Failed: failed, Canceled: cancelled }}
  routes:
    listRuns: {{ path: '/jobTypes?api-version=2026-01-01' }}
    createRun: {{ method: PUT, path: '/jobs/{{callId}}?api-version=2026-01-01' }}
    getRun: {{ path: '/jobs/{{runId}}?api-version=2026-01-01' }}
    cancelRun: {{ path: '/jobs/{{runId}}/cancel?api-version=2026-01-01' }}
  bodies:
    createRun: {{ jobType: '{{tool}}', parameters: '{{arguments}}' }}
tools:
  source: static
  static:
    - {{ name: cancellable, workflowId: conformance-cancellable, task: must }}
"
    )
}

fn mapping(flavor: Flavor, task_id: &str) -> String {
    match flavor {
        Flavor::Azure => azure(task_id),
        _ => aip151(task_id),
    }
}

async fn devhost() -> openwop_devhost::DevHost {
    devhost_of(Flavor::Aip151).await
}

/// A sidecar in front of the AIP-151 `host` with the given taskId form and state key.
async fn sidecar(host: &openwop_devhost::DevHost, task_id: &str, key: &[u8]) -> Server {
    sidecar_of(Flavor::Aip151, host, task_id, key).await
}

async fn sidecar_of(
    flavor: Flavor,
    host: &openwop_devhost::DevHost,
    task_id: &str,
    key: &[u8],
) -> Server {
    sidecar_with_yaml(host, &mapping(flavor, task_id), |cfg| {
        cfg.mcp.request_state_key = Some(Secret::new(key.to_vec()));
    })
    .await
}

async fn env(task_id: &str) -> Env {
    env_of(Flavor::Aip151, task_id).await
}

async fn env_of(flavor: Flavor, task_id: &str) -> Env {
    env_with_yaml(flavor, &mapping(flavor, task_id), |cfg| {
        cfg.mcp.request_state_key = Some(Secret::new(KEY.to_vec()));
    })
    .await
}

/// The same MCP request against another sidecar.
async fn other(env: &Env, server: &Server) -> Env {
    Env {
        host: devhost().await,
        server: None,
        url: format!("http://{}", server.addr),
        http: env.http.clone(),
    }
}

fn recorded(env: &Env, method: &str, path: &str) -> usize {
    env.host
        .requests()
        .iter()
        .filter(|r| r.method == method && r.path == path)
        .count()
}

/// The one operation the host holds (its `name`, the host id).
async fn only_operation(env: &Env) -> String {
    let r = env
        .http
        .get(format!("{}/v1/operations", env.host.base_url()))
        .bearer_auth(A)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    let ops = v["operations"].as_array().cloned().unwrap_or_default();
    assert_eq!(ops.len(), 1, "{v}");
    ops[0]["name"].as_str().unwrap().to_string()
}

/// A task on the AIP-151 host survives the round trip: the taskId issued for the operation is
/// URL-safe, `tasks/get` and `tasks/cancel` reach `/v1/operations/op-…` with the host's id
/// as it wrote it (`path: raw`), and the task ends cancelled.
async fn round_trip(form: &str) -> (Env, String, String) {
    let env = env(form).await;
    let task = tasked(&env, A, "cancellable", json!({"delayMs": 20000})).await;
    let op = only_operation(&env).await;
    assert!(op.starts_with("operations/op-"), "{op}");
    assert!(
        task.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "URL-safe: {task}"
    );
    let g = env.task_rpc(A, "tasks/get", &task).await;
    assert_eq!(g.result()["taskId"], task.as_str(), "{}", g.text);
    assert_eq!(g.result()["status"], "working", "{}", g.text);
    assert!(
        recorded(&env, "GET", &format!("/v1/{op}")) >= 1,
        "getRun received the host id: {:?}",
        env.host.requests()
    );
    let c = env.task_rpc(A, "tasks/cancel", &task).await;
    assert!(c.body.get("error").is_none(), "{}", c.text);
    assert_eq!(recorded(&env, "POST", &format!("/v1/{op}:cancel")), 1);
    let done = env
        .poll_task(A, &task, |r| r["status"] == "cancelled", 10)
        .await;
    assert_eq!(done["result"]["taskId"], task.as_str(), "{done}");
    (env, task, op)
}

#[tokio::test]
async fn an_opaque_task_id_carries_an_aip151_operation_name_there_and_back() {
    let (env, task, op) = round_trip("opaque").await;
    // base64url of the host's id: reversible by anyone, so the host's own ownership check is
    // what keeps another caller out (check-config warns about this form).
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    assert_eq!(task, b64.encode(&op));
    let g = env.task_rpc(B, "tasks/get", &task).await;
    assert_eq!(g.error_code(), Some(-32602), "{}", g.text);
    env.shutdown().await;
}

#[tokio::test]
async fn a_sealed_task_id_opens_for_its_caller_on_any_replica_with_the_key_and_nowhere_else() {
    let (env, task, op) = round_trip("sealed").await;
    assert!(!task.contains("op-"), "the host id is not readable: {task}");
    // A task that does not exist, asked for the same way: the answer every refusal below
    // must match byte for byte.
    let missing = env
        .task_rpc(A, "tasks/get", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        .await;
    assert_eq!(missing.error_code(), Some(-32602), "{}", missing.text);

    // Another caller: refused without a host call, like a missing task.
    let before = recorded(&env, "GET", &format!("/v1/{op}"));
    let b = env.task_rpc(B, "tasks/get", &task).await;
    assert_eq!((b.status, &b.text), (missing.status, &missing.text));
    assert_eq!(recorded(&env, "GET", &format!("/v1/{op}")), before);

    // A flipped byte, a truncation, another spelling: the same bytes as a missing task.
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut raw = b64.decode(&task).unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 1;
    for bad in [
        b64.encode(&raw),
        task[..task.len() - 1].to_string(),
        format!("{task}="),
        task.to_lowercase(),
    ] {
        let r = env.task_rpc(A, "tasks/get", &bad).await;
        assert_eq!(
            (r.status, &r.text),
            (missing.status, &missing.text),
            "{bad}"
        );
        let r = env.task_rpc(A, "tasks/cancel", &bad).await;
        assert_eq!(
            (r.status, &r.text),
            (missing.status, &missing.text),
            "{bad}"
        );
    }

    // A second sidecar with the same key (another replica) opens it; one with another key
    // answers exactly as for a missing task.
    let same = sidecar(&env.host, "sealed", KEY).await;
    let replica = other(&env, &same).await;
    let g = replica.task_rpc(A, "tasks/get", &task).await;
    assert_eq!(g.result()["taskId"], task.as_str(), "{}", g.text);
    assert_eq!(g.result()["status"], "cancelled", "{}", g.text);
    let foreign = sidecar(&env.host, "sealed", b"another-state-key-0123456789abcd").await;
    let stranger = other(&env, &foreign).await;
    let f = stranger.task_rpc(A, "tasks/get", &task).await;
    assert_eq!((f.status, &f.text), (missing.status, &missing.text));
    same.shutdown().await;
    foreign.shutdown().await;
    replica.host.shutdown().await;
    stranger.host.shutdown().await;
    env.shutdown().await;
}

#[tokio::test]
async fn the_default_task_id_still_needs_a_tenant_bound_id_so_other_shapes_name_nothing() {
    // The tilde form is OpenWOP's: the projection of `<tenant>/<16+ chars>`. An Azure job name,
    // a UUID or a short operation name is not one, so it is "task not found" without a host
    // call. (An AIP-151 operation name does fit the grammar, `operations` standing where the
    // tenant would; its ids are not 128 bits random, which is why such a host wants `sealed`.)
    let env = env("tilde").await;
    for id in [
        "job-7",
        "5d1e7c0a-9b2f-4c3d-8e4f-a1b2c3d4e5f6",
        "operations~2Fop-1",
    ] {
        let r = env.task_rpc(A, "tasks/get", id).await;
        assert_eq!(r.error_code(), Some(-32602), "{id}: {}", r.text);
    }
    assert!(
        !env.host
            .requests()
            .iter()
            .any(|q| q.path.starts_with("/v1/")),
        "{:?}",
        env.host.requests()
    );
    env.shutdown().await;
}

#[tokio::test]
async fn an_azure_job_name_survives_the_round_trip_in_both_forms() {
    for form in ["opaque", "sealed"] {
        let env = env_of(Flavor::Azure, form).await;
        let task = tasked(&env, A, "cancellable", json!({"delayMs": 20000})).await;
        let puts: Vec<_> = env
            .host
            .requests()
            .into_iter()
            .filter(|r| r.method == "PUT")
            .collect();
        assert_eq!(puts.len(), 1, "{form}");
        let job = puts[0].path.strip_prefix("/jobs/").unwrap().to_string();
        let g = env.task_rpc(A, "tasks/get", &task).await;
        assert_eq!(g.result()["status"], "working", "{form}: {}", g.text);
        assert!(
            recorded(&env, "GET", &format!("/jobs/{job}")) >= 1,
            "{form}"
        );
        let c = env.task_rpc(A, "tasks/cancel", &task).await;
        assert!(c.body.get("error").is_none(), "{form}: {}", c.text);
        assert_eq!(recorded(&env, "POST", &format!("/jobs/{job}/cancel")), 1);
        let done = env
            .poll_task(A, &task, |r| r["status"] == "cancelled", 10)
            .await;
        assert_eq!(done["result"]["taskId"], task.as_str(), "{form}: {done}");
        // Another tenant's caller: the host's 404 (opaque) or the seal (sealed) keeps it out.
        let b = env.task_rpc(B, "tasks/get", &task).await;
        assert_eq!(b.error_code(), Some(-32602), "{form}: {}", b.text);
        env.shutdown().await;
    }
}

#[tokio::test]
async fn a_listen_follows_a_sealed_task_and_acknowledges_no_one_elses() {
    // The AIP-151 host has no event stream: the listen opens the taskId, finds no stream for
    // the operation and follows it by reading, with the same taskId in every notification.
    let env = env("sealed").await;
    let task = tasked(&env, A, "cancellable", json!({"delayMs": 20000})).await;
    let other = tasked(&env, A, "cancellable", json!({"delayMs": 20000})).await;
    let (env2, t2) = (&env, task.clone());
    let cancel = async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        env2.task_rpc(A, "tasks/cancel", &t2).await
    };
    let (messages, c) = tokio::join!(
        env.listen(A, vec![task.clone()], Duration::from_secs(4)),
        cancel
    );
    assert!(c.body.get("error").is_none(), "{}", c.text);
    assert_eq!(
        messages[0]["params"]["notifications"]["taskIds"],
        json!([task]),
        "{messages:?}"
    );
    let notes: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/tasks")
        .collect();
    assert!(
        notes.iter().all(|n| n["params"]["taskId"] == task.as_str()),
        "{notes:?}"
    );
    assert_eq!(
        notes.last().map(|n| n["params"]["status"].clone()),
        Some(json!("cancelled")),
        "{notes:?}"
    );
    // Another caller's listen acknowledges neither of this caller's sealed tasks.
    let b = env
        .listen(
            B,
            vec![task.clone(), other.clone()],
            Duration::from_millis(300),
        )
        .await;
    assert_eq!(
        b[0]["params"]["notifications"]["taskIds"],
        json!([]),
        "{b:?}"
    );
    env.task_rpc(A, "tasks/cancel", &other).await;
    env.shutdown().await;
}
